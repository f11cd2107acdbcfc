"""Parsing a million msprobe node ids: `naming.parse_node_ids` against the compiled `naming_compiled.parse_joined`.

    python bench/bench_names.py [--construct /tmp/graphcmp_synth/1m/npu/construct.json] [--dump DUMP] [--repeat 5]

Reads the node ids (the keys of a construct.json, `bench/make_synthetic.py` writes one, or of a dump.json's
data), checks that both give the same columns, then prints the median of `--repeat` timed calls of each, after one
call that loads the compiled code (the first call and the numba import are printed apart). `parse_joined` is timed
from the list of str to the columns, the joined buffer and each op's string included; `parse_id_columns` from a
buffer already joined (what a reader holding the ids as bytes calls).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from itertools import cycle, islice
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphcmp.core.readers.naming import parse_node_ids  # noqa: E402


def timed(call, repeat: int) -> str:
    """Median seconds of `repeat` calls, by the clock and by the processor time of the process (on a machine shared
    with other jobs the clock says more about them)."""
    clock, processor = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        call()
        clock.append(time.perf_counter() - start)
        processor.append(time.process_time() - cpu)
    return f"{statistics.median(clock):.3f} s ({statistics.median(processor):.3f} s cpu)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--construct", type=Path, default=Path("/tmp/graphcmp_synth/1m/npu/construct.json"))
    parser.add_argument("--dump", type=Path, help="take the keys of this dump.json's data instead")
    parser.add_argument("--count", type=int, help="this many ids: the ids read, cycled (or cut) to the count")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if args.dump is not None:
        ids = list(orjson.loads(args.dump.read_bytes())["data"])
    else:
        ids = list(orjson.loads(args.construct.read_bytes()))
    if args.count is not None:
        ids = list(islice(cycle(ids), args.count))
    start = time.perf_counter()
    from graphcmp.core.readers.naming_compiled import parse_id_columns, parse_joined
    loaded = time.perf_counter() - start
    start = time.perf_counter()
    parse_joined(ids[:3])
    first = time.perf_counter() - start
    counters: list[int] = []
    kinds, ops, directions = parse_node_ids(ids, counters=counters)
    columns = parse_joined(ids)
    same = (np.array_equal(columns[0], kinds) and columns[1] == ops and np.array_equal(columns[2], directions)
            and np.array_equal(columns[3], counters))
    print(f"{len(ids):,} ids, {sum(map(len, ids)) / len(ids):.1f} characters each, {len(set(ops)):,} distinct ops; "
          f"same columns: {same}")
    if not same:
        raise SystemExit("parse_joined's columns differ from parse_node_ids'")
    print(f"numba and the module: {loaded:.3f} s, first call (cached code loaded): {first:.3f} s")
    python = timed(lambda: parse_node_ids(ids, counters=[]), args.repeat)
    compiled = timed(lambda: parse_joined(ids), args.repeat)
    buf = np.frombuffer("\n".join(ids).encode("utf-8", "surrogatepass"), np.uint8)
    breaks = np.flatnonzero(buf == 10)
    starts, ends = np.r_[0, breaks + 1], np.r_[breaks, len(buf)]
    columns_only = timed(lambda: parse_id_columns(buf, starts, ends, ids), args.repeat)
    print(f"parse_node_ids: {python}   parse_joined: {compiled}   parse_id_columns on the joined buffer: "
          f"{columns_only}   (medians of {args.repeat})")


if __name__ == "__main__":
    main()
