"""Metrics between paired tensor statistics: pure, vectorised functions over (n, 4) stat columns.

Rows are tensor pairs; the four columns are max, min, mean, norm (`STAT_NAMES`). Each metric
returns one value per pair (or per pair and statistic) and decides nothing: `judge` does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "BLOCK_ROWS", "STAT_METRICS", "by_blocks", "is_nonfinite", "mark_nonfinite", "rows_any", "rows_max",
    "stat_abs_diff", "stat_rel_error", "stat_rel_errors", "stats_identical"]

BLOCK_ROWS = 8192
"""Rows per block in `by_blocks`: an (8192, 4) float64 temporary is 256 KB, which stays in the CPU cache
and in the allocator's reused memory (a whole-column temporary of 1M pairs is fresh pages each time)."""


def by_blocks(fn: Callable[..., np.ndarray | tuple[np.ndarray, ...]], *columns: np.ndarray,
              rows: int | None = None) -> np.ndarray | tuple[np.ndarray, ...]:
    """``fn(*columns)`` computed `rows` rows at a time (default `BLOCK_ROWS`) and joined: the same values
    for a row-wise `fn` (each output row depends on the same input rows only), with small temporaries.

    `fn` returns one array or a tuple of arrays, each with one row per input row.

    >>> by_blocks(lambda a, b: (a + b, a * b), np.arange(5), np.arange(5), rows=2)
    (array([0, 2, 4, 6, 8]), array([ 0,  1,  4,  9, 16]))
    """
    rows = rows or BLOCK_ROWS
    n = len(columns[0])
    if n <= rows:
        return fn(*columns)
    first = fn(*(c[:rows] for c in columns))
    single = not isinstance(first, tuple)
    first = (first,) if single else first
    out = tuple(np.empty((n, *part.shape[1:]), part.dtype) for part in first)
    for target, part in zip(out, first):
        target[:rows] = part
    for start in range(rows, n, rows):
        parts = fn(*(c[start: start + rows] for c in columns))
        for target, part in zip(out, (parts,) if single else parts):
            target[start: start + rows] = part
    return out[0] if single else out


def stat_abs_diff(npu: np.ndarray, bench: np.ndarray) -> np.ndarray:
    """npu - bench per statistic, in float64.

    >>> stat_abs_diff(np.array([[2.0, 0, 1, 3]]), np.array([[1.0, 0, 1, 3]])).tolist()
    [[1.0, 0.0, 0.0, 0.0]]
    """
    with np.errstate(invalid="ignore"):  # inf - inf is NaN, kept
        return np.asarray(npu, np.float64) - np.asarray(bench, np.float64)


def stat_rel_errors(
    npu: np.ndarray, bench: np.ndarray, present: np.ndarray, *, atol: float, magnitude_floor: float
) -> np.ndarray:
    """Relative error per pair and statistic, shape (n, 4); 0 where a statistic is not recorded.

    The denominator of a statistic is max(|bench value|, magnitude_floor * max(|bench Max|, |bench Min|)),
    so a Mean near zero in a tensor of large values does not blow up. Differences of at most `atol`
    count as zero. A non-finite value on either side, unless identical on both, gives inf.

    Examples
    --------
    >>> bench = np.array([[3.0, -3.0, 1e-9, 10.0]])
    >>> npu = np.array([[3.0, -3.0, 2e-9, 10.0]])   # the mean doubled, but it is ~0 next to |3|
    >>> float(stat_rel_errors(npu, bench, np.ones((1, 4), bool), atol=0.0, magnitude_floor=1e-3).max()) < 1e-6
    True
    """
    npu = np.asarray(npu, np.float64)
    bench = np.asarray(bench, np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs(npu - bench)
        magnitude = np.maximum(np.abs(bench[:, 0]), np.abs(bench[:, 1]))
        floor = np.where(np.isfinite(magnitude), magnitude * magnitude_floor, 0.0)
        denom = np.maximum(np.abs(bench), floor[:, None])
        rel = np.divide(diff, denom)
        no_denom = ~(denom > 0)
    if no_denom.any():  # over a zero (or NaN) denominator: inf for a difference, 0 for none
        rel[no_denom] = np.where(diff[no_denom] > 0, np.inf, 0.0)
    np.copyto(rel, 0.0, where=diff <= atol)
    mark_nonfinite(rel, npu, bench)
    np.copyto(rel, 0.0, where=~present)
    return rel


def mark_nonfinite(values: np.ndarray, npu: np.ndarray, bench: np.ndarray) -> None:
    """Set `values` (an error per statistic) where either side is not finite: 0 when both hold the same value
    (NaN equals NaN), else inf. In place; the rows of finite statistics are not touched.

    >>> errors = np.ones((1, 4))
    >>> mark_nonfinite(errors, np.array([[np.inf, np.nan, 1.0, np.inf]]), np.array([[np.inf, np.nan, 2.0, 0.0]]))
    >>> errors.tolist()
    [[0.0, 0.0, 1.0, inf]]
    """
    finite = np.isfinite(npu)
    finite &= np.isfinite(bench)
    if finite.all():
        return
    special = ~finite
    a, b = npu[special], bench[special]
    values[special] = np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, np.inf)


def rows_max(values: np.ndarray) -> np.ndarray:
    """``values.max(axis=1, initial=0.0)`` of an (n, k) array, as k - 1 element-wise maxima (numpy's reduction
    over a short axis is many times slower); NaN propagates as in the reduction.

    >>> rows_max(np.array([[1.0, 3.0, 2.0, 0.0], [-1.0, -2.0, -3.0, -4.0]])).tolist()
    [3.0, 0.0]
    """
    out = np.maximum(values[:, 0], 0.0) if values.shape[1] else np.zeros(len(values))
    for k in range(1, values.shape[1]):
        np.maximum(out, values[:, k], out=out)
    return out


def stat_rel_error(
    npu: np.ndarray, bench: np.ndarray, present: np.ndarray, *, atol: float, magnitude_floor: float
) -> np.ndarray:
    """Largest of `stat_rel_errors` per pair.

    >>> bench = np.array([[3.0, -3.0, 1e-9, 10.0]])
    >>> float(stat_rel_error(bench * 1.1, bench, np.ones((1, 4), bool), atol=0.0, magnitude_floor=1e-3)[0])
    0.1
    """
    rel = stat_rel_errors(npu, bench, present, atol=atol, magnitude_floor=magnitude_floor)
    return np.round(rows_max(rel), 12)


def stats_identical(npu: np.ndarray, bench: np.ndarray, present: np.ndarray) -> np.ndarray:
    """True per pair when every statistic both sides recorded is bit-equal (NaN equals NaN).

    >>> stats_identical(np.array([[1.0, np.nan, 0, 0]]), np.array([[1.0, np.nan, 0, 0]]), np.ones((1, 4), bool))
    array([ True])
    """
    equal = (npu == bench) | (np.isnan(npu) & np.isnan(bench)) | ~present
    return ~rows_any(~equal)


def is_nonfinite(stats: np.ndarray, present: np.ndarray) -> np.ndarray:
    """True per row when any recorded statistic is inf or NaN.

    >>> is_nonfinite(np.array([[1.0, 0, np.inf, 2]]), np.ones((1, 4), bool))
    array([ True])
    """
    return rows_any(~np.isfinite(stats) & present)


def rows_any(mask: np.ndarray) -> np.ndarray:
    """``mask.any(axis=1)`` of an (n, 4) bool array, read as one 32-bit word per row (numpy's
    reduction over a short axis is many times slower).

    >>> rows_any(np.array([[False, False, True, False], [False] * 4])).tolist()
    [True, False]
    """
    if mask.ndim != 2 or mask.shape[1] != 4:
        return mask.any(axis=1)
    return np.ascontiguousarray(mask).view(np.uint32).reshape(-1) != 0


STAT_METRICS: dict[str, Callable[..., np.ndarray]] = {
    "abs_diff": stat_abs_diff,
    "rel_err": stat_rel_error,
    "rel_errs": stat_rel_errors,
    "identical": stats_identical,
}
