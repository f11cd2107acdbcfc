"""Node attributes and fused ops: the details panel lists attrs as text; fused ops get the ``fused`` class."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphcmp.app.details import details_panel
from graphcmp.app.elements import PaneStyle, pane_elements
from graphcmp.app.layout import layout_pane
from graphcmp.app.model import ViewModel
from graphcmp.app.state import ViewState, reveal
from graphcmp.core.matching.fused_ops import original_names
from graphcmp.core.readers import read_graph
from tests.app.test_details import _texts

DATA = Path(__file__).resolve().parents[1] / "data"
OM_JSON = DATA / "ge_om_json" / "analyze_test.om.json.gz"
RESNET = "formats/ge/samples/oam-tools/complie_path/ge_proto_00000062_Build.txt.gz"


def _fused_rows(graph) -> list[int]:
    return [r for r in range(len(graph)) if len(original_names(graph, r)) > 1]


def _drawn_classes(model: ViewModel, row: int, side: str = "npu") -> dict[int, str]:
    """Classes of every node drawn in the pane when `row` is revealed (its page of its parent's children)."""
    state = reveal(ViewState(), model, side, row)
    geo = layout_pane(model.trees[side], state.open[side], state.pages[side], None)
    elements = pane_elements(model, side, geo, PaneStyle(model.scheme(None, None)))
    return {int(e["data"]["id"][1:]): e["classes"] for e in elements
            if "classes" in e and e["data"]["id"][0] in "nb"}


def test_fused_ops_of_a_ge_graph_are_marked_and_listed():
    graph = read_graph(OM_JSON)
    model = ViewModel(graph)
    fused = _fused_rows(graph)
    assert len(fused) == 31 and np.flatnonzero(model.fused["npu"]).tolist() == fused
    row = fused[0]
    classes = _drawn_classes(model, row)
    assert "fused" in classes[row].split()
    assert {r for r, c in classes.items() if "fused" in c.split()} == set(fused) & set(classes)
    texts = _texts(details_panel(model, {"npu": row}))
    names = original_names(graph, row)
    assert any(t == f" of {len(names)} original ops: " + ", ".join(names) for t in texts)
    for key, value in graph.nodes.attrs[row]:
        assert key in texts and value[:2000] in " ".join(texts)


def test_plain_ge_op_shows_attrs_without_fused_mark():
    graph = read_graph(DATA / "ge_tf_init" / "ge_proto_00000000_Build.txt")
    model = ViewModel(graph)
    assert not model.fused["npu"].any()
    row = next(r for r in range(1, len(graph)) if graph.nodes.attrs[r])
    texts = _texts(details_panel(model, {"npu": row}))
    assert "attributes" in texts and "fused op" not in texts
    assert graph.nodes.attrs[row][0][0] in texts


def test_msprobe_nodes_have_no_attribute_block(sample_model, sample_report):
    row = sample_report.npu.row("Tensor.__add__.3.forward")
    assert not sample_model.fused["npu"].any()
    assert "attributes (npu)" not in _texts(details_panel(sample_model, {"npu": row, "bench": row}))


@pytest.mark.shared
def test_resnet50_ge_graph_has_53_fused_ops():
    from tests.conftest import shared

    graph = read_graph(shared(RESNET))
    model = ViewModel(graph)
    fused = np.flatnonzero(model.fused["npu"])
    assert len(fused) == 53
    conv1 = graph.row("conv1conv1_relu")
    classes = _drawn_classes(model, conv1)
    assert "fused" in classes[conv1].split()
    assert {r for r, c in classes.items() if "fused" in c.split()} == set(fused.tolist()) & set(classes)
    texts = _texts(details_panel(model, {"npu": conv1}))
    assert " of 4 original ops: conv1, bn_conv1, scale_conv1, conv1_relu" in texts
    assert "TbeCommonRules0FusionPass" in texts
