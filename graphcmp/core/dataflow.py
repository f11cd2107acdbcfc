"""Data flow of one run recovered from what a dump records: which call produced each input, and
which forward call a backward call belongs to.

msprobe dumps have no data-flow edges. A call's input is taken to come from the earliest call whose
output has the same *fingerprint* (dtype and recorded statistics, bit for bit): a tensor passed on
unchanged keeps its statistics, and two different tensors sharing all of them is very unlikely. A
backward call (``Functional.linear.7.backward``) computes from what its forward call
(``Functional.linear.7.forward``) saw, so that call is its *forward twin*.
"""

from __future__ import annotations

import numpy as np

from graphcmp.core.records import Direction, DumpGraph, Role, TensorTable, string_codes

__all__ = ["communication_calls", "earliest_producers", "fingerprints", "forward_twins"]

_NOT_COMMUNICATION = frozenset({"init_process_group", "new_group", "destroy_process_group", "get_rank",
                                "get_world_size", "is_initialized", "barrier_fake"})

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
    mixed = string_codes(tensors.dtype)[0].astype(np.uint64)
    stats = np.ascontiguousarray(np.where(tensors.present, tensors.stats, 0.0) + 0.0)  # + 0.0: -0.0 is 0.0
    for column in stats.view(np.uint64).T:
        mixed = (mixed ^ column) * _MIX[0] + _MIX[1]
        mixed ^= mixed >> _MIX[2]
    return np.unique(mixed, return_inverse=True)[1].reshape(-1)


def earliest_producers(graph: DumpGraph, keys: np.ndarray) -> np.ndarray:
    """Per tensor row, the node row of the earliest call with an output of the same fingerprint (-1: none).

    The fingerprint leaves out the shape: a transpose or view between two dumped calls keeps the
    statistics but not the shape. `keys` orders the calls (`hierarchy.execution_keys`).
    """
    t = graph.tensors
    fingerprint = fingerprints(t)
    outputs = np.flatnonzero((t.role == Role.OUTPUT) & t.has_shape())
    made = t.node[outputs]
    order = np.lexsort((made, keys[made]))  # earliest call first (execution key, then row)
    first_fp, first_at = np.unique(fingerprint[outputs[order]], return_index=True)
    producer_of_fp = np.full(int(fingerprint.max(initial=-1)) + 1, -1, np.int64)
    producer_of_fp[first_fp] = made[order][first_at]
    return producer_of_fp[fingerprint]


def forward_twins(graph: DumpGraph, rows: np.ndarray | None = None) -> np.ndarray:
    """Per node row, the row of the forward call a backward call belongs to (-1: none, not a backward call,
    or not among `rows` when they are given).

    The two share their id but for the direction word (``...linear.7.backward`` and
    ``...linear.7.forward``; ``Module.fc.Linear.backward.0`` and ``Module.fc.Linear.forward.0``).

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> g = parse_msprobe({"data": {"Torch.relu.0.forward": {}, "Torch.relu.0.backward": {}}})
    >>> [g.nodes.ids[r] for r in forward_twins(g) if r >= 0]
    ['Torch.relu.0.forward']
    """
    twins = np.full(len(graph), -1, np.int64)
    ids = graph.nodes.ids
    backward = graph.nodes.direction == Direction.BACKWARD
    if rows is not None:
        backward &= np.isin(np.arange(len(graph)), rows)
    found, names = [], []
    for row in np.flatnonzero(backward).tolist():
        head, sep, tail = ids[row].rpartition(".backward")
        if sep:
            found.append(row)
            names.append(f"{head}.forward{tail}")
    twins[found] = graph.rows_of(names)
    return twins


def communication_calls(graph: DumpGraph) -> np.ndarray:
    """Per node row, True for a communication call (msprobe's ``Distributed.*``, GE's ``Hcom*`` ops):
    its outputs carry data of other ranks, which this run's dump does not hold.

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> g = parse_msprobe({"data": {"Distributed.all_reduce.0.forward": {}, "Torch.relu.0.forward": {}}})
    >>> [i for i, comm in zip(g.nodes.ids, communication_calls(g)) if comm]
    ['Distributed.all_reduce.0.forward']
    """
    ids = graph.nodes.ids
    codes, ops = string_codes(graph.nodes.op)
    if not len(codes):
        return np.zeros(0, bool)
    # an op is checked by the id of one of its calls: every call of all_reduce is a Distributed.* call
    first = np.unique(codes, return_index=True)[1]
    comm = np.array([(ids[row].startswith("Distributed.") and ops[code] not in _NOT_COMMUNICATION)
                     or ops[code].startswith("Hcom") for code, row in enumerate(first.tolist())])
    return comm[codes]
