"""MindSpore IR graphs (.ir text in three layouts, anf_ir .pb) read into scope hierarchies."""

from __future__ import annotations

import re

import pytest

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers import mindspore_ir
from graphcmp.core.readers.detect import detect_format, read_graph
from graphcmp.core.records import Direction, NodeKind, Role
from tests.conftest import DATA, shared

LENET = DATA / "mindspore_ir_lenet_infer"
CONV1 = "Default/conv1-Conv2d/Conv2D-op0"


def api_count(graph) -> int:
    return int((graph.nodes.kind == NodeKind.API).sum())


def header_cnodes(path) -> int:
    """The count MindSpore itself writes into the .ir header."""
    return int(re.search(r"Total number of cnodes: (\d+)", path.read_text())[1])


@pytest.mark.parametrize(("name", "n_ops"), [
    ("01_type_inference_0002.ir", 176), ("13_optimize_0566.ir", 27), ("graph_build_0_0638.ir", 28),
    ("hwopt_common_final_graph_0_0635.ir", 28), ("final_actor_set_kernel_graph_0.ir", 15),
    ("ms_output_after_opt_0.pb", 27),
])
def test_lenet_files_parse_with_their_op_counts(name, n_ops):
    path = LENET / name
    g = mindspore_ir.read_mindspore_ir(path)
    assert detect_format(path) == "mindspore_ir"
    assert api_count(g) == n_ops
    if path.suffix == ".ir" and "actor" not in name:
        assert n_ops == header_cnodes(path)


def test_scopes_become_modules_with_cell_classes():
    g = mindspore_ir.read_mindspore_ir(LENET / "graph_build_0_0638.ir")
    conv = g.view(CONV1)
    assert conv.op == "Conv2D" and conv.parent == "Default/conv1-Conv2d"
    assert g.view("Default/conv1-Conv2d").kind == NodeKind.MODULE and g.view("Default/conv1-Conv2d").op == "Conv2d"
    assert [(t.role, t.dtype, t.shape) for t in conv.tensors] == [
        (Role.INPUT, "Float32", "[2, 1, 32, 32]"), (Role.INPUT, "Float32", "[6, 1, 5, 5]"),
        (Role.OUTPUT, "Float32", "[2, 6, 28, 28]")]
    assert conv.stack[-1].startswith("In file ") and "conv.py:373" in conv.stack[-1]
    ids = g.nodes.ids
    edges = {(ids[s], ids[d]) for s, d in zip(g.edges.src, g.edges.dst)}
    assert (CONV1, "Default/relu-ReLU/ReLU-op0") in edges


def test_scope_only_pass_is_numbered_like_the_full_names():
    """hwopt passes print `# Scope` only; numbering per scope and op gives the same ids as graph_build."""
    hwopt = mindspore_ir.read_mindspore_ir(LENET / "hwopt_common_final_graph_0_0635.ir")
    build = mindspore_ir.read_mindspore_ir(LENET / "graph_build_0_0638.ir")
    assert hwopt.nodes.ids == build.nodes.ids
    assert len(hwopt.edges) == len(build.edges)


def test_actor_set_kernels_and_pb_nodes_share_the_ids():
    actors = mindspore_ir.read_mindspore_ir(LENET / "final_actor_set_kernel_graph_0.ir")
    pb = mindspore_ir.read_mindspore_ir(LENET / "ms_output_after_opt_0.pb")
    kernels = {i for i, k in zip(actors.nodes.ids, actors.nodes.kind) if k == NodeKind.API}
    assert CONV1 in kernels and kernels <= set(pb.nodes.ids)
    assert pb.view(CONV1).tensors[0].shape == "[2, 6, 28, 28]"


def test_frontend_graph_keeps_every_subgraph_cnode():
    g = mindspore_ir.read_mindspore_ir(LENET / "01_type_inference_0002.ir")
    assert "Default/fc3-Dense/MatMul-op0" in g and g.view("Default/fc3-Dense/MatMul-op0").op == "MatMul"
    assert len(set(g.nodes.ids)) == len(g)


def test_not_an_ir_file(tmp_path):
    bad = tmp_path / "graph.ir"
    bad.write_text("# IR entry: @g\nsubgraph @g() {\n  %0(x) = \n}\n")
    with pytest.raises(DumpFormatError, match=r"graph\.ir:3"):
        read_graph(bad, "mindspore_ir")
    binary = tmp_path / "graph.pb"
    binary.write_bytes(b"\x08\x01\x12\x03abc\x00\x00\xff")
    with pytest.raises(DumpFormatError, match=r"graph\.pb: not a MindSpore IR"):
        read_graph(binary, "mindspore_ir")


@pytest.mark.shared
def test_every_shared_ir_and_pb_parses_with_the_right_counts():
    folder = shared("formats/mindspore/ir")
    pb_nodes = {  # graph nodes per .pb, counted with `protoc --decode_raw`
        "lenet_infer_L3": (27, 27, 26, 27), "lenet_train_L2": (77, 77, 76, 77),
        "resnet_train_L1": (143, 145, 144, 143), "transformer_infer_L1": (58, 58, 57, 58)}
    actors = {"lenet_infer_L3": 15, "lenet_train_L2": 45, "resnet_train_L1": 61, "transformer_infer_L1": 36}
    for case in sorted(pb_nodes):
        for path in sorted((folder / case).glob("*.ir")):
            expected = actors[case] if "actor" in path.name else header_cnodes(path)
            assert api_count(read_graph(path)) == expected, path
        pbs = [f"ms_output_{s}.pb" for s in ("after_opt_0", "before_opt_0", "optimize", "vm_build_0")]
        assert tuple(api_count(read_graph(folder / case / name)) for name in pbs) == pb_nodes[case]


@pytest.mark.shared
def test_training_graph_marks_gradients_as_backward():
    g = read_graph(shared("formats/mindspore/ir/lenet_train_L2/graph_build_0_0126.ir"))
    grad = "Gradients/Default/network-WithLossCell/_backbone-LeNet5/conv1-Conv2d/Grad_Conv2D/Conv2DBackpropFilter-op0"
    assert g.view(grad).direction == Direction.BACKWARD
    forward = "Default/network-WithLossCell/_backbone-LeNet5/conv1-Conv2d/Conv2D-op0"
    assert g.view(forward).direction == Direction.FORWARD
    ops = g.nodes.kind == NodeKind.API
    assert int((g.nodes.direction[ops] == Direction.BACKWARD).sum()) == 21  # `Fullname with scope: (Gradients` lines


@pytest.mark.parametrize("name", ["01_type_inference_0002.ir", "13_optimize_0566.ir",
                                  "final_actor_set_kernel_graph_0.ir"])
def test_whole_files_carry_no_note(name):
    assert read_graph(LENET / name).info.missing == ()


@pytest.mark.parametrize("name, at, says", [
    ("01_type_inference_0002.ir", 0.5, "subgraphs it declares"),  # 71 declared: most of them lost
    ("13_optimize_0566.ir", 0.5, "never closes"),
    ("final_actor_set_kernel_graph_0.ir", 0.5, "ends in the middle of a line"),
])
def test_a_cut_ir_keeps_what_it_read_and_says_so(tmp_path, name, at, says):
    text = (LENET / name).read_text()
    cut = text[: int(len(text) * at)]
    if says != "ends in the middle of a line":
        cut = cut[: cut.rindex("\n") + 1]  # cut at a line end: only the structure shows the loss
    elif cut.endswith("\n"):
        cut = cut[:-1]
    (tmp_path / name).write_text(cut)
    graph = read_graph(tmp_path / name)
    whole = read_graph(LENET / name)
    assert 0 < len(graph) < len(whole)
    assert len(graph.info.missing) == 1 and says in graph.info.missing[0] and "cut short" in graph.info.missing[0]
