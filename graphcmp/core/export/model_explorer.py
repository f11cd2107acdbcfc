"""Writing a comparison for Google's Model Explorer: a graph collection JSON plus one node-data JSON per metric.

The shapes follow Model Explorer's documented input (``graph_builder.py``: GraphCollection, Graph,
GraphNode, KeyValue, MetadataItem, IncomingEdge; ``node_data_builder.py``: ModelNodeData keyed by
graph id, GraphNodeData with ``results`` and ``thresholds`` or ``gradient``) and are checked by
`validate_graph_collection` and `validate_node_data`.

Every graphcmp node becomes one Model Explorer node. The hierarchy is the ``namespace`` path of
its ancestors (the root excluded); a module's own node sits inside its own layer, pinned to the top
(``config.pinToGroupTop``), so the layer shows the module's data. Dumps record no data flow, so
the edges are the data flow a drawing shows (`graphcmp.core.dataflow.flow_edges`): a graph format's own
(GE, MindSpore IR), or for a dump the producer links its statistics recover, as the viewer draws them;
only a run without any falls back to each node's previous sibling in execution order (a module's first
child from the module's own node), so the layout still reads top to bottom in call order. Node data
files hold the verdict, the severities, the noise model's role and margin, and cosine when measured.
The records are made as text from the columns and written a block of nodes at a time (each tensor's
metadata item joined from column pieces, as `graphcmp.core.export.vis_records` does for the `.vis`), node
data a chunk of values at a time.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise, repeat
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from graphcmp.core.dataflow import flow_edges
from graphcmp.core.errors import DumpFormatError, OutputError
from graphcmp.core.export.columns import float_reprs, json_escaped
from graphcmp.core.export.vis import ExportResult
from graphcmp.core.export.vis_records import BLOCK_NODES
from graphcmp.core.judge import STATUS_NAMES, UNMATCHED
from graphcmp.core.noise import origin_margins
from graphcmp.core.outputs import atomic_output
from graphcmp.core.readers.vis import ATTR_PRECISION
from graphcmp.core.records import Direction, DumpGraph, FrozenColumns, NodeKind, Role, call_site, string_codes
from graphcmp.core.report import CompareReport
from graphcmp.core.rules import ERROR, PASS, WARNING

__all__ = [
    "GRAPH_FILE",
    "MAX_VALUE",
    "VERDICT_VALUES",
    "NodeDataSpec",
    "node_data_specs",
    "validate_graph_collection",
    "validate_node_data",
    "write_model_explorer",
]

GRAPH_FILE = "graphs.json"
"""Name of the graph collection file in the output folder; node data is ``node_data_<metric>.json``."""

MAX_VALUE = 1.7976931348623157e308
"""Stand-in for inf and NaN severities (JSON numbers cannot be non-finite): beyond every threshold."""

VERDICT_VALUES = {PASS: 0, WARNING: 1, ERROR: 2, UNMATCHED: 3}
"""Node-data value of each verdict (skip has none, so those nodes stay uncoloured)."""

_VERDICT_THRESHOLDS = ({"value": 0, "bgColor": "#C8E6C9"}, {"value": 1, "bgColor": "#FFDC7F"},
                       {"value": 2, "bgColor": "#FF704D"}, {"value": 3, "bgColor": "#C7C7C7"})
_ROLE_THRESHOLDS = ({"value": 1, "bgColor": "#C8E6C9"}, {"value": 2, "bgColor": "#FFB74D"},
                    {"value": 3, "bgColor": "#B0171F"})
"""Role colours: within noise green, propagated orange, origin dark red (not compared: no value, uncoloured)."""
_SEP = "/"
_SEP_STAND_IN = "\u2215"  # division slash: keeps a "/" inside an id from splitting the namespace


@dataclass(frozen=True, slots=True, eq=False)
class NodeDataSpec(FrozenColumns):
    """One node-data file: a per-npu-row value column and how Model Explorer colours it."""

    name: str
    values: np.ndarray  # float64 per npu row; NaN = no value
    thresholds: tuple[dict[str, Any], ...] = ()
    gradient: tuple[dict[str, Any], ...] = ()
    description: str = ""


def node_data_specs(report: CompareReport) -> tuple[NodeDataSpec, ...]:
    """The metrics exported as node data: verdict, severities and, when present, cosine and msprobe's index."""
    v = report.verdicts
    status_value = np.array([VERDICT_VALUES.get(int(s), np.nan) for s in v.status], np.float64)
    limits = _severity_thresholds(report)
    specs = [
        NodeDataSpec("verdict", status_value, _VERDICT_THRESHOLDS,
                     description="0 pass, 1 warning, 2 error, 3 unmatched (skip: no value)"),
        NodeDataSpec("severity", _finite(v.severity, v.status), limits,
                     description="driving metric of the node's outputs"),
        NodeDataSpec("worst_severity", _finite(v.worst_severity, v.status), limits,
                     description="largest severity in the node's subtree"),
        NodeDataSpec("input_severity", _finite(v.input_severity, v.status), limits,
                     description="driving metric of the node's inputs and parameters"),
    ]
    if report.noise is not None:
        role = report.noise.role.astype(np.float64)
        specs.append(NodeDataSpec("role", np.where(role > 0, role, np.nan), _ROLE_THRESHOLDS,
                                  description="noise model role: 1 within noise, 2 propagated (an origin before it "
                                  "explains it), 3 origin of divergence (not compared: no value)"))
        margin = report.noise.margins_of(np.arange(len(report.npu)))
        beyond = origin_margins(report.npu, report.bench, report.noise.rule)
        rule = report.noise.rule
        where = "" if not (beyond != rule.origin_margin).any() else \
            f"; {rule.tensor_origin_margin:g} outside the backward pass of a comparison of real tensors"
        specs.append(NodeDataSpec("margin", np.where(np.isfinite(margin), margin / beyond, MAX_VALUE),
                                  ({"value": 1.0, "bgColor": "#C8E6C9"}, {"value": MAX_VALUE, "bgColor": "#B0171F"}),
                                  description="output error over the noise the model allows, over the margin of an "
                                  f"origin (1: an origin; origin margin {rule.origin_margin:g}{where})"))
    cosine = _node_min(report, "cosine")
    if cosine is not None:
        specs.append(NodeDataSpec("cosine", cosine, _cosine_thresholds(report),
                                  description="smallest cosine similarity of the node's outputs"))
    precision = _attr_column(report.npu, ATTR_PRECISION)
    if precision is not None:
        specs.append(NodeDataSpec("msprobe_precision_index", precision, gradient=(
            {"stop": 0, "bgColor": "#FFFCF3"}, {"stop": 1, "bgColor": "#FF704D"}),
            description="msprobe's own precision_index, as read from a .vis/.vis.db"))
    return tuple(specs)


def _finite(values: np.ndarray, status: np.ndarray) -> np.ndarray:
    out = np.where(np.isfinite(values), values, MAX_VALUE)
    return np.where((status == PASS) | (status == WARNING) | (status == ERROR), out, np.nan)


def _severity_thresholds(report: CompareReport) -> tuple[dict[str, Any], ...]:
    task = report.npu.info.task
    metric = {"md5": "md5_diff", "tensor": "euc_rel"}.get(task, "rel_err")
    rules = report.thresholds.rules.get(task) or report.thresholds.rules["statistics"]
    rule = next((r for r in rules if r.metric == metric), rules[0])
    return ({"value": rule.warn, "bgColor": "#C8E6C9"}, {"value": rule.error, "bgColor": "#FFDC7F"},
            {"value": MAX_VALUE, "bgColor": "#FF704D"})


def _cosine_thresholds(report: CompareReport) -> tuple[dict[str, Any], ...]:
    rule = next((r for r in report.thresholds.rules.get("tensor", ()) if r.metric == "cosine"), None)
    error, warn = (rule.error, rule.warn) if rule else (0.99, 0.9999)
    return ({"value": error, "bgColor": "#FF704D"}, {"value": warn, "bgColor": "#FFDC7F"},
            {"value": 1.0 + 1e-9, "bgColor": "#C8E6C9"})


def _node_min(report: CompareReport, metric: str) -> np.ndarray | None:
    column = report.pairs.metrics.get(metric)
    if column is None or not np.any(~np.isnan(column)):
        return None
    t = report.npu.tensors
    rows = report.pairs.npu
    use = ~np.isnan(column) & np.isin(t.role[rows], (Role.OUTPUT, Role.PARAM_GRAD))
    out = np.full(len(report.npu), np.inf)
    np.minimum.at(out, t.node[rows[use]], column[use])
    return np.where(np.isinf(out), np.nan, out)


def _attr_column(graph: DumpGraph, key: str) -> np.ndarray | None:
    if not graph.nodes.attrs:
        return None
    values = np.array([float(dict(a).get(key, "nan")) for a in graph.nodes.attrs], np.float64)
    return values if np.any(~np.isnan(values)) else None


# --------------------------------------------------------------------------- writing


def write_model_explorer(document: CompareReport | DumpGraph, folder: str | os.PathLike[str]) -> ExportResult:
    """Write `GRAPH_FILE` and one ``node_data_<metric>.json`` per `node_data_specs` entry into `folder`.

    A comparison gives two graphs (``npu``, ``bench``); bench nodes take the values of their
    matched npu node. A single run gives one graph (``run``) and no node data.

    Raises
    ------
    OutputError
        If a file cannot be written.
    """
    start = time.perf_counter()
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{folder}: exists and is not a folder; Model Explorer output is a folder of JSON files")
    graphs = _graphs(document)
    paths = [folder / GRAPH_FILE]
    count = 0
    with atomic_output(paths[0]) as f:
        f.write(b'{"label":' + orjson.dumps(_label(document)) + b',"graphs":[')
        for i, (graph_id, graph, _) in enumerate(graphs):
            f.write((b"," if i else b"") + b'{"id":' + orjson.dumps(graph_id) + b',"nodes":[')
            count += _write_nodes(f, graph, document)
            f.write(b"]}")
        f.write(b"]}")
    if isinstance(document, CompareReport):
        ids = {graph_id: _objects(json_escaped(graph.nodes.ids)) for graph_id, graph, _ in graphs}
        for spec in node_data_specs(document):
            path = folder / f"node_data_{spec.name}.json"
            with atomic_output(path) as f:
                _write_node_data(f, spec, graphs, ids)
            paths.append(path)
    size = sum(p.stat().st_size for p in paths)
    return ExportResult(tuple(str(p) for p in paths), count, size, time.perf_counter() - start)


def _graphs(document: CompareReport | DumpGraph) -> list[tuple[str, DumpGraph, np.ndarray | None]]:
    """(graph id, run, npu row per row or None) of each graph to write."""
    if isinstance(document, CompareReport):
        npu_rows = np.arange(len(document.npu))
        return [("npu", document.npu, npu_rows), ("bench", document.bench, document.matches.bench_to_npu)]
    return [("run", document, None)]


def _label(document: CompareReport | DumpGraph) -> str:
    if isinstance(document, CompareReport):
        return f"graphcmp: {document.npu.info.path} vs {document.bench.info.path}"
    return f"graphcmp: {document.info.path}"


def _write_nodes(f: BinaryIO, graph: DumpGraph, document: CompareReport | DumpGraph) -> int:
    """Write the GraphNode records of one run, made as text a block of nodes at a time."""
    texts = _NodeTexts(graph, document)
    for lo in range(0, len(graph), BLOCK_NODES):
        records = texts.records(lo, min(lo + BLOCK_NODES, len(graph)))
        if not lo:
            records[0] = records[0][1:]  # the first record: no comma
        f.writelines(records)
    return len(graph)


def iter_model_explorer_nodes(graph: DumpGraph, document: CompareReport | DumpGraph) -> Iterator[dict[str, Any]]:
    """Model Explorer GraphNode records of one run, one at a time, in execution order (as written)."""
    texts = _NodeTexts(graph, document)
    for lo in range(0, len(graph), BLOCK_NODES):
        yield from (orjson.loads(record[1:]) for record in texts.records(lo, min(lo + BLOCK_NODES, len(graph))))


_ROLE_NAMES = {int(r): r.name.lower() for r in Role}
_OUTPUT_ROLES = (int(Role.OUTPUT), int(Role.PARAM_GRAD))
_PARAM = int(Role.PARAM)
_STAT_NAMES = ("max", "min", "mean", "norm")
_NODE_KINDS = {int(k): k.name.lower() for k in NodeKind}
_DIRECTION_NAMES = {int(d): d.name.lower() for d in Direction}
_PIN = b',"config":{"pinToGroupTop":true}'


def _objects(values: list) -> np.ndarray:
    """A list as a 1-D object array (so that indexing by rows runs in C)."""
    out = np.empty(len(values), object)
    out[:] = values
    return out


def _key_value(key: str, value: str) -> bytes:
    """``{"key":...,"value":...}`` as orjson writes it."""
    return orjson.dumps({"key": key, "value": value})


class _NodeTexts:
    """The GraphNode records of one run as text, made from its columns: the namespace and incoming edges by one
    walk over the rows (each depends on the rows before), everything else for whole columns of a block of nodes.
    """

    def __init__(self, graph: DumpGraph, document: CompareReport | DumpGraph) -> None:
        nodes = graph.nodes
        self.graph = graph
        self.ids = _objects(json_escaped(nodes.ids))
        has_kids = np.zeros(len(graph), bool)
        has_kids[nodes.parent[nodes.parent >= 0]] = True
        self.has_kids = has_kids.tolist()
        self.parents = nodes.parent.tolist()
        self.layer_of: dict[int, str] = {}  # namespace of each container row (its own layer)
        self.previous: dict[int, int] = {}  # last child seen per parent row
        self.incoming = _incoming(graph)
        op_codes, ops = string_codes(nodes.op)
        self.heads = _memo_texts(zip(nodes.kind.tolist(), op_codes.tolist(), nodes.direction.tolist(),
                                     nodes.micro_step.tolist()),
                                 lambda key: b",".join(_key_value(k, v) for k, v in (
                                     ("kind", _NODE_KINDS[key[0]]), ("op", ops[key[1]]),
                                     ("direction", _DIRECTION_NAMES[key[2]]), ("micro_step", str(key[3])))))
        self.compare = _CompareAttrs(document, graph) if isinstance(document, CompareReport) else None
        call_sites = [b"," + _key_value("call_site", call_site(s)) if s else b"" for s in graph.stacks]
        self.call_sites = _objects([*call_sites, b""])[nodes.stack]  # row -1: no stack
        self.tensors = _TensorItems(graph, document)

    def records(self, lo: int, hi: int) -> list[bytes]:
        """The GraphNode records of rows [lo, hi), each after a comma."""
        namespaces, pins, edges = self._layout(lo, hi)
        inputs, outputs, params = self.tensors.items(lo, hi)
        attrs = [self.heads[lo:hi], self.compare.texts(lo, hi) if self.compare else repeat(b""), params]
        if self.graph.nodes.attrs:
            attrs.append([b"".join(b"," + _key_value(k, v) for k, v in a) for a in self.graph.nodes.attrs[lo:hi]])
        attrs.append(self.call_sites[lo:hi].tolist())
        ids = self.ids[lo:hi].tolist()
        return [b',{"id":"%s","label":"%s","namespace":"%s"%s,"incomingEdges":%s,"attrs":[%s],"inputsMetadata":%s,'
                b'"outputsMetadata":%s}' % (i, i, ns, pin, edge, b"".join(a), ins, outs)
                for i, ns, pin, edge, a, ins, outs in zip(ids, namespaces, pins, edges, zip(*attrs), inputs, outputs)]

    def _layout(self, lo: int, hi: int) -> tuple[list[bytes], list[bytes], list[bytes]]:
        """Namespace, config and incomingEdges of rows [lo, hi), in row order (a row's layer is its parent's
        plus its own id; without data-flow edges a row's edge comes from its previous sibling, or its parent)."""
        ids = self.graph.nodes.ids
        layer_of, previous, parents, has_kids = self.layer_of, self.previous, self.parents, self.has_kids
        namespaces, pins, sources = [], [], []
        for row in range(lo, hi):
            parent = parents[row]
            outer = layer_of.get(parent, "")
            if row > 0 and has_kids[row]:
                own = ids[row].replace(_SEP, _SEP_STAND_IN)
                outer = layer_of[row] = f"{outer}{_SEP}{own}" if outer else own
                pins.append(_PIN)
            else:
                pins.append(b"")
            namespaces.append(outer)
            if self.incoming is not None:
                sources.append(self.incoming[0][self.incoming[1][row]:self.incoming[1][row + 1]].tolist())
            else:
                sources.append([previous.get(parent, parent)] if parent >= 0 else [])
                previous[parent] = row
        edges = [b"[" + b",".join(b'{"sourceNodeId":"%s","sourceNodeOutputId":"0","targetNodeInputId":"%d"}'
                                  % (self.ids[src], i) for i, src in enumerate(srcs)) + b"]" for srcs in sources]
        return json_escaped(namespaces), pins, edges


def _memo_texts(keys: Iterator[tuple], make: Callable[[tuple], bytes]) -> list[bytes]:
    """``make(key)`` of every key, made once per distinct key."""
    made: dict[tuple, bytes] = {}
    out = []
    for key in keys:
        text = made.get(key)
        if text is None:
            text = made[key] = make(key)
        out.append(text)
    return out


class _CompareAttrs:
    """``matched`` and, where the node has an npu row, the verdict attributes of each node of one run."""

    def __init__(self, report: CompareReport, graph: DumpGraph) -> None:
        m = report.matches
        self.is_npu = graph is report.npu
        self.partner = m.npu_to_bench if self.is_npu else m.bench_to_npu
        other = report.bench if self.is_npu else report.npu
        self.other_ids = _objects([*json_escaped(other.nodes.ids), b""])  # row -1: ""
        self.verdicts = report.verdicts
        self.names = {k: v.encode() for k, v in STATUS_NAMES.items()}

    def texts(self, lo: int, hi: int) -> list[bytes]:
        partner = self.partner[lo:hi]
        npu_rows = np.arange(lo, hi) if self.is_npu else partner
        matched = self.other_ids[partner].tolist()
        v = self.verdicts
        at = np.flatnonzero(npu_rows >= 0)
        rows = npu_rows[at]
        out = [b',{"key":"matched","value":"' + t + b'"}' for t in matched]
        names = self.names
        severity = float_reprs(v.severity[rows])
        reasons = json_escaped([v.reason[r] for r in rows.tolist()])
        for k, status, worst, sev, reason in zip(at.tolist(), v.status[rows].tolist(), v.worst[rows].tolist(),
                                                 severity, reasons):
            out[k] += (b',{"key":"verdict","value":"%s"},{"key":"worst","value":"%s"},{"key":"severity","value":"%s"},'
                       b'{"key":"reason","value":"%s"}' % (names[status], names[worst], sev, reason))
        return out


class _TensorItems:
    """The inputsMetadata and outputsMetadata lists of each node, and its parameters as attributes: every
    tensor's item made from its columns, for the tensors of a block of nodes at a time."""

    def __init__(self, graph: DumpGraph, document: CompareReport | DumpGraph) -> None:
        t = graph.tensors
        self.t = t
        is_output = np.isin(t.role, _OUTPUT_ROLES)
        owner = t.node.astype(np.int64) * 2 + is_output
        self.order = np.argsort(owner, kind="stable")
        self.bounds = np.searchsorted(owner[self.order], np.arange(2 * len(graph) + 1))
        self.pair_of = None
        self.report = document if isinstance(document, CompareReport) else None
        if self.report is not None and (graph is self.report.npu or graph is self.report.bench):
            self.pair_of = np.full(len(t), -1, np.int64)
            side = self.report.pairs.npu if graph is self.report.npu else self.report.pairs.bench
            self.pair_of[side] = np.arange(len(self.report.pairs))
        slot_codes, slots = string_codes(t.slot)
        dtype_codes, dtypes = string_codes(t.dtype)
        shape_codes, shapes = string_codes(t.shape)
        self.tags = [f"{_ROLE_NAMES[r]}.{s}" for r in range(max(_ROLE_NAMES) + 1) for s in slots]
        self.tag_codes = t.role.astype(np.int64) * max(len(slots), 1) + slot_codes
        self.dtype_codes, self.shape_codes = dtype_codes, shape_codes
        self.slots, self.dtypes, self.shapes = slots, dtypes, shapes
        self.texts_held = {name for name, values in (("md5", t.md5), ("value", t.value), ("file", t.file))
                           if any(string_codes(values)[1])}

    def _head(self, key: tuple[int, int, int]) -> bytes:
        tag_code, dtype, shape = key
        tag = self.tags[tag_code]
        role, slot = tag_code // max(len(self.slots), 1), self.slots[tag_code % max(len(self.slots), 1)]
        return orjson.dumps({"id": slot if role in _OUTPUT_ROLES else tag, "attrs": [
            {"key": "__tensor_tag", "value": tag}, {"key": "dtype", "value": self.dtypes[dtype]},
            {"key": "shape", "value": self.shapes[shape]}]})[:-2]

    def items(self, lo: int, hi: int) -> tuple[list[bytes], list[bytes], list[bytes]]:
        """(inputsMetadata, outputsMetadata, parameter attributes) texts of nodes [lo, hi)."""
        t = self.t
        bounds = self.bounds[2 * lo: 2 * hi + 1]
        rows = self.order[bounds[0]:bounds[-1]]
        row_list = rows.tolist()
        heads = _memo_texts(zip(self.tag_codes[rows].tolist(), self.dtype_codes[rows].tolist(),
                                self.shape_codes[rows].tolist()), self._head)
        stats = t.stats[rows]
        present = t.present[rows]
        columns = [heads]
        for s, name in enumerate(_STAT_NAMES):
            column = np.full(len(rows), b"", object)
            shown = np.flatnonzero(present[:, s])
            if len(shown):  # the column's items joined and split again: no Python per value
                prefix = b',{"key":"' + name.encode() + b'","value":"'
                joined = b"\n".join(float_reprs(stats[shown, s]))
                column[shown] = (prefix + joined.replace(b"\n", b'"}\n' + prefix) + b'"}').split(b"\n")
            columns.append(column.tolist())
        for name, values in (("md5", t.md5), ("value", t.value), ("file", t.file)):
            if name not in self.texts_held:  # no row has one
                continue
            texts = [values[k] for k in row_list]
            prefix = b',{"key":"' + name.encode() + b'","value":"'
            columns.append([prefix + e + b'"}' if v else b"" for v, e in zip(texts, json_escaped(texts))])
        pairs = self._param_pairs(rows)
        pair_texts = [b""] * len(rows)
        for k, attrs in pairs.items():
            pair_texts[k] = b"".join(b"," + _key_value(key, value) for key, value in attrs)
        columns.append(pair_texts)
        items = list(map(b"".join, zip(*columns, repeat(b"]}"))))
        cuts = (bounds - bounds[0]).tolist()
        lists = [b"[" + b",".join(items[a:b]) + b"]" for a, b in pairwise(cuts)]
        return lists[0::2], lists[1::2], self._params(lo, hi, rows, pairs)

    def _param_pairs(self, rows: np.ndarray) -> dict[int, list[tuple[str, str]]]:
        """How each parameter with a pair compares (its largest relative error and verdict), by position in
        `rows`."""
        if self.pair_of is None:
            return {}
        pairs = self.pair_of[rows]
        at = np.flatnonzero((pairs >= 0) & (self.t.role[rows] == _PARAM))
        report = self.report
        errs = float_reprs(report.pairs.metrics["rel_err"][pairs[at]])
        levels = report.verdicts.pair_level[pairs[at]].tolist()
        return {k: [("rel_err", e.decode()), ("verdict", STATUS_NAMES[lv])]
                for k, e, lv in zip(at.tolist(), errs, levels)}

    def _params(self, lo: int, hi: int, rows: np.ndarray, pairs: dict[int, list[tuple[str, str]]]) -> list[bytes]:
        """Each node's parameters as attributes (Model Explorer lists only inputs an edge reaches)."""
        t = self.t
        out = [b""] * (hi - lo)
        at = np.flatnonzero(t.role[rows] == _PARAM)
        stats = [v.decode() for v in float_reprs(t.stats[rows[at]])]
        present = t.present[rows[at]].tolist()
        for j, i in enumerate(at.tolist()):
            k = int(rows[i])
            tag = self.tags[self.tag_codes[k]]
            attrs = [("dtype", t.dtype[k]), ("shape", t.shape[k])]
            attrs += [(name, stats[4 * j + s]) for s, name in enumerate(_STAT_NAMES) if present[j][s]]
            attrs += [(name, value) for name, value in (("md5", t.md5[k]), ("value", t.value[k]), ("file", t.file[k]))
                      if value]
            attrs += pairs.get(i, [])
            out[int(t.node[k]) - lo] += b"," + _key_value(tag, _param_text(attrs))
        return out


def _param_text(attrs: list[tuple[str, str]]) -> str:
    """A parameter's metadata as one attribute value: ``dtype [shape] max=.. min=.. mean=.. norm=..``."""
    values = dict(attrs)
    head = " ".join(v for v in (values.get("dtype", ""), values.get("shape", "")) if v)
    rest = " ".join(f"{key}={value}" for key, value in attrs if key not in ("dtype", "shape"))
    return f"{head} {rest}".strip()


def _incoming(graph: DumpGraph) -> tuple[np.ndarray, np.ndarray] | None:
    """(edge sources sorted by destination, start of each row's slice), or None without data-flow edges: a graph's
    own, or the producer links a dump's statistics recover (`flow_edges`, the edges the viewer draws)."""
    edges = flow_edges(graph)
    if not len(edges):
        return None
    order = np.argsort(edges.dst, kind="stable")
    return edges.src[order], np.searchsorted(edges.dst[order], np.arange(len(graph) + 1))


def _write_node_data(f: BinaryIO, spec: NodeDataSpec, graphs: list[tuple[str, DumpGraph, np.ndarray | None]],
                     ids: dict[str, np.ndarray]) -> None:
    """ModelNodeData: ``{graph id: {"results": {node id: {"value": v}}, "thresholds" | "gradient": [...]}}``.

    A node's value is its npu row's (`ids`: each graph's escaped node ids); a bench node without one has
    the verdict "unmatched" in the verdict file and no value in the others; NaN is no value.
    """
    f.write(b"{")
    unmatched = float(VERDICT_VALUES[UNMATCHED]) if spec.name == "verdict" else np.nan
    for i, (graph_id, graph, npu_rows) in enumerate(graphs):
        f.write((b"," if i else b"") + orjson.dumps(graph_id) + b':{"results":{')
        rows = npu_rows if npu_rows is not None else np.arange(len(graph))
        values = np.where(rows >= 0, spec.values[rows] if len(rows) else rows, unmatched).astype(np.float64)
        shown = np.flatnonzero(~np.isnan(values))
        for start in range(0, len(shown), _NODE_DATA_ROWS):
            part = shown[start:start + _NODE_DATA_ROWS]
            texts = orjson.dumps(values[part], option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].split(b",")
            f.write((b"," if start else b"") + b",".join(
                b'"%s":{"value":%s}' % pair for pair in zip(ids[graph_id][part].tolist(), texts)))
        tail = {"thresholds": list(spec.thresholds)} if spec.thresholds else {"gradient": list(spec.gradient)}
        f.write(b"}," + orjson.dumps(tail)[1:])
    f.write(b"}")


_NODE_DATA_ROWS = 65536
"""Node-data entries written at a time."""


# --------------------------------------------------------------------------- validation


def validate_graph_collection(doc: Any, source: str = "<graphs>") -> None:
    """Check a graph collection against Model Explorer's documented input shape.

    GraphCollection ``{label: str, graphs: [Graph]}``; Graph ``{id: str, nodes: [GraphNode]}``;
    GraphNode ``{id: str, label: str, namespace?: str, subgraphIds?: [str], attrs?: [KeyValue],
    incomingEdges?: [IncomingEdge], outputsMetadata?/inputsMetadata?: [MetadataItem], style?, config?}``;
    KeyValue ``{key: str, value: str | {type: "node_ids", nodeIds: [str]}}``; MetadataItem
    ``{id: str, attrs?: [KeyValue]}``; IncomingEdge ``{sourceNodeId: str, sourceNodeOutputId?: str,
    targetNodeInputId?: str}``. Node ids are unique within a graph and edges name existing nodes.

    Raises
    ------
    DumpFormatError
        Naming the first field that does not fit.

    Examples
    --------
    >>> validate_graph_collection({"label": "x", "graphs": [{"id": "g", "nodes": [{"id": "a", "label": "a"}]}]})
    >>> validate_graph_collection({"label": "x", "graphs": [{"id": "g", "nodes": [{"id": 1, "label": "a"}]}]})
    Traceback (most recent call last):
    ...
    graphcmp.core.errors.DumpFormatError: <graphs>: graphs[0].nodes[0].id: expected a string, got int
    """
    _expect(doc, dict, source, "collection")
    _expect(doc.get("label"), str, source, "label")
    graphs = _expect(doc.get("graphs"), list, source, "graphs")
    for g, graph in enumerate(graphs):
        where = f"graphs[{g}]"
        _expect(graph, dict, source, where)
        _expect(graph.get("id"), str, source, f"{where}.id")
        nodes = _expect(graph.get("nodes"), list, source, f"{where}.nodes")
        ids = set()
        for n, node in enumerate(nodes):
            _validate_node(node, source, f"{where}.nodes[{n}]")
            if node["id"] in ids:
                raise DumpFormatError(f"{source}: {where}.nodes[{n}].id: {node['id']!r} is not unique")
            ids.add(node["id"])
        for n, node in enumerate(nodes):
            for e, edge in enumerate(node.get("incomingEdges", ())):
                if edge["sourceNodeId"] not in ids:
                    raise DumpFormatError(f"{source}: {where}.nodes[{n}].incomingEdges[{e}].sourceNodeId: "
                                          f"{edge['sourceNodeId']!r} is not a node of the graph")


def _validate_node(node: Any, source: str, where: str) -> None:
    _expect(node, dict, source, where)
    _expect(node.get("id"), str, source, f"{where}.id")
    _expect(node.get("label"), str, source, f"{where}.label")
    if "namespace" in node:
        _expect(node["namespace"], str, source, f"{where}.namespace")
    for s, sub in enumerate(_expect(node.get("subgraphIds", []), list, source, f"{where}.subgraphIds")):
        _expect(sub, str, source, f"{where}.subgraphIds[{s}]")
    _key_values(node.get("attrs", []), source, f"{where}.attrs")
    for e, edge in enumerate(_expect(node.get("incomingEdges", []), list, source, f"{where}.incomingEdges")):
        ew = f"{where}.incomingEdges[{e}]"
        _expect(edge, dict, source, ew)
        _expect(edge.get("sourceNodeId"), str, source, f"{ew}.sourceNodeId")
        for key in ("sourceNodeOutputId", "targetNodeInputId"):
            if key in edge:
                _expect(edge[key], str, source, f"{ew}.{key}")
    for field in ("outputsMetadata", "inputsMetadata"):
        for i, item in enumerate(_expect(node.get(field, []), list, source, f"{where}.{field}")):
            _expect(item, dict, source, f"{where}.{field}[{i}]")
            _expect(item.get("id"), str, source, f"{where}.{field}[{i}].id")
            _key_values(item.get("attrs", []), source, f"{where}.{field}[{i}].attrs")
    if "config" in node:
        _expect(_expect(node["config"], dict, source, f"{where}.config").get("pinToGroupTop", False), bool,
                source, f"{where}.config.pinToGroupTop")


def _key_values(items: Any, source: str, where: str) -> None:
    for i, item in enumerate(_expect(items, list, source, where)):
        _expect(item, dict, source, f"{where}[{i}]")
        _expect(item.get("key"), str, source, f"{where}[{i}].key")
        value = item.get("value")
        if isinstance(value, dict):
            if value.get("type") != "node_ids" or not isinstance(value.get("nodeIds"), list):
                raise DumpFormatError(f"{source}: {where}[{i}].value: expected text or a node_ids value")
        else:
            _expect(value, str, source, f"{where}[{i}].value")


def validate_node_data(doc: Any, graph_ids: Mapping[str, set[str]] | None = None, source: str = "<node data>") -> None:
    """Check node data against Model Explorer's documented shape (ModelNodeData keyed by graph id).

    GraphNodeData ``{results: {node id: {value: number, bgColor?: str, textColor?: str}},
    thresholds?: [{value: number, bgColor: str, textColor?: str}], gradient?: [{stop: 0..1, bgColor?,
    textColor?}]}``; a gradient needs stops 0 and 1. With `graph_ids` (graph id -> node ids), every
    graph and node named must exist.

    Raises
    ------
    DumpFormatError
        Naming the first field that does not fit.
    """
    _expect(doc, dict, source, "node data")
    for graph_id, data in doc.items():
        where = str(graph_id)
        if graph_ids is not None and graph_id not in graph_ids:
            raise DumpFormatError(f"{source}: {where}: no graph with this id")
        _expect(data, dict, source, where)
        for node_id, result in _expect(data.get("results"), dict, source, f"{where}.results").items():
            rw = f"{where}.results[{node_id!r}]"
            if graph_ids is not None and node_id not in graph_ids[graph_id]:
                raise DumpFormatError(f"{source}: {rw}: no node with this id")
            _expect(result, dict, source, rw)
            _number(result.get("value"), source, f"{rw}.value")
        for i, item in enumerate(_expect(data.get("thresholds", []), list, source, f"{where}.thresholds")):
            _number(_expect(item, dict, source, f"{where}.thresholds[{i}]").get("value"), source,
                    f"{where}.thresholds[{i}].value")
            _expect(item.get("bgColor"), str, source, f"{where}.thresholds[{i}].bgColor")
        gradient = _expect(data.get("gradient", []), list, source, f"{where}.gradient")
        stops = [_number(_expect(g, dict, source, f"{where}.gradient").get("stop"), source, f"{where}.gradient.stop")
                 for g in gradient]
        if gradient and (0 not in stops or 1 not in stops or any(not 0 <= s <= 1 for s in stops)):
            raise DumpFormatError(f"{source}: {where}.gradient: stops must lie in [0, 1] and include 0 and 1")
        if not gradient and not data.get("thresholds"):
            raise DumpFormatError(f"{source}: {where}: needs thresholds or a gradient to colour nodes")


def _expect(value: Any, kind: type, source: str, where: str) -> Any:
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise DumpFormatError(f"{source}: {where}: expected {_KIND_NAMES.get(kind, kind.__name__)}, "
                              f"got {type(value).__name__}")
    return value


def _number(value: Any, source: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DumpFormatError(f"{source}: {where}: expected a finite number, got {value!r}")
    return float(value)


_KIND_NAMES = {str: "a string", list: "a list", dict: "an object", bool: "true or false"}
