"""The report document: round trip, strict JSON, and the shipped JSON Schema."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from graphcmp.core.compare import compare_paths
from graphcmp.core.errors import DumpFormatError, InternalError
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.report import CompareReport, load_report, load_saved, save_graph, save_report
from tests.conftest import DATA, REPORT_SCHEMA


@pytest.fixture(scope="module")
def overflow_json(overflow_report, tmp_path_factory):
    path = tmp_path_factory.mktemp("r") / "cmp.json"
    save_report(overflow_report, path)
    return overflow_report, path


def test_written_json_is_strict_and_valid(overflow_json):
    _, path = overflow_json
    text = path.read_text()
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard token {c}"))
    jsonschema.validate(doc, REPORT_SCHEMA)


def test_round_trip_keeps_everything(overflow_json):
    report, path = overflow_json
    back = load_report(path)
    assert back.npu.nodes.ids == report.npu.nodes.ids
    np.testing.assert_array_equal(back.npu.tensors.stats, report.npu.tensors.stats)  # inf and nan kept
    assert np.isinf(back.npu.tensors.stats).any()
    np.testing.assert_array_equal(back.npu.tensors.present, report.npu.tensors.present)
    np.testing.assert_array_equal(back.matches.npu_to_bench, report.matches.npu_to_bench)
    np.testing.assert_array_equal(back.verdicts.status, report.verdicts.status)
    assert back.verdicts.reason == report.verdicts.reason
    assert back.summary() == report.summary()
    assert back.thresholds == report.thresholds
    assert back.npu.view("Functional.conv2d.1.forward") == report.npu.view("Functional.conv2d.1.forward")


def test_graph_file_validates_and_loads(perturb_pair, tmp_path):
    graph = read_msprobe(perturb_pair[0])
    path = tmp_path / "run.json"
    save_graph(graph, path, "test")
    jsonschema.validate(json.loads(path.read_text()), REPORT_SCHEMA)
    back = load_saved(path)
    assert back.nodes.ids == graph.nodes.ids and back.stacks == graph.stacks


def test_not_a_report(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"format": "other"}')
    with pytest.raises(DumpFormatError, match="not a graphcmp compare file"):
        load_report(path)
    path.write_text('{"format": "graphcmp.compare", "schema_version": 99}')
    with pytest.raises(DumpFormatError, match="schema version 99"):
        load_report(path)


def test_bool_is_false_when_an_error_exists(overflow_json):
    report, _ = overflow_json
    assert isinstance(report, CompareReport) and not report


def test_malformed_report_is_one_clear_error(overflow_json, tmp_path):
    _, path = overflow_json
    doc = json.loads(path.read_text())
    doc["npu"]["tensors"]["stats"]["special"] = [[1, "inf"]]  # the shape of an earlier draft of the format
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(DumpFormatError, match=r"bad\.json: field npu\.tensors\.stats\.special is a list, "
                                              r"expected an object"):
        load_report(bad)


def test_children_and_tensor_rows_need_no_tree(perturb_pair):
    graph = read_msprobe(perturb_pair[1])
    for node_id in graph.nodes.ids:
        assert graph.children(node_id) == list(graph.tree.successors(node_id))
        assert graph.tensor_rows(node_id).tolist() == np.flatnonzero(graph.tensors.node == graph.row(node_id)).tolist()


def test_rule_notes_and_fused_groups_survive_the_file(tmp_path):
    from graphcmp.core.matching.specs import matchers_from_specs

    mapping = DATA / "mapping_files" / "cnn_ms_to_pt.yaml"
    report = compare_paths(DATA / "mindspore_cnn" / "bench", DATA / "pytorch_cnn" / "bench",
                           matchers=matchers_from_specs([f"layer-mapping={mapping}", "exact", "fused"]))
    assert report.matches.notes and report.matches.groups
    save_report(report, tmp_path / "cmp.json")
    back = load_report(tmp_path / "cmp.json")
    assert back.matches.groups == report.matches.groups and back.matches.notes == report.matches.notes
    assert back.summary()["rule_report"] == report.summary()["rule_report"]
    np.testing.assert_array_equal(back.matches.bench_to_npu, report.matches.bench_to_npu)
    jsonschema.validate(json.loads((tmp_path / "cmp.json").read_text()), REPORT_SCHEMA)


@pytest.mark.parametrize(("damage", "message"), [
    (lambda d: d["npu"]["nodes"].__setitem__("kind", d["npu"]["nodes"]["kind"][:-1]),
     r"field npu\.nodes\.kind holds \d+ values, expected \d+"),
    (lambda d: d["bench"]["nodes"]["id"].__setitem__(0, 7),
     r"field bench\.nodes\.id holds an integer, expected strings"),
    (lambda d: d["verdicts"]["status"].__setitem__(0, "error"), r"field verdicts\.status does not hold int64 values"),
    (lambda d: d["options"].__setitem__("colour", True), r"field options\.colour is not a comparison option"),
    (lambda d: d["matches"].__setitem__("groups", [[1, 2]]), r"field matches\.groups holds an item that is not"),
    (lambda d: d["thresholds"].__setitem__("rules", {"statistics": [1]}),
     r"field thresholds\.rules\.statistics holds something other than rule objects"),
    (lambda d: d.__delitem__("pairs"), r"field pairs is missing"),
])
def test_a_damaged_report_names_the_field(overflow_json, tmp_path, damage, message):
    _, path = overflow_json
    doc = json.loads(path.read_text())
    damage(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(DumpFormatError, match=rf"bad\.json: {message}"):
        load_report(bad)


def test_a_bug_while_rebuilding_is_an_internal_error(overflow_json, monkeypatch):
    """Bad input is a DumpFormatError; an error graphcmp's own code raises on checked values is its bug."""
    import graphcmp.core.report as report_module

    _, path = overflow_json

    def broken(f, *sizes):
        raise KeyError("a key graphcmp forgot")

    monkeypatch.setattr(report_module, "_pairs_from", broken)
    with pytest.raises(InternalError, match=r"graphcmp bug.*traceback") as caught:
        load_report(path)
    assert not isinstance(caught.value, DumpFormatError) and isinstance(caught.value.__cause__, KeyError)


@pytest.mark.parametrize("name", ["cmp.json", "cmp.npz"])
def test_data_flow_edges_are_stored_and_read_back(perturb_pair, tmp_path, name):
    """A result holds each side's recovered data-flow edges; loading reads them instead of computing them."""
    from graphcmp.core.dataflow import flow_edges

    report = compare_paths(*perturb_pair)
    save_report(report, tmp_path / name)
    back = load_report(tmp_path / name)
    assert all("flows" in g._cache for g in (back.npu, back.bench))  # read from the file, not computed on first use
    for side in ("npu", "bench"):
        computed = flow_edges(getattr(report, side))
        assert len(computed) > 0
        np.testing.assert_array_equal(back.flow_edges()[side].src, computed.src)
        np.testing.assert_array_equal(back.flow_edges()[side].dst, computed.dst)
        assert not back.flow_edges()[side].control.any()


def test_a_result_without_data_flow_edges_computes_them(perturb_pair, tmp_path):
    """A file written before the edges were stored still opens: its edges are recovered from the runs."""
    from graphcmp.core.dataflow import flow_edges

    report = compare_paths(*perturb_pair)
    save_report(report, tmp_path / "cmp.json")
    doc = json.loads((tmp_path / "cmp.json").read_text())
    del doc["flows"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    back = load_report(tmp_path / "old.json")
    assert "flows" not in back.bench._cache
    np.testing.assert_array_equal(back.flow_edges()["bench"].dst, flow_edges(report.bench).dst)


def test_a_data_flow_edge_outside_the_graph_is_named(perturb_pair, tmp_path):
    report = compare_paths(*perturb_pair)
    save_report(report, tmp_path / "cmp.json")
    doc = json.loads((tmp_path / "cmp.json").read_text())
    doc["flows"]["npu"]["dst"][0] = len(report.npu)
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(DumpFormatError, match=r"bad\.json: field flows\.npu\.dst holds \d+ \(row 0\), outside"):
        load_report(tmp_path / "bad.json")
