"""Comparing two runs: match nodes, pair tensors, compute metrics, judge — one call, one report."""

from __future__ import annotations

import os
from collections.abc import Sequence

from graphcmp._version import __version__
from graphcmp.core.judge import judge
from graphcmp.core.matching import ChildMatcher, default_matchers, match_graphs
from graphcmp.core.noise import noise_model
from graphcmp.core.overflow import overflow_levels
from graphcmp.core.pairing import TensorMetricsFn, pair_metrics, pair_tensors
from graphcmp.core.readers.pair import read_pair
from graphcmp.core.records import DumpGraph
from graphcmp.core.report import CompareOptions, CompareReport
from graphcmp.core.rules import DEFAULT_THRESHOLDS, Thresholds

__all__ = ["compare_graphs", "compare_paths"]


def compare_graphs(
    npu: DumpGraph,
    bench: DumpGraph,
    *,
    fuzzy: bool = False,
    matchers: Sequence[ChildMatcher] | None = None,
    thresholds: Thresholds | None = None,
    tensor_metrics: TensorMetricsFn | None = None,
) -> CompareReport:
    """Compare an npu run with its bench run.

    Parameters
    ----------
    npu, bench : DumpGraph
        The run under test and the baseline.
    fuzzy : bool
        Also match calls whose counters differ (see `FuzzyMatcher`). Ignored when `matchers` is given.
    matchers : sequence of ChildMatcher, optional
        Matching strategies in priority order. Defaults to `default_matchers(fuzzy=fuzzy)`.
    thresholds : Thresholds, optional
        Tolerances and rules. Defaults to `DEFAULT_THRESHOLDS`.
    tensor_metrics : callable, optional
        Computes real-tensor metrics for the pairs (tensor task mode); None compares statistics only.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...      "Mean": 0.5, "Norm": 1.0}
    >>> bench = parse_msprobe({"data": {"Functional.relu.0.forward": {"input_args": [t], "output": [t]}}})
    >>> npu = parse_msprobe({"data": {"Functional.relu.0.forward": {"input_args": [t],
    ...                                                            "output": [dict(t, Max=2.0)]}}})
    >>> report = compare_graphs(npu, bench)
    >>> report.verdict("Functional.relu.0.forward").status
    'error'
    """
    matchers = list(matchers) if matchers is not None else default_matchers(fuzzy=fuzzy)
    thresholds = thresholds or DEFAULT_THRESHOLDS
    matches = match_graphs(npu, bench, matchers)
    npu_rows, bench_rows = pair_tensors(npu, bench, matches)
    pairs = pair_metrics(npu, bench, npu_rows, bench_rows, thresholds, tensor_metrics)
    overflow = overflow_levels(npu)
    noise = noise_model(npu, bench, matches, pairs, thresholds.noise, overflow)
    verdicts = judge(npu, bench, matches, pairs, thresholds, noise)
    options = CompareOptions(fuzzy=fuzzy, matchers=tuple(m.name for m in matchers),
                             tensor_metrics=tensor_metrics is not None)
    return CompareReport(npu=npu, bench=bench, matches=matches, pairs=pairs, verdicts=verdicts,
                         thresholds=thresholds, options=options, tool_version=__version__, noise=noise,
                         _cache={"overflow": overflow})


def compare_paths(
    npu_path: str | os.PathLike[str],
    bench_path: str | os.PathLike[str],
    *,
    format: str | None = None,
    **options,
) -> CompareReport:
    """Read both runs (format detected unless given) and compare them; see `compare_graphs`."""
    npu, bench = read_pair(npu_path, bench_path, format=format)
    return compare_graphs(npu, bench, **options)
