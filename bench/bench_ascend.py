"""Throughput of Ascend raw dumps: read (decode, device format back to NCHW, statistics) and compare with golden data.

    python bench/bench_ascend.py [--gb 1.0] [--ops 64] [--format NC1HWC0|ND] [--keep DIR]

Writes a raw dump of `--ops` ops, each with one float16 input and one float16 output (NCHW tensors stored as
NC1HWC0, C = 24 so a third of the device bytes is padding, or ND), about `--gb` GB of tensor bytes in all, and
float32 golden files for every output, with the writer of tests/data/ascend_mlp; then times
`read_ascend_dump` (every tensor decoded, turned back and measured once) and `graphcmp compare` with real-tensor
metrics. Throughput is the dump's tensor bytes over the time. Peak memory (ru_maxrss) is printed too: tensors are
mapped, one at a time.
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

from tests.data.ascend_mlp.make_ascend_cases import FMT, write_dump  # noqa: E402


def nc1hwc0(x: np.ndarray) -> np.ndarray:
    """NCHW -> (N, C1, H, W, 16), zero padded (the forward layout, C0 = 16)."""
    n, c, h, w = x.shape
    c1 = -(-c // 16)
    padded = np.zeros((n, c1 * 16, h, w), x.dtype)
    padded[:, :c] = x
    return padded.reshape(n, c1, 16, h, w).transpose(0, 1, 3, 4, 2).copy()


def make(folder: Path, gb: float, ops: int, fmt: str) -> int:
    run = folder / "npu" / "20250101000000" / "0" / "m" / "1" / "0"
    golden = folder / "golden"
    run.mkdir(parents=True)
    golden.mkdir()
    per_tensor = int(gb * 1e9 / (2 * ops))
    c, h = 24, 64
    w = max(1, per_tensor // (2 * h * (32 if fmt == "NC1HWC0" else c)))  # fp16; NC1HWC0 pads 24 channels to 32
    rng = np.random.default_rng(0)
    current = rng.standard_normal((1, c, h, w)).astype(np.float32)
    np.save(golden / f"x.0.{10**15}.npy", current)
    total = 0
    for k in range(ops):
        out = current * np.float32(1.001)
        name = f"layer{k}/Scale"
        tensors = []
        for array in (current, out):
            host = array.astype(np.float16)
            device = nc1hwc0(host) if fmt == "NC1HWC0" else host
            tensors.append({"raw": device.tobytes(), "dtype": 2, "format": 3 if fmt == "NC1HWC0" else FMT["NCHW"],
                            "shape": list(device.shape), "original_shape": list(host.shape), "origin": None,
                            "address": 0x1000})
        tensors[1]["origin"] = (name, 0)
        total += sum(len(t["raw"]) for t in tensors)
        ts = 10**15 + 100 * (k + 1)
        write_dump(run / f"Mul.layer{k}_Scale.{k + 2}.0.{ts}", name, ts, [tensors[0]], [tensors[1]])
        np.save(golden / f"layer{k}_Scale.0.{ts - 50}.npy", out)
        current = out
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--ops", type=int, default=64)
    ap.add_argument("--format", choices=("NC1HWC0", "ND"), default="NC1HWC0")
    ap.add_argument("--keep", help="write the dump here and keep it")
    a = ap.parse_args()
    folder = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-ascend-"))
    try:
        t0 = time.perf_counter()
        total = make(folder, a.gb, a.ops, a.format)
        print(f"wrote {total / 1e9:.2f} GB of {a.format} tensors in {time.perf_counter() - t0:.1f} s")
        from graphcmp.core.readers.ascend_dump import read_ascend_dump

        t0 = time.perf_counter()
        read_ascend_dump(folder / "npu")
        read = time.perf_counter() - t0
        print(f"read (decode, to NCHW, statistics): {read:.2f} s, {total / 1e9 / read:.2f} GB/s")
        from graphcmp.core.compare import compare_graphs
        from graphcmp.core.readers.ascend_golden import read_npu_and_golden
        from graphcmp.core.tensorcmp import tensor_metrics_for

        t0 = time.perf_counter()
        npu, bench = read_npu_and_golden(folder / "npu", folder / "golden")
        compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))
        whole = time.perf_counter() - t0
        print(f"compare with golden (read both, every metric): {whole:.2f} s, {total / 1e9 / whole:.2f} GB/s")
        print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
    finally:
        if not a.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
