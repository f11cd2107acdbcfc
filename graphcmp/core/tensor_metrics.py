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
- The tensors are read block by block (`_BLOCK` elements) and each block is upcast into a float64
  buffer that stays in cache: one pass makes every sum, dot product, norm, maximum and count, kl a
  second. No float64 copy of a whole tensor is made; results differ from whole-array float64
  arithmetic by summation order only (about 1e-15 relative).
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

import numpy as np

from graphcmp.core import tensor_fused_layout as layout
from graphcmp.core import tensor_kernels
from graphcmp.core.dtypes import COMPILED_DTYPES

__all__ = [
    "FUSED_MIN_SIZE",
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


_BLOCK = 1 << 15
"""Elements per block: the float64 working arrays of one block (about 5 x 256 KB) stay in a core's cache, so a
tensor is read from memory once at its own width however many metrics use it."""


FUSED_MIN_SIZE = 1 << 16
"""Elements from which ``compare_tensors(fused=True)`` uses the compiled kernels (below, the call and the
threads' wake-up cost more than numpy's blocks; see bench/README.md, issue 32)."""




class _Sums:
    """What the metrics of a pair need, accumulated block by block in float64 (see `_accumulate`)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.npu_sq = self.bench_sq = self.dot = self.diff_sq = 0.0  # n.n, b.b, n.b, d.d with d = n - b
        self.abs_sum = self.max_abs = 0.0  # sum and max of |d|
        self.max_rel = 0.0  # max of msprobe's relative error (`_relative`)
        self.below_1e3 = self.below_5e3 = 0  # elements whose msprobe relative error is < 0.001, < 0.005
        self.rel_nz_sum = self.rel_nz_max = 0.0  # sum and max of msaccucmp's relative error
        self.npu_low = self.bench_low = math.inf  # min and max of each side, for kl
        self.npu_high = self.bench_high = -math.inf
        self.nonfinite = False  # matched NaN/inf were set to 0 (each pass must do it again)
        self.kl = math.nan  # from a second pass, made only when kl is asked for


class _Blocks:
    """The flat npu and bench arrays at their own dtype, served as float64 blocks in reused buffers."""

    def __init__(self, npu: np.ndarray, bench: np.ndarray) -> None:
        self.npu, self.bench = npu, bench
        length = min(_BLOCK, npu.size)
        self.buffers = [np.empty(length) for _ in range(5)]
        self.mask = np.empty(length, dtype=bool)

    def __iter__(self):
        n_buf, b_buf = self.buffers[0], self.buffers[1]
        for lo in range(0, self.npu.size, _BLOCK):
            hi = min(lo + _BLOCK, self.npu.size)
            n, b = n_buf[: hi - lo], b_buf[: hi - lo]
            np.copyto(n, self.npu[lo:hi], casting="unsafe")  # bool, integers, floats: as astype(float64)
            np.copyto(b, self.bench[lo:hi], casting="unsafe")
            yield n, b


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


def compare_tensors(npu: np.ndarray, bench: np.ndarray, *, fused: bool = False) -> dict[str, float]:
    """Compute every metric of `TENSOR_METRICS` from one pass over the pair (and one more for kl).

    The tensors are read block by block at their own dtype; each block is upcast to float64 in a buffer that
    stays in cache, and every sum, dot product, norm, maximum and count is accumulated from it, so no
    float64 copy of a whole tensor is made. kl needs each side's minimum and maximum before it can scale, so
    it reads the pair a second time.

    Parameters
    ----------
    npu, bench : numpy.ndarray
        The tensor of the run under test and its baseline.
    fused : bool, optional
        Compute float16/32/64 pairs of at least `FUSED_MIN_SIZE` elements with the compiled kernels of
        `graphcmp.core.tensor_kernels` instead of numpy. The values are the same up to summation order (and kl's
        log, within an ulp). Until those kernels are built, numba loads them once per process, 0.5-0.7 s: ask for
        them when the comparison holds enough tensor data (`tensor_kernels.pays`). Defaults to False.

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
    sums = _measure(npu, bench, with_kl=True, fused=fused)
    if sums is None:
        return dict.fromkeys(_KERNELS, math.nan)
    return {name: float(kernel(sums)) for name, kernel in _KERNELS.items()}


def _apply(kernel: Callable[[_Sums], float], npu: np.ndarray, bench: np.ndarray) -> float:
    sums = _measure(npu, bench, with_kl=kernel is _kl)
    return math.nan if sums is None else float(kernel(sums))


def _measure(npu: np.ndarray, bench: np.ndarray, *, with_kl: bool, fused: bool = False) -> _Sums | None:
    """The pair's sums (and kl when asked); None if the shapes or the non-finite positions differ."""
    if not shapes_match(npu, bench):
        return None
    npu, bench = _flat(npu), _flat(bench)
    if fused and npu.size >= FUSED_MIN_SIZE and _compiled(npu.dtype) and _compiled(bench.dtype):
        return _fused_sums(np.ascontiguousarray(npu), np.ascontiguousarray(bench), with_kl=with_kl)
    with np.errstate(all="ignore"):
        blocks = _Blocks(npu, bench)
        sums = _accumulate(blocks)
        if sums is not None and with_kl:
            sums.kl = _kl_pass(blocks, sums)
        return sums


def _compiled(dtype: np.dtype) -> bool:
    """Whether the compiled kernels read `dtype` (`COMPILED_DTYPES`, in this machine's byte order)."""
    return dtype.isnative and dtype.name in COMPILED_DTYPES


def _fused_sums(npu: np.ndarray, bench: np.ndarray, *, with_kl: bool, chunk: int | None = None) -> _Sums | None:
    """`_measure` by the compiled kernels of `graphcmp.core.tensor_kernels`: the same sums chunk by chunk, the chunks'
    partial sums added exactly (``math.fsum``)."""
    chunk = chunk or layout.CHUNK
    partials, counts = tensor_kernels.first_pass(npu, bench, chunk)
    if counts[:, layout.MISMATCH].any():
        return None
    sums = _Sums(npu.size)
    column = partials.T
    sums.npu_sq, sums.bench_sq, sums.dot, sums.diff_sq, sums.abs_sum, sums.rel_nz_sum = (
        math.fsum(column[k]) for k in (layout.NPU_SQ, layout.BENCH_SQ, layout.DOT, layout.DIFF_SQ, layout.ABS_SUM,
                                       layout.REL_NZ_SUM))
    sums.max_abs, sums.max_rel, sums.rel_nz_max, sums.npu_high, sums.bench_high = (
        float(column[k].max()) for k in (layout.MAX_ABS, layout.MAX_REL, layout.REL_NZ_MAX, layout.NPU_HIGH,
                                         layout.BENCH_HIGH))
    sums.npu_low, sums.bench_low = float(column[layout.NPU_LOW].min()), float(column[layout.BENCH_LOW].min())
    sums.below_1e3, sums.below_5e3 = (int(counts[:, k].sum()) for k in (layout.BELOW_1E3, layout.BELOW_5E3))
    sums.nonfinite = bool(counts[:, layout.NONFINITE].any())
    if with_kl and sums.size:
        sums.kl = _kl_value(*tensor_kernels.kl_pass(
            npu, bench, (sums.npu_low, sums.npu_high), (sums.bench_low, sums.bench_high), chunk,
            nonfinite=counts[:, layout.NONFINITE] if sums.nonfinite else None))
    elif with_kl:
        sums.kl = 0.0
    return sums


def _flat(tensor: np.ndarray) -> np.ndarray:
    """The tensor as a flat array of its own dtype (a complex one as its interleaved real and imaginary parts)."""
    array = np.asarray(tensor)
    if np.iscomplexobj(array):
        array = np.ascontiguousarray(array)
        array = array.view(array.real.dtype)
    return array.reshape(-1)


def _accumulate(blocks: _Blocks) -> _Sums | None:
    """One pass over the pair: every sum, dot, norm, maximum and count; None if non-finite positions differ."""
    sums = _Sums(blocks.npu.size)
    d_buf, r_buf, abs_buf = blocks.buffers[2:5]
    for n, b in blocks:
        npu_sq, bench_sq = _dot(n, n), _dot(b, b)
        if not (math.isfinite(npu_sq) and math.isfinite(bench_sq)):  # a NaN/inf, or squares beyond float64
            if not _zero_matched_nonfinite(n, b):
                return None
            sums.nonfinite = True
            npu_sq, bench_sq = _dot(n, n), _dot(b, b)
        sums.npu_sq += npu_sq
        sums.bench_sq += bench_sq
        sums.dot += _dot(n, b)
        sums.npu_low, sums.npu_high = min(sums.npu_low, float(n.min())), max(sums.npu_high, float(n.max()))
        sums.bench_low, sums.bench_high = min(sums.bench_low, float(b.min())), max(sums.bench_high, float(b.max()))
        m = n.size
        d = np.subtract(n, b, out=d_buf[:m])
        sums.diff_sq += _dot(d, d)
        abs_diff = np.abs(d, out=d)
        sums.abs_sum += float(abs_diff.sum())
        sums.max_abs = _max(sums.max_abs, float(abs_diff.max()))
        _relative(sums, n, b, abs_diff, np.abs(b, out=abs_buf[:m]), r_buf[:m], blocks.mask[:m])
    return sums


def _relative(sums: _Sums, n: np.ndarray, b: np.ndarray, abs_diff: np.ndarray, abs_bench: np.ndarray,
              out: np.ndarray, mask: np.ndarray) -> None:
    """Accumulate both relative errors of one block: msprobe's and msaccucmp's differ only where |b| <= eps."""
    rel = np.divide(abs_diff, abs_bench, out=out)
    small = np.less_equal(abs_bench, _EPS, out=mask)
    tiny = np.flatnonzero(small) if small.any() else None
    if tiny is not None:  # msprobe get_relative_err: where bench == 0, eps is added to both values
        zero = tiny[b[tiny] == 0]
        rel[zero] = np.abs((n[zero] + _EPS) - _EPS) / _EPS
    sums.max_rel = _max(sums.max_rel, float(rel.max()))
    sums.below_1e3 += int(np.count_nonzero(np.less(rel, 0.001, out=mask)))
    sums.below_5e3 += int(np.count_nonzero(np.less(rel, 0.005, out=mask)))
    if tiny is not None:  # msaccucmp's relative error: 0 where |bench| <= eps
        rel[tiny] = 0.0
    sums.rel_nz_sum += float(rel.sum())
    sums.rel_nz_max = _max(sums.rel_nz_max, float(rel.max()))


def _dot(x: np.ndarray, y: np.ndarray) -> float:
    """``x . y`` of one block, single-threaded: a BLAS dot spreads each call over threads, which costs more
    than the block's arithmetic on a busy machine."""
    return float(np.einsum("i,i->", x, y))


def _max(current: float, block: float) -> float:
    """The larger of two maxima, NaN once either is (as numpy's max over the whole tensor)."""
    return block if math.isnan(block) else max(current, block)


def _zero_matched_nonfinite(n: np.ndarray, b: np.ndarray) -> bool:
    """Set NaN/inf held by both at the same positions to 0 in place; False if they differ anywhere."""
    finite = np.isfinite(n) & np.isfinite(b)
    bad = ~finite
    same = (n[bad] == b[bad]) | (np.isnan(n[bad]) & np.isnan(b[bad]))
    if not same.all():
        return False
    n[bad] = 0.0
    b[bad] = 0.0
    return True


def _cosine(sums: _Sums) -> float:
    npu_sq, bench_sq = sums.npu_sq, sums.bench_sq
    if npu_sq <= _EPS**2 and bench_sq <= _EPS**2:  # both norms <= eps
        return 1.0
    if npu_sq <= _EPS**2 or bench_sq <= _EPS**2:
        return math.nan
    # sqrt(a * b) rather than sqrt(a) * sqrt(b): exactly 1.0 for identical tensors, unless it overflows.
    product = npu_sq * bench_sq
    denominator = math.sqrt(product) if 0 < product < math.inf else math.sqrt(npu_sq) * math.sqrt(bench_sq)
    return min(max(sums.dot / denominator, -1.0), 1.0)


def _max_abs(sums: _Sums) -> float:
    return sums.max_abs


def _max_rel(sums: _Sums) -> float:
    return sums.max_rel


def _euc_rel(sums: _Sums) -> float:
    bench_norm, diff_norm = math.sqrt(sums.bench_sq), math.sqrt(sums.diff_sq)
    if bench_norm <= _EPS:
        return 0.0 if diff_norm <= _EPS else math.inf
    return diff_norm / bench_norm


def _one_thousandth(sums: _Sums) -> float:
    return sums.below_1e3 / sums.size if sums.size else 1.0


def _five_thousandths(sums: _Sums) -> float:
    return sums.below_5e3 / sums.size if sums.size else 1.0


def _kl_scale(values: np.ndarray, low: float, high: float) -> float:
    """msaccucmp's KL scaling of one block in place (min-max to [0, 1], floored); returns the block's sum."""
    if high > low:
        np.subtract(values, low, out=values)
        values /= high - low
    else:
        values.fill(1.0)
    np.maximum(values, _KL_FLOOR, out=values)
    return float(values.sum())


def _kl_pass(blocks: _Blocks, sums: _Sums) -> float:
    """kl in a second pass: with s, t the scaled values and S, T their sums (p = s / S, q = t / T),
    ``sum p log(p / q) = sum s log(s / t) / S + log(T / S)``, so both sums and the divergence come from one pass."""
    if not sums.size:
        return 0.0
    s_sum = t_sum = weighted = 0.0
    for s, t in blocks:
        if sums.nonfinite:
            _zero_matched_nonfinite(s, t)
        s_sum += _kl_scale(s, sums.npu_low, sums.npu_high)
        t_sum += _kl_scale(t, sums.bench_low, sums.bench_high)
        np.divide(s, t, out=t)
        np.log(t, out=t)
        weighted += _dot(s, t)
    return _kl_value(s_sum, t_sum - s_sum, weighted)


def _kl_value(s_sum: float, gap: float, weighted: float) -> float:
    """kl from S, T - S and sum s log(s / t) (see `_kl_pass`); values below float64 eps become 0."""
    result = weighted / s_sum + float(np.log1p(gap / s_sum))  # log(T / S), exact near T = S
    return 0.0 if abs(result) < _EPS else result


def _kl(sums: _Sums) -> float:
    return sums.kl


def _are(sums: _Sums) -> float:
    return sums.rel_nz_sum


def _mean_abs(sums: _Sums) -> float:
    return sums.abs_sum / sums.size if sums.size else 0.0


def _rmse(sums: _Sums) -> float:
    return math.sqrt(sums.diff_sq / sums.size) if sums.size else 0.0


def _max_rel_nz(sums: _Sums) -> float:
    return sums.rel_nz_max


def _mean_rel(sums: _Sums) -> float:
    return sums.rel_nz_sum / sums.size if sums.size else 0.0


_KERNELS: dict[str, Callable[[_Sums], float]] = {
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
