"""Result sets: one file, a folder of step/rank reports (by name or index.json), two dump folders; bad input."""

from __future__ import annotations

import json

import pytest

from graphcmp.app.results import open_results
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.records import DumpGraph
from graphcmp.core.report import CompareReport, save_graph


def test_single_report_file(report_file, sample_report):
    results = open_results([report_file])
    doc = results.document(results.default.key)
    assert isinstance(doc, CompareReport)
    assert doc.npu.nodes.ids == sample_report.npu.nodes.ids
    assert [e.key for e in results.entries] == ["0"]


def test_folder_by_file_names(steps_folder):
    results = open_results([steps_folder])
    assert [(e.step, e.rank) for e in results.entries] == [(0, 0), (1, 0)]
    assert results.steps() == [0, 1] and results.ranks() == [0]
    step1 = results.document(results.find(1, 0).key)
    assert step1.npu.info.step == 1


def test_folder_by_index(steps_folder, tmp_path):
    for name in ("step0_rank0.json", "step1_rank0.json"):
        (tmp_path / name.replace("step", "s")).write_bytes((steps_folder / name).read_bytes())
    (tmp_path / "index.json").write_text(json.dumps({"results": [
        {"file": "s1_rank0.json", "step": 1, "rank": 0}, {"file": "s0_rank0.json", "step": 0, "rank": 0}]}))
    results = open_results([tmp_path])
    assert [(e.step, e.rank) for e in results.entries] == [(0, 0), (1, 0)]
    assert results.document(results.entries[1].key).npu.info.step == 1


def test_batch_results_folder(tmp_path):
    from graphcmp.cli.main import main
    from tests.app.conftest import TF_SMALL

    out = tmp_path / "results"
    assert main(["compare", str(TF_SMALL / "perturb"), str(TF_SMALL / "baseline"), "-o", str(out), "-q",
                 "--workers", "1"]) == 1
    results = open_results([out])
    assert [(e.step, e.rank) for e in results.entries] == [(0, 0), (1, 0)]
    assert results.document(results.find(1, 0).key).npu.info.step == 1


def test_two_dump_folders_are_compared(perturb_pair, sample_report):
    results = open_results(perturb_pair)
    doc = results.document(results.default.key)
    assert doc.verdicts.histogram() == sample_report.verdicts.histogram()


def test_built_graph_file(perturb_pair, tmp_path, sample_report):
    save_graph(sample_report.bench, tmp_path / "run.json", "test")
    results = open_results([tmp_path / "run.json"])
    assert isinstance(results.document("0"), DumpGraph)


def test_unknown_key_falls_back_to_default(steps_folder):
    results = open_results([steps_folder])
    assert results.entry("../../etc/passwd") == results.default


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: d / "missing.json", "no such file or folder"),
    (lambda d: (d / "bad.json").write_text("{not json") and d / "bad.json", "bad.json"),
    (lambda d: (d / "other.json").write_text('{"format": "x"}') and d / "other.json", "not a graphcmp"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "no index.json"),
])
def test_bad_input_is_a_one_line_error(tmp_path, make, message):
    with pytest.raises(DumpFormatError, match=message) as info:
        open_results([make(tmp_path)])
    assert "\n" not in str(info.value)


def test_index_cannot_reach_outside_the_folder(tmp_path, report_file):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "index.json").write_text(json.dumps([{"file": str(report_file), "step": 0, "rank": 0}]))
    with pytest.raises(DumpFormatError, match="outside the results folder"):
        open_results([folder])
