"""Writing a comparison (or one run) as msprobe's JSON `.vis`, the file tb-graph-ascend 1.x-8.1.x opens.

The nodes are written one at a time (`iter_vis_nodes`), so a large graph never exists twice in
memory; `graphcmp.core.export.vis_db` writes the same node records as SQLite rows. A node's
``precision_index`` is graphcmp's verdict (pass 0, warning 0.5, error 1) and `VIS_COLORS` is the
legend that tells the viewer so; the per-tensor ``Max diff`` ... ``NormRelativeErr`` fields carry
graphcmp's metrics (see docs/interop.md for how they differ from msprobe's).
"""

from __future__ import annotations

import math
import os
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from graphcmp.core.export.columns import float_reprs
from graphcmp.core.judge import STATUS_NAMES, pair_messages, pair_notes
from graphcmp.core.outputs import atomic_output
from graphcmp.core.readers.vis import ATTR_DISTRIBUTED, ATTR_OVERFLOW, VisNodeType
from graphcmp.core.records import DumpGraph, FrozenColumns, NodeKind, Role
from graphcmp.core.report import CompareReport
from graphcmp.core.rules import ERROR, PASS, WARNING

__all__ = [
    "PRECISION_INDEX",
    "VIS_COLORS",
    "VIS_TOOL_TIP",
    "ExportResult",
    "VisSide",
    "iter_vis_nodes",
    "vis_sides",
    "vis_task",
    "write_vis",
]

PRECISION_INDEX = {PASS: 0.0, WARNING: 0.5, ERROR: 1.0}
"""graphcmp status -> ``precision_index`` written for an npu node (skip and unmatched get none)."""

VIS_COLORS: dict[str, dict[str, Any]] = {
    "#FFFCF3": {"value": [0, 0.3], "description": "graphcmp verdict: pass", "accuracy_level": "pass"},
    "#FFDC7F": {"value": [0.3, 0.6], "description": "graphcmp verdict: warning", "accuracy_level": "warning"},
    "#FF704D": {"value": [0.6, 1], "description": "graphcmp verdict: error", "accuracy_level": "error"},
    "#C7C7C7": {"value": [], "description": "no counterpart in the other run", "accuracy_level": "unmatched node"},
}
"""Colour legend written into every file: msprobe 26.x's colours for graphcmp's verdicts."""

VIS_TOOL_TIP = {
    "Max diff": "npu Max - bench Max", "Min diff": "npu Min - bench Min", "Mean diff": "npu Mean - bench Mean",
    "L2norm diff": "npu Norm - bench Norm",
    "MaxRelativeErr": "graphcmp relative error of Max: |npu - bench| / max(|bench|, 1e-3 x the tensor's largest "
                      "magnitude), differences under 1e-7 count as zero",
    "Result": "graphcmp verdict of this tensor pair",
}
"""Tool tips of the per-tensor comparison fields."""

_TASKS = {"statistics": "summary", "md5": "md5", "tensor": "all"}
_NODE_TYPE = {int(kind): int(VisNodeType.API if kind == NodeKind.API else VisNodeType.GROUP if kind == NodeKind.GROUP
                        else VisNodeType.MODULE) for kind in NodeKind}  # plain ints: written as text too
_ROLE_KEY = {Role.INPUT: "input.", Role.OUTPUT: "output.", Role.PARAM: "parameters.", Role.PARAM_GRAD: ""}
_STAT_KEYS = ("Max", "Min", "Mean", "Norm")
_DIFF_KEYS = ("Max diff", "Min diff", "Mean diff", "L2norm diff")
_REL_KEYS = ("MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr")
_TENSOR_KEYS = (("cosine", "Cosine"), ("euc_rel", "EucDist"), ("max_abs", "MaxAbsErr"),
                ("one_thousandth", "One Thousandth Err Ratio"), ("five_thousandths", "Five Thousandths Err Ratio"))


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What an export wrote."""

    paths: tuple[str, ...]
    nodes: int  # node records written (both sides, every graph)
    bytes: int
    seconds: float


def vis_task(graph: DumpGraph) -> str:
    """msprobe's task name for a run's task mode.

    >>> from graphcmp.core.records import RunInfo
    >>> vis_task(DumpGraph(RunInfo(path="x", task="md5"), None, None, ()))
    'md5'
    """
    return _TASKS.get(graph.info.task, "summary")


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


_BLOCK_NODES = 256
"""Nodes whose tensor texts are made at a time: whole columns at C speed, a few MB held."""


class _Index:
    """Row lookups and text columns of one side, built once: children, tensor rows, pairs, ancestor paths,
    and every tensor's and pair's fields as msprobe writes them (text made for whole columns at a time)."""

    def __init__(self, side: VisSide) -> None:
        g = side.graph
        self.side = side
        self.ids = g.nodes.ids
        self.parent = g.nodes.parent
        self.kids = _ranges(g.nodes.parent[1:], len(g), offset=1)
        self.tensor_order = np.argsort(g.tensors.node, kind="stable")
        self.tensors = _ranges(g.tensors.node[self.tensor_order], len(g))
        self.pair_of = np.full(len(g.tensors), -1, np.int64)
        if side.report is not None:
            self.pair_of[side.report.pairs.npu] = np.arange(len(side.report.pairs))
        self.tensor_type = "mindspore.Tensor" if g.info.framework == "mindspore" else "torch.Tensor"
        t = g.tensors
        self.role = _int_array(t.role, "b")
        self.pair_list = _int_array(self.pair_of)
        self.present_any = _int_array(t.present.any(axis=1), "b")
        self.grad = _int_array(t.requires_grad, "b")
        report = side.report
        self.notes = pair_notes(report.npu, report.bench, report.pairs, report.noise.precision.mixed) \
            if report is not None else {}
        self.block = (0, 0)  # the node rows whose tensor texts are made (a block at a time: never all at once)
        self.stat_text: dict[int, tuple[str, ...]] = {}
        self.pair_text: dict[int, tuple] = {}
        self.kinds = _int_array(g.nodes.kind, "b")
        self.stack_rows = _int_array(g.nodes.stack, "i")
        self.micro = _int_array(g.nodes.micro_step, "h")
        self.parent_list = _int_array(g.nodes.parent)
        self.status = _int_array(side.report.verdicts.status, "b") if side.report is not None else None
        has_partner = side.partner is not None and side.partner_rows is not None
        self.partner_list = _int_array(side.partner_rows) if has_partner else None
        self.partner_parent = _int_array(side.partner.nodes.parent) if has_partner else None

    def children(self, row: int) -> list[str]:
        start, end = self.kids[0][row], self.kids[1][row]
        return [self.ids[k] for k in self.kids[2][start:end].tolist()]

    def tensor_rows(self, row: int) -> list[int]:
        """The tensor rows of node `row` (and the texts of its block's tensors made, when not yet)."""
        if not self.block[0] <= row < self.block[1]:
            self._make_block(row)
        start, end = self.tensors[0][row], self.tensors[1][row]
        return self.tensor_order[start:end].tolist()

    def _make_block(self, row: int) -> None:
        hi = min(row + _BLOCK_NODES, len(self.ids))
        rows = self.tensor_order[self.tensors[0][row]: self.tensors[1][hi - 1]]
        t = self.side.graph.tensors
        self.stat_text = dict(zip(rows.tolist(), _texts(t.stats[rows], t.present[rows], "null")))
        pairs = self.pair_of[rows]
        pairs = pairs[pairs >= 0]
        self.pair_text = dict(zip(pairs.tolist(), _pair_texts(self.side.report, pairs, self.notes))) \
            if len(pairs) else {}
        self.block = (row, hi)


def _int_array(values: np.ndarray, code: str = "q") -> array:
    """A column as an `array.array` of `code`: Python ints on access, 1-8 bytes a row (a list takes 8-36)."""
    out = array(code)
    out.frombytes(np.ascontiguousarray(values, np.dtype(f"i{out.itemsize}")).tobytes())
    return out


def _texts(values: np.ndarray, shown: np.ndarray, blank: str, suffix: str = "") -> list[tuple[str, ...]]:
    """Rows of floats as msprobe's text (``repr``, which writes ``nan``, ``inf``, ``-inf`` as it does), `blank`
    where a value is not `shown`."""
    width = values.shape[1]
    flat = float_reprs(values)
    if suffix:
        flat = [v + suffix for v in flat]
    hidden = np.flatnonzero(~shown.ravel()).tolist()
    for k in hidden:
        flat[k] = blank
    return list(zip(*(flat[c::width] for c in range(width))))


def _pair_texts(report: CompareReport, pairs: np.ndarray, notes: dict[int, str]) -> list[tuple]:
    """Per given tensor pair: the diff and relative-error texts ("N/A" where a side lacks the statistic), the
    real-tensor metrics that exist and whether both sides agree on requires_grad, the verdict, and msprobe's
    ``Err_message``: the line graphcmp's judge gives a pair that is not a pass (`pair_messages`)."""
    m = report.pairs.metrics
    nt, bt = report.npu.tensors, report.bench.tensors
    npu_rows, bench_rows = report.pairs.npu[pairs], report.pairs.bench[pairs]
    both = nt.present[npu_rows] & bt.present[bench_rows]
    diff = _texts(m["abs_diff"][pairs], both, "N/A")
    rel = _texts(m["rel_errs"][pairs] * 100, both, "N/A", "%")
    level = report.verdicts.pair_level[pairs]
    result = [STATUS_NAMES[s] for s in level.tolist()]
    extra: list[list[tuple[str, str]]] = [[] for _ in range(len(pairs))]
    for name, key in _TENSOR_KEYS:
        if name in m:
            values = m[name][pairs]
            for k in np.flatnonzero(~np.isnan(values)).tolist():
                extra[k].append((key, _num(float(values[k]))))
    same = (nt.requires_grad[npu_rows] == bt.requires_grad[bench_rows]).tolist()  # msprobe: not recorded == not
    for k, consistent in enumerate(same):
        extra[k].append(("Requires_grad Consistent", "True" if consistent else "False"))
    errors = ["[]"] * len(pairs)
    flagged = np.flatnonzero(level > PASS)
    for k, line in zip(flagged.tolist(), pair_messages(report.npu, report.pairs, pairs[flagged], level[flagged],
                                                       notes)):
        errors[k] = orjson.dumps([line]).decode()
    return list(zip(diff, rel, extra, result, errors))


def _ranges(owner: np.ndarray, n: int, offset: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of `n` owners the [start, end) slice of the sorted members, and the sorted members."""
    order = np.argsort(owner, kind="stable")
    members = order + offset
    sorted_owner = owner[order]
    starts = np.searchsorted(sorted_owner, np.arange(n), side="left")
    ends = np.searchsorted(sorted_owner, np.arange(n), side="right")
    return starts, ends, members


def _path(ids: tuple[str, ...], parent: list[int], row: int) -> list[str]:
    """Ids from the root down to `row`: msprobe's ``matched_node_link``."""
    out = []
    while row >= 0:
        out.append(ids[row])
        row = parent[row]
    return out[::-1]


def iter_vis_nodes(side: VisSide) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row, node record) of every node of one side, in execution order, one at a time.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...      "Mean": 0.5, "Norm": 1.0}
    >>> g = parse_msprobe({"data": {"Functional.relu.0.forward": {"input_args": [t], "output": [t]}}})
    >>> [(row, node["id"], node["upnode"]) for row, node in iter_vis_nodes(vis_sides(g)[0])]
    [(0, 'DefaultModel', 'None'), (1, 'Functional.relu.0.forward', 'DefaultModel')]
    """
    index = _Index(side)
    for row in range(len(side.graph)):
        yield row, _node(index, row)


def _node(index: _Index, row: int) -> dict[str, Any]:
    g = index.side.graph
    nodes = g.nodes
    node_id = nodes.ids[row]
    parent = index.parent_list[row]
    inputs, outputs = _tensors(index, row, node_id)
    stack_row = index.stack_rows[row]
    node = {
        "id": node_id, "node_type": _NODE_TYPE[index.kinds[row]], "output_data": outputs,
        "input_data": inputs, "upnode": nodes.ids[parent] if parent >= 0 else "None",
        "subnodes": index.children(row), "matched_node_link": _link(index, row), "suggestions": {},
        "stack_info": list(g.stacks[stack_row]) if stack_row >= 0 else [],
        "micro_step_id": index.micro[row], "data": _data(index, row),
    }
    attrs = dict(nodes.attrs[row]) if nodes.attrs else {}
    if ATTR_DISTRIBUTED in attrs:
        node["matched_distributed"] = orjson.loads(attrs[ATTR_DISTRIBUTED])
    return node


def _link(index: _Index, row: int) -> list[str]:
    partner = index.partner_list[row] if index.partner_list is not None else -1
    if partner < 0:
        return []
    return _path(index.side.partner.nodes.ids, index.partner_parent, partner)


def _data(index: _Index, row: int) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if index.status is not None:
        status = index.status[row]
        if status in PRECISION_INDEX:
            data["precision_index"] = PRECISION_INDEX[status]
    attrs = index.side.graph.nodes.attrs
    if attrs:
        overflow = dict(attrs[row]).get(ATTR_OVERFLOW)
        if overflow:
            data["overflow_level"] = overflow
    return data


_ROLE_KEYS = {int(role): key for role, key in _ROLE_KEY.items()}
_OUTPUT = int(Role.OUTPUT)


def _tensors(index: _Index, row: int, node_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    inputs: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    t = index.side.graph.tensors
    for k in index.tensor_rows(row):
        role = index.role[k]
        key = f"{node_id}.{_ROLE_KEYS[role]}{t.slot[k]}"
        leaf = _leaf(index, t, k)
        pair = index.pair_list[k]
        if pair >= 0:
            _add_pair_fields(leaf, index.pair_text[pair])
        (outputs if role == _OUTPUT else inputs)[key] = leaf
    return inputs, outputs


def _num(value: float) -> str:
    """A float as msprobe writes it: repr, or nan/inf/-inf (which repr gives too)."""
    if value != value:
        return "nan"
    if value in (math.inf, -math.inf):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def _leaf(index: _Index, t: Any, k: int) -> dict[str, Any]:
    """One tensor (or scalar argument) in msprobe's layout, every value as text."""
    if t.shape[k] == "scalar":
        value = float(t.stats[k, 0]) if t.present[k, 0] else math.nan
        text = _scalar_text(t.dtype[k], value, t.value[k])
        return {"type": t.dtype[k], "value": text, "data_name": "-1", "Max": text, "Min": text, "Mean": text,
                "Norm": text, "dtype": f"<class {t.dtype[k]}>", "shape": "[]"}
    if not t.shape[k] and not index.present_any[k] and not t.md5[k]:
        return {"type": t.dtype[k], "value": t.value[k], "data_name": "-1"}
    leaf = {"type": index.tensor_type, "dtype": t.dtype[k], "shape": t.shape[k]}
    leaf.update(zip(_STAT_KEYS, index.stat_text[k]))
    if (grad := index.grad[k]) >= 0:
        leaf["requires_grad"] = "True" if grad else "False"
    if t.md5[k]:
        leaf["md5"] = t.md5[k]
    leaf["data_name"] = t.file[k] or "-1"
    return leaf


def _scalar_text(kind: str, value: float, text: str) -> str:
    if kind == "bool":
        return "True" if value else "False"
    if kind == "int" and math.isfinite(value):
        return str(int(value))
    return _num(value) if not math.isnan(value) else text


def _add_pair_fields(leaf: dict[str, Any], texts: tuple) -> None:
    diff, rel, extra, result, errors = texts
    leaf.update(zip(_DIFF_KEYS, diff))
    leaf.update(zip(_REL_KEYS, rel))
    leaf.update(extra)
    leaf["Result"] = result
    leaf["Err_message"] = errors


def write_vis(document: CompareReport | DumpGraph, path: str | os.PathLike[str]) -> ExportResult:
    """Write a comparison (NPU and Bench graphs) or one run as a tb-graph-ascend `.vis` JSON file.

    Nodes are serialised and written one at a time.

    Raises
    ------
    OutputError
        If the file cannot be written.
    """
    start = time.perf_counter()
    sides = vis_sides(document)
    count = 0
    with atomic_output(path) as f:
        f.write(b"{")
        for i, side in enumerate(sides):
            if len(sides) > 1:
                f.write(b"," if i else b"")
                f.write(orjson.dumps(side.name) + b":{")
            count += _write_side(f, side)
            f.write(b"}" if len(sides) > 1 else b"")
        f.write(b"," + orjson.dumps(_tail(document, sides[0].graph))[1:])
    size = Path(path).stat().st_size
    return ExportResult((str(path),), count, size, time.perf_counter() - start)


def _write_side(f: BinaryIO, side: VisSide) -> int:
    f.write(b'"root":' + orjson.dumps(side.graph.root) + b',"dump_data_dir":null,"node":{')
    count = 0
    for row, node in iter_vis_nodes(side):
        f.write((b"," if row else b"") + orjson.dumps(node["id"]) + b":" + orjson.dumps(node))
        count += 1
    f.write(b"}")
    return count


def _tail(document: CompareReport | DumpGraph, npu: DumpGraph) -> dict[str, Any]:
    """The top-level fields after the graphs (as msprobe orders them)."""
    micro_steps = int(npu.nodes.micro_step.max(initial=0)) + 1
    overflow = bool(npu.nodes.attrs) and any(dict(a).get(ATTR_OVERFLOW) for a in npu.nodes.attrs)
    if not isinstance(document, CompareReport):
        return {"MicroSteps": micro_steps, "OverflowCheck": overflow}
    return {"ToolTip": orjson.dumps(VIS_TOOL_TIP).decode(), "Colors": VIS_COLORS, "MicroSteps": micro_steps,
            "task": vis_task(npu), "OverflowCheck": overflow}

