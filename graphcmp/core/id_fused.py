"""Compiled kernels over a run's node ids held as one UTF-8 buffer (`graphcmp.core.id_kernels` calls them): the
forward call of each backward call, found by hashing the ids' bytes instead of a Python string per id.

An id and its twin differ in one word: the last ``.backward`` of the backward call's id is ``.forward`` in its
forward call's (``Module.fc.Linear.backward.0`` and ``Module.fc.Linear.forward.0``). Every id goes into an
open-addressing table keyed by a hash of its bytes (the later of two equal ids wins, as in a dict built in row
order); each backward id's twin is written into a scratch buffer, hashed and looked up, and a hit is compared byte
by byte. UTF-8 keeps every ASCII byte for itself, so the last ``.backward`` in the bytes is the last in the text.
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


@numba.njit(cache=True, nogil=True)
def _forward_table(buf, starts, ends):  # pragma: no cover - compiled
    """An open-addressing table of the ids that hold ``.forward`` (only those can be a twin), at most half full:
    per slot the row (-1: empty) and the id's hash, side by side (a look reads one cache line)."""
    n = len(starts)
    forward = np.zeros(n, np.bool_)
    count = 0
    for row in range(n):
        if _last(buf, starts[row], ends[row], _FORWARD) >= 0:
            forward[row] = True
            count += 1
    size = 2
    while size < 2 * count:
        size *= 2
    table = np.full((size, 2), -1, np.int64)
    mask = np.uint64(size - 1)
    for row in range(n):
        if not forward[row]:
            continue
        h = _hash(buf, starts[row], ends[row])
        slot = h & mask
        while True:
            other = table[slot, 0]
            if other < 0 or (np.uint64(table[slot, 1]) == h and _same(buf, starts[row], ends[row], buf,
                                                                       starts[other], ends[other])):
                table[slot, 0], table[slot, 1] = row, np.int64(h)  # new, or the later of two equal ids
                break
            slot = (slot + np.uint64(1)) & mask
    return table


@numba.njit(cache=True, nogil=True)
def _twin_rows(buf, starts, ends, rows):  # pragma: no cover - compiled
    """Per row of `rows`, the row whose id is that row's id with its last ``.backward`` made ``.forward``; -1 when
    it has no ``.backward`` or no such id is among them. `buf` holds 8 readable bytes past the last id."""
    table = _forward_table(buf, starts, ends)
    mask = np.uint64(len(table) - 1)
    longest = 0
    for row in rows:
        longest = max(longest, ends[row] - starts[row])
    name = np.zeros(longest + 8, np.uint8)
    out = np.full(len(rows), -1, np.int64)
    head, forward = len(_BACKWARD), len(_FORWARD)
    for i in range(len(rows)):
        s, e = starts[rows[i]], ends[rows[i]]
        at = _last(buf, s, e, _BACKWARD)
        if at < 0:
            continue
        size = 0
        for k in range(s, at):
            name[size] = buf[k]
            size += 1
        for k in range(forward):
            name[size] = _FORWARD[k]
            size += 1
        for k in range(at + head, e):
            name[size] = buf[k]
            size += 1
        h = _hash(name, 0, size)
        slot = h & mask
        while True:
            other = table[slot, 0]
            if other < 0:
                break
            if np.uint64(table[slot, 1]) == h and _same(name, 0, size, buf, starts[other], ends[other]):
                out[i] = other
                break
            slot = (slot + np.uint64(1)) & mask
    return out


def dispatchers() -> dict[str, numba.core.registry.CPUDispatcher]:
    """The kernels `id_kernels` calls, by the names of its `KernelSet`."""
    return {"twin_rows": _twin_rows}
