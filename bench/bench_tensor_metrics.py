#!/usr/bin/env python3
"""Throughput of the tensor metrics of one pair (`compare_tensors`), side by side with another tree of graphcmp.

Usage::

    .venv/bin/python bench/bench_tensor_metrics.py [--tree OTHER] [--mb 64] [--rounds 5]

For each dtype (float32, float16) an npu tensor of ``--mb`` MB and its bench twin (the npu values with a relative
noise of the dtype's own precision, a few exact zeros) are made from a fixed seed. One process per tree makes the
same arrays and answers each request with the wall seconds of one ``compare_tensors`` call; the trees take turns
call by call, so both see the same machine (the 2-core machine is shared). Prints, per dtype and tree, the median
and range of the calls, the throughput in GB/s of tensor data (both tensors' bytes), and this tree's speed-up
against the other. ``--tree`` is the root of another checkout (``git archive main | tar -x -C DIR``), imported
through ``PYTHONPATH``. The reading of files is not timed: see ``bench_compare.py`` for whole runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SERVER = """
import gc, sys, time
import numpy as np
from graphcmp.core.tensor_metrics import compare_tensors
mb = float(sys.argv[1])
rng = np.random.default_rng(32)
pairs = {}
for dtype in (np.float32, np.float16):
    n = int(mb * 2**20) // np.dtype(dtype).itemsize
    npu = rng.standard_normal(n, dtype=np.float32).astype(dtype)
    npu[:: 1000] = 0
    noise = rng.standard_normal(n, dtype=np.float32) * np.finfo(dtype).eps
    bench = (npu.astype(np.float32) * (1 + noise)).astype(dtype)
    pairs[np.dtype(dtype).name] = (npu, bench)
print("ready", flush=True)
for line in sys.stdin:
    npu, bench = pairs[line.strip()]
    gc.collect()
    start = time.perf_counter()
    compare_tensors(npu, bench)
    print(time.perf_counter() - start, flush=True)
"""


class _Tree:
    def __init__(self, tree: Path, mb: float) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(mb)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=tempfile.gettempdir())
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{tree}: the benchmark process failed (exit {self.proc.wait()})")

    def time(self, dtype: str) -> float:
        self.proc.stdin.write(dtype + "\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="root of another graphcmp checkout to compare with")
    parser.add_argument("--mb", type=float, default=64.0, help="size of each tensor in MB (default 64)")
    parser.add_argument("--rounds", type=int, default=5, help="timed calls per dtype and tree (default 5)")
    args = parser.parse_args()
    trees = {"this tree": ROOT} | ({f"{args.tree}": args.tree} if args.tree else {})
    servers = {name: _Tree(path, args.mb) for name, path in trees.items()}
    try:
        print(f"| dtype | tree | median s | range s | GB/s (2 x {args.mb:g} MB) |")
        print("|---|---|---|---|---|")
        for dtype in ("float32", "float16"):
            for server in servers.values():
                server.time(dtype)  # warm-up: first touch of the pages, lazy imports
            times: dict[str, list[float]] = {name: [] for name in servers}
            for _ in range(args.rounds):
                for name, server in servers.items():
                    times[name].append(server.time(dtype))
            medians = {name: statistics.median(t) for name, t in times.items()}
            for name, t in times.items():
                rate = 2 * args.mb * 2**20 / medians[name] / 1e9
                print(f"| {dtype} | {name} | {medians[name]:.3f} | {min(t):.3f}-{max(t):.3f} | {rate:.2f} |")
            if args.tree:
                other = medians[str(args.tree)]
                print(f"| {dtype} | speed-up | {other / medians['this tree']:.1f}x | | |")
    finally:
        for server in servers.values():
            server.close()


if __name__ == "__main__":
    main()
