"""Fuzzy matching: children pair by name without call counters, aligned in execution order.

One extra call early in a run shifts every later call counter (``Functional.linear.3`` becomes
``Functional.linear.4``). Aligning the counter-free names of the unmatched children of a matched
parent pair with a longest-common-subsequence alignment pairs the calls that correspond, and
leaves the extra one unmatched. The matcher is ``ordered``: the walk asks it gap by gap between the
sibling pairs already made, so no fuzzy pair crosses an exact one (with ``--fuzzy`` the exact pass
keeps order too: `ExactMatcher(ordered=True)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from graphcmp.core.readers.naming import strip_counter
from graphcmp.core.records import DumpGraph

__all__ = ["FuzzyMatcher"]


class FuzzyMatcher:
    """Pairs children whose counter-free names align in execution order.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> npu = parse_msprobe({"data": {"Functional.linear.0.forward": {}, "Functional.relu.1.forward": {}}})
    >>> bench = parse_msprobe({"data": {"Functional.relu.0.forward": {}}})
    >>> npu.nodes.ids[2:], bench.nodes.ids[1:]
    (('Functional.linear.0.forward', 'Functional.relu.1.forward'), ('Functional.relu.0.forward',))
    >>> FuzzyMatcher().match_children(npu, bench, [2, 3], [1])
    [(3, 1)]
    """

    name = "fuzzy"
    ordered = True

    def match_children(
        self, npu: DumpGraph, bench: DumpGraph, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> list[tuple[int, int]]:
        npu_keys = [_key(npu, r) for r in npu_rows]
        bench_keys = [_key(bench, r) for r in bench_rows]
        aligner = SequenceMatcher(None, npu_keys, bench_keys, autojunk=False)
        pairs = []
        for block in aligner.get_matching_blocks():
            pairs.extend((npu_rows[block.a + k], bench_rows[block.b + k]) for k in range(block.size))
        return pairs


def _key(graph: DumpGraph, row: int) -> tuple[int, str]:
    return int(graph.nodes.kind[row]), strip_counter(graph.nodes.ids[row])
