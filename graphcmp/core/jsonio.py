"""Reading JSON as dumps write it (bare NaN/Infinity, files cut short) and writing strict JSON.

`orjson` reads the common case. msprobe writes bare ``NaN``/``Infinity`` tokens in overflow dumps,
which orjson rejects, so such files fall back to the standard library. A file cut short (a run
killed mid-dump) is salvaged entry by entry: every complete entry is kept and the loss reported.
`MemberChunks` reads the big object of a file written with ``json.dump(..., indent=1)`` a chunk of
whole members at a time (the caller sets its size), so that a caller can turn each chunk into columns and
drop its dicts.
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson

from graphcmp.core.errors import DumpFormatError, one_line
from graphcmp.core.inputs import open_regular

__all__ = [
    "JsonLoad",
    "LayoutMismatch",
    "MemberChunks",
    "check_json_opening",
    "dumps_strict",
    "gc_paused",
    "load_json",
    "loads_object",
    "read_json",
    "repeated_keys",
    "sanitize_floats",
    "text_fault",
    "top_level_repeats",
]

_DECODER = json.JSONDecoder()
_DEPTH = 1024  # orjson's nesting limit; beyond it the standard library's recursion gives out
_WS = " \t\r\n"


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of acyclic objects.

    Parsing a large dump allocates a dict per tensor; the collector would rescan them again and
    again (about half of the parse time) although none of them forms a cycle. What is alive at the
    end goes to the oldest generation (`gc.freeze` then `gc.unfreeze`), as it would after surviving
    collections: the first young collection after the pause would otherwise walk every item of a
    run's columns (a 200k-node run: 60 ms), and a later full collection still finds any cycle.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


@dataclass(frozen=True, slots=True)
class JsonLoad:
    """A loaded JSON document and, if the file was cut short, what was lost."""

    value: Any
    truncated: str = ""  # one line describing the salvage, "" when the file was whole


def read_json(path: str | os.PathLike[str], *, salvage: bool = True, flat_keys: bool = False,
              unique_keys: bool = False, data: bytes | None = None) -> JsonLoad:
    """Read a JSON file, tolerating bare NaN/Infinity and (with `salvage`) a truncated end.

    `flat_keys`: the file is one object of ``key: string or null`` members (construct.json), whose keys must
    be unique: a parser keeps the last of two silently. `unique_keys`: the top-level object's keys must be
    unique (dump.json, stack.json). `data`: the file's bytes, when the caller has read them.

    Raises
    ------
    DumpFormatError
        If the file is missing, unreadable, or not JSON (and nothing can be salvaged), or (`flat_keys`)
        names a key twice.
    """
    path = Path(path)
    if data is None:
        try:
            with open_regular(path) as f:  # never a FIFO or a device: a read that could block or never end
                check_json_opening(f.read(_SNIFF_BYTES), path)  # not JSON: said before the whole file is read
                f.seek(0)
                data = f.read()
        except OSError as err:
            raise DumpFormatError(f"{path}: cannot read ({err.strerror})") from err
    loaded = load_json(data, str(path), salvage=salvage)
    # every key of such an object ends with '":' (its values cannot hold one): more of them than keys read
    # means a key came twice, or an odd key text; the exact look tells
    if flat_keys and isinstance(loaded.value, dict) and data.count(b'":') > len(loaded.value) and (
            twice := repeated_keys(data)):
        raise DumpFormatError(f"{path}: {twice[0]!r} is a key {'twice' if len(twice) == 1 else 'more than once'}"
                              f"{f' (and {len(twice) - 1} other key(s) too)' if len(twice) > 1 else ''}; "
                              "each node may be listed once (a JSON parser would keep the last silently)")
    if unique_keys and (twice := top_level_repeats(data, loaded.value)):
        raise DumpFormatError(f"{path}: {twice[0]!r} is a key twice at the top level; a JSON parser would keep "
                              "the last silently, so which one holds the run is unknown")
    return loaded


_SNIFF_BYTES = 1 << 16
_OPENERS = b"{[\"-0123456789tfn"


def check_json_opening(head: bytes, path: str | os.PathLike[str]) -> None:
    """Refuse a file whose first bytes cannot open JSON (after whitespace and a UTF-8 byte order mark), from a
    bounded prefix: a gigabyte of zeros is refused without being read."""
    rest = head.removeprefix(b"\xef\xbb\xbf").lstrip(_WS.encode())
    if rest and rest[:1] not in [bytes([c]) for c in _OPENERS]:
        raise DumpFormatError(f"{path}: not JSON (it starts with bytes {rest[:8].hex(' ')})")
    if not rest and len(head) == _SNIFF_BYTES:
        raise DumpFormatError(f"{path}: not JSON (its first {_SNIFF_BYTES} bytes are all whitespace)")


_REPEAT_SCAN_BYTES = 64 << 20
"""Largest file `top_level_repeats` parses a second time (with a hook on every object) when its layout does not
show its top-level keys: msprobe writes indent=1, where they are counted for free, and compact JSON is checked by
length; a file of another layout larger than this is not checked (a second parse would double the read's peak)."""


def top_level_repeats(data: bytes, value: Any) -> list[str]:
    r"""Keys the top-level object of JSON `data` (parsed as `value`) holds more than once: a parser keeps the last
    of two silently. Cheap when there are none: the keys of `value` are looked up in the text at the object's
    own indent (msprobe's ``indent=1``: one space), else the text is parsed again with a hook on every object
    (small files only: the caller's dump.json header and flat files).

    >>> top_level_repeats(b'{\n "data": {"a": 1},\n "data": {}\n}', {"data": {}})
    ['data']
    >>> top_level_repeats(b'{\n "task": "x",\n "data": {"task": 1}\n}', {"task": "x", "data": {"task": 1}})
    []
    """
    if not isinstance(value, dict):
        return []
    if data[:3] == b'{\n "' and data.count(b'\n "') == len(value):  # indent=1: one line opens each top-level key
        return []
    if _members_fill(data, len(value)) or len(data) > _REPEAT_SCAN_BYTES:
        return []  # compact JSON the members fill exactly; or too large to parse twice within memory bounds
    return repeated_keys(data)


def repeated_keys(data: bytes) -> list[str]:
    """Keys the top-level object of JSON `data` holds more than once, in order (slow: the standard library
    with a hook on every object; for the rare text that a cheap count flags).

    >>> repeated_keys(b'{"a": {"x": 1, "x": 2}, "b": 1, "a": 2}')
    ['a']
    """
    seen: list[list[str]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        seen.append(keys)
        return dict(items)

    try:
        json.loads(data.decode("utf-8", errors="replace"), object_pairs_hook=pairs)
    except (json.JSONDecodeError, RecursionError):
        return []
    keys = seen[-1] if seen else []  # the top level's hook runs last
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return [k for k, n in counts.items() if n > 1]


def load_json(data: bytes, source: str, *, salvage: bool = True) -> JsonLoad:
    """Parse JSON bytes; `source` names the file in error messages.

    Raises
    ------
    DumpFormatError
        If the bytes are empty, not JSON (and nothing can be salvaged), nested deeper than the parsers
        follow (orjson stops at 1024 levels), or hold a number too long to read.
    """
    if not data or data.isspace():  # no copy: strip() of a large file would double it
        raise DumpFormatError(f"{source}: file is empty")
    try:
        with gc_paused():
            return JsonLoad(orjson.loads(data))
    except orjson.JSONDecodeError:
        pass
    text = _text(data, source)
    try:
        return JsonLoad(_decoder(data, source).decode(text))
    except json.JSONDecodeError as err:
        if not salvage:
            raise DumpFormatError(f"{source}: not valid JSON ({err.msg} at line {err.lineno})") from err
        try:
            return _salvage(text, source, err, _decoder(data, source))
        except RecursionError as deep:
            raise DumpFormatError(f"{source}: not valid JSON ({err.msg} at line {err.lineno}), "
                                  "and nested too deeply to salvage") from deep
    except RecursionError as err:
        raise DumpFormatError(f"{source}: nested too deeply to read (more than {_DEPTH} levels)") from err
    except ValueError as err:  # a number longer than Python's int_max_str_digits
        raise DumpFormatError(f"{source}: not readable JSON ({err})") from err


_HUGE = re.compile(rb"[0-9]{300}|[eE]\+?0*[0-9]{3}")
"""Where a number may lie beyond float64 (above 1.8e308): 300 digits in a row, or an exponent of three digits."""

_FLOAT64_DIGITS = 309  # an integer of more digits is beyond float64's largest finite value


class _NumberDecoder(json.JSONDecoder):
    """The standard library's decoder refusing numbers beyond float64 (``1e400`` would read as infinity, a
    400-digit integer as a value no statistic column holds), naming the number and its line."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data, self.source = data, source
        super().__init__(parse_float=self._float, parse_int=self._int)

    def _float(self, token: str) -> float:
        value = float(token)
        if math.isinf(value):
            raise self._beyond(token, token)
        return value

    def _int(self, token: str) -> int:
        digits = len(token.lstrip("-"))
        if digits > _FLOAT64_DIGITS:
            raise self._beyond(token, f"an integer of {digits} digits")
        return int(token)

    def _beyond(self, token: str, what: str) -> DumpFormatError:
        at = self.data.find(token[:64].encode())
        lines = self.data.count(b"\n", 0, at) + 1
        line = f" line {lines}:" if at >= 0 else ""
        return DumpFormatError(f"{self.source}:{line} {what} is beyond float64 (largest 1.8e308); "
                               "the file is damaged")


def _decoder(data: bytes, source: str) -> json.JSONDecoder:
    """The standard library's decoder for `data`: with number checks when a number may lie beyond float64."""
    return _NumberDecoder(data, source) if _HUGE.search(data) else _DECODER


def _salvage(text: str, source: str, err: json.JSONDecodeError, decoder: json.JSONDecoder = _DECODER) -> JsonLoad:
    pos = _skip_ws(text, 0)
    if pos >= len(text) or text[pos] != "{":
        raise DumpFormatError(f"{source}: not valid JSON ({err.msg} at line {err.lineno})") from err
    value, complete, kept = _partial_object(text, pos, decoder)
    if complete:  # the damage is somewhere we did not look into: report the original error
        raise DumpFormatError(f"{source}: not valid JSON ({err.msg} at line {err.lineno})") from err
    line = text.count("\n", 0, err.pos) + 1
    return JsonLoad(value, f"{source}: file ends early at line {line}; kept {kept} complete entries")


def _partial_object(text: str, pos: int, decoder: json.JSONDecoder) -> tuple[dict[str, Any], bool, int]:
    """Parse the object at `pos` entry by entry; descend into the last, incomplete object value.

    Returns the entries read, whether the object was complete, and how many entries were kept.
    """
    out: dict[str, Any] = {}
    kept = 0
    pos = _skip_ws(text, pos + 1)
    while pos < len(text) and text[pos] != "}":
        key, pos = _decode_at(text, pos, decoder)
        pos = _skip_ws(text, pos) if key is not None else pos
        if key is None or pos >= len(text) or text[pos] != ":":
            return out, False, kept
        start = _skip_ws(text, pos + 1)
        value, pos = _decode_at(text, start, decoder)
        if value is None and start < len(text) and text[start] == "{":
            out[key], _, inner_kept = _partial_object(text, start, decoder)
            return out, False, kept + inner_kept
        if value is None and pos == start:
            return out, False, kept
        out[key] = value
        kept += 1
        pos = _skip_ws(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_ws(text, pos + 1)
    return out, pos < len(text), kept


def _decode_at(text: str, pos: int, decoder: json.JSONDecoder) -> tuple[Any, int]:
    """Decode one JSON value at `pos`; (None, pos) when it is cut short or malformed."""
    try:
        return decoder.raw_decode(text, pos)
    except (json.JSONDecodeError, IndexError):
        return None, pos


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


class LayoutMismatch(Exception):
    """The file is not laid out as `MemberChunks` expects (or is cut short): read it whole instead."""


_HEAD_BYTES = 1 << 16  # the members before the chunked one must start within this many bytes
_BLANK = b" \t\r\n"


class MemberChunks:
    """The members of the object under top-level `key` of a JSON file, in chunks of whole members.

    Chunks are cut where one member ends and the next begins, found with `bytes.rfind` (no per-byte
    Python loop): a ``},`` followed by the whitespace the file puts before a member of that object
    and a key with a dot (a node id). The layout decides the whitespace, read from the text before
    the first member:

    * ``json.dump(doc, indent=k)`` (msprobe writes ``indent=1``): every member starts a line
      indented by exactly ``2k`` spaces, and the object closes on a line indented by ``k``;
    * one member per line (``\n`` before each key), or compact JSON (any spacing, ``", "`` too):
      the object closes with the last ``}`` before the file's own.

    A cut at any other place would leave a chunk that does not parse (it would end inside a record
    or a string), so a chunk that parses was cut right. The object's end is looked up once from the
    end of the file, where it is when the object is the last member (msprobe's "data" is). Each chunk
    is about `chunk_bytes` of text; one orjson rejects (bare ``NaN``/``Infinity``) is parsed by the
    standard library, as `load_json` does for a whole file. Once iteration is over, `rest` holds the
    other top-level members, with ``rest[key] == {}``.

    Iteration raises `LayoutMismatch` when the file does not look like that (no such key, another
    object after it, a damaged or cut-short file) or a chunk does not parse: the caller then reads
    the file whole, which salvages or reports the damage. A member key repeated in two chunks
    appears in both (a whole parse keeps the last value at the first position): callers that care
    check for it.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> doc = {"task": "statistics", "data": {f"n.{i}": {"v": [i, i + 1]} for i in range(5)}}
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "dump.json"
    >>> _ = path.write_text(json.dumps(doc, indent=1))
    >>> chunks = MemberChunks(path, "data", chunk_bytes=40)
    >>> [list(c) for c in chunks]
    [['n.0'], ['n.1'], ['n.2', 'n.3'], ['n.4']]
    >>> chunks.rest
    {'task': 'statistics', 'data': {}}
    >>> _ = path.write_text(json.dumps(doc))  # compact, as json.dumps writes it
    >>> [list(c) for c in MemberChunks(path, "data", chunk_bytes=40)]
    [['n.0', 'n.1'], ['n.2', 'n.3', 'n.4']]
    """

    def __init__(self, path: str | os.PathLike[str], key: str, *, chunk_bytes: int = 8 << 20) -> None:
        self.path = Path(path)
        self.key = key
        self.chunk_bytes = max(int(chunk_bytes), 64)
        self.rest: dict[str, Any] | None = None
        self._cuts: _Cuts | None = None

    def may_repeat(self, text: bytes, parsed: Mapping[str, Any]) -> bool:
        """Whether a chunk of `texts` may hold a key twice, given `parsed`, what a parser read from it (it keeps
        one of two); a caller confirms with `repeated_keys`. Exact in a layout with a line per member
        (msprobe's): every member starts the line with the object's indent (the first count, cheaper in an
        indented layout, sees the members whose object opens a line of the next indent: all of them but empty
        ones; `_count` is cheaper than `bytes.count` for the short pattern of the exact count). Otherwise
        the keys that open an object are counted in the text and in `parsed` written back compactly: a
        repeated member adds its own (whitespace other than a space after the colon counts as a surplus). Compact
        JSON is first checked by length alone (`_members_fill`), which is several times cheaper."""
        cuts = self._cuts
        if cuts is not None and cuts.pad is not None:
            indent = len(cuts.pad) - 1
            if indent and text.count(b'": {\n' + b" " * (indent + indent // 2) + b'"') == len(parsed):
                return False
            return _count(text, cuts.pad + b'"') != len(parsed)
        if _members_fill(text, len(parsed)):
            return False
        written = text.count(b'":{') + text.count(b'": {')
        return written != _ENCODER.encode(parsed).count(b'":{')

    def split_members(self, text: bytes) -> list[bytes] | None:
        r"""The members of a chunk of `texts` (``"key": value`` each) in a layout with a line per member
        (msprobe's: each starts a line at the object's indent; deeper lines start further in); None in another.

        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "dump.json"
        >>> _ = path.write_text('{\n "data": {\n  "a.0": {\n   "x": 1\n  },\n  "b.1": {}\n }\n}')
        >>> chunks = MemberChunks(path, "data")
        >>> [chunks.split_members(text) for text in chunks.texts()]
        [[b'"a.0": {\n   "x": 1\n  }', b'"b.1": {}']]
        """
        cuts = self._cuts
        if cuts is None or cuts.pad is None or not text.startswith(b"{" + cuts.pad + b'"'):
            return None
        parts = text[1:-1].split(cuts.pad + b'"')
        return [b'"' + part.rstrip(_BLANK).removesuffix(b",") for part in parts[1:]]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(loads_object, self.texts())

    def texts(self) -> Iterator[bytes]:
        """The chunks as JSON object text (``{"k": v, ...}``), for a caller with a decoder of its own.

        `loads_object` turns one into a dict as iteration does; `rest` is set once all are read.
        """
        opener = re.compile(rb'"' + re.escape(orjson.dumps(self.key)[1:-1]) + rb'"[ \t\r\n]*:[ \t\r\n]*\{')
        with self.path.open("rb") as f:
            head = f.read(_HEAD_BYTES)
            found = opener.search(head)
            if found is None or not head[: found.start()].lstrip().startswith(b"{"):
                raise LayoutMismatch(f"{self.path}: no {self.key!r} object in the first {len(head)} bytes")
            head = head[: found.end()]  # ends with the key's "{"
            f.seek(len(head))
            first = f.read(256)
            pad = first[: len(first) - len(first.lstrip(_BLANK))]
            cuts = self._cuts = _Cuts(pad)
            end = cuts.close(f, len(head))
            f.seek(len(head))
            # one buffer throughout: a chunk's text is copied once, from it (slices and concatenations of bytes
            # copied each byte five times)
            buf = bytearray(f.read(min(self.chunk_bytes, end - len(head))))  # starts with the first member
            read = len(head) + len(buf)
            while read < end:
                block = f.read(min(self.chunk_bytes, end - read))
                if not block:
                    raise LayoutMismatch(f"{self.path}: ends before {self.key!r} closes")
                read += len(block)
                if (cut := cuts.last(buf)) > 0:
                    yield _object_text(buf, cut, last=False)
                    del buf[:cut]
                buf += block
            if buf.strip():
                yield _object_text(buf, len(buf), last=True)
            f.seek(end + 1)
            tail = f.read()
        rest = _loads_or_mismatch(head + b"}" + tail)
        if not isinstance(rest, dict) or rest.get(self.key) != {}:
            raise LayoutMismatch(f"{self.path}: {self.key!r} is not the one object the layout shows")
        if top_level_repeats(head + b"}" + tail, rest):
            raise LayoutMismatch(f"{self.path}: a top-level key twice")  # the whole-file read names it
        self.rest = rest


def _count(text: bytes, pattern: bytes) -> int:
    r"""``text.count(pattern)`` for a `pattern` that cannot overlap itself (its first byte appears nowhere else in
    it), by numpy's vectorised byte compares: `bytes.count` tries every place where the pattern's last byte occurs,
    and ``"`` is every few bytes of JSON (a 256 KiB chunk: 0.05 ms against 0.3 ms).

    >>> _count(b'{\n "a": 1,\n "b": 2}', b'\n "')
    2
    """
    assert pattern[0] not in pattern[1:]
    data = np.frombuffer(text, np.uint8)
    places = len(data) - len(pattern) + 1
    if places <= 0:
        return 0
    hits = data[:places] == pattern[0]
    byte = np.empty_like(hits)  # one buffer for every byte's compare: no array allocated per byte
    for k in range(1, len(pattern)):
        hits &= np.equal(data[k: k + places], pattern[k], out=byte)
    return int(np.count_nonzero(hits))


_ENCODER = msgspec.json.Encoder()
_RAW_MEMBERS = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _members_fill(text: bytes, count: int) -> bool:
    """True when `count` members with plain keys fill the object `text` byte for byte, written compactly
    (``{"k":v,"k2":v2}``): a parser kept every member, none was dropped as a repeat. False when that is not
    known (whitespace between members, escaped or unusual keys)."""
    try:
        members = _RAW_MEMBERS.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    keys = "".join(members)
    if len(members) != count or not count or not (keys.isascii() and keys.isprintable()) or '"' in keys or (
            "\\" in keys) or "/" in keys:
        return False  # a key such characters could be written escaped: its length in the text is unknown
    members_bytes = len(keys) + 4 * count - 1 + sum(map(len, members.values()))  # '"k":v' each, commas between
    return members_bytes + 2 == len(text)


class _Cuts:
    """Where members of the chunked object end, for the whitespace `pad` the file puts before its first key."""

    def __init__(self, pad: bytes) -> None:
        spaces = pad[1:] if pad.startswith(b"\n") else b""
        self.indented = pad.startswith(b"\n") and spaces == b" " * len(spaces) and len(spaces) % 2 == 0
        self.pad = pad if self.indented else None
        # the close of an indented object is a line of its own; with no indent ("\n" alone) every close is
        self.closing = b"\n" + b" " * (len(spaces) // 2) + b"}" if self.indented and spaces else None

    def last(self, buf: bytes | bytearray) -> int:
        """Offset just past the comma that ends the last whole member in `buf` (-1: none found)."""
        pos = len(buf)
        while (at := buf.rfind(b"},", 0, pos)) >= 0:
            pos = at
            key_at = at + 2
            if self.pad is not None:
                if not buf.startswith(self.pad, key_at):
                    continue
                key_at += len(self.pad)
            else:
                while key_at < len(buf) and buf[key_at] in _BLANK:
                    key_at += 1
            if _is_node_key(buf, key_at):
                return at + 2
        return -1

    def close(self, f: Any, start: int) -> int:
        """Offset of the "}" that closes the chunked object: the last line indented as its close (an
        indented file), else the last "}" before the file's own; found from the end of the file."""
        end = f.seek(0, os.SEEK_END)
        if self.closing is not None:
            return _last_close(f, start, end, self.closing) + len(self.closing) - 1
        begin = max(start, end - _HEAD_BYTES)
        f.seek(begin)
        window = f.read(end - begin).rstrip(_BLANK)
        if not window.endswith(b"}"):
            raise LayoutMismatch("the file does not end with an object")
        inner = window[:-1].rstrip(_BLANK)
        if not inner.endswith(b"}"):
            raise LayoutMismatch("the chunked object is not the last member")
        return begin + len(inner) - 1


def _is_node_key(buf: bytes | bytearray, at: int) -> bool:
    """True when a key with a dot (a node id, no escapes) followed by ``: {`` starts at `at`."""
    if buf[at: at + 1] != b'"':
        return False
    close = buf.find(b'"', at + 1)
    if close < 0:
        return False
    key = buf[at + 1: close]
    if b"." not in key or b"\\" in key:
        return False
    rest = buf[close + 1: close + 8].lstrip(_BLANK)
    return rest.startswith(b":") and rest[1:].lstrip(_BLANK).startswith(b"{")


def _last_close(f: Any, start: int, end: int, closing: bytes) -> int:
    """Offset of the last `closing` after `start`: where the chunked object ends when it is the file's last
    object member (msprobe's "data" is). Found from the end, since searching forward is slow where every
    line starts with a newline and a space. If another object member follows, the chunks do not parse and
    the caller reads the file whole."""
    while True:  # one window at a time, backwards; windows overlap by a close's length but one byte
        begin = max(start, end - _HEAD_BYTES)
        f.seek(begin)
        at = f.read(end - begin).rfind(closing)
        if at >= 0:
            return begin + at
        if begin == start:
            raise LayoutMismatch("the object never closes")
        end = begin + len(closing) - 1


def _object_text(buf: bytearray, end: int, *, last: bool) -> bytes:
    """The run of whole members ``buf[:end]`` (``"k": v,``; the last run has no trailing comma) as an object."""
    if not last:
        if buf[end - 1] != ord(","):
            raise LayoutMismatch("a member does not follow a comma")
        end -= 1
    with memoryview(buf) as view, view[:end] as members:
        return b"".join((b"{", members, b"}"))


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
    if text_fault(data) is not None:
        raise LayoutMismatch("a chunk holds text that is not UTF-8")  # the whole-file read reports where
    try:
        return _decoder(data, "a chunk").decode(data.decode("utf-8", errors="replace"))
    except DumpFormatError as err:  # a number beyond float64: the whole-file read says where
        raise LayoutMismatch(str(err)) from err
    except json.JSONDecodeError as err:
        raise LayoutMismatch(f"a chunk is not valid JSON ({err.msg})") from err
    except RecursionError as err:
        raise LayoutMismatch("a chunk is nested too deeply") from err  # the whole-file read says so


_LONE_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|"
                             rb"(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def text_fault(data: bytes) -> tuple[int, str] | None:
    r"""Where JSON bytes hold text that is not Unicode, and what: bytes that are not UTF-8, or an escaped
    lone surrogate (``\ud800``: half of a UTF-16 pair, no character). None when the text is sound.

    orjson and msgspec reject both; the standard library would read the first as U+FFFD and keep the
    second as a string nothing can encode, so a fallback parse checks here first.

    >>> text_fault(b'{"a.b": 1}') is None, text_fault(b'{"\\ud83d\\ude00": 1}') is None
    (True, True)
    >>> text_fault(b'{"a\xff": 1}')
    (3, 'bytes that are not UTF-8 (ff)')
    >>> text_fault(b'{"a\\ud800b": 1}')
    (3, 'a lone UTF-16 surrogate (\\ud800: no character)')
    """
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as err:
            return err.start, f"bytes that are not UTF-8 ({data[err.start:err.end].hex(' ')})"
    if b"\\u" in data and (m := _LONE_SURROGATE.search(data)):
        return m.start(), f"a lone UTF-16 surrogate ({m.group().decode()}: no character)"
    return None


def _text(data: bytes, source: str) -> str:
    """`data` as text for the standard library's parser; a fault of `text_fault` is a `DumpFormatError` naming
    the line and the string it is in (a file cut inside a character keeps what precedes it: the salvage says
    the file ends early)."""
    fault = text_fault(data)
    if fault is not None and fault[0] >= len(data) - 3 and not data.rstrip().endswith((b"}", b"]")):
        data, fault = data[: fault[0]], None  # cut inside a multi-byte character
    if fault is None:
        return data.decode("utf-8")
    at, what = fault
    begin = data.rfind(b'"', 0, at) + 1
    end = data.find(b'"', at)
    near = one_line(data[begin: end if 0 <= end - at < 80 else at + 40].decode("utf-8", "backslashreplace"))
    line = data.count(b"\n", 0, at) + 1
    raise DumpFormatError(f"{source}: line {line}: {what} in \"{near}\"; "
                          "the file is damaged (names and values must be Unicode text)")


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
    return orjson.dumps(value, option=option, default=_plain_tuple)


def _plain_tuple(value: Any) -> tuple[Any, ...] | list[Any]:
    """What orjson cannot write itself: a tuple subclass as its tuple, another sequence (a run's `CodedTexts`
    columns) as its list."""
    if isinstance(value, tuple):
        return tuple(value)
    if isinstance(value, Sequence):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
