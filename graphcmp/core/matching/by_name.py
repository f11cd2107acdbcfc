"""Exact matching: a child pairs with the child of the same id under the matched parent.

`ExactMatcher` is a `TreeMatcher`: the walk asks it parent pair by parent pair (`match_children`),
and when it comes first and no rule matcher runs, `match_graphs` lets it pair the whole tree in one
vectorised pass (`match_tree`), which gives the same pairs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphcmp.core.arrays import sorted_unique
from graphcmp.core.hierarchy import depths, levels
from graphcmp.core.matching.base import RuleCode, Walk, flat_parents
from graphcmp.core.readers.naming import parse_node_id, strip_counter
from graphcmp.core.records import DumpGraph, NodeKind

__all__ = ["ExactMatcher"]


class ExactMatcher:
    """Pairs children whose node ids are equal (so the whole ancestor chain is equal too).

    With `ordered` (the default of `graphcmp compare`), a call counter is not trusted where it disagrees: when
    an extra call shifted the counters, ``Tensor.__mul__.41`` of one run can be another multiply of the other
    run. Among the children of a matched pair, the calls of one name (the id without its counter) keep their
    exact pairs only when that name's ids are the same on both sides; otherwise they are left to the fuzzy
    pass, which aligns them in order. The same calls in another order (a pipeline schedule) keep their ids.

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
        if self.ordered and len(pairs) < max(len(npu_rows), len(bench_rows)):  # a call is left over somewhere
            shifted = _shifted_names(npu, bench, npu_rows, bench_rows)
            pairs = [(n, b) for n, b in pairs if _name(npu, n) not in shifted]
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
            bench_kids = _children(bench_parent)
        for level in levels(depths(npu_parent))[1:]:
            b = partner[level]
            up = n2b[npu_parent[level]]
            ok = (b >= 0) & (up >= 0) & (up == bench_parent[np.maximum(b, 0)])
            if self.ordered:
                ok[ok] = _trusted(npu, bench, level[ok], npu_parent, n2b, npu_kids, bench_kids)
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


def _name(graph: DumpGraph, row: int) -> tuple[int, str]:
    """What a call keeps when counters shift: its kind and its id without the counter."""
    return int(graph.nodes.kind[row]), strip_counter(graph.nodes.ids[row])


def _shifted_names(npu: DumpGraph, bench: DumpGraph, npu_rows: Sequence[int],
                   bench_rows: Sequence[int]) -> set[tuple[int, str]]:
    """The names (`_name`) of the children whose call counters shifted between the two sides.

    For each name whose counters differ, the shift is the offset that pairs the most calls (npu counter ``c``
    with bench counter ``c - offset``); the counters shifted when that offset is not 0. An extra call of the
    name itself (``add.1`` beside ``add.0``) pairs as many at offsets 0 and 1: the ids are kept.
    """
    counters: dict[tuple[int, str], list[set[int]]] = {}
    for graph, rows, side in ((npu, npu_rows, 0), (bench, bench_rows, 1)):
        for r in rows:
            counters.setdefault(_name(graph, r), [set(), set()])[side].add(parse_node_id(graph.nodes.ids[r])[3])
    return {name for name, (a, b) in counters.items() if a != b and _best_offset(a, b) != 0}


def _best_offset(npu: set[int], bench: set[int]) -> int:
    """The counter offset that pairs the most calls, the smallest one of a tie (0 first)."""
    offsets = {c - d for c in npu for d in bench} if len(npu) * len(bench) <= 4096 else {0, 1, -1}
    return min(offsets | {0}, key=lambda k: (-len(npu & {d + k for d in bench}), abs(k), k))


def _children(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by parent, and where each parent's children start: ``order[starts[p]:starts[p + 1]]``."""
    order = np.argsort(parent, kind="stable")
    starts = np.searchsorted(parent[order], np.arange(len(parent) + 1))
    return order, starts


def _with_free_children(npu_parent: np.ndarray, bench_parent: np.ndarray, n2b: np.ndarray,
                        b2n: np.ndarray) -> np.ndarray:
    """The paired npu rows that have unpaired children on both sides (what a matcher after this one looks at)."""
    free_npu = np.bincount(npu_parent[(n2b < 0) & (npu_parent >= 0)], minlength=len(n2b))
    free_bench = np.bincount(bench_parent[(b2n < 0) & (bench_parent >= 0)], minlength=len(b2n))
    both = np.flatnonzero((n2b >= 0) & (free_npu > 0))
    return both[free_bench[n2b[both]] > 0]


def _trusted(npu: DumpGraph, bench: DumpGraph, rows: np.ndarray, npu_parent: np.ndarray, n2b: np.ndarray,
             npu_kids: np.ndarray, bench_kids: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Which of one level's exact pairs (npu `rows`) to keep: all of them but, under a parent pair that leaves a
    child without a partner on a side (rare: an extra call shifted counters there), the calls of a name whose
    ids differ between the sides (`_shifted_names`), looked at parent by parent."""
    keep = np.ones(len(rows), bool)
    parents = npu_parent[rows]
    paired = np.bincount(parents, minlength=len(npu_kids))
    order, starts = bench_kids
    twins = n2b[parents]
    bench_count = starts[twins + 1] - starts[twins]
    loose = sorted_unique(parents[(paired[parents] < npu_kids[parents]) | (paired[parents] < bench_count)])
    for parent in loose.tolist():
        twin = int(n2b[parent])
        npu_rows = np.flatnonzero(npu_parent == parent).tolist()
        shifted = _shifted_names(npu, bench, npu_rows, order[starts[twin]:starts[twin + 1]].tolist())
        if shifted:
            members = np.flatnonzero(parents == parent)
            keep[members] = [_name(npu, r) not in shifted for r in rows[members].tolist()]
    return keep
