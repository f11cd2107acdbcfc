#!/usr/bin/env python3
"""Writing a comparison result: the part `graphcmp compare` writes last, on its critical path, and the file's size.

Usage::

    .venv/bin/python bench/bench_write.py RESULT [--tree OTHER --other-result RESULT] [--repeat 3]

`graphcmp compare` forks a process that writes the runs' columns while it compares (`runs_written_meanwhile`);
what the command itself writes at the end is the rest of the result: pairs, metrics, verdicts, noise model,
matches. Each run is a fresh process that loads a saved RESULT (``graphcmp compare ... -o RESULT``), reads every
column into memory (so no run pays for reading the file), has the runs' columns written apart and waits for them,
then times `save_report`'s own part: wall, user and system CPU seconds (the 2-core machine is shared: CPU time
is the steadier figure), the bytes it wrote and the whole file's size. ``--tree`` is the root of another checkout
(``git archive main | tar -x -C DIR``): its runs use that tree's package and alternate with this tree's, each on
its own RESULT (``--other-result``: a result that tree wrote). Medians and ranges are printed as a markdown table.
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

_RUN = r"""
import json, os, resource, sys, time
import numpy as np
from graphcmp.core.report import load_report, runs_written_meanwhile, save_report


def touch(value):
    if isinstance(value, np.ndarray):
        value.sum()  # every page of a mapped column read once
    elif isinstance(value, dict):
        for v in value.values():
            touch(v)


source, out = sys.argv[1], sys.argv[2]
report = load_report(source)
report.summary(), report.analysis()  # computed once before timing, as `compare` has them
from graphcmp.core.npzio import read_npz
touch(read_npz(source))
with runs_written_meanwhile(report.npu, report.bench, out) as runs:
    begun = runs.wait()
    if begun is None:
        sys.exit("the runs' columns were not written apart (no second core or no fork)")

    class Written:
        def wait(self):
            return begun

    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    save_report(report, out, runs=Written())
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "user": after.ru_utime - before.ru_utime, "sys": after.ru_stime - before.ru_stime,
                  "bytes": os.path.getsize(out)}))
"""


def run_write(tree: Path, result: str) -> dict:
    """One fresh process of `tree` writing `result` again (the runs' part apart, not timed)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "again.npz")
        runs_only = [sys.executable, "-c", _RUNS_SIZE, result, out]
        proc = subprocess.run([sys.executable, "-c", _RUN, result, out], capture_output=True, text=True, env=env,
                              cwd=tempfile.gettempdir())
        if proc.returncode != 0:
            raise RuntimeError(f"{tree}: {proc.stderr[-1500:]}")
        figures = json.loads(proc.stdout.strip().splitlines()[-1])
        runs = subprocess.run(runs_only, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
        if runs.returncode != 0:
            raise RuntimeError(f"{tree}: {runs.stderr[-1500:]}")
        figures["part"] = figures["bytes"] - int(runs.stdout.strip().splitlines()[-1])
    return figures


_RUNS_SIZE = r"""
import sys, zipfile
with zipfile.ZipFile(sys.argv[2]) as zf:
    print(sum(i.compress_size for i in zf.infolist() if i.filename.startswith(("npu.", "bench."))))
"""


def _cell(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", help="a result `graphcmp compare` wrote with this tree")
    parser.add_argument("--tree", help="root of another graphcmp tree to run alternately")
    parser.add_argument("--other-result", help="with --tree: a result that tree wrote")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    trees = {"this tree": (ROOT, args.result)}
    if args.tree:
        trees = {f"other ({Path(args.tree).name})": (Path(args.tree).resolve(), args.other_result or args.result),
                 **trees}
    results: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.repeat):
        for name, (tree, result) in trees.items():
            r = run_write(tree, result)
            results[name].append(r)
            print(f"  {name}: wall {r['wall']:.2f} s, user {r['user']:.2f}, sys {r['sys']:.2f}, "
                  f"part {r['part'] / 1e6:.0f} MB, file {r['bytes'] / 1e6:.0f} MB", file=sys.stderr, flush=True)
    print(f"| tree | result | wall s | user s | sys s (median [range] of {args.repeat}) | part written MB | file MB |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        print(f"| {name} | {Path(trees[name][1]).name} | {_cell([r['wall'] for r in runs])} "
              f"| {_cell([r['user'] for r in runs])} | {_cell([r['sys'] for r in runs])} "
              f"| {runs[0]['part'] / 1e6:.0f} | {runs[0]['bytes'] / 1e6:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
