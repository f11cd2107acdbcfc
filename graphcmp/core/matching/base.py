"""The match table and the top-down walk that fills it from child matchers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from graphcmp.core.records import DumpGraph, NodeKind

__all__ = ["ChildMatcher", "MatchTable", "children_rows", "match_graphs"]

ROOT_RULE = "root"
GROUP_RULE = "group"


class ChildMatcher(Protocol):
    """A matching strategy: pairs children of one matched parent pair."""

    name: str

    def match_children(
        self, npu: DumpGraph, bench: DumpGraph, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> list[tuple[int, int]]:
        """Return (npu row, bench row) pairs among the given unmatched children, each row at most once."""
        ...


@dataclass(frozen=True, slots=True)
class MatchTable:
    """npu row <-> bench row pairs, and the rule that made each.

    Attributes
    ----------
    npu_to_bench : ndarray of int32
        Bench row per npu row, -1 when unmatched.
    bench_to_npu : ndarray of int32
        Npu row per bench row, -1 when unmatched.
    rule : ndarray of int8
        Index into `rules` per npu row, -1 when unmatched.
    rules : tuple of str
        Names of the rules, e.g. ``("root", "group", "exact", "fuzzy")``.
    """

    npu_to_bench: np.ndarray
    bench_to_npu: np.ndarray
    rule: np.ndarray
    rules: tuple[str, ...]

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(npu rows, bench rows) of every match, in npu execution order."""
        npu_rows = np.flatnonzero(self.npu_to_bench >= 0)
        return npu_rows, self.npu_to_bench[npu_rows]

    def count_by_rule(self) -> dict[str, int]:
        """Number of matched npu nodes per rule name."""
        counts = np.bincount(self.rule[self.rule >= 0], minlength=len(self.rules))
        return {name: int(n) for name, n in zip(self.rules, counts) if n}

    @property
    def matched(self) -> int:
        return int(np.count_nonzero(self.npu_to_bench >= 0))


def children_rows(graph: DumpGraph) -> list[list[int]]:
    """Children rows per row, in execution order (rows are pre-order, so ascending)."""
    kids: list[list[int]] = [[] for _ in range(len(graph))]
    for child, parent in enumerate(graph.nodes.parent.tolist()):
        if parent >= 0:
            kids[parent].append(child)
    return kids


def match_graphs(npu: DumpGraph, bench: DumpGraph, matchers: Sequence[ChildMatcher]) -> MatchTable:
    """Match two runs top-down, asking `matchers` in order at every matched parent pair.

    Group nodes (runs of top-level API calls) are transparent: their members are matched as
    children of the root, and a group is then paired with the group holding most of its
    members' matches.
    """
    rules = (ROOT_RULE, GROUP_RULE, *(m.name for m in matchers))
    npu_to_bench = np.full(len(npu), -1, np.int32)
    bench_to_npu = np.full(len(bench), -1, np.int32)
    rule = np.full(len(npu), -1, np.int8)
    npu_kids, bench_kids = _flat_children(npu), _flat_children(bench)

    def claim(n: int, b: int, code: int) -> None:
        npu_to_bench[n], bench_to_npu[b], rule[n] = b, n, code

    claim(0, 0, 0)
    todo = [(0, 0)]
    while todo:
        n_parent, b_parent = todo.pop()
        n_free = [r for r in npu_kids[n_parent] if npu_to_bench[r] < 0]
        b_free = [r for r in bench_kids[b_parent] if bench_to_npu[r] < 0]
        for code, matcher in enumerate(matchers, start=2):
            if not n_free or not b_free:
                break
            for n, b in matcher.match_children(npu, bench, n_free, b_free):
                if npu_to_bench[n] < 0 and bench_to_npu[b] < 0:
                    claim(n, b, code)
                    todo.append((n, b))
            n_free = [r for r in n_free if npu_to_bench[r] < 0]
            b_free = [r for r in b_free if bench_to_npu[r] < 0]
    _match_groups(npu, bench, npu_to_bench, bench_to_npu, rule)
    return MatchTable(npu_to_bench, bench_to_npu, rule, rules)


def _flat_children(graph: DumpGraph) -> list[list[int]]:
    """Children per row, with group nodes replaced by their members."""
    kids = children_rows(graph)
    groups = set(np.flatnonzero(graph.nodes.kind == NodeKind.GROUP).tolist())
    for parent in {int(graph.nodes.parent[g]) for g in groups}:
        kids[parent] = [m for k in kids[parent] for m in (kids[k] if k in groups else [k])]
    return kids


def _match_groups(
    npu: DumpGraph, bench: DumpGraph, npu_to_bench: np.ndarray, bench_to_npu: np.ndarray, rule: np.ndarray
) -> None:
    bench_parent = bench.nodes.parent
    for group in np.flatnonzero(npu.nodes.kind == NodeKind.GROUP).tolist():
        members = np.flatnonzero(npu.nodes.parent == group)
        partners = npu_to_bench[members]
        votes = Counter(int(bench_parent[b]) for b in partners[partners >= 0])
        for candidate, _ in votes.most_common():
            if bench.nodes.kind[candidate] == NodeKind.GROUP and bench_to_npu[candidate] < 0:
                npu_to_bench[group], bench_to_npu[candidate], rule[group] = candidate, group, 1
                break
