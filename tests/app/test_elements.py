"""Cytoscape elements: ids, boxes without positions, colours per verdict, marks, data-flow edges."""

from __future__ import annotations

from graphcmp.app.colors import STATUS_COLORS, Scheme
from graphcmp.app.elements import PaneStyle, pane_elements
from graphcmp.app.layout import layout_pane
from graphcmp.app.model import ViewModel
from graphcmp.core.compare import compare_paths
from graphcmp.core.judge import ERROR


def test_elements_of_an_open_module(sample_model, sample_report):
    enc = sample_report.npu.row("Module.encoder.TransformerEncoder.forward.0")
    geo = layout_pane(sample_model.trees["npu"], [enc], {}, None)
    els = pane_elements(sample_model, "npu", geo, PaneStyle(Scheme("verdict"), frozenset({enc + 1})))
    by_id = {e["data"]["id"]: e for e in els}
    box = by_id[f"b{enc}"]
    assert "position" not in box and "box" in box["classes"]
    assert box["data"]["color"] == STATUS_COLORS[int(sample_report.verdicts.status[enc])]
    child = by_id[f"n{enc + 1}"]
    assert child["data"]["parent"] == f"b{enc}" and "hit" in child["classes"]
    edges = {(e["data"]["source"], e["data"]["target"]) for e in els if "source" in e["data"]}
    layer0 = sample_report.npu.row("Module.encoder.layers.0.TransformerEncoderLayer.forward.0")
    layer1 = sample_report.npu.row("Module.encoder.layers.1.TransformerEncoderLayer.forward.0")
    assert (f"n{layer0}", f"n{layer1}") in edges  # a dump's producer links, lifted to the drawn layers


def test_closed_module_shows_the_worst_below(sample_model, sample_report):
    geo = layout_pane(sample_model.trees["npu"], [], {}, None)
    els = {e["data"]["id"]: e for e in pane_elements(sample_model, "npu", geo, PaneStyle(Scheme("verdict")))}
    v = sample_report.verdicts
    for row in sample_model.trees["npu"].children(0).tolist():
        shown = max(int(v.status[row]), int(v.worst[row])) if sample_model.trees["npu"].n_children[row] \
            else int(v.status[row])
        assert els[f"n{row}"]["data"]["color"] == STATUS_COLORS[shown]
    assert any(els[f"n{r}"]["data"]["color"] == STATUS_COLORS[ERROR] for r in sample_model.trees["npu"].children(0))


def test_unmatched_and_overflow_marks(data_dir, perturb_pair):
    model = ViewModel(compare_paths(data_dir / "msprobe_overflow_tokens" / "npu",
                                    data_dir / "msprobe_overflow_tokens" / "bench"))
    tree = model.trees["npu"]
    geo = layout_pane(tree, [int(r) for r in range(len(tree)) if tree.n_children[r]], {}, None)
    els = pane_elements(model, "npu", geo, PaneStyle(Scheme("verdict")))
    marked = {int(e["data"]["id"][1:]) for e in els if "overflow" in e.get("classes", "")}
    assert marked and all(model.overflow["npu"][r] > 0 for r in marked)
    extra = ViewModel(compare_paths(data_dir / "msprobe_extraop" / "npu", perturb_pair[1]))
    geo = layout_pane(extra.trees["npu"], [], {}, None)
    els = pane_elements(extra, "npu", geo, PaneStyle(Scheme("verdict")))
    assert any("unmatched" in e.get("classes", "") for e in els)


def test_data_flow_edges_are_lifted_to_drawn_nodes(data_dir):
    from graphcmp.core.readers import read_graph

    graph = read_graph(data_dir / "ge_tf_init" / "ge_proto_00000000_Build.txt")
    model = ViewModel(graph)
    tree = model.trees["npu"]
    geo = layout_pane(tree, [], {}, None)
    drawn = {c.row for c in geo.cells}

    def shown(row: int) -> int:
        while row not in drawn:
            row = int(tree.parent[row])
        return row

    folded = tree.folded_into
    assert folded is not None and folded[graph.row("Variable/initial_value")] == graph.row("Variable/Assign")
    expected = {(shown(a), shown(b)) for a, b in zip(graph.edges.src.tolist(), graph.edges.dst.tolist())
                if folded[a] < 0 and folded[b] < 0}
    expected = {(a, b) for a, b in expected if a != b}
    els = pane_elements(model, "npu", geo, PaneStyle(Scheme("none")))
    got = {(int(e["data"]["source"][1:]), int(e["data"]["target"][1:])) for e in els if "source" in e["data"]}
    assert got == expected and got


def test_every_mark_has_a_legend_entry():
    import re

    from graphcmp.app.elements import STYLESHEET
    from graphcmp.app.views import MARKS

    styled = {m for rule in STYLESHEET for m in re.findall(r"(?:node|edge)\.(\w+)", rule["selector"])}
    styled |= {m for rule in STYLESHEET for m in re.findall(r":(selected)", rule["selector"])}
    assert styled - {"bypass"} <= {mark for mark, _, _ in MARKS}  # a bent edge is a data-flow edge


def test_layers_follow_the_data_flow(sample_model, sample_report):
    tree = sample_model.trees["npu"]
    flow = sample_model.flows["npu"]
    modules = [int(r) for r in range(len(tree)) if tree.n_children[r]]
    geo = layout_pane(tree, modules, {}, None, flow)
    cells = {c.row: c for c in geo.cells if not c.pager}
    for module in [0, *modules]:
        kids = tree.children(module)
        for a, b in flow.sibling_pairs(module, kids):
            if a in cells and b in cells and list(kids).index(a) < list(kids).index(b):
                assert cells[a].y + cells[a].h / 2 < cells[b].y - cells[b].h / 2, (a, b)  # a's layer is above b's
    relu = sample_report.npu.row("Torch.relu.1.forward")
    linear = sample_report.npu.row("Functional.linear.2.forward")
    assert cells[linear].y < cells[relu].y
