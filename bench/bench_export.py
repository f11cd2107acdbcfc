#!/usr/bin/env python3
"""Time and memory of `graphcmp export` (vis, vis-db, model-explorer) on one comparison report.

Each target runs in its own process: the report is loaded, the peak-RSS counter is reset
(Linux ``/proc/self/clear_refs``), the export runs, and the script prints the export's wall and CPU
time (user + system: what a busy, shared machine does not inflate; it includes a process the export forks,
whose share is printed too), the time to load the result before it, the output size and how far the
resident set grew above the loaded report during the export. A streaming export stays far below the size of
the report in memory. Run it with ``PYTHONPATH=<another tree>`` to time that tree (the children inherit the
environment).

Usage::

    S=../shared/data/msprobe/dumps/tf_big/statistics/baseline/step0/rank0
    .venv/bin/python bench/make_synthetic.py --source $S \\
        --nodes 200000 --out /tmp/synth200k
    .venv/bin/graphcmp compare /tmp/synth200k/npu /tmp/synth200k/bench -o /tmp/synth200k/cmp.npz -q
    .venv/bin/python bench/bench_export.py /tmp/synth200k/cmp.npz --out /tmp/synth200k/export [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {"vis": "out.vis", "vis-db": "out.vis.db", "model-explorer": "model_explorer"}


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's ended children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_one(report_path: str, target: str, out_dir: str) -> dict:
    """Load the report, export it to `target`, and measure (runs inside the child process)."""
    from graphcmp.core.export.model_explorer import write_model_explorer
    from graphcmp.core.export.vis import write_vis
    from graphcmp.core.export.vis_db import write_vis_db
    from graphcmp.core.report import load_report

    start, cpu = time.perf_counter(), time.process_time()
    report = load_report(report_path)
    load_s, load_cpu = time.perf_counter() - start, time.process_time() - cpu
    rss_loaded = _status_kb("VmRSS")
    exact_peak = _reset_peak()
    out = Path(out_dir) / TARGETS[target]
    writer = {"vis": write_vis, "vis-db": write_vis_db, "model-explorer": write_model_explorer}[target]
    cpu, forked = time.process_time(), _children_cpu()
    result = writer(report, out)
    export_cpu, forked_cpu = time.process_time() - cpu, _children_cpu() - forked
    return {
        "target": target, "nodes": result.nodes, "files": len(result.paths), "bytes": result.bytes,
        "export_s": round(result.seconds, 2), "export_cpu_s": round(export_cpu + forked_cpu, 2),
        "forked_cpu_s": round(forked_cpu, 2), "load_s": round(load_s, 2),
        "load_cpu_s": round(load_cpu, 2),
        "rss_loaded_mb": round(rss_loaded / 1024, 1), "peak_during_export_mb": round(_status_kb("VmHWM") / 1024, 1),
        "growth_mb": round((_status_kb("VmHWM") - rss_loaded) / 1024, 1), "peak_reset": exact_peak,
    }


def _forked(row: dict) -> str:
    return f", of it {row['forked_cpu_s']:.1f} s forked" if row.get("forked_cpu_s") else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("report", help="a result written by graphcmp compare (cmp.npz or cmp.json)")
    parser.add_argument("--out", default="/tmp/graphcmp_bench_export", help="folder for the exported files")
    parser.add_argument("--to", nargs="*", choices=sorted(TARGETS), default=list(TARGETS))
    parser.add_argument("--json", action="store_true", help="print one JSON object per target")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_one(args.report, args.child, args.out)))
        return 0
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for target in args.to:
        done = subprocess.run([sys.executable, __file__, args.report, "--out", args.out, "--child", target],
                              check=True, capture_output=True, text=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(row) if args.json else
              f"{target:15s} {row['nodes']:>8,} nodes  {row['export_s']:6.1f} s (CPU {row['export_cpu_s']:.1f} s"
              f"{_forked(row)})  "
              f"{row['bytes'] / 1e6:8.1f} MB  "
              f"RSS {row['rss_loaded_mb']:7.0f} MB loaded, +{row['growth_mb']:.0f} MB during export "
              f"(report load {row['load_s']:.1f} s, CPU {row['load_cpu_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
