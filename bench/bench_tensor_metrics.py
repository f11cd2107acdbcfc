#!/usr/bin/env python3
"""Throughput of the tensor metrics of one pair (`compare_tensors`), side by side with another tree of graphcmp.

Usage::

    .venv/bin/python bench/bench_tensor_metrics.py [--tree OTHER] [--mb 64] [--rounds 5] [--pt DIR] [--fused]

For each dtype (float32, float16) an npu tensor of ``--mb`` MB and its bench twin (the npu values with a relative
noise of the dtype's own precision, a few exact zeros) are made from a fixed seed. One process per tree makes the
same arrays and answers each request with the wall seconds of one ``compare_tensors`` call; the trees take turns
call by call, so both see the same machine (the 2-core machine is shared). Prints, per dtype and tree, the median
and range of the calls, the throughput in GB/s of tensor data (both tensors' bytes), and this tree's speed-up
against the other. ``--tree`` is the root of another checkout (``git archive main | tar -x -C DIR``), imported
through ``PYTHONPATH``. ``--pt DIR`` writes each pair as two ``.pt`` files laid out as ``torch.save`` writes them
(a zip of ``data.pkl`` and the raw storage; no torch needed) into DIR (keep it out of the repo, e.g. /tmp) and times
``read_tensor`` of both files plus ``compare_tensors``: the whole per-pair cost of tensor mode. ``--fused`` passes
``fused=True`` (the compiled kernels of core/tensor_fused.py) to the trees that accept it.
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

_SERVER = r"""
import gc, os, struct, sys, time, zipfile
import numpy as np
from graphcmp.core.tensor_metrics import compare_tensors
from graphcmp.core.tensorio import read_tensor
mb, folder = float(sys.argv[1]), sys.argv[2]
import functools, inspect
if sys.argv[3] == "fused" and "fused" in inspect.signature(compare_tensors).parameters:
    compare_tensors = functools.partial(compare_tensors, fused=True)  # the compiled kernels, where the tree has them

def write_pt(path, array):
    storage = {"float32": "FloatStorage", "float16": "HalfStorage"}[array.dtype.name]
    ints = lambda *v: b"(" + b"".join(b"J" + struct.pack("<i", x) for x in v) + b"t"
    pickled = (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(" + b"(X\x07\x00\x00\x00storage" +
               f"ctorch\n{storage}\n".encode() + b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpu" +
               b"J" + struct.pack("<i", array.size) + b"tQ" + b"J\x00\x00\x00\x00" + ints(array.size) + ints(1) +
               b"\x89ccollections\nOrderedDict\n)Rt" + b"R.")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickled)
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/data/0", array.tobytes())
        archive.writestr("archive/version", "3\n")
rng = np.random.default_rng(32)
pairs = {}
for dtype in (np.float32, np.float16):
    n = int(mb * 2**20) // np.dtype(dtype).itemsize
    npu = rng.standard_normal(n, dtype=np.float32).astype(dtype)
    npu[:: 1000] = 0
    noise = rng.standard_normal(n, dtype=np.float32) * np.finfo(dtype).eps
    bench = (npu.astype(np.float32) * (1 + noise)).astype(dtype)
    name = np.dtype(dtype).name
    if folder:
        files = [os.path.join(folder, f"{side}.{name}.pt") for side in ("npu", "bench")]
        if not all(os.path.exists(f) for f in files):  # the same seed: every tree writes the same bytes
            for file, array in zip(files, (npu, bench)):
                write_pt(file + f".{os.getpid()}", array)
                os.replace(file + f".{os.getpid()}", file)
        assert np.array_equal(read_tensor(files[0]), npu)
        pairs[name] = files
        del npu, bench
    else:
        pairs[name] = (npu, bench)
print("ready", flush=True)
for line in sys.stdin:
    npu, bench = pairs[line.strip()]
    gc.collect()
    start = time.perf_counter()
    if folder:
        compare_tensors(read_tensor(npu), read_tensor(bench))
    else:
        compare_tensors(npu, bench)
    print(time.perf_counter() - start, flush=True)
"""


class _Tree:
    def __init__(self, tree: Path, mb: float, folder: str, fused: bool = False) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        command = [sys.executable, "-c", _SERVER, str(mb), folder, "fused" if fused else "numpy"]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE,
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
    parser.add_argument("--pt", type=Path, help="write the pairs as .pt files here and time reading them too")
    parser.add_argument("--rounds", type=int, default=5, help="timed calls per dtype and tree (default 5)")
    parser.add_argument("--fused", action="store_true",
                        help="compare_tensors(fused=True): the compiled kernels, in trees that have them")
    args = parser.parse_args()
    trees = {"this tree": ROOT} | ({f"{args.tree}": args.tree} if args.tree else {})
    if args.pt:
        args.pt.mkdir(parents=True, exist_ok=True)
    servers = {name: _Tree(path, args.mb, str(args.pt or ""), args.fused) for name, path in trees.items()}
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
