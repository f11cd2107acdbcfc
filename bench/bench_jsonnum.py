#!/usr/bin/env python3
"""Speed of graphcmp.core.jsonnum against msgspec on the numbers of a statistics dump.

Usage::

    flock /work/notes/bench.lock .venv/bin/python bench/bench_jsonnum.py [--count 4000000] [--rounds 5]

Makes ``--count`` float32 values (standard normal, fixed seed) widened to float64 and printed by ``repr`` (as
msprobe's statistics hold them: ``0.10000000149011612``), as one JSON list. Prints, for the median of ``--rounds``
timed calls after one warm-up (compilation and cache loading excluded), the nanoseconds per number of

* ``parse_numbers``: the parse alone, from the tokens' spans;
* ``scan + parse``: from the JSON text, the tokens' spans found with ``scan_number``, then ``parse_numbers``;
* ``msgspec``: ``msgspec.json.decode(text, type=list[float])`` (a list of Python floats);
* ``orjson``: ``orjson.loads(text)``;

both as wall time and as this thread's processor time (less disturbed on a shared machine), and checks that all
agree bit for bit. The load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import msgspec
import numba
import numpy as np
import orjson

from graphcmp.core.jsonnum import NUMBER, parse_numbers, scan_number


@numba.njit(cache=True, nogil=True)
def token_spans(buf, capacity):  # pragma: no cover - compiled
    """The spans (starts, ends) of the first `capacity` numbers of a JSON list of numbers."""
    starts, ends = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
    count, i = 0, 0
    while i < buf.size and count < capacity:
        end = scan_number(buf, i, buf.size)
        if end > i:
            starts[count], ends[count] = i, end
            count += 1
            i = end
        else:
            i += 1
    return starts[:count], ends[:count]


@numba.njit(cache=True, nogil=True)
def scan_and_parse(buf, capacity):  # pragma: no cover - compiled
    """The first `capacity` numbers of a JSON list of numbers: (values, statuses). Two passes, the spans first:
    one loop that scans and parses each token in turn was 40 % slower (its branches mix)."""
    starts, ends = token_spans(buf, capacity)
    return parse_numbers(buf, starts, ends)


def timed(function, rounds: int) -> tuple[float, float, object]:
    """The median wall and processor seconds (this thread's) of `rounds` calls after a warm-up call, and the last
    result."""
    result = function()
    wall, processor = [], []
    for _ in range(rounds):
        start, start_processor = time.perf_counter(), time.thread_time()
        result = function()
        wall.append(time.perf_counter() - start)
        processor.append(time.thread_time() - start_processor)
    return statistics.median(wall), statistics.median(processor), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    numbers = rng.standard_normal(args.count).astype(np.float32).astype(np.float64)
    tokens = list(map(repr, numbers.tolist()))
    text = ("[" + ", ".join(tokens) + "]").encode()
    buf = np.frombuffer(text, np.uint8)
    lengths = np.fromiter(map(len, tokens), np.int64, len(tokens))
    starts = 1 + np.concatenate(([0], np.cumsum(lengths + 2)[:-1])).astype(np.int64)
    ends = starts + lengths
    expected = numbers.view(np.uint64)
    print(f"{args.count} numbers, {len(text) / args.count:.1f} bytes each; load average {os.getloadavg()[0]:.2f}")

    print(f"  {'':16s} {'wall':>6s} {'processor':>9s} (ns/number, median of {args.rounds})")

    def report(name: str, wall: float, processor: float, values: np.ndarray) -> None:
        assert (np.asarray(values, np.float64).view(np.uint64) == expected).all(), name
        print(f"  {name:16s} {wall * 1e9 / args.count:6.1f} {processor * 1e9 / args.count:9.1f}")

    wall, processor, (values, statuses) = timed(lambda: parse_numbers(buf, starts, ends), args.rounds)
    assert (statuses == NUMBER).all()
    report("parse_numbers", wall, processor, values)
    wall, processor, (values, statuses) = timed(lambda: scan_and_parse(buf, args.count), args.rounds)
    assert (statuses == NUMBER).all()
    report("scan + parse", wall, processor, values)
    decoder = msgspec.json.Decoder(list[float])
    wall, processor, values = timed(lambda: decoder.decode(text), args.rounds)
    report("msgspec", wall, processor, values)
    wall, processor, values = timed(lambda: orjson.loads(text), args.rounds)
    report("orjson", wall, processor, values)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
