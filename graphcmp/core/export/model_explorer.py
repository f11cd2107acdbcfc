"""Writing a comparison for Google's Model Explorer: a graph collection JSON plus one node-data JSON per metric.

The shapes follow Model Explorer's documented input (``graph_builder.py``: GraphCollection, Graph,
GraphNode, KeyValue, MetadataItem, IncomingEdge; ``node_data_builder.py``: ModelNodeData keyed by
graph id, GraphNodeData with ``results`` and ``thresholds`` or ``gradient``) and are checked by
`validate_graph_collection` and `validate_node_data`.

Every graphcmp node becomes one Model Explorer node. The hierarchy is the ``namespace`` path of
its ancestors (the root excluded); a module's own node sits inside its own layer, pinned to the top
(``config.pinToGroupTop``), so the layer shows the module's data. Dumps record no data flow, so
each node's incoming edge is the previous sibling in execution order (a module's first child comes
from the module's own node): the layout reads top to bottom in call order. Runs read from graph
formats (GE, MindSpore IR) carry data-flow edges, which are written instead. Both files are written
node by node.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from graphcmp.core.errors import DumpFormatError, OutputError
from graphcmp.core.export.vis import ExportResult
from graphcmp.core.judge import STATUS_NAMES, UNMATCHED
from graphcmp.core.outputs import atomic_output
from graphcmp.core.readers.vis import ATTR_PRECISION
from graphcmp.core.records import Direction, DumpGraph, FrozenColumns, NodeKind, Role
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
        for spec in node_data_specs(document):
            path = folder / f"node_data_{spec.name}.json"
            with atomic_output(path) as f:
                _write_node_data(f, spec, graphs)
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
    count = 0
    for node in iter_model_explorer_nodes(graph, document):
        f.write((b"," if count else b"") + orjson.dumps(node))
        count += 1
    return count


def iter_model_explorer_nodes(graph: DumpGraph, document: CompareReport | DumpGraph) -> Iterator[dict[str, Any]]:
    """Model Explorer GraphNode records of one run, one at a time, in execution order."""
    nodes = graph.nodes
    layer_of: dict[int, str] = {}  # namespace of each container row (its own layer)
    has_kids = np.zeros(len(graph), bool)
    has_kids[nodes.parent[nodes.parent >= 0]] = True
    has_kids = has_kids.tolist()
    parents = nodes.parent.tolist()
    previous: dict[int, int] = {}  # last child seen per parent row
    tensors = _TensorTexts(graph, document)
    incoming = _incoming(graph)
    for row in range(len(graph)):
        parent = parents[row]
        own = nodes.ids[row].replace(_SEP, _SEP_STAND_IN)
        outer = layer_of.get(parent, "")
        container = row > 0 and has_kids[row]
        if container:
            layer_of[row] = f"{outer}{_SEP}{own}" if outer else own
        node: dict[str, Any] = {"id": nodes.ids[row], "label": nodes.ids[row],
                                "namespace": layer_of[row] if container else outer}
        if container:
            node["config"] = {"pinToGroupTop": True}
        if incoming is not None:
            sources = incoming[0][incoming[1][row]:incoming[1][row + 1]].tolist()
        else:
            sources = [previous.get(parent, parent)] if parent >= 0 else []
            previous[parent] = row
        node["incomingEdges"] = [{"sourceNodeId": nodes.ids[src], "sourceNodeOutputId": "0",
                                  "targetNodeInputId": str(i)} for i, src in enumerate(sources)]
        inputs, outputs, params = tensors.metadata(row)
        node["attrs"] = _attrs(graph, row, document, params)
        node["inputsMetadata"], node["outputsMetadata"] = inputs, outputs
        yield node


_BLOCK_NODES = 256
"""Nodes whose tensor texts are made at a time (whole columns at C speed, a few MB held)."""
_ROLE_NAMES = {int(r): r.name.lower() for r in Role}
_OUTPUT_ROLES = (int(Role.OUTPUT), int(Role.PARAM_GRAD))
_PARAM = int(Role.PARAM)


class _TensorTexts:
    """The metadata items of each node's tensors, their texts made for a block of nodes at a time."""

    def __init__(self, graph: DumpGraph, document: CompareReport | DumpGraph) -> None:
        self.graph = graph
        t = graph.tensors
        self.order = np.argsort(t.node, kind="stable")
        self.bounds = np.searchsorted(t.node[self.order], np.arange(len(graph) + 1))
        self.block = (0, 0)
        self.texts: dict[int, list[tuple[str, str]]] = {}
        self.pair_of = None
        if isinstance(document, CompareReport) and graph is document.npu:
            self.report = document
            self.pair_of = np.full(len(t), -1, np.int64)
            self.pair_of[document.pairs.npu] = np.arange(len(document.pairs))
        elif isinstance(document, CompareReport) and graph is document.bench:
            self.report = document
            self.pair_of = np.full(len(t), -1, np.int64)
            self.pair_of[document.pairs.bench] = np.arange(len(document.pairs))

    def metadata(self, row: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[str, str]]]:
        """(inputsMetadata, outputsMetadata, parameter attrs) of node `row`."""
        if not self.block[0] <= row < self.block[1]:
            self._make_block(row)
        t = self.graph.tensors
        inputs, outputs, params = [], [], []
        for k in self.order[self.bounds[row]:self.bounds[row + 1]].tolist():
            role, attrs = self.texts[k]
            tag = f"{_ROLE_NAMES[role]}.{t.slot[k]}"
            item = {"id": t.slot[k] if role in _OUTPUT_ROLES else tag,
                    "attrs": [{"key": "__tensor_tag", "value": tag}, *({"key": key, "value": value}
                                                                      for key, value in attrs)]}
            (outputs if role in _OUTPUT_ROLES else inputs).append(item)
            if role == _PARAM:  # Model Explorer lists only inputs an edge reaches: a parameter shows as an attribute
                params.append((tag, _param_text(attrs)))
        return inputs, outputs, params

    def _make_block(self, row: int) -> None:
        hi = min(row + _BLOCK_NODES, len(self.graph))
        rows = self.order[self.bounds[row]:self.bounds[hi]]
        t = self.graph.tensors
        stats = [list(map(_text, column)) for column in t.stats[rows].T.tolist()]
        present = t.present[rows].T.tolist()
        roles = t.role[rows].tolist()
        pairs = self.pair_of[rows].tolist() if self.pair_of is not None else [-1] * len(rows)
        texts = {}
        for i, k in enumerate(rows.tolist()):
            attrs = [("dtype", t.dtype[k]), ("shape", t.shape[k])]
            attrs += [(name, stats[s][i]) for s, name in enumerate(_STAT_NAMES) if present[s][i]]
            attrs += [(name, value) for name, value in (("md5", t.md5[k]), ("value", t.value[k]), ("file", t.file[k]))
                      if value]
            if pairs[i] >= 0 and roles[i] == _PARAM:
                attrs += _pair_attrs(self.report, pairs[i])
            texts[k] = (roles[i], attrs)
        self.texts = texts
        self.block = (row, hi)


_STAT_NAMES = ("max", "min", "mean", "norm")


def _pair_attrs(report: CompareReport, pair: int) -> list[tuple[str, str]]:
    """How a parameter compares: its largest relative error and its verdict."""
    return [("rel_err", _text(report.pairs.metrics["rel_err"][pair])),
            ("verdict", STATUS_NAMES[int(report.verdicts.pair_level[pair])])]


def _param_text(attrs: list[tuple[str, str]]) -> str:
    """A parameter's metadata as one attribute value: ``dtype [shape] max=.. min=.. mean=.. norm=..``."""
    values = dict(attrs)
    head = " ".join(v for v in (values.get("dtype", ""), values.get("shape", "")) if v)
    rest = " ".join(f"{key}={value}" for key, value in attrs if key not in ("dtype", "shape"))
    return f"{head} {rest}".strip()


def _incoming(graph: DumpGraph) -> tuple[np.ndarray, np.ndarray] | None:
    """(edge sources sorted by destination, start of each row's slice), or None without data-flow edges."""
    edges = graph.edges
    if not len(edges):
        return None
    order = np.argsort(edges.dst, kind="stable")
    return edges.src[order], np.searchsorted(edges.dst[order], np.arange(len(graph) + 1))


_NODE_KINDS = {int(k): k.name.lower() for k in NodeKind}
_DIRECTION_NAMES = {int(d): d.name.lower() for d in Direction}


def _attrs(graph: DumpGraph, row: int, document: CompareReport | DumpGraph,
           params: list[tuple[str, str]] = ()) -> list[dict[str, str]]:
    nodes = graph.nodes
    attrs = [("kind", _NODE_KINDS[int(nodes.kind[row])]), ("op", nodes.op[row]),
             ("direction", _DIRECTION_NAMES[int(nodes.direction[row])]),
             ("micro_step", str(int(nodes.micro_step[row])))]
    if isinstance(document, CompareReport):
        attrs.extend(_compare_attrs(document, graph is document.npu, row))
    attrs.extend(params)
    if nodes.attrs:
        attrs.extend(nodes.attrs[row])
    stack_row = int(nodes.stack[row])
    if stack_row >= 0 and graph.stacks[stack_row]:
        attrs.append(("call_site", _call_site(graph.stacks[stack_row])))
    return [{"key": k, "value": v} for k, v in attrs]


def _call_site(frames: tuple[str, ...]) -> str:
    """The first frame outside installed packages (the user's line), else the first frame.

    >>> _call_site(("File /v/site-packages/torch/nn/modules/sparse.py, line 1", "File /home/me/model.py, line 26"))
    'File /home/me/model.py, line 26'
    """
    return next((f for f in frames if "site-packages" not in f and "/lib/python" not in f), frames[0])


def _compare_attrs(report: CompareReport, is_npu: bool, row: int) -> list[tuple[str, str]]:
    m = report.matches
    partner = int(m.npu_to_bench[row] if is_npu else m.bench_to_npu[row])
    other = report.bench if is_npu else report.npu
    out = [("matched", other.nodes.ids[partner] if partner >= 0 else "")]
    npu_row = row if is_npu else partner
    if npu_row >= 0:
        v = report.verdicts
        out += [("verdict", STATUS_NAMES[int(v.status[npu_row])]), ("worst", STATUS_NAMES[int(v.worst[npu_row])]),
                ("severity", _text(v.severity[npu_row])), ("reason", v.reason[npu_row])]
    return out


def _text(value: float) -> str:
    value = float(value)
    if math.isnan(value):
        return "nan"
    return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def _write_node_data(f: BinaryIO, spec: NodeDataSpec, graphs: list[tuple[str, DumpGraph, np.ndarray | None]]) -> None:
    """ModelNodeData: ``{graph id: {"results": {node id: {"value": v}}, "thresholds" | "gradient": [...]}}``."""
    f.write(b"{")
    for i, (graph_id, graph, npu_rows) in enumerate(graphs):
        f.write((b"," if i else b"") + orjson.dumps(graph_id) + b':{"results":{')
        first = True
        values = spec.values
        for row, node_id in enumerate(graph.nodes.ids):
            npu_row = int(npu_rows[row]) if npu_rows is not None else row
            value = _row_value(spec, values, npu_row)
            if value is None:
                continue
            f.write((b"" if first else b",") + orjson.dumps(node_id) + b':{"value":' + orjson.dumps(value) + b"}")
            first = False
        tail = {"thresholds": list(spec.thresholds)} if spec.thresholds else {"gradient": list(spec.gradient)}
        f.write(b"}," + orjson.dumps(tail)[1:])
    f.write(b"}")


def _row_value(spec: NodeDataSpec, values: np.ndarray, npu_row: int) -> float | None:
    if npu_row < 0:
        return float(VERDICT_VALUES[UNMATCHED]) if spec.name == "verdict" else None
    value = float(values[npu_row])
    return None if math.isnan(value) else value


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
