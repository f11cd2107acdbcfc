"""Pairing the tensors of matched nodes, and the per-pair metric columns computed on them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from graphcmp.core.matching import MatchTable
from graphcmp.core.metrics import stat_abs_diff, stat_rel_errors, stats_identical
from graphcmp.core.records import DumpGraph
from graphcmp.core.rules import Thresholds

__all__ = ["TensorPairs", "pair_metrics", "pair_tensors"]

TensorMetricsFn = Callable[[DumpGraph, DumpGraph, np.ndarray, np.ndarray], dict[str, np.ndarray]]


@dataclass(frozen=True, slots=True)
class TensorPairs:
    """Tensor rows paired across the runs, with metric columns (one value per pair).

    `metrics` always has ``rel_err`` (largest statistic relative error), ``rel_errs`` (n, 4),
    ``abs_diff`` (n, 4), ``identical`` (bool) and ``md5_diff`` (1.0 different, 0.0 equal, NaN
    when either side has no md5); tensor-file metrics (``cosine`` ...) are added when computed,
    NaN where a pair has no files.
    """

    npu: np.ndarray  # int32 tensor rows of the npu run
    bench: np.ndarray  # int32 tensor rows of the bench run
    metrics: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.npu)


def pair_tensors(npu: DumpGraph, bench: DumpGraph, matches: MatchTable) -> tuple[np.ndarray, np.ndarray]:
    """Rows of tensors with the same role and slot on matched nodes, in npu order.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> from graphcmp.core.matching import match_graphs, default_matchers
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1], "Max": 1, "Min": 1, "Mean": 1, "Norm": 1}
    >>> g = parse_msprobe({"data": {"Functional.relu.0.forward": {"input_args": [t], "output": [t]}}})
    >>> [r.tolist() for r in pair_tensors(g, g, match_graphs(g, g, default_matchers()))]
    [[0, 1], [0, 1]]
    """
    nt, bt = npu.tensors, bench.tensors
    vocab = {s: i for i, s in enumerate(sorted(set(nt.slot) | set(bt.slot)))}
    width = max(len(vocab), 1)
    partner = matches.npu_to_bench[nt.node]
    npu_key = _keys(partner, nt.role, nt.slot, vocab, width)
    bench_key = _keys(bt.node, bt.role, bt.slot, vocab, width)
    npu_rows = np.flatnonzero(partner >= 0)
    npu_key = npu_key[npu_rows]
    order = np.argsort(bench_key, kind="stable")
    sorted_keys = bench_key[order]
    pos = np.searchsorted(sorted_keys, npu_key)
    pos_ok = pos < len(sorted_keys)
    found = np.zeros(len(npu_key), bool)
    found[pos_ok] = sorted_keys[pos[pos_ok]] == npu_key[pos_ok]
    return npu_rows[found].astype(np.int32), order[pos[found]].astype(np.int32)


def _keys(node: np.ndarray, role: np.ndarray, slot: tuple[str, ...], vocab: dict[str, int], width: int) -> np.ndarray:
    slot_code = np.fromiter((vocab[s] for s in slot), np.int64, len(slot))
    return (node.astype(np.int64) * 4 + role.astype(np.int64)) * width + slot_code


def pair_metrics(
    npu: DumpGraph,
    bench: DumpGraph,
    npu_rows: np.ndarray,
    bench_rows: np.ndarray,
    thresholds: Thresholds,
    tensor_metrics: TensorMetricsFn | None = None,
) -> TensorPairs:
    """Compute the statistics and md5 metrics of every pair, and tensor-file metrics if asked."""
    nt, bt = npu.tensors, bench.tensors
    a, b = nt.stats[npu_rows], bt.stats[bench_rows]
    present = nt.present[npu_rows] & bt.present[bench_rows]
    rel = stat_rel_errors(a, b, present, atol=thresholds.atol, magnitude_floor=thresholds.magnitude_floor)
    metrics = {
        "rel_err": np.round(rel.max(axis=1, initial=0.0), 12),
        "rel_errs": rel,
        "abs_diff": np.where(present, stat_abs_diff(a, b), np.nan),
        "identical": stats_identical(a, b, present) & _same_values(nt.value, bt.value, npu_rows, bench_rows),
        "md5_diff": _md5_diff(nt.md5, bt.md5, npu_rows, bench_rows),
    }
    if tensor_metrics is not None:
        metrics.update(tensor_metrics(npu, bench, npu_rows, bench_rows))
    return TensorPairs(npu_rows, bench_rows, metrics)


def _same_values(a: tuple[str, ...], b: tuple[str, ...], rows_a: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
    return np.fromiter((a[i] == b[j] for i, j in zip(rows_a.tolist(), rows_b.tolist())), bool, len(rows_a))


def _md5_diff(a: tuple[str, ...], b: tuple[str, ...], rows_a: np.ndarray, rows_b: np.ndarray) -> np.ndarray:
    def one(i: int, j: int) -> float:
        if not a[i] or not b[j]:
            return np.nan
        return 0.0 if a[i] == b[j] else 1.0

    return np.fromiter((one(i, j) for i, j in zip(rows_a.tolist(), rows_b.tolist())), np.float64, len(rows_a))
