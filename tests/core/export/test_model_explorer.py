"""Model Explorer output: valid against its documented shape, and loads back with our nodes and values."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from graphcmp.core.compare import compare_vis
from graphcmp.core.dataflow import flow_edges
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.export.model_explorer import (
    GRAPH_FILE,
    MAX_VALUE,
    VERDICT_VALUES,
    validate_graph_collection,
    validate_node_data,
    write_model_explorer,
)
from graphcmp.core.readers import read_graph
from graphcmp.core.readers.vis import read_vis
from graphcmp.core.report import CompareReport
from tests.conftest import DATA
from tests.core.export.test_vis_db import sample_reports


@pytest.fixture(scope="module")
def report() -> CompareReport:
    return sample_reports()[0]


def _load(folder) -> tuple[dict, dict]:
    graphs = json.loads((folder / GRAPH_FILE).read_text())
    data = {p.stem.removeprefix("node_data_"): json.loads(p.read_text()) for p in folder.glob("node_data_*.json")}
    return graphs, data


def _validated(folder) -> tuple[dict, dict]:
    graphs, data = _load(folder)
    validate_graph_collection(graphs, GRAPH_FILE)
    ids = {g["id"]: {n["id"] for n in g["nodes"]} for g in graphs["graphs"]}
    for name, doc in data.items():
        validate_node_data(doc, ids, name)
    return graphs, data


def test_export_validates_and_loads_back(report, tmp_path):
    result = write_model_explorer(report, tmp_path / "me")
    graphs, data = _validated(tmp_path / "me")
    assert result.nodes == 356 and len(result.paths) == 1 + len(data)
    npu, bench = graphs["graphs"]
    assert (npu["id"], bench["id"]) == ("npu", "bench")
    assert [n["id"] for n in npu["nodes"]] == list(report.npu.nodes.ids)
    assert [n["id"] for n in bench["nodes"]] == list(report.bench.nodes.ids)
    assert set(data) == {"verdict", "severity", "worst_severity", "input_severity", "role", "margin"}
    origins = {i for i, r in data["role"]["npu"]["results"].items() if r["value"] == 3}
    assert origins == {report.npu.nodes.ids[r] for r in report.noise.origins().tolist()} and origins
    for row, node_id in enumerate(report.npu.nodes.ids):
        status = int(report.verdicts.status[row])
        verdict = data["verdict"]["npu"]["results"].get(node_id)
        assert (verdict["value"] if verdict else None) == VERDICT_VALUES.get(status)
        severity = data["severity"]["npu"]["results"].get(node_id)
        if status >= 0:
            expected = report.verdicts.severity[row]
            assert severity["value"] == (expected if np.isfinite(expected) else MAX_VALUE)
        else:
            assert severity is None
    # bench nodes carry their npu partner's verdict
    linear = "Module.encoder.layers.1.linear1.Linear.forward.0"
    assert data["verdict"]["bench"]["results"][linear]["value"] == data["verdict"]["npu"]["results"][linear]["value"]
    assert [t["value"] for t in data["verdict"]["npu"]["thresholds"]] == [0, 1, 2, 3]
    assert data["severity"]["npu"]["thresholds"][0]["value"] == report.thresholds.rules["statistics"][0].warn


def test_hierarchy_is_the_namespace(report, tmp_path):
    write_model_explorer(report, tmp_path / "me")
    graphs, _ = _load(tmp_path / "me")
    nodes = {n["id"]: n for n in graphs["graphs"][0]["nodes"]}
    layer = "Module.encoder.TransformerEncoder.forward.0/Module.encoder.layers.1.TransformerEncoderLayer.forward.0"
    assert nodes["Module.encoder.layers.1.TransformerEncoderLayer.forward.0"]["namespace"] == layer
    assert nodes["Module.encoder.layers.1.TransformerEncoderLayer.forward.0"]["config"] == {"pinToGroupTop": True}
    linear = nodes["Module.encoder.layers.1.linear1.Linear.forward.0"]
    assert linear["namespace"] == f"{layer}/Module.encoder.layers.1.linear1.Linear.forward.0"
    api = nodes["Functional.linear.2.forward"]
    assert api["namespace"] == linear["namespace"] and "config" not in api
    # edges are the data flow the viewer draws: the linear's input comes from the layer norm before it
    flows = flow_edges(report.npu)
    row = report.npu.row(api["id"])
    producers = {report.npu.nodes.ids[a] for a, b in zip(flows.src.tolist(), flows.dst.tolist()) if b == row}
    assert {e["sourceNodeId"] for e in api["incomingEdges"]} == producers == {"Functional.layer_norm.2.forward"}
    assert nodes["DefaultModel"]["namespace"] == "" and nodes["DefaultModel"]["incomingEdges"] == []
    attrs = dict((a["key"], a["value"]) for a in linear["attrs"])
    assert attrs["verdict"] == "error" and attrs["matched"] == linear["id"] and attrs["op"] == "Linear"
    out = {a["key"]: a["value"] for a in linear["outputsMetadata"][0]["attrs"]}
    view = report.npu.view(linear["id"]).tensors
    assert float(out["max"]) == next(t.stats["max"] for t in view if t.role.name == "OUTPUT")


def test_single_run_and_msprobe_index(perturb_pair, tmp_path):
    write_model_explorer(read_graph(perturb_pair[1]), tmp_path / "run")
    graphs, data = _validated(tmp_path / "run")
    assert [g["id"] for g in graphs["graphs"]] == ["run"] and len(graphs["graphs"][0]["nodes"]) == 178 and not data
    doc = read_vis(DATA / "vis_cnn_overflow" / "compare_v812.vis.gz")
    write_model_explorer(compare_vis(doc), tmp_path / "cnn")
    _, data = _validated(tmp_path / "cnn")
    values = data["msprobe_precision_index"]["npu"]["results"]
    expected = {n: v for n, v in zip(doc.npu.nodes.ids, doc.precision_index.tolist()) if not np.isnan(v)}
    assert values.keys() == expected.keys() and all(values[n]["value"] == v for n, v in expected.items())
    assert [g["stop"] for g in data["msprobe_precision_index"]["npu"]["gradient"]] == [0, 1]


def test_validators_reject_what_model_explorer_cannot_load(report, tmp_path):
    write_model_explorer(report, tmp_path / "me")
    graphs, data = _load(tmp_path / "me")
    broken = copy.deepcopy(graphs)
    broken["graphs"][0]["nodes"][3]["incomingEdges"][0]["sourceNodeId"] = "nowhere"
    with pytest.raises(DumpFormatError, match=r"graphs\[0\]\.nodes\[3\]\.incomingEdges\[0\].sourceNodeId"):
        validate_graph_collection(broken)
    broken = copy.deepcopy(graphs)
    broken["graphs"][1]["nodes"][1]["attrs"][0]["value"] = 3
    with pytest.raises(DumpFormatError, match=r"graphs\[1\]\.nodes\[1\]\.attrs\[0\]\.value"):
        validate_graph_collection(broken)
    duplicate = copy.deepcopy(graphs)
    duplicate["graphs"][0]["nodes"].append(duplicate["graphs"][0]["nodes"][0])
    with pytest.raises(DumpFormatError, match="not unique"):
        validate_graph_collection(duplicate)
    bad = copy.deepcopy(data["severity"])
    del bad["npu"]["thresholds"]
    with pytest.raises(DumpFormatError, match="needs thresholds or a gradient"):
        validate_node_data(bad)
    with pytest.raises(DumpFormatError, match="no graph with this id"):
        validate_node_data({"other": data["verdict"]["npu"]}, {"npu": set()})


def test_parameters_show_as_node_attributes(perturb_pair, tmp_path):
    """Model Explorer lists only inputs an edge reaches, and no edge reaches a weight: each parameter is a node
    attribute too, with its statistics and verdict (tf_small's perturbed linear1 weight is the divergence)."""
    from graphcmp.core.compare import compare_paths

    report = compare_paths(*perturb_pair)
    write_model_explorer(report, tmp_path / "me")
    graphs, _ = _validated(tmp_path / "me")
    node_id = "Module.encoder.layers.1.linear1.Linear.forward.0"
    for graph in graphs["graphs"]:
        node = next(n for n in graph["nodes"] if n["id"] == node_id)
        attrs = {a["key"]: a["value"] for a in node["attrs"]}
        t = (report.npu if graph["id"] == "npu" else report.bench).tensors
        row = (report.npu if graph["id"] == "npu" else report.bench).row(node_id)
        weight = next(k for k in np.flatnonzero(t.node == row) if t.role[k] == 2 and t.slot[k] == "weight")
        expected = f"{t.dtype[weight]} {t.shape[weight]} max={float(t.stats[weight, 0])!r} "
        assert attrs["param.weight"].startswith(expected)
        assert attrs["param.weight"].endswith(" verdict=error") and "param.bias" in attrs
