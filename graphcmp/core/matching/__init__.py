"""Pairing npu nodes with bench nodes: a top-down walk that asks child matchers, in order, to pair children.

Every strategy is a `ChildMatcher`: given the still-unmatched children of a matched parent pair,
it returns the pairs it claims. The walk starts at the two roots, applies the matchers in the
order given (the first to claim a node wins), and descends into every new pair. Rule sources
such as mapping files plug in as more matchers.
"""

from graphcmp.core.matching.base import ChildMatcher, MatchTable, match_graphs
from graphcmp.core.matching.by_name import ExactMatcher
from graphcmp.core.matching.fuzzy import FuzzyMatcher

__all__ = ["ChildMatcher", "ExactMatcher", "FuzzyMatcher", "MatchTable", "default_matchers", "match_graphs"]


def default_matchers(*, fuzzy: bool = False) -> list[ChildMatcher]:
    """Exact names, then (with `fuzzy`) call-count-insensitive names in order."""
    return [ExactMatcher(), FuzzyMatcher()] if fuzzy else [ExactMatcher()]
