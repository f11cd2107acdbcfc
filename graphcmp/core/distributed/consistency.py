"""Ranks checked against each other, without a baseline: the values a parallel job must hold equally.

Within one run of a job, some values must be bit-identical on several ranks:

* **replicated** tensors of a tensor-parallel group: everything outside the parallel linears and the
  regions between them (LayerNorm weights and outputs, embeddings, the residual stream, all_reduce
  outputs), as the TP merge classifies them (`graphcmp.core.distributed.tp_merge`);
* the **output of a collective** (``all_reduce``, ``broadcast``, ``all_gather``) on every member of its
  group (the k-th call of an op on a group is one collective);
* the two ends of a **send/receive** (the k-th send from a to b carries what the k-th receive on b from a
  got);
* **parameters** of data-parallel replicas (ranks of the same TP position and pipeline stage);
* **every other tensor** of data-parallel replicas, where three or more replicas and a strict majority
  of them hold the same value: replicas fed different data hold different activations everywhere (no
  majority, nothing reported), replicas fed the same data hold the same values, and the one that does
  not is a bad card.

A rank that holds another value than the others is reported: with three or more ranks the majority
is the reference, with two the lower rank. A rank whose *split* shard is wrong (a perturbed slice of a
weight) is not visible here: no other rank holds the same values, only a baseline tells.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from graphcmp.core.distributed.merge import job_steps, read_step
from graphcmp.core.distributed.topology import (
    LayoutContradiction,
    LayoutError,
    LayoutSpec,
    ParallelLayout,
    comm_records,
    detect_layout,
)
from graphcmp.core.distributed.tp_merge import _align, merge_tensor_parallel
from graphcmp.core.records import STAT_NAMES, DumpGraph, NodeKind, Role
from graphcmp.core.shards import REPLICATED

__all__ = ["Disagreement", "check_consistency", "check_job"]

_EQUAL_OUTPUT_OPS = frozenset({"all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "_all_gather_base"})
_ROLE_ORDER = {int(Role.PARAM): 0, int(Role.INPUT): 1, int(Role.OUTPUT): 2, int(Role.PARAM_GRAD): 3}


@dataclass(frozen=True, slots=True)
class Disagreement:
    """One value a rank holds differently from the ranks that must hold the same."""

    check: str  # replicated, collective, p2p, dp parameter
    rank: int  # the rank that differs
    reference: int  # the rank it is compared with
    node: str  # node id in the rank's own dump
    tensor: str  # role and slot: "param.weight", "output.0"
    detail: str  # the statistics that differ
    parameter: str | None = None  # parameter name, for a parameter
    stage: int = 0
    position: int = 0  # row of the node in its rank's run (execution order)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_consistency(graphs: Mapping[int, DumpGraph], layout: ParallelLayout | None = None) -> dict[str, Any]:
    """Every check of one step of a job; the disagreements come in execution order (stage, then position).

    Parameters
    ----------
    graphs : Mapping[int, DumpGraph]
        Every rank's run of the step.
    layout : ParallelLayout, optional
        Detected from the runs when None.

    Returns
    -------
    dict
        ``checked`` (how many values of each kind were compared) and ``findings`` (`Disagreement` dicts).
    """
    layout = layout or detect_layout(graphs)
    findings: list[Disagreement] = []
    checked = Counter({"replicated": 0, "collectives": 0, "p2p": 0, "dp": 0, "dp_tensors": 0})
    for group in layout.tp_groups:
        if len(group) > 1 and all(r in graphs for r in group):
            findings.extend(_replicated(graphs, group, layout.stage(group[0]), checked))
    findings.extend(_collectives(graphs, layout, checked))
    findings.extend(_p2p(graphs, layout, checked))
    findings.extend(_dp_parameters(graphs, layout, checked))
    findings.extend(_dp_tensors(graphs, layout, checked))
    unique = {(f.rank, f.node, f.tensor): f for f in reversed(findings)}
    ordered = sorted(unique.values(), key=lambda f: (f.stage, f.position, _ROLE_ORDER.get(_role_of(f.tensor), 9),
                                                      f.rank))
    return {"checked": dict(checked), "findings": [f.to_dict() for f in ordered]}


def _role_of(tensor: str) -> int:
    name = tensor.split(".", 1)[0]
    return {"param": int(Role.PARAM), "input": int(Role.INPUT), "output": int(Role.OUTPUT)}.get(
        name, int(Role.PARAM_GRAD))


def _replicated(graphs: Mapping[int, DumpGraph], group: tuple[int, ...], stage: int,
                checked: Counter) -> list[Disagreement]:
    merged = merge_tensor_parallel([(r, graphs[r]) for r in group])
    shards = merged.shards
    assert shards is not None
    checked["replicated"] += int(np.count_nonzero(shards.kind == REPLICATED))
    out = []
    t = merged.tensors
    for k in shards.disagreeing().tolist():
        rows = shards.rows(k)
        values = [(int(shards.rank[r]), shards.stats[r], shards.present[r]) for r in rows.tolist()]
        node_row = int(t.node[k])
        for rank, reference, detail in _odd_ones(values):
            out.append(Disagreement("replicated", rank, reference, merged.nodes.ids[node_row],
                                    _tensor_name(t.role[k], t.slot[k]), detail,
                                    _parameter(merged.nodes.ids[node_row], int(t.role[k]), t.slot[k]), stage,
                                    node_row))
    return out


def _odd_ones(values: list[tuple[int, np.ndarray, np.ndarray]]) -> list[tuple[int, int, str]]:
    """(rank, reference rank, what differs) for each rank not holding the majority value (ties: the lowest rank's)."""
    keys = [tuple(np.where(p, s, np.nan).tolist()) for _, s, p in values]
    counts = Counter(_key(k) for k in keys)
    best = max(counts.values())
    reference = next(i for i, k in enumerate(keys) if counts[_key(k)] == best)
    ref_rank, ref_stats, ref_present = values[reference]
    out = []
    for i, (rank, stats, present) in enumerate(values):
        if _key(keys[i]) != _key(keys[reference]):
            out.append((rank, ref_rank, _differences(stats, present, ref_stats, ref_present)))
    return out


def _key(values: tuple[float, ...]) -> tuple[str, ...]:
    return tuple(repr(v) for v in values)  # NaN equals NaN


def _differences(stats: np.ndarray, present: np.ndarray, ref: np.ndarray, ref_present: np.ndarray) -> str:
    parts = [f"{name.capitalize()} {stats[k]:.7g} vs {ref[k]:.7g}" for k, name in enumerate(STAT_NAMES)
             if present[k] and ref_present[k] and repr(float(stats[k])) != repr(float(ref[k]))]
    return ", ".join(parts) or "recorded statistics differ"


def _tensor_name(role: int, slot: str) -> str:
    return f"{Role(int(role)).name.lower()}.{slot}"


def _parameter(node_id: str, role: int, slot: str) -> str | None:
    """``path.weight`` for a parameter of a module call (msprobe's ``Module.<path>.<Class>.<call>`` ids)."""
    if role not in (Role.PARAM, Role.PARAM_GRAD) or not node_id.startswith(("Module.", "Cell.")):
        return None
    parts = node_id.split(".")  # drop <Class>.parameters_grad, or <Class>.<forward|backward|parameters_grad>.<n>
    path = parts[1:-2] if parts[-1] == "parameters_grad" else parts[1:-3]
    return ".".join([*path, slot])


def _collectives(graphs: Mapping[int, DumpGraph], layout: ParallelLayout, checked: Counter) -> list[Disagreement]:
    """The k-th call of an op on a group holds the same output on every member."""
    members: dict[tuple, list[tuple[int, DumpGraph, int]]] = {}
    for rank, graph in sorted(graphs.items()):
        seen: Counter = Counter()
        for call in comm_records(graph):
            if call.op not in _EQUAL_OUTPUT_OPS:
                continue
            group = call.group or tuple(sorted(graphs))
            key = (call.op, group)
            members.setdefault((*key, seen[key]), []).append((rank, graph, call.row))
            seen[key] += 1
    out = []
    for members_of in members.values():
        if len(members_of) < 2:
            continue
        checked["collectives"] += 1
        outputs = [_tensor(graph, row, Role.OUTPUT, "0") for _, graph, row in members_of]
        if any(o is None for o in outputs):
            continue
        values = [(rank, o[0], o[1]) for (rank, _, _), o in zip(members_of, outputs)]  # type: ignore[index]
        for rank, reference, detail in _odd_ones(values):
            graph, row = next((g, r) for k, g, r in members_of if k == rank)
            out.append(Disagreement("collective", rank, reference, graph.nodes.ids[row], "output.0", detail,
                                    None, layout.stage(rank), row))
    return out


def _tensor(graph: DumpGraph, row: int, role: int, slot: str) -> tuple[np.ndarray, np.ndarray] | None:
    t = graph.tensors
    for k in graph.tensor_rows_at(row).tolist():
        if t.role[k] == role and t.slot[k] == slot and t.shape[k] not in ("", "scalar"):
            return t.stats[k], t.present[k]
    return None


def _p2p(graphs: Mapping[int, DumpGraph], layout: ParallelLayout, checked: Counter) -> list[Disagreement]:
    """What the k-th send from a to b carried is what the k-th receive on b from a got.

    An asynchronous receive (``irecv``) may be recorded before its transfer completed, holding the
    buffer's earlier content. Its records are trusted only when at least one of them holds what was
    sent; when none does, they are not checked (a blocking ``recv`` is always checked).
    """
    sends: dict[tuple[int, int, int], tuple[DumpGraph, int]] = {}
    recvs: dict[tuple[int, int, int], tuple[DumpGraph, int, str]] = {}
    for rank, graph in graphs.items():
        counts: Counter = Counter()
        for call in comm_records(graph):
            if call.op not in ("send", "isend", "recv", "irecv"):
                continue
            for kind, peer in call.peers:
                pair = (rank, peer) if kind == "send" else (peer, rank)
                key = (*pair, counts[(kind, pair)])
                counts[(kind, pair)] += 1
                if kind == "send":
                    sends[key] = (graph, call.row)
                else:
                    recvs[key] = (graph, call.row, call.op)
    pending: list[tuple[str, Disagreement]] = []
    matched_async = 0
    for key in sorted(sends.keys() & recvs.keys()):
        (s_graph, s_row), (r_graph, r_row, op) = sends[key], recvs[key]
        sent = _tensor(s_graph, s_row, Role.INPUT, "0")
        got = _tensor(r_graph, r_row, Role.OUTPUT, "0")
        if sent is None or got is None:
            continue
        values = [(key[0], sent[0], sent[1]), (key[1], got[0], got[1])]
        if not _odd_ones(values):
            checked["p2p"] += 1
            matched_async += op == "irecv"
            continue
        detail = _differences(got[0], got[1], sent[0], sent[1])
        pending.append((op, Disagreement("p2p", key[1], key[0], r_graph.nodes.ids[r_row], "output.0",
                                         f"received other values than rank {key[0]} sent ({detail})", None,
                                         layout.stage(key[1]), r_row)))
    out = [f for op, f in pending if op != "irecv" or matched_async]
    checked["p2p"] += len(out)
    return out


def _dp_parameters(graphs: Mapping[int, DumpGraph], layout: ParallelLayout, checked: Counter) -> list[Disagreement]:
    """Parameters are equal on the data-parallel replicas of one position (same TP index, same stage)."""
    out = []
    for stage, ranks in _replica_groups(graphs, layout):
        if len(ranks) >= 2:
            out.extend(_same_parameters(graphs, ranks, stage, checked))
    return out


def _replica_groups(graphs: Mapping[int, DumpGraph], layout: ParallelLayout) -> list[tuple[int, list[int]]]:
    """(stage, ranks) of every position (TP index within a stage): the ranks of the data-parallel replicas that hold
    it, those with a run only."""
    replicas = layout.replicas()
    if len(replicas) < 2:
        return []
    groups = []
    for stage in range(layout.pp):
        for position in range(len(replicas[0][stage])):
            ranks = [rep[stage][position] for rep in replicas if stage < len(rep) and position < len(rep[stage])]
            groups.append((stage, [r for r in ranks if r in graphs]))
    return groups


def _same_parameters(graphs: Mapping[int, DumpGraph], ranks: list[int], stage: int,
                     checked: Counter) -> list[Disagreement]:
    ref = graphs[ranks[0]]
    t = ref.tensors
    params = np.flatnonzero((t.role == Role.PARAM) & (ref.nodes.kind[t.node] == NodeKind.MODULE)).tolist()
    out = []
    for k in params:
        node_id = ref.nodes.ids[int(t.node[k])]
        values = []
        for rank in ranks:
            g = graphs[rank]
            if node_id not in g:
                continue
            found = _tensor(g, g.row(node_id), Role.PARAM, t.slot[k])
            if found is not None:
                values.append((rank, found[0], found[1]))
        if len(values) < 2:
            continue
        checked["dp"] += 1
        for rank, reference, detail in _odd_ones(values):
            out.append(Disagreement("dp parameter", rank, reference, node_id, _tensor_name(Role.PARAM, t.slot[k]),
                                    detail, _parameter(node_id, int(Role.PARAM), t.slot[k]), stage, int(t.node[k])))
    return out


def _dp_tensors(graphs: Mapping[int, DumpGraph], layout: ParallelLayout, checked: Counter) -> list[Disagreement]:
    """Every tensor of three or more data-parallel replicas that a strict majority of them holds alike.

    Only a value most replicas share bit for bit says what the others should hold: replicas fed
    different data agree on no activation, and nothing is reported for them.
    """
    out = []
    for stage, ranks in _replica_groups(graphs, layout):
        if len(ranks) >= 3:
            out.extend(_majority_tensors(graphs, ranks, stage, checked))
    return out


def _majority_tensors(graphs: Mapping[int, DumpGraph], ranks: list[int], stage: int,
                      checked: Counter) -> list[Disagreement]:
    runs = [(r, graphs[r]) for r in ranks]
    try:
        pos = _align(runs)
    except LayoutError:
        return []  # the replicas made other calls: nothing lines up to compare
    ref = graphs[ranks[0]]
    t = ref.tensors
    stats = np.stack([graphs[r].tensors.stats[p] for r, p in zip(ranks, pos)])  # (rank, tensor, stat)
    present = np.stack([graphs[r].tensors.present[p] for r, p in zip(ranks, pos)])
    values = np.where(present, stats, np.inf)  # an absent statistic compares as itself
    nan = np.isnan(values)
    same = ((values[:, None] == values[None, :]) | (nan[:, None] & nan[None, :])).all(axis=3)  # (a, b, tensor)
    votes = same.sum(axis=1)  # per rank and tensor: the ranks holding its value (itself included)
    best = votes.argmax(axis=0)
    comm = np.fromiter((node_id.startswith("Distributed.") for node_id in ref.nodes.ids), bool, len(ref.nodes))
    # parameters: `_dp_parameters`; collectives (a reduce's root holds the sum, the others not): `_collectives`
    tensor = t.has_shape() & (t.role != Role.PARAM) & ~comm[t.node]
    majority = votes.max(axis=0) * 2 > len(ranks)
    checked["dp_tensors"] += int(np.count_nonzero(tensor & majority))
    odd = tensor & majority & (votes.min(axis=0) < votes.max(axis=0))
    out = []
    for k in np.flatnonzero(odd).tolist():
        reference = int(best[k])
        node_row = int(t.node[k])
        for i, rank in enumerate(ranks):
            if not same[i, reference, k]:
                detail = _differences(stats[i, k], present[i, k], stats[reference, k], present[reference, k])
                out.append(Disagreement("dp replica", rank, ranks[reference], ref.nodes.ids[node_row],
                                        _tensor_name(t.role[k], t.slot[k]), detail,
                                        _parameter(ref.nodes.ids[node_row], int(t.role[k]), t.slot[k]), stage,
                                        node_row))
    return out


def check_job(root: str | os.PathLike[str], *, spec: LayoutSpec | None = None, workers: int | None = None,
              scheduler: str | None = None) -> dict[str, Any]:
    """`check_consistency` on every step of a job root, with the ranks that disagree, first one first.

    Returns
    -------
    dict
        ``layout`` (of the first step), ``steps`` (``step``, ``checked``, ``findings`` each),
        ``bad_ranks``: per rank that differs, its count of disagreements and its first one, ordered by
        the step and execution position of that first one; ``checked`` (values compared in all),
        ``verdict`` (differ, agree, or inconclusive when nothing was checked) and ``reason`` (one line).
    """
    steps, layout = [], None
    for step, ranks in job_steps(root).items():
        graphs = read_step(ranks, workers=workers, scheduler=scheduler)
        try:
            step_layout = detect_layout(graphs, spec)
        except LayoutContradiction as err:
            raise LayoutContradiction(f"{root}: --layout contradicts the dump: {err}") from err
        layout = layout or step_layout
        steps.append({"step": step, **check_consistency(graphs, step_layout)})
    bad: dict[int, dict[str, Any]] = {}
    for result in steps:
        for finding in result["findings"]:
            entry = bad.setdefault(finding["rank"], {**finding, "step": result["step"], "count": 0})
            entry["count"] += 1
    checked = sum(sum(result["checked"].values()) for result in steps)
    if bad:
        first = next(iter(bad.values()))
        verdict, reason = "differ", f"differ: rank {first['rank']} disagrees with rank {first['reference']}"
    elif not checked:
        verdict, reason = "inconclusive", ("inconclusive: nothing to check (no value the job's ranks must hold "
                                           "alike: a single rank, or ranks that share no group); compare the job "
                                           "with a baseline instead")
    else:
        verdict, reason = "agree", f"agree: {checked} values every rank holding them holds alike"
    return {"layout": layout.to_dict() if layout else None, "steps": steps, "bad_ranks": list(bad.values()),
            "checked": checked, "verdict": verdict, "reason": reason}
