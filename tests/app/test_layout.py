"""The layout engine: what is drawn for a set of open modules, pages, no overlaps, bounded size."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.app import layout
from graphcmp.app.layout import layout_pane, page_of, visible_children
from graphcmp.app.tree import NavTree


@pytest.fixture(scope="module")
def tree(sample_report) -> NavTree:
    return NavTree(sample_report.npu)


def _overlap(a, b) -> bool:
    return abs(a.x - b.x) * 2 < a.w + b.w and abs(a.y - b.y) * 2 < a.h + b.h


def test_closed_root_shows_top_level_only(tree):
    geo = layout_pane(tree, [], {}, None)
    assert [c.row for c in geo.cells] == tree.children(0).tolist()
    assert not any(c.is_box for c in geo.cells)


def test_open_module_is_a_box_around_its_children(tree, sample_report):
    enc = sample_report.npu.row("Module.encoder.TransformerEncoder.forward.0")
    layer1 = sample_report.npu.row("Module.encoder.layers.1.TransformerEncoderLayer.forward.0")
    geo = layout_pane(tree, [enc, layer1], {}, None)
    cells = {c.row: c for c in geo.cells}
    assert cells[enc].is_box and cells[layer1].is_box
    for child in tree.children(layer1):
        c = cells[int(child)]
        assert c.parent == layer1
        box = cells[layer1]
        assert box.x - box.w / 2 <= c.x - c.w / 2 and c.x + c.w / 2 <= box.x + box.w / 2
        assert box.y - box.h / 2 <= c.y - c.h / 2 and c.y + c.h / 2 <= box.y + box.h / 2
    leaves = [c for c in geo.cells if not c.is_box]
    assert not any(_overlap(a, b) for i, a in enumerate(leaves) for b in leaves[i + 1:])


def test_a_module_open_under_a_closed_one_is_not_drawn(tree, sample_report):
    layer1 = sample_report.npu.row("Module.encoder.layers.1.TransformerEncoderLayer.forward.0")
    geo = layout_pane(tree, [layer1], {}, None)
    assert not geo.visible[layer1]


def test_children_in_execution_order(tree, sample_report):
    enc = sample_report.npu.row("Module.encoder.TransformerEncoder.forward.0")
    geo = layout_pane(tree, [enc], {}, None)
    kids = tree.children(enc).tolist()
    ys = [next(c.y for c in geo.cells if c.row == k) for k in kids]
    assert ys == sorted(ys)


def test_pages(tree, sample_report, monkeypatch):
    monkeypatch.setattr(layout, "PAGE", 4)
    layer1 = sample_report.npu.row("Module.encoder.layers.1.TransformerEncoderLayer.forward.0")
    enc = sample_report.npu.row("Module.encoder.TransformerEncoder.forward.0")
    kids = tree.children(layer1).tolist()
    geo = layout_pane(tree, [enc, layer1], {layer1: 1}, None)
    shown = [c.row for c in geo.cells if c.parent == layer1 and not c.pager]
    assert shown == kids[4:8]
    pagers = [c.pager for c in geo.cells if c.pager and c.row == layer1]
    assert pagers == [-1, 1]
    assert page_of(tree, layer1, kids[9], None) == 2


def test_micro_step_filter(tree):
    assert len(visible_children(tree, 0, 0)) == len(tree.children(0))
    assert len(visible_children(tree, 0, 5)) == 0


def test_everything_open_stays_bounded_by_pages(monkeypatch, tree):
    monkeypatch.setattr(layout, "PAGE", 3)
    modules = np.flatnonzero(tree.n_children > 0).tolist()
    geo = layout_pane(tree, modules, {}, None)
    per_box = {}
    for c in geo.cells:
        if not c.pager:
            per_box[c.parent] = per_box.get(c.parent, 0) + 1
    assert max(per_box.values()) <= 3
