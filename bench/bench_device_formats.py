#!/usr/bin/env python3
"""Speed of turning raw Ascend dump bytes into host tensors: `decode` then `to_original`, in GB/s of dump bytes.

Usage::

    .venv/bin/python bench/bench_device_formats.py [--mb 256] [--repeat 5]

Each case builds one device tensor of about ``--mb`` MB in memory (fp16 unless named otherwise), then times
``to_original(decode(raw, ...), ...)`` into float32, the path a raw-dump reader takes: fp16 NC1HWC0 feature map ->
NCHW (C not a multiple of C0, so padding is cut), fp16 FRACTAL_NZ matrix -> ND, fp16 FRACTAL_Z conv weight -> NCHW,
bf16 ND -> float32; and, for comparison, the textbook NC1HWC0 inverse (reshape, transpose, reshape, slice,
``astype``). The figures are dump bytes read per second (the float32 result is twice as many bytes
written): the best and the median wall time of ``--repeat`` runs, and the best CPU time of this thread (on a
machine other work shares, the time the conversion itself took). One thread: numpy's copies and lookups.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable

import numpy as np

from graphcmp.core.ascend_dtypes import DATA_TYPE_CODES, decode
from graphcmp.core.device_formats import to_original


def _case(name: str, data_type: str, fmt: str, device_shape: tuple[int, ...],
          original_shape: tuple[int, ...]) -> tuple[str, bytes, Callable[[bytes], np.ndarray]]:
    code = DATA_TYPE_CODES[data_type]
    itemsize = 2
    raw = np.random.default_rng(0).integers(0, 0x3C00, math.prod(device_shape), np.uint16).tobytes()
    assert len(raw) == math.prod(device_shape) * itemsize

    def convert(buffer: bytes) -> np.ndarray:
        flat = decode(memoryview(buffer), code, math.prod(device_shape))
        return to_original(flat, fmt, device_shape, original_shape, dtype=np.float32)

    return name, raw, convert


def cases(mb: int) -> list[tuple[str, bytes, Callable[[bytes], np.ndarray]]]:
    """Tensors of about `mb` MB of fp16 (bf16) dump bytes."""
    elements = mb * 2**20 // 2
    n, c, h, w = 32, 120, 0, 0                 # C = 120: C1 = 8 blocks of 16, the last one half padding
    h = w = int(math.sqrt(elements / (n * 128)))
    nz_h = nz_w = int(math.sqrt(elements))
    nz_h -= nz_h % 16 + 7                      # odd sizes: the last tile of each padded
    nz_w -= nz_w % 16 + 5
    k_out, k_in = 1024, 1000                   # conv weight 1024 x 1000 x k x k
    kk = max(1, int(math.sqrt(elements / (1024 * 1008))))
    return [
        _case(f"fp16 NC1HWC0 -> NCHW float32 ({n}x{c}x{h}x{w})", "DT_FLOAT16", "NC1HWC0",
              (n, 8, h, w, 16), (n, c, h, w)),
        _case(f"fp16 FRACTAL_NZ -> ND float32 ({nz_h}x{nz_w})", "DT_FLOAT16", "FRACTAL_NZ",
              (-(-nz_w // 16), -(-nz_h // 16), 16, 16), (nz_h, nz_w)),
        _case(f"fp16 FRACTAL_Z -> NCHW float32 ({k_out}x{k_in}x{kk}x{kk})", "DT_FLOAT16", "FRACTAL_Z",
              (63 * kk * kk, 64, 16, 16), (k_out, k_in, kk, kk)),
        _case(f"bf16 ND -> float32 ({elements})", "DT_BF16", "ND", (elements,), (elements,)),
        _textbook(f"reference: textbook NC1HWC0 inverse + astype ({n}x{c}x{h}x{w})", (n, 8, h, w, 16), c),
    ]


def _textbook(name: str, device_shape: tuple[int, ...], channels: int) -> tuple[str, bytes, Callable]:
    """The inverse map as msaccucmp writes it (reshape, transpose, reshape, slice) and numpy's own cast: what the
    figures above compare with."""
    n, c1, h, w, c0 = device_shape
    raw = np.random.default_rng(0).integers(0, 0x3C00, math.prod(device_shape), np.uint16).tobytes()

    def convert(buffer: bytes) -> np.ndarray:
        flat = np.frombuffer(buffer, "<f2")
        nchw = flat.reshape(device_shape).transpose(0, 1, 4, 2, 3).reshape(n, c1 * c0, h, w)[:, :channels]
        return nchw.astype(np.float32)

    return name, raw, convert


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=256, help="size of each device tensor in MB (default 256)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case (default 5)")
    args = parser.parse_args()
    print("| case | dump MB | GB/s wall, best | GB/s wall, median | GB/s CPU, best |\n|---|---|---|---|---|")
    for name, raw, convert in cases(args.mb):
        convert(raw)  # warm: page in the result's memory once
        wall, cpu = [], []
        for _ in range(args.repeat):
            start, start_cpu = time.perf_counter(), time.thread_time()
            out = convert(raw)
            wall.append(time.perf_counter() - start)
            cpu.append(time.thread_time() - start_cpu)
            del out
        gb = len(raw) / 1e9
        print(f"| {name} | {len(raw) / 2**20:.0f} | {gb / min(wall):.2f} | {gb / statistics.median(wall):.2f} "
              f"| {gb / min(cpu):.2f} |")


if __name__ == "__main__":
    main()
