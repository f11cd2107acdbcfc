"""Frozen records are truly read-only (arrays, mappings, also after pickling) and compare by value."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from graphcmp.core.compare import compare_graphs
from graphcmp.core.readers import read_graph


@pytest.fixture(scope="module")
def runs(perturb_pair):
    return read_graph(perturb_pair[0]), read_graph(perturb_pair[1])


def test_report_columns_cannot_be_written(runs):
    report = compare_graphs(*runs)
    columns = [report.verdicts.status, report.verdicts.severity, report.matches.npu_to_bench, report.pairs.npu,
               report.pairs.metrics["rel_err"], report.npu.nodes.parent, report.npu.tensors.stats,
               report.bench.edges.src]
    for column in columns:
        with pytest.raises(ValueError, match="read-only"):
            column[0] = 2
    with pytest.raises(TypeError):
        report.pairs.metrics["rel_err"] = np.zeros(len(report.pairs))  # type: ignore[index]


def test_equal_records_compare_equal(runs):
    npu, bench = runs
    one, two = compare_graphs(npu, bench), compare_graphs(npu, bench)
    assert one.verdicts == two.verdicts and one.matches == two.matches and one.pairs == two.pairs
    assert one == two  # NaN severities and metrics count as equal
    assert np.isnan(one.pairs.metrics["md5_diff"]).any()
    other = compare_graphs(bench, npu)
    assert one.verdicts != other.verdicts and one.npu.nodes == other.bench.nodes


def test_a_run_read_in_another_process_stays_frozen(runs):
    npu = pickle.loads(pickle.dumps(runs[0]))  # what read_pair's child process sends back
    assert npu == runs[0]
    assert not npu.tensors.stats.flags.writeable and not npu.nodes.kind.flags.writeable
