"""Compiled kernels for the statistics metrics of tensor pairs: one pass over the pairs, each pair's two rows of
statistics (Max, Min, Mean, Norm) read once.

`graphcmp.core.metrics` and the noise model compute the same values with numpy, a block of pairs at a time: a dozen
passes over (n, 4) temporaries, each with its own gather, mask and copy. These loops give every value of those
passes bit for bit (IEEE float64 throughout, no reassociation, numpy's NaN rules where a NaN could reach a
maximum), and `graphcmp.core.stat_kernels` calls them where they are built ahead of time. The tests hold the two
paths to the same bits on random statistics with NaN, inf, zeros and unrecorded ones.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__: list[str] = []  # the kernels are called through `graphcmp.core.stat_kernels`

_ROUND_SCALE = 1e12
"""numpy's ``round(x, 12)``: ``rint(x * 1e12) / 1e12``, the scale made by multiplying 1e9 by ten three times (exact)."""


@numba.njit(inline="always")
def _maximum(x: float, y: float) -> float:
    """``np.maximum``: NaN if either is NaN, else the larger."""
    if x != x:
        return x
    if y != y:
        return y
    return x if x >= y else y


@numba.njit(inline="always")
def _over(diff: float, scale: float) -> float:
    """``diff / scale``; over a zero or NaN scale inf for a difference, 0 for none."""
    if scale > 0:
        return diff / scale
    return math.inf if diff > 0 else 0.0


@numba.njit(inline="always")
def _held_by_both(a: float, b: float) -> bool:
    """The same value on both sides, NaN equal to NaN."""
    return a == b or (a != a and b != b)


@numba.njit(inline="always")
def _nonfinite_error(a: float, b: float, error: float) -> float:
    """`metrics.mark_nonfinite` of one statistic: 0 when both hold the same non-finite value, inf when they differ,
    `error` when both are finite."""
    if math.isfinite(a) and math.isfinite(b):
        return error
    return 0.0 if _held_by_both(a, b) else math.inf


@numba.njit(inline="always")
def _recorded_magnitude(stats: np.ndarray, row: int, recorded: np.ndarray) -> float:
    """noise's ``_magnitude``: max(|Max|, |Min|) over those recorded (`recorded` per statistic) and finite, 0 when
    none."""
    high, low = abs(stats[row, 0]), abs(stats[row, 1])
    if not (recorded[0] and math.isfinite(high)):
        high = 0.0
    if not (recorded[1] and math.isfinite(low)):
        low = 0.0
    return high if high >= low else low


def _rel_err_identical(npu_stats: np.ndarray, npu_present: np.ndarray, bench_stats: np.ndarray,
                       bench_present: np.ndarray, npu_rows: np.ndarray, bench_rows: np.ndarray, atol: float,
                       magnitude_floor: float, rel_err: np.ndarray, identical: np.ndarray) -> None:
    """Per pair k of rows (`npu_rows[k]`, `bench_rows[k]`): ``rel_err[k]``, `metrics.stat_rel_error`, and
    ``identical[k]``, `metrics.stats_identical`, of the statistics both sides recorded."""
    for k in range(len(npu_rows)):
        i, j = npu_rows[k], bench_rows[k]
        magnitude = _maximum(abs(bench_stats[j, 0]), abs(bench_stats[j, 1]))
        floor = magnitude * magnitude_floor if math.isfinite(magnitude) else 0.0
        largest = 0.0
        same = True
        for s in range(4):
            if not (npu_present[i, s] and bench_present[j, s]):
                continue
            a, b = npu_stats[i, s], bench_stats[j, s]
            diff = abs(a - b)
            error = _over(diff, _maximum(abs(b), floor))
            if diff <= atol:
                error = 0.0
            largest = _maximum(largest, _nonfinite_error(a, b, error))
            same = same and _held_by_both(a, b)
        rel_err[k] = np.rint(largest * _ROUND_SCALE) / _ROUND_SCALE
        identical[k] = same


def _stat_errors(npu_stats: np.ndarray, npu_recorded: np.ndarray, bench_stats: np.ndarray,
                 bench_recorded: np.ndarray, npu_rows: np.ndarray, bench_rows: np.ndarray, count: np.ndarray,
                 error: np.ndarray, first: np.ndarray, npu_magnitude: np.ndarray, bench_magnitude: np.ndarray) -> None:
    """Per pair k: the noise model's ``_stat_errors`` of the statistics recorded on both sides (`npu_recorded`,
    `bench_recorded`: per row and statistic, recorded and not summed beyond its dtype's range), `count` the bench
    tensor's elements: the largest statistic error, the first statistic's, and each side's magnitude."""
    recorded = np.empty(4, np.bool_)
    for k in range(len(npu_rows)):
        i, j = npu_rows[k], bench_rows[k]
        for s in range(4):
            recorded[s] = npu_recorded[i, s] and bench_recorded[j, s]
        npu_magnitude[k] = _recorded_magnitude(npu_stats, i, recorded)
        magnitude = _recorded_magnitude(bench_stats, j, recorded)
        bench_magnitude[k] = magnitude
        norm = abs(bench_stats[j, 3])
        c = count[k]
        rms = norm / math.sqrt(c if c >= 1.0 else 1.0) if c > 0 else magnitude
        largest = 0.0
        for s in range(4):
            value = 0.0
            if recorded[s]:
                a, b = npu_stats[i, s], bench_stats[j, s]
                scale = magnitude if s < 2 else rms if s == 2 else norm
                value = _nonfinite_error(a, b, _over(abs(a - b), scale))
            if s == 0:
                first[k] = value
                largest = _maximum(value, 0.0)
            else:
                largest = _maximum(largest, value)
        error[k] = largest


def _nonfinite(npu_stats: np.ndarray, npu_recorded: np.ndarray, bench_stats: np.ndarray, bench_recorded: np.ndarray,
               npu_rows: np.ndarray, bench_rows: np.ndarray, out: np.ndarray) -> None:
    """Per pair k: the judge's ``_nonfinite_pairs``: True when a statistic one side recorded (`npu_recorded`,
    `bench_recorded`: per row) is inf or NaN and the other side does not hold the same value there."""
    for k in range(len(npu_rows)):
        i, j = npu_rows[k], bench_rows[k]
        found = False
        for s in range(4):
            a, b = npu_stats[i, s], bench_stats[j, s]
            if (math.isfinite(a) and math.isfinite(b)) or _held_by_both(a, b):
                continue
            if (npu_recorded[i, s] and not math.isfinite(a)) or (bench_recorded[j, s] and not math.isfinite(b)):
                found = True
        out[k] = found


def dispatchers() -> dict[str, object]:
    """The kernels as numba's dispatchers, by the names `graphcmp.core.stat_kernels` exports them."""
    compiled = numba.njit(error_model="numpy")  # no zero-divisor check: each division's scale is tested first
    return {"rel_err_identical": compiled(_rel_err_identical), "stat_errors": compiled(_stat_errors),
            "nonfinite": compiled(_nonfinite)}
