#!/usr/bin/env python3
"""Wall time, peak memory and throughput of a whole tensor-mode comparison, this tree against another and msprobe.

Usage::

    .venv/bin/python bench/bench_tensor_mode.py PAIR [--tree OTHER] [--msprobe PYTHON] [--runs 3] [--json]
        [--only TOOL ...] [--no-warm]

PAIR is a folder made by ``bench/make_tensor_pair.py`` (``PAIR/npu`` and ``PAIR/bench``, msprobe tensor mode, one
step, rank 0). Each run is a fresh process, its peak RSS read from ``os.wait4``:

* ``graphcmp compare NPU BENCH -o cmp.npz`` with this tree, then with ``--tree`` (another checkout, e.g.
  ``git -C /work/main archive HEAD | tar -x -C /tmp/main_tree``), each through ``PYTHONPATH``;
* ``msprobe compare -tp NPU -gp BENCH -o DIR`` (real-data mode: it reads every tensor pair) when ``--msprobe``
  names a Python with msprobe installed.

The tools take turns run by run, so all see the same machine. Before the timed runs, one untimed graphcmp run of
each tree reads every file once (page cache warm, compiled kernels cached). Throughput counts the bytes of both
sides' tensor files. Prints each tool's median wall, range, peak RSS and GB/s, and whether the trees' ``.npz``
metric columns agree (largest relative difference). Hold the machine's bench lock while it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rank_folder(side: Path) -> Path:
    """The one rank folder (holding dump.json) of a run made by make_tensor_pair.py."""
    found = sorted(path.parent for path in side.glob("step*/rank*/dump.json"))
    if len(found) != 1:
        raise SystemExit(f"{side}: expected one step*/rank*/dump.json, found {len(found)}")
    return found[0]


def tensor_bytes(*folders: Path) -> int:
    return sum(path.stat().st_size for folder in folders for path in folder.rglob("*")
               if path.suffix in (".pt", ".npy"))


def timed(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit code) of one process, started in `cwd` (``python -m`` puts its working
    folder before PYTHONPATH: started in a checkout, it would run that checkout whatever PYTHONPATH says)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    errors = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)}: exit {process.returncode}\n{errors[-2000:]}")
    return wall, usage.ru_maxrss / 1024, process.returncode


def graphcmp_command(tree: Path, npu: Path, bench: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    return [sys.executable, "-m", "graphcmp", "compare", str(npu), str(bench), "-o", str(out), "--quiet"], env


def msprobe_command(python: str, npu: Path, bench: Path, out: Path) -> list[str]:
    code = "import sys; from msprobe.msprobe import main; sys.argv[0] = 'msprobe'; sys.exit(main())"
    return [python, "-c", code, "compare", "-tp", str(npu.parent), "-gp", str(bench.parent), "-o", str(out)]


def metric_agreement(this: Path, other: Path) -> float:
    """Largest relative difference between the float metric columns of two comparisons' .npz files."""
    import numpy as np

    worst = 0.0
    with np.load(this, allow_pickle=False) as a, np.load(other, allow_pickle=False) as b:
        for key in sorted(set(a.files) & set(b.files)):
            x, y = a[key], b[key]
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)) or x.dtype.kind != "f" or \
                    x.shape != y.shape:
                continue
            both = np.isfinite(x) & np.isfinite(y)
            if not np.array_equal(np.isfinite(x), np.isfinite(y)):
                return float("inf")
            scale = np.maximum(np.abs(x[both]), np.abs(y[both]))
            diff = np.abs(x[both] - y[both])
            # values at float64 eps of 0 (kl of identical tensors) compare absolutely
            rel = np.where(scale > 1e-12, diff / np.where(scale > 0, scale, 1), diff)
            worst = max(worst, float(rel.max(initial=0.0)))
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pair", type=Path, help="folder holding npu/ and bench/ (bench/make_tensor_pair.py)")
    parser.add_argument("--tree", type=Path, help="root of another checkout of graphcmp to time side by side")
    parser.add_argument("--msprobe", metavar="PYTHON", help="a Python with msprobe installed, to time msprobe")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-warm", action="store_true", help="skip the untimed runs (page cache already warm)")
    parser.add_argument("--only", action="append", choices=["this tree", "other tree", "msprobe"],
                        help="time only these tools (repeatable); default all that are given")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    npu, bench = rank_folder(args.pair / "npu"), rank_folder(args.pair / "bench")
    gigabytes = tensor_bytes(npu, bench) / 1e9
    work = Path(tempfile.mkdtemp(prefix="bench_tensor_mode_"))
    tools: dict[str, tuple[list[str], dict[str, str] | None, Path]] = {}
    trees = {"this tree": ROOT, **({"other tree": args.tree.resolve()} if args.tree else {})}
    for label, tree in trees.items():
        out = work / f"{label.replace(' ', '_')}.npz"
        command, env = graphcmp_command(tree, npu, bench, out)
        tools[label] = (command, env, out)
    if args.msprobe:
        tools["msprobe"] = (msprobe_command(args.msprobe, npu, bench, work / "msprobe"), None, work / "msprobe")
    if args.only:
        tools = {label: tool for label, tool in tools.items() if label in args.only}
    for label in trees if not args.no_warm else ():  # warm: page cache, bytecode, compiled kernels
        if label in tools:
            timed(tools[label][0], tools[label][1], work)
    results: dict[str, list[tuple[float, float]]] = {label: [] for label in tools}
    for _ in range(args.runs):
        for label, (command, env, _out) in tools.items():
            wall, rss, _code = timed(command, env, work)
            results[label].append((wall, rss))
            print(f"  {label}: {wall:.1f} s, {rss:.0f} MB", file=sys.stderr)
    summary = {"pair": str(args.pair), "tensor_gigabytes": round(gigabytes, 3), "load": os.getloadavg(),
               "tools": {}}
    for label, runs in results.items():
        walls, rss = [w for w, _ in runs], [r for _, r in runs]
        summary["tools"][label] = {"wall_median": statistics.median(walls), "wall_min": min(walls),
                                   "wall_max": max(walls), "rss_max_mb": max(rss), "rss_min_mb": min(rss),
                                   "gb_per_s_median": gigabytes / statistics.median(walls)}
    if "this tree" in tools and "other tree" in tools:
        summary["metrics_max_rel_diff"] = metric_agreement(tools["this tree"][2], tools["other tree"][2])
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(f"{args.pair}: {gigabytes:.2f} GB of tensor files (both sides); load average {summary['load']}")
    print("| tool | wall (median, range) | peak RSS | throughput |\n|---|---|---|---|")
    for label, row in summary["tools"].items():
        print(f"| {label} | {row['wall_median']:.1f} s ({row['wall_min']:.1f}-{row['wall_max']:.1f}) | "
              f"{row['rss_min_mb']:.0f}-{row['rss_max_mb']:.0f} MB | {row['gb_per_s_median']:.2f} GB/s |")
    if "metrics_max_rel_diff" in summary:
        print(f"metric columns, this tree against the other: largest relative difference "
              f"{summary['metrics_max_rel_diff']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
