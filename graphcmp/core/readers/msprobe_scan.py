"""dump.json → tensor columns by one compiled pass over its bytes (numba kernels, built ahead of time).

`read_dump_compiled` gives what `msprobe._read_dump_chunked` gives (a builder holding the tensors, the header, each
node id's position, whether the first tensor has an md5), the same columns to the last bit, without Python work per
record or per leaf: the kernel (`_scan`) walks the text once and writes each leaf's row into numpy columns; its texts
(dtypes, shapes, slots, md5s, file names, and every leaf that is no tensor, whole) are interned by their bytes into
one table, so Python makes one string (or one `leaf_row`) per distinct text; numbers are parsed exactly
(`graphcmp.core.jsonnum`), bare NaN/Infinity statistics in place.

The kernel reads the common schema (`msprobe_schema`: lists of leaves, nulls and lists of them, keyword dicts of
leaves, a module's parameter gradients). A record holding anything else (a list three deep, a dict flattened by key,
a tensor field of another type or name, a true/false statistic of a tensor that is not bool, roles out of their usual
order, a number beyond the exact parser) is set apart whole, its text copied, and read by the plain-dict route
(`msprobe_leaves.collect_record`), as the chunked reader reads it. A file that is not such JSON at all, or whose
texts do not decode, gives None: the caller then reads it as before, which reports or salvages the damage.

The file is mapped, not read, and walked in windows; the pages of a window are dropped once its records are read,
so the process holds the columns, never the text.

The kernels are in `msprobe_scan_kernels` (what they write where: `msprobe_scan_layout`); this module drives them and
makes the columns of what they wrote. They are loaded as a `KernelSet`: once built ahead of time, in milliseconds and
without numba (a comparison's two reading processes each saved 0.9 s of loading numba), so that every dump.json is
read here then; where they cannot be built, by numba.
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
from collections.abc import Mapping
from pathlib import Path
from sys import intern
from typing import Any

import msgspec
import numpy as np
import orjson

from graphcmp.core.compiled import KernelSet, build_detached
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.id_kernels import KERNELS as BYTE_ID_KERNELS
from graphcmp.core.id_kernels import PADDING, IdIndex, IdRows, joined_ids
from graphcmp.core.inputs import open_regular
from graphcmp.core.jsonio import LayoutMismatch, loads_object
from graphcmp.core.readers.msprobe_leaves import DUMP_FILE, Leaves, add_leaves, collect_record, md5_flag
from graphcmp.core.readers.msprobe_scan_layout import (
    _BAD,
    _COLUMNS,
    _DONE,
    _DTYPE,
    _ENTRIES,
    _FILE,
    _FILE_NAME,
    _FLAGS,
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
    _OTHER_LEAF,
    _POS,
    _RAW_JSON,
    _RECENT,
    _RECORDS,
    _ROLE,
    _SHAPE,
    _SLOT,
    _SLOT_KEY,
    _STATE_SIZE,
    _TEXT,
    _VALUE,
)
from graphcmp.core.readers.msprobe_schema import file_name, leaf_row
from graphcmp.core.readers.naming_compiled import KERNELS as ID_KERNELS
from graphcmp.core.readers.naming_compiled import parse_id_columns
from graphcmp.core.records import NodeKind
from graphcmp.core.stat_kernels import KERNELS as STAT_KERNELS
from graphcmp.core.texts import TextCodes

__all__ = ["WINDOW_BYTES", "build_in_background", "build_kernels", "kernels_built", "kernels_can_be_built",
           "read_dump_compiled"]

WINDOW_BYTES = 64 << 20
"""Bytes of the mapped file walked before its pages are dropped: the text a reading holds at a time."""

_TOP_KEYS = 64  # top-level members of dump.json besides "data" that the walk records
_FIRST_SCALE = 1.0  # of the outputs' first capacities (the tests make them tiny, so that they grow)
_FIRST_MAX = 1 << 20  # rows or bytes of an output at first: a large file of something else allocates little



def _kernel_dispatchers() -> dict[str, Any]:
    from graphcmp.core.readers.msprobe_scan_kernels import dispatchers  # see tests/test_layers.py: LAZY_IMPORTS

    return dispatchers()


_KERNELS = KernelSet(
    "msprobe_scan",
    Path(__file__).with_name("msprobe_scan_kernels.py"),
    signatures={
        "scan": ("i8", ("u1[::1]", "i8", "i8[::1]", "i8[::1]", "u1[::1]", "i8[:, ::1]", "i8[:, ::1]", "u1[::1]",
                        "i8[:, ::1]", "u1[::1]", "i4[:, ::1]", "f8[:, ::1]", "b1[:, ::1]", "i8[::1]", "u8[::1]",
                        "i8[:, ::1]", "u1[::1]")),
        "rehash": ("void", ("i8[::1]", "u8[::1]", "i8")),
        "local_codes": ("Tuple((i4[::1], i8[::1]))", ("i4[:, ::1]", "i8", "i8", "i8", "i8", "i8[::1]", "i8")),
        "local_slots": ("Tuple((i4[::1], i8[::1], i8))", ("i4[:, ::1]", "i8", "i8")),
    },
    dispatchers=_kernel_dispatchers,
)


def kernels_built() -> bool:
    """Whether the pass's kernels (and the id parser's) are built ahead of time: the pass then costs a few
    milliseconds to load, and reads every dump.json faster than the chunked read (2x at 0.4 MB)."""
    return _KERNELS.built() and ID_KERNELS.built()


def kernels_can_be_built() -> bool:
    """Whether the pass's kernels and the id parser's are or can be built ahead of time (`KernelSet.can_build`);
    else loading them is loading numba, about 0.9 s per process."""
    return all(kernels.can_build() for kernels in (_KERNELS, ID_KERNELS))


_BUILT_TOGETHER = (_KERNELS, ID_KERNELS, STAT_KERNELS, BYTE_ID_KERNELS)
"""The sets `build_kernels` builds: the pass's, the id parser's, and those the comparison of the runs read takes: the
statistics metrics' (`core.stat_kernels`) and the forward twins' (`core.id_kernels`)."""


def build_kernels() -> None:
    """Build the kernel sets of `_BUILT_TOGETHER` where they are not built: what `build_in_background` runs."""
    for kernels in _BUILT_TOGETHER:
        kernels.load()


def build_in_background() -> bool:
    """Start building the kernel sets of `_BUILT_TOGETHER` in a detached process at the lowest priority, when one is
    not built and can be (`KernelSet.buildable`), and no build of any runs; whether it was started. Until they are
    built, a dump.json under `msprobe.BUILD_FROM_BYTES` is read by the chunked read, 2.5-2.7x slower
    (bench/README.md), and the statistics metrics are computed by numpy, 4-6x slower."""
    sets = _BUILT_TOGETHER
    if any(kernels.building() for kernels in sets) or not any(kernels.buildable() for kernels in sets):
        return False
    return build_detached(f"{__name__}:build_kernels")



class _Outputs:
    """The arrays `_scan` fills, grown (and the text table rehashed) when it asks."""

    def __init__(self, size: int) -> None:
        def first(count: int) -> int:  # capacities guessed from the file's size, at most _FIRST_MAX; grown when short
            return max(2, int(min(count, _FIRST_MAX) * _FIRST_SCALE))

        self.state = np.zeros(_STATE_SIZE, np.int64)
        self.state[_RECENT:] = -1
        self.seen = np.zeros(256, np.int64)  # the keyword slots of a dict (`_named_slot`)
        self.scratch = np.zeros(48, np.uint8)  # the slot text of a list inside a list
        self.header = np.zeros((_TOP_KEYS, 2), np.int64)
        self.records = np.zeros((first(size // 256 + 1024), 3), np.int64)
        self.id_heap = np.zeros(first(size // 8 + 4096), np.uint8)
        self.odd = np.zeros((first(1024), 3), np.int64)
        self.odd_heap = np.zeros(first(1 << 20), np.uint8)
        leaves = first(size // 128 + 1024)  # np.zeros: pages never written are never resident
        self.rows = np.zeros((leaves, _COLUMNS), np.int32)
        self.stats = np.zeros((leaves, 4), np.float64)
        self.present = np.zeros((leaves, 4), np.bool_)
        self.hashes = np.zeros(first(1 << 15), np.uint64)
        self.entries = np.zeros((len(self.hashes), 3), np.int64)
        self.table = np.full(_table_size(len(self.hashes)), -1, np.int64)
        self.heap = np.zeros(first(1 << 20), np.uint8)

    def arguments(self) -> tuple[np.ndarray, ...]:
        return (self.state, self.seen, self.scratch, self.header, self.records, self.id_heap, self.odd, self.odd_heap,
                self.rows, self.stats, self.present, self.table, self.hashes, self.entries, self.heap)

    def grow(self, share: float) -> None:
        """Grow what is more than half full (everything, when nothing is: one record needs more than half), to what the
        file's remaining text needs at the rate of its first `share` read (at least twice the size): a large file
        grows each output once or twice, a file that is no dump allocates little before its text says so."""
        used = self._used()
        full = [name for name, (count, size) in used.items() if 2 * count > size] or list(used)
        self._grow(full, used, share)

    def reserve(self, share: float) -> None:
        """Grow now what the rest of the file will need at the rate of its first `share` read, while little of it is
        filled (copied): called after the first window, when that rate is known."""
        used = self._used()
        short = [name for name, (count, size) in used.items() if count / share * 1.1 > size]
        self._grow(short, used, share, at_least=1, margin=1.5)  # a file's start is not its rest: pages never
        # written are never resident

    def _used(self) -> dict[str, tuple[int, int]]:
        state = self.state
        return {"records": (state[_RECORDS], len(self.records)), "id_heap": (state[_ID_BYTES], self.id_heap.size),
                "odd": (state[_ODD], len(self.odd)), "odd_heap": (state[_ODD_BYTES], self.odd_heap.size),
                "rows": (state[_LEAVES], len(self.rows)), "heap": (state[_HEAP_BYTES], self.heap.size),
                "hashes": (state[_ENTRIES], len(self.hashes))}

    def _grow(self, names: list[str], used: dict[str, tuple[int, int]], share: float, at_least: int = 2,
              margin: float = 1.1) -> None:
        state = self.state
        for name in names:
            count, size = used[name]
            wanted = max(at_least * size, int(margin * count / share) if share >= 0.05 else 0)  # early: no rate yet
            if name == "rows":
                self.rows, self.stats, self.present = (_grown(a, wanted) for a in (self.rows, self.stats, self.present))
            elif name == "hashes":
                self.hashes, self.entries = _grown(self.hashes, wanted), _grown(self.entries, wanted)
                self.table = np.full(_table_size(self.hashes.size), -1, np.int64)
                _KERNELS.load().rehash(self.table, self.hashes, state[_ENTRIES])
            else:
                setattr(self, name, _grown(getattr(self, name), wanted))


def _table_size(entries: int) -> int:
    """Slots of the text table for `entries` texts: a power of two, at most half full."""
    return 1 << (2 * entries - 1).bit_length()


def _grown(array: np.ndarray, rows: int) -> np.ndarray:
    """`array` with room for `rows` (the rows past its own are written before they are read)."""
    grown = np.empty((rows, *array.shape[1:]), array.dtype)
    grown[:len(array)] = array
    return grown


def _walk(buf: np.ndarray, mapped: mmap.mmap | None) -> _Outputs | None:
    """Run `_scan` over the whole text, window by window (dropping each window's pages), growing its outputs."""
    kernels, out = _KERNELS.load(), _Outputs(buf.size)
    dropped, reserved = 0, False
    limit = min(buf.size, WINDOW_BYTES)
    while True:
        status = kernels.scan(buf, limit, *out.arguments())
        if status == _DONE:
            return out
        if status == _BAD:
            return None
        if status == _GROW:
            out.grow(int(out.state[_POS]) / buf.size)
            continue
        position = int(out.state[_POS])
        if not reserved:  # the first window read: the rest's needs are known, and growing now copies little
            out.reserve(position / buf.size)
            reserved = True
        limit = min(buf.size, position + WINDOW_BYTES)
        done = (position // mmap.PAGESIZE) * mmap.PAGESIZE
        if mapped is not None and done > dropped and hasattr(mmap, "MADV_DONTNEED"):
            mapped.madvise(mmap.MADV_DONTNEED, dropped, done - dropped)
            dropped = done


def read_dump_compiled(folder: Path) -> tuple[HierarchyBuilder, dict[str, Any], Mapping[str, int], bool] | None:
    """What `msprobe._read_dump_chunked` gives for `folder`'s dump.json: (builder holding its tensors, the header with
    ``"data": {}``, each node id's position in "data", whether the first tensor has an md5); None when the text is not
    the JSON this walk reads (the chunked or whole-file read then reads, salvages or reports it)."""
    path = folder / DUMP_FILE
    try:
        with open_regular(path) as file:
            if os.fstat(file.fileno()).st_size == 0:
                return None
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, DumpFormatError):  # the other reads say what is wrong with the file
        return None
    _warm()
    try:
        buf = np.frombuffer(mapped, np.uint8)
        out = _walk(buf, mapped)
        header = None if out is None else _header(buf, out)
        del buf
    finally:
        _close(mapped)
    if out is None or header is None:
        return None
    try:
        return _columns(out, header, str(folder))
    except (ValueError, OverflowError, RecursionError, msgspec.MsgspecError, DumpFormatError, LayoutMismatch):
        # texts that do not decode, a record the plain route rejects (nested too deep, a 400-digit statistic): the
        # other reads say where, or read it as they read it
        return None


_WARM = np.frombuffer(b'{"data": {"a.0.forward": {"output": [{"type": "t", "dtype": "f", "Max": 1}]}}}', np.uint8)


def _warm() -> None:
    """Compile (or load) the pass on a text of its own before it sees a mapped file: numba's compilation keeps its
    arguments in reference cycles, which would hold the mapping open."""
    if not _WARMED:
        _walk(_WARM, None)
        _WARMED.append(True)


_WARMED: list[bool] = []


def _close(mapped: mmap.mmap) -> None:
    """Unmap the file (its pages are dropped first: a view numba still held would keep only the mapping)."""
    if hasattr(mmap, "MADV_DONTNEED"):
        mapped.madvise(mmap.MADV_DONTNEED)
    try:
        mapped.close()
    except BufferError:
        gc.collect()
        with contextlib.suppress(BufferError):  # closed when the view is freed
            mapped.close()


def _header(buf: np.ndarray, out: _Outputs) -> dict[str, Any] | None:
    """The top-level members other than "data" (and ``"data": {}``, as the chunked read gives them); None when a key
    repeats (the whole-file read reports it)."""
    members = [buf[start:end].tobytes() for start, end in out.header[:out.state[_HEADER]].tolist()]
    try:
        parsed = [orjson.loads(b"{" + member + b"}") for member in members]
    except orjson.JSONDecodeError:
        return None
    header: dict[str, Any] = {}
    for member in parsed:
        header.update(member)
    if len(header) != len(parsed) or "data" in header:
        return None
    header["data"] = {}
    return header


def _columns(out: _Outputs, header: dict[str, Any], source: str) -> tuple[HierarchyBuilder, dict[str, Any],
                                                                           Mapping[str, int], bool] | None:
    state = out.state
    records = out.records[:state[_RECORDS]]
    ids = _ids(out.id_heap[:state[_ID_BYTES]], records)
    data = _record_rows(ids, out, records)
    if data is None:
        return None  # an id recorded twice: the chunked read says which
    grads = np.flatnonzero(records[:, 2] & 2)
    if grads.size and (parse_id_columns(out.id_heap, records[grads, 0], records[grads, 1],
                                        [ids[k] for k in grads.tolist()])[0] != int(NodeKind.PARAM_GRAD)).any():
        return None  # "parameters_grad" in the id of a call: read as the plain route reads it
    builder = HierarchyBuilder()
    n = int(state[_LEAVES])
    rows = out.rows[:n]
    names = _names(out)
    stats, present = out.stats[:n], out.present[:n]
    texts = _other_leaves(rows, names, stats, present)
    builder.add_tensors(TextCodes(rows[:, _NODE].copy(), ids), rows[:, _ROLE].astype(np.int8),
                        _slots(rows, names), **texts, stats=stats, present=present,
                        requires_grad=rows[:, _GRAD].astype(np.int8))
    odd = out.odd[:state[_ODD]]
    odd_records = _odd_records(out.odd_heap, odd)
    if odd_records:
        leaves = Leaves(ids)
        for row, record in zip(odd[:, 2].tolist(), odd_records.values()):
            collect_record(leaves, row, record, source)
        add_leaves(builder, leaves, source=f"{source}/{DUMP_FILE}")
    return builder, header, data, _md5(rows, odd, odd_records, ids, source)


_TEXT_COLUMNS = {"dtype": _DTYPE, "shape": _SHAPE, "md5": _MD5, "file": _FILE, "value": _VALUE}


def _other_leaves(rows: np.ndarray, names: list[str], stats: np.ndarray, present: np.ndarray) -> dict[str, TextCodes]:
    """The text columns, with the rows of the leaves that are no tensor made by `leaf_row` of their text (once per
    distinct text) and their statistics set."""
    other = np.flatnonzero(rows[:, _FLAGS] & _OTHER_LEAF)
    made: list[tuple] = []
    leaf_of = np.zeros(len(names) + 1, np.int64)  # each interned leaf text's row of `made`
    if other.size:
        distinct, which = _distinct(rows[other, _VALUE], len(names))
        made = [leaf_row(_plain(names[k].encode())) for k in distinct.tolist()]
        leaf_of[distinct] = np.arange(distinct.size)
        values = [row[len(_TEXT_COLUMNS):] for row in made]
        present[other] = np.array([[v is not None for v in row] for row in values], bool)[which]
        stats[other] = np.array([[0.0 if v is None else v for v in row] for row in values], np.float64)[which]
    columns = {}
    for k, (name, column) in enumerate(_TEXT_COLUMNS.items()):
        local, kept = _KERNELS.load().local_codes(rows, column, _FLAGS, _OTHER_LEAF, _VALUE, leaf_of, len(names))
        columns[name] = TextCodes(local, [_text_of(c, names, made, k) for c in kept.tolist()])
    return columns


def _text_of(code: int, names: list[str], made: list[tuple], column: int) -> str:
    """The text of a `_local_codes` code: "scalar", "", an interned text, or a made row's text."""
    if code < 2:
        return ("scalar", "")[code]
    if code - 2 < len(names):
        return names[code - 2]
    return made[code - 2 - len(names)][column]




def _distinct(codes: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_inverse=True)`` of codes in [0, count), without a sort."""
    used = np.zeros(count, bool)
    used[codes] = True
    distinct = np.flatnonzero(used)
    number = np.zeros(count, np.int64)
    number[distinct] = np.arange(distinct.size)
    return distinct, number[codes]


def _record_rows(ids: list[str], out: _Outputs, records: np.ndarray) -> Mapping[str, int] | None:
    """Each record's node id and its position in "data" (None when an id is recorded twice): looked up by the ids'
    bytes where the id kernels are built (`id_kernels.IdRows`: no dict of a million ids is made), else a dict."""
    index = IdIndex.of(*_id_bytes(ids, out, records)) if BYTE_ID_KERNELS.built() else None
    if index is None:
        data = dict(zip(ids, range(len(ids))))
        return data if len(data) == len(ids) else None
    return None if index.repeated else IdRows(ids, index)


def _id_bytes(ids: list[str], out: _Outputs, records: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ids' UTF-8 bytes and their spans: the walk's own when no id was escaped (its text is then the id's
    UTF-8), with the padding the index reads past the last; else the ids joined again."""
    if not len(records) or (records[:, 2] & 4).any():
        return joined_ids(ids)
    heap, used = out.id_heap, int(out.state[_ID_BYTES])
    if heap.size < used + PADDING:
        heap = np.concatenate([heap[:used], np.zeros(PADDING, np.uint8)])
    return heap, records[:, 0].copy(), records[:, 1].copy()


def _ids(heap: np.ndarray, records: np.ndarray) -> list[str]:
    """The records' node ids: the heap decoded and split in one go, escaped ones read as JSON."""
    if not len(records):
        return []
    ids = heap[:-1].tobytes().decode().split("\n")
    for k in np.flatnonzero(records[:, 2] & 4).tolist():
        ids[k] = orjson.loads(b'"' + ids[k].encode() + b'"')
    return ids


def _names(out: _Outputs) -> list[str]:
    """Each interned text as its column holds it (per tag: text, slot, shape, file name, value)."""
    count = int(out.state[_ENTRIES])
    if not count:
        return []
    text = out.heap[:out.state[_HEAP_BYTES] - 1].tobytes().decode()
    raw = text.split("\0")
    tags = out.entries[:count, 2]
    for k in np.flatnonzero(tags != _TEXT).tolist():
        raw[k] = _CONVERT[tags[k]](raw[k])
    if "\\" in text:  # an escape somewhere: the plain texts that hold one are unescaped (not a pass over every text)
        for k in np.flatnonzero(tags == _TEXT).tolist():
            raw[k] = _unescaped(raw[k])
    return raw


def _unescaped(name: str) -> str:
    return orjson.loads(f'"{name}"') if "\\" in name else name


_CONVERT = {
    _SLOT_KEY: lambda name: _unescaped(name) or "0",  # an empty keyword: slot "0", as the plain route names it
    _RAW_JSON: lambda name: intern(str(orjson.loads(name))),  # a shape: as `str` of the list shows it
    _FILE_NAME: lambda name: file_name(_unescaped(name)),
    _LEAF_JSON: lambda name: name,  # a leaf that is no tensor: `_other_leaves` makes its row
}


def _slots(rows: np.ndarray, names: list[str]) -> TextCodes:
    """The slot column: positions (0, 1, ...) and keyword names (interned, as -(code + 1)) as one text column."""
    local, kept, top = _KERNELS.load().local_slots(rows, _SLOT, len(names))
    return TextCodes(local, [str(c) if c < top else names[c - top] for c in kept.tolist()])




def _odd_records(heap: np.ndarray, odd: np.ndarray) -> dict[str, Any]:
    """The records set apart, as plain dicts (bare NaN/Infinity read)."""
    if not len(odd):
        return {}
    texts = [heap[start:end].tobytes() for start, end, _ in odd.tolist()]
    return _plain(b"{" + b",".join(texts) + b"}")


def _plain(text: bytes) -> dict[str, Any]:
    """A JSON object as plain values: integers of any size kept (msgspec, as the typed route reads them), bare
    NaN/Infinity read where JSON has none (`loads_object`)."""
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return loads_object(text)
    if not isinstance(value, dict):
        raise LayoutMismatch("not an object")
    return value


def _md5(rows: np.ndarray, odd: np.ndarray, odd_records: dict[str, Any], ids: list[str], source: str) -> bool:
    """Whether the first leaf with a dtype (in record order) has an md5 (`md5_flag`)."""
    typed = np.flatnonzero(rows[:, _FLAGS] & _HAS_DTYPE)
    first = (int(rows[typed[0], _NODE]), bool(rows[typed[0], _FLAGS] & _HAS_MD5)) if typed.size else None
    for row, (node_id, record) in zip(odd[:, 2].tolist(), odd_records.items()):
        if first is not None and row > first[0]:
            break
        flag = md5_flag({node_id: record}, source)
        if flag is not None:
            return flag
    return bool(first and first[1])
