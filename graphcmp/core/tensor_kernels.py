"""The compiled kernels of tensor data, without numba where they are built ahead of time: a tensor's statistics
(`graphcmp.core.simd`) and a pair's metrics in two passes (`graphcmp.core.tensor_fused`).

They are a `KernelSet` (`graphcmp.core.compiled`): once built, loading them takes milliseconds. Until then numba
loads them, 0.5-0.7 s once per process (import, dispatchers, cached machine code), which is why the callers take
them only for inputs large enough to repay that (`pays`); a comparison that needed them starts their build in the
background as it ends (`build_later`), and the next one takes them for every input large enough to gain anything.
The build exports each kernel once per dtype (float16 as its uint16 bits, float32, float64; a pair's two sides in
every combination), each releasing the GIL: two threads measure two pairs at once.
"""

from __future__ import annotations

import math
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from graphcmp.core.compiled import KernelSet, build_detached
from graphcmp.core.tensor_fused_layout import CHUNK, COUNTS, FIXED_ONE, MAX_FIXED_CHUNK, PARTIALS, STATS_CHUNK

__all__ = ["KERNELS", "SIGNATURES", "build", "build_later", "first_pass", "kl_pass", "pays", "stats"]

_CODES = {np.dtype(np.uint16): "u2", np.dtype(np.float32): "f4", np.dtype(np.float64): "f8"}
"""The dtypes the kernels read, as numba names them: float16 comes as its uint16 bits."""

SIGNATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    **{f"first_pass__{a}_{b}": ("void", (f"{a}[::1]", f"{b}[::1]", "i8", "i8", "f8[:, ::1]", "i8[:, ::1]"))
       for a, b in product(_CODES.values(), repeat=2)},
    **{f"kl_chunks__{a}_{b}": ("void", (f"{a}[::1]", f"{b}[::1]", "i8", "f8[::1]", "u1[::1]", "i8[:, ::1]",
                                        "f8[::1]"))
       for a, b in product(_CODES.values(), repeat=2)},
    **{f"stats__{a}": ("Tuple((f8, f8, f8, f8, b1))", (f"{a}[::1]", "i8")) for a in _CODES.values()},
}
"""Each kernel once per dtype (``kernel__npu_bench``): what a build exports."""


def _dispatchers() -> dict[str, Any]:
    import graphcmp.core.simd as simd  # see tests/test_layers.py: LAZY_IMPORTS
    import graphcmp.core.tensor_fused as tensor_fused  # see tests/test_layers.py: LAZY_IMPORTS

    kernels = {"first_pass": tensor_fused._first_pass, "kl_chunks": tensor_fused._kl_chunks, "stats": simd._stats}
    return {name: kernels[name.split("__")[0]] for name in SIGNATURES}


KERNELS = KernelSet("tensor", Path(__file__).with_name("tensor_fused.py"), SIGNATURES, _dispatchers,
                    flags={"release_gil": True, "error_model": "numpy"}, host_cpu=True)

_LOAD_PAYS_FROM_BYTES = 1 << 30
"""Tensor bytes from which loading the kernels by numba (0.5-0.7 s) is repaid, at 0.5-1 ns saved per element."""
_BUILD_PAYS_FROM_BYTES = 64 << 20
"""Tensor bytes from which an input gains from kernels built ahead of time (a few milliseconds to load)."""
_wanted = False  # this process read or compared enough tensor data to gain from a build


def pays(nbytes: int) -> bool:
    """Whether the kernels are worth taking for `nbytes` of tensor files: any input of some size once they are built,
    else (numba loading them) a large one. A process that would gain from a build notes it for `build_later`."""
    global _wanted
    if nbytes < _BUILD_PAYS_FROM_BYTES:
        return False
    if KERNELS.built():
        return True
    _wanted = True
    return nbytes >= _LOAD_PAYS_FROM_BYTES


def _kernels() -> Any:
    """The kernels: the build (loaded in milliseconds) where there is one, else numba's; never built here."""
    return KERNELS.load(build=False)


def stats(values: np.ndarray) -> tuple[float, float, float, float] | None:
    """(max, min, sum, sum of squares) of a flat contiguous float16/32/64 array in float64, in one vectorised pass;
    None if it holds a NaN or an inf (the caller's numpy path gives those their meaning).

    >>> stats(np.array([3.0, -4.0], np.float16))
    (3.0, -4.0, -1.0, 25.0)
    """
    values = _bits_view(values)
    high, low, total, squares, special = getattr(_kernels(), f"stats__{_CODES[values.dtype]}")(values, STATS_CHUNK)
    return None if special else (high, low, total, squares)


def first_pass(npu: np.ndarray, bench: np.ndarray, chunk: int = CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """Per-chunk partial sums of the first pass over two flat contiguous arrays of equal size (float16/32/64).

    Returns
    -------
    tuple of numpy.ndarray
        float64 partials (one row per chunk, columns `tensor_fused_layout.NPU_SQ` ... ``BENCH_HIGH``) and int64
        counts (columns ``BELOW_1E3`` ... ``MISMATCH``). A chunk with a mismatched NaN/inf stops there and flags
        ``MISMATCH``; one holding matched NaN/inf flags ``NONFINITE``.
    """
    if npu.size != bench.size:  # the compiled loops do not check their indices
        raise ValueError(f"tensors of {npu.size} and {bench.size} elements")
    chunks = max(1, math.ceil(npu.size / chunk))
    partials, counts = np.zeros((chunks, PARTIALS)), np.zeros((chunks, COUNTS), dtype=np.int64)
    npu, bench = _bits_view(npu), _bits_view(bench)
    kernel = getattr(_kernels(), f"first_pass__{_CODES[npu.dtype]}_{_CODES[bench.dtype]}")
    kernel(npu, bench, chunk, 0, partials, counts)  # 0: a zero the compiled code cannot fold (`tensor_fused`)
    return partials, counts


def kl_pass(npu: np.ndarray, bench: np.ndarray, npu_range: tuple[float, float], bench_range: tuple[float, float],
            chunk: int = CHUNK, *, nonfinite: np.ndarray | None = None) -> tuple[float, float, float]:
    """kl's second pass: S (the sum of the npu side's scaled values), T - S and sum s log(s / t).
    `nonfinite`: per chunk, whether it holds matched NaN/inf (the first pass's ``NONFINITE`` column); those chunks
    are summed by the careful loop, the others by the vectorised one.

    S and T are exact sums rounded once (integers of `tensor_fused._fixed`), so T - S is too: kl adds log(T / S) to
    a nearly opposite term, where the rounding of two float sums would show. The whole pass is one compiled call, its
    log compiled too (`tensor_fused._log_ratio`): with numpy's log on each chunk, a pair cost a dozen Python calls per
    chunk, and two pairs measured at once waited for each other's GIL between them."""
    if chunk > MAX_FIXED_CHUNK:
        raise ValueError(f"kl's exact sums hold chunks of at most {MAX_FIXED_CHUNK} elements, not {chunk}")
    chunks = max(1, math.ceil(npu.size / chunk))
    flags = np.zeros(chunks, np.uint8) if nonfinite is None else np.ascontiguousarray(nonfinite, np.uint8)
    fixed, weighted = np.zeros((chunks, 4), np.int64), np.zeros(chunks)
    spans = np.array([npu_range[0], npu_range[1] - npu_range[0], bench_range[0], bench_range[1] - bench_range[0]])
    npu, bench = _bits_view(npu), _bits_view(bench)
    kernel = getattr(_kernels(), f"kl_chunks__{_CODES[npu.dtype]}_{_CODES[bench.dtype]}")
    kernel(npu, bench, chunk, spans, flags, fixed, weighted)
    s_high, s_low, t_high, t_low = (sum(column) for column in fixed.T.tolist())  # Python ints: no overflow
    s_total, t_total = (s_high << 38) + s_low, (t_high << 38) + t_low
    return s_total / FIXED_ONE, (t_total - s_total) / FIXED_ONE, math.fsum(weighted)


def _bits_view(array: np.ndarray) -> np.ndarray:
    """The array as the kernels read it: float16 as its uint16 bits, other dtypes unchanged."""
    return array.view(np.uint16) if array.dtype == np.float16 else array


def build() -> None:
    """Build the kernels where they are not built: what `build_later` runs."""
    KERNELS.load()


def build_later() -> bool:
    """Start building the kernels in a detached process at the lowest priority when this process would have gained
    from them (`pays`), they are not built and can be, and no build of them runs; whether it was started."""
    if not _wanted or not KERNELS.buildable():
        return False
    return build_detached(f"{__name__}:build")
