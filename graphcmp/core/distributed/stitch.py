"""Pipeline merge: the stage runs of one model replica become one logical run in execution order.

Each stage (already merged over its tensor-parallel group) ran some layers of every micro-batch,
forward and backward, in its own schedule (1F1B, interleaved). The logical run is what one device
would have done: for each micro-batch, the forward of every virtual stage in order, then the
backward in reverse order. Stitching therefore

1. gives every call of a stage its **phase**: its top-level call's micro-batch and direction (a
   module's k-th call of a micro-batch-sized count), API calls between modules the phase of the
   module call before them (a receive: of the one after it, which uses what it got); and its
   **virtual stage** (model chunk c of stage s is c * PP + s);
2. makes ids **logical**: the model-chunk index of a model list is dropped, the first list index of a
   module path (``layers.<i>``) that several virtual stages number from 0 is offset by the entries
   earlier virtual stages hold, and API call counters are renumbered in logical execution order;
3. joins calls with the same logical id (the model's root and its containers run on every stage):
   inputs from the first virtual stage that ran it, outputs from the last, parameters from all;
4. puts a top-level backward module call under the backward call of its forward twin's parent when
   that parent is not itself top-level (stages whose container got no tensor input record their layers'
   backward calls at top level).

Each merged node keeps its provenance in `NodeTable.attrs` (`graphcmp.core.shards`): its source ranks,
its id in the first source rank's dump and, when one rank holds it, that rank.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from graphcmp.core.distributed.topology import LayoutError, model_chunk
from graphcmp.core.hierarchy import ROOT_ID, HierarchyBuilder
from graphcmp.core.records import Direction, DumpGraph, NodeKind, Role, RunInfo
from graphcmp.core.shards import RANK_ATTR, RANKS_ATTR, SOURCE_ID_ATTR, ShardTable

__all__ = ["StageRun", "stitch_stages"]

_API_ID = re.compile(r"^(?P<name>[A-Za-z_]\w*\..+)\.(?P<n>\d+)\.(?P<dir>forward|backward)$")
_MODULE_ID = re.compile(r"^(?P<prefix>Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\."
                        r"(?P<call>(?:forward|backward)\.\d+|parameters_grad(?:\.\d+)?)$")
_FORWARD, _BACKWARD = 0, 1
_RECEIVES = frozenset({"recv", "irecv", "batch_isend_irecv"})


@dataclass(frozen=True, slots=True)
class StageRun:
    """One pipeline stage of a replica, merged over its tensor-parallel group (shards attached)."""

    stage: int
    ranks: tuple[int, ...]
    graph: DumpGraph


@dataclass(slots=True)
class _Node:
    logical: str
    kind: int
    op: str
    direction: int
    parent: str | None
    seq: float
    sources: list[tuple[int, int]]  # (stage index, row) in logical order


def stitch_stages(stages: Sequence[StageRun], pp: int, info: RunInfo) -> DumpGraph:
    """Stitch the stage runs of one replica (stage order) into one logical run with shards.

    Parameters
    ----------
    stages : sequence of StageRun
        The replica's stages, first stage first.
    pp : int
        Pipeline stages (virtual stage of model chunk c on stage s: c * pp + s).
    info : RunInfo
        Run information of the result.

    Raises
    ------
    LayoutError
        If a stage holds no module calls to tell its micro-batches apart.
    """
    entries = []
    if len(stages) == 1 and not any(model_chunk(i) is not None for i in stages[0].graph.nodes.ids):
        kinds = stages[0].graph.nodes.kind  # one stage, one chunk: already in execution order
        entries = [(0, _FORWARD, 0, 0, row) for row in range(1, len(kinds)) if kinds[row] != NodeKind.GROUP]
    for index, stage in enumerate(stages if not entries else ()):
        phase, chunk = _phases(stage)
        for row, (m, d) in phase.items():
            v = chunk[row] * pp + stage.stage
            entries.append((m, d, v if d == _FORWARD else -v, index, row))
    entries.sort()
    virtual = {(index, row): (-key if d == _BACKWARD else key) for _, d, key, index, row in entries}
    renamer = _Renamer(stages, virtual, entries)
    nodes: dict[str, _Node] = {}
    for seq, (_, _, _, index, row) in enumerate(entries):
        graph = stages[index].graph
        logical = renamer.logical(index, row)
        node = nodes.get(logical)
        if node is None:
            node = nodes[logical] = _Node(logical, int(graph.nodes.kind[row]), graph.nodes.op[row],
                                          int(graph.nodes.direction[row]), None, float(seq), [])
        node.sources.append((index, row))
    for node in nodes.values():
        node.parent = renamer.parent(node, nodes)
    return _build(stages, nodes, info)


def _phases(stage: StageRun) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
    """(micro-batch, direction) and model chunk of every row but the root and group nodes."""
    g = stage.graph
    nodes = g.nodes
    kinds = nodes.kind
    parent = _flat_parents(g)
    top = _top_rows(parent)
    tops = [r for r in range(1, len(nodes)) if parent[r] == 0 and kinds[r] != NodeKind.GROUP]
    counts, calls = _call_counts(g, tops)
    micro = _micro_batches(g, tops, counts)
    if not micro and any(kinds[r] == NodeKind.API for r in tops):
        raise LayoutError(f"{g.info.path}: no module calls to tell the micro-batches apart (an API-level dump); "
                          "pipeline stages cannot be merged, compare the job rank by rank")
    top_phase: dict[int, tuple[int, int]] = {}
    top_chunk: dict[int, int] = {}
    last: tuple[tuple[int, int], int] | None = None
    pending = []
    for r in tops:
        if r in calls:
            phase = (micro.get(r, 0), calls[r][1])
            chunk = model_chunk(nodes.ids[r]) or 0
            last = (phase, chunk)
            for p in pending:
                top_phase[p], top_chunk[p] = phase, chunk
            pending = []
        elif last is None or nodes.op[r] in _RECEIVES:
            pending.append(r)  # a receive feeds the calls after it
            continue
        else:
            phase, chunk = last
        top_phase[r], top_chunk[r] = phase, chunk
    for p in pending:
        top_phase[p], top_chunk[p] = (0, _FORWARD), 0
    phase = {}
    chunk = {}
    for r in range(1, len(nodes)):
        if kinds[r] == NodeKind.GROUP:
            continue
        t = int(top[r])
        phase[r] = top_phase.get(t, (0, _FORWARD))
        chunk[r] = top_chunk.get(t, 0)
    return phase, chunk


def _flat_parents(g: DumpGraph) -> np.ndarray:
    parent = g.nodes.parent.astype(np.int64)
    in_group = (parent >= 0) & (g.nodes.kind[np.maximum(parent, 0)] == NodeKind.GROUP)
    parent[in_group] = 0
    return parent


def _top_rows(parent: np.ndarray) -> np.ndarray:
    """The top-level ancestor of every row (rows are pre-order, so a parent's answer is known first)."""
    top = np.arange(len(parent))
    for r in range(1, len(parent)):
        p = int(parent[r])
        top[r] = r if p <= 0 else top[p]
    return top


def _call_counts(g: DumpGraph, tops: list[int]) -> tuple[dict[tuple[str, int], int], dict[int, tuple[str, int, int]]]:
    """Calls per (module name, direction) at top level, and each top-level module call's parts."""
    counts: dict[tuple[str, int], int] = {}
    calls: dict[int, tuple[str, int, int]] = {}
    for r in tops:
        kind = g.nodes.kind[r]
        if kind not in (NodeKind.MODULE, NodeKind.PARAM_GRAD):
            continue
        node_id = g.nodes.ids[r]
        head, _, last = node_id.rpartition(".")
        k = int(last) if last.isdigit() else 0
        stem = head if last.isdigit() else node_id
        d = _BACKWARD if g.nodes.direction[r] == Direction.BACKWARD else _FORWARD
        calls[r] = (stem.rpartition(".")[0] if kind == NodeKind.MODULE else stem, d, k)
        key = (calls[r][0], d)
        counts[key] = counts.get(key, 0) + 1
    return counts, calls


def _micro_batches(g: DumpGraph, tops: list[int], counts: dict[tuple[str, int], int]) -> dict[int, int]:
    """Micro-batch of each top-level module call: its call counter over the calls one micro-batch makes.

    A chunk's micro-batch count is the number of calls of its first top-level forward module (the
    model's root); a module called n times as often is called n times per micro-batch.
    """
    _, calls = _call_counts(g, tops)
    per_chunk: dict[int, int] = {}
    for r in tops:
        if r in calls and calls[r][1] == _FORWARD:
            per_chunk.setdefault(model_chunk(g.nodes.ids[r]) or 0, counts[(calls[r][0], _FORWARD)])
    out = {}
    for r, (stem, d, k) in calls.items():
        batches = per_chunk.get(model_chunk(g.nodes.ids[r]) or 0) or counts[(stem, d)]
        n = counts.get((stem, d), 1)
        per_batch = max(n // batches, 1) if n % batches == 0 else 0
        out[r] = k // per_batch if per_batch else k * batches // max(n, 1)
    return out


class _Renamer:
    """Logical ids: model-chunk index dropped, stage-local list indices offset, API counters renumbered."""

    def __init__(self, stages: Sequence[StageRun], virtual: dict[tuple[int, int], int],
                 entries: list[tuple[int, int, int, int, int]]) -> None:
        self.stages = stages
        self.virtual = virtual
        self.offsets = self._list_offsets()
        self.counters: dict[tuple[int, int], str] = {}
        self._number_apis(entries)

    def _list_offsets(self) -> dict[tuple[int, str], int]:
        """(virtual stage, list path) -> offset of its indices, for lists several virtual stages number from 0."""
        found: dict[str, dict[int, set[int]]] = {}
        for (index, row), v in self.virtual.items():
            parts = _module_parts(self.stages[index].graph.nodes.ids[row])
            if parts is not None and parts[1] is not None:
                found.setdefault(parts[1], {}).setdefault(v, set()).add(parts[2])
        offsets: dict[tuple[int, str], int] = {}
        for prefix, by_stage in found.items():
            if len(by_stage) < 2:
                continue
            sets = list(by_stage.values())
            if all(a.isdisjoint(b) for i, a in enumerate(sets) for b in sets[i + 1:]):
                continue  # already numbered globally
            total = 0
            for v in sorted(by_stage):
                offsets[(v, prefix)] = total
                total += max(by_stage[v]) + 1
        return offsets

    def _number_apis(self, entries: list[tuple[int, int, int, int, int]]) -> None:
        next_number: dict[str, int] = {}
        numbers: dict[tuple[str, int, int], int] = {}
        for _, _, _, index, row in entries:
            node_id = self.stages[index].graph.nodes.ids[row]
            m = _API_ID.match(node_id)
            if m is None:
                continue
            key = (m["name"], self.stages[index].stage, int(m["n"]))
            if key not in numbers:
                numbers[key] = next_number.get(m["name"], 0)
                next_number[m["name"]] = numbers[key] + 1
            self.counters[(index, row)] = f"{m['name']}.{numbers[key]}.{m['dir']}"

    def logical(self, index: int, row: int) -> str:
        node_id = self.stages[index].graph.nodes.ids[row]
        if (index, row) in self.counters:
            return self.counters[(index, row)]
        parts = _module_parts(node_id)
        if parts is None:
            return node_id
        base, prefix, number, rest = parts
        if prefix is None:
            return base
        offset = self.offsets.get((self.virtual[(index, row)], prefix), 0)
        return f"{prefix}.{number + offset}{rest}"

    def parent(self, node: _Node, nodes: dict[str, _Node]) -> str | None:
        index, row = node.sources[0]
        graph = self.stages[index].graph
        up = _real_parent(graph, row)
        if up < 0:
            return None
        if up == 0 and node.kind == NodeKind.MODULE and node.direction == Direction.BACKWARD:
            nested = self._backward_container(index, row, nodes)
            if nested is not None:
                return nested
        return self.logical(index, up) if up > 0 else ROOT_ID

    def _backward_container(self, index: int, row: int, nodes: dict[str, _Node]) -> str | None:
        """The backward call of the forward twin's parent, when that parent is not top-level."""
        graph = self.stages[index].graph
        node_id = graph.nodes.ids[row]
        stem, _, counter = node_id.rpartition(".backward.")
        twin = f"{stem}.forward.{counter}"
        if not counter or twin not in graph:
            return None
        up = _real_parent(graph, graph.row(twin))
        if up <= 0 or _real_parent(graph, up) <= 0 or graph.nodes.kind[up] != NodeKind.MODULE:
            return None
        container = self.logical(index, up).replace(".forward.", ".backward.")
        return container if container in nodes else None


def _real_parent(graph: DumpGraph, row: int) -> int:
    """Parent row with group nodes skipped (0 for the root's children, -1 for the root)."""
    up = int(graph.nodes.parent[row])
    if up > 0 and graph.nodes.kind[up] == NodeKind.GROUP:
        return 0
    return up


def _module_parts(node_id: str) -> tuple[str, str | None, int, str] | None:
    """(id without model-chunk index, path up to its first list index, that index, the rest) of a module
    id; the prefix is None when the path has no list index. None for other ids.

    >>> _module_parts("Module.0.module.decoder.layers.1.mlp.MLP.forward.0")
    ('Module.module.decoder.layers.1.mlp.MLP.forward.0', 'Module.module.decoder.layers', 1, '.mlp.MLP.forward.0')
    """
    m = _MODULE_ID.match(node_id)
    if m is None:
        return None
    path = m["path"].split(".")
    if len(path) > 1 and path[0].isdigit():
        path = path[1:]
    base = f"{m['prefix']}.{'.'.join(path)}.{m['cls']}.{m['call']}"
    for i, part in enumerate(path):
        if part.isdigit():
            prefix = ".".join([m["prefix"], *path[:i]])
            rest = "." + ".".join([*path[i + 1:], m["cls"], m["call"]])
            return base, prefix, int(part), rest
    return base, None, 0, ""


def _build(stages: Sequence[StageRun], nodes: dict[str, _Node], info: RunInfo) -> DumpGraph:
    builder = HierarchyBuilder()
    picked: list[tuple[int, int]] = []  # (stage index, tensor row) per tensor added, in order
    picked_node: list[str] = []
    for node in nodes.values():
        if node.logical == ROOT_ID:
            continue
        first_index, first_row = node.sources[0]
        graph = stages[first_index].graph
        ranks = sorted({r for index, _ in node.sources for r in stages[index].ranks})
        attrs = [(RANKS_ATTR, ",".join(map(str, ranks))), (SOURCE_ID_ATTR, graph.nodes.ids[first_row])]
        if len(ranks) == 1:
            attrs.append((RANK_ATTR, str(ranks[0])))
        stack_row = int(graph.nodes.stack[first_row])
        builder.add_node(node.logical, NodeKind(node.kind), node.op, Direction(node.direction), node.parent, node.seq,
                         stack=graph.stacks[stack_row] if stack_row >= 0 else None,
                         has_data=any(bool(stages[i].graph.nodes.has_data[r]) for i, r in node.sources), attrs=attrs)
        for index, k in _node_tensors(stages, node):
            picked.append((index, k))
            picked_node.append(node.logical)
    _add_tensors(builder, stages, picked, picked_node)
    graph = builder.build(info)
    return replace(graph, shards=_stitched_shards(graph, stages, picked, picked_node))


def _node_tensors(stages: Sequence[StageRun], node: _Node) -> list[tuple[int, int]]:
    """Tensor rows a logical node takes: inputs from its first source, outputs from its last, parameters once."""
    by_source = [(index, stages[index].graph.tensor_rows_at(row).tolist())
                 for index, row in node.sources]
    if len(by_source) == 1:
        index, rows = by_source[0]
        return [(index, k) for k in rows]
    out: list[tuple[int, int]] = []
    seen: set[tuple[int, str]] = set()

    def take(roles: tuple[int, ...], sources: list[tuple[int, list[int]]], first_only: bool) -> None:
        for index, rows in sources:
            t = stages[index].graph.tensors
            mine = [k for k in rows if int(t.role[k]) in roles]
            for k in mine:
                key = (int(t.role[k]), t.slot[k])
                if key not in seen:
                    seen.add(key)
                    out.append((index, k))
            if mine and first_only:
                return

    take((Role.INPUT,), by_source, True)
    take((Role.OUTPUT,), by_source[::-1], True)
    take((Role.PARAM, Role.PARAM_GRAD), by_source, False)
    return out


def _add_tensors(builder: HierarchyBuilder, stages: Sequence[StageRun], picked: list[tuple[int, int]],
                 picked_node: list[str]) -> None:
    if not picked:
        return
    columns: dict[str, list] = {name: [] for name in ("role", "slot", "dtype", "shape", "md5", "file", "value")}
    stats, present, grad = [], [], []
    for index, k in picked:
        t = stages[index].graph.tensors
        columns["role"].append(int(t.role[k]))
        for name in ("slot", "dtype", "shape", "md5", "file", "value"):
            columns[name].append(getattr(t, name)[k])
        stats.append(t.stats[k])
        present.append(t.present[k])
        grad.append(int(t.requires_grad[k]))
    builder.add_tensors(picked_node, columns["role"], columns["slot"], dtype=columns["dtype"], shape=columns["shape"],
                        stats=np.array(stats), present=np.array(present), md5=columns["md5"], file=columns["file"],
                        value=columns["value"], requires_grad=grad)


def _stitched_shards(graph: DumpGraph, stages: Sequence[StageRun], picked: list[tuple[int, int]],
                     picked_node: list[str]) -> ShardTable:
    """The shards of the stitched run's tensor rows (the builder orders tensors by node row, stably)."""
    order = np.argsort(graph.rows_of(picked_node), kind="stable")
    source = np.array([index for index, _ in picked], np.int64)[order]
    tensor = np.array([k for _, k in picked], np.int64)[order]
    kinds, dims = np.zeros(len(order), np.int8), np.full(len(order), -1, np.int8)
    parts: list[tuple[np.ndarray, np.ndarray, ShardTable]] = []  # (new tensor row per shard, shard rows, table)
    for index, stage in enumerate(stages):
        new_rows = np.flatnonzero(source == index)
        if not len(new_rows):
            continue
        shards: ShardTable = stage.graph.shards  # type: ignore[assignment]
        ks = tensor[new_rows]
        kinds[new_rows], dims[new_rows] = shards.kind[ks], shards.split_dim[ks]
        starts = np.searchsorted(shards.tensor, ks)
        counts = np.searchsorted(shards.tensor, ks, "right") - starts
        owner = np.repeat(new_rows, counts)
        rows = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        parts.append((owner, rows, shards))
    owner = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
    by_owner = np.argsort(owner, kind="stable")

    def column(name: str) -> list:
        values = []
        for _, rows, shards in parts:
            col = getattr(shards, name)
            values.extend(col[rows] if isinstance(col, np.ndarray) else (col[r] for r in rows.tolist()))
        return values

    def strings(name: str) -> tuple[str, ...]:
        values = column(name)
        return tuple(values[i] for i in by_owner.tolist())

    stats = np.concatenate([shards.stats[rows] for _, rows, shards in parts]) if parts else np.zeros((0, 4))
    present = np.concatenate([shards.present[rows] for _, rows, shards in parts]) if parts else np.zeros((0, 4), bool)
    rank = np.concatenate([shards.rank[rows] for _, rows, shards in parts]) if parts else np.zeros(0, np.int32)
    return ShardTable(
        tensor=owner[by_owner].astype(np.int32), rank=rank[by_owner].astype(np.int32), stats=stats[by_owner],
        present=present[by_owner], shape=strings("shape"), node=strings("node"), file=strings("file"), kind=kinds,
        split_dim=dims,
    )
