"""Reading JSON as dumps write it (bare NaN/Infinity, files cut short) and writing strict JSON.

`orjson` reads the common case. msprobe writes bare ``NaN``/``Infinity`` tokens in overflow dumps,
which orjson rejects, so such files fall back to the standard library. A file cut short (a run
killed mid-dump) is salvaged entry by entry: every complete entry is kept and the loss reported.
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

__all__ = ["JsonLoad", "dumps_strict", "gc_paused", "load_json", "read_json", "sanitize_floats"]

_DECODER = json.JSONDecoder()
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
        data = path.read_bytes()
    except FileNotFoundError as err:
        raise DumpFormatError(f"{path}: file not found") from err
    except OSError as err:
        raise DumpFormatError(f"{path}: cannot read ({err.strerror})") from err
    return load_json(data, str(path), salvage=salvage)


def load_json(data: bytes, source: str, *, salvage: bool = True) -> JsonLoad:
    """Parse JSON bytes; `source` names the file in error messages."""
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
        return _salvage(text, source, err)


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
