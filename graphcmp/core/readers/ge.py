"""Reader for GE (Ascend Graph Engine) graphs: ``ge_proto`` text or binary, ``atc --json`` output, ``ge_onnx`` text.

GE dumps its graphs (``DUMP_GE_GRAPH``) as the protobuf text of a ``ModelDef``
(``ge_proto_*_<stage>.txt``) and, with ``DUMP_GRAPH_FORMAT=onnx``, as an ONNX-like twin
(``ge_onnx_*.pbtxt``); ``atc --json`` writes the same ``ModelDef`` as JSON (maps as lists of
``{"key", "value"}``); the binary form is the serialized ``ModelDef``. Any of them may be gzipped.

Every form is first turned into plain `GeGraph`/`GeOp` records, so one function builds the
hierarchy: an op named ``a/b/c`` sits under scope modules ``a`` then ``a/b`` (an op named
like a scope is itself that scope's container), and the ops of a subgraph sit under the op
that names it in ``subgraph_name`` (``PartitionedCall``). Inputs ``"src:k"`` become data edges,
``"src:-1"`` control edges. The original framework ops of a fused op
(``_datadump_original_op_names`` and friends) become node attributes; tensor descs become
tensors with dtype and shape but no statistics.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from google.protobuf import text_format
from google.protobuf.message import DecodeError

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.inputs import read_input
from graphcmp.core.readers.proto_gen import ge_ir_pb2, ge_onnx_pb2
from graphcmp.core.readers.wire import opens_message
from graphcmp.core.records import Direction, DumpGraph, NodeKind, Role, RunInfo

__all__ = ["ATTR_NAMES", "GeGraph", "GeOp", "decode_ge", "parse_ge", "read_ge", "sniff"]

ATTR_NAMES: dict[str, str] = {
    "_datadump_original_op_names": "original_op_names",
    "_datadump_original_op_types": "original_op_types",
    "_datadump_is_multiop": "is_multiop",
    "_datadump_group_op_name": "group_op_name",
    "_datadump_sub_spliter_index": "sub_spliter_index",
    "fusion_scope": "fusion_scope",
    "pass_name": "pass_name",
    "_ge_attr_op_kernel_lib_name": "kernel_lib",
}
"""GE op attribute -> node attribute name; lists are joined with commas, empty values dropped."""

_ORIGIN_NAME, _ORIGIN_INDEX = "_datadump_origin_name", "_datadump_origin_output_index"
_HEAD_BYTES = 1 << 20
_TEXT_KEYS = re.compile(rb"^\s*(graph|name|version|custom_version|attr|ir_version|producer_name)\s*[:{]")
_ENUM_VALUE = re.compile(r"\b(dtype|val_type)(\s*:\s*)([A-Z][A-Z0-9_]*)\b")
_STAT_NAN = np.full(4, np.nan)


@dataclass(frozen=True, slots=True)
class GeOp:
    """One GE op, whatever file form it came from.

    ``inputs`` are GE's strings (``"src:k"``, ``"src:-1"`` for control, ``""`` unconnected);
    ``attrs`` are the kept attributes (`ATTR_NAMES`) as text; descs are (dtype, shape) pairs.
    """

    name: str
    type: str
    inputs: tuple[str, ...] = ()
    attrs: tuple[tuple[str, str], ...] = ()
    input_desc: tuple[tuple[str, str], ...] = ()
    output_desc: tuple[tuple[str, str], ...] = ()
    subgraphs: tuple[str, ...] = ()
    op_id: int | None = None


@dataclass(frozen=True, slots=True)
class GeGraph:
    """A graph of a model: graph 0 is the main graph, the others subgraphs named by ops."""

    name: str
    ops: tuple[GeOp, ...]


def sniff(path: str | os.PathLike[str]) -> bool:
    """True when `path` is a file holding a GE graph (text, JSON, ONNX-style text or binary; gzip or not)."""
    file = Path(path)
    if not file.is_file():
        return False
    try:
        head = _read(file, limit=_HEAD_BYTES)
    except DumpFormatError:
        return False
    form = _form(head)
    if form == "json":
        return b'"graph"' in head and b'"op"' in head
    if form == "text":
        return b"op {" in head and b"type:" in head
    if form == "onnx":
        return b'op_type: "ge:' in head
    if not opens_message(head, None if file.name.endswith(".gz") else file.stat().st_size, _MODEL_FIELDS):
        return False  # decided from the first bytes: a large file of anything else is never read whole
    return _binary_model(file) is not None


_MODEL_FIELDS = {(1, 2), (2, 0), (3, 2), (7, 2), (11, 2)}
"""(field number, wire type) of `ModelDef`'s fields: name, version, custom_version, graph, attr."""


def read_ge(path: str | os.PathLike[str]) -> DumpGraph:
    """Read a GE graph file (any form `sniff` accepts) into a `DumpGraph`.

    Raises
    ------
    DumpFormatError
        If the file is missing, not gzip when named ``.gz``, or not a GE graph in any known form.
    """
    file = Path(path)
    if not file.is_file():
        raise DumpFormatError(f"{file}: no such file" if not file.exists() else f"{file}: expected a GE graph file")
    graphs, notes = decode_ge(_read(file), source=str(file))
    return parse_ge(graphs, source=str(file), missing=notes)


def decode_ge(data: bytes, *, source: str = "<memory>") -> tuple[list[GeGraph], tuple[str, ...]]:
    """Decode the bytes of a GE graph file into `GeGraph` records, and notes on what was lost.

    Raises
    ------
    DumpFormatError
        If `data` is not a GE graph in any known form.
    """
    form = _form(data[:_HEAD_BYTES])
    notes: list[str] = []
    if form == "json":
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as err:
            raise DumpFormatError(f"{source}: not valid JSON ({err})") from err
        return _graphs_from_json(doc, source), ()
    if form == "onnx":
        return _graphs_from_onnx(_parse_text(data, ge_onnx_pb2.ModelProto(), source, notes)), tuple(notes)
    if form == "text":
        return _graphs_from_model(_parse_text(data, ge_ir_pb2.ModelDef(), source, notes)), tuple(notes)
    model = _decode_binary(data)
    if model is None:
        raise DumpFormatError(f"{source}: not a GE graph (neither ge_proto text, atc JSON, ge_onnx text "
                              "nor a binary ModelDef with ops)")
    return _graphs_from_model(model), ()


def parse_ge(
    graphs: Sequence[GeGraph], *, source: str = "<memory>", missing: Iterable[str] = ()
) -> DumpGraph:
    """Build the hierarchy of a GE model from its graphs (graph 0 is the main graph).

    Examples
    --------
    >>> g = parse_ge([GeGraph("main", (
    ...     GeOp("x", "Data", output_desc=(("DT_FLOAT", "[2]"),)),
    ...     GeOp("block/relu", "Relu", inputs=("x:0",), attrs=(("original_op_names", "relu1,relu2"),)),
    ...     GeOp("out", "NetOutput", inputs=("block/relu:0", "x:-1"))))])
    >>> g.nodes.ids
    ('DefaultModel', 'x', 'block', 'block/relu', 'out')
    >>> [(g.nodes.ids[s], g.nodes.ids[d], bool(c)) for s, d, c in zip(g.edges.src, g.edges.dst, g.edges.control)]
    [('x', 'block/relu', False), ('block/relu', 'out', False), ('x', 'out', True)]
    >>> dict(g.nodes.attrs[g.row("block/relu")])["original_op_names"]
    'relu1,relu2'
    """
    if not graphs or not any(graph.ops for graph in graphs):
        raise DumpFormatError(f"{source}: the GE model has no ops")
    names = Counter(graph.name for graph in graphs)
    if len(names) != len(graphs):
        twice = next(name for name, n in names.items() if n > 1)
        raise DumpFormatError(f"{source}: graph name {twice!r} is used {names[twice]} times; GE names each graph "
                              "of a model once (ops name the subgraphs they call)")
    for graph in graphs:
        _check_unique_names(graph, source)
    layout = _Layout(graphs)
    builder = HierarchyBuilder()
    notes = list(missing)
    seq = 0
    for graph in graphs:
        for op in graph.ops:
            node_id = layout.ids[graph.name][op.name]
            kind = NodeKind.MODULE if node_id in layout.containers else NodeKind.API
            attrs = (("id", str(op.op_id)),) * (op.op_id is not None) + op.attrs
            builder.add_node(node_id, kind, op.type, Direction.NONE, layout.parent(builder, graph.name, op.name),
                             seq, attrs=attrs)
            seq += 1
    _add_edges(builder, graphs, layout, notes)
    _add_descs(builder, graphs, layout)
    info = RunInfo(path=source, format="ge", framework="ge", task="structure", missing=tuple(notes))
    return builder.build(info, group_apis=False)


def _check_unique_names(graph: GeGraph, source: str) -> None:
    """Refuse a graph that names two ops alike: inputs name the op they read (``x:0``), so which one an input
    means is unknown, and keeping one would drop the other without a word."""
    counts = Counter(op.name for op in graph.ops)
    if len(counts) == len(graph.ops):
        return
    twice = [name for name, n in counts.items() if n > 1]
    more = f" (and {len(twice) - 1} other name(s))" if len(twice) > 1 else ""
    raise DumpFormatError(f"{source}: graph {graph.name!r}: op name {twice[0]!r} is used {counts[twice[0]]} "
                          f"times{more}; GE names each op of a graph once (inputs name the op they read)")


class _Layout:
    """Node ids, containers and scope parents of every op of a model."""

    def __init__(self, graphs: Sequence[GeGraph]) -> None:
        self.ids: dict[str, dict[str, str]] = {}
        seen: set[str] = set()
        for graph in graphs:
            names = {}
            for op in graph.ops:
                names[op.name] = op.name if op.name not in seen else f"{graph.name}/{op.name}"
                seen.add(names[op.name])
            self.ids[graph.name] = names
        self.owner: dict[str, str] = {}  # subgraph name -> id of the op naming it
        for graph in graphs:
            for op in graph.ops:
                for sub in op.subgraphs:
                    self.owner.setdefault(sub, self.ids[graph.name][op.name])
        self.main = graphs[0].name
        self.containers = set(self.owner.values())
        for graph in graphs:
            names = self.ids[graph.name]
            for op in graph.ops:
                scope = op.name.rpartition("/")[0]
                while scope:
                    if scope in names:
                        self.containers.add(names[scope])
                    scope = scope.rpartition("/")[0]

    def parent(self, builder: HierarchyBuilder, graph: str, op_name: str) -> str | None:
        """Parent id of an op: its scope's node, else the op owning its subgraph, else None (root)."""
        scope = op_name.rpartition("/")[0]
        return self._scope_node(builder, graph, scope) if scope else self._graph_node(builder, graph)

    def _graph_node(self, builder: HierarchyBuilder, graph: str) -> str | None:
        if graph == self.main:
            return None
        if graph in self.owner:
            return self.owner[graph]
        if graph not in builder:  # a subgraph no op names: shown as a module of its own
            builder.add_node(graph, NodeKind.MODULE, "subgraph", Direction.NONE, None, float("inf"),
                             has_data=False)
        return graph

    def _scope_node(self, builder: HierarchyBuilder, graph: str, scope: str) -> str | None:
        names = self.ids[graph]
        if scope in names:
            return names[scope]
        base = self._graph_node(builder, graph)
        node_id = f"{base}/{scope}" if base is not None else scope
        if node_id not in builder:
            outer = scope.rpartition("/")[0]
            parent = self._scope_node(builder, graph, outer) if outer else base
            builder.add_node(node_id, NodeKind.MODULE, scope.rpartition("/")[2], Direction.NONE, parent,
                             float("inf"), has_data=False)
        return node_id


def _add_edges(builder: HierarchyBuilder, graphs: Sequence[GeGraph], layout: _Layout, notes: list[str]) -> None:
    dangling = 0
    for graph in graphs:
        names = layout.ids[graph.name]
        for op in graph.ops:
            for text in op.inputs:
                if not text:
                    continue
                src, _, index = text.rpartition(":")
                if src not in names:
                    dangling += 1
                    continue
                builder.add_edge(names[src], names[op.name], control=index == "-1")
    if dangling:
        notes.append(f"{dangling} op input(s) name ops that are not in their graph; those edges are left out")


def _add_descs(builder: HierarchyBuilder, graphs: Sequence[GeGraph], layout: _Layout) -> None:
    node_ids: list[str] = []
    roles: list[int] = []
    slots: list[str] = []
    dtypes: list[str] = []
    shapes: list[str] = []
    for graph in graphs:
        names = layout.ids[graph.name]
        for op in graph.ops:
            for role, descs in ((Role.INPUT, op.input_desc), (Role.OUTPUT, op.output_desc)):
                for k, (dtype, shape) in enumerate(descs):
                    node_ids.append(names[op.name])
                    roles.append(int(role))
                    slots.append(str(k))
                    dtypes.append(dtype)
                    shapes.append(shape)
    n = len(node_ids)
    if n:
        builder.add_tensors(node_ids, roles, slots, dtype=dtypes, shape=shapes, stats=np.tile(_STAT_NAN, (n, 1)),
                            present=np.zeros((n, 4), bool), md5=[""] * n, file=[""] * n, value=[""] * n)


# --- reading and recognising the file forms ---------------------------------------------------------

def _read(file: Path, limit: int | None = None) -> bytes:
    """The file's bytes, inflated when gzipped (bounded: `read_input`), at most `limit` of them."""
    try:
        return read_input(file, limit=limit)
    except OSError as err:
        raise DumpFormatError(f"{file}: cannot read ({err})") from err


def _form(head: bytes) -> str:
    """"json", "text" (ge_proto), "onnx" (ge_onnx text) or "binary" for the first bytes of a file."""
    stripped = head.lstrip()
    if stripped[:1] == b"{":
        return "json"
    if _TEXT_KEYS.match(head):
        return "onnx" if b"op_type:" in head and b"\n  node {" in head else "text"
    return "binary"


def _binary_model(file: Path) -> ge_ir_pb2.ModelDef | None:
    try:
        return _decode_binary(_read(file))
    except DumpFormatError:
        return None


def _decode_binary(data: bytes) -> ge_ir_pb2.ModelDef | None:
    """The `ModelDef` in `data`, or None when the bytes do not decode to one with named, typed ops."""
    try:
        model = ge_ir_pb2.ModelDef.FromString(data)
    except DecodeError:
        return None
    ops = [op for graph in model.graph for op in graph.op]
    if not ops or not all(op.name and op.type for op in ops):
        return None
    return model


def _parse_text(data: bytes, message: Any, source: str, notes: list[str]) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DumpFormatError(f"{source}: not UTF-8 text ({err})") from err
    try:
        return text_format.Parse(text, message, allow_unknown_field=True, allow_unknown_extension=True)
    except RecursionError as err:
        raise DumpFormatError(f"{source}: not a GE graph in protobuf text form (nested too deeply)") from err
    except text_format.ParseError as err:
        if "has no value named" not in str(err):
            raise DumpFormatError(f"{source}: not a GE graph in protobuf text form ({err})") from err
    text, unknown = _blank_unknown_enums(text)
    notes.append(f"values this reader does not know were read as 0 (DT_UNDEFINED): {', '.join(sorted(unknown))}")
    try:
        return text_format.Parse(text, message.__class__(), allow_unknown_field=True, allow_unknown_extension=True)
    except (text_format.ParseError, RecursionError) as err:
        raise DumpFormatError(f"{source}: not a GE graph in protobuf text form ({err or 'nested too deeply'})") from err


def _blank_unknown_enums(text: str) -> tuple[str, set[str]]:
    """Replace enum names a newer GE wrote (``dtype: DT_NEW``) by 0 so the rest of the file still loads."""
    known = set(ge_ir_pb2.DataType.keys()) | set(ge_ir_pb2.AttrDef.ListValue.ListValueType.keys())
    unknown: set[str] = set()

    def blank(m: re.Match[str]) -> str:
        if m[3] in known:
            return m[0]
        unknown.add(m[3])
        return f"{m[1]}{m[2]}0"

    return _ENUM_VALUE.sub(blank, text), unknown


# --- ge_proto ModelDef (text or binary) --------------------------------------------------------------

def _graphs_from_model(model: ge_ir_pb2.ModelDef) -> list[GeGraph]:
    return [GeGraph(g.name, tuple(_op_from_proto(op) for op in g.op)) for g in model.graph]


def _op_from_proto(op: ge_ir_pb2.OpDef) -> GeOp:
    attrs = [(ATTR_NAMES[key], _proto_attr_text(op.attr[key])) for key in ATTR_NAMES if key in op.attr]
    attrs.extend(_origin_attrs(k, _proto_attr_text(d.attr[_ORIGIN_NAME]),
                               _proto_attr_text(d.attr[_ORIGIN_INDEX]) if _ORIGIN_INDEX in d.attr else "")
                 for k, d in enumerate(op.output_desc) if _ORIGIN_NAME in d.attr)
    return GeOp(
        name=op.name, type=op.type, inputs=tuple(op.input), attrs=tuple((k, v) for k, v in attrs if v),
        input_desc=tuple(_proto_desc(d) for d in op.input_desc),
        output_desc=tuple(_proto_desc(d) for d in op.output_desc),
        subgraphs=tuple(op.subgraph_name), op_id=op.id,
    )


def _proto_desc(desc: ge_ir_pb2.TensorDescriptor) -> tuple[str, str]:
    try:
        dtype = ge_ir_pb2.DataType.Name(desc.dtype)
    except ValueError:
        dtype = f"DT_{desc.dtype}"
    return dtype, _shape(desc.shape.dim)


def _proto_attr_text(attr: ge_ir_pb2.AttrDef) -> str:
    which = attr.WhichOneof("value")
    if which is None:
        return ""
    if which == "list":
        items = attr.list
        for name in ("s", "i", "f", "b", "dt"):
            values = getattr(items, name)
            if values:
                return ",".join(_scalar_text(v) for v in values)
        return ""
    return _scalar_text(getattr(attr, which))


def _origin_attrs(k: int, name: str, index: str) -> tuple[str, str]:
    return f"origin_output.{k}", f"{name}:{index}" if index else name


def _scalar_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _shape(dims: Iterable[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in dims) + "]"


# --- atc JSON ----------------------------------------------------------------------------------------

def _graphs_from_json(doc: Any, source: str) -> list[GeGraph]:
    graphs = doc.get("graph") if isinstance(doc, dict) else None
    if not isinstance(graphs, list) or not all(isinstance(g, dict) for g in graphs):
        raise DumpFormatError(f"{source}: no \"graph\" list of objects; is this the JSON of `atc --json`?")
    out = []
    for k, graph in enumerate(graphs):
        ops = graph.get("op") or []
        if not isinstance(ops, list) or not all(isinstance(op, dict) and "name" in op for op in ops):
            raise DumpFormatError(f"{source}: graph {k}: \"op\" is not a list of ops with a \"name\"")
        name = graph.get("name", f"graph_{k}")
        _expect(isinstance(name, str), source, f"graph {k}", "name", name, "a string")
        for j, op in enumerate(ops):
            _check_json_op(op, source, f"graph {k} op {j}")
        out.append(GeGraph(name, tuple(_op_from_json(op) for op in ops)))
    return out


_INT64 = (-(1 << 63), (1 << 63) - 1)
_LIST_FIELDS = ("s", "i", "f", "b", "dt")


def _check_json_op(op: Mapping[str, Any], source: str, where: str) -> None:
    """Check the types of the fields an op is read from (atc writes them as protobuf JSON)."""
    where = f"{where} ({op['name']!r:.60})" if isinstance(op.get("name"), str) else where
    _expect(isinstance(op["name"], str) and op["name"], source, where, "name", op["name"], "a non-empty string")
    _expect(isinstance(op.get("type", ""), str), source, where, "type", op.get("type"), "a string")
    for key in ("input", "subgraph_name"):
        value = op.get(key) or []
        _expect(isinstance(value, list) and all(isinstance(v, str) for v in value), source, where, key, value,
                "a list of strings")
    op_id = op.get("id", 0)
    _expect(not isinstance(op_id, bool) and isinstance(op_id, (int, str)) and _int64(op_id), source, where, "id",
            op_id, "a 64-bit integer")
    _check_attrs(op.get("attr"), source, where, "attr")
    for key in ("input_desc", "output_desc"):
        descs = op.get(key) or []
        _expect(isinstance(descs, list) and all(isinstance(d, dict) for d in descs), source, where, key, descs,
                "a list of tensor descs")
        for n, desc in enumerate(descs):
            dtype = desc.get("dtype", "DT_UNDEFINED")
            _expect(isinstance(dtype, str) or (isinstance(dtype, int) and not isinstance(dtype, bool)
                                               and _int64(dtype)), source, where, f"{key}[{n}].dtype", dtype,
                    "a dtype name or number")
            shape = desc.get("shape") or {}
            dims = shape.get("dim") or [] if isinstance(shape, dict) else None
            _expect(isinstance(dims, list) and all(not isinstance(d, bool) and isinstance(d, (int, str))
                                                   and _int64(d) for d in dims), source, where,
                    f"{key}[{n}].shape", shape, "{\"dim\": [64-bit integers]}")
            _check_attrs(desc.get("attr"), source, where, f"{key}[{n}].attr")


def _int64(value: int | str) -> bool:
    """True for an int (or the decimal text protobuf JSON writes for int64) within 64 bits."""
    if isinstance(value, str):
        if not re.fullmatch(r"-?\d{1,20}", value):
            return False
        value = int(value)
    return _INT64[0] <= value <= _INT64[1]


def _check_attrs(items: Any, source: str, where: str, key: str) -> None:
    ok = items is None or isinstance(items, dict) or (
        isinstance(items, list) and all(isinstance(i, dict) and isinstance(i.get("key", ""), str) for i in items))
    _expect(ok, source, where, key, items, "a list of {\"key\", \"value\"} objects")
    values = items.values() if isinstance(items, dict) else [i.get("value") for i in items or ()]
    for value in values:
        listed = value.get("list") if isinstance(value, dict) else None
        ok = value is None or (isinstance(value, dict) and (listed is None or (isinstance(listed, dict) and all(
            isinstance(listed.get(name, []), list) for name in _LIST_FIELDS))))
        _expect(ok, source, where, key, value, "attribute values as objects (a \"list\" of lists)")


def _expect(ok: bool, source: str, where: str, key: str, value: Any, expected: str) -> None:
    if not ok:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise DumpFormatError(f"{source}: {where}: \"{key}\" is {shown}, expected {expected}")


def _op_from_json(op: Mapping[str, Any]) -> GeOp:
    attrs = _json_attrs(op.get("attr"))
    kept = [(ATTR_NAMES[key], _json_value_text(attrs[key])) for key in ATTR_NAMES if key in attrs]
    outputs = op.get("output_desc") or []
    for k, desc in enumerate(outputs):
        desc_attrs = _json_attrs(desc.get("attr"))
        if _ORIGIN_NAME in desc_attrs:
            kept.append(_origin_attrs(k, _json_value_text(desc_attrs[_ORIGIN_NAME]),
                                      _json_value_text(desc_attrs.get(_ORIGIN_INDEX))))
    op_id = op.get("id")
    return GeOp(
        name=op["name"], type=op.get("type", ""), inputs=tuple(op.get("input") or ()),
        attrs=tuple((k, v) for k, v in kept if v),
        input_desc=tuple(_json_desc(d) for d in op.get("input_desc") or ()),
        output_desc=tuple(_json_desc(d) for d in outputs),
        subgraphs=tuple(str(s) for s in op.get("subgraph_name") or ()),
        op_id=int(op_id) if op_id is not None else 0,  # proto3 JSON leaves out a 0 and writes int64 as text
    )


def _json_attrs(items: Any) -> dict[str, Any]:
    """atc writes maps as ``[{"key": k, "value": v}, ...]``."""
    if isinstance(items, dict):
        return items
    return {item["key"]: item.get("value") for item in items or () if isinstance(item, dict) and "key" in item}


def _json_value_text(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    if "list" in value:
        items = value["list"] or {}
        for name in _LIST_FIELDS:
            if items.get(name):
                return ",".join(_scalar_text(v) for v in items[name])
        return ""
    for name in ("s", "i", "f", "b", "dt"):
        if name in value:
            return _scalar_text(value[name])
    return ""


def _json_desc(desc: Mapping[str, Any]) -> tuple[str, str]:
    dtype = desc.get("dtype", "DT_UNDEFINED")
    shape = (desc.get("shape") or {}).get("dim") or ()
    return (str(dtype) if not isinstance(dtype, int) else _proto_dtype_name(dtype)), _shape(shape)


def _proto_dtype_name(value: int) -> str:
    try:
        return ge_ir_pb2.DataType.Name(value)
    except ValueError:
        return f"DT_{value}"


# --- ge_onnx text ------------------------------------------------------------------------------------

def _graphs_from_onnx(model: ge_onnx_pb2.ModelProto) -> list[GeGraph]:
    """The main graph and its subgraphs (``op_type: "subgraph"`` nodes holding attribute ``graph``).

    The ONNX form does not name a subgraph on its ``PartitionedCall``; GE names that op
    ``<subgraph>_PartitionedCall_<k>``, which is how the owner is found here.
    """
    graphs: list[GeGraph] = []
    todo = [(model.graph.name or "graph", model.graph)]
    while todo:
        name, graph = todo.pop(0)
        subs = {node.name: attr.g for node in graph.node if node.op_type == "subgraph"
                for attr in node.attribute if attr.name == "graph"}
        ops = []
        for node in graph.node:
            if node.op_type == "subgraph":
                continue
            owned = tuple(s for s in subs if node.name.startswith(f"{s}_PartitionedCall"))
            ops.append(_op_from_onnx(node, owned))
        graphs.append(GeGraph(name, tuple(ops)))
        todo.extend(subs.items())
    return graphs


def _op_from_onnx(node: ge_onnx_pb2.NodeProto, subgraphs: tuple[str, ...]) -> GeOp:
    attrs = {a.name: a for a in node.attribute}
    kept = [(ATTR_NAMES[key], _onnx_text(attrs[key])) for key in ATTR_NAMES if key in attrs]
    outputs = _onnx_descs(attrs, "output_desc")
    kept.extend(_origin_attrs(k, _onnx_text(attrs[f"output_desc_attr_{_ORIGIN_NAME}:{k}"]),
                              _onnx_text(attrs.get(f"output_desc_attr_{_ORIGIN_INDEX}:{k}")))
                for k in range(len(outputs)) if f"output_desc_attr_{_ORIGIN_NAME}:{k}" in attrs)
    op_type = node.op_type.removeprefix("ge:")
    return GeOp(
        name=node.name, type=op_type, inputs=tuple(node.input), attrs=tuple((k, v) for k, v in kept if v),
        input_desc=_onnx_descs(attrs, "input_desc"), output_desc=outputs, subgraphs=subgraphs,
        op_id=attrs["id"].i if "id" in attrs else None,
    )


def _onnx_descs(attrs: Mapping[str, ge_onnx_pb2.AttributeProto], prefix: str) -> tuple[tuple[str, str], ...]:
    count = attrs[f"{prefix}_nums"].i if f"{prefix}_nums" in attrs else 0
    descs = []
    for k in range(count):
        dtype = attrs.get(f"{prefix}_dtype:{k}")
        shape = attrs.get(f"{prefix}_shape:{k}")
        descs.append((_onnx_text(dtype) or "DT_UNDEFINED", _shape(shape.ints) if shape is not None else "[]"))
    return tuple(descs)


def _onnx_text(attr: ge_onnx_pb2.AttributeProto | None) -> str:
    if attr is None:
        return ""
    for name in ("strings", "ints", "floats"):
        values = getattr(attr, name)
        if values:
            return ",".join(_scalar_text(v) for v in values)
    if attr.HasField("s"):
        return _scalar_text(attr.s)
    if attr.HasField("i"):
        return str(attr.i)
    if attr.HasField("f"):
        return str(attr.f)
    return ""
