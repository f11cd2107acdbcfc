"""Data-flow edges of one run filed by the module they cross, so a pane draws only the few it needs.

An edge between two nodes of the hierarchy crosses exactly one module: the lowest common ancestor
of its ends (the root for edges between top-level nodes). Drawn, it joins the children of that
module on the paths to its ends (when both are shown), or the deepest drawn nodes below them. So
the edges a pane can show are those filed under its open modules, found by an index lookup: a
1M-node run with millions of edges costs the same per click as a small one. Edges touching nodes
folded into their consumer (`NavTree.folded_into`) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from graphcmp.app.tree import NavTree
from graphcmp.core.records import EdgeTable

__all__ = ["Crossing", "FlowIndex"]


class Crossing:
    """The edges of a pane: their ends as drawn (`src`, `dst`: rows), as recorded (`edge_src`, `edge_dst`),
    and whether each is a control edge (ordering only)."""

    def __init__(self, src: np.ndarray, dst: np.ndarray, edge_src: np.ndarray, edge_dst: np.ndarray,
                 control: np.ndarray) -> None:
        self.src, self.dst, self.edge_src, self.edge_dst, self.control = src, dst, edge_src, edge_dst, control

    def __len__(self) -> int:
        return len(self.src)


class FlowIndex:
    """The edges of one run, each with the module it crosses and that module's children on its two paths.

    Parameters
    ----------
    tree : NavTree
        The run's navigation tree (parents, depths, folded nodes).
    edges : EdgeTable
        Its edges (`graphcmp.core.dataflow.flow_edges`).

    Examples
    --------
    >>> from graphcmp.core.compare import compare_paths
    >>> from graphcmp.core.dataflow import flow_edges
    >>> from graphcmp.samples import sample_pair
    >>> g = compare_paths(*sample_pair()).npu
    >>> flow = FlowIndex(NavTree(g), flow_edges(g))
    >>> layer1 = g.row("Module.encoder.layers.1.TransformerEncoderLayer.forward.0")
    >>> pairs = flow.sibling_pairs(layer1, NavTree(g).children(layer1))
    >>> (g.row("Module.encoder.layers.1.linear1.Linear.forward.0"), g.row("Torch.relu.1.forward")) in pairs
    True
    """

    def __init__(self, tree: NavTree, edges: EdgeTable) -> None:
        self.tree = tree
        src, dst, control = edges.src.astype(np.int64), edges.dst.astype(np.int64), edges.control
        if tree.folded_into is not None:
            keep = (tree.folded_into[src] < 0) & (tree.folded_into[dst] < 0)
            src, dst, control = src[keep], dst[keep], control[keep]
        via_src, via_dst = _children_on_paths(tree.parent, tree.depth, src, dst)
        keep = via_src >= 0
        src, dst, control, via_src, via_dst = src[keep], dst[keep], control[keep], via_src[keep], via_dst[keep]
        module = tree.parent[via_src]
        order = np.argsort(module, kind="stable")
        self.src, self.dst, self.control = src[order], dst[order], control[order]
        self.via_src, self.via_dst = via_src[order], via_dst[order]
        self._start = np.searchsorted(module[order], np.arange(len(tree) + 1))

    def __len__(self) -> int:
        return len(self.src)

    def crossing(self, module: int) -> slice:
        """The edges crossing `module` (between two of its subtrees), as a slice of the index's arrays."""
        return slice(int(self._start[module]), int(self._start[module + 1]))

    def sibling_pairs(self, module: int, items: np.ndarray) -> set[tuple[int, int]]:
        """(child, child) pairs of `module`, both among `items`, joined by at least one edge."""
        at = self.crossing(module)
        a, b = self.via_src[at], self.via_dst[at]
        if not len(a):
            return set()
        keep = np.isin(a, items) & np.isin(b, items)
        return set(zip(a[keep].tolist(), b[keep].tolist()))

    def drawn(self, visible: np.ndarray, modules: Iterable[int]) -> Crossing:
        """The edges a pane draws: those crossing one of `modules` (the root and the open modules shown)
        whose two paths pass through drawn children, lifted to the deepest drawn node on each path."""
        parts = [self.crossing(m) for m in modules]
        picked = np.concatenate([np.arange(p.start, p.stop) for p in parts]) if parts else np.zeros(0, np.int64)
        picked = picked[visible[self.via_src[picked]] & visible[self.via_dst[picked]]]
        src, dst = self.src[picked], self.dst[picked]
        return Crossing(_lift(self.tree.parent, visible, src), _lift(self.tree.parent, visible, dst), src, dst,
                        self.control[picked])


def _children_on_paths(parent: np.ndarray, depth: np.ndarray, src: np.ndarray,
                       dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each edge, the two children of the lowest common ancestor of its ends on the paths to them;
    -1 when one end is an ancestor of the other (or the same node)."""
    a, b = src.copy(), dst.copy()
    for x, y in ((a, b), (b, a)):  # lift the deeper end to the other's depth
        deeper = np.flatnonzero(depth[x] > depth[y])
        while len(deeper):
            x[deeper] = parent[x[deeper]]
            deeper = deeper[depth[x[deeper]] > depth[y[deeper]]]
    out_a, out_b = np.full(len(a), -1, np.int64), np.full(len(b), -1, np.int64)
    apart = np.flatnonzero(a != b)
    while len(apart):
        joined = parent[a[apart]] == parent[b[apart]]
        done = apart[joined]
        out_a[done], out_b[done] = a[done], b[done]
        apart = apart[~joined]
        a[apart], b[apart] = parent[a[apart]], parent[b[apart]]
    return out_a, out_b


def _lift(parent: np.ndarray, visible: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each row, or its nearest drawn ancestor."""
    rows = rows.copy()
    hidden = np.flatnonzero(~visible[rows])
    while len(hidden):
        rows[hidden] = parent[rows[hidden]]
        hidden = hidden[~visible[rows[hidden]]]
    return rows
