"""The kernels of `naming_compiled`, in numba: msprobe node ids of one UTF-8 buffer parsed into columns
(`_parse_spans`). `naming_compiled` loads them built ahead of time (`graphcmp.core.compiled`); this module is imported
only to build them, or where they cannot be built.
"""

from __future__ import annotations

import numba
import numpy as np

from graphcmp.core.records import Direction, NodeKind

__all__ = ["COUNTER_DIGITS", "dispatchers"]

COUNTER_DIGITS = 18
"""Most digits of a call counter read by the compiled pass: any 18-digit number fits int64 (< 9.22e18); an id
with a longer counter goes to `parse_node_ids`."""

_API, _MODULE, _PARAM_GRAD = int(NodeKind.API), int(NodeKind.MODULE), int(NodeKind.PARAM_GRAD)
_FORWARD, _BACKWARD = int(Direction.FORWARD), int(Direction.BACKWARD)
_UNDECIDED = -1
"""Op code of an id the compiled pass leaves to `parse_node_ids`."""
_NOT_DECIDED = (-1, -1, -1, -1, -1)
"""`_rule`'s answer for an id it leaves to `parse_node_ids`."""

_FORWARD_BYTES = np.frombuffer(b"forward", np.uint8)
_BACKWARD_BYTES = np.frombuffer(b"backward", np.uint8)
_PARAMETERS_GRAD_BYTES = np.frombuffer(b"parameters_grad", np.uint8)
_MODULE_PREFIX = np.frombuffer(b"Module.", np.uint8)
_CELL_PREFIX = np.frombuffer(b"Cell.", np.uint8)
_DOT, _NEWLINE = ord("."), ord("\n")
_LETTER, _DIGIT = 1, 2
_CLASS = np.array([_LETTER * (chr(c).isascii() and (chr(c).isalpha() or chr(c) == "_"))
                   + _DIGIT * (chr(c).isascii() and chr(c).isdigit()) for c in range(256)], np.uint8)
"""Class of each byte value: ASCII letter or underscore (an identifier's first character), ASCII digit."""
_MIX = np.uint64(0xFF51AFD7ED558CCD)
_FIRST_TABLE = 1 << 10
"""Slots of the op hash table at first (it doubles whenever it is half full)."""


@numba.njit(cache=True, nogil=True)
def _equals(buf, start, end, word):  # pragma: no cover - compiled
    """Whether bytes [start, end) of `buf` are `word`."""
    if end - start != len(word):
        return False
    for k in range(len(word)):  # noqa: SIM110 - a generator is no compiled loop
        if buf[start + k] != word[k]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _direction(buf, start, end):  # pragma: no cover - compiled
    """The direction code of bytes [start, end): forward, backward, else -1."""
    if _equals(buf, start, end, _FORWARD_BYTES):
        return _FORWARD
    if _equals(buf, start, end, _BACKWARD_BYTES):
        return _BACKWARD
    return -1


@numba.njit(cache=True, nogil=True)
def _counter(buf, start, end):  # pragma: no cover - compiled
    """The number written by ASCII digits [start, end), or -1 if they are none, not all digits or more than
    `COUNTER_DIGITS` of them."""
    if end <= start or end - start > COUNTER_DIGITS:
        return -1
    value = 0
    for k in range(start, end):
        digit = np.int64(buf[k]) - 48
        if digit < 0 or digit > 9:
            return -1
        value = value * 10 + digit
    return value


@numba.njit(cache=True, nogil=True)
def _first_part_identifier(buf, start, end):  # pragma: no cover - compiled
    """Whether the bytes from `start` to the first dot before `end` (or to `end`) are an ASCII Python identifier
    ([A-Za-z_][A-Za-z0-9_]*: ``str.isidentifier`` of ASCII text)."""
    if end <= start or not _CLASS[buf[start]] & _LETTER:
        return False
    for k in range(start + 1, end):
        c = buf[k]
        if c == _DOT:
            return True
        if not _CLASS[c]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _starts_with(buf, start, end, prefix):  # pragma: no cover - compiled
    return end - start >= len(prefix) and _equals(buf, start, start + len(prefix), prefix)


@numba.njit(cache=True, nogil=True)
def _plain(buf, start, end):  # pragma: no cover - compiled
    """Whether bytes [start, end) are all ASCII and hold no newline (a reduction LLVM vectorises)."""
    high = np.uint8(0)
    newlines = 0
    for k in range(start, end):
        c = buf[k]
        high |= c
        newlines += c == _NEWLINE
    return high < 128 and newlines == 0


@numba.njit(cache=True, nogil=True)
def _all_plain(buf, starts, ends):  # pragma: no cover - compiled
    """Whether every id is ASCII without a newline, known from the whole buffer: no byte of it is above 127, the
    spans follow one another without overlapping, and each of its newlines ends a span (the joined layout)."""
    high = np.uint8(0)
    newlines = 0
    for k in range(len(buf)):
        c = buf[k]
        high |= c
        newlines += c == _NEWLINE
    if high >= 128:
        return False
    separators = 0
    for i in range(len(starts)):
        if i + 1 < len(starts) and starts[i + 1] <= ends[i]:
            return False
        if ends[i] < len(buf) and buf[ends[i]] == _NEWLINE:
            separators += 1
    return separators == newlines


@numba.njit(cache=True, nogil=True)
def _dot_before(buf, start, end):  # pragma: no cover - compiled
    """The position of the last dot of bytes [start, end), or -1."""
    k = end - 1
    while k >= start:
        if buf[k] == _DOT:
            return k
        k -= 1
    return -1


@numba.njit(cache=True, nogil=True)
def _rule(buf, start, end, plain):  # pragma: no cover - compiled
    """The fast rule of `parse_node_ids` on the id at bytes [start, end): (kind, direction, counter, op start,
    op end), kind -1 for an id it does not decide. `plain`: the id is known to be ASCII without a newline."""
    d1 = _dot_before(buf, start, end)  # the last three dots, d3 < d2 < d1: rsplit(".", 3)
    d2 = _dot_before(buf, start, d1) if d1 > start else -1
    d3 = _dot_before(buf, start, d2) if d2 > start else -1
    if d3 < 0 or d2 == d3 + 1 or not (plain or _plain(buf, start, end)):  # fewer than four parts, or an empty op
        return _NOT_DECIDED
    direction = _direction(buf, d1 + 1, end)
    if direction >= 0:  # <api>.<name>.<n>.<dir>
        counter = _counter(buf, d2 + 1, d1)
        if counter < 0 or not _first_part_identifier(buf, start, d3):
            return _NOT_DECIDED
        kind = _API
    else:  # <Module>.<path>.<cls>.<dir>.<n> or <Module>.<path>.<cls>.parameters_grad.<n>
        counter = _counter(buf, d1 + 1, end)
        if counter < 0:
            return _NOT_DECIDED
        if _starts_with(buf, start, end, _MODULE_PREFIX):
            first_dot = start + len(_MODULE_PREFIX) - 1
        elif _starts_with(buf, start, end, _CELL_PREFIX):
            first_dot = start + len(_CELL_PREFIX) - 1
        else:
            return _NOT_DECIDED
        if first_dot + 1 >= d3:  # the head (before d3) is no "<prefix>.<something>"
            return _NOT_DECIDED
        direction = _direction(buf, d2 + 1, d1)
        if direction >= 0:
            kind = _MODULE
        elif _equals(buf, d2 + 1, d1, _PARAMETERS_GRAD_BYTES):
            kind, direction = _PARAM_GRAD, _BACKWARD
        else:
            return _NOT_DECIDED
    return kind, direction, counter, d3 + 1, d2


@numba.njit(cache=True, nogil=True)
def _hash(buf, start, end):  # pragma: no cover - compiled
    """A hash of bytes [start, end): rotate and add per byte (no multiply in the chain), then one multiply and
    shift to spread it over the bits."""
    h = np.uint64(end - start)
    for k in range(start, end):
        h = ((h << np.uint64(7)) | (h >> np.uint64(57))) ^ np.uint64(buf[k])
    h *= _MIX
    return h ^ (h >> np.uint64(32))


@numba.njit(cache=True, nogil=True)
def _same(buf, start, end, other_start, other_end):  # pragma: no cover - compiled
    """Whether bytes [start, end) and [other_start, other_end) of `buf` are equal."""
    if end - start != other_end - other_start:
        return False
    for k in range(end - start):  # noqa: SIM110 - a generator is no compiled loop
        if buf[start + k] != buf[other_start + k]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _grown(table, hashes, count):  # pragma: no cover - compiled
    """A table of twice as many slots holding op codes 0 .. count-1 at their hashes' places."""
    bigger = np.full(2 * len(table), -1, np.int64)
    mask = np.uint64(len(bigger) - 1)
    for code in range(count):
        slot = hashes[code] & mask
        while bigger[slot] >= 0:
            slot = (slot + np.uint64(1)) & mask
        bigger[slot] = code
    return bigger


@numba.njit(cache=True, nogil=True)
def _parse_spans(buf, starts, ends):  # pragma: no cover - compiled
    """Kinds, directions, counters and op codes of the ids at [starts, ends) of `buf` (op code -1: not decided
    here), and the first span of each distinct op (its representative), indexed by op code."""
    n = len(starts)
    kinds = np.empty(n, np.int8)
    directions = np.empty(n, np.int8)
    counters = np.empty(n, np.int64)
    codes = np.empty(n, np.int64)
    first_start = np.empty(n, np.int64)
    first_end = np.empty(n, np.int64)
    hashes = np.empty(n, np.uint64)
    table = np.full(_FIRST_TABLE, -1, np.int64)
    count = 0
    plain = _all_plain(buf, starts, ends)
    for i in range(n):
        kind, direction, counter, op_start, op_end = _rule(buf, starts[i], ends[i], plain)
        kinds[i], directions[i], counters[i] = kind, direction, counter
        if kind < 0:
            codes[i] = _UNDECIDED
            continue
        h = _hash(buf, op_start, op_end)
        mask = np.uint64(len(table) - 1)
        slot = h & mask
        while True:
            code = table[slot]
            if code < 0:  # a new op: this span represents it
                code = count
                first_start[code], first_end[code], hashes[code] = op_start, op_end, h
                table[slot] = code
                count += 1
                if 2 * count > len(table):
                    table = _grown(table, hashes, count)
                break
            if hashes[code] == h and _same(buf, op_start, op_end, first_start[code], first_end[code]):
                break
            slot = (slot + np.uint64(1)) & mask
        codes[i] = code
    return kinds, directions, counters, codes, first_start[:count], first_end[:count]


def dispatchers() -> dict[str, numba.core.registry.CPUDispatcher]:
    """The kernels `naming_compiled` calls, by the names of its `KernelSet`."""
    return {"parse_spans": _parse_spans}
