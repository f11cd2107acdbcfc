#!/usr/bin/env python3
"""The forward call of every backward call of a run: by Python strings (`dataflow.twins_by_strings`) against the
compiled lookup over the ids' bytes (`id_kernels.forward_twin_rows`).

    python bench/bench_twins.py [CONSTRUCT_JSON ...] [--repeat 5]

Takes the node ids of each construct.json (default: the 1M synthetic run's, `bench/make_synthetic.py` writes it),
their directions by the compiled id parser, checks that both ways give the same rows, then prints the median
[range] of `--repeat` alternated calls of each, by the clock and by the processor time of the process. The
compiled lookup is timed from the ids as strings: the joined buffer is made inside.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphcmp.core import id_kernels  # noqa: E402
from graphcmp.core.dataflow import twins_by_strings  # noqa: E402
from graphcmp.core.readers.naming_compiled import parse_joined  # noqa: E402
from graphcmp.core.records import Direction  # noqa: E402

DEFAULT = Path("/tmp/graphcmp_synth/1m/npu/construct.json")


def _timed(find, ids: list[str], rows: np.ndarray) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    find(ids, rows)
    return time.perf_counter() - start, time.process_time() - cpu


def _figure(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s [{min(values):.3f}-{max(values):.3f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("construct", nargs="*", type=Path, default=[DEFAULT])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    id_kernels.KERNELS.load()  # built now if it is not (once)
    print("| ids | backward calls | twins found | by strings: clock (cpu) | compiled: clock (cpu) |")
    print("|---|---|---|---|---|")
    for path in args.construct:
        ids = list(orjson.loads(path.read_bytes()))
        backward = np.flatnonzero(parse_joined(ids)[2] == Direction.BACKWARD)
        compiled = id_kernels.forward_twin_rows(ids, backward)
        strings = twins_by_strings(ids, backward)
        if compiled is None or not np.array_equal(compiled, strings):
            print(f"{path}: the two ways differ", file=sys.stderr)
            return 1
        times: dict[str, list[tuple[float, float]]] = {"strings": [], "compiled": []}
        for _ in range(args.repeat):
            times["strings"].append(_timed(twins_by_strings, ids, backward))
            times["compiled"].append(_timed(id_kernels.forward_twin_rows, ids, backward))
        cells = [f"{_figure([t[0] for t in runs])} ({statistics.median(t[1] for t in runs):.3f} s)"
                 for runs in times.values()]
        print(f"| {len(ids):,} | {len(backward):,} | {int((compiled >= 0).sum()):,} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
