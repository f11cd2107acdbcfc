"""Building a run's hierarchy: nodes and tensors in, a `DumpGraph` in execution order out.

Readers of every format feed a `HierarchyBuilder` with nodes (id, parent id, kind, a sequence
key) and tensors, then call `build`. The builder owns what all formats share and knows no format:
cycle checks, execution order (a module starts with its first descendant), grouping of long runs
of top-level API calls, micro-steps (gradient accumulation) and the networkx tree. Every parent a
node names must have been added by then: a format that implies parents (msprobe) adds them itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from itertools import chain, pairwise, repeat
from operator import is_, itemgetter
from typing import Any

import numpy as np

from graphcmp.core.errors import DumpFormatError, GraphCycleError, InternalError
from graphcmp.core.records import (
    REUSE_MAX_NODES,
    Direction,
    DumpGraph,
    EdgeTable,
    NodeKind,
    NodeTable,
    RunInfo,
    TensorTable,
    string_codes,
)
from graphcmp.core.texts import CodedTexts, TextCodes, code_dtype

__all__ = [
    "EXECUTION_ATTRS",
    "GROUP_PREFIX",
    "MAX_DEPTH",
    "MIN_GROUP_RUN",
    "ROOT_ID",
    "HierarchyBuilder",
    "depths",
    "execution_keys",
    "levels",
    "node_levels",
    "rebuild_graph",
    "reusing_node_tables",
    "subtree_rows",
    "too_deep",
]

ROOT_ID = "DefaultModel"
"""Id of the synthetic root every run hangs from (the name msprobe's viewer uses too)."""

GROUP_PREFIX = "Apis_Between_Modules"
MIN_GROUP_RUN = 2
"""Runs of at least this many consecutive top-level API calls are put under one group node."""


_API = int(NodeKind.API)  # plain int: enum comparisons are slow in per-node loops


@dataclass(frozen=True, slots=True)
class _BuiltNodes:
    """What a build made of its nodes alone: their order (each row's builder row) and their table."""

    order: np.ndarray
    table: NodeTable
    stacks: tuple[tuple[str, ...], ...]


@dataclass(slots=True)
class _LastBuild:
    inputs: tuple | None = None
    nodes: _BuiltNodes | None = None


_LAST_BUILD: ContextVar[_LastBuild | None] = ContextVar("_LAST_BUILD", default=None)


@contextmanager
def reusing_node_tables() -> Iterator[None]:
    """Within the block, a build given the same nodes as the build before it (ids, parents, kinds, order keys,
    stacks: all it makes the node table of; of at most `records.REUSE_MAX_NODES` nodes) takes that build's node table (a
    frozen record: the two graphs share it) and only places its own tensors. The ranks of a job and the two runs
    of a pair usually have one model: a batch reads them one after the other. The graphs are the same either way."""
    token = _LAST_BUILD.set(_LastBuild())
    try:
        yield
    finally:
        _LAST_BUILD.reset(token)


class HierarchyBuilder:
    """Collects nodes and tensors of one run, then builds the `DumpGraph`.

    Nodes are kept as columns (one list per attribute, a row per node in the order added) and
    `build` orders them with numpy: no per-node object, no per-node Python in the tree walk.

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
        self._rows: dict[str, int] = {}
        self._ids: list[str] = []
        self._kind: list[int] = []
        self._op: list[str] = []
        self._direction: list[int] = []
        self._parent: list[str | None] = []
        self._seq: list[float] = []
        self._stack: list[int] = []
        self._has_data: list[bool] = []
        self._attrs: list[tuple[tuple[str, str], ...]] = []
        self._stacks: dict[tuple[str, ...], int] = {}
        self._tensor_parts: list[tuple] = []
        self._edges: list[tuple[str, str, bool]] = []
        # the row of each node's parent as `missing_parents` last looked it up (-1: none, -2: not added then), for
        # the first nodes: a parent is looked up once per node, by `missing_parents` or `build` (never removed,
        # nodes keep their parents; only one named but not added then is looked up again)
        self._parent_rows = np.empty(0, np.int64)
        self._stack_rows: list[tuple[np.ndarray, int]] = []  # `set_stacks`' rows and stack, applied by `build`
        self._tensor_order: tuple[Sequence[str], np.ndarray] | None = None  # `expect_tensor_order`

    def __len__(self) -> int:
        """How many nodes were added."""
        return len(self._ids)

    def __contains__(self, node_id: str) -> bool:
        return node_id in self._rows

    def missing_parents(self) -> dict[str, float]:
        """Parents named by added nodes but never added themselves, each with the `seq` of its first child.

        >>> b = HierarchyBuilder()
        >>> b.add_node("Functional.relu.0.forward", NodeKind.API, "relu", Direction.FORWARD, "Module.act", 3)
        >>> b.missing_parents()
        {'Module.act': 3.0}
        """
        parent = self._parent_row_column()
        missing: dict[str, float] = {}
        for row in np.flatnonzero(parent == -2).tolist():
            missing.setdefault(self._parent[row], self._seq[row])  # type: ignore[arg-type]  # -2: a named parent
        return missing

    def node_index(self) -> tuple[dict[str, int], np.ndarray]:
        """A copy of the row of each node id and of each node's parent (-1: none, -2: named but not added), for
        `add_nodes` of another builder given the same nodes (`index`)."""
        return dict(self._rows), self._parent_row_column().copy()

    def _parent_row_column(self) -> np.ndarray:
        """The row of each node's parent (-1: none, -2: named but not added), looked up for the nodes added since
        the last call and for those whose parent was not added then."""
        known, parents, rows = self._parent_rows, self._parent, self._rows
        new = parents[len(known):]
        if not new and not (known == -2).any():
            return known
        # one look per node: at a million nodes, half the time of looking up each distinct parent once
        looked = np.fromiter(map(rows.get, new, repeat(-2)), np.int64, len(new))  # type: ignore[arg-type]
        looked[np.fromiter(map(is_, new, repeat(None)), bool, len(new))] = -1
        column = np.concatenate([known, looked])
        for row in np.flatnonzero(column[:len(known)] == -2).tolist():  # added since?
            column[row] = rows.get(parents[row], -2)  # type: ignore[arg-type]
        self._parent_rows = column
        return column

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
        if node_id in self._rows:
            return
        self._rows[node_id] = len(self._ids)
        self._ids.append(node_id)
        self._kind.append(kind)
        self._op.append(op)
        self._direction.append(direction)
        self._parent.append(parent)
        self._seq.append(float(seq))
        self._stack.append(self.add_stack(stack) if stack else -1)
        self._has_data.append(has_data)
        self._attrs.append(tuple(attrs))

    def add_nodes(
        self,
        node_ids: Sequence[str],
        kinds: Sequence[int],
        ops: Sequence[str],
        directions: Sequence[int],
        parents: Sequence[str | None],
        seqs: Sequence[float],
        has_data: Sequence[bool],
        *,
        index: tuple[dict[str, int], np.ndarray] | None = None,
    ) -> None:
        """`add_node` for many distinct nodes at once, as columns (no stacks or attributes).

        `index`: the `node_index` of a builder given these nodes alone, for a builder that has none yet: their rows
        and their parents' rows are taken from it, not looked up again.
        """
        if index is not None and not self._ids:
            self._rows, self._parent_rows = dict(index[0]), index[1].copy()
        elif self._rows and any(map(self._rows.__contains__, node_ids)):
            for node_id, kind, op, direction, parent, seq, data in zip(
                    node_ids, kinds, ops, directions, parents, seqs, has_data):
                self.add_node(node_id, kind, op, direction, parent, seq, has_data=data)
            return
        start = len(self._ids)
        if index is None or start:
            self._rows.update(zip(node_ids, range(start, start + len(node_ids))))
        self._ids.extend(node_ids)
        self._kind.extend(kinds)
        self._op.extend(ops)
        self._direction.extend(directions)
        self._parent.extend(parents)
        self._seq.extend(map(float, seqs))
        self._stack.extend([-1] * len(node_ids))
        self._has_data.extend(has_data)
        self._attrs.extend([()] * len(node_ids))

    def add_stack(self, frames: Sequence[str]) -> int:
        """Intern a stack (a sequence of frame lines) and return its row."""
        key = tuple(frames)
        return self._stacks.setdefault(key, len(self._stacks))

    def set_stacks(self, node_ids: Iterable[str], stack_row: int) -> int:
        """Attach an interned stack to those of `node_ids` that were added; return how many were not."""
        ids = node_ids if isinstance(node_ids, Sequence) else list(node_ids)
        rows = np.fromiter(map(self._rows.get, ids, repeat(-1)), np.int64, len(ids))
        found = rows[rows >= 0]
        if len(found):
            self._stack_rows.append((found, stack_row))
        return len(rows) - len(found)

    def expect_tensor_order(self, node_ids: Sequence[str], rows: np.ndarray) -> None:
        """Say in which order the tensors added name their nodes: `node_ids`, the nodes added as `rows`.

        A reader that adds its tensors a chunk of its file at a time, in the file's order (msprobe's dump.json), gives
        parts whose nodes come in this order: `build` then takes a part's rows from `rows` instead of looking each id
        up (a million-node run's 840k lookups took 0.35 s), once it has checked that the nodes at those rows are the
        part's. A part that names other nodes, or in another order, is looked up.
        """
        self._tensor_order = (node_ids, np.asarray(rows, np.int64))

    def add_edge(self, src_id: str, dst_id: str, control: bool = False) -> None:
        """Add a data-flow edge from node `src_id` to node `dst_id` (a control edge if `control`).

        Both nodes must be added by the time `build` runs.
        """
        self._edges.append((src_id, dst_id, control))

    def add_tensors(
        self,
        node_ids: Sequence[str] | TextCodes,
        roles: Sequence[int],
        slots: Sequence[str] | TextCodes,
        *,
        dtype: Sequence[str] | TextCodes,
        shape: Sequence[str] | TextCodes,
        stats: np.ndarray,
        present: np.ndarray,
        md5: Sequence[str] | TextCodes,
        file: Sequence[str] | TextCodes,
        value: Sequence[str] | TextCodes,
        requires_grad: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        """Add many tensors at once: parallel columns, stats (n, 4) in `STAT_NAMES` order.

        A scalar argument has shape ``"scalar"``; a non-numeric value keeps its text in `value`;
        `requires_grad` is 1, 0 or -1 (not recorded, the default) per tensor. A text column may come as
        `TextCodes` (what a reader that codes its texts gives): the table's column is then a `CodedTexts`. So may
        `node_ids` (the distinct ids each looked up once, not once per tensor).
        """
        n = len(slots.codes) if isinstance(slots, TextCodes) else len(slots)
        grad = np.full(n, -1, np.int8) if requires_grad is None else np.asarray(requires_grad, np.int8)
        self._tensor_parts.append((_texts(node_ids), np.asarray(roles, np.int8), _texts(slots), _texts(dtype),
                                   _texts(shape), np.asarray(stats, np.float64).reshape(-1, 4),
                                   np.asarray(present, bool).reshape(-1, 4), _texts(md5), _texts(file),
                                   _texts(value), grad))

    def build(self, info: RunInfo, *, group_apis: bool = True) -> DumpGraph:
        """Resolve parents, order, groups and micro-steps, and return the run as a `DumpGraph`.

        A container starts when its first descendant starts; siblings run in order of start
        (ties: the order they were added); runs of top-level API calls go under group nodes.

        Raises
        ------
        GraphCycleError
            If parent links form a cycle.
        InternalError
            If a node names a parent that was never added (the reader must add or drop it).
        """
        self._apply_stacks()
        reuse = _LAST_BUILD.get()
        inputs = self._node_inputs(group_apis) if reuse is not None and not self._edges else None
        if inputs is not None and reuse.inputs == inputs:  # type: ignore[union-attr]
            return self._with_nodes(info, reuse.nodes)  # type: ignore[union-attr, arg-type]
        root = self._add_root()
        if unknown := next(iter(self.missing_parents()), None):
            raise InternalError(f"{info.path}: the reader named parent {unknown!r} without adding it "
                                "(a graphcmp bug: readers add every parent before build)")
        parent = np.where(self._parent_row_column() == -1, root, self._parent_rows)
        parent[root] = -1
        depth, top = _jump_to_roots(parent)
        if (stuck := np.flatnonzero(top != root)).size:
            raise GraphCycleError(f"{info.path}: parent links form a cycle through {self._ids[stuck[0]]!r}; "
                                  "a node cannot contain itself")
        if (deep := too_deep(depth)) is not None:
            raise DumpFormatError(f"{info.path}: node {self._ids[deep]!r} lies {int(depth[deep])} levels deep; "
                                  f"no run's calls nest deeper than {MAX_DEPTH} (the file is damaged or crafted)")
        start = _subtree_min(np.array(self._seq), parent, depth)
        siblings = _sibling_order(parent, start, root)
        if group_apis:
            parent, depth, siblings = self._group_top_level_apis(parent, depth, start, siblings, root)
        order = _preorder_rows(parent, depth, siblings, root)
        graph = self._assemble(info, order, parent)
        if inputs is not None:  # the next build of the same nodes takes this one's
            kept = len(order) <= REUSE_MAX_NODES
            reuse.inputs = inputs if kept else None
            reuse.nodes = _BuiltNodes(order, graph.nodes, graph.stacks) if kept else None
        return replace(graph, edges=self._edge_table(graph, info.path)) if self._edges else graph

    def _node_inputs(self, group_apis: bool) -> tuple:
        """Everything `build` makes the node table of (its stacks applied), copied: `build` adds the root and the
        groups to the lists."""
        columns = (self._ids, self._kind, self._op, self._direction, self._parent, self._seq, self._stack,
                   self._has_data, self._attrs)
        return (group_apis, *map(list, columns), list(self._stacks.items()))

    def _with_nodes(self, info: RunInfo, nodes: _BuiltNodes) -> DumpGraph:
        """The run with the node table of an earlier build of the same nodes, this builder's tensors placed by it."""
        position = np.empty(len(nodes.order), np.int64)
        position[nodes.order] = np.arange(len(nodes.order))
        return DumpGraph(info=info, nodes=nodes.table, tensors=self._tensor_table(position), stacks=nodes.stacks)

    def _apply_stacks(self) -> None:
        """Give the nodes `set_stacks` named their stacks (in the order set: the last one stays)."""
        if not self._stack_rows:
            return
        stack = np.array(self._stack, np.int64)
        for rows, stack_row in self._stack_rows:
            stack[rows] = stack_row
        self._stack, self._stack_rows = stack.tolist(), []

    def _add_root(self) -> int:
        """Add the root (a node a dump names like the root becomes it) and return its row."""
        if ROOT_ID not in self._rows:
            self.add_node(ROOT_ID, NodeKind.ROOT, "", Direction.NONE, None, -1.0, has_data=False)
        root = self._rows[ROOT_ID]
        self._kind[root], self._op[root], self._direction[root] = NodeKind.ROOT, "", Direction.NONE
        self._parent[root], self._seq[root], self._stack[root] = None, -1.0, -1
        if root < len(self._parent_rows):
            self._parent_rows[root] = -1
        self._has_data[root], self._attrs[root] = False, ()
        return root

    def _group_top_level_apis(
        self, parent: np.ndarray, depth: np.ndarray, start: np.ndarray, siblings: np.ndarray, root: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Put runs of at least `MIN_GROUP_RUN` top-level API calls under group nodes (new rows)."""
        top = siblings[parent[siblings] == root]
        runs = _runs(np.asarray(self._kind)[top] == _API, MIN_GROUP_RUN)
        if not runs:
            return parent, depth, siblings
        first_group = len(self._ids)
        k = 0
        for begin, _ in runs:
            while f"{GROUP_PREFIX}.{k}" in self._rows:  # only a hand-made dump names a node so
                k += 1
            first = int(top[begin])
            self.add_node(f"{GROUP_PREFIX}.{k}", NodeKind.GROUP, GROUP_PREFIX, Direction(self._direction[first]),
                          None, float(start[first]), has_data=False)
        groups = np.arange(first_group, len(self._ids))
        parent = np.concatenate([parent, np.full(len(runs), root)])
        depth = np.concatenate([depth, np.ones(len(runs), depth.dtype)])
        members = np.concatenate([top[b:e] for b, e in runs])
        parent[members] = np.repeat(groups, [e - b for b, e in runs])
        depth = depths(parent)
        rank = np.empty(len(parent), np.int64)  # a group takes its first member's place among the root's children
        rank[siblings] = np.arange(len(siblings))
        rank[groups] = rank[top[[b for b, _ in runs]]]
        rows = np.concatenate([siblings, groups])
        return parent, depth, rows[np.lexsort((rank[rows], parent[rows]))]

    def _assemble(self, info: RunInfo, order: np.ndarray, parent: np.ndarray) -> DumpGraph:
        pick = order.tolist()
        position = np.empty(len(order), np.int64)
        position[order] = np.arange(len(order))
        ids = _take(self._ids, pick)
        kind = np.array(self._kind, np.int8)[order]
        direction = np.array(self._direction, np.int8)[order]
        parents = position[parent[order]].astype(np.int32)
        parents[0] = -1
        micro = _micro_steps(direction, kind, parents, ids)
        _inherit_group_micro_steps(micro, kind, parents)
        attrs = _take(self._attrs, pick) if any(self._attrs) else ()
        table = NodeTable(
            ids=ids, parent=parents, kind=kind, op=_take(self._op, pick), direction=direction, micro_step=micro,
            stack=np.array(self._stack, np.int32)[order], has_data=np.array(self._has_data, bool)[order],
            attrs=attrs,
        )
        stack_list = sorted(self._stacks, key=self._stacks.__getitem__)
        # no id -> row table: the graph builds it on first use (most runs are compared by rows, never by id)
        return DumpGraph(info=info, nodes=table, tensors=self._tensor_table(position), stacks=tuple(stack_list))

    def _edge_table(self, graph: DumpGraph, source: str) -> EdgeTable:
        rows = graph._row_index  # built here: edges name nodes by id
        unknown = next((n for edge in self._edges for n in edge[:2] if n not in rows), None)
        if unknown is not None:
            raise DumpFormatError(f"{source}: an edge names node {unknown!r}, which the graph does not have")
        src, dst, control = zip(*self._edges)
        n = len(src)
        return EdgeTable(src=np.fromiter((rows[s] for s in src), np.int32, n),
                         dst=np.fromiter((rows[d] for d in dst), np.int32, n), control=np.array(control, bool))

    def _tensor_table(self, position: np.ndarray) -> TensorTable:
        """The tensors, ordered by node (`position`: each added node's row in the graph); a node's own in the
        order added.

        Each column is made by placing its parts (one per `add_tensors`) straight at their rows, each part freed
        once placed: no column is concatenated first and then reordered (a copy more, and at a million nodes
        the parts, the concatenation and the column, 0.3 GB for the statistics alone, were all held at once)."""
        if not self._tensor_parts:
            return TensorTable.empty()
        columns: list[Any] = list(zip(*self._tensor_parts))
        self._tensor_parts.clear()  # each column's parts are freed once the column is made: the build's peak is lower
        sizes = [len(part) for part in columns[1]]
        node = position[self._tensor_nodes(_taken(columns, 0))].astype(np.int32)
        by_row = np.argsort(node, kind="stable")
        place = np.empty(len(by_row), np.int64)  # where each tensor goes: its row in the table
        place[by_row] = np.arange(len(by_row))
        bounds = np.cumsum([0, *sizes]).tolist()
        places = [place[a:b] for a, b in pairwise(bounds)]
        # by_row as Python ints, made for the first column of plain texts only: a reader that codes its texts gives
        # none, and a million-node run's 2.9M ints were 100 MB made and freed for nothing
        pick: list[int] = []

        def strings(k: int) -> tuple[str, ...]:
            parts = _taken(columns, k)
            if any(isinstance(part, TextCodes) for part in parts):
                return _coded_column(parts, places)
            if (one := _one_value(parts)) is not None:
                return one
            if not pick:
                pick.extend(by_row.tolist())
            return _take(list(chain.from_iterable(parts)), pick)

        def rows(k: int) -> np.ndarray:
            return _placed(_taken(columns, k), places)

        return TensorTable(
            node=node[by_row], role=rows(1), slot=strings(2), dtype=strings(3), shape=strings(4), stats=rows(5),
            present=rows(6), md5=strings(7), file=strings(8), value=strings(9), requires_grad=rows(10),
        )


    def _tensor_nodes(self, parts: list[list[str] | TextCodes]) -> np.ndarray:
        """The row of the node of each tensor of `parts` (`expect_tensor_order`'s rows where a part follows that
        order, else looked up)."""
        order, order_rows = self._tensor_order or ((), None)
        ids, at, found = self._ids, 0, []
        for part in parts:
            rows = None
            if order_rows is not None and isinstance(part, TextCodes) and len(part.values):
                values = part.values
                at = _next_at(order, values[0], at)
                candidate = order_rows[at:at + len(values)]
                if len(candidate) == len(values) and _take(ids, candidate.tolist()) == tuple(values):
                    rows, at = candidate[part.codes].astype(np.int32), at + len(values)
            found.append(_rows_of(part, self._rows) if rows is None else rows)
        return np.concatenate(found)


_LOOK_AHEAD = 64
"""How far past its expected place `_next_at` looks for a part's first node (records without tensors skipped)."""


def _next_at(order: Sequence[str], first: str, at: int) -> int:
    """Where `first` stands in `order` at or shortly after `at` (`at` itself when not found there)."""
    if at < len(order) and order[at] == first:
        return at
    try:
        return order.index(first, at, at + _LOOK_AHEAD)  # type: ignore[attr-defined]
    except ValueError:
        return at


def _taken(columns: list[Any], k: int) -> list[Any]:
    """Column `k`'s parts, no longer held by `columns`."""
    parts, columns[k] = list(columns[k]), None
    return parts


def _placed(parts: list[np.ndarray], places: Sequence[np.ndarray]) -> np.ndarray:
    """One array of `parts` (equal dtypes and trailing shapes) with part k's rows at ``places[k]``; each part is
    dropped from `parts` once placed."""
    first = parts[0]
    column = np.empty((sum(map(len, places)), *first.shape[1:]), first.dtype)
    for k, at in enumerate(places):
        column[at] = parts[k]
        parts[k] = None
    return column


def _texts(column: Sequence[str] | TextCodes) -> list[str] | TextCodes:
    """A text column as a part of the tensor table: coded columns stay coded."""
    return column if isinstance(column, TextCodes) else list(column)


def _coded_column(parts: list[list[str] | TextCodes], places: Sequence[np.ndarray]) -> CodedTexts:
    """The texts of `parts` (coded ones and lists of texts) as one coded column, part k's texts at rows
    ``places[k]``: each part's codes renumbered into one table of distinct texts (a reader gives a part per chunk
    of its file: thousands of them), a list coded against it."""
    table: dict[str, int] = {}
    locals_: list[np.ndarray] = []
    for k, part in enumerate(parts):
        if not isinstance(part, TextCodes):
            parts[k] = part = TextCodes(*string_codes(part))
        locals_.append(np.fromiter((table.setdefault(name, len(table)) for name in part.values), np.int64,
                                   len(part.values)))
    if len(table) == 1:
        return CodedTexts.of(np.zeros(sum(map(len, places)), np.int8), list(table))
    codes = np.empty(sum(map(len, places)), code_dtype(len(table) - 1))
    for k, at in enumerate(places):
        codes[at] = locals_[k][parts[k].codes]  # type: ignore[union-attr]  # all coded above
        parts[k] = None  # type: ignore[call-overload]
    return CodedTexts.of(codes, list(table))


def _rows_of(node_ids: list[str] | TextCodes, rows: dict[str, int]) -> np.ndarray:
    """The row of each node id, looked up once per distinct id (a part repeats an id per tensor; a small table
    is faster to look up in than the run's)."""
    if isinstance(node_ids, TextCodes):
        distinct = node_ids.values
        return np.fromiter(map(rows.__getitem__, distinct), np.int32, len(distinct))[node_ids.codes]
    local = {node_id: rows[node_id] for node_id in dict.fromkeys(node_ids)}
    return np.fromiter(map(local.__getitem__, node_ids), np.int32, len(node_ids))


def _one_value(parts: Sequence[list[str]]) -> tuple[str, ...] | None:
    """The column of `parts` when all of it is one value (md5, file and value of a statistics dump: ""), which
    needs no reordering; None otherwise."""
    first = next((part[0] for part in parts if part), None)
    if first is None or any(part.count(first) != len(part) for part in parts):
        return None
    return (first,) * sum(map(len, parts))


def _take(values: Sequence, pick: list[int]) -> tuple:
    """``tuple(values[i] for i in pick)`` at C speed."""
    if len(pick) == 1:
        return (values[pick[0]],)
    return tuple(itemgetter(*pick)(values)) if pick else ()


def _subtree_min(seq: np.ndarray, parent: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """The smallest `seq` in each row's subtree: when a container starts."""
    start = seq.copy()
    for level in reversed(levels(depth)[1:]):
        np.minimum.at(start, parent[level], start[level])
    return start


def _sibling_order(parent: np.ndarray, start: np.ndarray, root: int) -> np.ndarray:
    """Every row but the root, grouped by parent and in order of start within a parent (ties: row order)."""
    rows = np.arange(len(parent))
    rows = rows[rows != root]
    return rows[np.lexsort((rows, start[rows], parent[rows]))]


def _runs(flags: np.ndarray, min_length: int) -> list[tuple[int, int]]:
    """(begin, end) of every run of True at least `min_length` long."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], flags.astype(np.int8), [0]])))
    return [(int(b), int(e)) for b, e in zip(edges[::2], edges[1::2]) if e - b >= min_length]


def _preorder_rows(parent: np.ndarray, depth: np.ndarray, siblings: np.ndarray, root: int) -> np.ndarray:
    """Rows in pre-order (a node, then its children's subtrees in sibling order), without a Python walk.

    A row's position is its parent's position + 1 + the sizes of the subtrees of its earlier siblings.
    """
    size = np.ones(len(parent), np.int64)
    by_level = levels(depth)
    for level in reversed(by_level[1:]):
        np.add.at(size, parent[level], size[level])
    sizes = size[siblings]
    before = np.cumsum(sizes) - sizes  # subtree sizes of all earlier rows in `siblings`
    group_begin = np.flatnonzero(np.concatenate([[True], parent[siblings][1:] != parent[siblings][:-1]]))
    first_of_group = np.repeat(group_begin, np.diff(np.concatenate([group_begin, [len(siblings)]])))
    offset = np.zeros(len(parent), np.int64)
    offset[siblings] = before - before[first_of_group]
    position = np.zeros(len(parent), np.int64)
    for level in by_level[1:]:
        position[level] = position[parent[level]] + 1 + offset[level]
    order = np.empty(len(parent), np.int64)
    order[position] = np.arange(len(parent))
    return order


def _micro_steps(direction: np.ndarray, kind: np.ndarray, parent: np.ndarray,
                 ids: Sequence[str] | None = None) -> np.ndarray:
    """A forward call right after backward calls starts a new micro-step (gradient accumulation) when it is
    the call the run's first micro-step started with (`ids`, counters aside): the model runs from the top.

    A micro-step is one forward pass and its backward pass, so other "forward" calls start none: a call
    made inside a backward module (an all_reduce of a tensor-parallel layer's backward) is part of that
    backward; a forward call in the middle of the backward pass (a custom autograd Function's backward
    running ops, a checkpointed block recomputed) is too; and forward calls after the last backward call
    (the gradients' all_reduce, other communication after the step's backward) close the last micro-step.
    """
    effective = _inside_backward(direction, kind, parent)
    real = np.flatnonzero((kind != NodeKind.ROOT) & (kind != NodeKind.GROUP) & (effective != Direction.NONE))
    d = effective[real]
    starts = np.zeros(len(d), np.int16)
    starts[1:] = (d[1:] == Direction.FORWARD) & (d[:-1] == Direction.BACKWARD)
    if ids is not None and len(real):
        first = _without_counter(ids[int(real[0])])
        for k in np.flatnonzero(starts).tolist():
            starts[k] = _without_counter(ids[int(real[k])]) == first
    backward = np.flatnonzero(d == Direction.BACKWARD)
    starts[backward[-1] + 1 if len(backward) else 0:] = 0
    steps = np.zeros(len(direction), np.int16)
    steps[real] = np.cumsum(starts, dtype=np.int16)
    _fill_forward(steps, real)
    return steps


def _without_counter(node_id: str) -> str:
    """A call's id without its call counter (``Functional.linear.forward`` of ``Functional.linear.3.forward``,
    ``Module.fc.Linear.forward`` of ``Module.fc.Linear.forward.1``)."""
    head, _, last = node_id.rpartition(".")
    if last.isdigit():
        return head
    body, _, counter = head.rpartition(".")
    return f"{body}.{last}" if counter.isdigit() else node_id


def _inside_backward(direction: np.ndarray, kind: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Directions with every descendant of a backward module counted as backward (rows in pre-order)."""
    effective = direction.copy()
    in_backward = np.zeros(len(direction), bool)
    for level in levels(depths(parent))[1:]:
        up = parent[level]
        in_backward[level] = in_backward[up] | ((kind[up] == NodeKind.MODULE) & (effective[up] == Direction.BACKWARD))
        effective[level[in_backward[level]]] = Direction.BACKWARD
    return effective


def _fill_forward(steps: np.ndarray, known: np.ndarray) -> None:
    """Rows without a direction take the micro-step of the last row before them that has one."""
    if not len(known):
        return
    last = np.zeros(len(steps), np.int64)
    last[known] = known
    np.maximum.accumulate(last, out=last)
    steps[:] = steps[last]


def _inherit_group_micro_steps(micro: np.ndarray, kind: np.ndarray, parent: np.ndarray) -> None:
    for row in np.flatnonzero(kind == NodeKind.GROUP).tolist():
        kids = np.flatnonzero(parent == row)
        if len(kids):
            micro[row] = micro[kids[0]]


MAX_DEPTH = 1024
"""Deepest level a node of a run may lie at (the root is level 0). A level is a call inside a call (a module in a
module, a Cell in a Cell, a scope in a scope), a Python call each, and Python stops at 1000 nested calls by default;
the rest leaves room for the levels graphcmp adds (the root, groups). Bounded, because what shows a node with its
path (msprobe's `.vis` links, Model Explorer's namespaces, the viewer's breadcrumbs) grows with depth squared: a
chain of 20,000 modules would take gigabytes to write."""


def too_deep(depth: np.ndarray) -> int | None:
    """The first row lying deeper than `MAX_DEPTH` (None when none does).

    >>> too_deep(np.array([0, 1, 2])), too_deep(np.array([0, MAX_DEPTH + 1]))
    (None, 1)
    """
    if not depth.size or int(depth.max()) <= MAX_DEPTH:
        return None
    return int(np.argmax(depth > MAX_DEPTH))


def depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every row (a root, whose parent is -1, is 0), in log(depth) numpy passes.

    Raises
    ------
    ValueError
        If parent links form a cycle.

    >>> depths(np.array([-1, 0, 1, 0])).tolist()
    [0, 1, 2, 1]
    """
    depth, top = _jump_to_roots(parent)
    if np.any(parent[top] >= 0):
        raise ValueError("parent links form a cycle")
    return depth


def _jump_to_roots(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(depth, top ancestor) of every row by pointer jumping; a row on or above a cycle never reaches a root."""
    rows = np.arange(len(parent))
    up = np.where(parent >= 0, parent, rows)
    depth = (parent >= 0).astype(np.int32)
    for _ in range(max(len(parent), 2).bit_length()):
        jumped = up[up]
        if np.array_equal(jumped, up):
            break
        depth += depth[up]
        up = jumped
    return depth, up


def levels(depth: np.ndarray) -> list[np.ndarray]:
    """Rows of each depth, ascending (``levels(d)[k]`` holds the rows of depth k)."""
    by_depth = np.argsort(depth, kind="stable")
    ends = np.searchsorted(depth[by_depth], np.arange(int(depth.max(initial=0)) + 2)).tolist()
    return [by_depth[a:b] for a, b in pairwise(ends)]


def node_levels(graph: DumpGraph) -> tuple[np.ndarray, ...]:
    """``levels(depths(graph.nodes.parent))``, found once per run (`DumpGraph.memo`): the judge and the noise
    model walk the npu run's levels five times (roll-ups up the tree, owners down it)."""
    def compute() -> tuple[np.ndarray, ...]:
        rows = tuple(levels(depths(graph.nodes.parent)))
        for level in rows:
            level.flags.writeable = False
        return rows

    return graph.memo("levels", compute, nodes_only=True)


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
    edges: EdgeTable | None = None, *, rows: dict[str, int] | None = None,
) -> DumpGraph:
    """A `DumpGraph` from columns already in execution order (as saved in a document); `rows`: the row of each node
    id, when the caller made it (else made on first use)."""
    edges = EdgeTable.empty() if edges is None else edges
    return DumpGraph(info=info, nodes=nodes, tensors=tensors, stacks=stacks, edges=edges, _rows=rows or {})


EXECUTION_ATTRS = ("exec_order", "id")
"""Node attributes that give a graph format's execution (or topological) order, first found wins."""


def execution_keys(graph: DumpGraph) -> np.ndarray:
    """A sort key per row giving execution order.

    Dumps with call records (msprobe) are already in execution order (rows are pre-order). Graph
    formats group a scope's ops together (a Cell called four times holds four ops), so their
    kernels carry the order in an attribute (``exec_order`` of a kernel dump, GE's topological
    ``id``); rows without one keep their row number.

    Computed once per run and kept with it (read-only): matching, the noise model, the data-flow edges and the
    divergence all ask, and graph formats are read attribute by attribute.

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> execution_keys(parse_msprobe({"data": {"Functional.relu.0.forward": {}}})).tolist()
    [0.0, 1.0]
    """
    return graph.memo("execution_keys", lambda: _execution_keys(graph))


def _execution_keys(graph: DumpGraph) -> np.ndarray:
    keys = np.arange(len(graph), dtype=np.float64)
    for row, attrs in enumerate(graph.nodes.attrs):
        for name, value in attrs:
            if name in EXECUTION_ATTRS:
                try:
                    keys[row] = float(value)
                except ValueError:
                    continue
                break
    keys.flags.writeable = False
    return keys
