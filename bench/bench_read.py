#!/usr/bin/env python3
"""CPU time of reading one msprobe rank folder (`read_msprobe`), side by side with another tree of graphcmp.

Usage::

    .venv/bin/python bench/bench_read.py DUMP_DIR... [--tree OTHER] [--rounds 15]

One process per tree stays up and reads on request: each folder is read once to warm up (imports, the
reader's lazy imports), then the trees take turns read by read (``--rounds`` times each), so both see the same
machine (the 2-core machine is shared and its speed drifts within seconds). Each read is timed by its CPU time
(``time.process_time`` after a ``gc.collect()``: a read that waits for a core is not counted as slower, unlike
wall time). ``--tree`` is the root of another checkout (``git archive main | tar -x -C DIR``); its process
imports that tree's package through ``PYTHONPATH``. Prints, per folder and tree, the median and range of the
reads as a markdown table, and this tree's change against the other.
`bench_scale.py read` times whole processes (wall, peak RSS) instead.
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
from graphcmp.core.readers.msprobe import read_msprobe
for line in sys.stdin:
    gc.collect()
    start = time.process_time()
    graph = read_msprobe(line.rstrip("\\n"))
    took = time.process_time() - start
    del graph
    print(took, flush=True)
"""


class _Reader:
    """A process reading rank folders with one tree's package, one per request."""

    def __init__(self, tree: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # byte code compiled on every run would be timed too
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env, cwd=tempfile.gettempdir())

    def read(self, folder: str) -> float:
        self.proc.stdin.write(folder + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the reader of {folder} stopped (exit {self.proc.wait()})")
        return float(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="msprobe rank folders (dump.json, construct.json, stack.json)")
    parser.add_argument("--tree", help="root of another graphcmp tree to time alternately")
    parser.add_argument("--rounds", type=int, default=15, help="timed reads per folder and tree")
    args = parser.parse_args(argv)
    trees = {"this tree": ROOT}
    if args.tree:
        trees = {f"other ({Path(args.tree).name})": Path(args.tree).resolve(), **trees}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for tree in trees.values():  # compile each tree's byte code once, outside the timed reads
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "graphcmp")], check=True, env=env)
    readers = {name: _Reader(tree) for name, tree in trees.items()}
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for folder in args.paths:
            for reader in readers.values():
                reader.read(folder)  # warm-up
            for round_ in range(args.rounds):
                order = list(readers.items()) if round_ % 2 == 0 else list(readers.items())[::-1]
                for name, reader in order:
                    times.setdefault((folder, name), []).append(reader.read(folder))
            print(f"  {folder}: " + ", ".join(f"{name} {statistics.median(times[(folder, name)]):.3f} s"
                                               for name in readers), file=sys.stderr, flush=True)
    finally:
        for reader in readers.values():
            reader.close()
    print(f"| dump | tree | read CPU s, median [range] of {args.rounds} |")
    print("|---|---|---|")
    for (folder, name), values in times.items():
        print(f"| {folder} | {name} | {_cell(values)} |")
    if args.tree:
        other = next(iter(trees))
        for folder in args.paths:
            before = statistics.median(times[(folder, other)])
            after = statistics.median(times[(folder, "this tree")])
            print(f"\n{folder}: {after / before - 1:+.1%} (medians {before:.3f} -> {after:.3f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
