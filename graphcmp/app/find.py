r"""Search (regex over node ids) and filters (verdict, overflow, unmatched, the structure diff): the rows a result
list steps through.

Hits are (side, row) pairs: npu rows in execution order, then bench rows that have no npu twin.
The regex and the filters combine with AND; several filters combine with OR. Results are cached per
(query, filters, micro-step) with the model, so stepping through them costs nothing.

Python's ``re`` is slow case-insensitively (it cannot jump to a literal), and a loop over a million
ids costs a second. So a pattern is run once over all ids of a side joined by newlines and lower-cased
(`IdText`, kept with the model), with its letters lower-cased (escapes such as ``\W`` kept) and
``re.MULTILINE`` (``^``/``$`` per id); a match is mapped back to its id by the line offsets. A
pattern this cannot run exactly (one that may match an empty string, ``\A``/``\Z``, letters beyond
ASCII, or a match that spans two ids) is run id by id, case-insensitively, as before.
"""

from __future__ import annotations

import re
from functools import cached_property

import numpy as np

from graphcmp.app.model import ViewModel
from graphcmp.core.errors import GraphcmpError
from graphcmp.core.judge import ERROR, PASS, SKIP, UNMATCHED, WARNING
from graphcmp.core.overflow import OverflowLevel

__all__ = ["IdText", "SearchError", "find_hits", "id_text", "lower_pattern"]

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
        if rx is not None:
            found = id_text(model, side).matching(query)
            if found is None:
                ids = nodes.ids
                rows = [r for r in np.flatnonzero(mask).tolist() if rx.search(ids[r])]
            else:
                rows = found[mask[found]].tolist()
        else:
            rows = np.flatnonzero(mask).tolist()
        hits.extend((side, r) for r in rows)
    return tuple(hits)


def id_text(model: ViewModel, side: str) -> IdText:
    """The one-pass search text of a side's ids (built once per model)."""
    return model.keep(("ids", side), lambda: IdText(model.graphs[side].nodes.ids))


def lower_pattern(query: str) -> str:
    r"""`query` with every letter lower-cased except those of escapes (``\\W`` stays a non-word class).

    >>> lower_pattern(r"Linear\.2\W[A-Z]")
    'linear\\.2\\W[a-z]'
    """
    out = []
    escaped = False
    for ch in query:
        out.append(ch if escaped else ch.lower())
        escaped = not escaped and ch == "\\"
    return "".join(out)


class IdText:
    r"""The ids of one run joined by newlines and lower-cased, with the offset of each, for one-pass searches.

    Examples
    --------
    >>> text = IdText(("DefaultModel", "Module.fc.Linear.forward.0", "Functional.linear.0.forward"))
    >>> text.matching(r"LINEAR\.\d").tolist(), text.matching(r"^functional").tolist()
    ([2], [2])
    >>> text.matching("x*") is None  # may match an empty string: run id by id
    True
    """

    def __init__(self, ids: tuple[str, ...]) -> None:
        self.ids = ids

    def prepare(self) -> None:
        """Build the text now (a viewer does it at start-up, so the first search does not wait for it)."""
        _ = self._text

    @cached_property
    def _text(self) -> tuple[str, np.ndarray]:
        lowered = [i.lower() for i in self.ids]
        text = "\n".join(lowered)
        lengths = np.fromiter(map(len, lowered), np.int64, len(lowered)) + 1
        return text, np.concatenate([[0], np.cumsum(lengths)])

    def matching(self, query: str) -> np.ndarray | None:
        """Rows whose id matches `query` case-insensitively, ascending; None when one pass cannot tell exactly."""
        if "\\A" in query or "\\Z" in query or not query.isascii() or not self._text[0].isascii():
            return None  # str.lower() and re's case folding agree on ASCII only
        try:
            rx = re.compile(lower_pattern(query), re.MULTILINE)
        except re.error:
            return None
        if rx.search("") is not None:
            return None
        text, starts = self._text
        spans = np.array([m.span() for m in rx.finditer(text)], np.int64).reshape(-1, 2)
        rows = np.searchsorted(starts, spans[:, 0], side="right") - 1
        if len(rows) and (spans[:, 1] > starts[rows + 1] - 1).any():  # a match ran into the next id
            return None
        return np.unique(rows)


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
