"""FlowIndex: each edge filed under the module it crosses, lifted to drawn nodes; folded nodes left out."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.app.flow import FlowIndex
from graphcmp.app.layout import layout_pane
from graphcmp.app.tree import NavTree
from graphcmp.core.dataflow import flow_edges, folded_sources
from graphcmp.core.readers import read_graph
from tests.conftest import DATA


def _lifted(tree: NavTree, visible: np.ndarray, src: np.ndarray, dst: np.ndarray) -> set[tuple[int, int]]:
    """What the drawing should show, the slow way: each end's nearest drawn node, pairs that are not nested."""
    rep = tree.nearest_visible(visible)
    out = set()
    for a, b in zip(rep[src].tolist(), rep[dst].tolist()):
        if a > 0 and b > 0 and a != b and a not in tree.ancestors(b) and b not in tree.ancestors(a):
            out.add((a, b))
    return out


def test_drawn_edges_equal_lifting_every_edge(sample_report):
    graph = sample_report.npu
    tree = NavTree(graph)
    edges = flow_edges(graph)
    flow = FlowIndex(tree, edges)
    for opened in ([], ["Module.encoder.TransformerEncoder.forward.0"],
                   ["Module.encoder.TransformerEncoder.forward.0",
                    "Module.encoder.layers.1.TransformerEncoderLayer.forward.0",
                    "Module.encoder.layers.1.linear1.Linear.forward.0"]):
        rows = [graph.row(n) for n in opened]
        geo = layout_pane(tree, rows, {}, None, flow)
        crossing = flow.drawn(geo.visible, [0, *geo.box_rows()])
        got = set(zip(crossing.src.tolist(), crossing.dst.tolist()))
        assert got == _lifted(tree, geo.visible, edges.src, edges.dst)
        assert got


def test_sibling_pairs_are_the_edges_between_children(sample_report):
    graph = sample_report.npu
    tree = NavTree(graph)
    flow = FlowIndex(tree, flow_edges(graph))
    layer1 = graph.row("Module.encoder.layers.1.TransformerEncoderLayer.forward.0")
    kids = tree.children(layer1)
    pairs = flow.sibling_pairs(layer1, kids)
    linear1, relu = graph.row("Module.encoder.layers.1.linear1.Linear.forward.0"), graph.row("Torch.relu.1.forward")
    norm1 = graph.row("Module.encoder.layers.1.norm1.LayerNorm.forward.0")
    add = graph.row("Tensor.__add__.4.forward")
    assert {(linear1, relu), (norm1, linear1), (norm1, add)} <= pairs
    assert all(a in kids and b in kids for a, b in pairs)


def test_folded_nodes_have_no_edges():
    graph = read_graph(DATA / "ge_tf_init" / "ge_proto_00000000_Build.txt")
    edges = flow_edges(graph)
    folded = folded_sources(graph, edges)
    tree = NavTree(graph, folded)
    flow = FlowIndex(tree, edges)
    gone = np.flatnonzero(folded >= 0)
    assert len(gone) and not np.isin(flow.src, gone).any() and not np.isin(flow.dst, gone).any()
    assert int(gone[0]) not in tree.shown_children(int(tree.parent[gone[0]])).tolist()
    assert tree.folds(int(folded[gone[0]])).tolist() == gone.tolist()


@pytest.mark.shared
def test_selecting_a_folded_constant_shows_its_consumer():
    from graphcmp.app.model import ViewModel
    from graphcmp.app.results import Entry, ResultSet
    from graphcmp.app.state import ViewState, select
    from graphcmp.app.viewer import Viewer
    from graphcmp.app.views import Turn, show
    from tests.conftest import shared

    graph = read_graph(shared("formats/ge/samples/oam-tools/complie_path/ge_proto_00000062_Build.txt.gz"))
    model = ViewModel(graph)
    const = next(r for r in range(len(graph)) if graph.nodes.op[r] == "Const")
    consumer = int(model.trees["npu"].folded_into[const])
    state = select(ViewState(), model, "npu", const)
    geo = layout_pane(model.trees["npu"], state.open["npu"], state.pages["npu"], None, model.flows["npu"])
    assert geo.visible[consumer] and not geo.visible[const]
    viewer = Viewer(ResultSet([Entry("0", None, None, "r50")], lambda _e: graph))
    state = select(ViewState(result="0"), viewer.model("0"), "npu", const)
    out = show(Turn(viewer, state, state, first=True, controls={}))
    assert out["panes"]["focus"]["npu"] == f"n{consumer}"
