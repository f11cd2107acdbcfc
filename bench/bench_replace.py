#!/usr/bin/env python3
"""What putting a result in place of an older one costs: a plain rename over it against `outputs.atomic_path`'s.

Usage::

    .venv/bin/python bench/bench_replace.py [--sizes 25 200 700] [--repeat 5] [--dir /tmp]

Each round writes an old result of the given size (MB, random bytes) and flushes it to the disk, then writes a
new result of the same size beside it (left in the page cache, as a comparison leaves it) and times putting it in
place: once by `os.replace`, once as `atomic_path` does (`outputs._replace`: the names swapped, the old file freed
by a process of its own), alternated. ``--small-new`` makes the new result 3 bytes (only the old file's freeing
is left to time). Printed per size: the median and range of each, in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from graphcmp.core.outputs import _replace


def _result(path: Path, megabytes: int, sync: bool) -> None:
    block = os.urandom(1 << 20)
    with path.open("wb") as f:
        for _ in range(megabytes):
            f.write(block)
        if sync:
            f.flush()
            os.fsync(f.fileno())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[25, 200, 700], help="old result sizes, MB")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--small-new", action="store_true", help="a new result of 3 bytes")
    args = parser.parse_args(argv)
    path = args.dir / f"graphcmp_bench_replace_{os.getpid()}.npz"
    new = path.with_name("." + path.name + ".new")
    print("| results (old, new) | rename over it (`os.replace`) | `atomic_path`'s `_replace` |\n|---|---|---|")
    try:
        for size in args.sizes:
            times: dict[str, list[float]] = {"plain": [], "ours": []}
            for _ in range(args.repeat):
                for name, replace in (("plain", os.replace), ("ours", _replace)):
                    _result(path, size, True)
                    if args.small_new:
                        new.write_bytes(b"new")
                    else:
                        _result(new, size, False)
                    start = time.perf_counter()
                    replace(new, path)
                    times[name].append((time.perf_counter() - start) * 1000)
            cells = [f"{statistics.median(v):.1f} ms [{min(v):.1f}-{max(v):.1f}]" for v in times.values()]
            print(f"| {size} MB, {3e-6 if args.small_new else size:g} MB | {cells[0]} | {cells[1]} |", flush=True)
    finally:
        path.unlink(missing_ok=True)
        new.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
