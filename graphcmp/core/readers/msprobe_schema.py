"""The one schema of an msprobe leaf (one argument as dump.json records it) and the tensor row it becomes.

A leaf is a tensor's statistics (``{"type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "md5",
"data_name", "requires_grad"}``), a scalar (``{"type": "int", "value": 3}``) or another value. `Leaf`
declares the fields and their types; `leaf_row` says what one leaf becomes: the row
``COLUMNS`` = (dtype, shape, md5, file, value, Max, Min, Mean, Norm), None for a statistic absent.

Four routes decode leaves, and every one is checked against `leaf_row` (tests/core/readers/
test_msprobe_schema.py on every real dump of the tests, plus leaves made to be odd):

1. **typed** (`msprobe_leaves._struct_columns`): `read_msprobe` on a dump.json, chunk by chunk,
   when a chunk decodes into `Leaf` structs (no unknown field, no deep nesting) and its odd leaves
   read as their plain dicts do (else `Misfit`, and the chunk takes route 2). JSON has no NaN or
   Infinity, so msgspec reads no chunk holding them bare: in msprobe's ``indent=1`` layout the
   records holding one are set apart for route 2 and the rest of the chunk takes this one. The
   common case, and the fastest.
2. **plain dicts** (`msprobe_leaves._dict_columns`): `parse_msprobe` on documents in memory, the
   whole-file read (``chunk_bytes=None``, a file cut short and salvaged), records with bare
   NaN/Infinity, a chunk route 1 does not take.
3. **per leaf** (`leaf_row`, here): the reference; routes 1 and 2 call it for the leaves they do not
   take in bulk (scalars, other values, odd leaves).
4. **tb-graph-ascend** (`vis._leaf_fields`): msprobe's own copy of the leaves in a `.vis`/`.vis.db`,
   statistics and shapes written as text and its comparison fields added. It reads the fields named
   here (`STAT_KEYS`, `FILE_KEY`, `NO_FILE`, `SCALAR_TYPES`); the tests check its columns against
   routes 1 and 2 on the dump the file was made from.

A change of the schema is made here, in `Leaf` and `leaf_row`; the tests then show which route
still reads the old way.
"""

from __future__ import annotations

import json
from sys import intern
from typing import Any

import msgspec
import orjson
from msgspec import UNSET, UnsetType

from graphcmp.core.records import STAT_NAMES, Role

__all__ = ["COLUMNS", "FILE_KEY", "NO_FILE", "OBJECT_FIELDS", "ROLE_KEYS", "SCALAR_FIELDS", "SCALAR_TYPES",
           "STAT_KEYS", "Leaf", "file_name", "is_tensor", "leaf_row", "text"]

STAT_KEYS = ("Max", "Min", "Mean", "Norm")
"""The statistics of a tensor leaf, in `STAT_NAMES` order (the columns of `TensorTable.stats`)."""
assert tuple(k.lower() for k in STAT_KEYS) == STAT_NAMES

FILE_KEY = "data_name"
"""The tensor file of a leaf (tensor task); one of `NO_FILE` when there is none."""
NO_FILE = (None, "-1", -1, UNSET)
SCALAR_FIELDS = frozenset({"type", "value", "requires_grad"})
"""The fields of a scalar or other value; the rest of such a leaf is kept as its text."""
OBJECT_FIELDS = ("group_ranks", "group_id", "format")
"""Fields of the other arguments msprobe records by more than a value, in the order it writes them: a process
group (``torch.ProcessGroup``: its ranks and id; every communication call has one) and a memory format."""
SCALAR_TYPES = ("int", "float", "bool")
"""``type`` of the number arguments (a number ``value`` gives shape "scalar" and its value as statistics)."""

COLUMNS = ("dtype", "shape", "md5", "file", "value", *STAT_KEYS)
"""What `leaf_row` returns, in order."""

ROLE_KEYS = (  # plain ints: enum access is slow in the per-leaf loops
    ("input_args", int(Role.INPUT)),
    ("input", int(Role.INPUT)),
    ("input_kwargs", int(Role.INPUT)),
    ("output", int(Role.OUTPUT)),
    ("parameters", int(Role.PARAM)),
)
"""Keys of a call's record that hold leaves, and the role of their tensors (parameter-gradient
records of a module hold parameter names instead, all of role PARAM_GRAD)."""

_Stat = float | bool | UnsetType | None  # JSON ints decode as floats, as numpy would convert them


class Leaf(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One argument as msprobe records it: a tensor's statistics, or a scalar's type and value.

    UNSET tells a field that was absent from one written as null, as a plain dict does. Not tracked by the
    cyclic garbage collector (values decoded from JSON hold no cycle): cheaper to make and to free.
    """

    type: str
    dtype: str | UnsetType | None = UNSET
    shape: tuple[int, ...] | UnsetType | None = UNSET
    Max: _Stat = UNSET
    Min: _Stat = UNSET
    Mean: _Stat = UNSET
    Norm: _Stat = UNSET
    requires_grad: Any = None
    md5: str | UnsetType | None = UNSET
    data_name: str | UnsetType | None = UNSET
    value: Any = UNSET
    group_ranks: Any = UNSET
    group_id: Any = UNSET
    format: Any = UNSET


assert set(STAT_KEYS) | {FILE_KEY, "dtype", "shape", "md5"} | SCALAR_FIELDS | set(OBJECT_FIELDS) == set(
    Leaf.__struct_fields__)


def is_tensor(leaf: Any) -> bool:
    """True for a plain-dict leaf that records a tensor (it has a dtype or a statistic)."""
    return type(leaf) is dict and ("dtype" in leaf or "Max" in leaf)


def leaf_row(leaf: Any) -> tuple:
    """The tensor row of one plain leaf, in `COLUMNS` order: the reference every route is checked against.

    Examples
    --------
    >>> leaf_row({"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...           "Mean": 0.5, "Norm": None, "data_name": "-1"})
    ('torch.float32', '[2]', '', '', '', 1.0, 0.0, 0.5, None)
    >>> leaf_row({"type": "int", "value": 3})
    ('int', 'scalar', '', '', '3', 3.0, 3.0, 3.0, None)
    >>> leaf_row({"type": "str", "value": "mean"})
    ('str', '', '', '', 'mean', None, None, None, None)
    """
    if isinstance(leaf, dict) and ("dtype" in leaf or "Max" in leaf):
        return (intern(str(leaf.get("dtype") or "")), intern(str(leaf["shape"])) if "shape" in leaf else "",
                str(leaf.get("md5") or ""), file_name(leaf.get(FILE_KEY)), "",
                *(leaf.get(k) for k in STAT_KEYS))
    if not isinstance(leaf, dict):
        return type(leaf).__name__, "", "", "", text(leaf), None, None, None, None
    kind = str(leaf.get("type", ""))
    value = leaf.get("value")
    if isinstance(value, (int, float)):  # bool included: True compares as 1.0
        v = float(value)
        return kind, "scalar", "", "", text(value), v, v, v, None
    shown = text(value) if "value" in leaf else text({k: v for k, v in leaf.items() if k not in SCALAR_FIELDS})
    return kind, "", "", "", shown, None, None, None, None


def file_name(name: Any) -> str:
    """The tensor file column of a leaf's `FILE_KEY` ("" when it names none)."""
    return "" if name in NO_FILE else str(name)


def text(value: Any) -> str:
    """The value column of a non-tensor leaf: a string as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, default=str).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits (a seed ...): Python's json writes any integer
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
