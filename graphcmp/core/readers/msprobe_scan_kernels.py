"""The kernels of the compiled pass over dump.json (`msprobe_scan`), in numba: the walk (`_scan`) and the columns
made of its outputs (`_local_codes`, `_local_slots`). `msprobe_scan` loads them built ahead of time
(`graphcmp.core.compiled`); this module is imported only to build them, or where they cannot be built.

The small functions every leaf calls several times are inlined by numba (``inline="always"``): numba compiles each
function apart, and a call that passes the outputs' arrays (each one several machine words) cost more than the
work of `_member`, `_intern` or `_ws`. `_leaf` itself and the functions above it stay calls: inlining `_leaf` too
gained nothing measurable and took the build from under two minutes to five. Strings, indentation, the inside of
brackets, texts compared and hashed go eight bytes at a time (`jsonnum.load8`); a leaf's keys are tried in the
order msprobe writes them. Instructions per leaf of the real 35k dump: 8,800 before, 4,590 now (bench/README.md,
issue 32's ninth round).
"""

from __future__ import annotations

import numba
import numpy as np

from graphcmp.core.jsonnum import load8, parse_number_at, trailing_zeros
from graphcmp.core.readers.msprobe_scan_layout import (
    _BAD,
    _BROKEN,
    _DATA_SEEN,
    _DONE,
    _DTYPE,
    _EMPTY,
    _ENTRIES,
    _FILE,
    _FILE_NAME,
    _FLAGS,
    _FULL,
    _GRAD,
    _GROW,
    _HAS_DTYPE,
    _HAS_MD5,
    _HEADER,
    _HEAP_BYTES,
    _ID_BYTES,
    _LEAF_JSON,
    _LEAVES,
    _MD5,
    _NODE,
    _ODD,
    _ODD_BYTES,
    _ODD_RECORD,
    _OTHER_LEAF,
    _PAUSE,
    _PHASE,
    _POS,
    _RAW_JSON,
    _RECENT,
    _RECORDS,
    _ROLE,
    _SHAPE,
    _SLOT,
    _SLOT_KEY,
    _TEXT,
    _VALUE,
)
from graphcmp.core.records import Role

__all__ = ["dispatchers"]

_INPUT, _OUTPUT, _PARAM, _PARAM_GRAD = int(Role.INPUT), int(Role.OUTPUT), int(Role.PARAM), int(Role.PARAM_GRAD)
_ROLE_NAMES = (b"input_args", b"input", b"input_kwargs", b"output", b"parameters")  # `ROLE_KEYS`, in order
_ROLE_CODES = np.array([_INPUT, _INPUT, _INPUT, _OUTPUT, _PARAM], np.int32)
_LEAF_KEYS = (b"type", b"dtype", b"shape", b"Max", b"Min", b"Mean", b"Norm", b"requires_grad", b"md5", b"data_name",
              b"value")


def _key_table(keys: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Keys as one byte array and their offsets, for `_key_index`; 8 bytes of padding after them, so that `_same`
    compares a key of under 8 bytes as one load."""
    joined = b"".join(keys) + bytes(8)
    offsets = np.cumsum([0, *map(len, keys)]).astype(np.int64)
    return np.frombuffer(joined, np.uint8).copy(), offsets


_ROLE_BYTES, _ROLE_OFFSETS = _key_table(_ROLE_NAMES)
_LEAF_BYTES, _LEAF_OFFSETS = _key_table(_LEAF_KEYS)
_DATA_KEY = np.frombuffer(b"data", np.uint8).copy()
_GRAD_MARK = np.frombuffer(b"parameters_grad", np.uint8).copy()
_BOOL = np.frombuffer(b"bool", np.uint8).copy()
_NULL, _TRUE, _FALSE, _NAN, _INFINITY, _MINUS_INFINITY = (np.frombuffer(word, np.uint8).copy() for word in (
    b"null", b"true", b"false", b"NaN", b"Infinity", b"-Infinity"))


# eight bytes at a time (`_ws`, `_string_end`, `_value_end`, `_same`, `_hash`): a byte repeated in each lane
_QUOTES, _BACKSLASHES = np.uint64(0x2222222222222222), np.uint64(0x5C5C5C5C5C5C5C5C)
_SPACES, _ONES, _HIGHS = np.uint64(0x2020202020202020), np.uint64(0x0101010101010101), np.uint64(0x8080808080808080)
_OPENS, _CLOSES = np.uint64(0x7B7B7B7B7B7B7B7B), np.uint64(0x7D7D7D7D7D7D7D7D)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_MIX = np.uint64(0x9E3779B97F4A7C15)  # `_hash`'s multiplier


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def _ws(buf, p, n):  # pragma: no cover - compiled
    """The position of the first byte from p that is no JSON whitespace; the spaces that indent a line (after a
    line break) eight bytes at a time, a lone space (after a colon) as a byte."""
    while p < n:
        c = buf[p]
        if c != 32 and c != 10 and c != 13 and c != 9:
            return p
        p += 1
        if c == 10:
            while p + 8 <= n:
                others = _not_spaces(load8(buf, p))
                p += trailing_zeros(others) >> 3  # 8 when all are spaces
                if others != 0:
                    break
    return p


@numba.njit(nogil=True, inline="always")
def _not_spaces(chunk):  # pragma: no cover - compiled
    """Of 8 bytes loaded little-endian, the high bit of each byte that is not a space (exactly: no carry crosses
    a byte)."""
    other = chunk ^ _SPACES
    return (((other & _LOW7) + _LOW7) | other) & _HIGHS


@numba.njit(nogil=True, inline="always")
def _below(chunk, lanes):  # pragma: no cover - compiled
    """Of 8 bytes loaded little-endian, the high bit of each byte below its lane of `lanes` (a byte repeated; with
    `_ONES`, each byte that is zero). A subtraction borrows only out of a byte that is below, so the lowest bit set
    marks the first such byte exactly; bytes after it may be marked wrongly."""
    return (chunk - lanes) & ~chunk & _HIGHS


@numba.njit(nogil=True, inline="always")
def _special_bytes(chunk):  # pragma: no cover - compiled
    """The high bit of each byte that is a quote, a backslash or below 0x20 (the first exactly, as `_below`)."""
    return _below(chunk ^ _QUOTES, _ONES) | _below(chunk ^ _BACKSLASHES, _ONES) | _below(chunk, _SPACES)


@numba.njit(nogil=True, inline="always")
def _structural_bytes(chunk):  # pragma: no cover - compiled
    """The high bit of each byte that is a quote, a bracket or a brace, and of 0x02, which folds like a quote (the
    first exactly, as `_below`)."""
    folded = chunk | _SPACES  # '[' and '{', ']' and '}' alike
    return _below(folded ^ _OPENS, _ONES) | _below(folded ^ _CLOSES, _ONES) | _below(folded ^ _QUOTES, _ONES)


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def _string_end(buf, p, n):  # pragma: no cover - compiled
    """The position of the closing quote of the string whose opening quote is at p - 1 (or -1), and whether it
    holds an escape. Eight bytes at a time up to the next quote, backslash or control byte."""
    escaped = False
    while p < n:
        if p + 8 <= n:
            found = _special_bytes(load8(buf, p))
            if found == 0:
                p += 8
                continue
            p += trailing_zeros(found) >> 3
        c = buf[p]
        if c == 34:
            return p, escaped
        if c == 92:
            escaped = True
            p += 2
            continue
        if c < 32:
            return -1, escaped
        p += 1
    return -1, escaped


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def _same(buf, s, e, table, lo, hi):  # pragma: no cover - compiled
    """Whether buf[s:e] and table[lo:hi] hold the same bytes (eight at a time, the rest one by one)."""
    m = e - s
    if m != hi - lo:
        return False
    k = 0
    while k + 8 <= m:
        if load8(buf, s + k) != load8(table, lo + k):
            return False
        k += 8
    rest = m - k
    if rest and s + k + 8 <= buf.size and lo + k + 8 <= table.size:  # the last bytes in one load, the rest shifted out
        return ((load8(buf, s + k) ^ load8(table, lo + k)) << np.uint64(64 - 8 * rest)) == 0
    while k < m:
        if buf[s + k] != table[lo + k]:
            return False
        k += 1
    return True


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def _key_after(buf, s, e, table, offsets, guess):  # pragma: no cover - compiled
    """`_key_index`, trying key `guess` first (the one after the previous key: msprobe writes a leaf's keys in
    one order)."""
    if 0 <= guess < offsets.size - 1 and _same(buf, s, e, table, offsets[guess], offsets[guess + 1]):
        return guess
    return _key_index(buf, s, e, table, offsets)


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def _key_index(buf, s, e, table, offsets):  # pragma: no cover - compiled
    for k in range(offsets.size - 1):
        if _same(buf, s, e, table, offsets[k], offsets[k + 1]):
            return k
    return -1


@numba.njit(cache=True, nogil=True, _nrt=False)
def _holds(buf, s, e, word, fold):  # pragma: no cover - compiled
    """Whether buf[s:e] holds `word` (ASCII letters of the text folded to lower case when `fold`)."""
    m = word.size
    for i in range(s, e - m + 1):
        k = 0
        while k < m:
            c = buf[i + k]
            if fold and 65 <= c <= 90:
                c += 32
            if c != word[k]:
                break
            k += 1
        if k == m:
            return True
    return False


@numba.njit(cache=True, nogil=True, _nrt=False)
def _literal(buf, p, n, word):  # pragma: no cover - compiled
    """The end of the literal `word` (bytes as a uint8 array: true, false, null ...) at p, or -1."""
    m = word.size
    if p + m > n:
        return -1
    for k in range(m):
        if buf[p + k] != word[k]:
            return -1
    return p + m


@numba.njit(cache=True, nogil=True, _nrt=False)
def _value_end(buf, p, n):  # pragma: no cover - compiled
    """The end of the JSON value at p: brackets counted, strings skipped. Its content (and that its brackets pair
    up) is checked by the parser its text goes to (orjson). -1 where the text ends first."""
    depth = 0
    while p < n:
        if depth > 0 and p + 8 <= n:  # inside brackets only quotes and brackets matter: the rest eight at a time
            found = _structural_bytes(load8(buf, p))
            if found == 0:
                p += 8
                continue
            p += trailing_zeros(found) >> 3
        c = buf[p]
        if c == 34:
            q, _ = _string_end(buf, p + 1, n)
            if q < 0:
                return -1
            p = q + 1
        elif c == 123 or c == 91:
            depth += 1
            p += 1
        elif c == 125 or c == 93:
            if depth == 0:
                return p  # the end of the object or list holding a number or literal
            depth -= 1
            p += 1
        elif depth == 0 and (c == 44 or c == 32 or c == 10 or c == 13 or c == 9):
            return p
        else:
            p += 1
        if depth == 0 and (c == 125 or c == 93 or c == 34):
            return p
    return p if depth == 0 else -1


@numba.njit(cache=True, nogil=True, _nrt=False)
def _copy(target, at, source, s, e):  # pragma: no cover - compiled
    """target[at:at + e - s] = source[s:e], without the runtime a slice assignment needs."""
    for k in range(e - s):
        target[at + k] = source[s + k]


@numba.njit(cache=True, nogil=True, _nrt=False)
def _hash(buf, s, e, tag):  # pragma: no cover - compiled
    """A hash of buf[s:e] and `tag`: eight bytes at a time, each word multiplied in and its high bits folded down
    (the table takes the low bits), the last bytes one by one (FNV-1a)."""
    h = np.uint64(0xCBF29CE484222325) ^ np.uint64(tag)
    k = s
    while k + 8 <= e:
        h = (h ^ load8(buf, k)) * _MIX
        h ^= h >> np.uint64(32)
        k += 8
    for i in range(k, e):
        h = (h ^ np.uint64(buf[i])) * np.uint64(0x100000001B3)
    return h ^ (h >> np.uint64(29))


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def _intern(buf, s, e, tag, table, hashes, entries, heap, state):  # pragma: no cover - compiled
    """The code of the text buf[s:e] with `tag`, added to the table when new; _FULL when the table or heap is."""
    recent = state[_RECENT + tag]
    if recent >= 0 and _same(buf, s, e, heap, entries[recent, 0], entries[recent, 1]):
        return recent
    h = _hash(buf, s, e, tag)
    mask = table.size - 1
    i = np.int64(h & np.uint64(mask))
    while True:
        code = table[i]
        if code < 0:
            code = _insert(buf, s, e, tag, h, i, table, hashes, entries, heap, state)
            break
        if hashes[code] == h and entries[code, 2] == tag and _same(buf, s, e, heap, entries[code, 0],
                                                                    entries[code, 1]):
            break
        i = (i + 1) & mask
    if code >= 0:
        state[_RECENT + tag] = code
    return code


@numba.njit(cache=True, nogil=True, _nrt=False)
def _insert(buf, s, e, tag, h, i, table, hashes, entries, heap, state):  # pragma: no cover - compiled
    """`_intern` of a new text, at free slot i of the table (apart: the slices' code slows every lookup)."""
    code = state[_ENTRIES]
    at = state[_HEAP_BYTES]
    if code >= hashes.size or 4 * code >= 3 * table.size or at + (e - s) + 1 > heap.size:
        return _FULL
    _copy(heap, at, buf, s, e)
    heap[at + e - s] = 0  # entries are split on NUL, which JSON text holds nowhere
    entries[code, 0], entries[code, 1], entries[code, 2] = at, at + e - s, tag
    hashes[code] = h
    table[i] = code
    state[_ENTRIES] = code + 1
    state[_HEAP_BYTES] = at + e - s + 1
    return code


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def _statistic(buf, p, n):  # pragma: no cover - compiled
    """(end, value, present, is bool) of a statistic's value at p; end is _ODD_RECORD or _BROKEN when it is none."""
    c = buf[p]
    if c == 110:
        return _literal(buf, p, n, _NULL), 0.0, False, False
    if c == 116:
        return _literal(buf, p, n, _TRUE), 1.0, True, True
    if c == 102:
        return _literal(buf, p, n, _FALSE), 0.0, True, True
    if c == 78:  # bare NaN and Infinity: not JSON, but Python's json module writes them, and reads them so
        return _literal(buf, p, n, _NAN), np.nan, True, False
    if c == 73:
        return _literal(buf, p, n, _INFINITY), np.inf, True, False
    if c == 45 and p + 1 < n and buf[p + 1] == 73:
        return _literal(buf, p, n, _MINUS_INFINITY), -np.inf, True, False
    if c == 45 or 48 <= c <= 57:
        value, status, e = parse_number_at(buf, p, n)
        if status == 0:
            return e, value, True, False
        if status == 2:  # beyond this parser: the plain route reads it
            return _ODD_RECORD, 0.0, False, False
        return _BROKEN, 0.0, False, False
    return _ODD_RECORD, 0.0, False, False  # text, a list ...


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def _member(buf, p, n):  # pragma: no cover - compiled
    """The member of an object whose key's opening quote is at p: (key start, key end, whether the key holds an
    escape, the position of its value); the value's position is _BROKEN when the text is not a key and a colon."""
    if p >= n or buf[p] != 34:
        return 0, 0, False, _BROKEN
    ke, escaped = _string_end(buf, p + 1, n)
    if ke < 0:
        return 0, 0, False, _BROKEN
    q = _ws(buf, ke + 1, n)
    if q >= n or buf[q] != 58:
        return 0, 0, False, _BROKEN
    q = _ws(buf, q + 1, n)
    return p + 1, ke, escaped, q if q < n else _BROKEN


@numba.njit(cache=True, nogil=True, _nrt=False, inline="always")
def _next_item(buf, p, n, close):  # pragma: no cover - compiled
    """After an item of an object or list whose closing byte is `close`: (the next item's position, False), or (the
    position after the close, True); (_BROKEN, True) when neither follows."""
    p = _ws(buf, p, n)
    if p < n and buf[p] == 44:
        return _ws(buf, p + 1, n), False
    if p < n and buf[p] == close:
        return p + 1, True
    return _BROKEN, True


@numba.njit(cache=True, nogil=True, _nrt=False)
def _null_end(buf, p, n):  # pragma: no cover - compiled
    """The end of the null at p, or _BROKEN."""
    end = _literal(buf, p, n, _NULL)
    return end if end >= 0 else _BROKEN


@numba.njit(cache=True, nogil=True, _nrt=False)
def _leaf(buf, p, n, row, rows, stats, present, table, hashes, entries, heap, state):  # pragma: no cover
    """Read the leaf object whose '{' is at p into row `row`; return the position after it or a negative code.

    A tensor's fields go into their columns here; any other leaf (a scalar, a process group ...) is interned whole
    (`_LEAF_JSON`) and its row made by `leaf_row` once per distinct text."""
    start = p
    for k in range(4):
        stats[row, k] = 0.0
        present[row, k] = False
    dtype_code = shape_code = md5_code = file_code = _EMPTY
    grad = -1
    flags = 0
    has_max = has_type = has_bool = has_other = False
    dtype_start = dtype_end = 0
    key = -1
    p = _ws(buf, p + 1, n)
    if p < n and buf[p] == 125:
        return _ODD_RECORD  # {}: no type, flattened (to nothing) by the plain route
    while True:
        ks, ke, escaped, p = _member(buf, p, n)
        if p < 0:
            return _BROKEN
        key = -1 if escaped else _key_after(buf, ks, ke, _LEAF_BYTES, _LEAF_OFFSETS, key + 1)
        c = buf[p]
        if key == 1 or key == 8 or key == 9:  # dtype, md5, data_name: text or null
            code = _EMPTY
            if c == 34:
                s = p + 1
                e, _ = _string_end(buf, s, n)
                if e < 0:
                    return _BROKEN
                p = e + 1
                code = _intern(buf, s, e, _FILE_NAME if key == 9 else _TEXT, table, hashes, entries, heap, state)
                if code == _FULL:
                    return _FULL
                if key == 1:
                    dtype_start, dtype_end = s, e
            elif c == 110:
                p = _literal(buf, p, n, _NULL)
            elif key == 9 and c == 45 and p + 2 < n and buf[p + 1] == 49 and not 46 <= buf[p + 2] <= 57 and \
                    buf[p + 2] != 69 and buf[p + 2] != 101:
                p += 2  # data_name -1: no file
            else:
                has_other = True
                p = _value_end(buf, p, n)
            if key == 1:
                dtype_code = code
                flags |= _HAS_DTYPE
            elif key == 8:
                md5_code = code
                flags |= _HAS_MD5
            else:
                file_code = code
        elif 3 <= key <= 6:  # Max, Min, Mean, Norm
            e, value, here, is_bool = _statistic(buf, p, n)
            if e == _ODD_RECORD:
                has_other = True
                e = _value_end(buf, p, n)
            elif e < 0:
                return e
            else:
                stats[row, key - 3] = value
                present[row, key - 3] = here
                has_bool |= is_bool
            has_max |= key == 3
            p = e
        elif key == 7:  # requires_grad
            if c == 116:
                p, grad = _literal(buf, p, n, _TRUE), 1
            elif c == 102:
                p, grad = _literal(buf, p, n, _FALSE), 0
            elif c == 110:
                p, grad = _literal(buf, p, n, _NULL), -1
            else:
                return _ODD_RECORD
        else:  # type, shape, value, or a field `Leaf` does not declare
            if key == 2:
                e = _value_end(buf, p, n)
                if e < 0:
                    return _BROKEN
                shape_code = _intern(buf, p, e, _RAW_JSON, table, hashes, entries, heap, state)
                if shape_code == _FULL:
                    return _FULL
                p = e
            else:
                has_type |= key == 0
                has_other |= key == -1
                if c == 78 or c == 73 or (c == 45 and p + 1 < n and buf[p + 1] == 73):
                    return _ODD_RECORD  # bare NaN/Infinity in a value: the plain route reads it
                p = _value_end(buf, p, n)
        if p < 0:
            return _BROKEN
        p, done = _next_item(buf, p, n, 125)
        if done:
            break
    if p < 0:
        return _BROKEN
    if not has_type:
        return _ODD_RECORD  # a dict without "type" is flattened by key, not read as a leaf
    if (flags & _HAS_DTYPE) != 0 or has_max:  # a tensor
        if has_other:
            return _ODD_RECORD  # a field of a type or name the columns do not take: the plain route
        if has_bool and (dtype_end == dtype_start or not _holds(buf, dtype_start, dtype_end, _BOOL, True)):
            return _ODD_RECORD  # true/false statistics of a tensor that is not bool: the plain route says so
        rows[row, _DTYPE], rows[row, _SHAPE], rows[row, _MD5] = dtype_code, shape_code, md5_code
        rows[row, _FILE], rows[row, _VALUE] = file_code, _EMPTY
    else:
        code = _intern(buf, start, p, _LEAF_JSON, table, hashes, entries, heap, state)
        if code == _FULL:
            return _FULL
        rows[row, _VALUE] = code
        flags |= _OTHER_LEAF
    rows[row, _GRAD], rows[row, _FLAGS] = grad, flags
    return p


@numba.njit(cache=True, nogil=True, _nrt=False)
def _emit(buf, p, n, node, role, slot, rows, stats, present, table, hashes, entries, heap, state):  # pragma: no cover
    """`_leaf` into the next row, with its node, role and slot."""
    row = state[_LEAVES]
    if row >= rows.shape[0]:
        return _FULL
    end = _leaf(buf, p, n, row, rows, stats, present, table, hashes, entries, heap, state)
    if end >= 0:
        rows[row, _NODE], rows[row, _ROLE], rows[row, _SLOT] = node, role, slot
        state[_LEAVES] = row + 1
    return end


@numba.njit(cache=True, nogil=True, _nrt=False)
def _named_slot(buf, s, e, seen, count, table, hashes, entries, heap, state):  # pragma: no cover - compiled
    """(0, the slot of a keyword: its interned name as -(code + 1)); (_ODD_RECORD, 0) when the dict names it twice (a
    parser keeps the last value at the first place) or has more keys than `seen` holds; (_FULL, 0)."""
    code = _intern(buf, s, e, _SLOT_KEY, table, hashes, entries, heap, state)
    if code < 0:
        return code, 0
    if count >= seen.size:
        return _ODD_RECORD, 0
    for k in range(count):
        if seen[k] == code:
            return _ODD_RECORD, 0
    seen[count] = code
    return 0, -(code + 1)


@numba.njit(cache=True, nogil=True, _nrt=False)
def _named_leaves(buf, p, n, node, role, grads, seen, rows, stats, present, table, hashes, entries, heap,
                  state):  # pragma: no cover - compiled
    """The object at p (its '{') of names → leaf or null (keyword arguments, parameters; with `grads`, a module's
    parameter gradients, where a leaf may come as a list of one); the position after it or a negative code."""
    count = 0
    p = _ws(buf, p + 1, n)
    if p < n and buf[p] == 125:
        return p + 1
    while True:
        ks, ke, escaped, p = _member(buf, p, n)
        if p < 0:
            return _BROKEN
        if escaped or (not grads and _same(buf, ks, ke, _LEAF_BYTES, _LEAF_OFFSETS[0], _LEAF_OFFSETS[1])):
            return _ODD_RECORD  # a "type" key makes the dict one leaf
        status, slot = _named_slot(buf, ks, ke, seen, count, table, hashes, entries, heap, state)
        if status < 0:
            return status
        count += 1
        c = buf[p]
        if c == 110:
            p = _null_end(buf, p, n)
        elif c == 123:
            p = _emit(buf, p, n, node, role, slot, rows, stats, present, table, hashes, entries, heap, state)
        elif c == 91 and grads:  # [leaf]
            q = _ws(buf, p + 1, n)
            if q >= n or buf[q] != 123:
                return _ODD_RECORD
            q = _emit(buf, q, n, node, role, slot, rows, stats, present, table, hashes, entries, heap, state)
            if q < 0:
                return q
            q = _ws(buf, q, n)
            if q >= n or buf[q] != 93:
                return _ODD_RECORD  # more than one: slots "name.0", "name.1" ... by the plain route
            p = q + 1
        else:
            return _ODD_RECORD
        if p < 0:
            return p
        p, done = _next_item(buf, p, n, 125)
        if done:
            return p


@numba.njit(cache=True, nogil=True, _nrt=False)
def _digits(scratch, at, value):  # pragma: no cover - compiled
    """Write `value`'s decimal digits at `at`; the position after them."""
    count = 1
    rest = value // 10
    while rest:
        count += 1
        rest //= 10
    for k in range(count - 1, -1, -1):
        scratch[at + k] = 48 + value % 10
        value //= 10
    return at + count


@numba.njit(cache=True, nogil=True, _nrt=False)
def _listed_leaves(buf, p, n, node, role, scratch, rows, stats, present, table, hashes, entries, heap,
                   state):  # pragma: no cover - compiled
    """The list at p (its '[') of leaves, nulls and lists of them, slots by position; the position after it or a
    negative code."""
    p = _ws(buf, p + 1, n)
    if p < n and buf[p] == 93:
        return p + 1
    i = 0
    while True:
        c = buf[p] if p < n else 0
        if c == 123:
            p = _emit(buf, p, n, node, role, i, rows, stats, present, table, hashes, entries, heap, state)
        elif c == 110:
            p = _null_end(buf, p, n)
        elif c == 91:
            p = _inner_list(buf, p, n, node, role, i, scratch, rows, stats, present, table, hashes, entries, heap,
                            state)
        else:
            return _ODD_RECORD if p < n else _BROKEN  # a dict flattened by key, a bare value
        if p < 0:
            return p
        i += 1
        p, done = _next_item(buf, p, n, 93)
        if done:
            return p


@numba.njit(cache=True, nogil=True, _nrt=False)
def _inner_list(buf, p, n, node, role, outer, scratch, rows, stats, present, table, hashes, entries, heap,
                state):  # pragma: no cover - compiled
    """A list inside the list of `_listed_leaves` (at its position `outer`): leaves and nulls, slots "outer.position"
    (interned from `scratch`). Apart, not by recursion: numba caches no recursive function."""
    p = _ws(buf, p + 1, n)
    if p < n and buf[p] == 93:
        return p + 1
    i = 0
    while True:
        c = buf[p] if p < n else 0
        if c == 123:
            dot = _digits(scratch, 0, outer)
            scratch[dot] = 46
            code = _intern(scratch, 0, _digits(scratch, dot + 1, i), _SLOT_KEY, table, hashes, entries, heap, state)
            if code == _FULL:
                return _FULL
            p = _emit(buf, p, n, node, role, -(code + 1), rows, stats, present, table, hashes, entries, heap, state)
        elif c == 110:
            p = _null_end(buf, p, n)
        else:
            return _ODD_RECORD if p < n else _BROKEN  # a list deeper down, a dict flattened by key, a bare value
        if p < 0:
            return p
        i += 1
        p, done = _next_item(buf, p, n, 93)
        if done:
            return p


@numba.njit(cache=True, nogil=True, _nrt=False)
def _plain_value_end(buf, p, n):  # pragma: no cover - compiled
    """The end of a checked string, number or literal at p; _ODD_RECORD for a container, _BROKEN for bad JSON."""
    c = buf[p]
    if c == 34:
        e, _ = _string_end(buf, p + 1, n)
        return e + 1 if e >= 0 else _BROKEN
    if c == 116:
        e = _literal(buf, p, n, _TRUE)
    elif c == 102:
        e = _literal(buf, p, n, _FALSE)
    elif c == 110:
        e = _literal(buf, p, n, _NULL)
    elif c == 45 or 48 <= c <= 57:
        _, status, e = parse_number_at(buf, p, n)  # its value is not kept, its grammar checked
        if status == 1:
            return _BROKEN
    else:
        return _ODD_RECORD
    return e if e >= 0 else _BROKEN


@numba.njit(cache=True, nogil=True, _nrt=False)
def _record(buf, p, n, node, grads, seen, scratch, rows, stats, present, table, hashes, entries, heap,
            state):  # pragma: no cover - compiled
    """The record object at p (its '{'): a call's roles, or (`grads`) a module's parameter gradients."""
    if grads:
        return _named_leaves(buf, p, n, node, _PARAM_GRAD, True, seen, rows, stats, present, table, hashes, entries,
                             heap, state)
    last = -1
    p = _ws(buf, p + 1, n)
    if p < n and buf[p] == 125:
        return p + 1
    while True:
        ks, ke, escaped, p = _member(buf, p, n)
        if p < 0:
            return _BROKEN
        k = -1 if escaped else _key_index(buf, ks, ke, _ROLE_BYTES, _ROLE_OFFSETS)
        c = buf[p]
        if k < 0 and not escaped:  # another key (is_recompute ...): no leaves; a flag or a number is skipped
            p = _plain_value_end(buf, p, n)
        elif k <= last:
            return _ODD_RECORD  # roles in another order than the plain route reads them, or a repeated one
        elif c == 110:
            p = _null_end(buf, p, n)
        elif c == 91:
            p = _listed_leaves(buf, p, n, node, _ROLE_CODES[k], scratch, rows, stats, present, table, hashes,
                               entries, heap, state)
        elif c == 123:
            p = _named_leaves(buf, p, n, node, _ROLE_CODES[k], False, seen, rows, stats, present, table, hashes,
                              entries, heap, state)
        else:
            return _ODD_RECORD
        if p < 0:
            return p
        if k >= 0:
            last = k
        p, done = _next_item(buf, p, n, 125)
        if done:
            return p


@numba.njit(cache=True, nogil=True, _nrt=False)
def _data(buf, p, n, limit, state, seen, scratch, records, id_heap, odd, odd_heap, rows, stats, present, table,
          hashes, entries, heap):  # pragma: no cover - compiled
    """The records of "data" from p (a record's key, or the object's '}'): (status, position)."""
    while True:
        if p >= n:
            return _BAD, p
        if buf[p] == 125:
            return _DONE, p + 1
        if p >= limit:
            return _PAUSE, p
        if buf[p] != 34:
            return _BAD, p
        ks = p + 1
        ke, escaped = _string_end(buf, ks, n)
        if ke < 0:
            return _BAD, p
        r = state[_RECORDS]
        at = state[_ID_BYTES]
        if r >= records.shape[0] or at + (ke - ks) + 1 > id_heap.size:
            return _GROW, p
        q = _ws(buf, ke + 1, n)
        if q >= n or buf[q] != 58:
            return _BAD, p
        q = _ws(buf, q + 1, n)
        if q >= n or buf[q] != 123:
            return _BAD, p  # a record that is no object: the whole-file read says so
        grads = _holds(buf, ks, ke, _GRAD_MARK, False)
        first = state[_LEAVES]
        end = _record(buf, q, n, r, grads, seen, scratch, rows, stats, present, table, hashes, entries, heap, state)
        flags = (2 if grads else 0) | (4 if escaped else 0)
        if end == _FULL:
            state[_LEAVES] = first
            return _GROW, p
        if end == _BROKEN:
            return _BAD, p
        if end == _ODD_RECORD:
            state[_LEAVES] = first
            end = _value_end(buf, q, n)
            m = state[_ODD]
            taken = state[_ODD_BYTES]
            if end < 0:
                return _BAD, p
            if m >= odd.shape[0] or taken + (end - p) > odd_heap.size:
                return _GROW, p
            _copy(odd_heap, taken, buf, p, end)
            odd[m, 0], odd[m, 1], odd[m, 2] = taken, taken + end - p, r
            state[_ODD], state[_ODD_BYTES] = m + 1, taken + end - p
            flags |= 1
        _copy(id_heap, at, buf, ks, ke)
        id_heap[at + ke - ks] = 10  # ids are split on newlines, which a JSON string holds only escaped
        records[r, 0], records[r, 1], records[r, 2] = at, at + ke - ks, flags
        state[_ID_BYTES] = at + ke - ks + 1
        state[_RECORDS] = r + 1
        p = _ws(buf, end, n)
        if p >= n:
            return _BAD, p
        if buf[p] == 44:
            p = _ws(buf, p + 1, n)
            if p >= n or buf[p] != 34:
                return _BAD, p
            continue
        if buf[p] == 125:
            return _DONE, p + 1
        return _BAD, p


@numba.njit(cache=True, nogil=True, _nrt=False)
def _scan(buf, limit, state, seen, scratch, header, records, id_heap, odd, odd_heap, rows, stats, present, table,
          hashes, entries, heap):  # pragma: no cover - compiled
    """Walk dump.json from where `state` stopped: the top-level members (their spans in `header`, "data"'s records
    by `_data`) until the text ends (_DONE), "data" passes `limit` (_PAUSE), an output is full (_GROW: grow it and
    call again), or the text is not what this walk reads (_BAD)."""
    n = buf.size
    p = state[_POS]
    while True:
        phase = state[_PHASE]
        if phase == 0:  # the file's opening brace
            p = _ws(buf, 0, n)
            if p >= n or buf[p] != 123:
                return _BAD
            p = _ws(buf, p + 1, n)
            state[_PHASE] = 3
        elif phase == 3:  # a top-level key
            if p >= n or buf[p] != 34:
                return _BAD
            ke, escaped = _string_end(buf, p + 1, n)
            if ke < 0:
                return _BAD
            q = _ws(buf, ke + 1, n)
            if q >= n or buf[q] != 58:
                return _BAD
            q = _ws(buf, q + 1, n)
            if not escaped and _same(buf, p + 1, ke, _DATA_KEY, 0, 4):
                if state[_DATA_SEEN] or q >= n or buf[q] != 123:
                    return _BAD
                state[_DATA_SEEN] = 1
                p = _ws(buf, q + 1, n)
                state[_PHASE] = 1
            else:
                end = _value_end(buf, q, n)
                h = state[_HEADER]
                if end < 0 or h >= header.shape[0]:
                    return _BAD
                header[h, 0], header[h, 1] = p, end
                state[_HEADER] = h + 1
                p = end
                state[_PHASE] = 2
        elif phase == 1:  # the records of "data"
            status, p = _data(buf, p, n, limit, state, seen, scratch, records, id_heap, odd, odd_heap, rows, stats,
                              present, table, hashes, entries, heap)
            if status != _DONE:
                state[_POS] = p
                return status
            state[_PHASE] = 2
        else:  # after a member: another one, or the end
            p = _ws(buf, p, n)
            if p < n and buf[p] == 44:
                p = _ws(buf, p + 1, n)
                state[_PHASE] = 3
            elif p < n and buf[p] == 125:
                p = _ws(buf, p + 1, n)
                return _DONE if p == n and state[_DATA_SEEN] else _BAD
            else:
                return _BAD


@numba.njit(cache=True, nogil=True, _nrt=False)
def _rehash(table, hashes, count):  # pragma: no cover - compiled
    mask = table.size - 1
    for code in range(count):
        i = np.int64(hashes[code] & np.uint64(mask))
        while table[i] >= 0:
            i = (i + 1) & mask
        table[i] = code


@numba.njit(cache=True, nogil=True)
def _local_codes(rows, column, flags, other, leaf, leaf_of, count):  # pragma: no cover - compiled
    """The codes of column `column` of `rows` renumbered densely in order of first use, with the codes they stand
    for (shifted by 2: _SCALAR is 0, _EMPTY 1, the interned texts from 2, then the rows made for the leaves that are
    no tensor (flag `other`): `count` + 2 + their row of `made`, found by `leaf_of` of their leaf text's code)."""
    number = np.full(count + 2 + leaf_of.size, -1, np.int64)
    kept = np.empty(number.size, np.int64)
    local = np.empty(rows.shape[0], np.int32)
    k = 0
    for i in range(rows.shape[0]):
        code = count + 2 + leaf_of[rows[i, leaf]] if rows[i, flags] & other else rows[i, column] + 2
        if number[code] < 0:
            number[code] = k
            kept[k] = code
            k += 1
        local[i] = number[code]
    return local, kept[:k]


@numba.njit(cache=True, nogil=True)
def _local_slots(rows, column, count):  # pragma: no cover - compiled
    """`_local_codes` of the slot column: a position p stands for p, an interned name's code c for top + c."""
    top = 0
    for i in range(rows.shape[0]):
        top = max(top, rows[i, column] + 1)
    number = np.full(top + count, -1, np.int64)
    kept = np.empty(number.size, np.int64)
    local = np.empty(rows.shape[0], np.int32)
    k = 0
    for i in range(rows.shape[0]):
        slot = rows[i, column]
        code = slot if slot >= 0 else top - slot - 1
        if number[code] < 0:
            number[code] = k
            kept[k] = code
            k += 1
        local[i] = number[code]
    return local, kept[:k], top


def dispatchers() -> dict[str, numba.core.registry.CPUDispatcher]:
    """The kernels `msprobe_scan` calls, by the names of its `KernelSet`."""
    return {"scan": _scan, "rehash": _rehash, "local_codes": _local_codes, "local_slots": _local_slots}
