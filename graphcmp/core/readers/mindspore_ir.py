"""Reader for MindSpore IR graphs: the ``.ir`` text and ``.pb`` (anf_ir ``ModelProto``) files of ``MS_DEV_SAVE_GRAPHS``.

Each CNode becomes an op node whose id is its full name with scope
(``Default/network-WithLossCell/_backbone-LeNet5/conv1-Conv2d/Conv2D-op0``); the scope segments
above it become module nodes (``conv1-Conv2d`` is the module ``Conv2d``), ``Gradients/...`` marks the
backward pass. ``# In file`` lines are the node's stack, the type line gives its input and output
tensors (dtype and shape, no statistics), and the node's operands become data edges.
``.ir`` files come in three layouts, all read here: frontend and backend graphs with
``# Fullname with scope`` lines, backend passes that only print ``# Scope`` (ids are then
numbered per scope and type, as MindSpore does), and the actor set (``final_actor_set_*.ir``),
whose kernel actors are the ops.

`parse_ir_nodes` and `add_scopes` are shared with the kernel-dump reader, which names its
kernels by the same full names.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from google.protobuf.message import DecodeError

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.inputs import read_input
from graphcmp.core.readers.proto_gen import anf_ir_pb2
from graphcmp.core.readers.wire import opens_message
from graphcmp.core.records import Direction, DumpGraph, NodeKind, Role, RunInfo

__all__ = ["MAX_SCOPE_DEPTH", "IrNode", "add_ir_node", "add_scopes", "ir_cut_short", "parse_ir_nodes",
           "parse_mindspore_ir", "parse_mindspore_pb", "read_mindspore_ir", "sniff"]

BACKWARD_ROOT = "Gradients"

_CNODE = re.compile(r"^  (?:%(\d+)\(([^)]*)\) = )?(.*)$")
_OP = re.compile(r"^(?:call @|%\d+\[)|^([A-Za-z_][\w.]*)\(")
_ACTOR = re.compile(r"^%(\d+) = kernel_graph\d*:([\w.]+)-op\d+\((.*)\)\s*$")
_TOTAL = re.compile(r"^# Total subgraphs: (\d+)")
_SUBGRAPH = re.compile(r"^subgraph @(\S+?)(?:\s+parent: \[.*\])?\(")
_REF = re.compile(r"\$\(@([^:]+):([^)]+)\)|%(\d+)\b(?!\()")
_TENSOR = re.compile(r"^<(?:Ref\[)?Tensor\[(\w+)\]\]?, \(([^()]*)\)")
_ACTOR_SHAPE = re.compile(r"<\(([^()]*)\)>|<NoShape>|<[^<>]*>")
_ACTOR_TYPE = re.compile(r"<(?:Ref\[)?Tensor\[(\w+)\]\]?>|<[^<>]*>")
_ANF_DTYPES = {1: "Bool", 2: "Int8", 3: "Int16", 4: "Int32", 5: "Int64", 6: "UInt8", 7: "UInt16", 8: "UInt32",
               9: "UInt64", 10: "Float16", 11: "Float32", 12: "Float64"}
_ANF_TENSOR = 14
_STAT_NAN = np.full(4, np.nan)


@dataclass(frozen=True, slots=True)
class IrNode:
    """One CNode (or kernel actor) of an IR graph, in file order.

    ``full_name`` is the node id (unique per graph); ``inputs`` are the full names of the
    CNodes it reads; ``input_types``/``output_types`` are (slot, dtype, shape) of its tensors.
    """

    full_name: str
    op: str
    inputs: tuple[str, ...] = ()
    input_types: tuple[tuple[str, str, str], ...] = ()
    output_types: tuple[tuple[str, str, str], ...] = ()
    stack: tuple[str, ...] = ()


def sniff(path: str | os.PathLike[str]) -> bool:
    """True for a MindSpore ``.ir`` text file or an anf_ir ``.pb`` file."""
    file = Path(path)
    if not file.is_file():
        return False
    try:
        head = read_input(file, limit=4096, gunzip=False)
    except (DumpFormatError, OSError):
        return False
    if head.startswith(b"# IR entry") or (head.startswith(b"%") and b"Actor" in head):
        return True
    if not (_text_free(head) and opens_message(head, file.stat().st_size, _MODEL_FIELDS)):
        return False  # decided from the first bytes: a large file of anything else is never read whole
    return _decode_pb(read_input(file, gunzip=False)) is not None


_MODEL_FIELDS = {(1, 0), (2, 2), (3, 0), (4, 2)}
"""(field number, wire type) of anf_ir's `ModelProto` fields: ir_version, domain, model_version, graph."""


def read_mindspore_ir(path: str | os.PathLike[str]) -> DumpGraph:
    """Read one ``.ir`` or ``.pb`` graph file into a `DumpGraph`.

    Raises
    ------
    DumpFormatError
        If the file is missing or not a MindSpore IR graph.
    """
    file = Path(path)
    if not file.is_file():
        raise DumpFormatError(f"{file}: no such file" if not file.exists() else f"{file}: expected an IR file")
    try:
        data = read_input(file, gunzip=False)
    except OSError as err:
        raise DumpFormatError(f"{file}: cannot read ({err.strerror or err})") from err
    if _text_free(data[:4096]):
        model = _decode_pb(data)
        if model is None:
            raise DumpFormatError(f"{file}: not a MindSpore IR file (neither .ir text nor an anf_ir .pb with nodes)")
        return parse_mindspore_pb(model, source=str(file))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DumpFormatError(f"{file}: not UTF-8 text ({err})") from err
    return parse_mindspore_ir(text, source=str(file))


def parse_mindspore_ir(text: str, *, source: str = "<memory>") -> DumpGraph:
    """Build the hierarchy of one ``.ir`` text.

    Examples
    --------
    >>> ir = '''# IR entry: @g
    ... subgraph @g() {
    ...   %0(x) = PrimFunc_ReLU(%para1_x) {instance name: relu}
    ...       : (<Tensor[Float32], (2)>) -> (<Tensor[Float32], (2)>)
    ...       # Fullname with scope: (Default/relu-ReLU/ReLU-op0)
    ...   Return(%0)
    ...       : (<Tensor[Float32], (2)>)
    ...       # Fullname with scope: (Default/Return-op0)
    ... }'''
    >>> g = parse_mindspore_ir(ir)
    >>> g.nodes.ids
    ('DefaultModel', 'Default', 'Default/relu-ReLU', 'Default/relu-ReLU/ReLU-op0', 'Default/Return-op0')
    >>> g.nodes.op[2:4], len(g.edges)
    (('ReLU', 'ReLU'), 1)
    """
    nodes = parse_ir_nodes(text, source=source)
    if not nodes:
        raise DumpFormatError(f"{source}: no graph nodes found; is this a MindSpore .ir file?")
    return _build(nodes, source, ir_cut_short(text, source))


def ir_cut_short(text: str, source: str = "<memory>") -> tuple[str, ...]:
    """A note when an ``.ir`` text is cut short (no final newline, fewer subgraphs than it declares, the last
    one never closed); empty when it is whole. The nodes before the cut are still read.

    >>> ir_cut_short("# IR entry: @g\\n# Total subgraphs: 2\\n\\nsubgraph @g() {\\n}\\n", "a.ir")
    ('a.ir: holds 1 of the 2 subgraphs it declares: the file is cut short; the nodes before the cut are kept',)
    """
    kept = "the file is cut short; the nodes before the cut are kept"
    if text and not text.endswith("\n"):
        return (f"{source}: ends in the middle of a line: {kept}",)
    lines = text.splitlines()
    starts = [k for k, line in enumerate(lines) if line.startswith("subgraph @")]
    declared = next((int(m[1]) for line in lines[:8] if (m := _TOTAL.match(line))), None)
    if declared is not None and len(starts) < declared:
        return (f"{source}: holds {len(starts)} of the {declared} subgraphs it declares: {kept}",)
    closes = [k for k, line in enumerate(lines) if line.startswith("}")]
    if starts and (not closes or closes[-1] < starts[-1]):
        return (f"{source}: its last subgraph never closes: {kept}",)
    return ()


def parse_mindspore_pb(model: anf_ir_pb2.ModelProto, *, source: str = "<memory>") -> DumpGraph:
    """Build the hierarchy of an anf_ir ``ModelProto`` (a ``ms_output_*.pb`` file)."""
    graph = model.graph
    if not graph.node:
        raise DumpFormatError(f"{source}: the anf_ir graph has no nodes")
    names = {node.name: _pb_full_name(node) for node in graph.node}
    nodes = []
    for node in graph.node:
        inputs = tuple(names[i.name] for i in node.input if i.name in names)
        nodes.append(IrNode(names[node.name], node.op_type.removeprefix("PrimFunc_"), inputs,
                            output_types=_pb_types(node.output_type)))
    return _build(nodes, source)


def parse_ir_nodes(text: str, *, source: str = "<memory>") -> list[IrNode]:
    """The CNodes (or kernel actors) of an ``.ir`` text in file order, ids made unique."""
    lines = text.splitlines()
    if lines and lines[0].startswith("%"):
        return _actor_nodes(lines)
    return _cnode_nodes(lines, source)


MAX_SCOPE_DEPTH = 1000
"""Deepest scope a node's full name may have. A scope level is a Cell called inside another Cell's construct, a
Python call each, and Python stops at 1000 nested calls by default: a deeper scope is no model's (and each level
adds a node whose id repeats the whole path above it, so 30,000 levels would take gigabytes)."""


def add_scopes(builder: HierarchyBuilder, full_name: str, seq: float, *, source: str = "<memory>") -> str | None:
    """Add the module nodes of the scope of `full_name` (if missing); return the parent id of the node.

    >>> b = HierarchyBuilder()
    >>> add_scopes(b, "Gradients/Default/fc-Dense/Grad_MatMul/MatMul-op1", 0)
    'Gradients/Default/fc-Dense/Grad_MatMul'
    >>> "Gradients/Default" in b
    True

    Raises
    ------
    DumpFormatError
        If the scope is nested deeper than `MAX_SCOPE_DEPTH` levels.
    """
    scope = full_name.rpartition("/")[0]
    if not scope:
        return None
    if (depth := scope.count("/") + 1) > MAX_SCOPE_DEPTH:
        raise DumpFormatError(f"{source}: node {full_name[:60] + '...'!r} has scopes nested deeper than "
                              f"{MAX_SCOPE_DEPTH} levels ({depth}); no model nests its cells so deep")
    missing: list[str] = []  # the scopes not in `builder` yet, innermost first: added outermost first
    at = scope
    while at and at not in builder:
        missing.append(at)
        at = at.rpartition("/")[0]
    parent = at or None
    for added in reversed(missing):
        segment = added.rpartition("/")[2]
        builder.add_node(added, NodeKind.MODULE, segment.rpartition("-")[2], _direction(added), parent, seq,
                         has_data=False)
        parent = added
    return scope


def add_ir_node(builder: HierarchyBuilder, node: IrNode, seq: float, *, attrs: Iterable[tuple[str, str]] = (),
                source: str = "<memory>") -> None:
    """Add one IR node (and its scope modules) to `builder`."""
    parent = add_scopes(builder, node.full_name, seq, source=source)
    builder.add_node(node.full_name, NodeKind.API, node.op, _direction(node.full_name), parent, seq,
                     stack=node.stack or None, attrs=attrs)


def _build(nodes: Sequence[IrNode], source: str, missing: tuple[str, ...] = ()) -> DumpGraph:
    builder = HierarchyBuilder()
    for seq, node in enumerate(nodes):
        add_ir_node(builder, node, seq, source=source)
    for node in nodes:
        for src in node.inputs:
            builder.add_edge(src, node.full_name)
    add_type_tensors(builder, nodes)
    info = RunInfo(path=source, format="mindspore_ir", framework="mindspore", task="structure", missing=missing)
    return builder.build(info, group_apis=False)


def add_type_tensors(builder: HierarchyBuilder, nodes: Sequence[IrNode]) -> None:
    """Add the typed inputs and outputs of `nodes` as tensors without statistics."""
    rows = [(node.full_name, int(role), slot, dtype, shape) for node in nodes
            for role, types in ((Role.INPUT, node.input_types), (Role.OUTPUT, node.output_types))
            for slot, dtype, shape in types]
    if not rows:
        return
    ids, roles, slots, dtypes, shapes = (list(col) for col in zip(*rows))
    n = len(ids)
    builder.add_tensors(ids, roles, slots, dtype=dtypes, shape=shapes, stats=np.tile(_STAT_NAN, (n, 1)),
                        present=np.zeros((n, 4), bool), md5=[""] * n, file=[""] * n, value=[""] * n)


def _direction(full_name: str) -> Direction:
    return Direction.BACKWARD if full_name.split("/", 1)[0] == BACKWARD_ROOT else Direction.FORWARD


# --- .ir text with CNodes ----------------------------------------------------------------------------

@dataclass(slots=True)
class _Pending:
    graph: str
    ref: str
    label: str
    op: str
    args: str
    full_name: str = ""
    scope: str = ""
    types: str = ""
    stack: list[str] | None = None


def _cnode_nodes(lines: list[str], source: str) -> list[IrNode]:
    pending: list[_Pending] = []
    graph = ""
    for number, line in enumerate(lines, 1):
        if line.startswith("subgraph @"):
            m = _SUBGRAPH.match(line)
            graph = m[1] if m else line
        elif line.startswith("  ") and not line.startswith("   ") and graph:
            m = _CNODE.match(line)
            ref, label, rest = m[1] or "", m[2] or "", m[3]
            op = _op_name(rest)
            if op is None:
                raise DumpFormatError(f"{source}:{number}: cannot read the operator of node line {line.strip()!r}")
            pending.append(_Pending(graph, ref, label, op, rest))
        elif pending and line.startswith("      "):
            _node_detail(pending[-1], line.strip())
        elif line.startswith("}"):
            graph = ""
    return _finish(pending)


def _op_name(rest: str) -> str | None:
    if rest.startswith(("call @", "%")):
        return "call"
    m = _OP.match(rest)
    if not m or not m[1]:
        return None
    return m[1].removeprefix("PrimFunc_")


def _node_detail(node: _Pending, text: str) -> None:
    if text.startswith("# Fullname with scope: ("):
        node.full_name = text[len("# Fullname with scope: ("):-1]
    elif text.startswith("# Scope: ("):
        node.scope = text[len("# Scope: ("):-1]
    elif text.startswith("# In file "):
        node.stack = [*(node.stack or []), text[2:]]
    elif text.startswith(": (") and not node.types:
        node.types = text[2:]


def _finish(pending: list[_Pending]) -> list[IrNode]:
    names = _unique_names(pending)
    by_ref = {}
    for node, name in zip(pending, names):
        by_ref[(node.graph, f"%{node.ref}")] = name
        if node.label:
            by_ref.setdefault((node.graph, node.label), name)
    out = []
    for node, name in zip(pending, names):
        inputs = []
        for m in _REF.finditer(node.args):
            key = (m[1], m[2]) if m[1] else (node.graph, f"%{m[3]}")
            if key in by_ref and by_ref[key] != name:
                inputs.append(by_ref[key])
        ins, outs = _split_types(node.types)
        out.append(IrNode(name, node.op, tuple(dict.fromkeys(inputs)), _tensor_types(ins), _tensor_types(outs),
                          tuple(node.stack or ())))
    return out


def _unique_names(pending: list[_Pending]) -> list[str]:
    """Full names; nodes without one are named ``<scope>/<Op>-op<k>``, numbered per scope and op as MindSpore does."""
    counters: Counter[tuple[str, str]] = Counter()
    used: set[str] = set()
    names = []
    for node in pending:
        name = node.full_name if "/" in node.full_name else ""
        if not name:
            scope = node.scope or (node.full_name and f"{node.graph}") or node.graph
            key = (scope, node.op)
            name = f"{scope}/{node.op}-op{counters[key]}"
            counters[key] += 1
        base, k = name, 1
        while name in used:
            name, k = f"{base}#{k}", k + 1
        used.add(name)
        names.append(name)
    return names


def _split_types(types: str) -> tuple[list[str], list[str]]:
    """``(<a>, <b>) -> (<c>)`` into its input and output items (top-level commas only)."""
    if not types:
        return [], []
    left, arrow, right = types.partition(") -> (")
    if not arrow:
        return [], []
    return _items(left[1:]), _items(right[:-1] if right.endswith(")") else right)


def _items(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:k].strip())
            start = k + 1
    tail = text[start:].strip()
    return [*items, tail] if tail else items


def _tensor_types(items: list[str]) -> tuple[tuple[str, str, str], ...]:
    out = []
    for k, item in enumerate(items):
        m = _TENSOR.match(item)
        if m:
            out.append((str(k), m[1], f"[{m[2]}]"))
    return tuple(out)


# --- actor set .ir -------------------------------------------------------------------------------------

def _actor_nodes(lines: list[str]) -> list[IrNode]:
    """Kernel actors (``%3 = kernel_graph0:Conv2D-op0(%2[0], ...)``) with their ``# AID`` full names."""
    blocks: list[tuple[str, str, str, dict[str, str]]] = []
    for line in lines:
        m = _ACTOR.match(line)
        if m:
            blocks.append((m[1], m[2], m[3], {}))
        elif line.startswith("%"):
            blocks.append(("", "", "", {}))  # an actor that is no kernel
        elif blocks and line.startswith("\t# ") and " : " in line:
            key, _, value = line[3:].partition(" : ")
            blocks[-1][3][key.strip()] = value.strip()
    names: dict[str, str] = {}
    out = []
    for ref, op, args, details in blocks:
        if not ref:
            continue
        name = details.get("AID", "").partition("_")[2] or f"kernel/{op}-{ref}"
        names[ref] = name
        inputs = tuple(names[r] for r in re.findall(r"%(\d+)\[", args) if r in names)
        ins, outs = _actor_types(details.get("shape", ""), details.get("type", ""))
        out.append(IrNode(name, op, inputs, ins, outs))
    return out


def _actor_types(shapes: str, types: str) -> tuple[tuple[tuple[str, str, str], ...], ...]:
    result = []
    for shape_part, type_part in zip(shapes.split("->"), types.split("->")):
        dims = [m[1] for m in _ACTOR_SHAPE.finditer(shape_part)]
        kinds = [m[1] for m in _ACTOR_TYPE.finditer(type_part)]
        result.append(tuple((str(k), dtype, f"[{d}]") for k, (d, dtype) in enumerate(zip(dims, kinds))
                            if dtype and d is not None))
    while len(result) < 2:
        result.append(())
    return result[0], result[1]


# --- anf_ir .pb -----------------------------------------------------------------------------------------

def _text_free(head: bytes) -> bool:
    """True when the bytes are binary (control characters), as a .pb is and an .ir text never is."""
    return any(c < 9 or 13 < c < 32 for c in head[:512])


def _decode_pb(data: bytes) -> anf_ir_pb2.ModelProto | None:
    try:
        model = anf_ir_pb2.ModelProto.FromString(data)
    except DecodeError:
        return None
    nodes = model.graph.node
    if not nodes or not all(n.name and n.op_type for n in nodes):
        return None
    return model


def _pb_full_name(node: anf_ir_pb2.NodeProto) -> str:
    if node.full_name:
        return node.full_name
    scope = node.scope or "Default"
    return f"{scope}/{node.op_type}-{node.name}"


def _pb_types(type_proto: anf_ir_pb2.TypeProto) -> tuple[tuple[str, str, str], ...]:
    if type_proto.data_type != _ANF_TENSOR or not type_proto.HasField("tensor_type"):
        return ()
    tensor = type_proto.tensor_type
    dtype = _ANF_DTYPES.get(tensor.elem_type, f"dt{tensor.elem_type}")
    shape = "[" + ", ".join(str(d.size) for d in tensor.shape.dim) + "]"
    return (("0", dtype, shape),)
