"""Typed reads of graphcmp's own JSON documents (reports, graphs): every field checked where it is read.

A document read from disk may be damaged or not graphcmp's: `Fields` turns each missing field,
wrong type or wrong length into a `DumpFormatError` naming the file and the field (``npu.nodes.kind``),
so the code that rebuilds records from checked values never meets bad input. An error it raises
after that is a graphcmp bug, which callers report as `InternalError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.export.columns import decode_floats, unpack_bits
from graphcmp.core.texts import CodedTexts

__all__ = ["Fields"]

_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
               bool: "true or false", type(None): "null"}


class Fields:
    """The fields of one JSON object of a document, read with their types checked.

    Parameters
    ----------
    doc : Any
        The parsed object (anything else is reported as a bad field).
    source : str
        The file, for messages.
    path : str
        Where `doc` sits in the document (``"npu.nodes"``), for messages; "" at the top.

    Examples
    --------
    >>> f = Fields({"nodes": {"kind": [1, 2]}}, "cmp.json")
    >>> f.child("nodes").ints("kind", 2).tolist()
    [1, 2]
    >>> f.child("nodes").ints("kind", 3)
    Traceback (most recent call last):
    ...
    graphcmp.core.errors.DumpFormatError: cmp.json: field nodes.kind holds 2 values, expected 3; \
is the file damaged? rerun graphcmp to rewrite it
    """

    def __init__(self, doc: Any, source: str, path: str = "") -> None:
        self.source, self.path = source, path
        if not isinstance(doc, Mapping):
            raise self.error("", f"is {_type_name(doc)}, expected an object")
        self.doc = doc

    def error(self, key: str, what: str) -> DumpFormatError:
        """The error for field `key` of this object (`what`: what is wrong with it)."""
        where = ".".join(p for p in (self.path, key) if p) or "the document"
        return DumpFormatError(f"{self.source}: field {where} {what}; "
                               "is the file damaged? rerun graphcmp to rewrite it")

    def has(self, key: str) -> bool:
        return key in self.doc

    def value(self, key: str, *types: type, default: Any = ...) -> Any:
        """The field, which must be one of `types` (absent: `default`, or an error without one)."""
        if key not in self.doc:
            if default is ...:
                raise self.error(key, "is missing")
            return default
        value = self.doc[key]
        if types and not (isinstance(value, types) and not (isinstance(value, bool) and bool not in types)):
            raise self.error(key, f"is {_type_name(value)}, expected {' or '.join(map(_type_name_of, types))}")
        return value

    def child(self, key: str) -> Fields:
        """The object at field `key`."""
        return Fields(self.value(key, dict), self.source, ".".join(p for p in (self.path, key) if p))

    def items(self, key: str, default: Any = ...) -> list[Any]:
        """The list at field `key` (absent: `default`)."""
        return self.value(key, list, default=default)

    def array(self, key: str, dtype: Any, length: int | None = None) -> np.ndarray:
        """The list of numbers at field `key` (or a column of an npz result) as an array of `dtype`,
        `length` long when given."""
        values = self.value(key, list, np.ndarray)
        if isinstance(values, np.ndarray):
            out = self._cast(key, values, np.dtype(dtype))
        else:
            try:
                out = np.asarray(values, dtype)
            except (TypeError, ValueError, OverflowError) as err:
                raise self.error(key, f"does not hold {np.dtype(dtype).name} values ({err})") from err
        return self._checked(key, out.reshape(-1) if out.ndim == 1 or not len(values) else out, length, 1)

    def _cast(self, key: str, values: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """A stored column as `dtype`: bools, integers within its range, or any real numbers for floats."""
        kind = values.dtype.kind
        fits = {"b": kind == "b", "i": kind in "biu", "f": kind in "biuf"}.get(dtype.kind, False)
        if not fits:
            raise self.error(key, f"holds {values.dtype} values, expected {dtype.name}")
        if dtype.kind == "i" and values.size and not np.can_cast(values.dtype, dtype):
            info = np.iinfo(dtype)
            if int(values.min()) < info.min or int(values.max()) > info.max:
                raise self.error(key, f"holds values outside the range of {dtype.name}")
        return values.astype(dtype, copy=False)

    def ints(self, key: str, length: int | None = None, dtype: Any = np.int32) -> np.ndarray:
        """`array` of integers."""
        return self.array(key, dtype, length)

    def codes(self, key: str, length: int | None, codes: Iterable[int], dtype: Any = np.int8) -> np.ndarray:
        """`ints` that must each be one of `codes` (an enum's values).

        >>> Fields({"status": [0, 2, 300]}, "cmp.json").codes("status", 3, (-2, -1, 0, 1, 2), np.int16)
        Traceback (most recent call last):
        ...
        graphcmp.core.errors.DumpFormatError: cmp.json: field status holds 300 (row 2), expected one of -2, -1, 0, \
1, 2; is the file damaged? rerun graphcmp to rewrite it
        """
        stored = self.value(key, list, np.ndarray)
        as_stored = isinstance(stored, np.ndarray) and stored.dtype.kind == "i"  # an npz column: no wide copy
        out = self.ints(key, length, stored.dtype if as_stored else np.int64)  # a value beyond `dtype` is named
        allowed = np.array(sorted(set(codes)), np.int64)
        ok = (out >= allowed[0]) & (out <= allowed[-1])
        if len(allowed) < allowed[-1] - allowed[0] + 1:  # gaps in the codes (a lookup table: fast on small ranges)
            ok &= np.isin(out, allowed, kind="table")
        bad = np.flatnonzero(~ok)
        if bad.size:
            raise self.error(key, f"holds {out[bad[0]]} (row {bad[0]}), expected one of "
                                  f"{', '.join(map(str, allowed.tolist()))}")
        return out.astype(dtype)

    def rows(self, key: str, length: int | None, size: int, *, none: bool = True, dtype: Any = np.int32) -> np.ndarray:
        """`ints` that index a table of `size` rows (-1 for none, when `none`)."""
        out = self.ints(key, length, dtype)
        low = -1 if none else 0
        bad = np.flatnonzero((out < low) | (out >= size)) if out.size else out[:0]
        if bad.size:
            raise self.error(key, f"holds {out[bad[0]]} (row {bad[0]}), outside the {size} rows it indexes"
                                  f"{' (or -1: none)' if none else ''}")
        return out

    def bools(self, key: str, length: int | None = None) -> np.ndarray:
        return self.array(key, bool, length)

    def strings(self, key: str, length: int | None = None) -> tuple[str, ...]:
        """The list of strings at field `key`, `length` long when given.

        Only the first value's type is checked: a report holds millions of strings, and checking
        each would cost as much as reading them.
        """
        values = self.doc.get(key)
        if type(values) is not CodedTexts:  # a column of an npz result comes with its codes
            values = self.items(key)
        if values and type(values[0]) is not str:
            raise self.error(key, f"holds {_type_name(values[0])}, expected strings")
        return self._checked(key, values if type(values) is CodedTexts else tuple(values), length, 1)

    def id_column(self, key: str, length: int | None = None) -> tuple[tuple[str, ...], dict[str, int]]:
        """`strings` whose every value is a string and differs from the others (a run's node ids: given an id twice,
        a lookup would find one of two nodes, and an id that is a number would index nothing), with the row of each
        (what a run looks its ids up in: made here once, it costs the check nothing).

        >>> Fields({"id": ["a", "b"]}, "cmp.json").id_column("id")
        (('a', 'b'), {'a': 0, 'b': 1})
        >>> Fields({"id": ["a", "b", "a"]}, "cmp.json").id_column("id")
        Traceback (most recent call last):
        ...
        graphcmp.core.errors.DumpFormatError: cmp.json: field id holds 'a' twice (rows 0 and 2), expected each \
value once; is the file damaged? rerun graphcmp to rewrite it
        """
        values = self.strings(key, length)
        if type(values) is not CodedTexts and not all(type(v) is str for v in values):
            row = next(k for k, v in enumerate(values) if type(v) is not str)
            raise self.error(key, f"holds {values[row]!r} (row {row}), expected strings")
        rows = dict(zip(values, range(len(values))))
        if len(rows) != len(values):
            first: dict[str, int] = {}
            for row, value in enumerate(values):
                if value in first:
                    raise self.error(key, f"holds {value!r} twice (rows {first[value]} and {row}), expected each "
                                          "value once")
                first[value] = row
        return values, rows

    def floats(self, key: str, length: int | None = None, width: int | None = None) -> np.ndarray:
        """A float column written by `encode_floats` (``{"values", "special"}``), (length, width) when given."""
        column = self.child(key)
        values = column.value("values", list, np.ndarray)
        special = column.value("special", dict, default={})
        try:
            out = decode_floats({"values": values, "special": special})
        except (TypeError, ValueError, IndexError, KeyError) as err:
            raise self.error(key, f"is not a float column ({err})") from err
        if width is not None:
            if out.size != (length if length is not None else out.size // max(width, 1)) * width:
                raise self.error(key, f"holds {out.size} values, expected {length} rows of {width}")
            return out.reshape(-1, width)
        return self._checked(key, out.reshape(-1) if out.ndim <= 1 else out, length, 1)

    def bit_rows(self, key: str, length: int, width: int) -> np.ndarray:
        """Rows of `width` booleans packed one integer per row (`pack_bits`)."""
        return unpack_bits(self.ints(key, length, np.int64), width).reshape(length, width)

    def _checked(self, key: str, values: Any, length: int | None, ndim: int) -> Any:
        if length is not None and len(values) != length:
            raise self.error(key, f"holds {len(values)} values, expected {length}")
        if isinstance(values, np.ndarray) and values.ndim != ndim:
            raise self.error(key, f"has {values.ndim} dimensions, expected {ndim}")
        return values


def _type_name(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), f"a {type(value).__name__}")


def _type_name_of(kind: type) -> str:
    return _TYPE_NAMES.get(kind, kind.__name__)
