#!/usr/bin/env python3
"""The compiled dump.json pass alone (`readers.msprobe_scan`), side by side with another tree of graphcmp.

Usage::

    .venv/bin/python bench/bench_scan.py DUMP_JSON... [--tree OTHER] [--runs 5] [--rounds 6] [--instructions]

Each run is a fresh process (this tree's package, or OTHER's through ``PYTHONPATH``, started outside both trees)
that maps the file and runs the pass `--rounds` times over it, page cache warm; the trees alternate run by run.
Printed per file and tree: the median over the runs of each run's median and best round, in ms, ns per leaf and
MB/s. A tree whose pass is not built ahead of time builds it first (a minute or two).

``--instructions`` also runs one round of each tree under ``valgrind --tool=callgrind`` and prints the instructions
the pass executed (`callgrind_annotate`, the pass's entry point, inclusive): the same count on every run of the
same build and input, whatever else the machine is doing, where wall times on a shared 2-core machine drift by 2x.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, mmap, sys, time
import numpy as np
from graphcmp.core.readers import msprobe_scan as scan
scan.build_kernels()  # a no-op once built (a first graphcmp compare builds it)
scan._warm()
with open(sys.argv[1], "rb") as file:
    mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
buf = np.frombuffer(mapped, np.uint8)
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    out = scan._walk(buf, None)
    times.append(time.perf_counter() - start)
print(json.dumps({"times": times, "leaves": int(out.state[scan._LEAVES]), "bytes": int(buf.size)}))
"""


def _run(tree: Path, dump: str, rounds: int, wrap: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([*(wrap or []), sys.executable, "-c", _CHILD, dump, str(rounds)], capture_output=True,
                          text=True, env=env, cwd=tempfile.gettempdir(), check=True)


def instructions(tree: Path, dump: str) -> int:
    """Instructions one round of the pass executed under callgrind (its entry point, inclusive)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        _run(tree, dump, 1, ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"])
        table = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(out)], capture_output=True, text=True,
                               check=True).stdout
    found = re.search(r"^\s*([\d,]+) .*_pycc_method_scan", table, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{tree}: callgrind saw no call of the pass")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dumps", nargs="+", help="dump.json files")
    parser.add_argument("--tree", type=Path, help="root of another graphcmp tree, run alternately")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per tree")
    parser.add_argument("--rounds", type=int, default=6, help="passes over the file per process")
    parser.add_argument("--instructions", action="store_true", help="also count instructions under callgrind")
    args = parser.parse_args(argv)
    trees = {"this tree": ROOT, **({f"other ({args.tree.name})": args.tree.resolve()} if args.tree else {})}
    print("| dump.json | tree | median of the runs' medians, ms | of their best, ms | ns per leaf (best) | MB/s (best) "
          "| instructions |")
    print("|---|---|---|---|---|---|---|")
    for dump in args.dumps:
        results: dict[str, list[dict]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, tree in trees.items():
                results[name].append(json.loads(_run(tree, dump, args.rounds).stdout))
        for name, tree in trees.items():
            runs = results[name]
            medians = statistics.median(statistics.median(run["times"]) for run in runs)
            best = statistics.median(min(run["times"]) for run in runs)
            leaves, size = runs[0]["leaves"], runs[0]["bytes"]
            counted = f"{instructions(tree, dump):,}" if args.instructions else ""
            print(f"| {Path(dump).parent.name}/{Path(dump).name} ({size / 1e6:.1f} MB, {leaves:,} leaves) | {name} "
                  f"| {medians * 1e3:.1f} | {best * 1e3:.1f} | {best / leaves * 1e9:.0f} | {size / best / 1e6:.0f} "
                  f"| {counted} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
