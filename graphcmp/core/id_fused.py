"""Compiled kernels over a run's node ids held as one UTF-8 buffer (`graphcmp.core.id_kernels` calls them): ids found
by hashing their bytes instead of a Python string and a dict entry per id.

The ids go into an open-addressing table keyed by a hash of their bytes (the later of two equal ids wins, as in a
dict built in row order); a key is hashed, looked up, and a hit compared byte by byte (`_index`, `_rows_in`). The
forward twin of a backward call (`_twin_rows`) differs from its id in one word: the last ``.backward`` of the
backward call's id is ``.forward`` in its forward call's (``Module.fc.Linear.backward.0`` and
``Module.fc.Linear.forward.0``); it is written into a scratch buffer and looked up so. UTF-8 keeps every ASCII byte
for itself, so the last ``.backward`` in the bytes is the last in the text.
"""

from __future__ import annotations

import numba
import numpy as np

from graphcmp.core.jsonnum import load8

__all__: list[str] = []  # the kernels are called through `graphcmp.core.id_kernels`

_BACKWARD = np.frombuffer(b".backward", np.uint8)
_FORWARD = np.frombuffer(b".forward", np.uint8)
_MIX = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True, inline="always")
def _hash(buf, start, end):  # pragma: no cover - compiled
    """A hash of bytes [start, end) of `buf` (8 readable bytes past `end`): eight bytes at a time, each word
    multiplied in and its high bits folded down, the last word's bytes past `end` masked off, then the whole
    mixed once more."""
    h = np.uint64(end - start) * _MIX
    k = start
    while k < end:
        word = load8(buf, k)
        rest = end - k
        if rest < 8:
            word &= (np.uint64(1) << np.uint64(8 * rest)) - np.uint64(1)
        h = (h ^ word) * _MIX
        h ^= h >> np.uint64(32)
        k += 8
    h *= _MIX  # the table takes the low bits: every bit of the last word reaches them
    return h ^ (h >> np.uint64(29))


@numba.njit(cache=True, nogil=True, inline="always")
def _same(a, a_start, a_end, b, b_start, b_end):  # pragma: no cover - compiled
    """Whether a[a_start:a_end] and b[b_start:b_end] hold the same bytes."""
    if a_end - a_start != b_end - b_start:
        return False
    for k in range(a_end - a_start):  # noqa: SIM110 - a generator is no compiled loop
        if a[a_start + k] != b[b_start + k]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _last(buf, start, end, word):  # pragma: no cover - compiled
    """The position of the last `word` (which starts with a dot) in bytes [start, end), or -1."""
    m = len(word)
    for at in range(end - m, start - 1, -1):
        if buf[at] == 46 and _same(buf, at, at + m, word, 0, m):
            return at
    return -1


@numba.njit(cache=True, nogil=True, inline="always")
def _table(count):  # pragma: no cover - compiled
    """An empty open-addressing table for `count` ids, at most half full: per slot the row (-1: empty) and the
    id's hash, side by side (a look reads one cache line)."""
    size = 2
    while size < 2 * count:
        size *= 2
    return np.full((size, 2), -1, np.int64)


@numba.njit(cache=True, nogil=True, inline="always")
def _insert(table, buf, starts, ends, row):  # pragma: no cover - compiled
    """Put id `row` into `table`; True when it takes the place of an equal id (the later of two wins, as in a
    dict built in row order)."""
    h = _hash(buf, starts[row], ends[row])
    mask = np.uint64(len(table) - 1)
    slot = h & mask
    while True:
        other = table[slot, 0]
        if other < 0:
            table[slot, 0], table[slot, 1] = row, np.int64(h)
            return False
        if np.uint64(table[slot, 1]) == h and _same(buf, starts[row], ends[row], buf, starts[other], ends[other]):
            table[slot, 0] = row
            return True
        slot = (slot + np.uint64(1)) & mask


@numba.njit(cache=True, nogil=True, inline="always")
def _find(table, buf, starts, ends, key, start, end):  # pragma: no cover - compiled
    """The row of the id in `table` equal to key[start:end] (8 readable bytes past `end`), or -1."""
    h = _hash(key, start, end)
    mask = np.uint64(len(table) - 1)
    slot = h & mask
    while True:
        other = table[slot, 0]
        if other < 0:
            return -1
        if np.uint64(table[slot, 1]) == h and _same(key, start, end, buf, starts[other], ends[other]):
            return other
        slot = (slot + np.uint64(1)) & mask


@numba.njit(cache=True, nogil=True)
def _index(buf, starts, ends):  # pragma: no cover - compiled
    """The table of every id at [starts, ends) of `buf`, and how many ids equal an earlier one."""
    table = _table(len(starts))
    repeated = 0
    for row in range(len(starts)):
        repeated += _insert(table, buf, starts, ends, row)
    return table, repeated


@numba.njit(cache=True, nogil=True)
def _rows_in(table, buf, starts, ends, keys, key_starts, key_ends):  # pragma: no cover - compiled
    """Per key at [key_starts, key_ends) of `keys`, the row of the equal id of `table` (`_index` of `buf`'s ids),
    or -1."""
    out = np.empty(len(key_starts), np.int64)
    for i in range(len(key_starts)):
        out[i] = _find(table, buf, starts, ends, keys, key_starts[i], key_ends[i])
    return out


@numba.njit(cache=True, nogil=True)
def _twin_rows(buf, starts, ends, rows):  # pragma: no cover - compiled
    """Per row of `rows`, the row whose id is that row's id with its last ``.backward`` made ``.forward``; -1 when
    it has no ``.backward`` or no such id is among them. Only the ids that hold ``.forward`` go into the table:
    only those can be a twin."""
    forward = np.zeros(len(starts), np.bool_)
    for row in range(len(starts)):
        forward[row] = _last(buf, starts[row], ends[row], _FORWARD) >= 0
    table = _table(int(forward.sum()))
    for row in range(len(starts)):
        if forward[row]:
            _insert(table, buf, starts, ends, row)
    longest = 0
    for row in rows:
        longest = max(longest, ends[row] - starts[row])
    name = np.zeros(longest + 8, np.uint8)
    out = np.full(len(rows), -1, np.int64)
    head = len(_BACKWARD)
    for i in range(len(rows)):
        s, e = starts[rows[i]], ends[rows[i]]
        at = _last(buf, s, e, _BACKWARD)
        if at < 0:
            continue
        size = 0
        for k in range(s, at):
            name[size] = buf[k]
            size += 1
        for k in range(len(_FORWARD)):
            name[size] = _FORWARD[k]
            size += 1
        for k in range(at + head, e):
            name[size] = buf[k]
            size += 1
        out[i] = _find(table, buf, starts, ends, name, 0, size)
    return out


def dispatchers() -> dict[str, numba.core.registry.CPUDispatcher]:
    """The kernels `id_kernels` calls, by the names of its `KernelSet`."""
    return {"twin_rows": _twin_rows, "index": _index, "rows_in": _rows_in}
