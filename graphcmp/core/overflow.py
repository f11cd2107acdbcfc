"""Overflow within one run: inf/NaN statistics or fp16/bf16 values at the dtype's limit, and GE's overflow records.

Levels per node (outputs judged against inputs): *critical* — inputs finite, outputs not;
*high* — both not finite, or the output magnitude explodes (over `EXPLODE_RATIO` times the
largest input magnitude and at least `EXPLODE_MIN`); *medium* — inputs not finite, output
finite. A value at the dtype's limit (|x| ≥ 65504 in float16, ≥ 3.3895e38 in bfloat16) counts as
not finite. GE's overflow debug records carry a decimal ``status`` whose bits name the kind.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Any

import numpy as np

from graphcmp.core.dtypes import normalize_dtype
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.jsonio import read_json
from graphcmp.core.metrics import by_blocks, is_nonfinite, rows_max
from graphcmp.core.overflow_status import STATUS_BITS, decode_overflow_status
from graphcmp.core.records import DumpGraph, is_output, string_codes

__all__ = [
    "EXPLODE_MIN",
    "EXPLODE_RATIO",
    "OVERFLOW_ATTR",
    "OVERFLOW_NAMES",
    "STATUS_BITS",
    "OverflowLevel",
    "decode_overflow_status",
    "overflow_levels",
    "read_overflow_records",
    "recorded_overflow",
    "recorded_statistics",
    "summed_beyond_range",
]



class OverflowLevel(enum.IntEnum):
    """Overflow level of a node (int8 column of `overflow_levels`); see the module docstring."""

    NONE = 0
    MEDIUM = 1  # inputs not finite, output finite
    HIGH = 2  # inputs and outputs not finite, or the output magnitude explodes
    CRITICAL = 3  # inputs finite, outputs not


OVERFLOW_NAMES = {level: level.name.lower() for level in OverflowLevel}
EXPLODE_RATIO = 1e4
EXPLODE_MIN = 1e4
OVERFLOW_ATTR = "overflow"
"""Node attribute holding the device's own overflow record (block and status), set by the Ascend dump reader."""
DTYPE_LIMITS = {"float16": 65504.0, "bfloat16": 3.3895e38}




def overflow_levels(graph: DumpGraph) -> np.ndarray:
    """`OverflowLevel` per node (0 none, 1 medium, 2 high, 3 critical), found once per run; see the module
    docstring."""
    return graph.memo("overflow", lambda: _overflow_levels(graph))


def _overflow_levels(graph: DumpGraph) -> np.ndarray:
    t = graph.tensors
    bad, magnitude = _tensor_overflow(graph)
    is_out = is_output(t.role)
    n = len(graph)
    out_bad = np.bincount(t.node[is_out & bad], minlength=n) > 0
    in_bad = np.bincount(t.node[~is_out & bad], minlength=n) > 0
    out_mag = np.zeros(n)
    in_mag = np.zeros(n)
    finite_mag = np.where(np.isfinite(magnitude), magnitude, 0.0)
    np.maximum.at(out_mag, t.node[is_out], finite_mag[is_out])
    np.maximum.at(in_mag, t.node[~is_out], finite_mag[~is_out])
    exploding = (out_mag >= EXPLODE_MIN) & (out_mag > EXPLODE_RATIO * np.maximum(in_mag, 1e-30)) & (in_mag > 0)
    level = np.full(n, OverflowLevel.NONE, np.int8)
    level[in_bad & ~out_bad] = OverflowLevel.MEDIUM
    level[(in_bad & out_bad) | (exploding & ~out_bad)] = OverflowLevel.HIGH
    level[out_bad & ~in_bad] = OverflowLevel.CRITICAL
    recorded = recorded_overflow(graph)
    flagged = np.where(in_bad[recorded], OverflowLevel.HIGH, OverflowLevel.CRITICAL)
    level[recorded] = np.maximum(level[recorded], flagged)
    level.flags.writeable = False
    return level


def recorded_overflow(graph: DumpGraph) -> np.ndarray:
    """Rows of the nodes the device itself flagged as overflowing (node attribute ``overflow``: an Ascend Opdebug
    record, whatever the values show: a chip in saturation mode clamps instead of writing inf)."""
    attrs = graph.nodes.attrs
    if not attrs:
        return np.zeros(0, np.int64)
    return np.array([row for row, items in enumerate(attrs) if any(k == OVERFLOW_ATTR for k, _ in items)], np.int64)


def _tensor_overflow(graph: DumpGraph) -> tuple[np.ndarray, np.ndarray]:
    """Per tensor: True when a statistic is not finite or at its dtype's limit, and its magnitude (the larger
    of |Max| and |Min|), computed in blocks of rows. A Mean or Norm summed beyond a half-precision range by
    the dump (`summed_beyond_range`) is no overflow of the tensor."""
    t = graph.tensors
    return by_blocks(_overflow_rows, t.stats, recorded_statistics(graph), _limits(graph))


def _limits(graph: DumpGraph) -> np.ndarray:
    """Per tensor, the largest finite value of its dtype where it is half precision (inf otherwise)."""
    code, names = string_codes(graph.tensors.dtype)
    return np.array([DTYPE_LIMITS.get(normalize_dtype(d), np.inf) for d in names] + [np.inf])[code]


def recorded_statistics(graph: DumpGraph) -> np.ndarray:
    """Per tensor and statistic, True where the dump recorded it (`TensorTable.present`) and did not sum it beyond its
    half-precision range (`summed_beyond_range`): the statistics a comparison measures."""
    return graph.tensors.present & ~summed_beyond_range(graph)


def summed_beyond_range(graph: DumpGraph) -> np.ndarray:
    """Per tensor and statistic (Max, Min, Mean, Norm), True for a Mean or Norm that is inf or NaN only because
    the dump summed a half-precision tensor in its own dtype: every element is finite and below the dtype's
    limit (Max and Min say so), yet N elements of magnitude up to that limit sum beyond it (a float16 tensor
    of 2,048 values of 1,500 has a Norm of 67,900 > 65,504). The tensor is finite; the statistic is not
    recorded. Computed once per run."""
    return graph.memo("summed_beyond_range", lambda: _summed_beyond_range(graph))


def _summed_beyond_range(graph: DumpGraph) -> np.ndarray:
    t = graph.tensors
    limits = _limits(graph)
    out = np.zeros(t.present.shape, bool)
    half = np.flatnonzero(np.isfinite(limits))
    if not len(half):
        out.flags.writeable = False
        return out
    stats, present = t.stats[half], t.present[half]
    with np.errstate(invalid="ignore"):
        bounded = (present[:, :2] & np.isfinite(stats[:, :2]) & (np.abs(stats[:, :2]) < limits[half, None])).all(1)
    out[half, 2:] = bounded[:, None] & present[:, 2:] & ~np.isfinite(stats[:, 2:])
    out.flags.writeable = False
    return out


def _overflow_rows(stats: np.ndarray, present: np.ndarray, limits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    extent = np.where(present[:, :2], np.abs(stats[:, :2]), 0.0)
    high, low = extent[:, 0], extent[:, 1]
    with np.errstate(invalid="ignore"):
        at_limit = (high >= limits) | (low >= limits)
    return is_nonfinite(stats, present) | at_limit, rows_max(extent)


def read_overflow_records(path: str | os.PathLike[str]) -> dict[str, tuple[str, ...]]:
    """Decode a GE overflow debug record: block name (``AI Core``, ``DHA Atomic Add``, ...) -> words.

    Raises
    ------
    DumpFormatError
        If the file is not a JSON object of blocks with a decimal ``status``.
    """
    doc: Any = read_json(Path(path), salvage=False).value
    if not isinstance(doc, dict):
        raise DumpFormatError(f"{path}: expected a JSON object of overflow blocks")
    out: dict[str, tuple[str, ...]] = {}
    for block, fields in doc.items():
        if isinstance(fields, dict) and "status" in fields:
            try:
                out[block] = decode_overflow_status(int(fields["status"]))
            except (TypeError, ValueError) as err:
                raise DumpFormatError(f"{path}: {block!r}: status {fields['status']!r} is not a number") from err
    if not out:
        raise DumpFormatError(f"{path}: no block with a \"status\" (expected e.g. \"AI Core\": {{\"status\": 32}})")
    return out
