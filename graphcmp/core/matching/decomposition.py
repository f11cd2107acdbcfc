"""Decomposed ops: inside a matched module pair, the API calls left over on each side correspond.

A module holds one API call on one side and several on the other when a framework decomposes an
op (MindSpore's ``Dense`` runs Shape, Reshape, MatMul, BiasAdd, Reshape where PyTorch's ``Linear``
runs one ``linear``; its ``Conv2d`` runs Conv2D + BiasAdd). After the other rules, if a matched
module pair still has, in one direction, one unmatched API call on one side and one or more on the
other, they form one group (one to one: a plain pair). A group's boundary is the enclosing
module's own inputs and outputs, which the module pair already compares, so the members are
marked matched (rule ``fused``) and not compared one by one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from graphcmp.core.matching.base import Claim, RuleMatcher, Walk
from graphcmp.core.records import NodeKind

__all__ = ["DecompositionMatcher"]


class DecompositionMatcher(RuleMatcher):
    """Groups the leftover API calls of a matched module pair; see the module docstring.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> from graphcmp.core.matching import match_graphs, default_matchers
    >>> ms = parse_msprobe({"data": {"Module.fc.Dense.forward.0": {}, "Primitive.matmul.MatMul.0.forward": {},
    ...                              "Primitive.bias_add.BiasAdd.0.forward": {}}},
    ...                    {"Primitive.matmul.MatMul.0.forward": "Module.fc.Dense.forward.0",
    ...                     "Primitive.bias_add.BiasAdd.0.forward": "Module.fc.Dense.forward.0"})
    >>> pt = parse_msprobe({"data": {"Module.fc.Dense.forward.0": {}, "Functional.linear.0.forward": {}}},
    ...                    {"Functional.linear.0.forward": "Module.fc.Dense.forward.0"})
    >>> table = match_graphs(ms, pt, [*default_matchers(), DecompositionMatcher()])
    >>> [(g.npu, g.bench, g.via) for g in table.groups]
    [((2, 3), (2,), 1)]
    """

    def __init__(self, name: str | None = None) -> None:
        super().__init__(None)
        self.name = name or "fused"

    def claim_children(
        self, walk: Walk, npu_parent: int, bench_parent: int, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> Sequence[Claim]:
        npu, bench = walk.npu, walk.bench
        if npu.nodes.kind[npu_parent] != NodeKind.MODULE or bench.nodes.kind[bench_parent] != NodeKind.MODULE:
            return ()
        npu_calls, bench_calls = _apis_by_direction(npu, npu_rows), _apis_by_direction(bench, bench_rows)
        claims = []
        for direction, n_rows in npu_calls.items():
            b_rows = bench_calls.get(direction, [])
            if not b_rows or min(len(n_rows), len(b_rows)) != 1:
                continue
            single = len(n_rows) == len(b_rows) == 1
            claims.append(Claim(tuple(n_rows), tuple(b_rows), via=-1 if single else npu_parent))
        return claims


def _apis_by_direction(graph, rows: Sequence[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        if graph.nodes.kind[r] == NodeKind.API:
            out[int(graph.nodes.direction[r])].append(r)
    return out
