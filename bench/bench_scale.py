#!/usr/bin/env python3
"""Scale figures of issue 17: the `graphcmp compare` command, the reader per dump.json layout, the stages of a
comparison, and opening a saved result, side by side with another tree of graphcmp, interleaved run by run.

Usage::

    .venv/bin/python bench/bench_scale.py compare PAIR_DIR... [--tree OTHER] [--repeat 3]
    .venv/bin/python bench/bench_scale.py read DUMP_DIR... [--tree OTHER] [--repeat 3]
    .venv/bin/python bench/bench_scale.py stages PAIR_DIR... [--repeat 1]
    .venv/bin/python bench/bench_scale.py open RESULT... [--tree OTHER --other-result RESULT ...] [--repeat 3]

A PAIR_DIR holds ``npu/`` and ``bench/`` (``make_synthetic.py --out``); DUMP_DIR is one rank folder. Every run
is a fresh process (imports included) timed from outside, with its peak resident set (``ru_maxrss`` of the
process and its children, e.g. the forked bench reader: the largest one). ``--tree`` is the root of another
checkout (``git worktree add`` or ``git archive main | tar -x -C DIR``): its runs use that tree's package
(``PYTHONPATH``, started outside both trees), its default output name, and alternate with this tree's runs,
so both see the same machine (the 2-core machine is shared and its speed drifts). ``open`` times
``graphcmp info`` and ``graphcmp diverge`` on saved results (each tree opens the result its own compare
wrote: ``--other-result``). ``stages`` times the stages of one comparison inside one process (read npu,
read bench, match, pair, metrics, overflow, noise model, judge, analysis, write) with the resident set after
each and the peak so far. Medians and ranges are printed as markdown tables.
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"wall": wall, "peak_mb": peak, "code": proc.returncode, "err": proc.stderr[-500:]}))
"""


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    return env


def run_measured(tree: Path, args: list[str]) -> dict:
    """Wall time and peak RSS of ``python -m graphcmp ARGS`` with `tree`'s package, started in /tmp."""
    cmd = [sys.executable, "-c", _MEASURE, sys.executable, "-m", "graphcmp", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=_env(tree), cwd=tempfile.gettempdir())
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["code"] not in (0, 1):
        raise RuntimeError(f"graphcmp {' '.join(args)} ({tree}) failed: {result['err']}")
    return result


def run_python(tree: Path, code: str, *argv: str) -> dict:
    cmd = [sys.executable, "-c", _MEASURE, sys.executable, "-c", code, *argv]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=_env(tree), cwd=tempfile.gettempdir())
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["code"] != 0:
        raise RuntimeError(f"{tree}: {result['err']}")
    return result


def _cell(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def _trees(args: argparse.Namespace) -> dict[str, Path]:
    trees = {"this tree": ROOT}
    if args.tree:
        trees = {f"other ({Path(args.tree).name})": Path(args.tree).resolve(), **trees}
    for tree in trees.values():  # installed packages carry bytecode; editable trees must compile it once
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "graphcmp")], check=True)
    return trees


def _output_name(tree: Path, folder: Path, label: str) -> str:
    """The default output of `graphcmp compare` in `tree` (a JSON report before the npz container existed)."""
    npz = (tree / "graphcmp" / "core" / "npzio.py").is_file()
    return str(folder / f"{label}.{'npz' if npz else 'json'}")


def bench_compare(args: argparse.Namespace) -> None:
    trees = _trees(args)
    results: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for pair in args.paths:
                for name, tree in trees.items():
                    out = _output_name(tree, Path(tmp), "cmp")
                    r = run_measured(tree, ["compare", f"{pair}/npu", f"{pair}/bench", "-o", out, "-q"])
                    r["out_mb"] = Path(out).stat().st_size / 1e6
                    results.setdefault((pair, name), []).append(r)
                    print(f"  {pair} {name}: {r['wall']:.2f} s, {r['peak_mb']:.0f} MB", file=sys.stderr, flush=True)
    print(f"| pair | tree | wall s, median [range] of {args.repeat} | peak RSS MB | result MB |")
    print("|---|---|---|---|---|")
    for (pair, name), runs in results.items():
        print(f"| {Path(pair).name} | {name} | {_cell([r['wall'] for r in runs])} "
              f"| {_cell([r['peak_mb'] for r in runs], 0)} | {runs[0]['out_mb']:.0f} |")


_READ = ("import sys, time\nfrom graphcmp.core.readers.msprobe import read_msprobe\n"
         "g = read_msprobe(sys.argv[1])\nprint(len(g), len(g.tensors))")


def bench_read(args: argparse.Namespace) -> None:
    trees = _trees(args)
    results: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.repeat):
        for folder in args.paths:
            for name, tree in trees.items():
                r = run_python(tree, _READ, folder)
                results.setdefault((folder, name), []).append(r)
                print(f"  {folder} {name}: {r['wall']:.2f} s, {r['peak_mb']:.0f} MB", file=sys.stderr, flush=True)
    print(f"| dump | dump.json MB | tree | read s (process), median [range] of {args.repeat} | peak RSS MB |")
    print("|---|---|---|---|---|")
    for (folder, name), runs in results.items():
        size = (Path(folder) / "dump.json").stat().st_size / 1e6
        print(f"| {folder} | {size:.0f} | {name} | {_cell([r['wall'] for r in runs])} "
              f"| {_cell([r['peak_mb'] for r in runs], 0)} |")


def bench_open(args: argparse.Namespace) -> None:
    trees = _trees(args)
    others = args.other_result or []
    results: dict[tuple[str, str, str], list[dict]] = {}
    for _ in range(args.repeat):
        for k, result in enumerate(args.paths):
            for name, tree in trees.items():
                path = others[k] if tree != ROOT and k < len(others) else result
                for command in ("info", "diverge"):
                    r = run_measured(tree, [command, path, "--json"])
                    results.setdefault((path, name, command), []).append(r)
                    print(f"  {command} {path} {name}: {r['wall']:.2f} s", file=sys.stderr, flush=True)
    print(f"| result | MB | tree | command | wall s, median [range] of {args.repeat} | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    for (path, name, command), runs in results.items():
        print(f"| {Path(path).name} | {Path(path).stat().st_size / 1e6:.0f} | {name} | `{command}` "
              f"| {_cell([r['wall'] for r in runs])} | {_cell([r['peak_mb'] for r in runs], 0)} |")


_STAGES = """
import resource, sys, time, json
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6
marks, t = [], time.perf_counter()
def mark(name):
    global t
    now = time.perf_counter()
    marks.append((name, now - t, rss(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    t = now
from graphcmp.core.judge import judge
from graphcmp.core.matching import default_matchers, match_graphs
from graphcmp.core.noise import noise_model
from graphcmp.core.overflow import overflow_levels
from graphcmp.core.pairing import pair_metrics, pair_tensors
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.report import CompareOptions, CompareReport, save_report
from graphcmp.core.rules import DEFAULT_THRESHOLDS as th
mark("import")
npu = read_msprobe(sys.argv[1] + "/npu"); mark("read npu")
bench = read_msprobe(sys.argv[1] + "/bench"); mark("read bench")
table = match_graphs(npu, bench, default_matchers()); mark("match")
rows = pair_tensors(npu, bench, table); mark("pair tensors")
pairs = pair_metrics(npu, bench, *rows, th, None); mark("pair metrics")
overflow = overflow_levels(npu); mark("overflow levels")
noise = noise_model(npu, bench, table, pairs, th.noise, overflow); mark("noise model")
verdicts = judge(npu, bench, table, pairs, th, noise); mark("judge")
report = CompareReport(npu=npu, bench=bench, matches=table, pairs=pairs, verdicts=verdicts, thresholds=th,
                       options=CompareOptions(), tool_version="bench", noise=noise, _cache={"overflow": overflow})
report.analysis(); mark("divergence analysis")
save_report(report, sys.argv[2]); mark("write result")
print(json.dumps({"marks": marks, "nodes": len(npu), "tensors": len(npu.tensors), "pairs": len(pairs)}))
"""


def bench_stages(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for pair in args.paths:
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run([sys.executable, "-c", _STAGES, pair, str(Path(tmp) / "cmp.npz")],
                                     capture_output=True, text=True, check=True, cwd=tempfile.gettempdir(),
                                     env=_env(ROOT))
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            first = runs[0]
            print(f"\n{Path(pair).name}: {first['nodes']:,} nodes/side, {first['tensors']:,} tensors/side, "
                  f"{first['pairs']:,} pairs; one process, the stages one after the other (median of {args.repeat})")
            print("| stage | s | RSS after MB | peak so far MB |")
            print("|---|---|---|---|")
            for k, (name, *_) in enumerate(first["marks"]):
                secs = statistics.median(r["marks"][k][1] for r in runs)
                print(f"| {name} | {secs:.2f} | {statistics.median(r['marks'][k][2] for r in runs):.0f} "
                      f"| {statistics.median(r['marks'][k][3] for r in runs):.0f} |")
            total = statistics.median(sum(m[1] for m in r["marks"]) for r in runs)
            print(f"| total | {total:.2f} | | |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("compare", "read", "stages", "open"))
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--tree", help="root of another graphcmp tree to run side by side")
    parser.add_argument("--other-result", nargs="*", help="with open: the other tree's result per RESULT")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    {"compare": bench_compare, "read": bench_read, "stages": bench_stages, "open": bench_open}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
