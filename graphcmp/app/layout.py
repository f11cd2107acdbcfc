"""The layout engine: which nodes of a run are visible for a set of open modules, and where they go.

Only children of open modules are visible, a page of `PAGE` at a time (pager boxes step through the
rest), so the number of elements stays bounded whatever the model size; nodes folded into their
consumer (constants, weights: `NavTree.folded_into`) are not drawn. Inside each open module the
children are *layered* top down by data flow, as Netron draws a model: a child sits one layer below
the lowest child that feeds it (`FlowIndex.sibling_pairs`: the data-flow edges between siblings,
lifted to them); a child fed by none follows the previous one in execution order, and one that feeds
others but is fed by none sits just above its first consumer. A layer's children stand side by side,
centred (ordered by where their inputs stand), and a layer wider than `ROW_WIDTH` wraps. An open
module is a box around its children (cytoscape compound node) that takes its place in its own
layer, so its siblings stay above and below it. Positions are computed here, in Python, and cached
per (open set, pages, micro-step) by the viewer; the browser only draws them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from graphcmp.app.flow import FlowIndex
from graphcmp.app.tree import NavTree
from graphcmp.core.records import FrozenColumns

__all__ = ["CHAR_W", "NODE_H2", "PAGE", "ROW_WIDTH", "Cell", "PaneGeometry", "layout_pane", "page_of",
           "visible_children"]

PAGE = 50
"""Children shown at once inside one open module."""
ROW_WIDTH = 1400.0
"""A layer wider than this (px) wraps into several rows."""
NODE_H, GAP_X, GAP_Y, PAD, HEADER = 30.0, 28.0, 26.0, 12.0, 22.0
NODE_H2 = 46.0
"""Height of a node of two label lines (op type, short name)."""
CHAR_W = 7.8
"""Width of a label character at the panes' 13 px font (px, model units)."""
PAGER_W = 190.0


@dataclass(frozen=True, slots=True)
class Cell:
    """One drawn node: a run row, or a pager (``row`` is the module, ``pager`` is -1 / +1)."""

    row: int
    x: float  # centre
    y: float
    w: float
    h: float
    parent: int  # row of the enclosing open module, -1 at top level
    is_box: bool = False
    pager: int = 0
    label: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class PaneGeometry(FrozenColumns):
    """Every visible cell of one pane, and which rows are drawn."""

    cells: tuple[Cell, ...]
    visible: np.ndarray  # bool per row: drawn as a node or as a box

    def box_rows(self) -> list[int]:
        return [c.row for c in self.cells if c.is_box]


def visible_children(tree: NavTree, row: int, micro: int | None) -> np.ndarray:
    """Children of `row` shown in the view: all but those folded into their consumer, or those of one micro-step."""
    kids = tree.shown_children(row)
    if micro is not None and len(kids):
        kids = kids[tree.graph.nodes.micro_step[kids] == micro]
    return kids


def page_of(tree: NavTree, parent: int, child: int, micro: int | None) -> int:
    """Page of `parent`'s children on which `child` appears (0 if it is not among them)."""
    kids = visible_children(tree, parent, micro)
    pos = np.flatnonzero(kids == child)
    return int(pos[0]) // PAGE if len(pos) else 0


def layout_pane(tree: NavTree, open_rows: Iterable[int], pages: dict[int, int], micro: int | None,
                flow: FlowIndex | None = None) -> PaneGeometry:
    """Place the visible nodes of one pane.

    Parameters
    ----------
    tree : NavTree
        The run.
    open_rows : iterable of int
        Open modules; a module is shown open only when all its ancestors are open too. The root
        (row 0) is always open and never drawn.
    pages : dict of int to int
        Page shown per open module (default 0; clamped to the last page).
    micro : int, optional
        Show only the nodes of this micro-step.
    flow : FlowIndex, optional
        The run's data-flow edges, which layer the children of each open module; without them children
        follow each other top down in execution order.

    Examples
    --------
    >>> from graphcmp.core.compare import compare_paths
    >>> from graphcmp.samples import sample_pair
    >>> tree = NavTree(compare_paths(*sample_pair()).npu)
    >>> geo = layout_pane(tree, [], {}, None)
    >>> [c.label for c in geo.cells][:3]
    ['Embedding\\nembedding', '__add__.0', 'TransformerEncoder\\nencoder']
    """
    open_set = set(open_rows) | {0}
    visible = np.zeros(len(tree), bool)
    cells: list[Cell] = []
    block = _Block.build(tree, 0, open_set, pages, micro, flow)
    block.place(0.0, 0.0, cells, visible, top=True)
    return PaneGeometry(tuple(cells), visible)


@dataclass(slots=True)
class _Item:
    row: int
    w: float
    h: float
    sub: _Block | None = None
    pager: int = 0
    label: str = ""


@dataclass(slots=True)
class _Block:
    """The children of one open module, in rows of layers; sizes include the box padding."""

    row: int
    items: list[_Item]
    rows: list[list[int]]  # item indices per drawn row, left to right
    w: float
    h: float

    @classmethod
    def build(cls, tree: NavTree, row: int, open_set: set[int], pages: dict[int, int], micro: int | None,
              flow: FlowIndex | None) -> _Block:
        kids = visible_children(tree, row, micro)
        n_pages = max(1, -(-len(kids) // PAGE))
        page = min(max(pages.get(row, 0), 0), n_pages - 1)
        shown = kids[page * PAGE:(page + 1) * PAGE]
        items = []
        for k in shown.tolist():
            if k in open_set and tree.n_children[k]:
                sub = cls.build(tree, k, open_set, pages, micro, flow)
                items.append(_Item(k, sub.w, sub.h, sub=sub, label=tree.box_label(k, lines=False)))
            else:
                label = tree.box_label(k)
                lines = label.split("\n")
                folds = len(tree.folds(k)) if tree.folded_into is not None else 0
                badge = len(f"  [+{folds} folded]") if folds else 0  # room for the badge
                chars = max(len(line) for line in lines) + badge
                items.append(_Item(k, min(max(CHAR_W * chars + 26.0, 90.0), 360.0),
                                   NODE_H2 if len(lines) > 1 else NODE_H, label=label))
        pairs = flow.sibling_pairs(row, shown) if flow is not None and len(shown) else set()
        rows = _rows(items, *_layering(shown, pairs))
        if page > 0:
            items.append(_Item(row, PAGER_W, NODE_H, pager=-1, label=f"▲ previous {PAGE} ({page * PAGE} above)"))
            rows.insert(0, [len(items) - 1])
        if page < n_pages - 1:
            rest = len(kids) - (page + 1) * PAGE
            items.append(_Item(row, PAGER_W, NODE_H, pager=1,
                               label=f"▼ next {min(PAGE, rest)} ({rest} below, page {page + 1}/{n_pages})"))
            rows.append([len(items) - 1])
        widths = [_row_width(items, r) for r in rows]
        heights = [max(items[i].h for i in r) for r in rows]
        inner_w = max(widths, default=0.0)
        inner_h = sum(heights) + GAP_Y * max(len(rows) - 1, 0)
        return cls(row, items, rows, inner_w + 2 * PAD, inner_h + 2 * PAD + HEADER)

    def place(self, x0: float, y0: float, cells: list[Cell], visible: np.ndarray, top: bool = False) -> None:
        """Add the cells of this block with its top-left at (x0, y0); the block's own box is added by the caller."""
        inner_w = self.w - 2 * PAD
        left = x0 + (0.0 if top else PAD)
        y = y0 + (0.0 if top else PAD + HEADER)
        box = -1 if top else self.row
        for members in self.rows:
            height = max(self.items[i].h for i in members)
            x = left + (inner_w - _row_width(self.items, members)) / 2
            for i in members:
                item = self.items[i]
                cx, cy = x + item.w / 2, y + item.h / 2
                if item.sub is not None:
                    cells.append(Cell(item.row, cx, cy, item.w, item.h, box, True, label=item.label))
                    item.sub.place(x, y, cells, visible)
                else:
                    cells.append(Cell(item.row, cx, cy, item.w, item.h, box, pager=item.pager, label=item.label))
                if not item.pager:
                    visible[item.row] = True
                x += item.w + GAP_X
            y += height + GAP_Y


def _layers(rows: np.ndarray, pairs: set[tuple[int, int]]) -> list[int]:
    """Layer of each of `rows` (siblings in execution order) given the data-flow `pairs` between them.

    >>> _layers(np.array([5, 6, 7, 8]), {(5, 6), (5, 7), (6, 8), (7, 8)})  # a diamond
    [0, 1, 1, 2]
    >>> _layers(np.array([5, 6, 7]), set())  # no data flow: one after another
    [0, 1, 2]
    >>> _layers(np.array([5, 6, 7, 8]), {(6, 8), (7, 8)})  # 6 and 7 feed 8, nothing feeds them: side by side
    [0, 1, 1, 2]
    """
    return _layering(rows, pairs)[0]


def _layering(rows: np.ndarray, pairs: set[tuple[int, int]]) -> tuple[list[int], list[list[int]]]:
    """(layer, predecessors) of each of `rows`, as `_layers` describes."""
    index = {r: i for i, r in enumerate(rows.tolist())}
    n = len(index)
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in pairs:
        i, j = index[a], index[b]
        if i < j:  # an edge back against execution order does not place anything
            preds[j].append(i)
            succs[i].append(j)
    layer = [0] * n
    last = -1
    for k in range(n):
        layer[k] = max(layer[p] for p in preds[k]) + 1 if preds[k] else last + 1
        last = layer[k]
    for k in reversed(range(n)):  # a node fed by none sits just above its first consumer
        if not preds[k] and succs[k]:
            layer[k] = max(layer[k], min(layer[s] for s in succs[k]) - 1)
    dense = {v: i for i, v in enumerate(sorted(set(layer)))}
    return [dense[v] for v in layer], preds


def _rows(items: list[_Item], layers: list[int], preds: list[list[int]]) -> list[list[int]]:
    """Item indices per drawn row: each layer's items ordered by where their inputs stand (left to right,
    execution order on ties), wrapped past `ROW_WIDTH`."""
    by_layer: dict[int, list[int]] = {}
    for i, layer in enumerate(layers):
        by_layer.setdefault(layer, []).append(i)
    rows: list[list[int]] = []
    where = [0.5] * len(layers)  # position of each placed item in its row, 0 (left) to 1 (right)
    for layer in sorted(by_layer):
        members = sorted(by_layer[layer], key=lambda i: sum(where[p] for p in preds[i]) / len(preds[i])
                         if preds[i] else 0.5)
        for k, i in enumerate(members):
            where[i] = (k + 0.5) / len(members)
        row: list[int] = []
        for i in members:
            if row and _row_width(items, row) + GAP_X + items[i].w > ROW_WIDTH:
                rows.append(row)
                row = []
            row.append(i)
        rows.append(row)
    return rows


def _row_width(items: list[_Item], members: list[int]) -> float:
    return sum(items[i].w for i in members) + GAP_X * max(len(members) - 1, 0)
