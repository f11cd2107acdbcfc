"""The layout engine: which nodes of a run are visible for a set of open modules, and where they go.

Only children of open modules are visible, a page of `PAGE` at a time (pager boxes step through the
rest), so the number of elements stays bounded whatever the model size. Children stack top to bottom
in execution order and wrap into a new column past `COLUMN_HEIGHT` (columns read left to right); an
open module is a box around its children (cytoscape compound node), drawn only along the open path.
Positions are computed here, in Python, and cached per (open set, pages, micro-step) by the viewer;
the browser only draws them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from graphcmp.app.tree import NavTree
from graphcmp.core.records import FrozenColumns

__all__ = ["COLUMN_HEIGHT", "PAGE", "Cell", "PaneGeometry", "layout_pane", "page_of", "visible_children"]

PAGE = 50
"""Children shown at once inside one open module."""
COLUMN_HEIGHT = 900.0
"""Children wrap into a new column when a column grows past this height (px)."""
NODE_H, GAP_X, GAP_Y, PAD, HEADER = 30.0, 40.0, 16.0, 12.0, 22.0
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
    """Children of `row` shown in the view: all, or those of one micro-step."""
    kids = tree.children(row)
    if micro is not None and len(kids):
        kids = kids[tree.graph.nodes.micro_step[kids] == micro]
    return kids


def page_of(tree: NavTree, parent: int, child: int, micro: int | None) -> int:
    """Page of `parent`'s children on which `child` appears (0 if it is not among them)."""
    kids = visible_children(tree, parent, micro)
    pos = np.flatnonzero(kids == child)
    return int(pos[0]) // PAGE if len(pos) else 0


def layout_pane(tree: NavTree, open_rows: Iterable[int], pages: dict[int, int], micro: int | None) -> PaneGeometry:
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

    Examples
    --------
    >>> from graphcmp.core.compare import compare_paths
    >>> from graphcmp.samples import sample_pair
    >>> tree = NavTree(compare_paths(*sample_pair()).npu)
    >>> geo = layout_pane(tree, [], {}, None)
    >>> [c.label for c in geo.cells][:3]
    ['embedding: Embedding', '__add__.0', 'encoder: TransformerEncoder']
    """
    open_set = set(open_rows) | {0}
    visible = np.zeros(len(tree), bool)
    cells: list[Cell] = []
    block = _Block.build(tree, 0, open_set, pages, micro)
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
    """The children of one open module, arranged in columns; sizes include the box padding."""

    row: int
    items: list[_Item]
    columns: list[list[int]]
    col_w: list[float]
    w: float
    h: float

    @classmethod
    def build(cls, tree: NavTree, row: int, open_set: set[int], pages: dict[int, int],
              micro: int | None) -> _Block:
        kids = visible_children(tree, row, micro)
        n_pages = max(1, -(-len(kids) // PAGE))
        page = min(max(pages.get(row, 0), 0), n_pages - 1)
        items = []
        if page > 0:
            items.append(_Item(row, PAGER_W, NODE_H, pager=-1, label=f"▲ previous {PAGE} ({page * PAGE} above)"))
        for k in kids[page * PAGE:(page + 1) * PAGE].tolist():
            label = tree.label(k)
            if k in open_set and tree.n_children[k]:
                sub = cls.build(tree, k, open_set, pages, micro)
                items.append(_Item(k, sub.w, sub.h, sub=sub, label=label))
            else:
                items.append(_Item(k, min(max(7.2 * len(label) + 26.0, 90.0), 330.0), NODE_H, label=label))
        if page < n_pages - 1:
            rest = len(kids) - (page + 1) * PAGE
            items.append(_Item(row, PAGER_W, NODE_H, pager=1,
                               label=f"▼ next {min(PAGE, rest)} ({rest} below, page {page + 1}/{n_pages})"))
        columns, col_w, col_h = _columns(items)
        inner_w = sum(col_w) + GAP_X * (len(col_w) - 1) if col_w else 0.0
        inner_h = max(col_h, default=0.0)
        return cls(row, items, columns, col_w, inner_w + 2 * PAD, inner_h + 2 * PAD + HEADER)

    def place(self, x0: float, y0: float, cells: list[Cell], visible: np.ndarray, top: bool = False) -> None:
        """Add the cells of this block with its top-left at (x0, y0); the block's own box is added by the caller."""
        left = x0 + (0.0 if top else PAD)
        top_y = y0 + (0.0 if top else PAD + HEADER)
        box = -1 if top else self.row
        for col, width in zip(self.columns, self.col_w):
            y = top_y
            for i in col:
                item = self.items[i]
                x = left + (width - item.w) / 2
                if item.sub is not None:
                    cells.append(Cell(item.row, x + item.w / 2, y + item.h / 2, item.w, item.h, box, True,
                                      label=item.label))
                    item.sub.place(x, y, cells, visible)
                else:
                    cells.append(Cell(item.row, x + item.w / 2, y + item.h / 2, item.w, item.h, box,
                                      pager=item.pager, label=item.label))
                if not item.pager:
                    visible[item.row] = True
                y += item.h + GAP_Y
            left += width + GAP_X


def _columns(items: list[_Item]) -> tuple[list[list[int]], list[float], list[float]]:
    columns: list[list[int]] = []
    col_w: list[float] = []
    col_h: list[float] = []
    for i, item in enumerate(items):
        if not columns or (col_h[-1] > 0 and col_h[-1] + item.h > COLUMN_HEIGHT):
            columns.append([])
            col_w.append(0.0)
            col_h.append(0.0)
        columns[-1].append(i)
        col_w[-1] = max(col_w[-1], item.w)
        col_h[-1] += item.h + (GAP_Y if len(columns[-1]) > 1 else 0.0)
    return columns, col_w, col_h
