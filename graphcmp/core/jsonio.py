"""Reading JSON as dumps write it (bare NaN/Infinity, files cut short) and writing strict JSON.

`orjson` reads the common case. msprobe writes bare ``NaN``/``Infinity`` tokens in overflow dumps,
which orjson rejects, so such files fall back to the standard library. A file cut short (a run
killed mid-dump) is salvaged entry by entry: every complete entry is kept and the loss reported.
`MemberChunks` reads the big object of a file written with ``json.dump(..., indent=1)`` a few
megabytes at a time, so that a caller can turn each chunk into columns and drop its dicts.
"""

from __future__ import annotations

import gc
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.inputs import open_regular

__all__ = [
    "JsonLoad",
    "LayoutMismatch",
    "MemberChunks",
    "dumps_strict",
    "gc_paused",
    "load_json",
    "loads_object",
    "read_json",
    "sanitize_floats",
]

_DECODER = json.JSONDecoder()
_DEPTH = 1024  # orjson's nesting limit; beyond it the standard library's recursion gives out
_WS = " \t\r\n"


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of acyclic objects.

    Parsing a large dump allocates a dict per tensor; the collector would rescan them again and
    again (about half of the parse time) although none of them forms a cycle.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(frozen=True, slots=True)
class JsonLoad:
    """A loaded JSON document and, if the file was cut short, what was lost."""

    value: Any
    truncated: str = ""  # one line describing the salvage, "" when the file was whole


def read_json(path: str | os.PathLike[str], *, salvage: bool = True) -> JsonLoad:
    """Read a JSON file, tolerating bare NaN/Infinity and (with `salvage`) a truncated end.

    Raises
    ------
    DumpFormatError
        If the file is missing, unreadable, or not JSON (and nothing can be salvaged).
    """
    path = Path(path)
    try:
        with open_regular(path) as f:  # never a FIFO or a device: a read that could block or never end
            data = f.read()
    except OSError as err:
        raise DumpFormatError(f"{path}: cannot read ({err.strerror})") from err
    return load_json(data, str(path), salvage=salvage)


def load_json(data: bytes, source: str, *, salvage: bool = True) -> JsonLoad:
    """Parse JSON bytes; `source` names the file in error messages.

    Raises
    ------
    DumpFormatError
        If the bytes are empty, not JSON (and nothing can be salvaged), nested deeper than the parsers
        follow (orjson stops at 1024 levels), or hold a number too long to read.
    """
    if not data.strip():
        raise DumpFormatError(f"{source}: file is empty")
    try:
        with gc_paused():
            return JsonLoad(orjson.loads(data))
    except orjson.JSONDecodeError:
        pass
    text = data.decode("utf-8", errors="replace")
    try:
        return JsonLoad(json.loads(text))
    except json.JSONDecodeError as err:
        if not salvage:
            raise DumpFormatError(f"{source}: not valid JSON ({err.msg} at line {err.lineno})") from err
        try:
            return _salvage(text, source, err)
        except RecursionError as deep:
            raise DumpFormatError(f"{source}: not valid JSON ({err.msg} at line {err.lineno}), "
                                  "and nested too deeply to salvage") from deep
    except RecursionError as err:
        raise DumpFormatError(f"{source}: nested too deeply to read (more than {_DEPTH} levels)") from err
    except ValueError as err:  # a number longer than Python's int_max_str_digits
        raise DumpFormatError(f"{source}: not readable JSON ({err})") from err


def _salvage(text: str, source: str, err: json.JSONDecodeError) -> JsonLoad:
    pos = _skip_ws(text, 0)
    if pos >= len(text) or text[pos] != "{":
        raise DumpFormatError(f"{source}: not valid JSON ({err.msg} at line {err.lineno})") from err
    value, complete, kept = _partial_object(text, pos)
    if complete:  # the damage is somewhere we did not look into: report the original error
        raise DumpFormatError(f"{source}: not valid JSON ({err.msg} at line {err.lineno})") from err
    line = text.count("\n", 0, err.pos) + 1
    return JsonLoad(value, f"{source}: file ends early at line {line}; kept {kept} complete entries")


def _partial_object(text: str, pos: int) -> tuple[dict[str, Any], bool, int]:
    """Parse the object at `pos` entry by entry; descend into the last, incomplete object value.

    Returns the entries read, whether the object was complete, and how many entries were kept.
    """
    out: dict[str, Any] = {}
    kept = 0
    pos = _skip_ws(text, pos + 1)
    while pos < len(text) and text[pos] != "}":
        key, pos = _decode_at(text, pos)
        pos = _skip_ws(text, pos) if key is not None else pos
        if key is None or pos >= len(text) or text[pos] != ":":
            return out, False, kept
        start = _skip_ws(text, pos + 1)
        value, pos = _decode_at(text, start)
        if value is None and start < len(text) and text[start] == "{":
            out[key], _, inner_kept = _partial_object(text, start)
            return out, False, kept + inner_kept
        if value is None and pos == start:
            return out, False, kept
        out[key] = value
        kept += 1
        pos = _skip_ws(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
    return out, pos < len(text), kept


def _decode_at(text: str, pos: int) -> tuple[Any, int]:
    """Decode one JSON value at `pos`; (None, pos) when it is cut short or malformed."""
    try:
        return _DECODER.raw_decode(text, pos)
    except (json.JSONDecodeError, IndexError):
        return None, pos


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


class LayoutMismatch(Exception):
    """The file is not laid out as `MemberChunks` expects (or is cut short): read it whole instead."""


_MEMBER = b'\n  "'  # a member of a depth-1 object starts a line with exactly two spaces (indent=1)
_CLOSE = b"\n }"  # the depth-1 object closes on a line with exactly one space
_HEAD_BYTES = 1 << 16  # the members before the chunked one must start within this many bytes


class MemberChunks:
    """The members of the object under top-level `key` of an ``indent=1`` JSON file, in chunks.

    Python's ``json.dump(doc, f, indent=1)`` starts every member of ``doc[key]`` on a line indented
    by exactly two spaces, and closes ``doc[key]`` on a line indented by one: no other line looks
    like that, since JSON strings hold no raw newline. Iterating finds those lines with
    `bytes.find` (no per-byte Python loop) and yields one dict per run of whole members, about
    `chunk_bytes` of text each, in file order. A chunk orjson rejects (bare ``NaN``/``Infinity``)
    is parsed by the standard library, as `load_json` does for a whole file. Once iteration is
    over, `rest` holds the other top-level members, with ``rest[key] == {}``.

    Iteration raises `LayoutMismatch` when the layout differs (compact JSON, another indent, no
    such key) or the file is cut short or malformed: the caller then reads the file whole, which
    salvages or reports the damage. A member key repeated in two chunks appears in both (a whole
    parse keeps the last value at the first position): callers that care check for it.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> doc = {"task": "statistics", "data": {f"n{i}": {"v": [i, i + 1]} for i in range(5)}}
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "dump.json"
    >>> _ = path.write_text(json.dumps(doc, indent=1))
    >>> chunks = MemberChunks(path, "data", chunk_bytes=40)
    >>> [list(c) for c in chunks]
    [['n0'], ['n1'], ['n2', 'n3'], ['n4']]
    >>> chunks.rest
    {'task': 'statistics', 'data': {}}
    """

    def __init__(self, path: str | os.PathLike[str], key: str, *, chunk_bytes: int = 8 << 20) -> None:
        self.path = Path(path)
        self.key = key
        self.chunk_bytes = max(int(chunk_bytes), 64)
        self.rest: dict[str, Any] | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(loads_object, self.texts())

    def texts(self) -> Iterator[bytes]:
        """The chunks as JSON object text (``{"k": v, ...}``), for a caller with a decoder of its own.

        `loads_object` turns one into a dict as iteration does; `rest` is set once all are read.
        """
        opener = b'\n "' + orjson.dumps(self.key)[1:-1] + b'": {\n'
        with self.path.open("rb") as f:
            head = f.read(_HEAD_BYTES)
            at = head.find(opener)
            if at < 0 or not head[:at].lstrip().startswith(b"{"):
                raise LayoutMismatch(f"{self.path}: no {opener!r} in the first {len(head)} bytes")
            head = head[: at + len(opener) - 1]  # ends with the key's "{"
            end = _last_close(f, len(head))
            f.seek(len(head))
            buf = f.read(min(self.chunk_bytes, end - len(head)))  # starts with the first member's line
            read = len(head) + len(buf)
            while read < end:
                block = f.read(min(self.chunk_bytes, end - read))
                if not block:
                    raise LayoutMismatch(f"{self.path}: ends before {self.key!r} closes")
                read += len(block)
                if (cut := buf.rfind(_MEMBER)) > 0:
                    yield _object_text(buf[:cut], last=False)
                    buf = buf[cut:]
                buf += block
            buf += f.read(len(_CLOSE))
            if (close := buf.find(_CLOSE, len(buf) - len(_CLOSE))) < 0:
                raise LayoutMismatch(f"{self.path}: ends before {self.key!r} closes")
            if buf[:close].strip():
                yield _object_text(buf[:close], last=True)
            tail = buf[close + len(_CLOSE):] + f.read()
        rest = _loads_or_mismatch(head + b"}" + tail)
        if not isinstance(rest, dict) or rest.get(self.key) != {}:
            raise LayoutMismatch(f"{self.path}: {self.key!r} is not the one object the layout shows")
        self.rest = rest


def _last_close(f: Any, start: int) -> int:
    """Offset of the last depth-1 close (``\n }``) after `start`: where the chunked object ends when
    it is the file's last object member (msprobe's "data" is). Found from the end, since searching
    forward is slow where every line starts with a newline and a space. If another object member
    follows, the chunks do not parse and the caller reads the file whole."""
    end = f.seek(0, os.SEEK_END)
    while True:  # one window at a time, backwards; windows overlap by a close's length but one byte
        begin = max(start, end - _HEAD_BYTES)
        f.seek(begin)
        at = f.read(end - begin).rfind(_CLOSE)
        if at >= 0:
            return begin + at
        if begin == start:
            raise LayoutMismatch("the object never closes")
        end = begin + len(_CLOSE) - 1


def _object_text(text: bytes, *, last: bool) -> bytes:
    """A run of whole members (``"k": v,`` lines; the last run has no trailing comma) as an object."""
    if not last:
        if not text.endswith(b","):
            raise LayoutMismatch("a member line does not follow a comma")
        text = text[:-1]
    return b"{" + text + b"}"


def loads_object(text: bytes) -> dict[str, Any]:
    """Parse one chunk of `MemberChunks.texts` (bare NaN/Infinity allowed); `LayoutMismatch` if it is not an object."""
    value = _loads_or_mismatch(text)
    if not isinstance(value, dict):
        raise LayoutMismatch("a chunk is not an object")
    return value


def _loads_or_mismatch(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as err:
        raise LayoutMismatch(f"a chunk is not valid JSON ({err.msg})") from err


def sanitize_floats(value: Any) -> Any:
    """Replace non-finite floats (anywhere in nested lists/dicts) by "nan", "inf" or "-inf" strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else _float_text(value)
    if isinstance(value, dict):
        return {k: sanitize_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sanitize_floats(v) for v in value]
    return value


def _float_text(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


def dumps_strict(value: Any, *, indent: bool = False) -> bytes:
    """Serialise to JSON that standard parsers accept (non-finite floats must be made text first).

    orjson turns NaN/inf into ``null``; callers that need to keep them pass values through
    `sanitize_floats` or encode them as text themselves.
    """
    option = orjson.OPT_SERIALIZE_NUMPY | (orjson.OPT_INDENT_2 if indent else 0)
    return orjson.dumps(value, option=option)
