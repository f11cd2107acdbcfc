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


@pytest.mark.parametrize("query", [r"LINEAR1", r"^Functional\.", r"forward\.0$", r"layers\.[12]\.\w+\.Linear",
                                   r"\WRELU\W", r"[^.]+\.backward", r"Dropout|LayerNorm", r"(?i)Encoder", r"x*",
                                   r"\Afunctional", r"^$", r"\s|\.0\.f", r"İ"])
def test_one_pass_search_equals_id_by_id(sample_model, query):
    hits = find_hits(sample_model, query, (), None)
    ids = sample_model.graphs["npu"].nodes.ids
    expected = [r for r, i in enumerate(ids) if r > 0 and re.search(query, i, re.I)]
    assert hits == tuple(("npu", r) for r in expected)


def test_structure_filters(data_dir, perturb_pair):
    report = compare_paths(data_dir / "msprobe_extraop" / "npu", perturb_pair[1], fuzzy=True)
    model = ViewModel(report)
    n2b = report.matches.npu_to_bench
    renamed = [r for r in np.flatnonzero(n2b >= 0).tolist()
               if report.npu.nodes.ids[r] != report.bench.nodes.ids[n2b[r]]]
    assert renamed and find_hits(model, "", ("renamed",), None) == tuple(("npu", r) for r in renamed)
    only = find_hits(model, "", ("only-npu",), None)
    assert [r for _, r in only] == (np.flatnonzero(n2b[1:] < 0) + 1).tolist()
    assert find_hits(model, "", ("only-bench",), None) == tuple(
        ("bench", int(r)) for r in np.flatnonzero(report.matches.bench_to_npu[1:] < 0) + 1)
