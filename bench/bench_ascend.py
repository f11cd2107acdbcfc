"""Throughput of Ascend raw dumps: read (decode, device format back to NCHW, statistics) and compare with golden data.

    python bench/bench_ascend.py [--gb 1.0] [--ops 64] [--format NC1HWC0|ND] [--keep DIR] [--repeat 3] [--read-only]

Writes a raw dump of `--ops` ops, each with one float16 input and one float16 output (NCHW tensors stored as
NC1HWC0, C = 24 so a third of the device bytes is padding, or ND), about `--gb` GB of tensor bytes in all, and
float32 golden files for every output, with the writer of tests/data/ascend_mlp; then times
`read_ascend_dump` (every tensor decoded, turned back and measured once) and `graphcmp compare` with real-tensor
metrics. Throughput is the dump's tensor bytes over the time: the median of `--repeat` runs, by the clock and by the
processor time of the process (all its threads; on a machine shared with other jobs the clock says more about them).
Peak memory (ru_maxrss) is printed too: tensors are mapped, one at a time per reading thread. `--keep DIR` writes
the dump there once and reads it again on later runs with the same `--keep`.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.data.ascend_mlp.make_ascend_cases import FMT, nc1hwc0, write_dump  # noqa: E402


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


def timed(label: str, total: int, repeat: int, work) -> None:
    """Run `work` `repeat` times and print the median clock and processor times as throughput."""
    clock, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        work()
        clock.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    wall, busy = statistics.median(clock), statistics.median(cpu)
    print(f"{label}: {wall:.2f} s, {total / 1e9 / wall:.2f} GB/s (processor {busy:.2f} s, {total / 1e9 / busy:.2f} "
          f"GB/s; runs {', '.join(f'{t:.2f}' for t in clock)} s)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--ops", type=int, default=64)
    ap.add_argument("--format", choices=("NC1HWC0", "ND"), default="NC1HWC0")
    ap.add_argument("--keep", help="write the dump here and keep it (read again when it is there)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each measurement (their median is printed)")
    ap.add_argument("--read-only", action="store_true", help="time the reader only, not the comparison")
    a = ap.parse_args()
    folder = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="bench-ascend-"))
    try:
        if (folder / "npu").is_dir():
            total = written(folder / "npu")
            print(f"reading {total / 1e9:.2f} GB of tensors written before in {folder}")
        else:
            t0 = time.perf_counter()
            total = make(folder, a.gb, a.ops, a.format)
            print(f"wrote {total / 1e9:.2f} GB of {a.format} tensors in {time.perf_counter() - t0:.1f} s")
        from graphcmp.core.readers.ascend_dump import read_ascend_dump, read_workers

        print(f"{read_workers()} reading threads")
        timed("read (decode, to NCHW, statistics)", total, a.repeat, lambda: read_ascend_dump(folder / "npu"))
        if not a.read_only:
            from graphcmp.core.compare import compare_graphs
            from graphcmp.core.readers.ascend_golden import read_npu_and_golden
            from graphcmp.core.tensorcmp import tensor_metrics_for

            def compare() -> None:
                npu, bench = read_npu_and_golden(folder / "npu", folder / "golden")
                compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))

            timed("compare with golden (read both, every metric)", total, a.repeat, compare)
        print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
    finally:
        if not a.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def written(run: Path) -> int:
    """Tensor bytes of the dump files under `run` (their headers' sizes)."""
    from graphcmp.core.readers.ascend_file import read_header

    return sum(t.size for path in run.rglob("*") if path.is_file() for t in read_header(path).tensors)


if __name__ == "__main__":
    sys.exit(main())
