"""Precision metrics between an npu tensor and its bench tensor, with msprobe's definitions.

Each metric is a pure function ``(npu, bench) -> float`` registered by name in
``TENSOR_METRICS``; ``compare_tensors`` computes all of them at once from shared intermediates.
Metrics never decide pass or fail: ``judge`` does.

Definitions follow Ascend mstt ``debug/accuracy_tools/msprobe``: ``core/compare/npy_compare.py``
(cosine, max_abs, max_rel, one_thousandth, five_thousandths) and the msaccucmp built-in algorithms
``alg_RelativeEuclideanDistance``, ``alg_KullbackLeiblerDivergence`` and
``alg_AccumulatedRelativeError`` (euc_rel, kl, are). Deviations are named in each docstring.

Common rules, applied identically by every metric:

- Both tensors are flattened and upcast to float64 before anything is subtracted, so large fp16
  values cannot overflow; bool and integer tensors are compared as floats; a complex tensor is
  compared as its interleaved real and imaginary parts.
- Different shapes give NaN for every metric (see `shapes_match`).
- NaN and ±inf, as msprobe's ``handle_inf_nan``: if both tensors hold the same non-finite value
  at the same positions, those positions count as exact matches (both set to 0); if they differ
  anywhere, every metric is NaN. Unlike msprobe, +inf against -inf is a difference.
- Empty tensors of equal shape compare as identical (cosine 1, errors 0, ratios 1).
- No numpy warnings are emitted: division by zero and the like are handled explicitly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property

import numpy as np

__all__ = [
    "TENSOR_METRICS",
    "are",
    "compare_tensors",
    "cosine",
    "euc_rel",
    "five_thousandths",
    "kl",
    "max_abs",
    "max_rel",
    "max_rel_nz",
    "mean_abs",
    "mean_rel",
    "one_thousandth",
    "rmse",
    "shapes_match",
]

_EPS = float(np.finfo(np.float64).eps)  # msprobe Const.FLOAT_EPSILON / msaccucmp ConstManager.FLOAT_EPSILON
_KL_FLOOR = float(np.finfo(np.float32).eps)  # msaccucmp KL: normalised values are floored at this


class _Pair:
    """Flat float64 npu and bench arrays with the intermediates several metrics share, made once."""

    def __init__(self, npu: np.ndarray, bench: np.ndarray) -> None:
        self.npu, self.bench = npu, bench

    @cached_property
    def abs_diff(self) -> np.ndarray:
        return np.abs(self.npu - self.bench)

    @cached_property
    def abs_bench(self) -> np.ndarray:
        return np.abs(self.bench)

    @cached_property
    def rel_nonzero(self) -> np.ndarray:
        # msaccucmp's relative error: |npu - bench| / |bench| where |bench| > eps, 0 elsewhere.
        counted = self.abs_bench > _EPS
        return np.divide(self.abs_diff, self.abs_bench, out=np.zeros_like(self.abs_diff), where=counted)

    @cached_property
    def rel_err(self) -> np.ndarray:
        # msprobe get_relative_err: where bench == 0, eps is added to both values before dividing.
        zero = self.bench == 0
        out = np.divide(self.abs_diff, self.abs_bench, out=np.empty_like(self.abs_diff), where=~zero)
        if zero.any():  # few positions: computed there only
            out[zero] = np.abs((self.npu[zero] + _EPS) - _EPS) / _EPS
        return out


def shapes_match(npu: np.ndarray, bench: np.ndarray) -> bool:
    """Return True if the two tensors have exactly the same shape (no broadcasting).

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline.

    Examples
    --------
    >>> shapes_match(np.zeros((2, 3)), np.ones((2, 3), dtype=np.float16))
    True
    >>> shapes_match(np.zeros((1, 3)), np.zeros(3))
    False
    """
    return np.shape(npu) == np.shape(bench)


def cosine(npu: np.ndarray, bench: np.ndarray) -> float:
    """Cosine similarity ``npu . bench / (||npu|| ||bench||)``, in [-1, 1]; 1 means same direction.

    As msprobe: 1.0 if both norms are <= float64 eps (both all-zero), NaN if only one is
    (direction undefined; NaN never passes a rule). Unlike msprobe the value is not rounded to
    1.0 above 0.99999, and 1-element tensors give their sign agreement (±1) instead of
    "unsupported".

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline, same shape, any real dtype.

    Returns
    -------
    float
        The similarity, or NaN (see the module notes for shapes and non-finite values).

    Examples
    --------
    >>> cosine(np.array([1.0, 0.0]), np.array([1.0, 1.0]))
    0.7071067811865475
    >>> cosine(np.zeros(3), np.zeros(3)), cosine(np.zeros(3), np.ones(3))
    (1.0, nan)
    """
    return _apply(_cosine, npu, bench)


def max_abs(npu: np.ndarray, bench: np.ndarray) -> float:
    """Maximum absolute error ``max |npu - bench|``, in the tensors' own units.

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline, same shape.

    Returns
    -------
    float
        The error (0.0 for identical tensors), or NaN.

    Examples
    --------
    >>> max_abs(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.5, 2.0]))
    1.0
    """
    return _apply(_max_abs, npu, bench)


def max_rel(npu: np.ndarray, bench: np.ndarray) -> float:
    """Maximum relative error ``max |npu - bench| / |bench|``, as a fraction (0.01 = 1 %).

    Where bench is exactly 0, msprobe's guard applies: float64 eps (2.2e-16) is added to both
    values, so a zero matched by a zero gives 0 and anything else gives about ``|npu| / eps``.

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline, same shape.

    Returns
    -------
    float
        The error, or NaN.

    Examples
    --------
    >>> max_rel(np.array([1.1, 2.0, 0.0]), np.array([1.0, 2.0, 0.0]))
    0.10000000000000009
    """
    return _apply(_max_rel, npu, bench)


def euc_rel(npu: np.ndarray, bench: np.ndarray) -> float:
    """Relative Euclidean distance ``||npu - bench||_2 / ||bench||_2``, as a fraction.

    msaccucmp's RelativeEuclideanDistance. When ``||bench||_2 <= eps`` msaccucmp returns 0.0
    whatever npu holds; here that is kept only if npu is zero too, otherwise the result is inf.

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline, same shape.

    Returns
    -------
    float
        The distance, inf, or NaN.

    Examples
    --------
    >>> euc_rel(np.array([3.0, 4.0]), np.array([0.0, 4.0]))
    0.75
    """
    return _apply(_euc_rel, npu, bench)


def one_thousandth(npu: np.ndarray, bench: np.ndarray) -> float:
    """Fraction of elements whose relative error (as in `max_rel`) is below 0.001, in [0, 1].

    msprobe's "One Thousandth Err Ratio"; as msprobe, the comparison is strict (``< 0.001``).

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline, same shape.

    Returns
    -------
    float
        The fraction (1.0 when all elements agree to 0.1 %), or NaN.

    Examples
    --------
    >>> one_thousandth(np.array([1.0, 1.0005, 1.002, 2.0]), np.ones(4))
    0.5
    """
    return _apply(_one_thousandth, npu, bench)


def five_thousandths(npu: np.ndarray, bench: np.ndarray) -> float:
    """Fraction of elements whose relative error (as in `max_rel`) is below 0.005, in [0, 1].

    msprobe's "Five Thousandths Err Ratio"; strict comparison (``< 0.005``).

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline, same shape.

    Returns
    -------
    float
        The fraction, or NaN.

    Examples
    --------
    >>> five_thousandths(np.array([1.0, 1.0005, 1.002, 2.0]), np.ones(4))
    0.75
    """
    return _apply(_five_thousandths, npu, bench)


def kl(npu: np.ndarray, bench: np.ndarray) -> float:
    """Kullback-Leibler divergence ``sum(p * log(p / q))`` of npu's distribution p from bench's q.

    msaccucmp's KullbackLeiblerDivergence: each tensor is min-max scaled to [0, 1] (a constant
    tensor becomes uniform), floored at float32 eps (1.19e-7) so no log is infinite, then divided by
    its sum. Values below float64 eps become 0.0. Always >= 0, in nats; NaN when undefined (shapes
    differ, unmatched non-finite values, or a value range that overflows float64).

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline, same shape.

    Returns
    -------
    float
        The divergence (0.0 for identical tensors), or NaN.

    Examples
    --------
    >>> kl(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.0]))
    0.0
    >>> round(kl(np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 1.0])), 6)
    0.231049
    """
    return _apply(_kl, npu, bench)


def are(npu: np.ndarray, bench: np.ndarray) -> float:
    """Accumulated relative error ``sum |npu - bench| / |bench|`` over elements with ``|bench| > eps``.

    msaccucmp's AccumulatedRelativeError (it writes ``|npu / bench - 1|``, equal up to rounding).
    It is a sum, not a mean: it grows with the number of elements. Elements whose bench is within
    float64 eps of zero are skipped.

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline, same shape.

    Returns
    -------
    float
        The accumulated error (0.0 for identical tensors), or NaN.

    Examples
    --------
    >>> are(np.array([1.5, 3.0, 5.0]), np.array([1.0, 2.0, 0.0]))
    1.0
    """
    return _apply(_are, npu, bench)


def mean_abs(npu: np.ndarray, bench: np.ndarray) -> float:
    """Mean absolute error ``mean |npu - bench|``, in the tensors' own units (msaccucmp's MeanAbsoluteError).

    Examples
    --------
    >>> mean_abs(np.array([1.0, 2.0]), np.array([1.0, 4.0]))
    1.0
    """
    return _apply(_mean_abs, npu, bench)


def rmse(npu: np.ndarray, bench: np.ndarray) -> float:
    """Root mean square error ``sqrt(mean((npu - bench)^2))`` (msaccucmp's RootMeanSquareError).

    Examples
    --------
    >>> rmse(np.array([1.0, 2.0]), np.array([1.0, 4.0]))
    1.4142135623730951
    """
    return _apply(_rmse, npu, bench)


def max_rel_nz(npu: np.ndarray, bench: np.ndarray) -> float:
    """msaccucmp's MaxRelativeError: ``max |npu - bench| / |bench|`` where ``|bench| > eps``, elements with a
    zero bench counted as 0 (unlike `max_rel`, which counts them through msprobe's eps guard).

    Examples
    --------
    >>> max_rel_nz(np.array([1.1, 5.0]), np.array([1.0, 0.0]))
    0.10000000000000009
    """
    return _apply(_max_rel_nz, npu, bench)


def mean_rel(npu: np.ndarray, bench: np.ndarray) -> float:
    """msaccucmp's MeanRelativeError: the mean over all elements of the relative error of `max_rel_nz` (0 where
    the bench is zero).

    Examples
    --------
    >>> mean_rel(np.array([1.1, 5.0]), np.array([1.0, 0.0]))
    0.050000000000000044
    """
    return _apply(_mean_rel, npu, bench)


def compare_tensors(npu: np.ndarray, bench: np.ndarray) -> dict[str, float]:
    """Compute every metric of `TENSOR_METRICS` in one pass over shared intermediates.

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline.

    Returns
    -------
    dict[str, float]
        Metric name -> value, in `TENSOR_METRICS` order; every value is NaN when the shapes
        differ or the tensors disagree on where their NaN/inf values are.

    Examples
    --------
    >>> result = compare_tensors(np.array([1.0, 2.0]), np.array([1.0, 2.0]))
    >>> result["cosine"], result["max_abs"], result["one_thousandth"]
    (1.0, 0.0, 1.0)
    >>> math.isnan(compare_tensors(np.zeros(2), np.zeros(3))["max_abs"])
    True
    """
    with np.errstate(all="ignore"):
        pair = _prepare(npu, bench)
        if pair is None:
            return dict.fromkeys(_KERNELS, math.nan)
        return {name: float(kernel(pair)) for name, kernel in _KERNELS.items()}


def _apply(kernel: Callable[[_Pair], float], npu: np.ndarray, bench: np.ndarray) -> float:
    with np.errstate(all="ignore"):
        pair = _prepare(npu, bench)
        return math.nan if pair is None else float(kernel(pair))


def _prepare(npu: np.ndarray, bench: np.ndarray) -> _Pair | None:
    """Flatten and upcast both tensors; None if shapes or non-finite positions differ."""
    if not shapes_match(npu, bench):
        return None
    n, b = _flat64(npu), _flat64(bench)
    finite = np.isfinite(n) & np.isfinite(b)
    if finite.all():
        return _Pair(n, b)
    bad = ~finite
    same = (n[bad] == b[bad]) | (np.isnan(n[bad]) & np.isnan(b[bad]))
    if not same.all():
        return None
    return _Pair(np.where(finite, n, 0.0), np.where(finite, b, 0.0))


def _flat64(tensor: np.ndarray) -> np.ndarray:
    array = np.asarray(tensor)
    if np.iscomplexobj(array):
        array = np.stack((array.real, array.imag), axis=-1)
    return np.asarray(array, dtype=np.float64).reshape(-1)


def _cosine(pair: _Pair) -> float:
    npu_sq, bench_sq = float(pair.npu.dot(pair.npu)), float(pair.bench.dot(pair.bench))
    if npu_sq <= _EPS**2 and bench_sq <= _EPS**2:  # both norms <= eps
        return 1.0
    if npu_sq <= _EPS**2 or bench_sq <= _EPS**2:
        return math.nan
    # sqrt(a * b) rather than sqrt(a) * sqrt(b): exactly 1.0 for identical tensors, unless it overflows.
    product = npu_sq * bench_sq
    denominator = math.sqrt(product) if 0 < product < math.inf else math.sqrt(npu_sq) * math.sqrt(bench_sq)
    return min(max(float(pair.npu.dot(pair.bench)) / denominator, -1.0), 1.0)


def _max_abs(pair: _Pair) -> float:
    return float(pair.abs_diff.max()) if pair.npu.size else 0.0


def _max_rel(pair: _Pair) -> float:
    return float(pair.rel_err.max()) if pair.npu.size else 0.0


def _euc_rel(pair: _Pair) -> float:
    bench_norm, diff_norm = np.linalg.norm(pair.bench), np.linalg.norm(pair.abs_diff)
    if bench_norm <= _EPS:
        return 0.0 if diff_norm <= _EPS else math.inf
    return float(diff_norm / bench_norm)


def _err_ratio(pair: _Pair, threshold: float) -> float:
    return float(np.count_nonzero(pair.rel_err < threshold) / pair.npu.size) if pair.npu.size else 1.0


def _one_thousandth(pair: _Pair) -> float:
    return _err_ratio(pair, 0.001)


def _five_thousandths(pair: _Pair) -> float:
    return _err_ratio(pair, 0.005)


def _kl_distribution(values: np.ndarray) -> np.ndarray:
    low, high = values.min(), values.max()
    if high > low:
        scaled = np.subtract(values, low)
        scaled /= high - low
    else:
        scaled = np.ones_like(values)
    np.maximum(scaled, _KL_FLOOR, out=scaled)
    scaled /= scaled.sum()
    return scaled


def _kl(pair: _Pair) -> float:
    if not pair.npu.size:
        return 0.0
    p, q = _kl_distribution(pair.npu), _kl_distribution(pair.bench)
    np.divide(p, q, out=q)  # p / q, then p * log(p / q), in place: no temporaries of the tensor's size
    np.log(q, out=q)
    q *= p
    result = float(np.sum(q))
    return 0.0 if abs(result) < _EPS else result


def _are(pair: _Pair) -> float:
    return float(pair.rel_nonzero.sum())


def _mean_abs(pair: _Pair) -> float:
    return float(pair.abs_diff.mean()) if pair.npu.size else 0.0


def _rmse(pair: _Pair) -> float:
    return float(np.sqrt(np.mean(pair.abs_diff * pair.abs_diff))) if pair.npu.size else 0.0


def _max_rel_nz(pair: _Pair) -> float:
    return float(pair.rel_nonzero.max()) if pair.npu.size else 0.0


def _mean_rel(pair: _Pair) -> float:
    return float(pair.rel_nonzero.mean()) if pair.npu.size else 0.0


_KERNELS: dict[str, Callable[[_Pair], float]] = {
    "cosine": _cosine,
    "max_abs": _max_abs,
    "max_rel": _max_rel,
    "euc_rel": _euc_rel,
    "one_thousandth": _one_thousandth,
    "five_thousandths": _five_thousandths,
    "kl": _kl,
    "are": _are,
    "mean_abs": _mean_abs,
    "rmse": _rmse,
    "max_rel_nz": _max_rel_nz,
    "mean_rel": _mean_rel,
}

TENSOR_METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "cosine": cosine,
    "max_abs": max_abs,
    "max_rel": max_rel,
    "euc_rel": euc_rel,
    "one_thousandth": one_thousandth,
    "five_thousandths": five_thousandths,
    "kl": kl,
    "are": are,
    "mean_abs": mean_abs,
    "rmse": rmse,
    "max_rel_nz": max_rel_nz,
    "mean_rel": mean_rel,
}
"""Metric name -> pure function ``(npu, bench) -> float``; the names used in rules and reports."""
