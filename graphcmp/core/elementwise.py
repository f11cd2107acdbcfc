"""Element-wise comparison of one tensor pair: the picture of npu against bench behind a pair's metrics.

For a pair of real tensors (msprobe task ``tensor``, kernel dumps) `elementwise` gives what a single-op view
draws: a histogram of the elements' errors (log-spaced bins of the absolute error, with the exact
matches counted apart), the worst elements with their indices, and a sample of (bench, npu) values for a
scatter plot (the worst elements first, then an even stride through the rest). `pair_elements` reads the
two files of a pair of a run's tensors (`tensorcmp.tensor_file`, `tensorio.read_tensor`) and compares them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.records import DumpGraph, FrozenColumns
from graphcmp.core.tensorcmp import recorded_shape, tensor_file
from graphcmp.core.tensorio import read_tensor

__all__ = ["Elementwise", "elementwise", "pair_elements"]


@dataclass(frozen=True, slots=True, eq=False)
class Elementwise(FrozenColumns):
    """The element-wise picture of one pair (all values as float64).

    Attributes
    ----------
    shape : tuple of int
        The tensors' shape.
    count : int
        Elements compared (both finite or both the same non-finite value count as compared).
    exact : int
        Elements equal bit for bit in value (npu == bench).
    edges, counts : ndarray
        The histogram of the absolute error of the elements that differ: bin edges (log spaced, ascending) and
        counts; a non-finite error (inf/NaN on one side only) is counted in `nonfinite`.
    nonfinite : int
        Elements where the two sides differ and the difference is not finite.
    worst : ndarray of int64, (k, ndim)
        Indices of the `k` elements of the largest absolute error, worst first.
    worst_npu, worst_bench, worst_abs, worst_rel : ndarray
        Their values and errors (relative to ``|bench|``; inf where bench is 0 and npu is not).
    sample_npu, sample_bench : ndarray
        Values of up to `sample` elements for a scatter plot: the worst first, then a stride through the tensor.
    """

    shape: tuple[int, ...]
    count: int
    exact: int
    edges: np.ndarray
    counts: np.ndarray
    nonfinite: int
    worst: np.ndarray
    worst_npu: np.ndarray
    worst_bench: np.ndarray
    worst_abs: np.ndarray
    worst_rel: np.ndarray
    sample_npu: np.ndarray
    sample_bench: np.ndarray


def elementwise(npu: np.ndarray, bench: np.ndarray, worst: int = 20, bins: int = 48,
                sample: int = 5000) -> Elementwise:
    """Compare two tensors element by element.

    Raises
    ------
    ValueError
        The two tensors have different shapes (there is no element-wise picture of them).

    Examples
    --------
    >>> e = elementwise(np.array([[1.0, 2.0], [3.0, 4.5]]), np.array([[1.0, 2.0], [3.0, 4.0]]), worst=2)
    >>> e.count, e.exact, e.worst.tolist(), float(e.worst_abs[0]), int(e.counts.sum())
    (4, 3, [[1, 1]], 0.5, 1)
    """
    if npu.shape != bench.shape:
        raise ValueError(f"shapes differ: npu {list(npu.shape)}, bench {list(bench.shape)}")
    a = np.asarray(npu, np.float64).reshape(-1)
    b = np.asarray(bench, np.float64).reshape(-1)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        diff = np.where(same, 0.0, np.abs(a - b))
        rel = np.where(same, 0.0, diff / np.abs(b))
    diff = np.where(np.isnan(diff), np.inf, diff)  # one side NaN: as far apart as can be
    differ = diff[~same]
    finite = differ[np.isfinite(differ)]
    if len(finite):
        lo, hi = float(finite.min()), float(finite.max())
        edges = np.geomspace(lo, hi if hi > lo else lo * 10, bins + 1)
        counts, _ = np.histogram(finite, edges)
    else:
        edges, counts = np.zeros(0), np.zeros(0, np.int64)
    k = min(worst, int(np.count_nonzero(~same)))
    top = np.argpartition(-diff, k - 1)[:k] if k else np.zeros(0, np.int64)
    top = top[np.argsort(-diff[top], kind="stable")]
    rest = np.setdiff1d(np.arange(0, len(a), max(1, len(a) // max(sample - k, 1))), top)[: max(sample - k, 0)]
    picked = np.concatenate([top, rest]).astype(np.int64)
    index = np.stack(np.unravel_index(top, npu.shape), axis=1) if npu.ndim else np.zeros((k, 0), np.int64)
    return Elementwise(shape=tuple(int(d) for d in npu.shape), count=len(a), exact=int(np.count_nonzero(same)),
                       edges=edges, counts=counts.astype(np.int64), nonfinite=int(len(differ) - len(finite)),
                       worst=index.astype(np.int64), worst_npu=a[top], worst_bench=b[top], worst_abs=diff[top],
                       worst_rel=rel[top], sample_npu=a[picked], sample_bench=b[picked])


def pair_elements(npu: DumpGraph, bench: DumpGraph, npu_row: int, bench_row: int) -> Elementwise | None:
    """The element-wise picture of tensor `npu_row` of `npu` against `bench_row` of `bench`; None when either run
    has no file for it.

    Raises
    ------
    DumpFormatError
        A file cannot be read, holds another shape than the dump records, or the two shapes differ.
    """
    paths = tensor_file(npu, npu_row), tensor_file(bench, bench_row)
    if paths[0] is None or paths[1] is None:
        return None
    arrays = []
    for path, graph, row in zip(paths, (npu, bench), (npu_row, bench_row)):
        try:
            array = np.asarray(read_tensor(path))
        except (OSError, ValueError) as err:
            raise DumpFormatError(f"{path}: cannot read the tensor ({err})") from err
        shape = recorded_shape(graph.tensors.shape[row])
        if shape is not None and tuple(array.shape) != shape:
            raise DumpFormatError(f"{path}: holds a tensor of shape {list(array.shape)}, but the dump records "
                                  f"{list(shape)} for it")
        arrays.append(array)
    try:
        return elementwise(arrays[0], arrays[1])
    except ValueError as err:
        raise DumpFormatError(f"{paths[0]} / {paths[1]}: {err}") from err
