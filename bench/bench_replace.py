#!/usr/bin/env python3
"""What writing a result over an older one costs: a plain rename over it against `outputs.atomic_path`'s.

Usage::

    .venv/bin/python bench/bench_replace.py [--sizes 25 200 700] [--repeat 5] [--dir /tmp]

Each round writes an old result of the given size (MB, random bytes), flushes it to the disk (``--no-sync``:
leaves it in the page cache, as a result written a moment before is), then times the rename of a small new
file over it: once by `os.replace`, once through `write_atomic` (the old file freed by a process of its own),
alternated. Printed per size: the median and range of each, in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from graphcmp.core.outputs import write_atomic


def _old_result(path: Path, megabytes: int, sync: bool) -> None:
    block = os.urandom(1 << 20)
    with path.open("wb") as f:
        for _ in range(megabytes):
            f.write(block)
        if sync:
            f.flush()
            os.fsync(f.fileno())


def _plain(path: Path) -> None:
    new = path.with_name(path.name + ".new")
    new.write_bytes(b"new")
    os.replace(new, path)


def _ours(path: Path) -> None:
    write_atomic(path, b"new")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[25, 200, 700], help="old result sizes, MB")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--no-sync", action="store_true", help="leave the old result unflushed")
    args = parser.parse_args(argv)
    path = args.dir / f"graphcmp_bench_replace_{os.getpid()}.npz"
    print("| old result | rename over it (`os.replace`) | `write_atomic` |\n|---|---|---|")
    try:
        for size in args.sizes:
            times: dict[str, list[float]] = {"plain": [], "ours": []}
            for _ in range(args.repeat):
                for name, replace in (("plain", _plain), ("ours", _ours)):
                    _old_result(path, size, not args.no_sync)
                    start = time.perf_counter()
                    replace(path)
                    times[name].append((time.perf_counter() - start) * 1000)
            cells = [f"{statistics.median(v):.1f} ms [{min(v):.1f}-{max(v):.1f}]" for v in times.values()]
            print(f"| {size} MB | {cells[0]} | {cells[1]} |", flush=True)
    finally:
        path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
