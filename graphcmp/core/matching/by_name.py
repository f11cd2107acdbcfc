"""Exact matching: a child pairs with the child of the same id under the matched parent."""

from __future__ import annotations

from collections.abc import Sequence

from graphcmp.core.records import DumpGraph

__all__ = ["ExactMatcher"]


class ExactMatcher:
    """Pairs children whose node ids are equal (so the whole ancestor chain is equal too).

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> g = parse_msprobe({"data": {"Functional.relu.0.forward": {}}})
    >>> ExactMatcher().match_children(g, g, [1], [1])
    [(1, 1)]
    """

    name = "exact"
    by_id = True  # `match_graphs` may pair the whole tree by id at once when this matcher comes first

    def match_children(
        self, npu: DumpGraph, bench: DumpGraph, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> list[tuple[int, int]]:
        bench_ids = bench.nodes.ids
        by_id = {bench_ids[b]: b for b in bench_rows}
        npu_ids = npu.nodes.ids
        return [(n, by_id[npu_ids[n]]) for n in npu_rows if npu_ids[n] in by_id]
