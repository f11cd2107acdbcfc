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
reads as a markdown table, and this tree's change against the other. ``--layouts`` compares the folders instead
(the same dump in several JSON layouts): trees and folders take turns read by read, and each folder's median is
printed against the first's.
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


class TreeProcess:
    """A long-lived process running `code` with one tree's package (``PYTHONPATH``): it answers each line it is
    sent with the CPU seconds of one timed request. `bench_stages.py` uses it too."""

    def __init__(self, tree: Path, code: str, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # byte code compiled on every run would be timed too
        self.proc = subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=tempfile.gettempdir())

    def ready(self, what: str) -> None:
        """Wait for the process's "ready" line (a process that prepares before its first request)."""
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{what} failed (exit {self.proc.wait()})")

    def ask(self, line: str = "") -> float:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the process timing {line or 'the request'} stopped (exit {self.proc.wait()})")
        return float(answer)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def trees_to_time(other: str | None) -> dict[str, Path]:
    """This tree, and `other` (another checkout's root) first when given, their byte code compiled once, outside
    the timed requests."""
    trees = {"this tree": ROOT}
    if other:
        trees = {f"other ({Path(other).name})": Path(other).resolve(), **trees}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for tree in trees.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "graphcmp")], check=True, env=env)
    return trees


def take_turns(processes: dict[str, TreeProcess], rounds: int, line: str = "") -> dict[str, list[float]]:
    """Each process's CPU seconds for `line`, `rounds` times, after one warm-up; the trees take turns, in
    alternating order, so both see the same machine."""
    times = in_turn(processes, rounds, [line])
    print(f"  {line or 'request'}: " + ", ".join(f"{name} {statistics.median(times[(line, name)]):.3f} s"
                                                 for name in processes), file=sys.stderr, flush=True)
    return {name: times[(line, name)] for name in processes}


def in_turn(processes: dict[str, TreeProcess], rounds: int, lines: list[str]) -> dict[tuple[str, str], list[float]]:
    """CPU seconds per (line, tree) of each of `lines` `rounds` times in each tree's process, after one warm-up each:
    round by round the trees take turns and, within a tree's turn, the lines, both in alternating order."""
    for process in processes.values():
        for line in lines:
            process.ask(line)
    times: dict[tuple[str, str], list[float]] = {(line, name): [] for name in processes for line in lines}
    for round_ in range(rounds):
        forward = round_ % 2 == 0
        for name, process in list(processes.items()) if forward else list(processes.items())[::-1]:
            for line in lines if forward else lines[::-1]:
                times[(line, name)].append(process.ask(line))
    return times


def print_table(what: str, measured: str, times: dict[tuple[str, str], list[float]], rounds: int,
                trees: dict[str, Path]) -> None:
    """The medians and ranges per (`what`, tree) as a markdown table, then this tree's change against the other."""
    print(f"| {what} | tree | {measured}, median [range] of {rounds} |")
    print("|---|---|---|")
    for (item, name), values in times.items():
        print(f"| {item} | {name} | {statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}] |")
    if len(trees) > 1:
        other = next(iter(trees))
        for item in dict.fromkeys(item for item, _ in times):
            before = statistics.median(times[(item, other)])
            after = statistics.median(times[(item, "this tree")])
            print(f"\n{item}: {after / before - 1:+.1%} (medians {before:.3f} -> {after:.3f} s)")


def print_layouts(times: dict[tuple[str, str], list[float]], folders: list[str]) -> None:
    """Each folder's median against the first folder's, per tree."""
    for name in dict.fromkeys(name for _, name in times):
        first = statistics.median(times[(folders[0], name)])
        for folder in folders[1:]:
            median = statistics.median(times[(folder, name)])
            print(f"\n{name}: {folder} {median / first - 1:+.1%} against {folders[0]} "
                  f"(medians {first:.3f} -> {median:.3f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="msprobe rank folders (dump.json, construct.json, stack.json)")
    parser.add_argument("--tree", help="root of another graphcmp tree to time alternately")
    parser.add_argument("--rounds", type=int, default=15, help="timed reads per folder and tree")
    parser.add_argument("--layouts", action="store_true",
                        help="the folders hold one dump in several layouts: read them in turn, compare with the first")
    args = parser.parse_args(argv)
    trees = trees_to_time(args.tree)
    readers = {name: TreeProcess(tree, _SERVER) for name, tree in trees.items()}
    times: dict[tuple[str, str], list[float]] = {}
    try:
        if args.layouts:
            times = in_turn(readers, args.rounds, args.paths)
        else:
            for folder in args.paths:
                for name, values in take_turns(readers, args.rounds, folder).items():
                    times[(folder, name)] = values
    finally:
        for reader in readers.values():
            reader.close()
    print_table("dump", "read CPU s", times, args.rounds, trees)
    if args.layouts:
        print_layouts(times, args.paths)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
