"""graphcmp's binary result container: a document's columns as ``.npy`` members of one uncompressed zip.

A report (or graph) document is a tree of small values and large columns (docs/format.md). The
container keeps the tree in one JSON member, ``document.json``, where every column is replaced by a
reference, and each column in ``.npy`` members (numpy's own format) stored uncompressed and aligned
to 64 bytes, so reading maps the file once and every column is a view of it: nothing is parsed or
copied but the string columns. It is a plain zip that ``numpy.load`` opens (``np.load("cmp.npz")``).

References in ``document.json``:

* ``{"$npy": NAME}``: the array in member ``NAME.npy``.
* ``{"$str": NAME, "n": N}``: N strings, UTF-8, ``NAME.utf8.npy`` (uint8: the strings joined by a NUL
  byte) and ``NAME.ends.npy`` (int64: each string's end offset in that text; the truth when a
  string holds a NUL itself).
* ``{"$cat": NAME, "n": N, "k": K}``: N strings drawn from K values: ``NAME.codes.npy`` (the smallest of
  int8, int16, int32 that holds K - 1, `code_dtype`) indexes the strings ``{"$str": NAME + ".values"}``.

`write_npz` writes such a file from a document whose columns are numpy arrays or tuples of
strings, `read_npz` gives the document back with arrays (read-only views), lists of strings and, for a column
of categories, a `CodedTexts` (a tuple of the strings that keeps their codes),
the shapes `graphcmp.core.fields.Fields` reads, so a damaged member is a `DumpFormatError` naming it.
"""

from __future__ import annotations

import io
import mmap
import os
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.export.columns import decode_floats
from graphcmp.core.inputs import open_regular
from graphcmp.core.outputs import atomic_path
from graphcmp.core.texts import CodedTexts, TextCodes, UniqueTexts, code_dtype

__all__ = ["DOCUMENT_MEMBER", "MIN_COLUMN", "begin_npz", "is_npz", "read_npz", "write_npz"]

DOCUMENT_MEMBER = "document.json"
MIN_COLUMN = 64
"""Lists of strings at least this long are stored as columns; shorter ones stay in the JSON."""
_ALIGN = 64
_MAGIC = b"PK\x03\x04"
_PAD_ID = 0xD935  # a zip extra field that only pads (the id zipalign uses)
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_CENTRAL_HEADER = struct.Struct("<4sHHHHHHIIIHHHHHII")
_DOS_DATE = 0x21  # 1980-01-01, the date of every member (time 00:00): a result's bytes do not depend on the clock
ZIP64_LIMIT = (1 << 31) - 1
"""Sizes and offsets above this take zip64 records (`zipfile`'s limit: readers that read 32-bit fields as signed)."""
_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Types `_split` leaves as they are (JSON values holding no column)."""


def is_npz(path: str | os.PathLike[str]) -> bool:
    """True when `path` is a regular file that starts like a zip file (graphcmp's binary container).

    Never blocks: a FIFO or a device is not one (its reader names what it is).
    """
    try:
        with open_regular(path) as f:
            return f.read(4) == _MAGIC
    except (OSError, DumpFormatError):
        return False


@dataclass(frozen=True, slots=True)
class _Entry:
    """A member written: what the central directory says of it."""

    name: bytes
    offset: int  # of its local header
    size: int
    crc: int
    utf8: bool  # its name is not plain ASCII


class _StoredZip:
    """A zip file of stored members written one after the other, each in one pass: its size and checksum are known
    before it is written (`zipfile`, which streams a member, goes back to rewrite its header: 60 us a member, a
    result has 120-240 of them), then the central directory (`close`). Sizes and offsets past `ZIP64_LIMIT` take
    zip64 records, as `zipfile` writes them. `entries` are the members already in `raw` (`begin_npz`'s), which
    the next member follows."""

    def __init__(self, raw: BinaryIO, entries: Sequence[_Entry] = ()) -> None:
        self.raw = raw
        self.entries = list(entries)

    def add(self, name: str, parts: Sequence[bytes | memoryview], align: int = 1) -> None:
        """A member of the bytes of `parts`, its data starting at a multiple of `align` in the file."""
        crc, size = 0, 0
        for part in parts:
            crc, size = zlib.crc32(part, crc), size + len(part)
        encoded, offset = name.encode(), self.raw.tell()
        zip64 = size > ZIP64_LIMIT
        fixed = _LOCAL_HEADER.size + len(encoded) + (20 if zip64 else 0)
        pad = -(offset + fixed + 4) % align
        extra = (struct.pack("<HHQQ", 1, 16, size, size) if zip64 else b"") + struct.pack("<HH", _PAD_ID, pad)
        entry = _Entry(encoded, offset, size, crc, not name.isascii())
        stored = 0xFFFFFFFF if zip64 else size
        self.raw.write(_LOCAL_HEADER.pack(_MAGIC, 45 if zip64 else 20, _flags(entry), 0, 0, _DOS_DATE, crc, stored,
                                          stored, len(encoded), len(extra) + pad) + encoded + extra + bytes(pad))
        for part in parts:
            self.raw.write(part)
        self.entries.append(entry)

    def close(self) -> None:
        """Write the central directory and the end records."""
        start = self.raw.tell()
        for entry in self.entries:
            big = [v for v in (entry.size, entry.size) if v > ZIP64_LIMIT] + (
                [entry.offset] if entry.offset > ZIP64_LIMIT else [])
            extra = struct.pack(f"<HH{len(big)}Q", 1, 8 * len(big), *big) if big else b""
            size, offset = (0xFFFFFFFF if v > ZIP64_LIMIT else v for v in (entry.size, entry.offset))  # in `extra`
            version = 45 if big else 20
            self.raw.write(_CENTRAL_HEADER.pack(b"PK\x01\x02", 0x300 | version, version, _flags(entry), 0, 0,
                                                _DOS_DATE, entry.crc, size, size, len(entry.name), len(extra), 0,
                                                0, 0, 0o600 << 16, offset) + entry.name + extra)
        end = self.raw.tell()
        count, size = len(self.entries), end - start
        if count >= 0xFFFF or start > ZIP64_LIMIT or size > ZIP64_LIMIT:
            self.raw.write(struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, size, start))
            self.raw.write(struct.pack("<4sIQI", b"PK\x06\x07", 0, end, 1))
            count, size, start = min(count, 0xFFFF), min(size, 0xFFFFFFFF), min(start, 0xFFFFFFFF)
        self.raw.write(struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, size, start, 0))


def _flags(entry: _Entry) -> int:
    return 0x800 if entry.utf8 else 0  # bit 11: the name is UTF-8


def _entries(raw: BinaryIO) -> tuple[list[_Entry], int]:
    """The members of the zip in `raw` (one `begin_npz` wrote) and where its central directory starts."""
    with zipfile.ZipFile(raw) as zf:
        infos = zf.infolist()
        start = zf.start_dir
    return [_Entry(info.orig_filename.encode(), info.header_offset, info.file_size, info.CRC,
                   bool(info.flag_bits & 0x800)) for info in infos], start


class _Writer:
    """Members of one container, written as they come (each column once, never the whole file in memory)."""

    def __init__(self, zf: _StoredZip) -> None:
        self.zf = zf

    def array(self, name: str, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values)
        if values.dtype.hasobject:
            raise TypeError(f"{name}: object arrays are not stored")
        header = _npy_header(values.dtype, values.shape)  # C order: made contiguous above
        self.zf.add(f"{name}.npy", (header, memoryview(values.reshape(-1)).cast("B")), _ALIGN)

    def strings(self, name: str, values: tuple[str, ...] | list[str]) -> dict[str, Any]:
        blob = np.frombuffer("\0".join(values).encode(), np.uint8)
        ends = np.flatnonzero(blob == 0)  # the separators, when no string holds a NUL itself
        if len(ends) == len(values) - 1:
            ends = np.append(ends, len(blob))
        else:
            lengths = np.fromiter((len(v.encode()) for v in values), np.int64, len(values))
            ends = np.cumsum(lengths + 1) - 1
        self.array(f"{name}.utf8", blob)
        self.array(f"{name}.ends", ends)
        return {"$str": name, "n": len(values)}

    def categories(self, name: str, values: tuple[str, ...] | list[str], table: dict[str, int]) -> dict[str, Any]:
        """`values` as codes into `table` (each distinct value and its code, in order of first appearance)."""
        dtype = code_dtype(len(table) - 1)
        if len(table) == 1:
            codes = np.zeros(len(values), dtype)
        else:
            codes = np.fromiter(map(table.__getitem__, values), dtype, len(values))
        return self.coded(name, codes, list(table))

    def coded(self, name: str, codes: np.ndarray, distinct: list[str]) -> dict[str, Any]:
        self.array(f"{name}.codes", codes.astype(code_dtype(len(distinct) - 1), copy=False))
        self.strings(f"{name}.values", distinct)
        return {"$cat": name, "n": len(codes), "k": len(distinct)}

    def text(self, name: str, values: tuple[str, ...] | list[str]) -> dict[str, Any] | None:
        """`values` as a column of categories when they repeat, else of strings; None when one is not a str."""
        table = _distinct(values)
        if not table or set(map(type, table)) != {str}:
            return None
        if len(table) * 2 <= len(values):
            for code, value in enumerate(table):  # same keys: only the values change while iterating
                table[value] = code
            return self.categories(name, values, table)
        return self.strings(name, values)  # mostly distinct (node ids): no codes, which would be numbered in vain


def _distinct(values: tuple[Any, ...] | list[Any]) -> dict[Any, int]:
    """Each distinct value, in order of first appearance, as the keys of a table (its values are 0 until
    numbered); {} when one is unhashable.

    A column of one value (the md5 or file column of a statistics dump) is recognised without a table.
    """
    first = values[0]
    try:
        if type(values[-1]) is str and values[-1] == first and values.count(first) == len(values):
            return {first: 0}
        return dict.fromkeys(values, 0)
    except (TypeError, ValueError):  # something unhashable, or an array that compares element-wise
        return {}


@lru_cache(maxsize=256)
def _npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """The ``.npy`` header of a C-ordered array (numpy pads it so the data starts 64-byte aligned); made once per
    dtype and shape, which the columns of a result share."""
    buf = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue()


def write_npz(path: str | os.PathLike[str], document: dict[str, Any], *,
              begun: tuple[Path, dict[str, Any]] | None = None) -> None:
    """Write `document` (arrays, tuples of strings, JSON values) as a container at `path`.

    Arrays become ``.npy`` members, tuples or lists of at least `MIN_COLUMN` strings string columns
    (categories when they repeat; `UniqueTexts` never), the rest stays in ``document.json``. `begun` is a
    container `begin_npz` wrote and the references it returned: the members it holds are not written again (its
    top-level keys of `document` are taken from it), the rest is added to it, and it becomes `path`.
    """
    with atomic_path(path) as tmp:
        if begun is not None:
            os.replace(begun[0], tmp)
        with tmp.open("r+b" if begun else "wb") as raw:
            entries: list[_Entry] = []
            if begun is not None:
                entries, start = _entries(raw)
                raw.seek(start)
                raw.truncate()
            zf = _StoredZip(raw, entries)
            writer, done = _Writer(zf), begun[1] if begun else {}
            tree = {k: done[k] if k in done else _split(v, str(k), writer) for k, v in document.items()}
            zf.add(DOCUMENT_MEMBER, (orjson.dumps(tree, option=orjson.OPT_SERIALIZE_NUMPY),))
            zf.close()


def begin_npz(path: Path, part: dict[str, Any]) -> dict[str, Any]:
    """Write the columns of `part` (some top-level members of a document) as a new container at `path`, for
    `write_npz` to finish (``begun=(path, references)``); return their references.

    Another process can write them while this one computes the rest of the document.
    """
    with path.open("wb") as raw:
        zf = _StoredZip(raw)
        references = {k: _split(v, str(k), _Writer(zf)) for k, v in part.items()}
        zf.close()
    return references


def _split(value: Any, name: str, writer: _Writer) -> Any:
    """`value` with its columns written as members and replaced by references."""
    if isinstance(value, np.ndarray):
        writer.array(name, value)
        return {"$npy": name}
    if isinstance(value, UniqueTexts):
        return writer.strings(name, value.values) if len(value.values) >= MIN_COLUMN else list(value.values)
    if isinstance(value, CodedTexts):
        value = TextCodes(value.codes, value.names)
    if isinstance(value, TextCodes):  # categories as the texts would give them, else the texts themselves
        n, k = len(value.codes), len(value.values)
        if n >= MIN_COLUMN and k * 2 <= n and set(map(type, value.values)) == {str}:
            return writer.coded(name, value.codes, list(value.values))
        return _split(value.texts(), name, writer)
    if isinstance(value, dict):
        if value.keys() == {"values", "special"} and isinstance(value["values"], np.ndarray):
            value = {"values": decode_floats(value), "special": {}}  # a float column: npy holds inf and NaN
        return {k: _split(v, f"{name}.{k}" if name else str(k), writer) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        if len(value) >= MIN_COLUMN and type(value[0]) is str:
            column = writer.text(name, value)
            if column is not None:
                return column
        if all(type(v) in _SCALARS for v in value):  # a short list of plain values (a stack's frames): as it is
            return list(value)
        return [_split(v, f"{name}.{k}", writer) for k, v in enumerate(value)]
    return value


def read_npz(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The document of a container written by `write_npz`: arrays (read-only views of the file), lists of strings.

    Raises
    ------
    DumpFormatError
        If the file is missing, not a zip, lacks ``document.json`` or a member it names, or a member
        is not a readable ``.npy`` column.
    """
    path = Path(path)
    try:
        with open_regular(path) as f:  # never a FIFO or a device
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as err:
        raise DumpFormatError(f"{path}: cannot read ({getattr(err, 'strerror', None) or err})") from err
    reader = _Reader(path, mapped)
    tree = reader.document()
    return _join(tree, reader, "")


class _Reader:
    def __init__(self, path: Path, mapped: mmap.mmap) -> None:
        self.path = path
        self.mapped = mapped
        try:
            with zipfile.ZipFile(_MappedFile(mapped)) as zf:
                self.members = {info.filename: info for info in zf.infolist()}
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
            raise DumpFormatError(f"{path}: not a graphcmp result (not a readable zip: {err})") from err

    def error(self, field: str, what: str) -> DumpFormatError:
        return DumpFormatError(f"{self.path}: field {field} {what}; is the file damaged? rerun graphcmp to rewrite it")

    def _data(self, member: str, field: str) -> tuple[int, int]:
        """(offset, size) of a stored member's bytes."""
        info = self.members.get(member)
        if info is None:
            raise self.error(field, f"is missing (no member {member})")
        if info.compress_type != zipfile.ZIP_STORED:
            raise self.error(field, f"is compressed (member {member}); graphcmp writes columns uncompressed")
        at = info.header_offset
        header = self.mapped[at: at + _LOCAL_HEADER.size]
        if len(header) != _LOCAL_HEADER.size or header[:4] != _MAGIC:
            raise self.error(field, f"has a damaged zip header (member {member})")
        fields = _LOCAL_HEADER.unpack(header)
        start = at + _LOCAL_HEADER.size + fields[9] + fields[10]
        if start + info.file_size > len(self.mapped):
            raise self.error(field, f"is cut short (member {member})")
        return start, info.file_size

    def document(self) -> Any:
        start, size = self._data(DOCUMENT_MEMBER, "document.json")
        try:
            return orjson.loads(self.mapped[start: start + size])
        except orjson.JSONDecodeError as err:
            raise self.error("document.json", f"is not valid JSON ({err})") from err

    def array(self, name: str, field: str) -> np.ndarray:
        start, size = self._data(f"{name}.npy", field)
        view = memoryview(self.mapped)[start: start + size]
        try:
            version = np.lib.format.read_magic(_BytesReader(view))
            reader = _BytesReader(view, 8)
            shape, fortran, dtype = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                     else np.lib.format.read_array_header_2_0)(reader)
        except (ValueError, SyntaxError) as err:
            raise self.error(field, f"is not a numpy column ({err})") from err
        count = int(np.prod(shape, dtype=np.int64))
        if fortran or dtype.hasobject or reader.pos + count * dtype.itemsize != size:
            raise self.error(field, f"is not a column of {count} {dtype} values")
        values = np.frombuffer(self.mapped, dtype, count, start + reader.pos).reshape(shape)
        return values

    def strings(self, ref: dict[str, Any], field: str) -> list[str]:
        name, n = ref.get("$str"), ref.get("n")
        if not isinstance(name, str) or type(n) is not int:
            raise self.error(field, "is a damaged string column reference")
        blob = self.array(f"{name}.utf8", field)
        ends = self.array(f"{name}.ends", field)
        if blob.ndim != 1 or blob.dtype != np.uint8 or ends.shape != (n,) or ends.dtype != np.int64:
            raise self.error(field, f"is not a column of {n} strings")
        try:
            text = blob.tobytes().decode()
        except UnicodeDecodeError as err:
            raise self.error(field, f"is not UTF-8 text ({err})") from err
        values = text.split("\0") if n else []
        if len(values) != n or (n and int(ends[-1]) != len(blob)):
            values = self._sliced(blob, ends, field)
        return values

    def _sliced(self, blob: np.ndarray, ends: np.ndarray, field: str) -> list[str]:
        """Strings by their end offsets (slow path: a string holds a NUL)."""
        data = blob.tobytes()
        starts = np.concatenate([[0], ends[:-1] + 1]) if len(ends) else ends
        if len(ends) and (np.any(starts > ends) or int(ends[-1]) != len(data)):
            raise self.error(field, "has string offsets outside its text")
        return [data[a:b].decode() for a, b in zip(starts.tolist(), ends.tolist())]

    def categories(self, ref: dict[str, Any], field: str) -> list[str]:
        name, n, k = ref.get("$cat"), ref.get("n"), ref.get("k")
        if not isinstance(name, str) or type(n) is not int or type(k) is not int:
            raise self.error(field, "is a damaged string column reference")
        codes = self.array(f"{name}.codes", field)
        values = self.strings({"$str": f"{name}.values", "n": k}, field)
        if codes.shape != (n,) or codes.dtype.kind not in "iu":
            raise self.error(field, f"is not a column of {n} codes")
        if n and (int(codes.min()) < 0 or int(codes.max()) >= len(values)):
            raise self.error(field, "has codes outside its values")
        return CodedTexts.of(codes, values) if n else []


def _join(value: Any, reader: _Reader, field: str) -> Any:
    if isinstance(value, dict):
        if "$npy" in value:
            return reader.array(str(value["$npy"]), field)
        if "$str" in value:
            return reader.strings(value, field)
        if "$cat" in value:
            return reader.categories(value, field)
        return {k: _join(v, reader, f"{field}.{k}" if field else k) for k, v in value.items()}
    if isinstance(value, list):
        return [_join(v, reader, field) for v in value]
    return value


class _MappedFile:
    """A read-only file object over a mmap, for `zipfile` (which seeks and reads the directory)."""

    def __init__(self, mapped: mmap.mmap) -> None:
        self.mapped, self.pos = mapped, 0

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: 0, 1: self.pos, 2: len(self.mapped)}[whence] + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = len(self.mapped) if n is None or n < 0 else min(self.pos + n, len(self.mapped))
        data = self.mapped[self.pos: end]
        self.pos = end
        return data

    def seekable(self) -> bool:
        return True


class _BytesReader:
    """`read` over a memoryview, for numpy's npy header readers."""

    def __init__(self, view: memoryview, pos: int = 0) -> None:
        self.view, self.pos = view, pos

    def read(self, n: int) -> bytes:
        data = self.view[self.pos: self.pos + n].tobytes()
        self.pos += len(data)
        return data
