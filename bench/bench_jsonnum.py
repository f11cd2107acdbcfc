#!/usr/bin/env python3
"""Speed of graphcmp.core.jsonnum against msgspec on the numbers of a statistics dump.

Usage::

    flock /work/notes/bench.lock .venv/bin/python bench/bench_jsonnum.py [--count 4000000] [--rounds 5]

Makes ``--count`` float32 values (standard normal, fixed seed) widened to float64 and printed by ``repr`` (as
msprobe's statistics hold them: ``0.10000000149011612``), as one JSON list. Prints, for the median of ``--rounds``
timed calls after one warm-up (compilation and cache loading excluded), the nanoseconds per number of

* ``parse_numbers``: the parse alone, from the tokens' spans;
* ``scan + parse``: a compiled loop that finds each token with ``scan_number`` and parses it, from the JSON text;
* ``msgspec``: ``msgspec.json.decode(text, type=list[float])`` (a list of Python floats);
* ``orjson``: ``orjson.loads(text)``;

and checks that all agree bit for bit. The load average is printed with the figures (the machine is shared).
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

from graphcmp.core.jsonnum import NUMBER, parse_number, parse_numbers, scan_number


@numba.njit(cache=True, nogil=True)
def scan_and_parse(buf):  # pragma: no cover - compiled
    """Every number of a JSON list of numbers: (values, statuses)."""
    values = np.empty(buf.size // 2 + 1, np.float64)
    statuses = np.empty(buf.size // 2 + 1, np.int64)
    count, i = 0, 0
    while i < buf.size:
        end = scan_number(buf, i, buf.size)
        if end > i:
            values[count], statuses[count] = parse_number(buf, i, end)
            count += 1
            i = end
        else:
            i += 1
    return values[:count], statuses[:count]


def timed(function, rounds: int) -> tuple[float, object]:
    """The median wall seconds of `rounds` calls after a warm-up call, and the last result."""
    result = function()
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = function()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


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

    def report(name: str, seconds: float, values: np.ndarray) -> None:
        assert (np.asarray(values, np.float64).view(np.uint64) == expected).all(), name
        print(f"  {name:16s} {seconds * 1e9 / args.count:6.1f} ns/number")

    seconds, (values, statuses) = timed(lambda: parse_numbers(buf, starts, ends), args.rounds)
    assert (statuses == NUMBER).all()
    report("parse_numbers", seconds, values)
    seconds, (values, statuses) = timed(lambda: scan_and_parse(buf), args.rounds)
    assert (statuses == NUMBER).all()
    report("scan + parse", seconds, values)
    decoder = msgspec.json.Decoder(list[float])
    seconds, values = timed(lambda: decoder.decode(text), args.rounds)
    report("msgspec", seconds, values)
    seconds, values = timed(lambda: orjson.loads(text), args.rounds)
    report("orjson", seconds, values)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
