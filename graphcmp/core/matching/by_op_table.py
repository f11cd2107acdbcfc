"""Op tables (get_op_map style): children pair by op type through a name table between backends.

``torch.utils.get_op_map()`` on PyTorch 1.5 NPU returns ``(ir_map, param_map)``: op types of one
backend to the other's (``CudnnConvolutionBackward <-> NpuConvolutionBackward``) and, per op,
parameter renames (``CudnnBatchNormBackward: {epsilon: eps}``). The table is read both ways, and
an op it does not list falls back to msaccucmp's prefix swaps ``Npu`` <-> ``Cudnn`` / ``Thnn``
(``NpuFooBackward`` pairs with ``CudnnFooBackward`` or ``ThnnFooBackward``). Inside a matched
parent pair the k-th npu child of an op pairs with the k-th bench child of the mapped op, per kind
and direction. Parameter renames apply to the tensor slots of every matched node of that op.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from graphcmp.core.mapping_files import RuleFile
from graphcmp.core.matching.base import Claim, RuleMatcher, RuleNote, Walk
from graphcmp.core.records import DumpGraph

__all__ = ["PREFIX_SWAPS", "OpTableMatcher", "swapped_prefixes"]

PREFIX_SWAPS: tuple[tuple[str, tuple[str, ...]], ...] = (("Npu", ("Cudnn", "Thnn")), ("Cudnn", ("Npu",)),
                                                         ("Thnn", ("Npu",)))
"""Backend prefixes of op types that stand for each other when the table has no entry (msaccucmp)."""


def swapped_prefixes(op: str) -> tuple[str, ...]:
    """Op names `op` may have on the other backend by prefix swap.

    >>> swapped_prefixes("NpuConvolutionBackward")
    ('CudnnConvolutionBackward', 'ThnnConvolutionBackward')
    >>> swapped_prefixes("AddmmBackward")
    ()
    """
    for prefix, others in PREFIX_SWAPS:
        if op.startswith(prefix) and len(op) > len(prefix) and op[len(prefix)].isupper():
            return tuple(other + op[len(prefix):] for other in others)
    return ()


class OpTableMatcher(RuleMatcher):
    """Pairs children by op type through an op table and prefix swaps; see the module docstring.

    Parameters
    ----------
    ops, params : RuleFile
        The two halves `load_op_table` returns.
    name : str, optional
        Rule name in reports. Defaults to ``"op-map"``.

    Examples
    --------
    >>> from graphcmp.core.mapping_files import RuleEntry, RuleFile
    >>> from graphcmp.core.hierarchy import HierarchyBuilder
    >>> from graphcmp.core.records import Direction, NodeKind, RunInfo
    >>> def run(op):
    ...     b = HierarchyBuilder()
    ...     b.add_node("conv_grad", NodeKind.API, op, Direction.BACKWARD, None, 0)
    ...     return b.build(RunInfo(path="mem"))
    >>> table = RuleFile("ops.json", ())
    >>> m = OpTableMatcher(table, RuleFile("ops.json", ()))
    >>> from graphcmp.core.matching import match_graphs
    >>> match_graphs(run("NpuConvolutionBackward"), run("CudnnConvolutionBackward"), [m]).count_by_rule()
    {'root': 1, 'op-map': 1}
    """

    def __init__(self, ops: RuleFile, params: RuleFile, name: str | None = None) -> None:
        super().__init__(ops)
        self.params = params
        self.name = name or "op-map"
        self.table: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for i, e in enumerate(ops.entries):
            self.table[e.key].append((str(e.value), i))
            self.table[str(e.value)].append((e.key, i))
        self.npu_ops: set[str] = set()
        self.param_uses: dict[int, int] = {}

    def prepare(self, npu: DumpGraph, bench: DumpGraph) -> None:
        self.npu_ops = set(npu.nodes.op)
        rows_by_op: dict[str, list[int]] = defaultdict(list)
        for row, op in enumerate(npu.nodes.op):
            rows_by_op[op].append(row)
        slots_by_node: dict[int, set[str]] = defaultdict(set)
        for node, slot in zip(npu.tensors.node.tolist(), npu.tensors.slot):
            slots_by_node[node].add(slot)
        self.param_uses = {i: sum(e.key in slots_by_node[r] for r in rows_by_op.get(e.scope, ()))
                           for i, e in enumerate(self.params.entries)}

    def claim_children(
        self, walk: Walk, npu_parent: int, bench_parent: int, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> Sequence[Claim]:
        npu, bench = walk.npu, walk.bench
        offered: dict[tuple[int, int, str], list[int]] = defaultdict(list)
        for b in bench_rows:
            offered[(int(bench.nodes.kind[b]), int(bench.nodes.direction[b]), bench.nodes.op[b])].append(b)
        taken: dict[tuple[int, int, str], int] = defaultdict(int)
        claims = []
        for n in npu_rows:
            kind, direction, op = int(npu.nodes.kind[n]), int(npu.nodes.direction[n]), npu.nodes.op[n]
            candidates = [*self.table.get(op, ()), *((o, -1) for o in swapped_prefixes(op))]
            for target, entry in candidates:
                key = (kind, direction, target)
                if taken[key] < len(offered.get(key, ())):
                    claims.append(Claim((n,), (offered[key][taken[key]],), entry))
                    taken[key] += 1
                    break
        return claims

    def renames(self) -> Mapping[str, Mapping[str, str]]:
        out: dict[str, dict[str, str]] = defaultdict(dict)
        for e in self.params.entries:
            out[e.scope].setdefault(e.key, str(e.value))
        return out

    def notes(self, matched: Mapping[int, int]) -> list[RuleNote]:
        notes = super().notes(matched)
        for i, e in enumerate(self.params.entries):
            uses = self.param_uses.get(i, 0)
            problem = "" if uses else (f"the npu run has no {e.scope!r} node" if e.scope not in self.npu_ops
                                       else f"no {e.scope!r} node has a tensor {e.key!r}")
            notes.append(RuleNote(self.name, e.where, e.text, uses, problem))
        return notes

    def problem(self, entry: int) -> str:
        e = self.entries[entry]
        if e.key not in self.npu_ops and str(e.value) not in self.npu_ops:
            return f"the npu run has no op {e.key!r} (nor {e.value!r})"
        return "no counterpart of that op under the same matched parent in the bench run"
