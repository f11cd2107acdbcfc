"""GE graphs (ge_proto text/binary, atc JSON, ge_onnx text, gzip) read into hierarchies with edges."""

from __future__ import annotations

import filecmp
import gzip
import json
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from graphcmp._version import __version__
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers import ge
from graphcmp.core.readers.detect import detect_format, read_graph
from graphcmp.core.readers.proto_gen import ge_ir_pb2
from graphcmp.core.records import NodeKind, Role
from graphcmp.core.report import load_saved, save_graph
from tests.conftest import DATA, REPORT_SCHEMA, shared

ROOT = Path(__file__).resolve().parents[3]
INIT = DATA / "ge_tf_init" / "ge_proto_00000000_Build.txt"
SUBGRAPHS = DATA / "ge_tf_subgraphs" / "ge_proto_00000001_Build.txt"
SUBGRAPHS_ONNX = DATA / "ge_tf_subgraphs" / "ge_onnx_00000001_graph_11_Build.pbtxt"
GATHER = DATA / "ge_tf_gatherv2" / "ge_proto_00056_Build.txt"
OM_JSON = DATA / "ge_om_json" / "msquickcmp_om_model.json"
OM_JSON_GZ = DATA / "ge_om_json" / "analyze_test.om.json.gz"
RESNET = "formats/ge/samples/oam-tools/complie_path/ge_proto_00000062_Build.txt.gz"


def edge_ids(graph):
    ids = graph.nodes.ids
    return {(ids[s], ids[d], bool(c)) for s, d, c in zip(graph.edges.src, graph.edges.dst, graph.edges.control)}


def parent(graph, node_id):
    return graph.view(node_id).parent


@pytest.mark.parametrize(("path", "n_ops", "n_edges", "n_control"), [
    (INIT, 6, 5, 3), (SUBGRAPHS, 18, 14, 2), (SUBGRAPHS_ONNX, 18, 14, 2), (GATHER, 5, 4, 1),
    (OM_JSON, 19, 21, 0), (OM_JSON_GZ, 132, 173, 33),
])
def test_every_sample_parses_with_its_op_count(path, n_ops, n_edges, n_control):
    g = ge.read_ge(path)
    assert ge.sniff(path) and detect_format(path) == "ge"
    assert int(g.nodes.has_data.sum()) == n_ops  # every op; scope modules have no data
    assert (len(g.edges), int(g.edges.control.sum())) == (n_edges, n_control)


def test_control_and_data_edges_of_the_init_graph():
    g = ge.read_ge(INIT)
    assert edge_ids(g) == {
        ("Variable", "Variable/Assign", False), ("Variable/initial_value", "Variable/Assign", False),
        ("Variable/Assign", "init", True), ("init", "Node_Output", True), ("ge_global_step", "Node_Output", True)}
    # the op named like the scope of Variable/Assign contains it
    assert parent(g, "Variable/Assign") == "Variable" and g.view("Variable").kind == NodeKind.MODULE
    assert g.view("Variable/Assign").tensors[0].dtype == "DT_FLOAT"
    assert g.view("Variable/Assign").tensors[0].shape == "[64]"


def test_subgraph_ops_sit_under_their_partitioned_call_and_scopes_stay_inside():
    g = ge.read_ge(SUBGRAPHS)
    call0 = "ge_default_20230713074125_sub_0_input_PartitionedCall_0"
    call2 = "ge_default_20230713074125_sub_2_unknow_PartitionedCall_2"
    assert parent(g, "Unique") == call2 and parent(g, "GatherV2") == call2
    # GatherV2/axis lives in sub_0: its scope module is inside call 0, not the GatherV2 op of sub_2
    assert parent(g, "GatherV2/axis") == f"{call0}/GatherV2" and parent(g, f"{call0}/GatherV2") == call0
    assert ("Unique", "GatherV2", False) in edge_ids(g)


def test_onnx_twin_gives_the_same_graph():
    proto, onnx = ge.read_ge(SUBGRAPHS), ge.read_ge(SUBGRAPHS_ONNX)
    assert proto.nodes.ids == onnx.nodes.ids
    assert edge_ids(proto) == edge_ids(onnx)
    assert proto.tensors.dtype == onnx.tensors.dtype and proto.tensors.shape == onnx.tensors.shape


def test_om_json_keeps_original_names_and_descs():
    g = ge.read_ge(OM_JSON)
    attrs = dict(g.nodes.attrs[g.row("PartitionedCall_Gather_1221_gatherv2_3")])
    assert attrs["original_op_names"] == "Gather_1221"
    assert attrs["kernel_lib"] == "AIcoreEngine" and attrs["id"] == "16"
    assert sum(1 for a in g.nodes.attrs if dict(a).get("original_op_names")) == 4
    cast = g.view("trans_Cast_0")
    assert [(t.role, t.dtype) for t in cast.tensors] == [(Role.INPUT, "DT_FLOAT"), (Role.OUTPUT, "DT_FLOAT16")]


def test_gzipped_json_is_read_transparently():
    g = ge.read_ge(OM_JSON_GZ)
    assert sum(1 for a in g.nodes.attrs if dict(a).get("original_op_names")) == 40
    assert g.info.format == "ge" and not g.info.missing


def test_binary_model_def_reads_like_its_text(tmp_path):
    model = ge_ir_pb2.ModelDef()
    from google.protobuf import text_format

    text_format.Parse(SUBGRAPHS.read_text(), model, allow_unknown_field=True)
    binary = tmp_path / "model.pb"
    binary.write_bytes(model.SerializeToString())
    assert detect_format(binary) == "ge"
    assert read_graph(binary).nodes.ids == ge.read_ge(SUBGRAPHS).nodes.ids


def test_fields_and_enum_values_of_newer_files_do_not_break_parsing(tmp_path):
    text = INIT.read_text().replace('  name: "ge_default_20230713074122_1"\n',
                                    '  name: "ge_default_20230713074122_1"\n  future_field: 7\n  future_msg { a: 1 }\n')
    text = text.replace("dtype: DT_FLOAT\n", "dtype: DT_FLOAT8_E99\n", 1)
    newer = tmp_path / "ge_proto_newer.txt"
    newer.write_text(text)
    g = ge.read_ge(newer)
    assert g.nodes.ids == ge.read_ge(INIT).nodes.ids
    assert "DT_FLOAT8_E99" in g.info.missing[0]
    assert "DT_UNDEFINED" in g.tensors.dtype


@pytest.mark.parametrize("content", [b'graph { op { name: "a" type: ', b"\x1f\x8b not gzip", b'{"graph": 3}'])
def test_corrupt_files_raise_one_line_errors(tmp_path, content):
    bad = tmp_path / "ge_proto_bad.txt"
    bad.write_bytes(content)
    with pytest.raises(DumpFormatError, match=r"ge_proto_bad\.txt") as err:
        read_graph(bad, "ge")
    assert "\n" not in str(err.value)


def test_unknown_file_is_not_detected(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    with pytest.raises(DumpFormatError, match="unknown input format"):
        detect_format(junk)


def test_edges_round_trip_through_the_graph_file_and_validate(tmp_path):
    g = ge.read_ge(INIT)
    path = tmp_path / "run.json"
    save_graph(g, path, __version__)
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, REPORT_SCHEMA)
    back = load_saved(path)
    assert edge_ids(back) == edge_ids(g) and back.nodes.attrs == g.nodes.attrs
    del doc["run"]["edges"]  # a file written before edges existed still loads, without edges
    path.write_text(json.dumps(doc))
    assert len(load_saved(path).edges) == 0


@pytest.mark.shared
def test_resnet50_build_graph_has_170_ops_and_53_fused():
    path = shared(RESNET)
    g = ge.read_ge(path)
    assert int((g.nodes.kind == NodeKind.API).sum()) == 170
    fused = {i: dict(a)["original_op_names"].split(",") for i, a in zip(g.nodes.ids, g.nodes.attrs)
             if len(dict(a).get("original_op_names", "").split(",")) > 1}
    assert len(fused) == 53
    assert fused["res2a_branch1res2ares2a_relu"] == ["res2a_branch1", "bn2a_branch1", "scale2a_branch1", "res2a",
                                                     "res2a_relu"]
    assert g.view("res2a_branch1res2ares2a_relu").op == "Conv2D"
    with gzip.open(path, "rt") as fh:  # every "src:k" input string of the file is an edge
        inputs = sum(1 for line in fh if line.startswith('    input: "') and line.strip() != 'input: ""')
    assert len(g.edges) == inputs


@pytest.mark.shared
def test_every_shared_ge_sample_is_detected_and_parses():
    folder = shared("formats/ge/samples")
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert len(files) == 8
    for path in files:
        assert detect_format(path) == "ge", path
        assert len(ge.read_ge(path)) > 5


def test_committed_proto_modules_are_current(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_protos
    finally:
        sys.path.pop(0)
    written = gen_protos.generate(tmp_path)
    committed = ROOT / "graphcmp" / "core" / "readers" / "proto_gen"
    names = sorted(p.name for p in written)
    assert names == sorted(p.name for p in committed.glob("*.py"))
    stale = [n for n in names if not filecmp.cmp(tmp_path / n, committed / n, shallow=False)]
    assert not stale, f"run scripts/gen_protos.py: {stale} differ from proto/"


def test_nan_stats_mark_descs_as_structure_only():
    g = ge.read_ge(GATHER)
    assert g.info.task == "structure" and not g.tensors.present.any() and np.isnan(g.tensors.stats).all()


@pytest.mark.parametrize("change, says", [
    (lambda op: op.update(input=5), '"input" is 5, expected a list of strings'),
    (lambda op: op.update(name={"a": 1}), '"name" is {\'a\': 1}, expected a non-empty string'),
    (lambda op: op.update(output_desc="x"), '"output_desc" is \'x\', expected a list of tensor descs'),
    (lambda op: op.update(output_desc=[{"shape": {"dim": ["a"]}}]), '"output_desc[0].shape"'),
    (lambda op: op.update(output_desc=[{"shape": {"dim": [10**30]}}]), "64-bit integers"),
    (lambda op: op.update(attr="x"), '"attr" is \'x\''),
    (lambda op: op.update(attr=[{"key": "k", "value": {"list": {"s": 5}}}]), '"attr"'),
    (lambda op: op.update(id=True), '"id" is True, expected a 64-bit integer'),
])
def test_atc_json_of_wrong_types_is_named(change, says):
    doc = json.loads((DATA / "ge_om_json" / "msquickcmp_om_model.json").read_text())
    change(doc["graph"][0]["op"][0])
    with pytest.raises(DumpFormatError) as err:
        ge.decode_ge(json.dumps(doc).encode(), source="m.json")
    assert str(err.value).startswith("m.json: graph 0 op 0") and says in str(err.value)


def test_atc_json_writes_int64_ids_as_text():
    doc = json.loads((DATA / "ge_om_json" / "msquickcmp_om_model.json").read_text())
    doc["graph"][0]["op"][0]["id"] = "12"
    graphs, _ = ge.decode_ge(json.dumps(doc).encode(), source="m.json")
    assert graphs[0].ops[0].op_id == 12
