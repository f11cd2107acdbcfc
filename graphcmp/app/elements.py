"""Cytoscape elements and stylesheet of one pane: geometry from `layout`, colours from `colors`.

Element ids are ``n<row>`` for drawn nodes, ``b<row>`` for open modules (compound boxes: a distinct
id, so a node turning into a box is replaced, never moved with its children) and ``p<row>:<±1>`` for
pager boxes; boxes carry no position (cytoscape fits them around their children); data carries only
what drawing needs (label, size, colour). Labels are drawn on a canvas by cytoscape, so names from user
models are never interpreted as HTML. Data-flow edges are drawn when the run has them (lifted to the
nearest drawn ancestor); msprobe dumps have none, and execution order reads top to bottom.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphcmp.app.colors import KIND_COLORS, NONE_COLOR, Scheme, node_colors
from graphcmp.app.layout import PaneGeometry
from graphcmp.app.model import ViewModel
from graphcmp.app.tree import NavTree
from graphcmp.core.noise import NodeRole
from graphcmp.core.overflow import OverflowLevel
from graphcmp.core.rules import Status

__all__ = ["MAX_EDGES", "STYLESHEET", "PaneStyle", "node_element_id", "pane_elements", "parse_element_id"]

MAX_EDGES = 4000


@dataclass(frozen=True, slots=True)
class PaneStyle:
    """What colours and marks one pane: the scheme, and the rows of the current search/filter hits."""

    scheme: Scheme
    hits: frozenset[int] = frozenset()


def node_element_id(row: int, is_box: bool = False) -> str:
    return f"b{row}" if is_box else f"n{row}"


def parse_element_id(element_id: str | None) -> tuple[int, int] | None:
    """(row, pager step) of an element id: ``n12`` -> (12, 0), ``p4:1`` -> (4, 1); None when malformed.

    >>> parse_element_id("n12"), parse_element_id("b3"), parse_element_id("p4:-1"), parse_element_id("x")
    ((12, 0), (3, 0), (4, -1), None)
    """
    try:
        if element_id and element_id[0] in "nb":
            return int(element_id[1:]), 0
        if element_id and element_id[0] == "p":
            row, step = element_id[1:].split(":")
            return int(row), 1 if int(step) > 0 else -1
    except ValueError:
        return None
    return None


def pane_colors(model: ViewModel, side: str, rows: np.ndarray, open_rows: np.ndarray,
                scheme: Scheme) -> list[str]:
    """Colour per row: closed modules by the worst verdict below them, other nodes by their own."""
    if scheme.categorical:
        if scheme.metric == "role":
            status, worst = model.role(side), model.worst_role(side)
        else:
            status, worst = model.status(side), model.worst(side)
        if status is None:  # a single run: colour by node kind
            kinds = model.graphs[side].nodes.kind[rows].tolist()
            return [KIND_COLORS.get(k, NONE_COLOR) for k in kinds]
        shown = np.where(open_rows, status[rows], np.maximum(status[rows], worst[rows]))
        shown = np.where(model.trees[side].n_children[rows] > 0, shown, status[rows])
        return node_colors(scheme, status=shown)
    values, present = model.side_metric(side, scheme.metric)
    return node_colors(scheme, values=values[rows], present=present[rows])


def pane_elements(model: ViewModel, side: str, geo: PaneGeometry, style: PaneStyle) -> list[dict]:
    """The cytoscape element list of one pane."""
    tree = model.trees[side]
    node_cells = [c for c in geo.cells if not c.pager]
    rows = np.fromiter((c.row for c in node_cells), np.int64, len(node_cells))
    is_box = np.fromiter((c.is_box for c in node_cells), bool, len(node_cells))
    colors = pane_colors(model, side, rows, is_box, style.scheme)
    classes = _classes(model, side, tree, rows, is_box, style.hits)
    out = []
    for cell, color, cls in zip(node_cells, colors, classes):
        data = {"id": node_element_id(cell.row, cell.is_box), "label": cell.label, "w": cell.w, "h": cell.h,
                "color": color}
        if cell.parent > 0:
            data["parent"] = node_element_id(cell.parent, True)
        element = {"data": data, "classes": cls}
        if not cell.is_box:
            element["position"] = {"x": cell.x, "y": cell.y}
        out.append(element)
    for cell in geo.cells:
        if cell.pager:
            data = {"id": f"p{cell.row}:{cell.pager}", "label": cell.label, "w": cell.w, "h": cell.h}
            if cell.row > 0:
                data["parent"] = node_element_id(cell.row, True)
            out.append({"data": data, "position": {"x": cell.x, "y": cell.y}, "classes": "pager"})
    out.extend(_edges(tree, geo))
    return out


def _classes(model: ViewModel, side: str, tree: NavTree, rows: np.ndarray, is_box: np.ndarray,
             hits: frozenset[int]) -> list[str]:
    status = model.status(side)
    role = model.role(side)
    origin = (role[rows] == NodeRole.ORIGIN) if role is not None else np.zeros(len(rows), bool)
    overflow = model.overflow[side][rows] > OverflowLevel.NONE
    fused = model.fused[side][rows]
    unmatched = (status[rows] == Status.UNMATCHED) if status is not None else np.zeros(len(rows), bool)
    module = tree.n_children[rows] > 0
    nodata = ~tree.graph.nodes.has_data[rows]
    names = []
    for k, row in enumerate(rows.tolist()):
        parts = ["box" if is_box[k] else ("module" if module[k] else "leaf")]
        if unmatched[k]:
            parts.append("unmatched")
        if fused[k]:
            parts.append("fused")
        if overflow[k]:
            parts.append("overflow")
        if origin[k]:
            parts.append("origin")
        if nodata[k] and not module[k]:
            parts.append("nodata")
        if row in hits:
            parts.append("hit")
        names.append(" ".join(parts))
    return names


def _edges(tree: NavTree, geo: PaneGeometry) -> list[dict]:
    edges = getattr(tree.graph, "edges", None)
    if edges is None or not len(edges):
        return []
    rep = tree.nearest_visible(geo.visible)
    src, dst = rep[edges.src], rep[edges.dst]
    keep = (src > 0) & (dst > 0) & (src != dst)
    pairs = np.unique(np.stack([src[keep], dst[keep]], axis=1), axis=0)[:MAX_EDGES]
    pairs = [(a, b) for a, b in pairs.tolist() if a not in tree.ancestors(b) and b not in tree.ancestors(a)]
    boxes = set(geo.box_rows())
    return [{"data": {"id": f"e{a}-{b}", "source": node_element_id(a, a in boxes),
                      "target": node_element_id(b, b in boxes)}, "classes": "flow"} for a, b in pairs]


STYLESHEET = [
    {"selector": "node", "style": {
        "shape": "round-rectangle", "width": "data(w)", "height": "data(h)", "label": "data(label)",
        "background-color": "data(color)", "border-width": 1, "border-color": "#546e7a", "font-size": 12,
        "text-valign": "center", "text-halign": "center", "color": "#1b1f23", "font-family": "sans-serif",
        "min-zoomed-font-size": 7}},
    {"selector": "node.module", "style": {"border-width": 2, "border-color": "#263238"}},
    {"selector": "node.box", "style": {
        "background-opacity": 0.08, "border-color": "data(color)", "border-width": 3, "text-valign": "top",
        "text-halign": "center", "font-weight": "bold", "padding": "12px", "text-margin-y": -3,
        "text-events": "yes"}},
    {"selector": "node.nodata", "style": {"background-opacity": 0.45, "border-style": "dotted"}},
    {"selector": "node.unmatched", "style": {
        "background-color": "#ffffff", "border-style": "dashed", "border-color": "#6d4c41", "border-width": 2,
        "color": "#6d4c41", "font-style": "italic"}},
    {"selector": "node.fused", "style": {"border-color": "#00695c", "border-width": 5, "border-style": "double"}},
    {"selector": "node.overflow", "style": {"border-color": "#6a1b9a", "border-width": 4, "border-style": "double"}},
    {"selector": "node.origin", "style": {
        "border-color": "#b71c1c", "border-width": 6, "border-style": "double", "font-weight": "bold",
        "underlay-color": "#d50000", "underlay-opacity": 0.35, "underlay-padding": 9}},
    {"selector": "node.hit", "style": {"underlay-color": "#1e88e5", "underlay-opacity": 0.35, "underlay-padding": 6}},
    {"selector": "node.box.hit", "style": {"underlay-opacity": 0.12, "underlay-padding": 3}},
    {"selector": "node.pager", "style": {
        "background-color": "#e3f2fd", "border-color": "#1e88e5", "border-style": "dashed", "color": "#0d47a1",
        "font-size": 11}},
    {"selector": "node:selected", "style": {
        "overlay-color": "#1e88e5", "overlay-opacity": 0.25, "overlay-padding": 5, "border-color": "#0d47a1",
        "border-width": 4}},
    {"selector": "node.box:selected", "style": {"overlay-opacity": 0, "border-width": 6, "border-color": "#0d47a1"}},
    {"selector": "edge", "style": {
        "width": 1.5, "line-color": "#78909c", "target-arrow-color": "#78909c", "target-arrow-shape": "triangle",
        "arrow-scale": 0.7, "curve-style": "bezier", "events": "no"}},  # taps go to the nodes below
]
"""The shared stylesheet: per-node colours come from element data, marks from classes."""
