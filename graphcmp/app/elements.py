"""Cytoscape elements and stylesheet of one pane: geometry from `layout`, colours from `colors`.

Element ids are ``n<row>`` for drawn nodes, ``b<row>`` for open modules (compound boxes: a distinct
id, so a node turning into a box is replaced, never moved with its children) and ``p<row>:<±1>`` for
pager boxes; boxes carry no position (cytoscape fits them around their children); data carries only
what drawing needs (label, size, colour). Labels are drawn on a canvas by cytoscape, so names from user
models are never interpreted as HTML. Data-flow edges (`model.flows`: a graph's own, or for a dump
each input's producer) join the drawn nodes, lifted to the nearest drawn ancestor; an edge whose two
ends are the origin or calls its error propagated to is on the *contamination path* (class ``hot``),
and an edge that jumps over the nodes of its column (a residual connection) bends aside (``bypass``);
control edges (ordering only, GE) are dashed.
A node with inputs folded into it (constants, weights) carries their count, shown when it is selected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from graphcmp.app.colors import KIND_COLORS, NONE_COLOR, Scheme, node_colors
from graphcmp.app.layout import GAP_Y, NODE_H, Cell, PaneGeometry
from graphcmp.app.model import ViewModel
from graphcmp.app.tree import NavTree
from graphcmp.core.noise import NodeRole
from graphcmp.core.overflow import OverflowLevel
from graphcmp.core.rules import Status

__all__ = ["MAX_EDGES", "STYLESHEET", "DrawnEdge", "PaneStyle", "node_element_id", "pane_edges", "pane_elements",
           "parse_element_id"]

_ELEMENT_ID = re.compile(r"[nb](?P<node>[0-9]{1,18})|p(?P<pager>[0-9]{1,18}):(?P<step>-?1)")

MAX_EDGES = 4000


@dataclass(frozen=True, slots=True)
class PaneStyle:
    """What colours and marks one pane: the scheme, the rows of the current search/filter hits, and the
    selected row (drawn selected from the start, so a page opened at a node is drawn once)."""

    scheme: Scheme
    hits: frozenset[int] = frozenset()
    selected: int = -1


def node_element_id(row: int, is_box: bool = False) -> str:
    return f"b{row}" if is_box else f"n{row}"


def parse_element_id(element_id: object) -> tuple[int, int] | None:
    """(row, pager step) of an element id: ``n12`` -> (12, 0), ``p4:1`` -> (4, 1); None when malformed.

    Only the ids the panes draw are read: a row is ASCII digits (``n-1`` is not the last row, ``n１`` not row 1).

    >>> parse_element_id("n12"), parse_element_id("b3"), parse_element_id("p4:-1"), parse_element_id("x")
    ((12, 0), (3, 0), (4, -1), None)
    >>> parse_element_id("n-1"), parse_element_id("n１"), parse_element_id(" n1"), parse_element_id(7)
    (None, None, None, None)
    """
    found = _ELEMENT_ID.fullmatch(element_id) if isinstance(element_id, str) else None
    if found is None:
        return None
    if found["node"] is not None:
        return int(found["node"]), 0
    return int(found["pager"]), int(found["step"])


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
        folds = len(tree.folds(cell.row)) if tree.folded_into is not None else 0
        if folds:
            data["flabel"] = f"{cell.label}  [+{folds} folded]"
            cls += " folds"
        if cell.parent > 0:
            data["parent"] = node_element_id(cell.parent, True)
        element = {"data": data, "classes": cls}
        if cell.row == style.selected:
            element["selected"] = True
        if not cell.is_box:
            element["position"] = {"x": cell.x, "y": cell.y}
        out.append(element)
    for cell in geo.cells:
        if cell.pager:
            data = {"id": f"p{cell.row}:{cell.pager}", "label": cell.label, "w": cell.w, "h": cell.h}
            if cell.row > 0:
                data["parent"] = node_element_id(cell.row, True)
            out.append({"data": data, "position": {"x": cell.x, "y": cell.y}, "classes": "pager"})
    out.extend(_edges(model, side, geo))
    return out


def _classes(model: ViewModel, side: str, tree: NavTree, rows: np.ndarray, is_box: np.ndarray,
             hits: frozenset[int]) -> list[str]:
    status = model.status(side)
    role = model.role(side)
    origin = (role[rows] == NodeRole.ORIGIN) if role is not None else np.zeros(len(rows), bool)
    overflow = model.overflow[side][rows] > OverflowLevel.NONE
    fused = model.fused[side][rows]
    renamed = model.renamed(side)[rows]
    unmatched = (status[rows] == Status.UNMATCHED) if status is not None else np.zeros(len(rows), bool)
    module = tree.n_children[rows] > 0
    nodata = ~tree.graph.nodes.has_data[rows]
    names = []
    for k, row in enumerate(rows.tolist()):
        parts = ["box" if is_box[k] else ("module" if module[k] else "leaf")]
        if unmatched[k]:
            parts.append("unmatched")
        elif renamed[k]:
            parts.append("renamed")
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


@dataclass(frozen=True, slots=True)
class DrawnEdge:
    """One edge of a pane between two drawn rows: on the contamination path (`hot`), data or control only."""

    src: int
    dst: int
    hot: bool
    data: bool
    info: str = ""  # the tensor it carries: dtype and shape (one of its edges' producer outputs)


def pane_edges(model: ViewModel, side: str, geo: PaneGeometry) -> list[DrawnEdge]:
    """The edges a pane draws: the run's edges crossing its open modules, lifted to drawn rows, each pair once
    (at most `MAX_EDGES`, those of the contamination path first)."""
    flow = model.flows[side]
    if not len(flow):
        return []
    crossing = flow.drawn(geo.visible, [0, *geo.box_rows()])
    if not len(crossing):
        return []
    role = model.role(side)
    hot = (np.zeros(len(crossing), bool) if role is None else
           (role[crossing.edge_src] >= NodeRole.PROPAGATED) & (role[crossing.edge_dst] >= NodeRole.PROPAGATED))
    n = len(flow.tree)
    pairs, where = np.unique(crossing.src * n + crossing.dst, return_inverse=True)
    where = where.reshape(-1)
    is_hot, is_data = np.zeros(len(pairs), bool), np.zeros(len(pairs), bool)
    np.logical_or.at(is_hot, where, hot)
    np.logical_or.at(is_data, where, ~crossing.control)
    order = np.argsort(~is_hot, kind="stable")[:MAX_EDGES]  # the contamination path first
    first = np.zeros(len(pairs), np.int64)
    first[where[::-1]] = np.arange(len(where))[::-1]  # the first real edge of each drawn pair
    real = zip(crossing.edge_src[first[order]].tolist(), crossing.edge_dst[first[order]].tolist())
    return [DrawnEdge(a, b, h, d, model.tensor_text(side, s, t))
            for a, b, h, d, (s, t) in zip((pairs[order] // n).tolist(), (pairs[order] % n).tolist(),
                                          is_hot[order].tolist(), is_data[order].tolist(), real)]


def _edges(model: ViewModel, side: str, geo: PaneGeometry) -> list[dict]:
    boxed = set(geo.box_rows())
    cells = {c.row: c for c in geo.cells if not c.pager and not c.is_box}
    out = []
    for e in pane_edges(model, side, geo):
        classes = "flow hot" if e.hot else "flow" if e.data else "flow control"
        if _bypass(cells.get(e.src), cells.get(e.dst)):
            classes += " bypass"
        out.append({"data": {"id": f"e{e.src}-{e.dst}", "source": node_element_id(e.src, e.src in boxed),
                             "target": node_element_id(e.dst, e.dst in boxed), "info": e.info},
                     "classes": classes})
    return out


def _bypass(a: Cell | None, b: Cell | None) -> bool:
    """True for an edge straight down a column past other nodes (it bends aside so that it is not hidden)."""
    return a is not None and b is not None and abs(a.x - b.x) < 1.0 and abs(b.y - a.y) > NODE_H + 2 * GAP_Y


STYLESHEET = [
    {"selector": "node", "style": {
        "shape": "round-rectangle", "width": "data(w)", "height": "data(h)", "label": "data(label)",
        "background-color": "data(color)", "border-width": 1, "border-color": "#546e7a", "font-size": 13,
        "text-valign": "center", "text-halign": "center", "color": "#1b1f23", "font-family": "sans-serif",
        "text-wrap": "wrap", "line-height": 1.25, "min-zoomed-font-size": 7}},
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
        "shape": "octagon", "border-color": "#b71c1c", "border-width": 6, "border-style": "double",
        "font-weight": "bold", "color": "#ffffff", "text-outline-color": "#7f0000", "text-outline-width": 1,
        "underlay-color": "#d50000", "underlay-opacity": 0.35, "underlay-padding": 9, "underlay-shape": "ellipse"}},
    {"selector": "node.hit", "style": {"underlay-color": "#1e88e5", "underlay-opacity": 0.35, "underlay-padding": 6}},
    {"selector": "node.box.hit", "style": {"underlay-opacity": 0.12, "underlay-padding": 3}},
    {"selector": "node.pager", "style": {
        "background-color": "#e3f2fd", "border-color": "#1e88e5", "border-style": "dashed", "color": "#0d47a1",
        "font-size": 11}},
    {"selector": "node:selected", "style": {
        "overlay-color": "#1e88e5", "overlay-opacity": 0.25, "overlay-padding": 5, "border-color": "#0d47a1",
        "border-width": 4}},
    {"selector": "node.box:selected", "style": {"overlay-opacity": 0, "border-width": 6, "border-color": "#0d47a1"}},
    {"selector": "node.origin:selected", "style": {"border-color": "#b71c1c", "border-width": 7,
                                                   "overlay-opacity": 0.12}},
    {"selector": "node.renamed", "style": {"border-style": "dashed", "border-color": "#1565c0"}},
    {"selector": "node.folds:selected", "style": {"label": "data(flabel)"}},
    {"selector": "edge", "style": {
        "width": 1.5, "line-color": "#78909c", "target-arrow-color": "#78909c", "target-arrow-shape": "triangle",
        "arrow-scale": 0.8, "curve-style": "straight", "label": "", "font-size": 11, "color": "#263238",
        "text-background-color": "#ffffff", "text-background-opacity": 0.9, "text-background-padding": 2,
        "text-rotation": "none"}},
    {"selector": "edge.control", "style": {"line-style": "dashed", "line-color": "#b0bec5",
                                           "target-arrow-color": "#b0bec5"}},
    {"selector": "edge.bypass", "style": {"curve-style": "unbundled-bezier", "control-point-distances": 70,
                                          "control-point-weights": 0.5}},
    {"selector": "edge.hot", "style": {"width": 3, "line-color": "#c62828", "target-arrow-color": "#c62828",
                                       "z-index": 2}},
    {"selector": "edge.hover", "style": {"label": "data(info)", "width": 3, "z-index": 9}},
]
"""The shared stylesheet: per-node colours come from element data, marks from classes."""
