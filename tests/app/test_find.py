"""Search and filters: regex over ids AND filters, unmatched bench nodes included, bad regex is an error."""

from __future__ import annotations

import re

import numpy as np
import pytest

from graphcmp.app.find import SearchError, find_hits
from graphcmp.app.model import ViewModel
from graphcmp.core.compare import compare_paths
from graphcmp.core.judge import UNMATCHED, WARNING


def test_regex_matches_ids_case_insensitive(sample_model):
    hits = find_hits(sample_model, "LINEAR1", (), None)
    ids = sample_model.graphs["npu"].nodes.ids
    expected = [r for r, i in enumerate(ids) if re.search("linear1", i, re.I) and r > 0]
    assert hits == tuple(("npu", r) for r in expected)


def test_verdict_filter(sample_model, sample_report):
    hits = find_hits(sample_model, "", ("warning",), None)
    assert [r for _, r in hits] == np.flatnonzero(sample_report.verdicts.status == WARNING).tolist()


def test_unmatched_filter_lists_both_sides(data_dir, perturb_pair):
    report = compare_paths(data_dir / "msprobe_extraop" / "npu", perturb_pair[1])
    model = ViewModel(report)
    hits = find_hits(model, "", ("unmatched",), None)
    npu = [r for s, r in hits if s == "npu"]
    bench = [r for s, r in hits if s == "bench"]
    assert npu == np.flatnonzero(report.verdicts.status == UNMATCHED).tolist()
    assert bench == np.flatnonzero(report.matches.bench_to_npu < 0).tolist() and bench


def test_overflow_filter(data_dir):
    report = compare_paths(data_dir / "msprobe_overflow_tokens" / "npu", data_dir / "msprobe_overflow_tokens" / "bench")
    model = ViewModel(report)
    hits = find_hits(model, "", ("overflow",), None)
    assert hits and all(model.overflow[s][r] > 0 for s, r in hits)
    assert {model.graphs[s].nodes.ids[r] for s, r in hits} >= {"Functional.conv2d.1.forward"}


def test_bad_regex(sample_model):
    with pytest.raises(SearchError, match="not a regular expression"):
        find_hits(sample_model, "linear(", (), None)


def test_nothing_asked_nothing_found(sample_model):
    assert find_hits(sample_model, "", (), None) == ()
