"""A `DumpGraph` as plain JSON data (columns, as in memory) and back; documented in docs/format.md."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.export.columns import decode_floats, encode_floats, pack_bits, unpack_bits
from graphcmp.core.hierarchy import rebuild_graph
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
            "md5": tensors.md5, "file": tensors.file, "value": tensors.value,
        },
        "stacks": graph.stacks,
        "edges": {"src": graph.edges.src, "dst": graph.edges.dst, "control": graph.edges.control},
        **({"shards": _shards_to_dict(graph.shards)} if isinstance(graph.shards, ShardTable) else {}),
    }


def graph_from_dict(doc: dict[str, Any], source: str = "<document>") -> DumpGraph:
    """Rebuild a `DumpGraph` from `graph_to_dict` data (as parsed from JSON).

    Raises
    ------
    DumpFormatError
        If a required column is missing or columns disagree in length.
    """
    try:
        info = RunInfo(**{**doc["info"], "missing": tuple(doc["info"].get("missing", ()))})
        nodes = _node_table(doc["nodes"])
        tensors = _tensor_table(doc["tensors"])
        stacks = tuple(tuple(s) for s in doc.get("stacks", ()))
        edges = _edge_table(doc["edges"]) if "edges" in doc else None
        shards = _shard_table(doc["shards"]) if "shards" in doc else None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        raise DumpFormatError(f"{source}: graph document is missing or has a malformed field ({err})") from err
    if len(nodes.parent) != len(nodes.ids) or len(tensors.role) != len(tensors.slot):
        raise DumpFormatError(f"{source}: graph columns have different lengths")
    if edges is not None and len(edges) and (max(edges.src.max(), edges.dst.max()) >= len(nodes) or
                                             min(edges.src.min(), edges.dst.min()) < 0):
        raise DumpFormatError(f"{source}: an edge names a node row outside the graph")
    graph = rebuild_graph(info, nodes, tensors, stacks, edges)
    return graph if shards is None else replace(graph, shards=shards)


def _node_table(doc: dict[str, Any]) -> NodeTable:
    n = len(doc["id"])
    return NodeTable(
        ids=tuple(doc["id"]),
        parent=np.asarray(doc["parent"], np.int32).reshape(n),
        kind=np.asarray(doc["kind"], np.int8).reshape(n),
        op=tuple(doc["op"]),
        direction=np.asarray(doc["direction"], np.int8).reshape(n),
        micro_step=np.asarray(doc["micro_step"], np.int16).reshape(n),
        stack=np.asarray(doc["stack"], np.int32).reshape(n),
        has_data=np.asarray(doc["has_data"], bool).reshape(n),
        attrs=tuple(tuple(tuple(kv) for kv in a) for a in doc.get("attrs", ())),
    )


def _tensor_table(doc: dict[str, Any]) -> TensorTable:
    n = len(doc["slot"])
    stats = decode_floats(doc["stats"]).reshape(n, 4)
    return TensorTable(
        node=np.asarray(doc["node"], np.int32).reshape(n),
        role=np.asarray(doc["role"], np.int8).reshape(n),
        slot=tuple(doc["slot"]), dtype=tuple(doc["dtype"]), shape=tuple(doc["shape"]),
        stats=stats, present=unpack_bits(doc["present"], 4).reshape(n, 4),
        md5=tuple(doc["md5"]), file=tuple(doc["file"]), value=tuple(doc["value"]),
    )


def _edge_table(doc: dict[str, Any]) -> EdgeTable:
    """Edge columns; absent in files written before edges existed (they load with no edges)."""
    n = len(doc["src"])
    return EdgeTable(src=np.asarray(doc["src"], np.int32).reshape(n), dst=np.asarray(doc["dst"], np.int32).reshape(n),
                     control=np.asarray(doc["control"], bool).reshape(n))


def _shards_to_dict(shards: ShardTable) -> dict[str, Any]:
    """The per-rank records of a merged graph (`ShardTable`) as columns."""
    return {
        "tensor": shards.tensor, "rank": shards.rank, "stats": encode_floats(shards.stats),
        "present": pack_bits(shards.present), "shape": shards.shape, "node": shards.node, "file": shards.file,
        "kind": shards.kind, "split_dim": shards.split_dim,
        **({"error": encode_floats(shards.error)} if shards.error is not None else {}),
    }


def _shard_table(doc: dict[str, Any]) -> ShardTable:
    n = len(doc["tensor"])
    return ShardTable(
        tensor=np.asarray(doc["tensor"], np.int32).reshape(n), rank=np.asarray(doc["rank"], np.int32).reshape(n),
        stats=decode_floats(doc["stats"]).reshape(n, 4), present=unpack_bits(doc["present"], 4).reshape(n, 4),
        shape=tuple(doc["shape"]), node=tuple(doc["node"]), file=tuple(doc["file"]),
        kind=np.asarray(doc["kind"], np.int8), split_dim=np.asarray(doc["split_dim"], np.int8),
        error=decode_floats(doc["error"]).reshape(n) if "error" in doc else None,
    )
