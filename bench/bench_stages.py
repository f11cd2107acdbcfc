#!/usr/bin/env python3
"""CPU time of the comparison stages after reading (`compare_graphs` and `CompareReport.analysis`), side by side
with another tree of graphcmp.

Usage::

    .venv/bin/python bench/bench_stages.py PAIR_DIR... [--tree OTHER] [--rounds 15]

A pair folder holds ``npu`` and ``bench`` (as `bench/make_synthetic.py` writes them). One process per tree reads
the pair once (``read_pair`` with what ``graphcmp compare`` derives while reading) and then compares it
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

from bench_read import TreeProcess, print_table, take_turns, trees_to_time

_SERVER = """
import gc, sys, time
import graphcmp.core.records as records
import graphcmp.core.compare as compare
from graphcmp.core.compare import compare_graphs
from graphcmp.core.dataflow import flow_edges
from graphcmp.core.readers.pair import read_pair

CACHES = ("_tuple_codes", "_object_column")
coded = []  # the columns the reading codes: coded again after each reset, as a fresh process has them
cached = {name: getattr(records, name) for name in CACHES}
for name in CACHES:
    setattr(records, name, lambda values, name=name: coded.append((name, values)) or cached[name](values))
pair = sys.argv[1]
if hasattr(compare, "derive_bench"):  # each run's derivations made while reading, as compare does
    npu, bench = read_pair(pair + "/npu", pair + "/bench", ahead=compare.derive_npu_aside,
                           ahead_bench=compare.derive_bench, ahead_loaded=compare.derive_npu_here)
elif hasattr(compare, "derive_npu"):  # a tree before them: the npu run's derivations made while the bench run is read
    npu, bench = read_pair(pair + "/npu", pair + "/bench", ahead=compare.derive_npu)
else:  # a tree before them: the data-flow edges derived while reading (the bench side in its child)
    npu, bench = read_pair(pair + "/npu", pair + "/bench", derive=flow_edges)
    flow_edges(npu), flow_edges(bench)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="+", help="folders holding npu/ and bench/")
    parser.add_argument("--tree", help="root of another graphcmp tree to time alternately")
    parser.add_argument("--rounds", type=int, default=15, help="timed comparisons per pair and tree")
    args = parser.parse_args(argv)
    trees = trees_to_time(args.tree)
    times: dict[tuple[str, str], list[float]] = {}
    for pair in args.pairs:
        comparers = {name: TreeProcess(tree, _SERVER, pair) for name, tree in trees.items()}  # one pair at a time
        try:
            for comparer in comparers.values():
                comparer.ready(f"reading {pair}")
            for name, values in take_turns(comparers, args.rounds).items():
                times[(pair, name)] = values
        finally:
            for comparer in comparers.values():
                comparer.close()
    print_table("pair", "compare + analysis CPU s", times, args.rounds, trees)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
