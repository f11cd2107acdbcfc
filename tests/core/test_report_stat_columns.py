"""The pair metrics a result leaves out (``rel_errs``, ``abs_diff``): computed again on load, bit for bit."""

from __future__ import annotations

import json
import pickle
import zipfile

import jsonschema
import numpy as np
import pytest

from graphcmp.core.npzio import DOCUMENT_MEMBER, write_npz
from graphcmp.core.pairing import STAT_COLUMNS, PairMetrics
from graphcmp.core.report import _npz_floats, _runs_document, _written_apart, load_report, save_report
from tests.conftest import REPORT_SCHEMA


@pytest.fixture(scope="module")
def saved(overflow_report, tmp_path_factory):
    """The real overflow pair compared and saved as npz."""
    path = tmp_path_factory.mktemp("stat") / "cmp.npz"
    save_report(overflow_report, path)
    return overflow_report, path


def test_the_npz_result_leaves_them_out_and_loading_gives_them_bit_for_bit(saved):
    report, path = saved
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        metrics = json.loads(zf.read(DOCUMENT_MEMBER))["pairs"]["metrics"]
    assert not [n for n in names if n.startswith(("pairs.metrics.rel_errs", "pairs.metrics.abs_diff"))]
    assert set(metrics) == set(report.pairs.metrics) - set(STAT_COLUMNS)
    compared, back = report.pairs.metrics, load_report(path).pairs.metrics
    assert list(back) == list(compared)  # the same columns in the same order
    abs_diff = compared["abs_diff"]
    assert np.isinf(compared["rel_errs"]).any() and np.isnan(abs_diff).any()  # the overflow pair's inf and NaN
    for name in STAT_COLUMNS:
        assert back[name].dtype == compared[name].dtype and back[name].shape == compared[name].shape
        assert back[name].tobytes() == compared[name].tobytes(), name
        assert not back[name].flags.writeable
    assert back == compared and load_report(path).pairs == report.pairs


def test_a_result_that_stores_them_still_loads_with_its_own_columns(saved, tmp_path):
    """A result written before they were left out holds them: loading reads them, nothing is computed."""
    report, _ = saved
    old = tmp_path / "old.npz"
    doc = report._document(_npz_floats, runs=_written_apart)
    doc["pairs"]["metrics"]["abs_diff"] = _npz_floats(np.full(report.pairs.metrics["abs_diff"].shape, 7.0))
    write_npz(old, {**doc, **_runs_document(report.npu, report.bench)})
    with zipfile.ZipFile(old) as zf:
        assert "pairs.metrics.rel_errs.values.npy" in zf.namelist()
    back = load_report(old)
    assert back.pairs.metrics["rel_errs"].tobytes() == report.pairs.metrics["rel_errs"].tobytes()
    assert (back.pairs.metrics["abs_diff"] == 7.0).all()  # the file's column, as stored
    assert list(back.pairs.metrics) == list(report.pairs.metrics)
    assert back.verdicts == report.verdicts and back.noise == report.noise


def test_the_json_document_keeps_them_valid_from_an_npz_result(saved, tmp_path):
    report, path = saved
    out = tmp_path / "cmp.json"
    save_report(load_report(path), out)  # what `graphcmp export RESULT --to json` writes
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, REPORT_SCHEMA)
    assert [k for k in doc["pairs"]["metrics"] if k in STAT_COLUMNS] == list(STAT_COLUMNS)
    assert load_report(out).pairs == report.pairs


def test_some_pairs_rows_are_computed_alone_and_equal_the_whole_columns(saved):
    report, path = saved
    metrics = load_report(path).pairs.metrics
    ks = np.flatnonzero(np.isnan(report.pairs.metrics["abs_diff"]).any(axis=1))[:5]
    ks = np.concatenate([ks, [0, len(report.pairs) - 1]])
    rows = metrics.at(ks)
    assert not metrics._computed.columns  # the whole columns were not computed for a few rows
    assert list(rows) == list(report.pairs.metrics)
    for name, column in report.pairs.metrics.items():
        assert rows[name].tobytes() == column[ks].tobytes(), name
    assert {k: v.tobytes() for k, v in metrics.at(ks).items()} == {k: v.tobytes() for k, v in rows.items()}


def test_a_loaded_report_pickles_with_its_metrics(saved):
    report, path = saved
    back = pickle.loads(pickle.dumps(load_report(path)))  # as sent to another process
    assert isinstance(back.pairs.metrics, PairMetrics)
    assert back.pairs.metrics["rel_errs"].tobytes() == report.pairs.metrics["rel_errs"].tobytes()
    assert not back.pairs.metrics["rel_err"].flags.writeable


def test_the_float_metrics_are_named_without_computing_them(saved):
    report, path = saved
    back = load_report(path)
    names = back.pairs.float_metrics()
    assert names == [n for n, c in report.pairs.metrics.items() if c.dtype.kind == "f"]
    assert "abs_diff" in names and "identical" not in names and not back.pairs.metrics._computed.columns
