"""Navigation arrays of one run for the viewer: children in execution order, depth, labels, ancestors,
and which nodes a drawing folds into their consumer.

Built once per run from the `NodeTable` columns with numpy (no per-node objects), so a 100k-node
run is indexed in well under a second and every later question is an array lookup.
"""

from __future__ import annotations

import re
from functools import cached_property

import numpy as np

from graphcmp.core.hierarchy import depths, levels
from graphcmp.core.records import Direction, DumpGraph, NodeKind
from graphcmp.core.shards import node_provenance

__all__ = ["NavTree", "rank_ranges", "short_label"]

_MAX_LABEL = 42
_DIGITS = re.compile(r"^\d+$")


def short_label(node_id: str, op: str, kind: int, direction: int) -> str:
    """A short name for a node box: the module's attribute path end and class, or the API and its counter.

    Examples
    --------
    >>> short_label("Module.encoder.layers.0.self_attn.MultiheadAttention.forward.0", "MultiheadAttention", 1, 0)
    'self_attn: MultiheadAttention'
    >>> short_label("Module.encoder.layers.3.TransformerEncoderLayer.backward.0", "TransformerEncoderLayer", 1, 1)
    'layers.3: TransformerEncoderLayer ◂'
    >>> short_label("Functional.linear.12.forward", "linear", 2, 0)
    'linear.12'
    """
    parts = node_id.split(".")
    at = len(parts) - 1 - parts[::-1].index(op) if op in parts else -1
    if at > 0 and kind in (NodeKind.MODULE, NodeKind.PARAM_GRAD):
        before = parts[1:at]
        name = ".".join(before[-2:]) if before and _DIGITS.match(before[-1]) else (before[-1] if before else "")
        label = f"{name}: {op}" if name else op
        if kind == NodeKind.PARAM_GRAD:
            label += " grads"
    elif at > 0 and at + 1 < len(parts) and _DIGITS.match(parts[at + 1]):
        label = f"{op}.{parts[at + 1]}"
    else:
        label = node_id
    if direction == Direction.BACKWARD and kind != NodeKind.PARAM_GRAD:
        label += " ◂"
    return label if len(label) <= _MAX_LABEL else label[: _MAX_LABEL - 1] + "…"


def rank_ranges(ranks: tuple[int, ...], limit: int = 3) -> str:
    """Ranks as runs: ``0-3``, ``0,2``; after `limit` runs the rest is ``…``.

    >>> rank_ranges((0, 1, 2, 3)), rank_ranges((0, 2)), rank_ranges((0, 2, 4, 6, 8))
    ('0-3', '0,2', '0,2,4,…')
    """
    runs: list[list[int]] = []
    for rank in ranks:
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    text = [f"{a}-{b}" if b > a else str(a) for a, b in runs[:limit]]
    return ",".join(text + (["…"] if len(runs) > limit else []))


class NavTree:
    """Children lists (CSR), depths and subtree sizes of one run, by row.

    Examples
    --------
    >>> from graphcmp.core.hierarchy import HierarchyBuilder
    >>> from graphcmp.core.records import RunInfo
    >>> b = HierarchyBuilder()
    >>> b.add_node("Module.fc.Linear.forward.0", NodeKind.MODULE, "Linear", Direction.FORWARD, None, 1)
    >>> b.add_node("Functional.linear.0.forward", NodeKind.API, "linear", Direction.FORWARD,
    ...            "Module.fc.Linear.forward.0", 0)
    >>> t = NavTree(b.build(RunInfo(path="mem")))
    >>> t.children(0).tolist(), t.children(1).tolist(), t.ancestors(2)
    ([1], [2], [0, 1])
    """

    def __init__(self, graph: DumpGraph, folded: np.ndarray | None = None) -> None:
        self.graph = graph
        parent = graph.nodes.parent.astype(np.int64)
        n = len(parent)
        self.parent = parent
        order = np.argsort(parent[1:], kind="stable") + 1  # pre-order rows: stable sort keeps execution order
        self._order = order
        self._start = np.searchsorted(parent[order], np.arange(n + 1), side="left")
        self.n_children = np.diff(self._start)
        self.depth = depths(parent)
        self.folded_into = folded if folded is not None and (folded >= 0).any() else None
        """Per row, the consumer it is folded into when drawn (`graphcmp.core.dataflow.folded_sources`); None
        when nothing is folded."""

    def __len__(self) -> int:
        return len(self.parent)

    def children(self, row: int) -> np.ndarray:
        """Rows of the children of `row`, in execution order."""
        return self._order[self._start[row]: self._start[row + 1]]

    def ancestors(self, row: int) -> list[int]:
        """Rows from the root down to the parent of `row` (empty for the root)."""
        out = []
        row = int(self.parent[row])
        while row >= 0:
            out.append(row)
            row = int(self.parent[row])
        return out[::-1]

    def label(self, row: int) -> str:
        """Short display name of `row` (see `short_label`), with a rank badge in a merged run (``[r0-3]``)."""
        nodes = self.graph.nodes
        if row == 0:
            return "model"
        label = short_label(nodes.ids[row], nodes.op[row], int(nodes.kind[row]), int(nodes.direction[row]))
        ranks = node_provenance(self.graph, row).ranks if nodes.attrs else ()
        return f"{label} [r{rank_ranges(ranks)}]" if ranks else label

    def box_label(self, row: int, lines: bool = True) -> str:
        """The label a drawing shows: the op type first (``Conv2D``, ``MatMulV2``, ``Linear``) and the short name
        second, on two lines (`lines`) or joined by `` · `` (an open module's title); one line when the short
        name already starts with the op type (msprobe's ``linear.2``).

        >>> from graphcmp.core.hierarchy import HierarchyBuilder
        >>> from graphcmp.core.records import RunInfo
        >>> b = HierarchyBuilder()
        >>> b.add_node("Module.fc.Linear.forward.0", NodeKind.MODULE, "Linear", Direction.FORWARD, None, 1)
        >>> b.add_node("Functional.linear.0.forward", NodeKind.API, "linear", Direction.FORWARD,
        ...            "Module.fc.Linear.forward.0", 0)
        >>> b.add_node("conv1conv1_relu", NodeKind.API, "Conv2D", Direction.FORWARD, None, 2)
        >>> t = NavTree(b.build(RunInfo(path="mem")))
        >>> [t.box_label(r) for r in range(1, 4)], t.box_label(1, lines=False)
        (['Linear\\nfc', 'linear.0', 'Conv2D\\nconv1conv1_relu'], 'Linear · fc')
        """
        label = self.label(row)
        op = self.graph.nodes.op[row]
        if row == 0 or not op or label.startswith(op):
            return label
        name = label.replace(f": {op}", "", 1)
        return f"{op}\n{name}" if lines else f"{op} · {name}"

    def shown_children(self, row: int) -> np.ndarray:
        """Children of `row` a drawing shows: all but those folded into their consumer."""
        kids = self.children(row)
        return kids[self.folded_into[kids] < 0] if self.folded_into is not None and len(kids) else kids

    def folds(self, row: int) -> np.ndarray:
        """Rows folded into `row` (constants, weights and other inputs of no input), in row order."""
        if self.folded_into is None:
            return np.zeros(0, np.int64)
        order, start = self._folds
        return order[start[row]: start[row + 1]]

    @cached_property
    def _folds(self) -> tuple[np.ndarray, np.ndarray]:
        into = self.folded_into
        rows = np.flatnonzero(into >= 0)
        rows = rows[np.argsort(into[rows], kind="stable")]
        return rows, np.searchsorted(into[rows], np.arange(len(into) + 1))

    @cached_property
    def expandable(self) -> np.ndarray:
        """True for rows that have children."""
        return self.n_children > 0

    def nearest_visible(self, visible: np.ndarray) -> np.ndarray:
        """For every row, the row itself if `visible`, else its nearest visible ancestor (-1 if none)."""
        rep = np.where(visible, np.arange(len(self.parent)), -1)
        for d in range(1, int(self.depth.max(initial=0)) + 1):
            rows = self._by_depth[d]
            hidden = rows[rep[rows] < 0]
            rep[hidden] = rep[self.parent[hidden]]
        return rep

    @cached_property
    def _by_depth(self) -> list[np.ndarray]:
        return levels(self.depth)
