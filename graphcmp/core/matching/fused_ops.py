"""Fused ops: an npu op that stands for several bench ops (GE's ``_datadump_original_op_names``).

GE fuses framework ops (Conv2D + BatchNorm + Scale + ReLU -> one ``Conv2D``) and records the
originals on the fused op; the GE reader keeps them as the node attribute ``original_op_names``
(comma-separated). Each npu op whose originals name bench nodes is pinned to them: one original is
a plain pair, several make a one-to-many group, and several npu ops naming the same single
original (an op GE split) make a many-to-one group. Groups are compared on their boundary tensors
(the first members' inputs, the last members' outputs). An original is found by its full id in
the bench run, else by its last ``/`` segment when that is unique there. GE lists an original on
more than one fused op at times (a Transpose folded into the BatchNorm after it, and also kept as
its own op); it goes to the first of them in execution order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from graphcmp.core.matching.base import Claim, RuleMatcher
from graphcmp.core.records import DumpGraph

__all__ = ["ORIGINAL_NAMES_ATTR", "FusedOpsMatcher", "original_names"]

ORIGINAL_NAMES_ATTR = "original_op_names"


def original_names(graph: DumpGraph, row: int) -> tuple[str, ...]:
    """The original op names recorded on `row` (empty when none)."""
    attrs = graph.nodes.attrs
    if not attrs:
        return ()
    text = dict(attrs[row]).get(ORIGINAL_NAMES_ATTR, "")
    return tuple(name.strip() for name in text.split(",") if name.strip())


class FusedOpsMatcher(RuleMatcher):
    """Pins fused npu ops to the bench ops they replace; see the module docstring.

    Examples
    --------
    >>> from graphcmp.core.hierarchy import HierarchyBuilder
    >>> from graphcmp.core.records import Direction, NodeKind, RunInfo
    >>> from graphcmp.core.matching import match_graphs
    >>> b = HierarchyBuilder()
    >>> b.add_node("conv_bn", NodeKind.API, "Conv2D", Direction.FORWARD, None, 0,
    ...            attrs=[("original_op_names", "conv,bn")])
    >>> npu = b.build(RunInfo(path="npu"))
    >>> b = HierarchyBuilder()
    >>> b.add_node("conv", NodeKind.API, "Conv2D", Direction.FORWARD, None, 0)
    >>> b.add_node("bn", NodeKind.API, "BatchNorm", Direction.FORWARD, None, 1)
    >>> table = match_graphs(npu, b.build(RunInfo(path="bench")), [FusedOpsMatcher()])
    >>> [(g.npu, g.bench) for g in table.groups]
    [((1,), (2, 3))]
    """

    name = "fused-ops"

    def __init__(self, name: str | None = None) -> None:
        super().__init__(None)
        self.name = name or "fused-ops"

    def pins(self, npu: DumpGraph, bench: DumpGraph) -> Sequence[Claim]:
        if not npu.nodes.attrs:
            return ()
        by_leaf: dict[str, list[int]] = defaultdict(list)
        for row, node_id in enumerate(bench.nodes.ids):
            by_leaf[node_id.rsplit("/", 1)[-1]].append(row)

        def find(name: str) -> int:
            if name in bench:
                return bench.row(name)
            rows = by_leaf.get(name.rsplit("/", 1)[-1], ())
            return rows[0] if len(rows) == 1 else -1

        split: dict[int, list[int]] = defaultdict(list)  # bench row -> npu rows naming only it
        claims, used = [], set()
        for row in range(len(npu)):
            names = tuple(dict.fromkeys(original_names(npu, row)))
            if not names or names == (npu.nodes.ids[row],):
                continue
            rows = sorted({b for b in map(find, names) if b >= 0})
            if len(names) == 1 and rows and (rows[0] in split or rows[0] not in used):
                split[rows[0]].append(row)
                used.add(rows[0])
            elif len(names) > 1 and (rows := [b for b in rows if b not in used]):
                claims.append(Claim((row,), tuple(rows)))
                used.update(rows)
        claims.extend(Claim(tuple(rows), (b,)) for b, rows in split.items())
        return claims
