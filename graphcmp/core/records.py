"""Frozen records of one run: node columns, tensor columns, run info and the graph that ties them.

A run is held as numpy columns (one row per node, one row per tensor) plus a networkx tree
for the hierarchy. Hot loops work on the columns; the tree serves navigation and users.
Small per-node views (`NodeView`, `TensorView`) are built on demand, never in hot loops.
Records that hold columns derive from `FrozenColumns`: their arrays are read-only and ``==``
compares values.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from itertools import repeat
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from graphcmp.core.texts import CodedTexts

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "LIBRARY_MARKERS",
    "PROCESS_GROUP_CALLS",
    "REUSE_MAX_NODES",
    "STAT_NAMES",
    "Direction",
    "DumpGraph",
    "EdgeTable",
    "FrozenColumns",
    "NodeKind",
    "NodeTable",
    "NodeView",
    "Role",
    "RunInfo",
    "TensorTable",
    "TensorView",
    "call_site",
    "is_input",
    "is_output",
    "shared_codes",
    "string_codes",
    "string_column",
]

STAT_NAMES: tuple[str, ...] = ("max", "min", "mean", "norm")
"""Order of the statistic columns in `TensorTable.stats`."""


class FrozenColumns:
    """Base of the frozen records that hold numpy columns: truly read-only, compared by value.

    When a record is built (or unpickled: a run read in another process) its arrays, and the
    arrays inside its mappings, become read-only and its mappings read-only views; ``==`` compares
    field values (arrays element-wise, NaN equal to NaN). Subclasses are declared
    ``@dataclass(frozen=True, slots=True, eq=False)`` so they keep this ``==``.

    Examples
    --------
    >>> a, b = EdgeTable.empty(), EdgeTable.empty()
    >>> a == b, a.src.flags.writeable
    (True, False)
    """

    __slots__ = ()

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            frozen = _frozen(value)
            if frozen is not value:
                object.__setattr__(self, f.name, frozen)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name))
                   for f in fields(self) if f.compare)  # type: ignore[arg-type]

    __hash__ = None  # type: ignore[assignment]  # mutable in nothing, but arrays have no hash

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as the constructor call, so an unpickled copy is frozen too."""
        return type(self), tuple(_thawed(getattr(self, f.name)) for f in fields(self) if f.init)  # type: ignore


def _frozen(value: Any) -> Any:
    """`value` with its arrays read-only and its mappings as read-only views (the same object if nothing changes)."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
        return value
    if isinstance(value, Mapping) and not isinstance(value, FrozenColumns):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return value


def _thawed(value: Any) -> Any:
    """Mapping views as plain dicts again (pickle cannot hold a view); arrays stay as they are."""
    if isinstance(value, MappingProxyType):
        return {k: _thawed(v) for k, v in value.items()}
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape:
            return False
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc" and b.dtype.kind in "fc"))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


class NodeKind(enum.IntEnum):
    """What a node stands for in the hierarchy."""

    ROOT = 0
    MODULE = 1  # a torch Module / MindSpore Cell call (forward or backward)
    API = 2  # an API or kernel call: Functional.*, Tensor.*, Primitive.*, a GE op ...
    PARAM_GRAD = 3  # the parameter gradients of a module
    GROUP = 4  # a synthetic group of top-level API calls between modules


class Direction(enum.IntEnum):
    """Pass a node belongs to."""

    NONE = -1
    FORWARD = 0
    BACKWARD = 1


class Role(enum.IntEnum):
    """Where a tensor sits on its node."""

    INPUT = 0
    OUTPUT = 1
    PARAM = 2
    PARAM_GRAD = 3


def is_output(role: np.ndarray) -> np.ndarray:
    """True per `Role` code that a call produces: an output or a parameter gradient (``np.isin(role, (OUTPUT,
    PARAM_GRAD))`` without its sort).

    >>> is_output(np.array([0, 1, 2, 3], np.int8)).tolist()
    [False, True, False, True]
    """
    out = role == Role.OUTPUT
    out |= role == Role.PARAM_GRAD
    return out


def is_input(role: np.ndarray) -> np.ndarray:
    """True per `Role` code that a call computes from: an input or a parameter.

    >>> is_input(np.array([0, 1, 2, 3], np.int8)).tolist()
    [True, False, True, False]
    """
    out = role == Role.INPUT
    out |= role == Role.PARAM
    return out


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Where a run came from and what it holds.

    `missing` lists what could not be loaded (a partial dump), one human-readable line each.
    """

    path: str
    format: str = "msprobe"
    framework: str = ""
    task: str = "statistics"
    level: str = ""
    rank: int | None = None
    step: int | None = None
    missing: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class NodeTable(FrozenColumns):
    """One row per node, in execution order (row 0 is the root).

    Attributes
    ----------
    ids : tuple of str
        Node ids as the dump names them (unique).
    parent : ndarray of int32
        Row of the parent; -1 for the root.
    kind : ndarray of int8
        `NodeKind` codes.
    op : tuple of str
        Operator or class name without call counters (``linear``, ``Linear``, ``MatMul``).
    direction : ndarray of int8
        `Direction` codes.
    micro_step : ndarray of int16
        Micro-step (gradient-accumulation pass) the node belongs to.
    stack : ndarray of int32
        Row in `DumpGraph.stacks`, -1 when the dump has no stack for the node.
    has_data : ndarray of bool
        True when the dump recorded data for the node (construct-only nodes have none).
    """

    ids: tuple[str, ...]
    parent: np.ndarray
    kind: np.ndarray
    op: tuple[str, ...]
    direction: np.ndarray
    micro_step: np.ndarray
    stack: np.ndarray
    has_data: np.ndarray
    attrs: tuple[tuple[tuple[str, str], ...], ...] = ()
    """Optional extra string attributes per row (e.g. a fused op's original names); empty when none."""

    def __len__(self) -> int:
        return len(self.ids)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle as the constructor call (`FrozenColumns`), the ids, all distinct, as one text (`_JoinedTexts`)."""
        table, values = FrozenColumns.__reduce__(self)
        return table, (_JoinedTexts(values[0]), *values[1:])  # ids: the first field


class _JoinedTexts:
    """A tuple of distinct texts pickled as one text (joined by NUL bytes): cheaper to write and read than each text
    on its own with a pickle memo entry each (200k ids: 9 against 38 ms to write). Read back, it
    is the tuple again; a tuple holding something else, or a text holding a NUL, is pickled as it is."""

    def __init__(self, texts: tuple[str, ...]) -> None:
        self.texts = texts

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        try:
            joined = "\0".join(self.texts) if type(self.texts) is tuple else None
        except TypeError:  # not all texts
            joined = None
        if joined is None or joined.count("\0") != len(self.texts) - 1:
            return tuple, (list(self.texts),)
        return _split_texts, (joined, len(self.texts))


def _split_texts(joined: str, count: int) -> tuple[str, ...]:
    return tuple(joined.split("\0")) if count else ()


@dataclass(frozen=True, slots=True, eq=False)
class TensorTable(FrozenColumns):
    """One row per tensor (inputs, outputs, parameters, parameter gradients) of a run.

    `stats` holds max/min/mean/norm as float64 (`STAT_NAMES` order); `present` says which of
    them the dump recorded, since NaN in `stats` is a real value (an overflow), not "absent".
    A scalar argument (``{"type": "float", "value": 2.0}``) has ``shape == "scalar"`` and its value
    in every present stat column; other non-tensor values keep their text in `value`.
    """

    node: np.ndarray  # int32 row in NodeTable
    role: np.ndarray  # int8 Role
    slot: tuple[str, ...]  # "0", "1.0", "kwargs.weight", "weight"
    dtype: tuple[str, ...]
    shape: tuple[str, ...]  # "[4, 16, 64]", "scalar" or ""
    stats: np.ndarray  # float64 (n, 4)
    present: np.ndarray  # bool (n, 4)
    md5: tuple[str, ...]  # "" when absent
    file: tuple[str, ...]  # tensor file name, "" when absent
    value: tuple[str, ...]  # text of a non-numeric value, "" otherwise
    requires_grad: np.ndarray | None = None
    """int8 per row: 1 the dump says requires_grad true, 0 false, -1 not recorded (None when built: all -1)."""

    def __post_init__(self) -> None:
        if self.requires_grad is None:
            object.__setattr__(self, "requires_grad", np.full(len(self.slot), -1, np.int8))
        FrozenColumns.__post_init__(self)

    def __len__(self) -> int:
        return len(self.slot)

    def has_shape(self) -> np.ndarray:
        """True for rows that are tensors with a shape (not scalars, not other values)."""
        codes, shapes = string_codes(self.shape)
        return np.array([bool(s) and s != "scalar" for s in shapes], bool)[codes] if shapes else np.zeros(0, bool)

    @classmethod
    def empty(cls) -> TensorTable:
        """Return a table with no rows."""
        return cls(
            node=np.zeros(0, np.int32), role=np.zeros(0, np.int8), slot=(), dtype=(), shape=(),
            stats=np.zeros((0, 4)), present=np.zeros((0, 4), bool), md5=(), file=(), value=(),
        )


@dataclass(frozen=True, slots=True, eq=False)
class EdgeTable(FrozenColumns):
    """Data-flow edges between nodes of one run, one row per edge (graph formats only; empty otherwise).

    Attributes
    ----------
    src, dst : ndarray of int32
        Rows (in `NodeTable`) of the producing and the consuming node.
    control : ndarray of bool
        True for a control edge (ordering only, no data), e.g. GE's ``"src:-1"`` inputs.
    """

    src: np.ndarray
    dst: np.ndarray
    control: np.ndarray

    def __len__(self) -> int:
        return len(self.src)

    @classmethod
    def empty(cls) -> EdgeTable:
        """Return a table with no rows."""
        return cls(src=np.zeros(0, np.int32), dst=np.zeros(0, np.int32), control=np.zeros(0, bool))


@dataclass(frozen=True, slots=True)
class TensorView:
    """One tensor of one node, for display and tests."""

    role: Role
    slot: str
    dtype: str
    shape: str
    stats: dict[str, float]
    md5: str = ""
    file: str = ""
    value: str = ""


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node with its tensors, for display and tests."""

    id: str
    kind: NodeKind
    op: str
    parent: str | None
    direction: Direction
    micro_step: int
    children: tuple[str, ...]
    tensors: tuple[TensorView, ...]
    stack: tuple[str, ...]


LIBRARY_MARKERS = ("site-packages", "dist-packages", "/lib/python")
"""Parts of a stack frame's path that say the frame is an installed library's, not the user's code."""

PROCESS_GROUP_CALLS = frozenset({"init_process_group", "new_group", "destroy_process_group", "get_rank",
                                 "get_world_size", "is_initialized", "barrier_fake"})
"""Ops of msprobe's ``Distributed.*`` calls that set up or ask about process groups: no data moves between ranks."""

_FRAME = re.compile(r"^File (?P<path>.+?), line (?P<line>\d+)(?:, in (?P<func>[^,\n]+))?,?\s*(?P<code>.*)$", re.S)


def call_site(frames: Sequence[str]) -> str:
    r"""The user's line that made a call, on one line: the first frame outside installed libraries (else the
    first frame), as ``path:line in function: code`` ("" without frames).

    >>> call_site(("File /v/site-packages/torch/nn/modules/module.py, line 1811, in inner, \n x = hook()",
    ...            "File /home/me/model.py, line 26, in forward, \n x = self.embedding(tokens) + self.pos"))
    '/home/me/model.py:26 in forward: x = self.embedding(tokens) + self.pos'
    """
    if not frames:
        return ""
    frame = next((f for f in frames if not any(m in f for m in LIBRARY_MARKERS)), frames[0])
    found = _FRAME.match(frame.strip())
    if not found:
        return " ".join(frame.split())
    code = " ".join(found["code"].split())
    where = f"{found['path']}:{found['line']}" + (f" in {found['func'].strip()}" if found["func"] else "")
    return f"{where}: {code}" if code else where


REUSE_MAX_NODES = 50_000
"""Largest run whose structure, node table and node-only memos are kept for the next run of the same model (a batch
reads its runs one after the other): a read's structure is about 27 MB at this size (2.5 MB measured for a
construct.json of 4,534 nodes, its text included)."""
_SHARED_TABLES = 2
_SHARED: list[tuple[NodeTable, dict[str, Any]]] = []  # the node tables last asked for, newest last, and their memos


def _shared_memos(nodes: NodeTable) -> dict[str, Any] | None:
    """The memos derived from `nodes` alone, shared by every run built with this very table (it is frozen): kept for
    the last `_SHARED_TABLES` tables of at most `REUSE_MAX_NODES` nodes, None for a larger one."""
    if len(nodes) > REUSE_MAX_NODES:
        return None
    for table, memos in _SHARED:
        if table is nodes:
            return memos
    _SHARED.append((nodes, {}))
    del _SHARED[:-_SHARED_TABLES]
    return _SHARED[-1][1]


@dataclass(frozen=True, slots=True)
class DumpGraph:
    """One run as a hierarchy: node columns, tensor columns and the networkx tree over node ids.

    The tree (built on first use: matching and metrics work on the columns) has edges
    parent -> child, children in execution order; each tree node has the attributes ``row``
    (index into the columns), ``kind`` and ``op``.
    """

    info: RunInfo
    nodes: NodeTable
    tensors: TensorTable
    stacks: tuple[tuple[str, ...], ...]
    edges: EdgeTable = field(default_factory=EdgeTable.empty)
    """Data-flow edges (GE and MindSpore graphs); empty for formats without them (msprobe)."""
    shards: object | None = None
    """Per-rank records of a graph merged from a parallel job (`graphcmp.core.shards.ShardTable`); None otherwise."""
    _rows: dict[str, int] = field(repr=False, compare=False, default_factory=dict)
    """Row of each node id; built on first use when not given (a million-node run's takes half a second)."""
    _cache: dict[str, object] = field(repr=False, compare=False, default_factory=dict)

    @property
    def _row_index(self) -> dict[str, int]:
        if not self._rows and self.nodes is not None and self.nodes.ids:
            self._rows.update(ids_to_rows(self.nodes.ids))  # one C call: no thread sees half of it
        return self._rows

    def memo(self, key: str, compute: Callable[[], Any], *, nodes_only: bool = False) -> Any:
        """What `compute` derives from this run, computed once and kept with it (its tree, recovered data-flow
        edges, tensor fingerprints); the first value given for `key` stays.

        `nodes_only`: `compute` reads the node table alone, so runs built with one node table (a batch's runs of one
        model, `hierarchy.reusing_node_tables`) take the value the first of them computed (`_shared_memos`).
        """
        if key not in self._cache:
            shared = _shared_memos(self.nodes) if nodes_only else None
            if shared is None:
                self._cache[key] = compute()
            else:
                self._cache[key] = shared[key] if key in shared else shared.setdefault(key, compute())
        return self._cache[key]

    @property
    def tree(self) -> nx.DiGraph:
        """The hierarchy as a networkx tree over node ids."""
        return self.memo("tree", lambda: _tree(self.nodes))

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def root(self) -> str:
        return self.nodes.ids[0]

    def row(self, node_id: str) -> int:
        """Row of `node_id` in the columns; KeyError if unknown."""
        return self._row_index[node_id]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._row_index

    def rows_of(self, node_ids: Sequence[str]) -> np.ndarray:
        """Row of each id, -1 for an id this graph does not have."""
        return np.fromiter(map(self._row_index.get, node_ids, repeat(-1)), np.int64, len(node_ids))

    def children(self, node_id: str) -> list[str]:
        """Children of `node_id` in execution order."""
        ids = self.nodes.ids
        return [ids[r] for r in self.child_rows(self.row(node_id)).tolist()]

    def child_rows(self, row: int) -> np.ndarray:
        """Rows of the children of `row`, in row order (an index built once, no tree needed)."""
        if "children" not in self._cache:
            order = np.argsort(self.nodes.parent, kind="stable")
            starts = np.searchsorted(self.nodes.parent[order], np.arange(-1, len(self.nodes) + 1))
            self._cache["children"] = (order, starts)
        order, starts = self._cache["children"]  # type: ignore[misc]
        return order[starts[row + 1]: starts[row + 2]]

    def tensor_rows(self, node_id: str) -> np.ndarray:
        """Rows of `tensors` that belong to `node_id`."""
        return self.tensor_rows_at(self.row(node_id))

    def tensor_rows_at(self, row: int) -> np.ndarray:
        """Rows of `tensors` that belong to the node at `row` (no id index needed: a million-node run's takes half a
        second to build)."""
        node = self.tensors.node
        if "tensors_sorted" not in self._cache:
            self._cache["tensors_sorted"] = bool(np.all(node[1:] >= node[:-1]))
        if self._cache["tensors_sorted"]:
            return np.arange(np.searchsorted(node, row), np.searchsorted(node, row, side="right"))
        return np.flatnonzero(node == row)

    def view(self, node_id: str) -> NodeView:
        """Everything known about one node, as a record."""
        row = self.row(node_id)
        nodes, tensors = self.nodes, self.tensors
        parent = int(nodes.parent[row])
        stack_row = int(nodes.stack[row])
        return NodeView(
            id=node_id,
            kind=NodeKind(int(nodes.kind[row])),
            op=nodes.op[row],
            parent=nodes.ids[parent] if parent >= 0 else None,
            direction=Direction(int(nodes.direction[row])),
            micro_step=int(nodes.micro_step[row]),
            children=tuple(self.children(node_id)),
            tensors=tuple(_tensor_view(tensors, int(t)) for t in self.tensor_rows(node_id)),
            stack=self.stacks[stack_row] if stack_row >= 0 else (),
        )

    def call_site(self, row: int) -> str:
        """`call_site` of the node at `row` ("" when the dump has no stack for it)."""
        stack_row = int(self.nodes.stack[row])
        return call_site(self.stacks[stack_row]) if stack_row >= 0 else ""

    def iter_ids(self) -> Iterator[str]:
        """Node ids in execution order."""
        return iter(self.nodes.ids)


def _tensor_view(tensors: TensorTable, t: int) -> TensorView:
    stats = {
        name: float(tensors.stats[t, k]) for k, name in enumerate(STAT_NAMES) if tensors.present[t, k]
    }
    return TensorView(
        role=Role(int(tensors.role[t])), slot=tensors.slot[t], dtype=tensors.dtype[t],
        shape=tensors.shape[t], stats=stats, md5=tensors.md5[t], file=tensors.file[t], value=tensors.value[t],
    )


def _tree(table: NodeTable) -> nx.DiGraph:
    import networkx as nx  # lazy: only navigation needs the tree, and networkx takes 0.15 s to import

    tree = nx.DiGraph()
    kind_names = [k.name.lower() for k in NodeKind]
    kinds = table.kind.tolist()
    tree.add_nodes_from(
        (node_id, {"row": row, "kind": kind_names[kinds[row]], "op": table.op[row]})
        for row, node_id in enumerate(table.ids)
    )
    ids = table.ids
    tree.add_edges_from((ids[p], ids[c]) for c, p in enumerate(table.parent.tolist()) if p >= 0)
    return tree


def string_codes(values: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Integer code per value and the distinct values, in first-seen order (faster than sorting strings).

    A table's string columns are tuples: their codes are computed once and shared (read-only),
    since judge, overflow and divergence all ask for the same dtype and shape columns; a `CodedTexts`
    column has them already.

    >>> codes, names = string_codes(("float32", "int64", "float32"))
    >>> codes.tolist(), names
    ([0, 1, 0], ['float32', 'int64'])
    """
    if type(values) is CodedTexts:
        return values.wide_codes(), list(values.names)
    if isinstance(values, tuple):
        codes, names = _tuple_codes(values)
        return codes, list(names)
    return _codes(values)


def shared_codes(a: Sequence[str], b: Sequence[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Codes of two string columns in one table of distinct strings (`string_codes` of each, joined): equal codes
    are equal strings.

    >>> a, b, names = shared_codes(("x", "y"), ("y", "z"))
    >>> a.tolist(), b.tolist(), names
    ([0, 1], [1, 2], ['x', 'y', 'z'])
    """
    codes_a, names = string_codes(a)
    codes_b, names_b = string_codes(b)
    if names_b == names:  # the same distinct strings in the same order (two runs of one model)
        return codes_a, codes_b, names
    index = {name: k for k, name in enumerate(names)}
    for name in names_b:
        if name not in index:
            index[name] = len(names)
            names.append(name)
    return codes_a, np.array([index[name] for name in names_b], np.int64)[codes_b], names


class _ByIdentity:
    """`fn` of a tuple column, kept by the tuple's identity in front of `fn`'s own cache (keyed by value).

    A value-keyed cache hashes every element of the tuple on each call, and compares them all when an
    equal tuple of the other run hits; the comparison stages ask for the same few columns some twenty
    times, so each tuple is looked up by identity first (the entry holds the tuple: its id stays its own).
    """

    def __init__(self, fn: Callable[[tuple[str, ...]], Any], size: int = 16) -> None:
        self.fn, self.size = fn, size
        self.kept: dict[int, tuple[tuple[str, ...], Any]] = {}

    def __call__(self, values: tuple[str, ...]) -> Any:
        hit = self.kept.get(id(values))
        if hit is not None and hit[0] is values:
            return hit[1]
        out = self.fn(values)
        if len(self.kept) >= self.size:
            self.kept.pop(next(iter(self.kept)), None)
        self.kept[id(values)] = (values, out)
        return out

    def cache_clear(self) -> None:
        self.kept.clear()
        self.fn.cache_clear()  # type: ignore[attr-defined]


@lru_cache(maxsize=16)
def _value_codes(values: tuple[str, ...]) -> tuple[np.ndarray, tuple[str, ...]]:
    codes, names = _codes(values)
    codes.flags.writeable = False
    return codes, tuple(names)


_tuple_codes = _ByIdentity(_value_codes)


def _codes(values: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    names = list(dict.fromkeys(values))
    table = {name: i for i, name in enumerate(names)}
    return np.fromiter(map(table.__getitem__, values), np.int64, len(values)), names


def string_column(values: Sequence[str], rows: np.ndarray) -> np.ndarray:
    """The strings at `rows` as an object array, so element-wise comparisons run in C.

    >>> (string_column(("a", "b", "a"), np.array([0, 2])) == "a").tolist()
    [True, True]
    """
    if not len(values):
        return np.zeros(len(rows), object)
    if type(values) is CodedTexts:
        return np.array(values.names, object)[values.codes[rows]]
    return (_object_column(values) if isinstance(values, tuple) else np.array(values, dtype=object))[rows]


@lru_cache(maxsize=16)
def _value_object_column(values: tuple[str, ...]) -> np.ndarray:
    column = np.array(values, dtype=object)
    column.flags.writeable = False
    return column


_object_column = _ByIdentity(_value_object_column)


def ids_to_rows(ids: Sequence[str]) -> dict[str, int]:
    """Map each id to its position."""
    return dict(zip(ids, range(len(ids))))
