"""Throughput of MindSpore kernel dumps: read (statistics of every ``.npy``) and compare two dumps with real tensors.

    python bench/bench_mindspore_dump.py [--gb 1.0] [--ops 64] [--keep DIR] [--repeat 3] [--read-only]

Writes two MindSpore kernel dumps (``e2e_dump_settings`` layout: ``rank_0/execution_order/*.csv`` and
``rank_0/net/0/0/{type}.{name}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy``) of a chain
of `--ops` kernels, one input and one output each: an "npu" dump in float16 (about `--gb` GB of tensor bytes) and a
"bench" dump of the same kernels in float32. Then times `read_graph` of the npu dump (every tensor's statistics) and
a whole comparison (both dumps read, every pair's real-tensor metrics), and prints the median of `--repeat` runs by
the clock and by the processor time of the process (all its threads), with the throughput of the npu dump's tensor
bytes. `--keep DIR` writes the dumps there once and reads them again on later runs.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_ascend import timed  # noqa: E402  (this folder is the script's first path)


def make(folder: Path, gb: float, ops: int) -> int:
    """Both dumps; returns the npu dump's tensor bytes."""
    per_tensor = int(gb * 1e9 / (2 * ops))
    rng = np.random.default_rng(0)
    current = rng.standard_normal(per_tensor // 2).astype(np.float32)
    names = [f"Default/net/layer{k}/Mul-op{k}" for k in range(ops)]
    total = 0
    for side, dtype, label in (("npu", np.float16, "Float16"), ("bench", np.float32, "Float32")):
        rank = folder / side / "rank_0"
        (rank / "execution_order").mkdir(parents=True)
        (rank / "execution_order" / "ms_execution_order_graph_0.csv").write_text(
            "NodeExecutionOrder-FullNameWithScope\n" + "\n".join(names) + "\n")
        data = rank / "net" / "0" / "0"
        data.mkdir(parents=True)
        x = current
        for k, name in enumerate(names):
            out = x * np.float32(1.001)
            stem = f"Mul.{name.replace('/', '_')}.0.0.{10**15 + 100 * k}"
            for role, array in (("input", x), ("output", out)):
                values = array.astype(dtype)
                np.save(data / f"{stem}.{role}.0.DefaultFormat.{label}.npy", values)
                if side == "npu":
                    total += values.nbytes
            x = out
    return total


def written(folder: Path) -> int:
    return sum(path.stat().st_size - 128 for path in (folder / "npu").rglob("*.npy"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--ops", type=int, default=64)
    ap.add_argument("--keep", help="write the dumps here and keep them (read again when they are there)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--read-only", action="store_true")
    a = ap.parse_args()
    folder = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-msdump-"))
    try:
        if (folder / "npu").is_dir():
            total = written(folder)
            print(f"reading {total / 1e9:.2f} GB of npu tensors written before in {folder}")
        else:
            t0 = time.perf_counter()
            total = make(folder, a.gb, a.ops)
            print(f"wrote {total / 1e9:.2f} GB of float16 npu tensors (and their float32 twins) in "
                  f"{time.perf_counter() - t0:.1f} s")
        from graphcmp.core.readers import read_graph

        timed("read the npu dump (statistics of every tensor)", total, a.repeat, lambda: read_graph(folder / "npu"))
        if not a.read_only:
            from graphcmp.core.compare import compare_graphs
            from graphcmp.core.tensorcmp import tensor_metrics_for

            def compare() -> None:
                npu, bench = read_graph(folder / "npu"), read_graph(folder / "bench")
                compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))

            timed("compare with the float32 dump (read both, every metric)", total, a.repeat, compare)
        print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
    finally:
        if not a.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
