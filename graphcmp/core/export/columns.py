"""Numpy columns <-> strict JSON values, keeping inf and NaN (which JSON cannot hold) exactly.

A float column is written as ``{"values": [...], "special": {"nan": [...], "inf": [...], "-inf": [...]}}``:
non-finite entries are ``null`` in `values` and `special` lists their flat (row-major) indices by kind.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["decode_floats", "encode_floats", "pack_bits", "unpack_bits"]

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
    weights = 1 << np.arange(mask.shape[1])
    return (mask.astype(np.int64) * weights).sum(axis=1)


def unpack_bits(packed: np.ndarray | list[int], width: int) -> np.ndarray:
    """Inverse of `pack_bits`.

    >>> unpack_bits([5], 4).tolist()
    [[True, False, True, False]]
    """
    packed = np.asarray(packed, np.int64).reshape(-1, 1)
    return (packed >> np.arange(width)) & 1 == 1
