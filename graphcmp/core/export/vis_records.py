"""msprobe's `.vis` node records as JSON text, made from a run's columns a block of nodes at a time.

Every text is made for whole columns: a column's strings escaped by one orjson call
(`json_escaped`), its floats by another (`float_reprs`), the pieces that take few distinct values
(a dtype and shape, a verdict, a stack) once per distinct value, and a tensor's or node's text
joined from its pieces in C (``map(b"".join, zip(...))``). The texts are what ``orjson.dumps``
writes for the same records as dicts, byte for byte; `VisBlock` holds them for a few thousand
nodes, so a large run never exists as text in memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise, repeat

import numpy as np
import orjson

from graphcmp.core.export.columns import float_reprs, json_escaped
from graphcmp.core.hierarchy import depths, levels
from graphcmp.core.judge import STATUS_NAMES, pair_messages, pair_notes
from graphcmp.core.readers.vis import ATTR_DISTRIBUTED, ATTR_OVERFLOW, VisNodeType
from graphcmp.core.records import DumpGraph, FrozenColumns, NodeKind, Role, string_codes, string_column
from graphcmp.core.report import CompareReport
from graphcmp.core.rules import ERROR, PASS, WARNING

__all__ = [
    "BLOCK_NODES",
    "ORIGIN_INDEX",
    "PRECISION_INDEX",
    "VIS_NODE_TYPE",
    "VisBlock",
    "VisSide",
    "VisTexts",
    "block_starts",
    "precision_indices",
    "vis_sides",
    "vis_task",
]

PRECISION_INDEX = {PASS: 0.0, WARNING: 0.5, ERROR: 0.75}
"""graphcmp status -> ``precision_index`` written for an npu node (skip and unmatched get none); an origin of
divergence gets `ORIGIN_INDEX` instead, so a viewer tells it from the nodes it propagates to."""

ORIGIN_INDEX = 1.0
"""``precision_index`` of an origin (docs/noise.md): its own colour in `VIS_COLORS`."""


def precision_indices(report: CompareReport | None) -> list[float | None] | None:
    """``precision_index`` of every npu node of `report` (None where it has none), None without a report."""
    if report is None:
        return None
    index = [PRECISION_INDEX.get(s) for s in report.verdicts.status.tolist()]
    if report.noise is not None:
        for row in report.noise.origins().tolist():
            index[row] = ORIGIN_INDEX
    return index

BLOCK_NODES = 1024
"""Nodes whose texts are made at a time: whole columns at C speed, a few MB held (larger blocks are no faster)."""


@dataclass(frozen=True, slots=True, eq=False)
class VisSide(FrozenColumns):
    """One run of a document to write, with what its nodes link to."""

    name: str  # "NPU" or "Bench"
    graph: DumpGraph
    partner: DumpGraph | None  # the other run (compare files)
    partner_rows: np.ndarray | None  # partner row per row, -1 when unmatched
    report: CompareReport | None  # set on the npu side of a comparison


def vis_sides(document: CompareReport | DumpGraph) -> tuple[VisSide, ...]:
    """The runs of a document in file order: (NPU, Bench) for a comparison, (NPU,) for a run."""
    if isinstance(document, CompareReport):
        m = document.matches
        return (VisSide("NPU", document.npu, document.bench, m.npu_to_bench, document),
                VisSide("Bench", document.bench, document.npu, m.bench_to_npu, None))
    return (VisSide("NPU", document, None, None, None),)


@dataclass(frozen=True, slots=True)
class VisBlock:
    """The JSON texts of the nodes of rows [start, stop) of one side, one entry per row."""

    start: int
    stop: int
    outputs: list[bytes]  # output_data objects
    inputs: list[bytes]  # input_data objects
    subnodes: list[bytes]  # lists of the children's ids
    links: list[bytes]  # matched_node_link lists


_TASKS = {"statistics": "summary", "md5": "md5", "tensor": "all"}
VIS_NODE_TYPE = {int(kind): int(VisNodeType.API if kind == NodeKind.API else VisNodeType.GROUP
                                if kind == NodeKind.GROUP else VisNodeType.MODULE) for kind in NodeKind}
"""msprobe's ``node_type`` of each `NodeKind`."""
_ROLE_KEY = {int(Role.INPUT): b"input.", int(Role.OUTPUT): b"output.", int(Role.PARAM): b"parameters.",
             int(Role.PARAM_GRAD): b""}
_OUTPUT = int(Role.OUTPUT)
_TENSOR_KEYS = (("cosine", "Cosine"), ("euc_rel", "EucDist"), ("max_abs", "MaxAbsErr"),
                ("one_thousandth", "One Thousandth Err Ratio"), ("five_thousandths", "Five Thousandths Err Ratio"))
_TENSOR, _SCALAR, _PLAIN = 0, 1, 2  # a tensor's leaf layout


def vis_task(graph: DumpGraph) -> str:
    """msprobe's task name for a run's task mode.

    >>> from graphcmp.core.records import RunInfo
    >>> vis_task(DumpGraph(RunInfo(path="x", task="md5"), None, None, ()))
    'md5'
    """
    return _TASKS.get(graph.info.task, "summary")


class VisTexts:
    """The texts of one side's node records: per-node columns for the whole side (small: ids, types, parents,
    stacks, data) and the large ones (tensors, children, links) a `VisBlock` at a time from `blocks`.

    Parameters
    ----------
    side : VisSide
        The run to write and what it links to.
    """

    def __init__(self, side: VisSide) -> None:
        g = side.graph
        nodes = g.nodes
        self.side = side
        n = len(g)
        self.escaped_ids = json_escaped(nodes.ids)
        """Each node id escaped for a JSON string (no quotes)."""
        self._ids = _objects(self.escaped_ids)
        kinds = np.array([str(VIS_NODE_TYPE[k]).encode() for k in range(max(VIS_NODE_TYPE) + 1)], object)
        self.node_types = kinds[nodes.kind].tolist()
        """``node_type`` of each node as text."""
        self.upnodes = _objects([*self.escaped_ids, b"None"])[nodes.parent].tolist()  # row -1: "None"
        """The parent's escaped id, or ``None``, of each node."""
        self.micro_steps = _int_texts(nodes.micro_step)
        self.stacks = _stack_texts(g)
        """``stack_info`` list of each node."""
        self.precision = precision_indices(side.report)
        self.overflow = _attr_column(g, ATTR_OVERFLOW)
        self.distributed = _attr_column(g, ATTR_DISTRIBUTED)
        self.data = _data_texts(self.precision, self.overflow, n)
        """``data`` object of each node."""
        starts, ends, members = _ranges(nodes.parent[1:], n, offset=1)
        self._kids = starts, ends, self._ids[members].tolist()
        self._tensors = _Tensors(side, self.escaped_ids)
        self._links = _Links(side) if side.partner is not None and side.partner_rows is not None else None

    def blocks(self, start: int = 0) -> Iterator[VisBlock]:
        """The per-node texts of every block of `BLOCK_NODES` rows from row `start` (a block's first row), in row
        order."""
        for lo in block_starts(len(self.side.graph), start):
            yield self.block(lo)

    def block(self, lo: int) -> VisBlock:
        """The per-node texts of the block of `BLOCK_NODES` rows from row `lo`."""
        hi = min(lo + BLOCK_NODES, len(self.side.graph))
        starts, ends, kid_ids = self._kids
        outputs, inputs = self._tensors.objects(lo, hi)
        subnodes = [b'["' + b'","'.join(kid_ids[a:b]) + b'"]' if b > a else b"[]"
                    for a, b in zip(starts[lo:hi].tolist(), ends[lo:hi].tolist())]
        links = self._links.texts(lo, hi) if self._links is not None else [b"[]"] * (hi - lo)
        return VisBlock(lo, hi, outputs, inputs, subnodes, links)


def block_starts(rows: int, start: int = 0) -> range:
    """The first row of each block of `BLOCK_NODES` rows of a side of `rows` rows, from row `start`."""
    return range(start, rows, BLOCK_NODES)


def _objects(values: Sequence[bytes]) -> np.ndarray:
    """A list as a 1-D object array (so that indexing by rows runs in C)."""
    out = np.empty(len(values), object)
    out[:] = values
    return out


def _int_texts(values: np.ndarray) -> list[bytes]:
    """Each integer as its decimal text, made once per distinct value."""
    distinct, codes = np.unique(values, return_inverse=True)
    return _objects([str(v).encode() for v in distinct.tolist()])[codes.reshape(-1)].tolist()


def _stack_texts(graph: DumpGraph) -> list[bytes]:
    texts = _objects([orjson.dumps(list(s)) for s in graph.stacks] + [b"[]"])  # row -1: no stack
    return texts[graph.nodes.stack].tolist()


def _attr_column(graph: DumpGraph, key: str) -> list[str | None] | None:
    """The value of attribute `key` of each node (None where absent), or None when no node has attributes."""
    if not graph.nodes.attrs:
        return None
    return [dict(a).get(key) for a in graph.nodes.attrs]


def _data_texts(precision: list[float | None] | None, overflow: list[str | None] | None, n: int) -> list[bytes]:
    """Each node's ``data``: its ``precision_index`` (`precision_indices`) and msprobe's ``overflow_level``, made
    once per distinct pair."""
    statuses = precision if precision is not None else repeat(None, n)
    levels_ = overflow if overflow is not None else repeat(None, n)
    made: dict[tuple, bytes] = {}
    out = []
    for key in zip(statuses, levels_):
        text = made.get(key)
        if text is None:
            data: dict = {}
            if key[0] is not None:
                data["precision_index"] = key[0]
            if key[1]:
                data["overflow_level"] = key[1]
            text = made[key] = orjson.dumps(data)
        out.append(text)
    return out


def _ranges(owner: np.ndarray, n: int, offset: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of `n` owners the [start, end) slice of the sorted members, and the sorted members."""
    order = np.argsort(owner, kind="stable")
    sorted_owner = owner[order]
    starts = np.searchsorted(sorted_owner, np.arange(n), side="left")
    ends = np.searchsorted(sorted_owner, np.arange(n), side="right")
    return starts, ends, order + offset


class _Links:
    """``matched_node_link`` texts: the partner's ids from its root down. The path of every partner node that has
    children is made once (level by level, in C); a leaf's is its parent's plus its own id."""

    def __init__(self, side: VisSide) -> None:
        partner = side.partner.nodes
        self.rows = side.partner_rows
        self.parent = partner.parent
        ids = _objects(json_escaped(partner.ids))
        self.ids = ids
        inner = partner.parent < 0  # the roots and every row with children
        inner[partner.parent[partner.parent >= 0]] = True
        self.inner = inner
        self.paths = np.full(len(ids), b"", object)  # of inner rows only
        for rows in levels(depths(partner.parent)):
            rows = rows[inner[rows]]
            up = partner.parent[rows]
            top = up < 0
            self.paths[rows[top]] = ids[rows[top]]
            self.paths[rows[~top]] = self.paths[up[~top]] + b'","' + ids[rows[~top]]

    def texts(self, lo: int, hi: int) -> list[bytes]:
        partner = self.rows[lo:hi]
        out = np.full(hi - lo, b"[]", object)
        matched = partner >= 0
        rows = partner[matched]
        own = self.inner[rows]
        paths = np.empty(len(rows), object)
        paths[own] = self.paths[rows[own]]
        leaf = rows[~own]
        paths[~own] = self.paths[self.parent[leaf]] + b'","' + self.ids[leaf]
        out[matched] = b'["' + paths + b'"]'
        return out.tolist()


class _Tensors:
    """The ``output_data`` and ``input_data`` objects of a side's nodes: each tensor's leaf made from its columns.

    A node's tensors are written in row order, outputs to ``output_data`` and the rest to ``input_data``,
    keyed ``<node id>.<role>.<slot>``; a key written twice keeps its first place and its last leaf (a dict's
    assignment).
    """

    def __init__(self, side: VisSide, escaped_ids: list[bytes]) -> None:
        g = side.graph
        t = g.tensors
        self.side = side
        self.t = t
        self.ids = _objects(escaped_ids)
        group = (t.role != _OUTPUT).astype(np.int64)
        slot_codes, slots = string_codes(t.slot)
        keys = [_ROLE_KEY.get(r, b"") + s for r in range(max(_ROLE_KEY) + 1) for s in json_escaped(slots)]
        key_codes, distinct_keys = string_codes(keys)  # two (role, slot) can make one key: parameters_grad's
        suffix = key_codes[t.role.astype(np.int64) * len(slots) + slot_codes] if len(t) else np.zeros(0, np.int64)
        self.suffixes = _objects([b"." + k + b'":{' for k in distinct_keys])[suffix]
        self.emit, self.bounds = _emit_order(t.node.astype(np.int64) * 2 + group, suffix, len(distinct_keys), len(g))
        self.layout = _layouts(t)
        self.heads = _Heads(side)
        self.pairs = _PairTexts(side.report) if side.report is not None else None
        self.pair_of = np.full(len(t), -1, np.int64)
        if side.report is not None:
            self.pair_of[side.report.pairs.npu] = np.arange(len(side.report.pairs))

    def objects(self, lo: int, hi: int) -> tuple[list[bytes], list[bytes]]:
        """(output_data, input_data) texts of nodes [lo, hi)."""
        bounds = self.bounds[2 * lo: 2 * hi + 1]
        rows = self.emit[bounds[0]:bounds[-1]]
        leaves = self._leaves(rows)
        cuts = (bounds - bounds[0]).tolist()
        objects = [b"{" + b",".join(leaves[a:b]) + b"}" for a, b in pairwise(cuts)]
        return objects[0::2], objects[1::2]

    def _leaves(self, rows: np.ndarray) -> list[bytes]:
        """``"<key>":{...}`` of each tensor row."""
        layout = self.layout[rows]
        head = np.empty(len(rows), object)
        body = np.full(len(rows), b"", object)
        for kind in (_SCALAR, _PLAIN):
            at = np.flatnonzero(layout == kind)
            if len(at):
                head[at] = self.heads.values(rows[at], kind)
        at = np.flatnonzero(layout == _TENSOR)
        if len(at):
            head[at], body[at] = self.heads.tensors(rows[at])
        close = np.full(len(rows), b"}", object)
        pairs = self.pair_of[rows]
        at = np.flatnonzero(pairs >= 0)
        if len(at) and self.pairs is not None:
            close[at] = self.pairs.texts(pairs[at])
        return list(map(b"".join, zip(repeat(b'"'), self.ids[self.t.node[rows]].tolist(),
                                      self.suffixes[rows].tolist(), head.tolist(), body.tolist(), close.tolist())))


def _emit_order(owner: np.ndarray, key: np.ndarray, keys: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Tensor rows in writing order (by node, outputs first, then row) and the start of each (node, group) in it,
    with a key written twice in one group kept once: at its first place, with its last row."""
    order = np.argsort(owner, kind="stable")
    full = owner[order] * keys + key[order]
    distinct, first, inverse = np.unique(full, return_index=True, return_inverse=True)
    if len(distinct) < len(full):
        last = np.zeros(len(distinct), np.int64)
        last[inverse.reshape(-1)] = np.arange(len(full))  # the last assignment wins
        keep = np.sort(first)
        order = order[last[inverse.reshape(-1)[keep]]]
    bounds = np.searchsorted(owner[order], np.arange(2 * n + 1))
    return order, bounds


def _layouts(t) -> np.ndarray:
    """Per tensor row: `_SCALAR` (a scalar argument), `_PLAIN` (a value without shape, statistics or md5) or
    `_TENSOR`."""
    shape_codes, shapes = string_codes(t.shape)
    scalar = np.array([s == "scalar" for s in shapes], bool)[shape_codes] if shapes else np.zeros(0, bool)
    no_shape = np.array([not s for s in shapes], bool)[shape_codes] if shapes else np.zeros(0, bool)
    md5_codes, md5s = string_codes(t.md5)
    no_md5 = np.array([not s for s in md5s], bool)[md5_codes] if md5s else np.zeros(0, bool)
    plain = no_shape & ~t.present.any(axis=1) & no_md5
    return np.where(scalar, _SCALAR, np.where(plain, _PLAIN, _TENSOR)).astype(np.int8)


_STAT_SEPARATORS = (b'","Min":"', b'","Mean":"', b'","Norm":"')


class _Heads:
    """The fields of a tensor's leaf before the comparison's: the tensor's own."""

    def __init__(self, side: VisSide) -> None:
        g = side.graph
        t = g.tensors
        self.t = t
        tensor_type = b"mindspore.Tensor" if g.info.framework == "mindspore" else b"torch.Tensor"
        dtype_codes, dtypes = string_codes(t.dtype)
        shape_codes, shapes = string_codes(t.shape)
        self.dtypes, self.dtype_codes = dtypes, dtype_codes
        pairs = dtype_codes * max(len(shapes), 1) + shape_codes
        distinct, self.dtype_shape = np.unique(pairs, return_inverse=True)
        dtype_text, shape_text = json_escaped(dtypes), json_escaped(shapes)
        self.starts = _objects([b'"type":"' + tensor_type + b'","dtype":"' + dtype_text[p // max(len(shapes), 1)]
                                + b'","shape":"' + shape_text[p % max(len(shapes), 1)] + b'","Max":"'
                                for p in distinct.tolist()])
        self.grads = _objects([b'"', b'","requires_grad":"False"', b'","requires_grad":"True"'])  # -1, 0, 1
        self.has_md5, self.has_file = any(string_codes(t.md5)[1]), any(string_codes(t.file)[1])

    def tensors(self, rows: np.ndarray) -> tuple[list[bytes], list[bytes]]:
        """(head, statistics and the rest) of tensor rows."""
        t = self.t
        stats = np.empty(4 * len(rows), object)
        stats[:] = float_reprs(t.stats[rows])
        stats[~t.present[rows].ravel()] = b"null"
        stats = stats.reshape(-1, 4)
        md5_text, names = repeat(b""), repeat(b',"data_name":"-1"')  # runs without md5 or tensor files
        if self.has_md5:
            md5s = json_escaped(string_column(t.md5, rows).tolist())
            md5_text = [b',"md5":"' + m + b'"' if m else b"" for m in md5s]
        if self.has_file:
            files = json_escaped(string_column(t.file, rows).tolist())
            names = [b',"data_name":"' + (f or b"-1") + b'"' for f in files]
        body = list(map(b"".join, zip(stats[:, 0].tolist(), repeat(_STAT_SEPARATORS[0]), stats[:, 1].tolist(),
                                      repeat(_STAT_SEPARATORS[1]), stats[:, 2].tolist(), repeat(_STAT_SEPARATORS[2]),
                                      stats[:, 3].tolist(), self.grads[t.requires_grad[rows] + 1].tolist(),
                                      md5_text, names)))
        return self.starts[self.dtype_shape[rows]].tolist(), body

    def values(self, rows: np.ndarray, kind: int) -> list[bytes]:
        """The whole head of scalar (`_SCALAR`) or other non-tensor (`_PLAIN`) rows, made once per distinct value."""
        t = self.t
        dtypes = self.dtype_codes[rows].tolist()
        values = string_column(t.value, rows).tolist()
        if kind == _SCALAR:
            bits = np.where(t.present[rows, 0], t.stats[rows, 0], np.nan).view(np.int64).tolist()
            keys = zip(dtypes, bits, values)
        else:
            keys = zip(dtypes, repeat(0), values)
        made: dict[tuple, bytes] = {}
        out = []
        for key in keys:
            text = made.get(key)
            if text is None:
                text = made[key] = self._value_head(key, kind)
            out.append(text)
        return out

    def _value_head(self, key: tuple[int, int, str], kind: int) -> bytes:
        dtype_code, bits, value = key
        dtype = self.dtypes[dtype_code]
        if kind == _PLAIN:
            return orjson.dumps({"type": dtype, "value": value, "data_name": "-1"})[1:-1]
        text = _scalar_text(dtype, float(np.int64(bits).view(np.float64)), value)
        return orjson.dumps({"type": dtype, "value": text, "data_name": "-1", "Max": text, "Min": text, "Mean": text,
                             "Norm": text, "dtype": f"<class {dtype}>", "shape": "[]"})[1:-1]


def _num(value: float) -> str:
    """A float as msprobe writes it: repr, or nan/inf/-inf (which repr gives too)."""
    if value != value:
        return "nan"
    if value in (math.inf, -math.inf):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def _scalar_text(kind: str, value: float, text: str) -> str:
    if kind == "bool":
        return "True" if value else "False"
    if kind == "int" and math.isfinite(value):
        return str(int(value))
    return _num(value) if not math.isnan(value) else text


_DIFF_SEPARATORS = (b',"Max diff":"', b'","Min diff":"', b'","Mean diff":"', b'","L2norm diff":"',
                    b'","MaxRelativeErr":"', b'","MinRelativeErr":"', b'","MeanRelativeErr":"',
                    b'","NormRelativeErr":"')


_LEVELS = range(min(STATUS_NAMES), max(STATUS_NAMES) + 1)  # every status code


def _end(consistent: bool, level: int) -> bytes:
    """A pair's leaf from whether both sides agree on requires_grad up to its message."""
    return (b'","Requires_grad Consistent":"' + (b"True" if consistent else b"False") + b'","Result":"'
            + STATUS_NAMES[level].encode() + b'","Err_message":"' + (b'[\\"' if level > PASS else b""))


class _PairTexts:
    """The comparison's fields of an npu tensor's leaf, closing it: the diff and relative-error texts ("N/A" where a
    side lacks the statistic), the real-tensor metrics that exist, whether both sides agree on requires_grad, the
    verdict, and msprobe's ``Err_message``: the line graphcmp's judge gives a pair that is not a pass."""

    def __init__(self, report: CompareReport) -> None:
        self.report = report
        self.notes = pair_notes(report.npu, report.bench, report.pairs, report.noise.precision.mixed)
        self.metrics = [(name, b'","' + key.encode() + b'":"') for name, key in _TENSOR_KEYS
                        if name in report.pairs.metrics]
        self._ends = _objects([_end(consistent, level) for consistent in (False, True) for level in _LEVELS])
        """`_end` of (consistent, level) at ``consistent * len(_LEVELS) + level - _LEVELS[0]``."""

    def texts(self, pairs: np.ndarray) -> list[bytes]:
        report = self.report
        # a result's relative errors and differences: computed for these pairs only
        m = report.pairs.metrics.at(pairs, ("abs_diff", "rel_errs", *(name for name, _ in self.metrics)))
        nt, bt = report.npu.tensors, report.bench.tensors
        npu_rows, bench_rows = report.pairs.npu[pairs], report.pairs.bench[pairs]
        hidden = ~(nt.present[npu_rows] & bt.present[bench_rows]).ravel()
        diff = np.empty(4 * len(pairs), object)
        diff[:] = float_reprs(m["abs_diff"])
        diff[hidden] = b"N/A"
        rel = np.empty(4 * len(pairs), object)
        rel[:] = float_reprs(m["rel_errs"] * 100)
        rel[hidden] = b"N/A"
        percent = np.full(4 * len(pairs), b"%", object)
        percent[hidden] = b""
        columns = [x for s in range(4) for x in (repeat(_DIFF_SEPARATORS[s]), diff[s::4].tolist())]
        columns += [x for s in range(4)
                    for x in (repeat(_DIFF_SEPARATORS[4 + s]), rel[s::4].tolist(), percent[s::4].tolist())]
        for name, key in self.metrics:
            values = m[name]
            keys, texts = np.full(len(pairs), b"", object), np.full(len(pairs), b"", object)
            shown = np.flatnonzero(~np.isnan(values))
            keys[shown] = key
            texts[shown] = float_reprs(values[shown])
            columns += [keys.tolist(), texts.tolist()]
        level = report.verdicts.pair_level[pairs]
        same = nt.requires_grad[npu_rows] == bt.requires_grad[bench_rows]  # msprobe: not recorded == not
        columns.append(self._ends[same * len(_LEVELS) + (level.astype(np.int64) - _LEVELS[0])].tolist())
        columns.append(self._messages(pairs, level))
        return list(map(b"".join, zip(*columns)))

    def _messages(self, pairs: np.ndarray, level: np.ndarray) -> list[bytes]:
        """The rest of each leaf: ``[]"}`` for a pass, else the judge's line as the text of a JSON list
        (escaped twice: it is a JSON text inside a JSON string)."""
        out = np.full(len(pairs), b'[]"}', object)
        flagged = np.flatnonzero(level > PASS)
        if len(flagged):
            report = self.report
            lines = pair_messages(report.npu, report.pairs, pairs[flagged], level[flagged], self.notes)
            once = b"\n".join(json_escaped(lines))  # orjson's text never holds a raw newline
            twice = once.replace(b"\\", b"\\\\").replace(b'"', b'\\"')
            out[flagged] = [text + b'\\"]"}' for text in twice.split(b"\n")]
        return out.tolist()
