"""Data flow of one run recovered from what a dump records: which call produced each input, and
which forward call a backward call belongs to.

msprobe dumps have no data-flow edges. A call's input is taken to come from the earliest call whose
output has the same *fingerprint* (dtype and recorded statistics, bit for bit): a tensor passed on
unchanged keeps its statistics, and two different tensors sharing all of them is very unlikely. A
backward call (``Functional.linear.7.backward``) computes from what its forward call
(``Functional.linear.7.forward``) saw, so that call is its *forward twin*.

`flow_edges` gives a run's edges for drawing: a graph format's own (data and control), or for a dump the
*latest* earlier call that output each input's fingerprint (the call that handed the tensor on: a
transpose or a dropout between two calls keeps the statistics, and the picture should show it).
`folded_sources` names the nodes a drawing folds into their consumer (constants, weights: nodes of no input).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import repeat

import numpy as np

from graphcmp.core.arrays import search_sorted, sorted_unique
from graphcmp.core.hierarchy import execution_keys
from graphcmp.core.metrics import by_blocks
from graphcmp.core.records import PROCESS_GROUP_CALLS, Direction, DumpGraph, EdgeTable, Role, TensorTable, string_codes

__all__ = [
    "communication_calls",
    "earliest_producers",
    "fingerprints",
    "flow_edges",
    "folded_sources",
    "forward_twins",
    "keep_flow_edges",
    "latest_producers",
    "run_fingerprints",
    "trained_parameters",
    "twins_by_strings",
]

_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0x632BE59BD9B4E019), np.uint64(29))


def fingerprints(tensors: TensorTable) -> np.ndarray:
    """An integer id per tensor row; equal ids for equal (dtype, recorded statistics).

    The five values are mixed into one 64-bit hash (sorting int64 is far faster than sorting
    40-byte records); two different tensors sharing a hash is a 2**-64 event.

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...      "Mean": 0.5, "Norm": 1.0}
    >>> g = parse_msprobe({"data": {"Torch.relu.0.forward": {"input_args": [t], "output": [dict(t, Max=2.0)]}}})
    >>> fingerprints(g.tensors).tolist()
    [0, 1]
    """
    if not len(tensors):
        return np.zeros(0, np.int64)
    # a block of rows at a time: a whole-column copy of the statistics (92 MB at 2.9M tensors, twice) was fresh
    # pages to fault in, most of the hashing's time
    return dense_codes(by_blocks(_mixed, string_codes(tensors.dtype)[0], tensors.present, tensors.stats))


def _mixed(dtype: np.ndarray, present: np.ndarray, stats: np.ndarray) -> np.ndarray:
    """`fingerprints`' hash of rows: their dtype codes and recorded statistics mixed."""
    mixed = dtype.astype(np.uint64)
    recorded = np.ascontiguousarray(np.where(present, stats, 0.0) + 0.0)  # + 0.0: -0.0 is 0.0
    for column in recorded.view(np.uint64).T:
        mixed = (mixed ^ column) * _MIX[0] + _MIX[1]
        mixed ^= mixed >> _MIX[2]
    return mixed


def dense_codes(hashes: np.ndarray) -> np.ndarray:
    """``np.unique(hashes, return_inverse=True)[1]`` of uint64 values: each value's rank among the distinct ones.

    numpy sorts plain integers several times faster than it argsorts them, so each value's high bits are sorted
    with its index packed into the low bits; values that share their high bits but differ are then put in order
    among themselves (a few pairs in a million values).

    >>> dense_codes(np.array([30, 10, 30, 2**63 + 1, 10], np.uint64)).tolist()
    [1, 0, 1, 2, 0]
    """
    n = len(hashes)
    bits = max(n - 1, 1).bit_length()
    low = np.uint64((1 << bits) - 1)
    packed = np.sort((hashes & ~low) | np.arange(n, dtype=np.uint64))
    order = (packed & low).astype(np.int64)
    high = packed & ~low
    ordered = hashes[order]
    differ = ordered[1:] != ordered[:-1]
    unsorted = np.flatnonzero((high[1:] == high[:-1]) & differ)
    if len(unsorted):  # the whole run of each such high value, ordered by the values themselves
        tied = sorted_unique(high[unsorted])
        at = np.concatenate([np.arange(a, b) for a, b in zip(np.searchsorted(high, tied, "left").tolist(),
                                                             np.searchsorted(high, tied, "right").tolist())])
        order[at] = order[at][np.lexsort((ordered[at], high[at]))]
        ordered = hashes[order]
        differ = ordered[1:] != ordered[:-1]
    codes = np.empty(n, np.int64)
    codes[order] = np.concatenate([[0], np.cumsum(differ)])
    return codes


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` of non-negative int64 keys: each key sorted with its index packed into the
    low bits (see `dense_codes`); argsort itself when the keys leave no room for the index."""
    n = len(keys)
    bits = max(n - 1, 1).bit_length()
    if not n or int(keys.min()) < 0 or int(keys.max()) >> (63 - bits):
        return np.argsort(keys, kind="stable")
    return np.sort((keys << bits) | np.arange(n)) & ((1 << bits) - 1)


def run_fingerprints(graph: DumpGraph) -> np.ndarray:
    """`fingerprints` of a run's tensors, computed once per run (matching, the noise model and the data-flow edges
    all ask)."""
    return graph.memo("fingerprints", lambda: _read_only(fingerprints(graph.tensors)))



def _read_only(values: np.ndarray) -> np.ndarray:
    values.flags.writeable = False
    return values


def earliest_producers(graph: DumpGraph) -> np.ndarray:
    """Per tensor row, the node row of the earliest call with an output of the same fingerprint (-1: none),
    computed once per run.

    The fingerprint leaves out the shape: a transpose or view between two dumped calls keeps the
    statistics but not the shape. Calls are ordered by `hierarchy.execution_keys`.
    """
    return graph.memo("producers", lambda: _read_only(_earliest_producers(graph)))


def _earliest_producers(graph: DumpGraph) -> np.ndarray:
    keys = execution_keys(graph)
    t = graph.tensors
    fingerprint = run_fingerprints(graph)
    outputs = np.flatnonzero((t.role == Role.OUTPUT) & t.has_shape())
    made = t.node[outputs].astype(np.int64)
    rank = np.unique(keys, return_inverse=True)[1].reshape(-1)
    order = _stable_order(rank[made] * len(graph) + made)  # earliest call first (execution key, then row)
    made_fp = fingerprint[outputs[order]]
    by_fp = _stable_order(made_fp)
    first = np.flatnonzero(np.diff(made_fp[by_fp], prepend=-1))  # each fingerprint's first output
    first_fp, first_at = made_fp[by_fp[first]], by_fp[first]
    producer_of_fp = np.full(int(fingerprint.max(initial=-1)) + 1, -1, np.int64)
    producer_of_fp[first_fp] = made[order][first_at]
    return producer_of_fp[fingerprint]


def forward_twins(graph: DumpGraph, rows: np.ndarray | None = None) -> np.ndarray:
    """Per node row, the row of the forward call a backward call belongs to (-1: none, not a backward call,
    or not among `rows` when they are given); found once per run.

    The two share their id but for the direction word (``...linear.7.backward`` and
    ``...linear.7.forward``; ``Module.fc.Linear.backward.0`` and ``Module.fc.Linear.forward.0``).

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> g = parse_msprobe({"data": {"Torch.relu.0.forward": {}, "Torch.relu.0.backward": {}}})
    >>> [g.nodes.ids[r] for r in forward_twins(g) if r >= 0]
    ['Torch.relu.0.forward']
    """
    twins = graph.memo("forward twins", lambda: _read_only(_forward_twins(graph)), nodes_only=True)
    if rows is None:
        return twins
    asked = np.zeros(len(graph), bool)
    asked[rows[rows >= 0]] = True
    return np.where(asked, twins, -1)


def _forward_twins(graph: DumpGraph) -> np.ndarray:
    twins = np.full(len(graph), -1, np.int64)
    backward = np.flatnonzero(graph.nodes.direction == Direction.BACKWARD)
    from graphcmp.core.id_kernels import forward_twin_rows  # see tests/test_layers.py: LAZY_IMPORTS

    found = forward_twin_rows(graph.nodes.ids, backward)  # by the ids' bytes, where the kernels are built
    twins[backward] = twins_by_strings(graph.nodes.ids, backward) if found is None else found
    return twins


def twins_by_strings(ids: Sequence[str], rows: np.ndarray) -> np.ndarray:
    """`id_kernels.forward_twin_rows` by Python strings: per row of `rows`, the row of its id with the last
    ``.backward`` made ``.forward`` (-1: none)."""
    twins = np.full(len(rows), -1, np.int64)
    found, names = [], []
    for k, row in enumerate(rows.tolist()):
        head, sep, tail = ids[row].rpartition(".backward")
        if sep:
            found.append(k)
            names.append(f"{head}.forward{tail}")
    if not found:
        return twins
    # only an id with ".forward" in it can be a twin: an index of those (not of every id) finds them
    forward = np.flatnonzero(np.fromiter(map(operator.contains, ids, repeat(".forward")), bool, len(ids))).tolist()
    index = dict(zip(map(ids.__getitem__, forward), forward))
    twins[found] = np.fromiter(map(index.get, names, repeat(-1)), np.int64, len(names))
    return twins


def communication_calls(graph: DumpGraph) -> np.ndarray:
    """Per node row, True for a communication call (msprobe's ``Distributed.*``, GE's ``Hcom*`` ops):
    its outputs carry data of other ranks, which this run's dump does not hold.

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> g = parse_msprobe({"data": {"Distributed.all_reduce.0.forward": {}, "Torch.relu.0.forward": {}}})
    >>> [i for i, comm in zip(g.nodes.ids, communication_calls(g)) if comm]
    ['Distributed.all_reduce.0.forward']
    """
    # the noise model's and the divergence analysis'
    return graph.memo("communication", lambda: _read_only(_communication_calls(graph)), nodes_only=True)


def _communication_calls(graph: DumpGraph) -> np.ndarray:
    ids = graph.nodes.ids
    codes, ops = string_codes(graph.nodes.op)
    if not len(codes):
        return np.zeros(0, bool)
    # an op is checked by the id of one of its calls: every call of all_reduce is a Distributed.* call
    first = np.unique(codes, return_index=True)[1]
    comm = np.array([(ids[row].startswith("Distributed.") and ops[code] not in PROCESS_GROUP_CALLS)
                     or ops[code].startswith("Hcom") for code, row in enumerate(first.tolist())])
    return comm[codes]


def trained_parameters(graph: DumpGraph) -> np.ndarray:
    """Per tensor row, True for a module parameter that has a gradient in the dump (every module parameter when the
    dump holds no gradients). A MindSpore BatchNorm's moving mean has none: the forward call updates it, so it
    carries whatever came before it. Computed once per run (the noise model's drift of the trained weights)."""
    return graph.memo("trained parameters", lambda: _read_only(_trained_parameters(graph)))


def _trained_parameters(graph: DumpGraph) -> np.ndarray:
    t = graph.tensors
    param = t.role == Role.PARAM
    grad_rows = np.flatnonzero(t.role == Role.PARAM_GRAD)
    if not len(grad_rows) or not param.any():
        return param
    slot, slots = string_codes(t.slot)  # the codes pairing makes (a tuple's are kept)
    param_rows = np.flatnonzero(param)
    modules: dict[str, int] = {}  # a module's name -> its code, shared by gradients and parameters
    grad_key = _module_codes(graph, t.node[grad_rows], ".parameters_grad", modules) * len(slots) + slot[grad_rows]
    param_key = _module_codes(graph, t.node[param_rows], ".forward", modules) * len(slots) + slot[param_rows]
    param[param_rows] = np.isin(param_key, grad_key)
    return param


def _module_codes(graph: DumpGraph, nodes: np.ndarray, word: str, modules: dict[str, int]) -> np.ndarray:
    """Per node row of `nodes`, the code in `modules` (added to as needed) of its id before the last `word`
    (``Module.fc.Linear`` of ``Module.fc.Linear.forward.0`` for ``.forward``)."""
    ids = graph.nodes.ids
    distinct, at = np.unique(nodes, return_inverse=True)
    names = [ids[n].rpartition(word)[0] for n in distinct.tolist()]
    return np.array([modules.setdefault(name, len(modules)) for name in names], np.int64)[at.reshape(-1)]


def latest_producers(graph: DumpGraph, keys: np.ndarray, calls: np.ndarray,
                     asked: np.ndarray | None = None) -> np.ndarray:
    """Per tensor row, the node row of the latest call among `calls` that is earlier than the tensor's own
    node (by `keys`) and has an output of the same fingerprint; -1 when there is none (or the row is not `asked`).

    Parameters
    ----------
    graph : DumpGraph
        One run.
    keys : ndarray
        Sort key per node row (`hierarchy.execution_keys`).
    calls : ndarray of bool
        Per node row, True for the calls that may produce (e.g. the leaf calls).
    asked : ndarray of bool, optional
        Per tensor row, True for the rows whose producer is wanted (default: all); the others get -1.

    Examples
    --------
    >>> from graphcmp.core.hierarchy import execution_keys
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...      "Mean": 0.5, "Norm": 1.0}
    >>> g = parse_msprobe({"data": {"Torch.relu.0.forward": {"input_args": [t], "output": [t]},
    ...                             "Tensor.t.0.forward": {"input_args": [t], "output": [t]},
    ...                             "Torch.relu.1.forward": {"input_args": [t], "output": [t]}}})
    >>> [g.nodes.ids[r] if r >= 0 else None for r in latest_producers(g, execution_keys(g), np.ones(len(g), bool))[::2]]
    [None, 'Torch.relu.0.forward', 'Tensor.t.0.forward']
    """
    t = graph.tensors
    out = np.full(len(t), -1, np.int64)
    if not len(t):
        return out
    fingerprint = run_fingerprints(graph).astype(np.int64)
    rank = np.unique(keys, return_inverse=True)[1].reshape(-1).astype(np.int64)
    span = int(rank.max(initial=0)) + 1
    outputs = np.flatnonzero((t.role == Role.OUTPUT) & t.has_shape() & calls[t.node])
    made = fingerprint[outputs] * span + rank[t.node[outputs]]
    order = _stable_order(made)
    made, makers = made[order], t.node[outputs][order]
    rows = np.arange(len(t)) if asked is None else np.flatnonzero(asked)
    wanted = fingerprint[rows] * span + rank[t.node[rows]]
    at = search_sorted(made, wanted, side="left") - 1  # the last output strictly before the asking call
    found = at >= 0
    found[found] = made[at[found]] // span == fingerprint[rows[found]]
    out[rows[found]] = makers[at[found]]
    return out


def flow_edges(graph: DumpGraph) -> EdgeTable:
    """The edges of a run as a drawing shows them: the graph's own (data and control), or for a dump without
    any (msprobe) one data edge per input tensor from the call that handed it on.

    In a dump only leaf calls (nodes without children) are joined: a module's inputs and outputs are
    those of the calls inside it. The producer of an input is the latest earlier leaf call with an
    output of the same fingerprint (`latest_producers`); parameters are not inputs here, and neither
    is a tensor of one value throughout (Max = Min: zeros, ones), whose statistics do not tell where it
    came from. Each (producer, consumer) pair appears once.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...      "Mean": 0.5, "Norm": 1.0}
    >>> g = parse_msprobe({"data": {"Functional.linear.0.forward": {"input_args": [dict(t, Max=3.0)], "output": [t]},
    ...                             "Torch.relu.0.forward": {"input_args": [t], "output": [dict(t, Min=0.5)]}}})
    >>> e = flow_edges(g)
    >>> [(g.nodes.ids[a], g.nodes.ids[b]) for a, b in zip(e.src, e.dst)]
    [('Functional.linear.0.forward', 'Torch.relu.0.forward')]
    """
    if len(graph.edges):
        return graph.edges
    return graph.memo("flows", lambda: _recovered_edges(graph))


def keep_flow_edges(graph: DumpGraph, edges: EdgeTable) -> None:
    """Make `edges` (read back from a result file) what `flow_edges` gives for `graph`, instead of recovering them."""
    graph.memo("flows", lambda: edges)


def _recovered_edges(graph: DumpGraph) -> EdgeTable:
    if not len(graph.tensors):
        return EdgeTable.empty()
    parent = graph.nodes.parent
    leaf = np.bincount(parent[parent >= 0], minlength=len(graph)) == 0
    leaf[0] = False
    t = graph.tensors
    constant = t.present[:, 0] & t.present[:, 1] & (t.stats[:, 0] == t.stats[:, 1])
    inputs = (t.role == Role.INPUT) & leaf[t.node] & ~constant
    producer = latest_producers(graph, execution_keys(graph), leaf, inputs)
    wanted = (producer >= 0) & (producer != t.node)
    n = len(graph)
    pairs = np.sort(producer[wanted] * n + t.node[wanted])  # (producer, consumer) in one int64, sorted
    pairs = pairs[np.flatnonzero(np.diff(pairs, prepend=-1))]  # each once: numpy's unique hashes, 30x slower here
    return EdgeTable(src=(pairs // n).astype(np.int32), dst=(pairs % n).astype(np.int32),
                     control=np.zeros(len(pairs), bool))


def folded_sources(graph: DumpGraph, edges: EdgeTable) -> np.ndarray:
    """Per node row, the row of the consumer a drawing folds it into (-1: drawn as itself).

    Only graphs with their own edges fold (a dump's call without a recovered producer is still a
    call): a leaf with no data input and exactly one consumer (control edges do not count) is folded
    into that consumer: constants, weights, a data node feeding one op.

    Examples
    --------
    >>> from dataclasses import replace
    >>> from graphcmp.core.hierarchy import HierarchyBuilder
    >>> from graphcmp.core.records import NodeKind, RunInfo
    >>> b = HierarchyBuilder()
    >>> b.add_node("net", NodeKind.MODULE, "Net", Direction.FORWARD, None, 0)
    >>> for k, name in enumerate(("w", "x", "conv", "b", "add", "out")):  # rows 2 to 7
    ...     b.add_node(name, NodeKind.API, "", Direction.FORWARD, "net", k + 1)
    >>> g = b.build(RunInfo(path="mem"))
    >>> e = EdgeTable(src=np.array([2, 3, 4, 5, 5, 6], np.int32), dst=np.array([4, 4, 6, 6, 7, 7], np.int32),
    ...               control=np.zeros(6, bool))
    >>> folded_sources(replace(g, edges=e), e).tolist()  # b feeds two nodes: drawn
    [-1, -1, 4, 4, -1, -1, -1, -1]
    """
    n = len(graph)
    into = np.full(n, -1, np.int64)
    if not len(graph.edges) or not len(edges):
        return into
    parent = graph.nodes.parent
    leaf = np.bincount(parent[parent >= 0], minlength=n) == 0
    leaf[0] = False
    data = ~edges.control
    pairs = np.unique(np.stack([edges.src[data].astype(np.int64), edges.dst[data].astype(np.int64)], axis=1), axis=0)
    fed = np.bincount(pairs[:, 1], minlength=n) > 0
    consumers = np.bincount(pairs[:, 0], minlength=n)
    fold = leaf & ~fed & (consumers == 1)
    picked = fold[pairs[:, 0]]
    into[pairs[picked, 0]] = pairs[picked, 1]
    return into
