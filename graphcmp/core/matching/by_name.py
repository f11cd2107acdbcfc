"""Exact matching: a child pairs with the child of the same id under the matched parent.

`ExactMatcher` is a `TreeMatcher`: the walk asks it parent pair by parent pair (`match_children`),
and when it comes first and no rule matcher runs, `match_graphs` lets it pair the whole tree in one
vectorised pass (`match_tree`), which gives the same pairs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphcmp.core.hierarchy import depths, levels
from graphcmp.core.matching.base import RuleCode, Walk, flat_parents, non_crossing
from graphcmp.core.records import DumpGraph, NodeKind

__all__ = ["ExactMatcher"]


class ExactMatcher:
    """Pairs children whose node ids are equal (so the whole ancestor chain is equal too).

    With `ordered` (what ``--fuzzy`` uses), pairs that would cross keep execution order: among siblings,
    only the most pairs whose order agrees on both sides are kept (`non_crossing`). When an extra call
    shifts call counters, ``Tensor.__add__.2`` of one run can be another add of the other run; those
    crossing pairs are left to the fuzzy pass, which aligns the calls in order.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> g = parse_msprobe({"data": {"Functional.relu.0.forward": {}}})
    >>> ExactMatcher().match_children(g, g, [1], [1])
    [(1, 1)]
    >>> npu = parse_msprobe({"data": {"Functional.add.1.forward": {}, "Functional.mul.0.forward": {},
    ...                               "Functional.add.2.forward": {}}})
    >>> bench = parse_msprobe({"data": {"Functional.add.0.forward": {}, "Functional.mul.0.forward": {},
    ...                                 "Functional.add.1.forward": {}}})
    >>> [(npu.nodes.ids[n], bench.nodes.ids[b]) for n, b in ExactMatcher(ordered=True).match_children(
    ...     npu, bench, [2, 3, 4], [2, 3, 4])]
    [('Functional.mul.0.forward', 'Functional.mul.0.forward')]
    """

    name = "exact"

    def __init__(self, *, ordered: bool = False) -> None:
        self.ordered = ordered

    def match_children(
        self, npu: DumpGraph, bench: DumpGraph, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> list[tuple[int, int]]:
        bench_ids = bench.nodes.ids
        by_id = {bench_ids[b]: b for b in bench_rows}
        npu_ids = npu.nodes.ids
        pairs = [(n, by_id[npu_ids[n]]) for n in npu_rows if npu_ids[n] in by_id]
        if self.ordered and len(pairs) < min(len(npu_rows), len(bench_rows)):  # counters disagree somewhere
            pairs = [pairs[k] for k in non_crossing(pairs)]  # rows are in execution order on both sides
        return pairs

    def match_tree(self, walk: Walk, code: int, *, more: bool) -> list[tuple[int, int]]:
        """`match_children` for the whole tree at once: level by level, a node pairs with the bench node
        of its id when their (group-transparent) parents are paired.

        Returns the paired parents whose children the matchers after it (`more`) still have to look
        at: those with unpaired children on both sides.
        """
        npu, bench = walk.npu, walk.bench
        npu_parent, bench_parent = flat_parents(npu), flat_parents(bench)
        if npu.nodes.ids == bench.nodes.ids:  # one model's two runs: every id at the same row (ids are unique)
            partner = np.arange(len(npu), dtype=np.int64)
        else:
            partner = bench.rows_of(npu.nodes.ids)
        partner[npu.nodes.kind == NodeKind.GROUP] = -1
        partner[(partner >= 0) & (bench.nodes.kind[np.maximum(partner, 0)] == NodeKind.GROUP)] = -1
        n2b = np.full(len(npu), -1, np.int64)
        n2b[0] = 0
        if self.ordered:
            npu_kids = np.bincount(npu_parent[npu_parent >= 0], minlength=len(npu))
            bench_kids = np.bincount(bench_parent[bench_parent >= 0], minlength=len(bench))
        for level in levels(depths(npu_parent))[1:]:
            b = partner[level]
            up = n2b[npu_parent[level]]
            ok = (b >= 0) & (up >= 0) & (up == bench_parent[np.maximum(b, 0)])
            if self.ordered:
                ok[ok] = _keep_order(level[ok], b[ok], npu_parent[level[ok]], npu_kids, bench_kids[n2b])
            n2b[level[ok]] = b[ok]
        paired = np.flatnonzero(n2b >= 0)[1:]
        b2n = np.full(len(bench), -1, np.int64)
        b2n[n2b[paired]] = paired
        b2n[0] = 0
        rule = np.full(len(npu), RuleCode.UNMATCHED, np.int64)
        rule[paired] = code
        rule[0] = RuleCode.ROOT
        both = _with_free_children(npu_parent, bench_parent, n2b, b2n) if more else np.zeros(0, np.int64)
        if not len(both):  # no matcher reads a row of the walk after this: its columns stay arrays
            walk.npu_to_bench, walk.bench_to_npu, walk.rule = n2b, b2n, rule
            return []
        walk.npu_to_bench, walk.bench_to_npu, walk.rule = n2b.tolist(), b2n.tolist(), rule.tolist()
        return list(zip(both.tolist(), n2b[both].tolist()))


def _with_free_children(npu_parent: np.ndarray, bench_parent: np.ndarray, n2b: np.ndarray,
                        b2n: np.ndarray) -> np.ndarray:
    """The paired npu rows that have unpaired children on both sides (what a matcher after this one looks at)."""
    free_npu = np.bincount(npu_parent[(n2b < 0) & (npu_parent >= 0)], minlength=len(n2b))
    free_bench = np.bincount(bench_parent[(b2n < 0) & (bench_parent >= 0)], minlength=len(b2n))
    both = np.flatnonzero((n2b >= 0) & (free_npu > 0))
    return both[free_bench[n2b[both]] > 0]


def _keep_order(rows: np.ndarray, partners: np.ndarray, parents: np.ndarray, npu_kids: np.ndarray,
                twin_kids: np.ndarray) -> np.ndarray:
    """Which of one level's pairs to keep so that no two siblings' pairs cross (see `non_crossing`).

    Only the parents whose children's partners are out of order and that keep children without a partner on
    both sides (`npu_kids`: children per npu row; `twin_kids`: children of each npu row's bench twin) are looked
    at one by one: an extra call shifted the counters there. Where every child found its id on the other side,
    a crossing is the same calls run in another order (a pipeline schedule), and the ids are kept.
    """
    keep = np.ones(len(rows), bool)
    order = np.lexsort((rows, parents))
    p, b = parents[order], partners[order]
    crossing = np.unique(p[1:][(p[1:] == p[:-1]) & (b[1:] < b[:-1])])
    for parent in crossing.tolist():
        members = order[p == parent]
        if min(npu_kids[parent], twin_kids[parent]) == len(members):  # no call is left over on one side
            continue
        kept = non_crossing(list(zip(rows[members].tolist(), partners[members].tolist())))
        drop = np.ones(len(members), bool)
        drop[kept] = False
        keep[members[drop]] = False
    return keep
