"""Numpy columns <-> strict JSON values, keeping inf and NaN (which JSON cannot hold) exactly.

A float column is written as ``{"values": [...], "special": [[index..., "inf"|"-inf"|"nan"], ...]}``:
non-finite entries are ``null`` in `values` and listed in `special` with their position.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["decode_floats", "encode_floats", "pack_bits", "unpack_bits"]

_SPECIAL_TEXT = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}


def encode_floats(values: np.ndarray) -> dict[str, Any]:
    """Encode a float array (any shape) as JSON-safe data.

    >>> encode_floats(np.array([1.0, np.inf, np.nan]))
    {'values': array([ 1., nan, nan]), 'special': [[1, 'inf'], [2, 'nan']]}
    """
    values = np.asarray(values, np.float64)
    bad = ~np.isfinite(values)
    special = [[*map(int, idx), _text(values[tuple(idx)])] for idx in np.argwhere(bad)]
    return {"values": np.where(bad, np.nan, values), "special": special}


def decode_floats(doc: dict[str, Any]) -> np.ndarray:
    """Inverse of `encode_floats` (``null`` becomes NaN, then `special` entries are restored).

    >>> decode_floats({"values": [1.0, None, None], "special": [[1, "inf"], [2, "nan"]]}).tolist()
    [1.0, inf, nan]
    """
    out = np.array(doc["values"], dtype=np.float64)  # numpy reads null (None) as NaN
    for *idx, text in doc.get("special", ()):
        out[tuple(idx)] = _SPECIAL_TEXT[text]
    return out


def _text(value: float) -> str:
    if np.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


def pack_bits(mask: np.ndarray) -> np.ndarray:
    """Rows of booleans (n, k) as one integer per row, bit j set when column j is True.

    >>> pack_bits(np.array([[True, False, True, False]])).tolist()
    [5]
    """
    weights = 1 << np.arange(mask.shape[1])
    return (mask.astype(np.int64) * weights).sum(axis=1)


def unpack_bits(packed: np.ndarray | list[int], width: int) -> np.ndarray:
    """Inverse of `pack_bits`.

    >>> unpack_bits([5], 4).tolist()
    [[True, False, True, False]]
    """
    packed = np.asarray(packed, np.int64).reshape(-1, 1)
    return (packed >> np.arange(width)) & 1 == 1
