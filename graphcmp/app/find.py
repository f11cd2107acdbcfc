"""Search (regex over node ids) and filters (verdict, overflow, unmatched, the structure diff): the rows a result
list steps through.

Hits are (side, row) pairs: npu rows in execution order, then bench rows that have no npu twin.
The regex and the filters combine with AND; several filters combine with OR. Results are cached per
(query, filters, micro-step) with the model, so stepping through them costs nothing.
"""

from __future__ import annotations

import re

import numpy as np

from graphcmp.app.model import ViewModel
from graphcmp.core.errors import GraphcmpError
from graphcmp.core.judge import ERROR, PASS, SKIP, UNMATCHED, WARNING
from graphcmp.core.overflow import OverflowLevel

__all__ = ["SearchError", "find_hits"]

_STATUS = {"error": ERROR, "warning": WARNING, "pass": PASS, "skip": SKIP, "unmatched": UNMATCHED}


class SearchError(GraphcmpError):
    """The search text is not a valid regular expression."""


def find_hits(model: ViewModel, query: str, filters: tuple[str, ...], micro: int | None) -> tuple[tuple[str, int], ...]:
    """(side, row) of every node whose id matches `query` (a regex, case-insensitive) and any of `filters`.

    Raises
    ------
    SearchError
        If `query` is not a valid regular expression.

    Examples
    --------
    >>> from graphcmp.core.compare import compare_paths
    >>> from graphcmp.samples import sample_pair
    >>> m = ViewModel(compare_paths(*sample_pair()))
    >>> [m.graphs[s].nodes.ids[r] for s, r in find_hits(m, r"layers\\.1\\.linear1.*ward", ("error",), None)]
    ['Module.encoder.layers.1.linear1.Linear.forward.0', 'Module.encoder.layers.1.linear1.Linear.backward.0']
    """
    if not query and not filters:
        return ()
    filters = tuple(sorted(filters))
    return model.memo(("hits", query, filters, micro), lambda: _search(model, query, filters, micro))


def _search(model: ViewModel, query: str, filters: tuple[str, ...], micro: int | None) -> tuple[tuple[str, int], ...]:
    try:
        rx = re.compile(query, re.IGNORECASE) if query else None
    except re.error as err:
        raise SearchError(f"search: {query!r} is not a regular expression ({err})") from err
    hits: list[tuple[str, int]] = []
    for side in model.sides:
        mask = _filter_mask(model, side, filters)
        if side == "bench":
            mask &= model.report.matches.bench_to_npu < 0
        nodes = model.graphs[side].nodes
        mask[0] = False
        if micro is not None:
            mask &= nodes.micro_step == micro
        rows = np.flatnonzero(mask).tolist()
        if rx is not None:
            ids = nodes.ids
            rows = [r for r in rows if rx.search(ids[r])]
        hits.extend((side, r) for r in rows)
    return tuple(hits)


def _filter_mask(model: ViewModel, side: str, filters: tuple[str, ...]) -> np.ndarray:
    n = len(model.graphs[side])
    if not filters:
        return np.ones(n, bool)
    mask = np.zeros(n, bool)
    status = model.status(side)
    for f in filters:
        if f == "overflow":
            mask |= model.overflow[side] > OverflowLevel.NONE
        elif f == "renamed":
            mask |= model.renamed(side)
        elif status is not None and f == f"only-{side}":
            mask |= status == UNMATCHED
        elif status is not None and f in _STATUS:
            mask |= status == _STATUS[f]
    return mask
