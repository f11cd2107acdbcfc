"""Given matches: pairs another tool made (msprobe's links in a `.vis`), pinned before graphcmp matches anything.

A `GivenMatches` record holds the pairs as node ids and the rule spec that rebuilds them from their
file (``msprobe=/abs/compare.vis``; see `graphcmp.core.matching.specs`), so a comparison made with
them can be made again, with manual matches first, from the report alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from graphcmp.core.matching.base import Claim, RuleMatcher
from graphcmp.core.records import DumpGraph, FrozenColumns

__all__ = ["GivenMatcher", "GivenMatches"]


@dataclass(frozen=True, slots=True, eq=False)
class GivenMatches(FrozenColumns):
    """Pairs made elsewhere, npu id -> bench id, and the spec that rebuilds them (its name in reports)."""

    links: Mapping[str, str]
    source: str


class GivenMatcher(RuleMatcher):
    """Pins the given pairs, npu node by npu node in execution order; it matches nothing else.

    A bench node is kept by the first npu node to claim it (by then, earlier rules such as manual
    matches have claimed theirs). Group nodes left without a given partner are paired by the usual
    group vote of `match_graphs`.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> from graphcmp.core.matching import match_graphs
    >>> npu = parse_msprobe({"data": {"Functional.gelu.0.forward": {}}})
    >>> bench = parse_msprobe({"data": {"Torch.gelu.0.forward": {}}})
    >>> given = GivenMatches({"Functional.gelu.0.forward": "Torch.gelu.0.forward"}, "msprobe=/data/compare.vis")
    >>> match_graphs(npu, bench, [GivenMatcher(given)]).count_by_rule()
    {'root': 1, 'msprobe=/data/compare.vis': 1}
    """

    def __init__(self, given: GivenMatches) -> None:
        super().__init__()
        self.given = given
        self.name = given.source

    def pins(self, npu: DumpGraph, bench: DumpGraph) -> Sequence[Claim]:
        links = self.given.links
        linked = [(n, links[node_id]) for n, node_id in enumerate(npu.nodes.ids) if node_id in links]
        partners = bench.rows_of([b for _, b in linked]).tolist()
        return [Claim((n,), (b,)) for (n, _), b in zip(linked, partners) if b >= 0]
