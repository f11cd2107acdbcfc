"""Compiled kernels for the tensor metrics of large pairs: every sum of a pair in one pass, kl in a second.

`graphcmp.core.tensor_metrics` computes the same sums with numpy, block by block; this module does it with
numba-compiled loops, for comparisons large enough to repay loading numba (``compare_tensors(fused=True)``).
Each element is read once per pass at its own width (float16 decoded from its bits in the loop, float32 and
float64 as they are), upcast to float64 in registers, and added to float64 accumulators. The tensor is cut into
chunks of `CHUNK` elements summed in order, and the chunks' partial sums are added with ``math.fsum``: a result
differs from whole-array float64 arithmetic by summation order only.

A pair is measured on the calling thread, which releases the GIL in the compiled loops and in numpy's log:
`graphcmp.core.tensorcmp` measures two pairs at once, one per core. Splitting one pair over both cores
(``prange``) was measured slower on the shared 2-core machine: each call waits for the second thread's wake-up,
several milliseconds when other jobs hold the cores (bench/README.md, issue 32).

Compiled code is cached on disk (``cache=True``): the first comparison after an install compiles each dtype
pair once (a few seconds); later ones load it.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

__all__ = ["CHUNK", "SUPPORTED", "first_pass", "kl_pass"]

CHUNK = 1 << 14
"""Elements per chunk: a chunk is summed in order, the chunks' sums exactly; kl's buffers (2 x 128 KB) stay in
cache."""

SUPPORTED = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)})
"""The dtypes the kernels read (float16 as its uint16 bits); other dtypes take numpy's path."""

_EPS = float(np.finfo(np.float64).eps)
_KL_FLOOR = float(np.finfo(np.float32).eps)

# columns of the per-chunk float64 partials of the first pass
(NPU_SQ, BENCH_SQ, DOT, DIFF_SQ, ABS_SUM, MAX_ABS, MAX_REL, REL_NZ_SUM, REL_NZ_MAX,
 NPU_LOW, NPU_HIGH, BENCH_LOW, BENCH_HIGH) = range(13)
# columns of the per-chunk integer partials: counts below 1e-3 and 5e-3, matched non-finite seen, mismatch seen
BELOW_1E3, BELOW_5E3, NONFINITE, MISMATCH = range(4)

_HALF_SCALE = np.array([2.0 ** -24] + [2.0 ** (e - 25) for e in range(1, 32)])
"""float16 exponent field -> the weight of one unit of the 11-bit significand (field 0: subnormals)."""


def _as_float(value):  # pragma: no cover - replaced by the overload inside compiled code
    raise NotImplementedError("compiled code only")


@overload(_as_float)
def _as_float_impl(value):
    if isinstance(value, types.Integer) and value.bitwidth == 16 and not value.signed:
        def half(value):  # IEEE binary16 bits -> float64, exactly
            bits = np.int64(value)
            field = (bits >> 10) & 0x1F
            fraction = bits & 0x3FF
            if field == 0x1F:
                magnitude = np.inf if fraction == 0 else np.nan
            else:
                magnitude = (fraction + (1024 if field else 0)) * _HALF_SCALE[field]
            return -magnitude if bits & 0x8000 else magnitude
        return half
    return lambda value: np.float64(value)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _chunk_sums(npu, bench, lo, hi, careful, row, counts):  # pragma: no cover - compiled
    """Sums of elements lo:hi into `row` and `counts`. Not `careful`: every value is taken as it is, and
    counts[NONFINITE] says whether a NaN/inf was met (the caller then sums the chunk again, carefully).
    `careful`: NaN/inf held by both sides at the same position count as 0 and 0; any other stops the chunk
    with counts[MISMATCH] set."""
    npu_sq = bench_sq = dot = diff_sq = abs_sum = max_abs = max_rel = rel_nz_sum = rel_nz_max = 0.0
    npu_low = bench_low = np.inf
    npu_high = bench_high = -np.inf
    below_1e3 = below_5e3 = 0
    nonfinite = 0.0  # (x - x) + (y - y) summed: NaN once a NaN or an inf was met
    for i in range(lo, hi):
        x = _as_float(npu[i])
        y = _as_float(bench[i])
        if careful and not (math.isfinite(x) and math.isfinite(y)):
            if x == y or (x != x and y != y):  # the same NaN/inf on both sides: an exact match
                x = y = 0.0
            else:
                counts[MISMATCH] = 1
                return
        nonfinite += (x - x) + (y - y)
        npu_sq += x * x
        bench_sq += y * y
        dot += x * y
        npu_low = x if x < npu_low else npu_low
        npu_high = x if x > npu_high else npu_high
        bench_low = y if y < bench_low else bench_low
        bench_high = y if y > bench_high else bench_high
        d = x - y
        diff_sq += d * d
        ad = abs(d)
        abs_sum += ad
        max_abs = ad if ad > max_abs else max_abs
        ab = abs(y)
        rel = ad / ab
        if y == 0.0:  # msprobe adds eps to both values where bench is 0
            rel = abs((x + _EPS) - _EPS) / _EPS
        rel_nz = rel if ab > _EPS else 0.0  # msaccucmp counts |bench| <= eps as 0
        max_rel = rel if rel > max_rel else max_rel
        below_1e3 += rel < 0.001
        below_5e3 += rel < 0.005
        rel_nz_sum += rel_nz
        rel_nz_max = rel_nz if rel_nz > rel_nz_max else rel_nz_max
    row[NPU_SQ], row[BENCH_SQ], row[DOT], row[DIFF_SQ] = npu_sq, bench_sq, dot, diff_sq
    row[ABS_SUM], row[MAX_ABS], row[MAX_REL], row[REL_NZ_SUM], row[REL_NZ_MAX] = (
        abs_sum, max_abs, max_rel, rel_nz_sum, rel_nz_max)
    row[NPU_LOW], row[NPU_HIGH], row[BENCH_LOW], row[BENCH_HIGH] = npu_low, npu_high, bench_low, bench_high
    counts[BELOW_1E3], counts[BELOW_5E3] = below_1e3, below_5e3
    counts[NONFINITE] = 0 if nonfinite == 0.0 else 1


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _first_pass(npu, bench, chunk, partials, counts):  # pragma: no cover - compiled
    for c in range(partials.shape[0]):
        lo, hi = c * chunk, min(npu.size, (c + 1) * chunk)
        _chunk_sums(npu, bench, lo, hi, False, partials[c], counts[c])
        if counts[c, NONFINITE]:  # rare: sum the chunk again, matching NaN/inf side by side
            _chunk_sums(npu, bench, lo, hi, True, partials[c], counts[c])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _kl_ratios(npu, bench, lo, npu_low, npu_high, bench_low, bench_high, scaled, ratio):  # pragma: no cover
    """msaccucmp's KL scaling of elements lo:lo + len(scaled): s into `scaled`, s / t into `ratio`; returns
    (S, T) of the block (its log is numpy's, vectorised: see `kl_pass`). S and T are summed with compensation
    (TwoSum): kl adds log(T / S) to a nearly opposite term, so their rounding would show in it."""
    s_sum = t_sum = s_carry = t_carry = 0.0
    npu_span, bench_span = npu_high - npu_low, bench_high - bench_low
    for k in range(scaled.size):
        x = _as_float(npu[lo + k])
        y = _as_float(bench[lo + k])
        if not (math.isfinite(x) and math.isfinite(y)):  # matched NaN/inf (the first pass refused the others)
            x = y = 0.0
        s = (x - npu_low) / npu_span if npu_high > npu_low else 1.0
        t = (y - bench_low) / bench_span if bench_high > bench_low else 1.0
        s = _KL_FLOOR if s < _KL_FLOOR else s  # a NaN stays NaN, as numpy.maximum
        t = _KL_FLOOR if t < _KL_FLOOR else t
        total = s_sum + s  # Knuth's TwoSum: the rounding error of each addition, exactly, without a branch
        part = total - s_sum
        s_carry += (s_sum - (total - part)) + (s - part)
        s_sum = total
        total = t_sum + t
        part = total - t_sum
        t_carry += (t_sum - (total - part)) + (t - part)
        t_sum = total
        scaled[k] = s
        ratio[k] = s / t
    return s_sum + s_carry, t_sum + t_carry


def _bits(array: np.ndarray) -> np.ndarray:
    """The array as the kernels read it: float16 as its uint16 bits, other dtypes unchanged."""
    return array.view(np.uint16) if array.dtype == np.float16 else array


def first_pass(npu: np.ndarray, bench: np.ndarray, chunk: int = CHUNK) -> tuple[np.ndarray, np.ndarray]:
    """Per-chunk partial sums of the first pass over two flat arrays of equal size and a `SUPPORTED` dtype.

    Returns
    -------
    tuple of numpy.ndarray
        float64 partials (one row per chunk, columns `NPU_SQ` ... `BENCH_HIGH`) and int64 counts (columns
        `BELOW_1E3` ... `MISMATCH`). A chunk with a mismatched NaN/inf stops there and flags `MISMATCH`.
    """
    chunks = max(1, math.ceil(npu.size / chunk))
    partials = np.zeros((chunks, 13))
    counts = np.zeros((chunks, 4), dtype=np.int64)
    _first_pass(_bits(npu), _bits(bench), chunk, partials, counts)
    return partials, counts


def kl_pass(npu: np.ndarray, bench: np.ndarray, npu_range: tuple[float, float], bench_range: tuple[float, float],
            chunk: int = CHUNK) -> np.ndarray:
    """Per-chunk sums of kl's second pass: columns S, T (the scaled values' sums) and sum s log(s / t).

    The scaling and the ratios are compiled (`_kl_ratios`); the log is numpy's, whose SIMD loop is about six
    times faster than the scalar log compiled code calls (1.7 against 10 ns per element here)."""
    chunks = max(1, math.ceil(npu.size / chunk))
    partials = np.zeros((chunks, 3))
    npu, bench = _bits(npu), _bits(bench)
    scaled, ratio = np.empty(min(chunk, npu.size)), np.empty(min(chunk, npu.size))
    for c in range(chunks):
        lo = c * chunk
        m = min(npu.size, lo + chunk) - lo
        s_sum, t_sum = _kl_ratios(npu, bench, lo, *npu_range, *bench_range, scaled[:m], ratio[:m])
        logs = np.log(ratio[:m], out=ratio[:m])
        partials[c] = s_sum, t_sum, np.einsum("i,i->", scaled[:m], logs)
    return partials
