"""Building a run's hierarchy: nodes and tensors in, a `DumpGraph` in execution order out.

Readers of every format feed a `HierarchyBuilder` with nodes (id, parent id, kind, a sequence
key) and tensors, then call `build`. The builder owns what all formats share: implicit parents,
cycle checks, execution order (a module starts with its first descendant), grouping of long runs
of top-level API calls, micro-steps (gradient accumulation) and the networkx tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from operator import itemgetter

import numpy as np

from graphcmp.core.errors import DumpFormatError, GraphCycleError
from graphcmp.core.records import (
    Direction,
    DumpGraph,
    EdgeTable,
    NodeKind,
    NodeTable,
    RunInfo,
    TensorTable,
    ids_to_rows,
)

__all__ = [
    "EXECUTION_ATTRS",
    "GROUP_PREFIX",
    "MIN_GROUP_RUN",
    "ROOT_ID",
    "HierarchyBuilder",
    "depths",
    "execution_keys",
    "rebuild_graph",
    "subtree_rows",
]

ROOT_ID = "DefaultModel"
"""Id of the synthetic root every run hangs from (the name msprobe's viewer uses too)."""

GROUP_PREFIX = "Apis_Between_Modules"
MIN_GROUP_RUN = 2
"""Runs of at least this many consecutive top-level API calls are put under one group node."""


_API = int(NodeKind.API)  # plain int: enum comparisons are slow in per-node loops


@dataclass(slots=True)
class _Pending:
    node_id: str
    kind: NodeKind
    op: str
    direction: Direction
    parent: str | None
    seq: float
    stack: int
    has_data: bool
    attrs: tuple[tuple[str, str], ...]


class HierarchyBuilder:
    """Collects nodes and tensors of one run, then builds the `DumpGraph`.

    Examples
    --------
    >>> b = HierarchyBuilder()
    >>> b.add_node("Module.fc.Linear.forward.0", NodeKind.MODULE, "Linear", Direction.FORWARD, None, 1)
    >>> b.add_node("Functional.linear.0.forward", NodeKind.API, "linear", Direction.FORWARD,
    ...            "Module.fc.Linear.forward.0", 0)
    >>> g = b.build(RunInfo(path="mem"))
    >>> g.nodes.ids
    ('DefaultModel', 'Module.fc.Linear.forward.0', 'Functional.linear.0.forward')
    """

    def __init__(self) -> None:
        self._nodes: dict[str, _Pending] = {}
        self._stacks: dict[tuple[str, ...], int] = {}
        self._tensor_parts: list[tuple] = []
        self._edges: list[tuple[str, str, bool]] = []

    def __contains__(self, node_id: str) -> bool:
        return node_id in self._nodes

    def add_node(
        self,
        node_id: str,
        kind: NodeKind,
        op: str,
        direction: Direction,
        parent: str | None,
        seq: float,
        *,
        stack: Sequence[str] | None = None,
        has_data: bool = True,
        attrs: Iterable[tuple[str, str]] = (),
    ) -> None:
        """Add a node; `seq` orders it among all nodes (smaller runs earlier). A repeated id is ignored."""
        if node_id in self._nodes:
            return
        stack_row = self.add_stack(stack) if stack else -1
        self._nodes[node_id] = _Pending(
            node_id, kind, op, direction, parent, float(seq), stack_row, has_data, tuple(attrs)
        )

    def add_stack(self, frames: Sequence[str]) -> int:
        """Intern a stack (a sequence of frame lines) and return its row."""
        key = tuple(frames)
        return self._stacks.setdefault(key, len(self._stacks))

    def set_stack(self, node_id: str, stack_row: int) -> None:
        """Attach an interned stack to an already added node."""
        self._nodes[node_id].stack = stack_row

    def add_edge(self, src_id: str, dst_id: str, control: bool = False) -> None:
        """Add a data-flow edge from node `src_id` to node `dst_id` (a control edge if `control`).

        Both nodes must be added by the time `build` runs.
        """
        self._edges.append((src_id, dst_id, control))

    def add_tensors(
        self,
        node_ids: Sequence[str],
        roles: Sequence[int],
        slots: Sequence[str],
        *,
        dtype: Sequence[str],
        shape: Sequence[str],
        stats: np.ndarray,
        present: np.ndarray,
        md5: Sequence[str],
        file: Sequence[str],
        value: Sequence[str],
    ) -> None:
        """Add many tensors at once: parallel columns, stats (n, 4) in `STAT_NAMES` order.

        A scalar argument has shape ``"scalar"``; a non-numeric value keeps its text in `value`.
        """
        self._tensor_parts.append((list(node_ids), np.asarray(roles, np.int8), list(slots), list(dtype),
                                   list(shape), np.asarray(stats, np.float64).reshape(-1, 4),
                                   np.asarray(present, bool).reshape(-1, 4), list(md5), list(file),
                                   list(value)))

    def build(self, info: RunInfo, *, group_apis: bool = True) -> DumpGraph:
        """Resolve parents, order, groups and micro-steps, and return the run as a `DumpGraph`.

        Raises
        ------
        GraphCycleError
            If parent links form a cycle.
        """
        nodes = self._nodes
        self._add_implicit_parents()
        nodes[ROOT_ID] = _Pending(ROOT_ID, NodeKind.ROOT, "", Direction.NONE, None, -1.0, -1, False, ())
        children = _children_by_parent(nodes)
        unsorted = _preorder(children)
        _check_acyclic(nodes, unsorted, info.path)
        _pull_up_start(nodes, children, unsorted)
        if group_apis:
            _group_top_level_apis(nodes, children)
        order = _preorder(children)
        graph = _assemble(info, nodes, order, self._stacks, self._tensor_table(order))
        return replace(graph, edges=self._edge_table(graph, info.path)) if self._edges else graph

    def _edge_table(self, graph: DumpGraph, source: str) -> EdgeTable:
        rows = graph._rows
        unknown = next((n for edge in self._edges for n in edge[:2] if n not in rows), None)
        if unknown is not None:
            raise DumpFormatError(f"{source}: an edge names node {unknown!r}, which the graph does not have")
        src, dst, control = zip(*self._edges)
        n = len(src)
        return EdgeTable(src=np.fromiter((rows[s] for s in src), np.int32, n),
                         dst=np.fromiter((rows[d] for d in dst), np.int32, n), control=np.array(control, bool))

    def _add_implicit_parents(self) -> None:
        from graphcmp.core.readers.naming import parse_node_id  # lazy: readers depend on this module

        nodes = self._nodes
        for pending in list(nodes.values()):
            parent = pending.parent
            if parent is not None and parent not in nodes:
                kind, op, direction, _ = parse_node_id(parent)
                nodes[parent] = _Pending(parent, kind, op, direction, None, pending.seq, -1, False, ())

    def _tensor_table(self, order: list[str]) -> TensorTable:
        if not self._tensor_parts:
            return TensorTable.empty()
        columns = list(zip(*self._tensor_parts))
        node_ids = [n for part in columns[0] for n in part]
        rows = ids_to_rows(order)
        node = np.fromiter((rows[n] for n in node_ids), np.int32, len(node_ids))
        by_row = np.argsort(node, kind="stable")
        pick = by_row.tolist()

        def strings(k: int) -> tuple[str, ...]:
            flat = [v for part in columns[k] for v in part]
            return tuple(itemgetter(*pick)(flat)) if len(pick) > 1 else tuple(flat)

        return TensorTable(
            node=node[by_row], role=np.concatenate(columns[1])[by_row], slot=strings(2), dtype=strings(3),
            shape=strings(4), stats=np.concatenate(columns[5])[by_row], present=np.concatenate(columns[6])[by_row],
            md5=strings(7), file=strings(8), value=strings(9),
        )


def _children_by_parent(nodes: dict[str, _Pending]) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {node_id: [] for node_id in nodes}
    for node_id, pending in nodes.items():
        if node_id == ROOT_ID:
            continue
        parent = pending.parent if pending.parent is not None else ROOT_ID
        children[parent].append(node_id)
    return children


def _check_acyclic(nodes: dict[str, _Pending], reached: list[str], source: str) -> None:
    """Every node is reached from the root unless parent links form a cycle."""
    if len(reached) == len(nodes):
        return
    stuck = next(node_id for node_id in nodes if not _reaches_root(nodes, node_id))
    raise GraphCycleError(f"{source}: parent links form a cycle through {stuck!r}; a node cannot contain itself")


def _reaches_root(nodes: dict[str, _Pending], node_id: str) -> bool:
    seen = set()
    while node_id != ROOT_ID:
        if node_id in seen:
            return False
        seen.add(node_id)
        parent = nodes[node_id].parent
        node_id = parent if parent is not None else ROOT_ID
    return True


def _pull_up_start(nodes: dict[str, _Pending], children: dict[str, list[str]], preorder: list[str]) -> None:
    """A container starts when its first descendant starts; sort children by start."""
    for node_id in reversed(preorder):
        kids = children[node_id]
        if kids:
            first = min(nodes[k].seq for k in kids)
            if first < nodes[node_id].seq:
                nodes[node_id].seq = first
    for kids in children.values():
        kids.sort(key=lambda k: nodes[k].seq)


def _group_top_level_apis(nodes: dict[str, _Pending], children: dict[str, list[str]]) -> None:
    top = children[ROOT_ID]
    regrouped: list[str] = []
    run: list[str] = []
    groups = 0
    for node_id in [*top, None]:
        if node_id is not None and nodes[node_id].kind == _API:
            run.append(node_id)
            continue
        if len(run) >= MIN_GROUP_RUN:
            group_id, groups = f"{GROUP_PREFIX}.{groups}", groups + 1
            first = nodes[run[0]]
            nodes[group_id] = _Pending(group_id, NodeKind.GROUP, GROUP_PREFIX, first.direction,
                                       None, first.seq, -1, False, ())
            children[group_id] = run
            for member in run:
                nodes[member].parent = group_id
            regrouped.append(group_id)
        else:
            regrouped.extend(run)
        run = []
        if node_id is not None:
            regrouped.append(node_id)
    children[ROOT_ID] = regrouped


def _preorder(children: dict[str, list[str]]) -> list[str]:
    order: list[str] = []
    todo = [ROOT_ID]
    while todo:
        node_id = todo.pop()
        order.append(node_id)
        todo.extend(reversed(children[node_id]))
    return order


def _micro_steps(direction: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """A forward call right after backward calls starts a new micro-step (gradient accumulation)."""
    real = np.flatnonzero((kind != NodeKind.ROOT) & (kind != NodeKind.GROUP) & (direction != Direction.NONE))
    d = direction[real]
    starts = np.zeros(len(d), np.int16)
    starts[1:] = (d[1:] == Direction.FORWARD) & (d[:-1] == Direction.BACKWARD)
    steps = np.zeros(len(direction), np.int16)
    steps[real] = np.cumsum(starts, dtype=np.int16)
    _fill_forward(steps, real)
    return steps


def _fill_forward(steps: np.ndarray, known: np.ndarray) -> None:
    """Rows without a direction take the micro-step of the last row before them that has one."""
    if not len(known):
        return
    last = np.zeros(len(steps), np.int64)
    last[known] = known
    np.maximum.accumulate(last, out=last)
    steps[:] = steps[last]


def _assemble(
    info: RunInfo,
    nodes: dict[str, _Pending],
    order: list[str],
    stacks: dict[tuple[str, ...], int],
    tensors: TensorTable,
) -> DumpGraph:
    rows = ids_to_rows(order)
    pending = [nodes[node_id] for node_id in order]
    parent = np.fromiter(
        (rows[p.parent] if p.parent is not None else (0 if p.node_id != ROOT_ID else -1) for p in pending),
        np.int32, len(pending),
    )
    kind = np.fromiter((p.kind for p in pending), np.int8, len(pending))
    direction = np.fromiter((p.direction for p in pending), np.int8, len(pending))
    micro = _micro_steps(direction, kind)
    _inherit_group_micro_steps(micro, kind, parent)
    table = NodeTable(
        ids=tuple(order),
        parent=parent,
        kind=kind,
        op=tuple(p.op for p in pending),
        direction=direction,
        micro_step=micro,
        stack=np.fromiter((p.stack for p in pending), np.int32, len(pending)),
        has_data=np.fromiter((p.has_data for p in pending), bool, len(pending)),
        attrs=tuple(p.attrs for p in pending) if any(p.attrs for p in pending) else (),
    )
    stack_list = sorted(stacks, key=stacks.__getitem__)
    return DumpGraph(info=info, nodes=table, tensors=tensors, stacks=tuple(stack_list), _rows=rows)


def _inherit_group_micro_steps(micro: np.ndarray, kind: np.ndarray, parent: np.ndarray) -> None:
    for row in np.flatnonzero(kind == NodeKind.GROUP).tolist():
        kids = np.flatnonzero(parent == row)
        if len(kids):
            micro[row] = micro[kids[0]]


def depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every row (the root is 0), for rows in pre-order.

    >>> depths(np.array([-1, 0, 1, 0])).tolist()
    [0, 1, 2, 1]
    """
    depth = np.zeros(len(parent), np.int32)
    for row in range(1, len(parent)):  # pre-order: a parent's row is smaller than its children's
        depth[row] = depth[parent[row]] + 1
    return depth


def subtree_rows(parent: np.ndarray) -> np.ndarray:
    """For rows in pre-order, return for each row the end (exclusive) of its subtree.

    Pre-order keeps every subtree contiguous, so row ``r``'s descendants are
    ``r+1 .. end[r]-1``.

    >>> subtree_rows(np.array([-1, 0, 1, 0]))
    array([4, 3, 3, 4])
    """
    n = len(parent)
    end = np.arange(1, n + 1)
    for row in range(n - 1, 0, -1):
        p = parent[row]
        if end[row] > end[p]:
            end[p] = end[row]
    return end


def rebuild_graph(
    info: RunInfo, nodes: NodeTable, tensors: TensorTable, stacks: tuple[tuple[str, ...], ...],
    edges: EdgeTable | None = None,
) -> DumpGraph:
    """A `DumpGraph` from columns already in execution order (as saved in a document)."""
    edges = EdgeTable.empty() if edges is None else edges
    return DumpGraph(info=info, nodes=nodes, tensors=tensors, stacks=stacks, edges=edges, _rows=ids_to_rows(nodes.ids))


EXECUTION_ATTRS = ("exec_order", "id")
"""Node attributes that give a graph format's execution (or topological) order, first found wins."""


def execution_keys(graph: DumpGraph) -> np.ndarray:
    """A sort key per row giving execution order.

    Dumps with call records (msprobe) are already in execution order (rows are pre-order). Graph
    formats group a scope's ops together (a Cell called four times holds four ops), so their
    kernels carry the order in an attribute (``exec_order`` of a kernel dump, GE's topological
    ``id``); rows without one keep their row number.

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> execution_keys(parse_msprobe({"data": {"Functional.relu.0.forward": {}}})).tolist()
    [0.0, 1.0]
    """
    keys = np.arange(len(graph), dtype=np.float64)
    for row, attrs in enumerate(graph.nodes.attrs):
        for name, value in attrs:
            if name in EXECUTION_ATTRS:
                try:
                    keys[row] = float(value)
                except ValueError:
                    continue
                break
    return keys
