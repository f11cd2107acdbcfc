#!/usr/bin/env python3
"""Time `graphcmp build` and `graphcmp compare` end to end (wall, peak RSS) on real and synthetic dumps.

Each measurement runs in a fresh child process (imports included, as a user sees it), which
reports its own wall time, per-stage times and peak RSS (``ru_maxrss``). Usage::

    .venv/bin/python bench/bench_compare.py [--sizes 40000 200000] [--repeat 3] [--synth-dir /tmp/graphcmp_synth]
                                            [--steps build compare cli] [--no-compile]

Synthetic pairs are made with bench/make_synthetic.py from the real 24-layer dump when missing.
The package's bytecode is compiled first, as ``pip install`` does for an installed package: an
editable install on a machine that sets PYTHONDONTWRITEBYTECODE (this one does) would otherwise
compile every module again in every run (about 0.1 s); ``--no-compile`` measures that case.
"""

from __future__ import annotations

import argparse
import compileall
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "data" / "msprobe" / "dumps"
REAL = {
    "tf_big (24 layers, real)": ("tf_big/statistics/perturb/step0/rank0", "tf_big/statistics/baseline/step0/rank0"),
    "tf_huge (48 layers x 4 micro, real)": ("tf_huge/statistics/perturb/step0/rank0",
                                            "tf_huge/statistics/baseline/step0/rank0"),
}
SOURCE = SHARED / "tf_big/statistics/baseline/step0/rank0"


def measure_once(kind: str, npu: str, bench: str, out: str) -> dict:
    """Run one build/compare in this process; return wall, stage times and peak RSS."""
    start = time.perf_counter()
    from graphcmp.core.compare import compare_graphs
    from graphcmp.core.readers import read_graph
    from graphcmp.core.report import save_graph, save_report

    stages = {"import": time.perf_counter() - start}
    t = time.perf_counter()
    npu_graph = read_graph(npu)
    stages["read npu"] = time.perf_counter() - t
    if kind == "build":
        t = time.perf_counter()
        save_graph(npu_graph, out, "bench")
        stages["write"] = time.perf_counter() - t
        nodes = len(npu_graph)
    else:
        t = time.perf_counter()
        bench_graph = read_graph(bench)
        stages["read bench"] = time.perf_counter() - t
        t = time.perf_counter()
        report = compare_graphs(npu_graph, bench_graph)
        stages["compare"] = time.perf_counter() - t
        t = time.perf_counter()
        save_report(report, out)
        stages["write"] = time.perf_counter() - t
        nodes = len(npu_graph)
    return {"wall": time.perf_counter() - start, "stages": stages, "nodes": nodes,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "output_mb": Path(out).stat().st_size / 1e6}


def measure_cli(npu: str, bench: str, out: str) -> dict:
    """Wall time and peak RSS of the real `graphcmp compare` command in a child process."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "graphcmp", "compare", npu, bench, "-o", out, "-q"],
                   check=False, capture_output=True)
    wall = time.perf_counter() - start
    return {"wall": wall, "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def run_child(kind: str, npu: str, bench: str, out: str) -> dict:
    if kind == "cli":
        code = (f"import json,sys; sys.path.insert(0, {str(HERE)!r}); import bench_compare as b; "
                f"print(json.dumps(b.measure_cli({npu!r}, {bench!r}, {out!r})))")
    else:
        code = (f"import json,sys; sys.path.insert(0, {str(HERE)!r}); import bench_compare as b; "
                f"print(json.dumps(b.measure_once({kind!r}, {npu!r}, {bench!r}, {out!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cpu_probe() -> float:
    """Seconds for a fixed pure-Python loop: how fast this machine is right now."""
    start = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.perf_counter() - start


def ensure_synthetic(nodes: int, synth_dir: Path) -> Path:
    target = synth_dir / f"{nodes // 1000}k_indent1"
    if not (target / "npu" / "dump.json").is_file():  # indent=1: the layout msprobe itself writes
        subprocess.run([sys.executable, str(HERE / "make_synthetic.py"), "--source", str(SOURCE), "--nodes",
                        str(nodes), "--indent", "1", "--out", str(target)], check=True, capture_output=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[40000, 200000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--synth-dir", type=Path, default=Path(tempfile.gettempdir()) / "graphcmp_synth")
    parser.add_argument("--steps", nargs="*", choices=("build", "compare", "cli"), default=["build", "compare", "cli"])
    parser.add_argument("--no-compile", action="store_true", help="leave the package's bytecode uncompiled")
    args = parser.parse_args(argv)
    if not args.no_compile:
        compileall.compile_dir(HERE.parent / "graphcmp", quiet=1)

    cases = {name: (str(SHARED / n), str(SHARED / b)) for name, (n, b) in REAL.items() if (SHARED / n).is_dir()}
    for size in args.sizes:
        target = ensure_synthetic(size, args.synth_dir)
        cases[f"synthetic {size:,}"] = (str(target / "npu"), str(target / "bench"))

    print(f"machine check: a fixed pure-Python loop takes {_cpu_probe():.2f} s (compare with the figure next to "
          "the tables of bench/README.md: slower means a busier host)")
    print(f"| case | nodes/side | step | wall s (median of {args.repeat}) [range] | peak RSS MB | output MB "
          "| stages (s) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "out.json")
        for name, (npu, bench) in cases.items():
            for kind in args.steps:
                runs = [run_child(kind, npu, bench, out) for _ in range(args.repeat)]
                best = sorted(runs, key=lambda r: r["wall"])[len(runs) // 2]
                stages = ", ".join(f"{k} {v:.2f}" for k, v in best.get("stages", {}).items())
                label = {"cli": "`graphcmp compare` CLI"}.get(kind, kind)
                wall = statistics.median(r["wall"] for r in runs)
                spread = f"[{min(r['wall'] for r in runs):.2f}-{max(r['wall'] for r in runs):.2f}]"
                print(f"| {name} | {best.get('nodes', '')} | {label} | {wall:.2f} {spread} "
                      f"| {max(r['peak_rss_mb'] for r in runs):.0f} | {best.get('output_mb', 0):.1f} | {stages} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
