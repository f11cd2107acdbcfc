"""Pairing npu nodes with bench nodes: a top-down walk that asks matchers, in order, to pair children.

Every plain strategy is a `ChildMatcher`: given the still-unmatched children of a matched parent
pair, it returns the pairs it claims. Rule strategies (`RuleMatcher`: layer/cell/API/data mapping
files, op tables, Model Explorer mappings, fused ops, manual matches) may also pin pairs anywhere,
claim fused groups and report what each of their entries matched. The walk starts at the two
roots (and at every pinned pair), applies the matchers in the order given (the first to claim a
node wins) and descends into every new pair. `RULE_ORDER` is the documented order of the sources.
"""

from graphcmp.core.matching.base import (
    ChildMatcher,
    Claim,
    FusedGroup,
    MatchTable,
    RuleMatcher,
    RuleNote,
    SlotMap,
    match_graphs,
)
from graphcmp.core.matching.by_name import ExactMatcher
from graphcmp.core.matching.fuzzy import FuzzyMatcher

__all__ = [
    "ChildMatcher",
    "Claim",
    "ExactMatcher",
    "FusedGroup",
    "FuzzyMatcher",
    "MatchTable",
    "RuleMatcher",
    "RuleNote",
    "SlotMap",
    "default_matchers",
    "match_graphs",
]


def default_matchers(*, fuzzy: bool = True) -> list[ChildMatcher]:
    """Exact names, then (with `fuzzy`) call-count-insensitive names in order; with `fuzzy` no two pairs cross."""
    return [ExactMatcher(ordered=True), FuzzyMatcher()] if fuzzy else [ExactMatcher()]
