"""Tensor-parallel merge: the runs of one TP group become one run of logical tensors.

The ranks of a tensor-parallel group make the same calls (same ids, same order); each tensor is
one of:

* **partial**: the output of a call whose value an ``all_reduce`` then sums (a RowParallelLinear's
  matmul in forward, a ColumnParallelLinear's input-gradient matmul in backward); found by value (the
  all_reduce's input has the statistics of that output on every rank); the logical tensor is the
  all_reduce's output;
* **split** (each rank holds a slice): the tensors of *parallel linears* that the structure says are
  sliced, and everything between a column-parallel linear and the row-parallel linear after it
  (attention heads, the MLP activation) unless the ranks hold identical values;
* **replicated**: everything else (LayoutNorm weights, embeddings, the residual stream, all_reduce
  outputs); every rank must hold the same values, and a rank that does not is a desync.

A parallel linear is a module whose calls hold a TP all_reduce: in its forward it is row-parallel
(weight sliced along the input features, the dimension its input's last one matches), in its
backward column-parallel (weight sliced along the output features). The local size of the sliced
dimension (`p`) tells which dimension of other tensors in the linear and its region is sliced: the
one dimension of that size (unknown when none or several have it; the logical shape is then left
empty and the comparison takes it from the other run, see `graphcmp.core.distributed.merged`).
Split statistics are combined exactly (`combine_split`); every rank's record is kept as a shard.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from graphcmp.core.dataflow import fingerprints
from graphcmp.core.distributed.topology import TP_REDUCE, LayoutError, comm_records
from graphcmp.core.hierarchy import depths, subtree_rows
from graphcmp.core.records import NodeKind, Role, TensorTable
from graphcmp.core.shards import PARTIAL, REPLICATED, SINGLE, SPLIT, ShardTable, combine_split, shape_text
from graphcmp.core.tensorcmp import tensor_file

if TYPE_CHECKING:
    from graphcmp.core.records import DumpGraph

__all__ = ["merge_tensor_parallel", "parse_shape", "single_rank_shards"]

_UNSET = -9


@dataclass(frozen=True, slots=True)
class _Linear:
    """A parallel linear: its module name, kind, the weight's sliced dimension and that dimension's local size."""

    name: str
    column: bool
    weight_dim: int
    p: int


def parse_shape(text: str) -> tuple[int, ...] | None:
    """The dimensions of a shape text, None for scalars, values and unparsable text.

    >>> parse_shape("[2, 16, 64]"), parse_shape("[]"), parse_shape("scalar")
    ((2, 16, 64), (), None)
    """
    if not text.startswith("[") or not text.endswith("]"):
        return None
    inner = text[1:-1].strip()
    try:
        return tuple(int(x) for x in inner.split(",")) if inner else ()
    except ValueError:
        return None


def single_rank_shards(graph: DumpGraph, rank: int) -> ShardTable:
    """Shards of a run that one rank holds alone (every tensor `SINGLE`)."""
    t = graph.tensors
    n = len(t)
    ids = graph.nodes.ids
    return ShardTable(
        tensor=np.arange(n, dtype=np.int32), rank=np.full(n, rank, np.int32), stats=t.stats.copy(),
        present=t.present.copy(), shape=t.shape, node=tuple(ids[r] for r in t.node.tolist()),
        file=tuple(_file(graph, k) for k in range(n)), kind=np.full(n, SINGLE, np.int8),
        split_dim=np.full(n, -1, np.int8),
    )


def _file(graph: DumpGraph, row: int) -> str:
    if not graph.tensors.file[row]:
        return ""
    path = tensor_file(graph, row)
    return str(path) if path is not None else ""


def merge_tensor_parallel(runs: Sequence[tuple[int, DumpGraph]]) -> DumpGraph:
    """Merge the runs of one tensor-parallel group (lowest rank first) into one graph with shards.

    Node ids, order and structure are the first run's; every tensor row holds the logical tensor
    and `graph.shards` the rank records it came from.

    Raises
    ------
    LayoutError
        If the ranks did not make the same calls, or an all_reduce sits in a module without a weight.
    """
    rank0, ref = runs[0]
    if len(runs) == 1:
        return replace(ref, shards=single_rank_shards(ref, rank0))
    _check_same_calls(runs)
    pos = _align(runs)
    graphs = [g for _, g in runs]
    t0 = ref.tensors
    stats = np.stack([g.tensors.stats[p] for g, p in zip(graphs, pos)])
    present = np.stack([g.tensors.present[p] for g, p in zip(graphs, pos)])
    shapes = [[g.tensors.shape[k] for k in p.tolist()] for g, p in zip(graphs, pos)]
    equal = _equal_across(graphs, pos, stats, present)
    kind, dim, partial_of = _classify(ref, runs, pos, stats, equal)
    merged, merged_present, merged_shape = _merged_values(t0, kind, dim, partial_of, stats, present, shapes, equal)
    md5 = tuple(m if k in (REPLICATED, SINGLE) else "" for m, k in zip(t0.md5, kind.tolist()))
    tensors = replace(t0, stats=merged, present=merged_present, shape=tuple(merged_shape), md5=md5,
                      file=("",) * len(t0))
    shards = _shard_table(runs, pos, stats, present, shapes, kind, dim, ref)
    return replace(ref, tensors=tensors, shards=shards)


def _check_same_calls(runs: Sequence[tuple[int, DumpGraph]]) -> None:
    rank0, ref = runs[0]
    for rank, graph in runs[1:]:
        if graph.nodes.ids == ref.nodes.ids:
            continue
        theirs, ours = set(graph.nodes.ids), set(ref.nodes.ids)
        only = next((i for i in ref.nodes.ids if i not in theirs), None)
        where = (f"{only} is on rank {rank0} only" if only else
                 f"{next(i for i in graph.nodes.ids if i not in ours)} is on rank {rank} only"
                 if theirs - ours else "the calls come in another order")
        raise LayoutError(f"ranks {rank0} and {rank} of the tensor-parallel group {[r for r, _ in runs]} did not "
                          f"make the same calls ({where}); compare the job rank by rank")


def _align(runs: Sequence[tuple[int, DumpGraph]]) -> list[np.ndarray]:
    """Per rank, the tensor row holding each tensor row of the first run (same node, role and slot)."""
    rank0, ref = runs[0]
    vocab: dict[str, int] = {}
    for _, g in runs:
        for s in dict.fromkeys(g.tensors.slot):
            vocab.setdefault(s, len(vocab))
    width = max(len(vocab), 1)

    def keys(t: TensorTable) -> np.ndarray:
        slot = np.fromiter((vocab[s] for s in t.slot), np.int64, len(t))
        return (t.node.astype(np.int64) * 4 + t.role) * width + slot

    ref_keys = keys(ref.tensors)
    out = [np.arange(len(ref_keys))]
    for rank, g in runs[1:]:
        theirs = keys(g.tensors)
        order = np.argsort(theirs, kind="stable")
        at = np.searchsorted(theirs[order], ref_keys)
        ok = (at < len(order)) & (theirs[order[np.minimum(at, len(order) - 1)]] == ref_keys)
        if not ok.all() or len(theirs) != len(ref_keys):
            k = int(np.flatnonzero(~ok)[0]) if not ok.all() else 0
            t = ref.tensors
            raise LayoutError(f"ranks {rank0} and {rank}: {ref.nodes.ids[t.node[k]]} "
                              f"{Role(int(t.role[k])).name.lower()}.{t.slot[k]} is not recorded by both ranks of "
                              "the tensor-parallel group; compare the job rank by rank")
        out.append(order[at])
    return out


def _equal_across(graphs: list[DumpGraph], pos: list[np.ndarray], stats: np.ndarray,
                  present: np.ndarray) -> np.ndarray:
    same = ((stats == stats[0]) | (np.isnan(stats) & np.isnan(stats[0]))) | ~(present & present[0])
    equal = same.all(axis=(0, 2)) & (present == present[0]).all(axis=(0, 2))
    for g, p in zip(graphs[1:], pos[1:]):
        t0, t = graphs[0].tensors, g.tensors
        for column in ("shape", "dtype", "value"):
            a, b = getattr(t0, column), getattr(t, column)
            equal &= np.fromiter((a[i] == b[j] for i, j in enumerate(p.tolist())), bool, len(p))
    return equal


def _fingerprints(t: TensorTable) -> np.ndarray:
    """Equal ids for tensors with equal dtype and statistics (`dataflow.fingerprints`); -1 for values, scalars and
    constant tensors."""
    fp = fingerprints(t).astype(np.int64)
    constant = ~t.present[:, 0] | ~t.present[:, 1] | (t.stats[:, 0] == t.stats[:, 1])
    fp[constant | ~t.has_shape()] = -1
    return fp


def _call_stem(node_id: str) -> tuple[str, str]:
    """(module name, call kind) of a module call or parameter-gradient id: kind forward, backward or grad."""
    head, _, last = node_id.rpartition(".")
    if last.isdigit():
        stem, _, call = head.rpartition(".")
        if call in ("forward", "backward"):
            return stem, call
        if call == "parameters_grad":
            return stem, "grad"
    if last == "parameters_grad":
        return head, "grad"
    return node_id, ""


def _linears(ref: DumpGraph) -> tuple[dict[str, _Linear], dict[int, int]]:
    """Parallel linears by module name, and the TP all_reduce rows with their enclosing module call rows."""
    column: dict[str, bool] = {}
    reduces: dict[int, int] = {}
    for call in comm_records(ref):
        if call.op in TP_REDUCE and call.module_row >= 0:
            stem, _ = _call_stem(ref.nodes.ids[call.module_row])
            if column.setdefault(stem, call.in_backward) != call.in_backward:
                raise LayoutError(f"{ref.info.path}: {stem} reduces across the tensor-parallel group in both its "
                                  "forward and backward calls, an unknown parallel linear; compare rank by rank")
            reduces[call.row] = call.module_row
    calls = _calls_by_stem(ref, set(column))
    out = {}
    for stem, is_column in column.items():
        out[stem] = _linear(ref, stem, is_column, calls.get(stem, {}))
    return out, reduces


def _calls_by_stem(ref: DumpGraph, stems: set[str]) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = {}
    kinds = ref.nodes.kind
    for row in np.flatnonzero((kinds == NodeKind.MODULE) | (kinds == NodeKind.PARAM_GRAD)).tolist():
        stem, call = _call_stem(ref.nodes.ids[row])
        if stem in stems and call:
            out.setdefault(stem, {}).setdefault(call, []).append(row)
    return out


def _linear(ref: DumpGraph, stem: str, is_column: bool, calls: dict[str, list[int]]) -> _Linear:
    t = ref.tensors
    rows = calls.get("forward", []) + calls.get("grad", [])
    weight = inp = out = None
    for row in rows:
        for k in ref.tensor_rows_at(row).tolist():
            dims = parse_shape(t.shape[k])
            role = int(t.role[k])
            if role in (Role.PARAM, Role.PARAM_GRAD) and t.slot[k] == "weight" and dims and len(dims) == 2:
                weight = weight or dims
            elif role == Role.INPUT and t.slot[k] == "0" and dims:
                inp = inp or (dims if "float" in t.dtype[k] or "bfloat" in t.dtype[k] else ())
            elif role == Role.OUTPUT and t.slot[k] == "0" and dims:
                out = out or dims
        if weight and out:
            break
    if not weight:
        raise LayoutError(f"{ref.info.path}: {stem} reduces across the tensor-parallel group but has no 2-D weight, "
                          "an unknown parallel linear; compare the job rank by rank")
    if is_column:
        match = [d for d in (0, 1) if out and weight[d] == out[-1]]
        wdim = 1 if match == [1] else 0
    else:
        match = [d for d in (0, 1) if inp and weight[d] == inp[-1]]
        if not match:  # no float input (a vocabulary-parallel embedding): the dimension the output does not keep
            match = [0 if not out or weight[0] != out[-1] else 1]
        wdim = 0 if match == [0] else 1
    return _Linear(stem, is_column, wdim, weight[wdim])


def _classify(ref: DumpGraph, runs: Sequence[tuple[int, DumpGraph]], pos: list[np.ndarray], stats: np.ndarray,
              equal: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
    """Kind and split dimension of every tensor row, and the all_reduce output that replaces each partial."""
    t = ref.tensors
    n = len(t)
    kind = np.full(n, _UNSET, np.int8)
    dim = np.full(n, -1, np.int8)
    is_tensor = t.has_shape()
    kind[~is_tensor] = SINGLE
    linears, reduces = _linears(ref)
    lin_of, p_of_row = _contexts(ref, linears)
    partial_of = _partials(ref, runs, pos, reduces, kind)
    _structural(ref, linears, kind, dim)
    _outer_parameter_slices(ref, kind, dim)
    fp = _fingerprints(t)
    known: dict[int, tuple[int, int, tuple[int, ...] | None]] = {}
    for k in np.flatnonzero(kind != _UNSET).tolist():
        if fp[k] >= 0:
            known.setdefault(int(fp[k]), (int(kind[k]), int(dim[k]), parse_shape(t.shape[k])))
    for k in np.flatnonzero(kind == _UNSET).tolist():
        row = int(t.node[k])
        ps = p_of_row.get(row)
        if ps is None:
            kind[k] = REPLICATED  # outside parallel linears and their regions: every rank must agree
            continue
        dims = parse_shape(t.shape[k]) or ()
        found = known.get(int(fp[k])) if fp[k] >= 0 else None
        if found is not None and found[0] in (REPLICATED, SPLIT):
            kind[k] = found[0]
            dim[k] = _carry_dim(found[1], found[2], dims) if found[0] == SPLIT else -1
        elif equal[k]:
            kind[k] = REPLICATED
        else:
            candidates = [d for d, size in enumerate(dims) if size in ps]
            inside_linear = lin_of[row] >= 0
            if inside_linear and not candidates:
                kind[k] = REPLICATED
            else:
                kind[k] = SPLIT
                dim[k] = candidates[0] if len(candidates) == 1 else -1
        if fp[k] >= 0:
            known.setdefault(int(fp[k]), (int(kind[k]), int(dim[k]), dims))
    return kind, dim, partial_of


def _carry_dim(src_dim: int, src: tuple[int, ...] | None, dims: tuple[int, ...]) -> int:
    """The split dimension of a tensor holding the same values as a split tensor of shape `src` (-1: not known).

    Only a dimension no other one can be taken for: the sliced size occurs once in the new shape (a
    transpose of a square matrix, or a reshape merging dimensions, leaves it open).

    >>> _carry_dim(0, (128, 64), (64, 128)), _carry_dim(0, (64, 64), (64, 64)), _carry_dim(1, (2, 1, 16), (2, 16))
    (1, -1, -1)
    """
    if src_dim < 0 or not src or not dims or src_dim >= len(src):
        return -1
    candidates = [d for d, size in enumerate(dims) if size == src[src_dim]]
    return candidates[0] if len(candidates) == 1 else -1


def _contexts(ref: DumpGraph, linears: dict[str, _Linear]) -> tuple[np.ndarray, dict[int, frozenset[int]]]:
    """Per row: the parallel linear whose call holds it (-1: none); the local sizes of sliced dimensions
    of rows inside parallel linears and their regions (absent: outside both)."""
    nodes = ref.nodes
    n = len(nodes)
    lin_of = np.full(n, -1, np.int64)
    names = list(linears)
    calls = _calls_by_stem(ref, set(names))
    end = subtree_rows(nodes.parent) if names else np.arange(1, n + 1)
    p_of_row: dict[int, frozenset[int]] = {}
    starts: dict[str, list[tuple[int, int]]] = {"col_f": [], "row_f": [], "col_b": [], "row_b": []}
    for index, name in enumerate(names):
        lin = linears[name]
        for call, rows in calls.get(name, {}).items():
            for row in rows:
                lin_of[row:end[row]] = index
                for r in range(row, int(end[row])):
                    p_of_row[r] = frozenset({lin.p})
                if call in ("forward", "backward"):
                    key = ("col_" if lin.column else "row_") + call[0]
                    starts[key].append((row, index))
    top = _top_ancestors(nodes.parent)
    for opener, closer in (("col_f", "row_f"), ("row_b", "col_b")):
        closing = sorted(starts[closer])
        closing_rows = np.array([r for r, _ in closing], np.int64)
        for row, index in starts[opener]:
            begin, bound = int(end[row]), int(end[top[row]])
            at = int(np.searchsorted(closing_rows, begin))
            stop, ps = bound, {linears[names[index]].p}
            if at < len(closing) and closing[at][0] < bound:
                stop = closing[at][0]
                ps.add(linears[names[closing[at][1]]].p)
            for r in range(begin, stop):
                if lin_of[r] < 0:
                    p_of_row[r] = frozenset(ps)
    return lin_of, p_of_row


def _top_ancestors(parent: np.ndarray) -> np.ndarray:
    depth = depths(parent)
    top = np.arange(len(parent))
    for _ in range(int(depth.max(initial=0))):
        up = depth[top] > 1
        if not up.any():
            break
        top = np.where(up, parent[top], top)
    return top


def _partials(ref: DumpGraph, runs: Sequence[tuple[int, DumpGraph]], pos: list[np.ndarray], reduces: dict[int, int],
              kind: np.ndarray) -> dict[int, int]:
    """Partial sums (the outputs an all_reduce sums, on every rank) -> the all_reduce output replacing them."""
    t = ref.tensors
    partial_of: dict[int, int] = {}
    ends = subtree_rows(ref.nodes.parent) if reduces else None
    fps = [_fingerprints(g.tensors) for _, g in runs]
    for reduce_row, module_row in reduces.items():
        rows = ref.tensor_rows_at(reduce_row).tolist()
        inp = next((k for k in rows if t.role[k] == Role.INPUT and t.slot[k] == "0"), None)
        out = next((k for k in rows if t.role[k] == Role.OUTPUT and t.slot[k] == "0"), None)
        if inp is None or out is None:
            continue
        kind[out] = REPLICATED
        kind[inp] = PARTIAL
        partial_of[inp] = out
        owner = (t.node >= module_row) & (t.node < reduce_row) & (t.node < ends[module_row])
        candidates = np.flatnonzero(owner & (t.role == Role.OUTPUT))
        for fp, p in zip(fps, pos):
            target = fp[p[inp]]
            candidates = candidates[(target >= 0) & (fp[p[candidates]] == target)] if target >= 0 else candidates[:0]
        for k in candidates.tolist():
            kind[k] = PARTIAL
            partial_of[k] = out
    return partial_of


def _structural(ref: DumpGraph, linears: dict[str, _Linear], kind: np.ndarray, dim: np.ndarray) -> None:
    """What the structure of each parallel linear call says about its own tensors."""
    t = ref.tensors
    calls = _calls_by_stem(ref, set(linears))
    for name, lin in linears.items():
        for call, rows in calls.get(name, {}).items():
            for row in rows:
                for k in ref.tensor_rows_at(row).tolist():
                    if kind[k] != _UNSET:
                        continue
                    rule = _role_rule(lin, call, int(t.role[k]), t.slot[k])
                    if rule is None:
                        continue
                    dims = parse_shape(t.shape[k]) or ()
                    if rule == REPLICATED:
                        kind[k] = REPLICATED
                    elif rule == "last" and dims and dims[-1] == lin.p:
                        kind[k], dim[k] = SPLIT, len(dims) - 1
                    elif rule == "weight" and len(dims) == 2 and dims[lin.weight_dim] == lin.p:
                        kind[k], dim[k] = SPLIT, lin.weight_dim
                    elif rule == "first" and dims and dims[0] == lin.p:
                        kind[k], dim[k] = SPLIT, 0


def _outer_parameter_slices(ref: DumpGraph, kind: np.ndarray, dim: np.ndarray) -> None:
    """Tensors of calls outside every module that hold a slice of a split parameter or its gradient.

    Outside the model, a training loop works on the parameters themselves: a data-parallel gradient
    ``all_reduce`` (over another group than the tensor-parallel one), the gradient's scaling, an optimizer
    step. Each keeps the parameter's layout: a slice stays that slice. Which parameter a tensor carries is
    told, in this order, by

    * its local shape, when only split parameters have it (with one sliced dimension among them);
    * the parameter or gradient record of this rank that holds the very same tensor (its statistics:
      the all_reduce's input is the accumulated gradient msprobe recorded last);
    * the call's first input, for an output of the same shape (an in-place or elementwise op on the slice).

    Any other tensor is left to the default (replicated). No value is compared across ranks.
    """
    t = ref.tensors
    outside = _outside_modules(ref)
    rows = np.flatnonzero(outside[t.node] & (kind == _UNSET) & np.isin(t.role, (Role.INPUT, Role.OUTPUT)))
    if not len(rows):
        return
    params = np.flatnonzero(np.isin(t.role, (Role.PARAM, Role.PARAM_GRAD)))
    split_dims: dict[str, set[int]] = {}
    other: set[str] = set()
    fp = _fingerprints(t)
    by_value: dict[int, set[tuple[int, int]]] = {}
    for k in params.tolist():
        split = kind[k] == SPLIT and dim[k] >= 0
        if split:
            split_dims.setdefault(t.shape[k], set()).add(int(dim[k]))
        else:
            other.add(t.shape[k])
        if fp[k] >= 0:
            by_value.setdefault(int(fp[k]), set()).add((SPLIT, int(dim[k])) if split else (REPLICATED, -1))
    if not split_dims:
        return
    sliced = {shape: next(iter(dims)) for shape, dims in split_dims.items() if len(dims) == 1 and shape not in other}
    first_input: dict[int, int] = {}
    for k in rows.tolist():  # rows in node order, a call's inputs before its outputs
        node, shape = int(t.node[k]), t.shape[k]
        if t.role[k] == Role.INPUT and t.slot[k] == "0":
            first_input[node] = k
        found = sliced.get(shape)
        if found is None and shape in split_dims:
            same = by_value.get(int(fp[k]), set()) if fp[k] >= 0 else set()
            found = next(iter(same))[1] if len(same) == 1 and next(iter(same))[0] == SPLIT else None
            source = first_input.get(node)
            if found is None and t.role[k] == Role.OUTPUT and source is not None and kind[source] == SPLIT \
                    and t.shape[source] == shape:
                found = int(dim[source])
        if found is not None:
            kind[k], dim[k] = SPLIT, found


def _outside_modules(ref: DumpGraph) -> np.ndarray:
    """Per node row: an API call no module call encloses."""
    nodes = ref.nodes
    n = len(nodes)
    inside = np.zeros(n, bool)
    is_module = nodes.kind == NodeKind.MODULE
    for row in range(1, n):  # parents come before their children
        parent = int(nodes.parent[row])
        inside[row] = parent > 0 and (bool(is_module[parent]) or bool(inside[parent]))
    return ~inside & (nodes.kind == NodeKind.API)


def _role_rule(lin: _Linear, call: str, role: int, slot: str) -> object:
    """REPLICATED, ``"last"``, ``"weight"``, ``"first"`` (split there) or None (no structural rule)."""
    if role in (Role.PARAM, Role.PARAM_GRAD):
        if slot == "weight":
            return "weight"
        if slot == "bias":
            return "first" if lin.column else REPLICATED
        return None
    if slot != "0":
        return None
    forward = call == "forward"
    if call not in ("forward", "backward"):
        return None
    gets_split = (role == Role.OUTPUT) == forward if lin.column else (role == Role.INPUT) == forward
    return "last" if gets_split else REPLICATED


def _merged_values(t0: TensorTable, kind: np.ndarray, dim: np.ndarray, partial_of: dict[int, int], stats: np.ndarray,
                   present: np.ndarray, shapes: list[list[str]], equal: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    merged = stats[0].copy()
    merged_present = present[0].copy()
    merged_shape = list(t0.shape)
    for k in np.flatnonzero((kind == REPLICATED) & ~equal).tolist():
        g = _majority(stats[:, k], present[:, k])
        merged[k], merged_present[k] = stats[g, k], present[g, k]
    split = np.flatnonzero(kind == SPLIT)
    if len(split):
        dims_of = {s: parse_shape(s) for s in {s[k] for s in shapes for k in split.tolist()}}
        count_of = {s: float(math.prod(d)) if d is not None else 1.0 for s, d in dims_of.items()}
        local = [[dims_of[s[k]] for s in shapes] for k in split.tolist()]
        counts = np.array([[count_of[s[k]] for k in split.tolist()] for s in shapes])
        merged[split], merged_present[split] = combine_split(stats[:, split], present[:, split], counts)
        for k, per_rank in zip(split.tolist(), local):
            merged_shape[k] = _logical_shape(per_rank, int(dim[k]))
    for k, out in partial_of.items():
        merged[k], merged_present[k], merged_shape[k] = merged[out], merged_present[out], merged_shape[out]
    return merged, merged_present, merged_shape


def _majority(stats: np.ndarray, present: np.ndarray) -> int:
    """Index of the replica most ranks share (the lowest rank on a tie)."""
    best, best_count = 0, 0
    for g in range(len(stats)):
        same = ((stats == stats[g]) | (np.isnan(stats) & np.isnan(stats[g]))).all(axis=1) & (
            present == present[g]).all(axis=1)
        count = int(same.sum())
        if count > best_count:
            best, best_count = g, count
    return best


def _logical_shape(local: list[tuple[int, ...] | None], d: int) -> str:
    """The shape of the whole from the slices' shapes, ``""`` when the dimension is unknown or shapes disagree."""
    first = local[0]
    if d < 0 or first is None or d >= len(first) or any(s is None or len(s) != len(first) for s in local):
        return ""
    if any(s[:d] + s[d + 1:] != first[:d] + first[d + 1:] for s in local):  # type: ignore[index]
        return ""
    dims = list(first)
    dims[d] = sum(s[d] for s in local)  # type: ignore[index]
    return shape_text(dims)


def _shard_table(runs: Sequence[tuple[int, DumpGraph]], pos: list[np.ndarray], stats: np.ndarray,
                 present: np.ndarray, shapes: list[list[str]], kind: np.ndarray, dim: np.ndarray,
                 ref: DumpGraph) -> ShardTable:
    n, count = stats.shape[1], len(runs)
    single = kind == SINGLE
    keep = np.ones((count, n), bool)
    keep[1:, single] = False
    tensor = np.repeat(np.arange(n, dtype=np.int32)[None, :], count, axis=0)
    rank = np.repeat(np.array([r for r, _ in runs], np.int32)[:, None], n, axis=1)
    order = np.lexsort((rank[keep], tensor[keep]))
    ids = ref.nodes.ids
    node_ids = [ids[r] for r in ref.tensors.node.tolist()]
    files = [[_file(g, int(p[k])) if g.tensors.file[int(p[k])] else "" for k in range(n)]
             for (_, g), p in zip(runs, pos)]
    flat = lambda rows: [x for g in range(count) for k, x in enumerate(rows[g]) if keep[g, k]]  # noqa: E731
    shape_col, file_col = flat(shapes), flat(files)
    node_col = [node_ids[k] for g in range(count) for k in range(n) if keep[g, k]]
    pick = order.tolist()
    return ShardTable(
        tensor=tensor[keep][order], rank=rank[keep][order], stats=stats[keep][order], present=present[keep][order],
        shape=tuple(shape_col[i] for i in pick), node=tuple(node_col[i] for i in pick),
        file=tuple(file_col[i] for i in pick), kind=np.where(kind == _UNSET, REPLICATED, kind).astype(np.int8),
        split_dim=dim.astype(np.int8),
    )
