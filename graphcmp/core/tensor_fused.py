"""Compiled kernels for the tensor metrics of large pairs: every sum of a pair in one pass, kl in a second.

`graphcmp.core.tensor_metrics` computes the same sums with numpy, block by block; this module does it with
numba-compiled loops (``compare_tensors(fused=True)``), which `graphcmp.core.tensor_kernels` calls: built ahead of
time where they can be, else loaded by numba.
Each element is read once per pass at its own width (float16 decoded from its bits in the loop, float32 and
float64 as they are), upcast to float64 in registers, and added to float64 accumulators. The tensor is cut into
chunks (`tensor_fused_layout.CHUNK` elements), and the chunks' partial sums are added with ``math.fsum``: a result
differs from whole-array float64 arithmetic by summation order only.

The loops vectorise (SIMD) as `graphcmp.core.simd` describes, which is what makes them fast (0.5-0.8 ns per
element pair against 3.2 ns for a scalar loop here, bench/README.md): a chunk's sums are reassociated, maxima and
minima taken on float64 bits as integers, branches are selects. A chunk holding a NaN/inf is flagged and summed
again by a careful loop with msprobe's rules for matched NaN/inf. msprobe's ``(x + eps) - eps`` for elements
whose bench value is 0 is kept from being folded to ``x`` by passing ``x + eps`` through its bits and an XOR with
a zero the compiler cannot see (``opaque``). kl's sums S and T are exact (`_fixed`).

A pair is measured on the calling thread, which releases the GIL in its two compiled calls, one per pass:
`graphcmp.core.tensorcmp` measures two pairs at once, one per core. Splitting one pair over both cores
(``prange``) was measured slower on the shared 2-core machine: each call waits for the second thread's wake-up,
several milliseconds when other jobs hold the cores (bench/README.md, issue 32).

Where they are loaded by numba, compiled code is cached on disk (``cache=True``): the first comparison after an
install compiles each dtype pair once (a few seconds); later ones load it (0.5-0.7 s once per process).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext

import numba
import numpy as np

from graphcmp.core.simd import FAST, MAGNITUDE, as_float, bits_float, float_bits, ordered, special_bits
from graphcmp.core.tensor_fused_layout import (
    ABS_SUM,
    BELOW_1E3,
    BELOW_5E3,
    BENCH_HIGH,
    BENCH_LOW,
    BENCH_SQ,
    DIFF_SQ,
    DOT,
    MAX_ABS,
    MAX_REL,
    MISMATCH,
    NONFINITE,
    NPU_HIGH,
    NPU_LOW,
    NPU_SQ,
    REL_NZ_MAX,
    REL_NZ_SUM,
    TWO_37,
    TWO_38,
)

__all__: list[str] = []  # the kernels are called through `graphcmp.core.tensor_kernels`

_EPS = float(np.finfo(np.float64).eps)
_KL_FLOOR = float(np.finfo(np.float32).eps)


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST)
def _fast_sums(npu, bench, opaque):  # pragma: no cover - compiled
    """The first pass's sums of one chunk, vectorised; valid when the returned flag `special` is 0 (no NaN/inf).
    Maxima are kept as bits (see the module docstring), `opaque` is a zero the compiler cannot see."""
    npu_sq = bench_sq = dot = diff_sq = abs_sum = rel_nz_sum = 0.0
    max_abs = max_rel = rel_nz_max = 0
    npu_low = bench_low = MAGNITUDE
    npu_high = bench_high = -MAGNITUDE - 1
    below_1e3 = below_5e3 = special = 0
    for i in range(npu.size):
        x = as_float(npu[i])
        y = as_float(bench[i])
        x_bits, y_bits = float_bits(x), float_bits(y)
        special |= special_bits(x_bits) | special_bits(y_bits)
        npu_sq += x * x
        bench_sq += y * y
        dot += x * y
        x_key, y_key = ordered(x_bits), ordered(y_bits)
        npu_low = x_key if x_key < npu_low else npu_low
        npu_high = x_key if x_key > npu_high else npu_high
        bench_low = y_key if y_key < bench_low else bench_low
        bench_high = y_key if y_key > bench_high else bench_high
        d = x - y
        diff_sq += d * d
        ad = abs(d)
        abs_sum += ad
        max_abs = max(max_abs, float_bits(ad))
        ab = abs(y)
        shifted = bits_float(float_bits(x + _EPS) ^ opaque)  # msprobe adds eps to both values where bench is 0
        rel = ad / ab if ab != 0.0 else abs(shifted - _EPS) / _EPS
        rel_nz = rel if ab > _EPS else 0.0  # msaccucmp counts |bench| <= eps as 0
        max_rel = max(max_rel, float_bits(rel))
        below_1e3 += rel < 0.001
        below_5e3 += rel < 0.005
        rel_nz_sum += rel_nz
        rel_nz_max = max(rel_nz_max, float_bits(rel_nz))
    return (npu_sq, bench_sq, dot, diff_sq, abs_sum, max_abs, max_rel, rel_nz_sum, rel_nz_max,
            npu_low, npu_high, bench_low, bench_high, below_1e3, below_5e3, special)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _careful_sums(npu, bench, row, counts):  # pragma: no cover - compiled
    """The first pass's sums of a chunk holding NaN/inf, element by element: NaN/inf held by both sides at the
    same position count as 0 and 0; any other stops the chunk with counts[MISMATCH] set."""
    npu_sq = bench_sq = dot = diff_sq = abs_sum = max_abs = max_rel = rel_nz_sum = rel_nz_max = 0.0
    npu_low = bench_low = np.inf
    npu_high = bench_high = -np.inf
    below_1e3 = below_5e3 = 0
    for i in range(npu.size):
        x = as_float(npu[i])
        y = as_float(bench[i])
        if not (math.isfinite(x) and math.isfinite(y)):
            if x == y or (x != x and y != y):  # the same NaN/inf on both sides: an exact match
                x = y = 0.0
            else:
                counts[MISMATCH] = 1
                return
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
        rel = ad / ab if y != 0.0 else abs((x + _EPS) - _EPS) / _EPS
        rel_nz = rel if ab > _EPS else 0.0
        max_rel = rel if rel > max_rel else max_rel
        below_1e3 += rel < 0.001
        below_5e3 += rel < 0.005
        rel_nz_sum += rel_nz
        rel_nz_max = rel_nz if rel_nz > rel_nz_max else rel_nz_max
    row[NPU_SQ], row[BENCH_SQ], row[DOT], row[DIFF_SQ] = npu_sq, bench_sq, dot, diff_sq
    row[ABS_SUM], row[MAX_ABS], row[MAX_REL], row[REL_NZ_SUM], row[REL_NZ_MAX] = (
        abs_sum, max_abs, max_rel, rel_nz_sum, rel_nz_max)
    row[NPU_LOW], row[NPU_HIGH], row[BENCH_LOW], row[BENCH_HIGH] = npu_low, npu_high, bench_low, bench_high
    counts[BELOW_1E3], counts[BELOW_5E3], counts[NONFINITE] = below_1e3, below_5e3, 1


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _first_pass(npu, bench, chunk, opaque, partials, counts):  # pragma: no cover - compiled
    for c in range(partials.shape[0]):
        lo, hi = c * chunk, min(npu.size, (c + 1) * chunk)
        (npu_sq, bench_sq, dot, diff_sq, abs_sum, max_abs, max_rel, rel_nz_sum, rel_nz_max, npu_low, npu_high,
         bench_low, bench_high, below_1e3, below_5e3, special) = _fast_sums(npu[lo:hi], bench[lo:hi], opaque)
        if special:  # rare: sum the chunk again, matching NaN/inf side by side
            _careful_sums(npu[lo:hi], bench[lo:hi], partials[c], counts[c])
            continue
        row = partials[c]
        row[NPU_SQ], row[BENCH_SQ], row[DOT], row[DIFF_SQ], row[ABS_SUM] = npu_sq, bench_sq, dot, diff_sq, abs_sum
        row[MAX_ABS], row[MAX_REL], row[REL_NZ_SUM] = bits_float(max_abs), bits_float(max_rel), rel_nz_sum
        row[REL_NZ_MAX] = bits_float(rel_nz_max)
        row[NPU_LOW], row[NPU_HIGH] = bits_float(ordered(npu_low)), bits_float(ordered(npu_high))
        row[BENCH_LOW], row[BENCH_HIGH] = bits_float(ordered(bench_low)), bits_float(ordered(bench_high))
        counts[c, BELOW_1E3], counts[c, BELOW_5E3] = below_1e3, below_5e3


@numba.njit(inline="always")
def _kl_scaled(x, y, npu_low, npu_span, bench_low, bench_span):  # pragma: no cover - compiled
    """msaccucmp's KL scaling of one element pair: min-max to [0, 1], floored."""
    s = (x - npu_low) / npu_span if npu_span > 0.0 else 1.0
    t = (y - bench_low) / bench_span if bench_span > 0.0 else 1.0
    return (_KL_FLOOR if s < _KL_FLOOR else s), (_KL_FLOOR if t < _KL_FLOOR else t)


@numba.njit(inline="always")
def _fixed(value):  # pragma: no cover - compiled
    """A scaled value in [2**-23, 1] as the integers (high, low) with value * 2**75 = high * 2**38 + low, exactly:
    a float64 that large has no bits below 2**-75, so integer sums of both parts are exact sums of the values."""
    scaled = value * TWO_37
    high = np.int64(scaled)
    return high, np.int64((scaled - np.float64(high)) * TWO_38)


def _log_constants() -> tuple[float, float, tuple[float, ...]]:
    """ln 2 split in two (the high part with 20 zero bits at the end of its significand, so that k * high is exact
    for every exponent difference k of two float64), and the coefficients 2 / (2j + 1) of ``log((1 + u) / (1 - u))
    = 2u + u * R(u**2)``: R's terms up to z**10, the first left out below 2**-55 of the result for |u| <= 3 -
    2 sqrt(2)."""
    with localcontext() as context:
        context.prec = 40
        ln2 = Decimal(2).ln()
        high = np.float64(float(ln2)).view(np.int64) & ~np.int64((1 << 20) - 1)
        high_value = float(np.int64(high).view(np.float64))
        return high_value, float(ln2 - Decimal(high_value)), tuple(2.0 / (2 * j + 1) for j in range(1, 11))


_LN2_HIGH, _LN2_LOW, _R = _log_constants()
_R1, _R2, _R3, _R4, _R5, _R6, _R7, _R8, _R9, _R10 = _R
_SQRT2 = math.sqrt(2.0)
_FRACTION, _ONE_BITS = np.int64((1 << 52) - 1), np.int64(1023 << 52)


@numba.njit(error_model="numpy")
def _log_ratio(s, t):  # pragma: no cover - compiled
    """log(s / t) of two positive normal float64, branch-free so that the loop calling it vectorises, with one
    division: s = 2**a ms and t = 2**b mt (ms, mt in [1, 2)), one of ms and mt doubled so that m = ms / mt lies in
    [sqrt(2) / 2, sqrt(2)], and log(s / t) = k ln 2 + 2 atanh(u) with u = (ms - mt) / (ms + mt), |u| <= 3 - 2 sqrt(2).
    ms - mt is exact (the two lie within a factor of two), so the result keeps its digits however near s is to t,
    where the log of the ratio rounded to a float64 (numpy's log(s / t)) loses them, all of them for neighbours.
    Compiled without fast-math (no reassociation: the order of the last sum keeps k ln 2 exact); kl's loops are the
    only callers."""
    s_bits, t_bits = float_bits(s), float_bits(t)
    k = (s_bits >> 52) - (t_bits >> 52)
    ms = bits_float((s_bits & _FRACTION) | _ONE_BITS)
    mt = bits_float((t_bits & _FRACTION) | _ONE_BITS)
    high, low = ms > _SQRT2 * mt, mt > _SQRT2 * ms
    mt = mt * 2.0 if high else mt
    ms = ms * 2.0 if low else ms
    k = k + 1 if high else k - 1 if low else k
    u = (ms - mt) / (ms + mt)
    z = u * u
    r = z * (_R1 + z * (_R2 + z * (_R3 + z * (_R4 + z * (_R5 + z * (_R6 + z * (_R7 + z * (_R8 + z * (
        _R9 + z * _R10)))))))))
    kf = np.float64(k)
    return kf * _LN2_HIGH + (2.0 * u + (u * r + kf * _LN2_LOW))


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST)
def _kl_fast(npu, bench, npu_low, npu_span, bench_low, bench_span):  # pragma: no cover - compiled
    """kl's sums of a chunk without NaN/inf, vectorised: S and T exactly, as the integer parts of `_fixed`, and
    sum s log(s / t), whatever the ratios."""
    s_high = s_low = t_high = t_low = 0
    weighted = 0.0
    for k in range(npu.size):
        s, t = _kl_scaled(as_float(npu[k]), as_float(bench[k]), npu_low, npu_span, bench_low, bench_span)
        high, low = _fixed(s)
        s_high += high
        s_low += low
        high, low = _fixed(t)
        t_high += high
        t_low += low
        weighted += s * _log_ratio(s, t)
    return s_high, s_low, t_high, t_low, weighted


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _kl_careful(npu, bench, npu_low, npu_span, bench_low, bench_span):  # pragma: no cover - compiled
    """`_kl_fast` for a chunk holding matched NaN/inf (the first pass refused the others), which count as 0."""
    s_high = s_low = t_high = t_low = 0
    weighted = 0.0
    for k in range(npu.size):
        x = as_float(npu[k])
        y = as_float(bench[k])
        if not (math.isfinite(x) and math.isfinite(y)):
            x = y = 0.0
        s, t = _kl_scaled(x, y, npu_low, npu_span, bench_low, bench_span)
        high, low = _fixed(s)
        s_high += high
        s_low += low
        high, low = _fixed(t)
        t_high += high
        t_low += low
        weighted += s * _log_ratio(s, t)
    return s_high, s_low, t_high, t_low, weighted


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _kl_chunks(npu, bench, chunk, spans, nonfinite, fixed, weighted):  # pragma: no cover - compiled
    """kl's pass chunk by chunk: each chunk's `_fixed` sums of S and T into `fixed` (a row per chunk) and its sum of
    s log(s / t) into `weighted`; a chunk whose `nonfinite` flag is set is summed by the careful loop. `spans`: the
    lowest value and the span of the npu side, then of the bench side."""
    npu_low, npu_span, bench_low, bench_span = spans[0], spans[1], spans[2], spans[3]
    for c in range(weighted.size):
        lo, hi = c * chunk, min(npu.size, (c + 1) * chunk)
        if nonfinite[c]:
            s_high, s_low, t_high, t_low, total = _kl_careful(npu[lo:hi], bench[lo:hi], npu_low, npu_span,
                                                              bench_low, bench_span)
        else:
            s_high, s_low, t_high, t_low, total = _kl_fast(npu[lo:hi], bench[lo:hi], npu_low, npu_span,
                                                           bench_low, bench_span)
        fixed[c, 0], fixed[c, 1], fixed[c, 2], fixed[c, 3] = s_high, s_low, t_high, t_low
        weighted[c] = total
