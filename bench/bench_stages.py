#!/usr/bin/env python3
"""CPU time of the comparison stages after reading (`compare_graphs` and `CompareReport.analysis`), side by side
with another tree of graphcmp.

Usage::

    .venv/bin/python bench/bench_stages.py PAIR_DIR... [--tree OTHER] [--rounds 15]

A pair folder holds ``npu`` and ``bench`` (as `bench/make_synthetic.py` writes them). One process per tree reads
the pair once (``read_pair`` with the data-flow edges derived, as ``graphcmp compare`` does) and then compares it
on request: the trees take turns comparison by comparison (``--rounds`` times each, after one warm-up), so both
see the same machine (the 2-core machine is shared and its speed drifts within seconds). Each comparison is timed
by its CPU time (``time.process_time`` after a ``gc.collect()``). Before each one the process is put back where
reading left it: what the comparison keeps with the runs (`DumpGraph.memo`, the id -> row tables) is dropped, and
so are the string-column caches of `records`, but for the columns the reading itself coded. ``--tree`` is the root
of another checkout (``git archive main | tar -x -C DIR``), imported through ``PYTHONPATH``. Prints, per pair and
tree, the median and range as a markdown table, and this tree's change against the other.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_SERVER = """
import gc, sys, time
import graphcmp.core.records as records
from graphcmp.core.compare import compare_graphs
from graphcmp.core.dataflow import flow_edges
from graphcmp.core.readers.pair import read_pair

CACHES = ("_tuple_codes", "_object_column")
coded = []  # the columns the reading codes: coded again after each reset, as a fresh process has them
cached = {name: getattr(records, name) for name in CACHES}
for name in CACHES:
    setattr(records, name, lambda values, name=name: coded.append((name, values)) or cached[name](values))
pair = sys.argv[1]
npu, bench = read_pair(pair + "/npu", pair + "/bench", derive=flow_edges)
flow_edges(npu), flow_edges(bench)  # derived while reading in `graphcmp compare` (the bench side in its child)
for name in CACHES:
    setattr(records, name, cached[name])
kept = {id(g): dict(g._cache) for g in (npu, bench)}


def reset():
    for g in (npu, bench):
        g._cache.clear()
        g._cache.update(kept[id(g)])
        g._rows.clear()
    for name, module in list(sys.modules.items()):
        if name.startswith("graphcmp"):
            for value in list(vars(module).values()):
                if not isinstance(value, type) and callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()
    for name, values in coded:
        cached[name](values)
    gc.collect()


print("ready", flush=True)
for line in sys.stdin:
    reset()
    start = time.process_time()
    report = compare_graphs(npu, bench)
    report.analysis()
    took = time.process_time() - start
    del report
    print(took, flush=True)
"""


class _Comparer:
    """A process that has read one pair with one tree's package and compares it on request."""

    def __init__(self, tree: Path, pair: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # byte code compiled on every run would be timed too
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, pair], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=tempfile.gettempdir())
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"reading {pair} failed (exit {self.proc.wait()})")

    def compare(self) -> float:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the comparison stopped (exit {self.proc.wait()})")
        return float(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="+", help="folders holding npu/ and bench/")
    parser.add_argument("--tree", help="root of another graphcmp tree to time alternately")
    parser.add_argument("--rounds", type=int, default=15, help="timed comparisons per pair and tree")
    args = parser.parse_args(argv)
    trees = {"this tree": ROOT}
    if args.tree:
        trees = {f"other ({Path(args.tree).name})": Path(args.tree).resolve(), **trees}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for tree in trees.values():  # compile each tree's byte code once, outside the timed comparisons
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "graphcmp")], check=True, env=env)
    times: dict[tuple[str, str], list[float]] = {}
    for pair in args.pairs:
        comparers = {name: _Comparer(tree, pair) for name, tree in trees.items()}  # one pair in memory at a time
        try:
            for comparer in comparers.values():
                comparer.compare()  # warm-up
            for round_ in range(args.rounds):
                order = list(comparers.items()) if round_ % 2 == 0 else list(comparers.items())[::-1]
                for name, comparer in order:
                    times.setdefault((pair, name), []).append(comparer.compare())
        finally:
            for comparer in comparers.values():
                comparer.close()
        print(f"  {pair}: " + ", ".join(f"{name} {statistics.median(times[(pair, name)]):.3f} s"
                                         for name in trees), file=sys.stderr, flush=True)
    print(f"| pair | tree | compare + analysis CPU s, median [range] of {args.rounds} |")
    print("|---|---|---|")
    for (pair, name), values in times.items():
        print(f"| {pair} | {name} | {_cell(values)} |")
    if args.tree:
        other = next(iter(trees))
        for pair in args.pairs:
            before = statistics.median(times[(pair, other)])
            after = statistics.median(times[(pair, "this tree")])
            print(f"\n{pair}: {after / before - 1:+.1%} (medians {before:.3f} -> {after:.3f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
