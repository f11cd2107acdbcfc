r"""Search (regex over node ids) and filters (verdict, overflow, unmatched, the structure diff): the rows a result
list steps through.

Hits are (side, row) pairs: npu rows in execution order, then bench rows that have no npu twin.
The regex and the filters combine with AND; several filters combine with OR. Results are cached per
(query, filters, micro-step) with the model, so stepping through them costs nothing.

A search text comes from the page or from a shared link (``?q=``), so no pattern may take the server
down. Python's ``re`` backtracks: ``(.|.)*!`` tries 2**n ways on an id of n characters and holds the
interpreter lock while it does, which froze the whole viewer. Patterns therefore run on RE2
(`google-re2`), whose matching time is linear in the text for every pattern it accepts, and which
lets other requests run while it matches. RE2 refuses what it cannot run in linear time
(back-references, look-ahead and look-behind, atomic groups) and repetition counts above 1000; such a
pattern gets a one-line message, as a malformed one does. Matching is case-insensitive.

All ids of a side are searched in one pass (`IdText`): joined by newlines, with the byte offset of
each, a pattern in multi-line mode (``^``/``$`` per id) that never matches a newline, each hit mapped
back to its id by the offsets, and the search going on at the next id. A literal text (letters,
digits, escaped punctuation such as ``\.``, optionally anchored by ``^``/``$``) is looked for in the
lower-cased ids without a regex engine (`Literal`): ``bytes.find`` for a rare text, Python's ``re`` for a
common one (it steps from hit to hit faster than RE2's bindings); neither can backtrack. A pattern about the whole text
(``\A``, ``\z``, turning multi-line mode off) and ids holding a newline are searched id by id.

Linear is not always short: ``.{1000}`` thirty times is a program of some 100,000 states that RE2 runs
at a few MB/s. RE2 cannot be interrupted, so it matches ~64 KB of ids at a time and the search gives up
with a message after `SEARCH_SECONDS`.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import re2

from graphcmp.app.model import ViewModel
from graphcmp.core.errors import GraphcmpError
from graphcmp.core.judge import ERROR, PASS, SKIP, UNMATCHED, WARNING
from graphcmp.core.overflow import OverflowLevel

__all__ = ["SEARCH_SECONDS", "IdText", "SearchError", "SearchPattern", "compile_search", "find_hits", "id_text"]

SEARCH_SECONDS = 2.0
"""Longest a search may match before it is given up with a message: a page waits for its answer."""
_CHUNK = 1 << 16  # bytes of ids RE2 matches between two looks at the clock (about 1,000 ids, ~20 ms at worst)

_STATUS = {"error": ERROR, "warning": WARNING, "pass": PASS, "skip": SKIP, "unmatched": UNMATCHED}
_LITERAL = re.compile(r"(?P<start>\^?)(?P<text>(?:[^\\.^$*+?{}\[\]|()\n\r]|\\[^0-9A-Za-z\n\r])*)(?P<end>\$?)")
_WHOLE_TEXT = re.compile(r"\\[AZz]|\(\?[a-zA-Z]*-[a-zA-Z]*m")  # \A, \Z, \z, (?-m ...): not per line
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_FIND_LOOP_HITS_PER_BYTE = 1e-3  # a literal search steps hit by hit with bytes.find below this, else with re
_FIND_LOOP_MIN_HITS = 64  # ... once it has found more than this many


class SearchError(GraphcmpError):
    """The search text is not a regular expression the search can run."""


@dataclass(frozen=True, slots=True)
class SearchPattern:
    """A search text compiled for `IdText.matching`.

    Attributes
    ----------
    query : str
        The text as given.
    lines : re2._Regexp
        RE2, case-insensitive, multi-line and never matching a newline: for ids joined by newlines.
    single : re2._Regexp
        RE2, case-insensitive: for one id at a time.
    literal : Literal | None
        For a literal text: what to find in the lower-cased ASCII ids; None otherwise.
    whole : bool
        True when the pattern must see one id at a time (``\\A``, ``\\z``, multi-line mode turned off).
    """

    query: str
    lines: Any  # re2's compiled pattern (its class is private)
    single: Any
    literal: Literal | None
    whole: bool


@dataclass(frozen=True, slots=True)
class Literal:
    """A literal search text, lower-cased ASCII, and whether it is anchored at an id's start (``^``) or end (``$``)."""

    text: bytes
    start: bool
    end: bool

    def hits(self, text: bytes) -> list[int]:
        """A position in each id that matches, ascending, for ids joined by newlines in `text` (an id may give
        more than one).

        An anchor is a newline in the needle, so the first and the last id, which lack one, are looked at apart.
        """
        needle = b"\n" * self.start + self.text + b"\n" * self.end
        first_end = text.find(b"\n")
        last_start = text.rfind(b"\n") + 1  # 0: one id only
        at = [0] if self.matches(text[: first_end if first_end >= 0 else len(text)]) else []
        if last_start:
            at += self._between(text, needle, first_end, last_start)
            if self.matches(text[last_start:]):
                at.append(last_start)
        return at

    def _between(self, text: bytes, needle: bytes, start: int, stop: int) -> list[int]:
        """Hits of `needle` in ``text[start:stop]``. ``bytes.find`` skips to a rare needle several times faster
        than ``re`` scans, but then costs about a microsecond of Python per hit where ``re`` costs a nanosecond
        per byte: once hits come more often than `_FIND_LOOP_HITS_PER_BYTE`, ``re`` takes the rest."""
        at: list[int] = []
        pos = start
        while 0 <= pos < stop and (found := text.find(needle, pos, stop)) >= 0:
            at.append(found + self.start)
            pos = text.find(b"\n", found + self.start)  # the end of the hit's id: the search goes on at the next
            if len(at) > _FIND_LOOP_MIN_HITS and len(at) > _FIND_LOOP_HITS_PER_BYTE * (pos - start):
                regex = re.compile(re.escape(needle[: len(needle) - self.end]) + b"(?=\n)" * self.end)
                return at + [m.start() + self.start for m in regex.finditer(text, pos, stop)]
        return at

    def matches(self, node_id: bytes) -> bool:
        """True when the lower-cased `node_id` holds the text where the anchors say."""
        if self.start:
            return node_id == self.text if self.end else node_id.startswith(self.text)
        return node_id.endswith(self.text) if self.end else self.text in node_id


def compile_search(query: str) -> SearchPattern:
    r"""Compile a search text (a regular expression, matched case-insensitively anywhere in an id).

    Raises
    ------
    SearchError
        If `query` is malformed, or needs backtracking (back-references, look-around), or is too large.

    Examples
    --------
    >>> compile_search(r"Layers\.1\.").literal
    Literal(text=b'layers.1.', start=False, end=False)
    >>> compile_search(r"(.|.)*!").literal is None
    True
    >>> try:
    ...     compile_search(r"(a)\1")
    ... except SearchError as err:
    ...     print(str(err).split(";")[0])
    search: '(a)\\1' is not a regular expression the search can run (invalid escape sequence: \1)
    """
    rewritten = _rewrite_python_only(query)
    try:
        lines = re2.compile("(?m)" + rewritten, _options(never_nl=True))
        single = re2.compile(rewritten, _options(never_nl=False))
    except re2.error as err:
        why = err.args[0].decode("utf-8", "replace") if err.args and isinstance(err.args[0], bytes) else str(err)
        raise SearchError(f"search: {query!r} is not a regular expression the search can run ({why}); "
                          "look-around and back-references are not supported") from err
    return SearchPattern(query, lines, single, _literal(query), bool(_WHOLE_TEXT.search(query)))


def _options(never_nl: bool) -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False
    options.never_nl = never_nl
    options.never_capture = True
    options.log_errors = False  # a bad pattern is the user's, said in the page, not a line in the server's log
    return options


def _rewrite_python_only(query: str) -> str:
    r"""`query` with Python's ``\Z`` (end of text) spelled as RE2 spells it, ``\z``; other escapes kept."""
    return re.sub(r"\\(.)", lambda m: r"\z" if m.group(1) == "Z" else m.group(0), query, flags=re.DOTALL)


def _literal(query: str) -> Literal | None:
    """A literal `query` to find in lower-cased ASCII ids; None when `query` is more than a non-empty literal."""
    parts = _LITERAL.fullmatch(query)
    if parts is None or not query.isascii() or not parts["text"]:
        return None
    text = _ESCAPE.sub(r"\1", parts["text"]).lower()
    return Literal(text.encode(), bool(parts["start"]), bool(parts["end"]))


def find_hits(model: ViewModel, query: str, filters: tuple[str, ...], micro: int | None) -> tuple[tuple[str, int], ...]:
    """(side, row) of every node whose id matches `query` (a regex, case-insensitive) and any of `filters`.

    Raises
    ------
    SearchError
        If `query` is not a regular expression the search can run (`compile_search`).

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
    pattern = compile_search(query) if query else None
    hits: list[tuple[str, int]] = []
    for side in model.sides:
        mask = _filter_mask(model, side, filters)
        if side == "bench":
            mask &= model.report.matches.bench_to_npu < 0
        nodes = model.graphs[side].nodes
        mask[0] = False
        if micro is not None:
            mask &= nodes.micro_step == micro
        if pattern is not None:
            found = id_text(model, side).matching(pattern)
            rows = found[mask[found]].tolist()
        else:
            rows = np.flatnonzero(mask).tolist()
        hits.extend((side, r) for r in rows)
    return tuple(hits)


def id_text(model: ViewModel, side: str) -> IdText:
    """The one-pass search text of a side's ids (built once per model)."""
    return model.keep(("ids", side), lambda: IdText(model.graphs[side].nodes.ids))


class IdText:
    r"""The ids of one run joined by newlines, with the byte offset of each, for one-pass searches.

    Examples
    --------
    >>> text = IdText(("DefaultModel", "Module.fc.Linear.forward.0", "Functional.linear.0.forward"))
    >>> text.matching(compile_search(r"LINEAR\.\d")).tolist(), text.matching(compile_search(r"^functional")).tolist()
    ([2], [2])
    >>> text.matching(compile_search("(.|.)*!")).tolist(), text.matching(compile_search("x*")).tolist()
    ([], [0, 1, 2])
    """

    def __init__(self, ids: tuple[str, ...]) -> None:
        self.ids = ids

    def prepare(self) -> None:
        """Build the text now (a viewer does it at start-up, so the first search does not wait for it)."""
        _ = self._one_line_each

    @cached_property
    def _text(self) -> tuple[bytes, np.ndarray, bool]:
        """(the ids joined by newlines, offset of each id plus one past the end, ASCII ids lower-cased)."""
        joined = "\n".join(self.ids)
        if joined.isascii():
            text = joined.lower().encode("ascii")
            lengths = np.fromiter(map(len, self.ids), np.int64, len(self.ids))
            lowered = True
        else:  # RE2 folds case itself; lower() of non-ASCII may change lengths and meanings
            encoded = [i.encode("utf-8", "replace") for i in self.ids]
            text = b"\n".join(encoded)
            lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
            lowered = False
        return text, np.concatenate([[0], np.cumsum(lengths + 1)]), lowered

    @cached_property
    def _one_line_each(self) -> bool:
        """True when no id holds a newline (the joined text has one line per id)."""
        return self._text[0].count(b"\n") == len(self.ids) - 1

    def matching(self, pattern: SearchPattern, seconds: float | None = None) -> np.ndarray:
        """Rows whose id matches `pattern`, ascending.

        Raises
        ------
        SearchError
            If RE2 is still matching after `seconds` (default `SEARCH_SECONDS`): linear time can still be long
            for a pattern of thousands of states (``.{1000}`` thirty times).
        """
        text, starts, lowered = self._text
        deadline = time.monotonic() + (SEARCH_SECONDS if seconds is None else seconds)
        if pattern.whole or not self._one_line_each:
            return self._one_by_one(pattern, deadline)
        if pattern.literal is not None and lowered:
            at = pattern.literal.hits(text)
        else:
            at = self._each_line(pattern, text, deadline)
        rows = np.searchsorted(starts, np.array(at, np.int64), side="right") - 1  # ascending: matches come in order
        return rows[np.concatenate(([True], rows[1:] != rows[:-1]))] if len(rows) else rows

    def _each_line(self, pattern: SearchPattern, text: bytes, deadline: float) -> list[int]:
        """Start of the first match in each id that has one: RE2 goes on at the next id, over `_CHUNK` bytes of
        whole ids at a time (no match spans two ids), so the deadline is checked at least that often."""
        at: list[int] = []
        pos, end, search = 0, len(text), pattern.lines.search
        while pos <= end:
            stop = text.find(b"\n", min(pos + _CHUNK, end))
            stop = end if stop < 0 else stop
            found = search(text, pos, stop)
            if found is None:
                pos = stop + 1
            else:
                at.append(found.start())
                newline = text.find(b"\n", found.start())
                pos = end + 1 if newline < 0 else newline + 1
            if time.monotonic() > deadline:
                raise self._too_long(pattern)
        return at

    def _one_by_one(self, pattern: SearchPattern, deadline: float) -> np.ndarray:
        search, rows = pattern.single.search, []
        for row, node in enumerate(self.ids):
            if search(node.encode("utf-8", "replace")):
                rows.append(row)
            if row % 1024 == 0 and time.monotonic() > deadline:
                raise self._too_long(pattern)
        return np.array(rows, np.int64)

    def _too_long(self, pattern: SearchPattern) -> SearchError:
        return SearchError(f"search: {pattern.query[:80]!r} took too long over {len(self.ids):,} ids (linear, but "
                           "with too many states): simplify the pattern")


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
