"""A parallel job's layout: tensor-parallel groups, pipeline stages in order, data-parallel replicas.

The layout is read from the communication calls the ranks recorded (msprobe writes each call's
``group`` with its ``group_ranks``, and the peer of every send and receive):

* **TP groups**: the groups of the ``all_reduce`` calls made inside modules (a RowParallelLinear's
  forward, a ColumnParallelLinear's backward);
* **PP groups**: ranks joined by top-level sends and receives, in stage order: a stage's first
  communication receives the activation from the stage before it, the first stage starts by sending
  (ranks that all start by sending exchange data, as in a ring, and are no pipeline);
* **VPP**: the model-chunk index msprobe puts in module ids of a model list (``Module.<chunk>.``);
* **DP**: the rest: ranks of equal TP position and stage are replicas of one another.

`LayoutSpec` is what a user states (``tp=2,pp=2[,vpp=2][,order=tp-cp-ep-dp-pp]``); it overrides what
is detected. What cannot be merged (expert or context parallelism, sequence-parallel linears, groups
naming ranks without a dump) raises `LayoutError` with one line naming the ranks and nodes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from graphcmp.core.distributed.links import _batch_ops, _group, _int
from graphcmp.core.errors import GraphcmpError
from graphcmp.core.records import DumpGraph, NodeKind, Role

__all__ = [
    "CommRecord",
    "LayoutContradiction",
    "LayoutError",
    "LayoutSpec",
    "ParallelLayout",
    "comm_records",
    "detect_layout",
    "model_chunk",
    "parse_layout",
]

P2P_SEND = frozenset({"send", "isend"})
P2P_RECV = frozenset({"recv", "irecv"})
P2P = P2P_SEND | P2P_RECV | {"batch_isend_irecv"}
TP_REDUCE = frozenset({"all_reduce"})
_SHARDED_COLLECTIVES = frozenset({"all_gather", "all_gather_into_tensor", "_all_gather_base", "reduce_scatter",
                                  "reduce_scatter_tensor", "_reduce_scatter_base"})
_ALL_TO_ALL = frozenset({"all_to_all", "all_to_all_single"})
_NOT_COMM = frozenset({"init_process_group", "new_group", "destroy_process_group", "get_rank", "get_world_size",
                       "is_initialized", "barrier", "barrier_fake"})
_ORDER_DIMS = ("tp", "cp", "ep", "dp", "pp")
_CHUNK = re.compile(r"^(Module|Cell)\.(\d+)\.")


class LayoutError(GraphcmpError):
    """A parallel job whose ranks cannot be merged into one logical graph (or a bad layout statement)."""


class LayoutContradiction(LayoutError):
    """A stated layout the dump contradicts: other sizes than its ranks, or other groups than its calls record."""


@dataclass(frozen=True, slots=True)
class CommRecord:
    """One communication call of one rank, with what the layout needs from it."""

    node: str
    row: int
    op: str
    group: tuple[int, ...]  # group_ranks as recorded; () for the default (world) group
    peers: tuple[tuple[str, int], ...]  # p2p: ("send" | "recv", peer rank) per transfer
    module_row: int  # innermost enclosing module call, -1 at top level
    in_backward: bool  # that module call is a backward call


@dataclass(frozen=True, slots=True)
class LayoutSpec:
    """A layout as a user states it; None leaves a size to detection."""

    tp: int | None = None
    pp: int | None = None
    vpp: int | None = None
    dp: int | None = None
    cp: int = 1
    ep: int = 1
    order: str = "tp-cp-ep-dp-pp"


@dataclass(frozen=True, slots=True)
class ParallelLayout:
    """The groups of one job.

    Attributes
    ----------
    ranks : tuple of int
        Ranks with a dump.
    tp_groups : tuple of tuple of int
        Tensor-parallel groups, ranks ascending (TP position = index in the group).
    pp_groups : tuple of tuple of int
        Pipeline groups, ranks in stage order; empty without pipeline parallelism.
    vpp : int
        Model chunks per rank (virtual pipeline stages).
    source : str
        ``"detected"`` or ``"stated"``.
    notes : tuple of str
        Where a stated layout disagrees with the recorded groups.
    """

    ranks: tuple[int, ...]
    tp_groups: tuple[tuple[int, ...], ...]
    pp_groups: tuple[tuple[int, ...], ...] = ()
    vpp: int = 1
    source: str = "detected"
    notes: tuple[str, ...] = ()
    _stage: dict[int, int] = field(default_factory=dict, repr=False, compare=False)

    @property
    def tp(self) -> int:
        return max((len(g) for g in self.tp_groups), default=1)

    @property
    def pp(self) -> int:
        return max((len(g) for g in self.pp_groups), default=1)

    @property
    def dp(self) -> int:
        return max(len(self.ranks) // (self.tp * self.pp), 1)

    def stage(self, rank: int) -> int:
        """Pipeline stage of `rank` (0 without pipeline parallelism)."""
        if not self._stage:
            for group in self.pp_groups:
                self._stage.update({r: s for s, r in enumerate(group)})
        return self._stage.get(rank, 0)

    def replicas(self) -> list[list[tuple[int, ...]]]:
        """Model replicas (data-parallel copies), each the TP group of every stage in stage order."""
        groups = {r: g for g in self.tp_groups for r in g}
        stages: list[list[tuple[int, ...]]] = [[] for _ in range(self.pp)]
        for group in sorted(set(self.tp_groups)):
            stages[self.stage(group[0])].append(group)
        replicas = [[group] for group in stages[0]]
        for s in range(1, self.pp):
            for replica in replicas:
                nxt = self._next_stage_rank(replica[-1][0], s)
                replica.append(groups.get(nxt, ()) if nxt is not None else ())
        return [r for r in replicas if all(r)] or [[g] for g in stages[0]]

    def _next_stage_rank(self, rank: int, stage: int) -> int | None:
        for group in self.pp_groups:
            if rank in group and stage < len(group):
                return group[stage]
        return None

    def describe(self) -> str:
        """One line: sizes, then the groups.

        >>> ParallelLayout((0, 1, 2, 3), ((0, 1), (2, 3)), ((0, 2), (1, 3))).describe()
        'tp=2 pp=2 vpp=1 dp=1 (4 ranks; TP groups [0,1] [2,3]; PP groups [0,2] [1,3]; detected)'
        """
        def groups(gs: tuple[tuple[int, ...], ...]) -> str:
            shown = " ".join("[" + ",".join(map(str, g)) + "]" for g in gs[:3])
            return shown if len(gs) <= 3 else f"{shown} ... ({len(gs)} groups)"
        parts = [f"{len(self.ranks)} ranks", f"TP groups {groups(self.tp_groups)}"]
        if self.pp_groups:
            parts.append(f"PP groups {groups(self.pp_groups)}")
        parts.append(self.source)
        return f"tp={self.tp} pp={self.pp} vpp={self.vpp} dp={self.dp} ({'; '.join(parts)})"

    def to_dict(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "vpp": self.vpp, "dp": self.dp, "ranks": list(self.ranks),
                "tp_groups": [list(g) for g in self.tp_groups], "pp_groups": [list(g) for g in self.pp_groups],
                "source": self.source, "notes": list(self.notes), "text": self.describe()}


def parse_layout(text: str) -> LayoutSpec:
    """Parse ``tp=2,pp=2[,vpp=2][,dp=1][,cp=1][,ep=1][,order=tp-cp-ep-dp-pp]``.

    Raises
    ------
    LayoutError
        If a part is not ``name=value``, a size is not a positive integer, or the order is not a
        permutation of tp, cp, ep, dp, pp.

    Examples
    --------
    >>> parse_layout("tp=2,pp=4,vpp=2")
    LayoutSpec(tp=2, pp=4, vpp=2, dp=None, cp=1, ep=1, order='tp-cp-ep-dp-pp')
    """
    values: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        name = name.strip().lower()
        if not eq or name not in ("tp", "pp", "vpp", "dp", "cp", "ep", "order"):
            raise LayoutError(f"layout {text!r}: {part!r} is not one of tp=, pp=, vpp=, dp=, cp=, ep=, order=")
        if name == "order":
            dims = value.strip().lower().split("-")
            if sorted(dims) != sorted(_ORDER_DIMS):
                raise LayoutError(f"layout {text!r}: order must list tp, cp, ep, dp and pp once each, "
                                  "fastest first (Megatron's default is tp-cp-ep-dp-pp)")
            values["order"] = "-".join(dims)
        else:
            if not value.strip().isdigit() or int(value) < 1:
                raise LayoutError(f"layout {text!r}: {name} must be a positive integer, got {value!r}")
            values[name] = int(value)
    return LayoutSpec(**values)  # type: ignore[arg-type]


def comm_records(graph: DumpGraph) -> list[CommRecord]:
    """The communication calls of one rank's run in execution order (``Distributed.*`` API calls)."""
    nodes = graph.nodes
    rows = [r for r, node_id in enumerate(nodes.ids) if node_id.startswith("Distributed.")
            and nodes.kind[r] == NodeKind.API and nodes.op[r] not in _NOT_COMM]
    if not rows:
        return []
    args = _arg_values(graph, rows)
    out = []
    for row in rows:
        op = nodes.op[row]
        values = args.get(row, {})
        module = _enclosing_module(graph, row)
        out.append(CommRecord(nodes.ids[row], row, op, tuple(_group(values)[0]), _peers(op, values), module,
                              bool(module >= 0 and graph.nodes.direction[module] == 1)))
    return out


def _arg_values(graph: DumpGraph, rows: list[int]) -> dict[int, dict[str, str]]:
    """Non-tensor input arguments of the given rows as text: slot -> value (a scalar's value in `stats`)."""
    t = graph.tensors
    wanted = np.isin(t.node, rows) & (t.role == Role.INPUT)
    out: dict[int, dict[str, str]] = {}
    for k in np.flatnonzero(wanted).tolist():
        if t.value[k]:
            text = t.value[k]
        elif t.shape[k] == "scalar" and t.present[k, 0]:
            text = repr(float(t.stats[k, 0]))
        else:
            continue
        out.setdefault(int(t.node[k]), {})[t.slot[k]] = text
    return out


def _peers(op: str, values: Mapping[str, str]) -> tuple[tuple[str, int], ...]:
    """("send" | "recv", peer rank) of each transfer of a point-to-point call (the batch parsing of links.py)."""
    if op in P2P_SEND or op in P2P_RECV:
        peer = _int(values.get("dst" if op in P2P_SEND else "src", values.get("1")))
        return () if peer < 0 else (("send" if op in P2P_SEND else "recv", peer),)
    if op == "batch_isend_irecv":
        return tuple(("send" if "send" in kind else "recv", peer) for kind, peer in _batch_ops(values) if peer >= 0)
    return ()


def _enclosing_module(graph: DumpGraph, row: int) -> int:
    parent = int(graph.nodes.parent[row])
    while parent > 0:
        if graph.nodes.kind[parent] == NodeKind.MODULE:
            return parent
        parent = int(graph.nodes.parent[parent])
    return -1


def model_chunk(node_id: str) -> int | None:
    """The model-chunk index of a module id from a model list (``Module.<chunk>.``), else None.

    >>> model_chunk("Module.1.module.decoder.layers.0.TransformerLayer.forward.0")
    1
    >>> model_chunk("Module.fc.Linear.forward.0") is None
    True
    """
    m = _CHUNK.match(node_id)
    return int(m.group(2)) if m else None


def detect_layout(graphs: Mapping[int, DumpGraph], spec: LayoutSpec | None = None) -> ParallelLayout:
    """The layout of one step of a job from its ranks' runs (`spec` states or overrides it).

    Parameters
    ----------
    graphs : Mapping[int, DumpGraph]
        Run of every rank with a dump, by rank.
    spec : LayoutSpec, optional
        Sizes a user states; they override the recorded groups.

    Raises
    ------
    LayoutError
        If the job uses a parallelism the merge does not handle, or names ranks without a dump.
    """
    ranks = tuple(sorted(graphs))
    records = {rank: comm_records(graph) for rank, graph in graphs.items()}
    _check_supported(records, graphs)
    _check_missing(records, set(ranks))
    vpp = max((len({c for c in map(model_chunk, g.nodes.ids) if c is not None}) for g in graphs.values()),
              default=1) or 1
    tp_groups = _tp_groups(records, ranks)
    pp_groups = _pp_groups(records, ranks)
    detected = ParallelLayout(ranks, tp_groups, pp_groups, vpp)
    if spec is None or (spec.tp is None and spec.pp is None and spec.vpp is None and spec.dp is None):
        return detected
    return _stated(detected, spec)


def _check_supported(records: Mapping[int, list[CommRecord]], graphs: Mapping[int, DumpGraph]) -> None:
    for rank in sorted(records):
        for call in records[rank]:
            if call.op in _ALL_TO_ALL:
                raise LayoutError(f"rank {rank}: {call.node} is an {call.op} (expert or context parallelism), "
                                  "which the merge does not handle; compare the job rank by rank")
            if call.module_row >= 0 and call.op in P2P:
                raise LayoutError(f"rank {rank}: {call.node} sends or receives inside "
                                  f"{graphs[rank].nodes.ids[call.module_row]} (context parallelism), which the "
                                  "merge does not handle; compare the job rank by rank")
            if call.module_row >= 0 and call.op in _SHARDED_COLLECTIVES:
                raise LayoutError(f"rank {rank}: {call.node} ({call.op}) inside "
                                  f"{graphs[rank].nodes.ids[call.module_row]} is a sequence-parallel or unknown "
                                  "parallel linear, which the merge does not handle; compare the job rank by rank")


def _check_missing(records: Mapping[int, list[CommRecord]], present: set[int]) -> None:
    for rank in sorted(records):
        for call in records[rank]:
            named = set(call.group) | {peer for _, peer in call.peers}
            missing = sorted(named - present)
            if missing:
                who = f"ranks {', '.join(map(str, missing))} have" if len(missing) > 1 else f"rank {missing[0]} has"
                raise LayoutError(f"{who} no dump, but rank {rank}'s "
                                  f"{call.node} communicates with them; give every rank of the job (or compare "
                                  "rank by rank)")


def _tp_groups(records: Mapping[int, list[CommRecord]], ranks: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The group of the all_reduce calls made inside modules, per rank (a rank without any: alone)."""
    of_rank: dict[int, tuple[int, ...]] = {}
    for rank in ranks:
        groups = {tuple(sorted(c.group or ranks)) for c in records[rank] if c.module_row >= 0 and c.op in TP_REDUCE}
        if len(groups) > 1:
            shown = " and ".join("[" + ",".join(map(str, g)) + "]" for g in sorted(groups))
            raise LayoutError(f"rank {rank}: all_reduce calls inside modules use the groups {shown}; a merge needs "
                              "one tensor-parallel group per rank (expert parallelism is not handled)")
        group = groups.pop() if groups else (rank,)
        if rank not in group:
            raise LayoutError(f"rank {rank}: an all_reduce inside a module uses the group {list(group)}, "
                              "which does not hold the rank itself")
        of_rank[rank] = group
    for rank, group in of_rank.items():
        for other in group:
            if of_rank.get(other) != group:
                raise LayoutError(f"ranks {rank} and {other} disagree on their tensor-parallel group "
                                  f"({list(group)} vs {list(of_rank.get(other, ()))})")
    return tuple(sorted(set(of_rank.values())))


def _pp_groups(records: Mapping[int, list[CommRecord]], ranks: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Ranks joined by top-level sends and receives, each chain in stage order."""
    first: dict[int, tuple[str, int]] = {}
    links: dict[int, set[int]] = {r: set() for r in ranks}
    for rank in ranks:
        for call in records[rank]:
            if call.module_row >= 0 or call.op not in P2P:
                continue
            for kind, peer in call.peers:
                first.setdefault(rank, (kind, peer))
                links[rank].add(peer)
                links.setdefault(peer, set()).add(rank)
    if not first:
        return ()
    previous = {rank: peer for rank, (kind, peer) in first.items() if kind == "recv"}
    chains = []
    seen: set[int] = set()
    for rank in ranks:
        if rank in seen or not links[rank]:
            continue
        component = _component(rank, links)
        seen |= component
        heads = [r for r in component if previous.get(r) not in component]
        if len(heads) == len(component):
            continue  # every rank starts by sending (a ring or halo exchange): no stage waits for one before it
        if len(heads) != 1:
            raise LayoutError(f"ranks {sorted(component)}: cannot order the pipeline stages from their sends and "
                              "receives (no single first stage); state the layout with --npu-layout/--bench-layout")
        chain = [heads[0]]
        following = {p: r for r, p in previous.items() if r in component}
        while chain[-1] in following and following[chain[-1]] not in chain:
            chain.append(following[chain[-1]])
        if len(chain) != len(component):
            raise LayoutError(f"ranks {sorted(component)}: their sends and receives do not form one pipeline "
                              f"(found the chain {chain}); state the layout with --npu-layout/--bench-layout")
        chains.append(tuple(chain))
    return tuple(sorted(chains))


def _component(start: int, links: Mapping[int, set[int]]) -> set[int]:
    todo, found = [start], {start}
    while todo:
        for peer in links.get(todo.pop(), ()):
            if peer not in found:
                found.add(peer)
                todo.append(peer)
    return found


def _stated(detected: ParallelLayout, spec: LayoutSpec) -> ParallelLayout:
    """The groups a stated layout gives (Megatron's rank order), with notes where the dumps disagree."""
    world = len(detected.ranks)
    tp = spec.tp or detected.tp
    pp = spec.pp or detected.pp
    if spec.cp > 1 or spec.ep > 1:
        raise LayoutError(f"layout cp={spec.cp} ep={spec.ep}: context and expert parallelism are not merged; "
                          "compare the job rank by rank")
    dp = spec.dp or max(world // max(tp * pp, 1), 1)
    if tp * pp * dp != world or detected.ranks != tuple(range(world)):
        raise LayoutContradiction(f"layout tp={tp} pp={pp} dp={dp} needs ranks 0..{tp * pp * dp - 1}, the job has "
                          f"{world} rank(s) ({', '.join(map(str, detected.ranks))})")
    sizes = {"tp": tp, "cp": 1, "ep": 1, "dp": dp, "pp": pp}
    dims = spec.order.split("-")
    coords = np.array(np.unravel_index(np.arange(world), [sizes[d] for d in reversed(dims)])).T[:, ::-1]
    position = {d: coords[:, i] for i, d in enumerate(dims)}

    def groups(vary: str) -> tuple[tuple[int, ...], ...]:
        key = np.stack([position[d] for d in dims if d != vary], axis=1)
        out: dict[tuple[int, ...], list[int]] = {}
        for rank in np.lexsort((position[vary], *key.T[::-1])).tolist():
            out.setdefault(tuple(key[rank].tolist()), []).append(rank)
        return tuple(sorted(tuple(g) for g in out.values()))

    tp_groups = groups("tp")
    pp_groups = groups("pp") if pp > 1 else ()
    _check_recorded(detected, spec, tp_groups, pp_groups, f"tp={tp} pp={pp} dp={dp}")
    notes = []
    if tp > 1 and detected.tp == 1:
        notes.append("no rank records a tensor-parallel all_reduce inside a module: the TP groups are as stated")
    return ParallelLayout(detected.ranks, tp_groups, pp_groups, spec.vpp or detected.vpp, "stated", tuple(notes))


def _check_recorded(detected: ParallelLayout, spec: LayoutSpec, tp_groups: tuple[tuple[int, ...], ...],
                    pp_groups: tuple[tuple[int, ...], ...], sizes: str) -> None:
    """Raise `LayoutContradiction` where the stated groups are not those the communication calls record.

    The recorded groups are facts of the run (the ranks that reduced together inside a module, the
    ranks that sent to each other); a statement can fill in what is not recorded, never contradict it.
    """
    def shown(groups: tuple[tuple[int, ...], ...]) -> str:
        text = " ".join("[" + ",".join(map(str, g)) + "]" for g in groups[:4])
        return text + (" ..." if len(groups) > 4 else "")

    if detected.tp > 1 and set(detected.tp_groups) != set(tp_groups):
        raise LayoutContradiction(f"stated layout {sizes} (order {spec.order}) gives the TP groups {shown(tp_groups)}, "
                                  f"but the ranks' all_reduce calls inside modules use {shown(detected.tp_groups)}")
    if detected.pp_groups and set(map(frozenset, detected.pp_groups)) != set(map(frozenset, pp_groups)):
        raise LayoutContradiction(f"stated layout {sizes} (order {spec.order}) gives the PP groups "
                                  f"{shown(pp_groups) or 'none'}, but the ranks that send to each other are "
                                  f"{shown(detected.pp_groups)}")
    if spec.vpp is not None and detected.vpp > 1 and spec.vpp != detected.vpp:
        raise LayoutContradiction(f"stated vpp={spec.vpp}, but the module ids name {detected.vpp} model chunks")
