"""SVG export: one rect per drawn node, boxes, escaped labels, valid XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from graphcmp.app.layout import layout_pane
from graphcmp.app.model import ViewModel
from graphcmp.app.svg import pane_svg
from graphcmp.core.report import load_report
from tests.app.conftest import EVIL_ID


def test_svg_of_an_open_view(sample_model, sample_report):
    enc = sample_report.npu.row("Module.encoder.TransformerEncoder.forward.0")
    geo = layout_pane(sample_model.trees["npu"], [enc], {}, None)
    root = ET.fromstring(pane_svg(geo, {c.row: "#e53935" for c in geo.cells}, "npu"))
    ns = "{http://www.w3.org/2000/svg}"
    labels = ["\n".join(t.itertext()) for t in root.iter(f"{ns}text")]  # a line per tspan (op type, name)
    assert labels == [c.label for c in sorted(geo.cells, key=lambda c: not c.is_box)]
    assert any("\n" in label for label in labels)
    assert len(root.findall(f".//{ns}g")) == len(geo.cells)


def test_hostile_label_is_escaped(evil_report_file):
    model = ViewModel(load_report(evil_report_file))
    tree = model.trees["npu"]
    geo = layout_pane(tree, [int(tree.children(0)[0])], {}, None)
    ids = model.graphs["npu"].nodes.ids
    text = pane_svg(geo, {}, "npu", {c.row: ids[c.row] for c in geo.cells})
    assert "<img" not in text and "&lt;img src=x onerror=window.__xss=1&gt;" in text
    root = ET.fromstring(text)
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert EVIL_ID in titles


def test_svg_draws_the_pane_edges(sample_model, sample_report):
    from graphcmp.app.elements import pane_edges

    rows = [sample_report.npu.row(n) for n in ("Module.encoder.TransformerEncoder.forward.0",
                                               "Module.encoder.layers.1.TransformerEncoderLayer.forward.0")]
    geo = layout_pane(sample_model.trees["npu"], rows, {}, None, sample_model.flows["npu"])
    edges = pane_edges(sample_model, "npu", geo)
    root = ET.fromstring(pane_svg(geo, {}, "npu", None, edges))
    lines = list(root.iter("{http://www.w3.org/2000/svg}line"))
    assert len(lines) == len(edges) > 0
    assert sum(line.get("stroke") == "#c62828" for line in lines) == sum(e.hot for e in edges) > 0
