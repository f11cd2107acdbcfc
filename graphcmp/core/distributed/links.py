"""Communication calls of each rank and the cross-rank links between them.

A link joins the calls on different ranks that take part in one communication:

* ``send``/``isend`` from rank a to b with the k-th ``recv``/``irecv`` on b from a (by peer and order);
* each ``P2POp`` of a ``batch_isend_irecv`` with its twin op on the peer (by op, peer and order);
* ``broadcast``/``reduce``/``scatter``/``gather`` by process group, root and call order;
* other collectives (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``, ``barrier`` ...)
  by process group (``group_ranks``/``group_id``) and call order.

A call is *unlinked* when its link does not reach every rank it should (a peer, or every rank of
the group), for example because a rank's dump is missing.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from graphcmp.core.records import PROCESS_GROUP_CALLS, DumpGraph, NodeTable, Role

__all__ = ["CommCall", "Link", "comm_calls", "link_calls"]

_P2P_SEND = {"send", "isend"}
_P2P_RECV = {"recv", "irecv"}
_ROOTED = {"broadcast": "src", "reduce": "dst", "scatter": "src", "gather": "dst"}


@dataclass(frozen=True, slots=True)
class CommCall:
    """One communication call of one rank, with the keys that link it to its peers."""

    rank: int
    node: str
    position: int  # execution row in the rank's graph
    op: str
    keys: tuple[str, ...]  # one per link the call takes part in (a batch_isend_irecv has one per P2POp)
    expected: tuple[int, ...]  # how many ranks each key's link should hold

    def to_list(self) -> list:
        return [self.node, self.position, self.op, list(self.keys), list(self.expected)]

    @classmethod
    def from_list(cls, rank: int, data: list) -> CommCall:
        return cls(rank, data[0], int(data[1]), data[2], tuple(data[3]), tuple(data[4]))


@dataclass(frozen=True, slots=True)
class Link:
    """The calls (rank, node, position) joined by one key."""

    key: str
    members: tuple[tuple[int, str, int], ...]
    expected: int

    @property
    def complete(self) -> bool:
        return len({rank for rank, _, _ in self.members}) >= self.expected


def comm_calls(graph: DumpGraph, rank: int) -> list[CommCall]:
    """The communication calls of one rank's run, in execution order, with their link keys."""
    nodes = graph.nodes
    rows = graph.memo("communication rows", lambda: _communication_rows(nodes), nodes_only=True)  # a batch's runs
    if not rows:
        return []
    args = _call_args(graph, rows)
    counters: Counter[tuple] = Counter()
    calls = []
    for row in rows:
        op = nodes.op[row]
        keys, expected = _keys(op, rank, args.get(row, {}), counters)
        calls.append(CommCall(rank, nodes.ids[row], row, op, tuple(keys), tuple(expected)))
    return calls


def _communication_rows(nodes: NodeTable) -> tuple[int, ...]:
    """The rows of the communication calls (``Distributed.*`` but process-group bookkeeping), in execution order."""
    return tuple(r for r, node_id in enumerate(nodes.ids)
                 if node_id.startswith("Distributed.") and nodes.op[r] not in PROCESS_GROUP_CALLS)


def _call_args(graph: DumpGraph, rows: Sequence[int]) -> dict[int, dict[str, str]]:
    """Non-tensor input values of the given rows: slot -> text."""
    t = graph.tensors
    wanted = np.isin(t.node, rows) & (t.role == Role.INPUT)
    out: dict[int, dict[str, str]] = defaultdict(dict)
    for k in np.flatnonzero(wanted).tolist():
        if t.value[k]:
            out[int(t.node[k])][t.slot[k]] = t.value[k]
    return out


def _keys(op: str, rank: int, args: Mapping[str, str], counters: Counter) -> tuple[list[str], list[int]]:
    group_ranks, group_id = _group(args)
    group = group_id or ",".join(map(str, group_ranks)) or "world"
    if op in _P2P_SEND or op in _P2P_RECV:
        peer = _int(args.get("dst") if op in _P2P_SEND else args.get("src"), _int(args.get("1")))
        src, dst = (rank, peer) if op in _P2P_SEND else (peer, rank)
        return [_counted(counters, ("p2p", group, src, dst))], [2]
    if op == "batch_isend_irecv":
        keys = []
        for p2p_op, peer in _batch_ops(args):
            src, dst = (rank, peer) if p2p_op in _P2P_SEND else (peer, rank)
            keys.append(_counted(counters, ("batch", group, src, dst)))
        return keys, [2] * len(keys)
    root = (args.get(_ROOTED[op]) or args.get("1")) if op in _ROOTED else None
    base = (op, group) if root is None else (op, group, f"root={_int(root)}")
    return [_counted(counters, base)], [len(group_ranks) or 1]


def _counted(counters: Counter, base: tuple) -> str:
    index = counters[base]
    counters[base] += 1
    return "|".join(map(str, (*base, index)))


def _group(args: Mapping[str, str]) -> tuple[list[int], str]:
    for value in args.values():
        if "group_ranks" in value:
            try:
                doc = json.loads(value)
            except ValueError:
                continue
            return [int(r) for r in doc.get("group_ranks") or []], str(doc.get("group_id") or "")
    return [], ""


def _batch_ops(args: Mapping[str, str]) -> list[tuple[str, int]]:
    """(op, peer) of each P2POp of a batch: slots ``0.<i>.op`` and ``0.<i>.peer``."""
    ops: dict[str, dict[str, str]] = defaultdict(dict)
    for slot, value in args.items():
        head, _, field = slot.rpartition(".")
        if field in ("op", "peer"):
            ops[head][field] = value
    return [(o["op"], _int(o["peer"])) for _, o in sorted(ops.items()) if "op" in o and "peer" in o]


def _int(text: str | None, default: int = -1) -> int:
    try:
        return int(float(text)) if text is not None else default
    except ValueError:
        return default


def link_calls(calls: Iterable[CommCall]) -> list[Link]:
    """Group the calls of all ranks by key into links."""
    members: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
    expected: dict[str, int] = {}
    for call in calls:
        for key, n in zip(call.keys, call.expected):
            members[key].append((call.rank, call.node, call.position))
            expected[key] = max(expected.get(key, 0), n)
    return [Link(key, tuple(m), expected[key]) for key, m in members.items()]
