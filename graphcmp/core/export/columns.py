"""Numpy columns <-> strict JSON values, keeping inf and NaN (which JSON cannot hold) exactly.

A float column is written as ``{"values": [...], "special": {"nan": [...], "inf": [...], "-inf": [...]}}``:
non-finite entries are ``null`` in `values` and `special` lists their flat (row-major) indices by kind.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from graphcmp.core.texts import CodedTexts

__all__ = ["decode_floats", "encode_floats", "float_reprs", "json_escaped", "pack_bits", "unpack_bits"]

_SPECIAL_TEXT = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}


def encode_floats(values: np.ndarray) -> dict[str, Any]:
    """Encode a float array (any shape) as JSON-safe data.

    `special` maps ``"nan"``, ``"inf"`` and ``"-inf"`` to the flat (row-major) indices holding them.

    >>> doc = encode_floats(np.array([1.0, np.inf, np.nan]))
    >>> doc["values"].tolist()[0], {k: v.tolist() for k, v in doc["special"].items()}
    (1.0, {'nan': [2], 'inf': [1]})
    """
    values = np.asarray(values, np.float64)
    flat = values.ravel()
    special = {}
    for name, mask in (("nan", np.isnan(flat)), ("inf", flat == np.inf), ("-inf", flat == -np.inf)):
        where = np.flatnonzero(mask)
        if len(where):
            special[name] = where
    return {"values": values if not special else np.where(np.isfinite(values), values, np.nan), "special": special}


def decode_floats(doc: dict[str, Any]) -> np.ndarray:
    """Inverse of `encode_floats` (``null`` becomes NaN, then `special` entries are restored).

    >>> decode_floats({"values": [1.0, None, None], "special": {"inf": [1], "nan": [2]}}).tolist()
    [1.0, inf, nan]
    """
    values, special = doc["values"], doc.get("special", {})
    if isinstance(values, np.ndarray) and values.dtype == np.float64 and not special:
        return values  # a column of an npz result: already floats, nothing to restore
    out = np.array(values, dtype=np.float64)  # numpy reads null (None) as NaN
    flat = out.reshape(-1)
    for name, where in special.items():
        flat[np.asarray(where, np.int64)] = _SPECIAL_TEXT[name]
    return out


def pack_bits(mask: np.ndarray) -> np.ndarray:
    """Rows of booleans (n, k) as one integer per row, bit j set when column j is True.

    >>> pack_bits(np.array([[True, False, True, False]])).tolist()
    [5]
    """
    if 0 < mask.shape[1] <= 8:  # a byte per row, packed in C (five times faster than the weighted sum)
        return np.packbits(mask.astype(bool, copy=False), axis=1, bitorder="little")[:, 0].astype(np.int64)
    weights = 1 << np.arange(mask.shape[1])
    return (mask.astype(np.int64) * weights).sum(axis=1)


def unpack_bits(packed: np.ndarray | list[int], width: int) -> np.ndarray:
    """Inverse of `pack_bits`.

    >>> unpack_bits([5], 4).tolist()
    [[True, False, True, False]]
    """
    packed = np.asarray(packed, np.int64).reshape(-1, 1)
    if width <= 8:  # the low byte holds every bit asked for (two's complement: negative numbers too)
        low = packed.astype(np.uint8)
        return np.unpackbits(low, axis=1, count=width, bitorder="little").view(bool)
    return (packed >> np.arange(width)) & 1 == 1


_UNSIGNED_EXPONENT = re.compile(rb"e(?=\d)")  # older orjson writes e16
_SHORT_EXPONENT = re.compile(rb"e-(?=\d(?!\d))")  # e-7 (a positive exponent has two digits: e+16 at least)


def float_reprs(values: np.ndarray) -> list[bytes]:
    """``repr`` of every float of `values` (flattened) as ASCII bytes, made for the whole column at once.

    orjson writes the same shortest round-trip digits as ``repr`` and in the same positional or
    exponent form, but for the exponent's sign and width (fixed here over the whole text by two
    literal substitutions), numbers in [1e-5, 1e-4) (written positionally by orjson) and inf/NaN
    (``null``): those few go through ``repr``.

    >>> float_reprs(np.array([0.1, -0.0, 1e16, 2.5e-7, 3e-5, np.nan, -np.inf, 123.0]))
    [b'0.1', b'-0.0', b'1e+16', b'2.5e-07', b'3e-05', b'nan', b'-inf', b'123.0']
    """
    flat = np.ascontiguousarray(values, np.float64).ravel()
    if not len(flat):
        return []
    text = orjson.dumps(flat, option=orjson.OPT_SERIALIZE_NUMPY)
    if b"e" in text:
        text = _SHORT_EXPONENT.sub(b"e-0", _UNSIGNED_EXPONENT.sub(b"e+", text))  # literal: no Python per match
    out = text[1:-1].split(b",")
    size = np.abs(flat)
    fix = np.flatnonzero(~np.isfinite(flat) | ((size >= 1e-5) & (size < 1e-4)))
    for k, value in zip(fix.tolist(), flat[fix].tolist()):
        out[k] = repr(value).encode()
    return out


def json_escaped(values: Sequence[str]) -> list[bytes]:
    r"""Each string as the inside of its JSON text (escaped exactly as orjson does, no quotes), for a whole
    column in one orjson call.

    In orjson's text of a list of strings every quote inside a string is escaped, so ``","`` only
    separates two strings.

    >>> [text.decode() for text in json_escaped(["a", 'say "hi"', "", "x\ty"])]
    ['a', 'say \\"hi\\"', '', 'x\\ty']
    """
    if not len(values):
        return []
    if type(values) is CodedTexts:  # each distinct text escaped once
        return np.array(json_escaped(values.names), object)[values.codes].tolist()
    return orjson.dumps(values if type(values) in (list, tuple) else list(values))[2:-2].split(b'","')
