"""A `DumpGraph` as plain JSON data (columns, as in memory) and back; documented in docs/format.md."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import numpy as np

from graphcmp.core.export.columns import encode_floats, pack_bits
from graphcmp.core.fields import Fields
from graphcmp.core.hierarchy import MAX_DEPTH, _jump_to_roots, rebuild_graph, too_deep
from graphcmp.core.records import Direction, DumpGraph, EdgeTable, NodeKind, NodeTable, Role, RunInfo, TensorTable
from graphcmp.core.shards import ShardTable

__all__ = ["ENUMS", "graph_from_dict", "graph_to_dict"]

ENUMS: dict[str, dict[str, int]] = {
    "kind": {k.name.lower(): int(k) for k in NodeKind},
    "direction": {d.name.lower(): int(d) for d in Direction},
    "role": {r.name.lower(): int(r) for r in Role},
}
"""Code tables of the integer columns, written into every document."""


def graph_to_dict(graph: DumpGraph) -> dict[str, Any]:
    """Plain data of one run: info, node, tensor and edge columns and stacks (numpy arrays stay arrays)."""
    nodes, tensors = graph.nodes, graph.tensors
    info = graph.info
    return {
        "info": {"path": info.path, "format": info.format, "framework": info.framework, "task": info.task,
                 "level": info.level, "rank": info.rank, "step": info.step, "missing": list(info.missing)},
        "nodes": {
            "id": nodes.ids, "parent": nodes.parent, "kind": nodes.kind, "op": nodes.op,
            "direction": nodes.direction, "micro_step": nodes.micro_step, "stack": nodes.stack,
            "has_data": nodes.has_data, "attrs": [[list(kv) for kv in a] for a in nodes.attrs],
        },
        "tensors": {
            "node": tensors.node, "role": tensors.role, "slot": tensors.slot, "dtype": tensors.dtype,
            "shape": tensors.shape, "stats": encode_floats(tensors.stats), "present": pack_bits(tensors.present),
            "md5": tensors.md5, "file": tensors.file, "value": tensors.value, "requires_grad": tensors.requires_grad,
        },
        "stacks": graph.stacks,
        "edges": {"src": graph.edges.src, "dst": graph.edges.dst, "control": graph.edges.control},
        **({"shards": _shards_to_dict(graph.shards)} if isinstance(graph.shards, ShardTable) else {}),
    }


def graph_from_dict(doc: dict[str, Any], source: str = "<document>", path: str = "run") -> DumpGraph:
    """Rebuild a `DumpGraph` from `graph_to_dict` data (as parsed from JSON).

    Parameters
    ----------
    doc : dict
        The run's object.
    source : str
        The file, for messages.
    path : str
        Where `doc` sits in the file (``"npu"`` in a report), for messages.

    Raises
    ------
    DumpFormatError
        If a field is missing, of the wrong type, or columns disagree in length (the message names the field).
    """
    f = Fields(doc, source, path)
    nodes, rows = _node_table(f.child("nodes"))
    tensors = _tensor_table(f.child("tensors"), len(nodes))
    stacks = tuple(_string_tuple(f, "stacks", s) for s in f.items("stacks", default=[]))
    f.child("nodes").rows("stack", len(nodes), len(stacks))  # each node's stack: a row of `stacks` or -1
    edges = _edge_table(f.child("edges"), len(nodes)) if f.has("edges") else None
    shards = _shard_table(f.child("shards"), len(tensors)) if f.has("shards") else None
    graph = rebuild_graph(_run_info(f.child("info")), nodes, tensors, stacks, edges, rows=rows)
    return graph if shards is None else replace(graph, shards=shards)


def _run_info(f: Fields) -> RunInfo:
    """The run's info; keys absent from older files take `RunInfo`'s defaults."""
    known = {fld.name for fld in fields(RunInfo)}
    unknown = sorted(set(f.doc) - known)
    if unknown:
        raise f.error(unknown[0], "is not a field of a run's info")
    values: dict[str, Any] = {}
    for name in ("path", "format", "framework", "task", "level"):
        if f.has(name):
            values[name] = f.value(name, str)
    for name in ("rank", "step"):
        if f.has(name):
            values[name] = f.value(name, int, type(None))
    if f.has("missing"):
        values["missing"] = f.strings("missing")
    if "path" not in values:
        raise f.error("path", "is missing")
    return RunInfo(**values)


def _node_table(f: Fields) -> tuple[NodeTable, dict[str, int]]:
    """The node columns, and the row of each node id (ids checked: strings, each once)."""
    ids, rows = f.id_column("id")
    n = len(ids)
    attrs = f.items("attrs", default=[])
    if attrs and len(attrs) != n:
        raise f.error("attrs", f"holds {len(attrs)} values, expected {n}")
    return NodeTable(
        ids=ids, parent=_parents(f, n), kind=f.codes("kind", n, map(int, NodeKind)), op=f.strings("op", n),
        direction=f.codes("direction", n, map(int, Direction)), micro_step=f.ints("micro_step", n, np.int16),
        stack=f.ints("stack", n), has_data=f.bools("has_data", n),
        attrs=tuple(tuple(_pair(f, "attrs", kv) for kv in _list(f, "attrs", a)) for a in attrs),
    ), rows


def _parents(f: Fields, n: int) -> np.ndarray:
    """Parent rows: each a row of the graph or -1, and a tree (a cycle would loop every walk up to the root)."""
    parent = f.rows("parent", n, n)
    if n:
        depth, top = _jump_to_roots(parent)
        if (looped := np.flatnonzero(parent[top] >= 0)).size:
            raise f.error("parent", f"forms a cycle through row {looped[0]}; a node cannot contain itself")
        if (deep := too_deep(depth)) is not None:
            raise f.error("parent", f"puts row {deep} {int(depth[deep])} levels deep, deeper than any run nests "
                                    f"({MAX_DEPTH})")
    return parent


def _tensor_table(f: Fields, nodes: int) -> TensorTable:
    slot = f.strings("slot")
    n = len(slot)
    return TensorTable(
        node=f.rows("node", n, nodes, none=False), role=f.codes("role", n, map(int, Role)), slot=slot,
        dtype=f.strings("dtype", n),
        shape=f.strings("shape", n), stats=f.floats("stats", n, 4), present=f.bit_rows("present", n, 4),
        md5=f.strings("md5", n), file=f.strings("file", n), value=f.strings("value", n),
        requires_grad=f.codes("requires_grad", n, (-1, 0, 1)) if f.has("requires_grad") else None,
    )


def _edge_table(f: Fields, nodes: int) -> EdgeTable:
    """Edge columns; absent in files written before edges existed (they load with no edges)."""
    src = f.ints("src")
    n = len(src)
    edges = EdgeTable(src=src, dst=f.ints("dst", n), control=f.bools("control", n))
    if n and (max(edges.src.max(), edges.dst.max()) >= nodes or min(edges.src.min(), edges.dst.min()) < 0):
        raise f.error("src", "names a node row outside the graph")
    return edges


def _list(f: Fields, key: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise f.error(key, f"holds a {type(value).__name__}, expected lists")
    return value


def _string_tuple(f: Fields, key: str, value: Any) -> tuple[str, ...]:
    values = _list(f, key, value)
    if not all(isinstance(v, str) for v in values):
        raise f.error(key, "holds something other than strings")
    return tuple(values)


def _pair(f: Fields, key: str, value: Any) -> tuple[str, str]:
    pair = _string_tuple(f, key, value)
    if len(pair) != 2:
        raise f.error(key, f"holds a list of {len(pair)} strings, expected [name, value] pairs")
    return pair  # type: ignore[return-value]


def _shards_to_dict(shards: ShardTable) -> dict[str, Any]:
    """The per-rank records of a merged graph (`ShardTable`) as columns."""
    return {
        "tensor": shards.tensor, "rank": shards.rank, "stats": encode_floats(shards.stats),
        "present": pack_bits(shards.present), "shape": shards.shape, "node": shards.node, "file": shards.file,
        "kind": shards.kind, "split_dim": shards.split_dim,
        **({"error": encode_floats(shards.error)} if shards.error is not None else {}),
    }


def _shard_table(f: Fields, tensors: int) -> ShardTable:
    tensor = f.ints("tensor")
    n = len(tensor)
    if n and (tensor.min() < 0 or tensor.max() >= tensors):
        raise f.error("tensor", "names a tensor row outside the graph")
    return ShardTable(
        tensor=tensor, rank=f.ints("rank", n), stats=f.floats("stats", n, 4), present=f.bit_rows("present", n, 4),
        shape=f.strings("shape", n), node=f.strings("node", n), file=f.strings("file", n),
        kind=f.ints("kind", tensors, np.int8), split_dim=f.ints("split_dim", tensors, np.int8),
        error=f.floats("error", n) if f.has("error") else None,
    )
