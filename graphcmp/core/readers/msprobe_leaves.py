"""dump.json records of msprobe → tensor columns of a `HierarchyBuilder`.

Every record's arguments are flattened into leaves (lists by index, keyword dicts by key), and
the leaves become columns in one go. Records come in two shapes:

* plain dicts, as orjson or the standard library parse them (any file msprobe can write);
* `typed_records`: the same records decoded by msgspec into `Leaf` structs (a 32 MB dump.json
  decodes in 0.10 s, against 0.19 s into dicts with orjson, and attributes read faster than dict
  keys). It covers the common schema only and returns None for anything else (bare NaN/Infinity,
  unknown leaf fields, deep nesting), so the caller falls back to plain dicts.

Both give the same columns: `msprobe_schema` declares the leaf (`Leaf`) and its row (`leaf_row`),
says which route runs when, and its tests check every route against it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Container, Iterable, Sequence
from itertools import chain, compress, repeat
from operator import attrgetter, is_not, itemgetter
from sys import intern
from types import NoneType
from typing import Any

import msgspec
import numpy as np
import orjson
from msgspec import UNSET, UnsetType

from graphcmp.core.arrays import sorted_unique
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.readers.msprobe_schema import (
    FILE_KEY,
    OBJECT_FIELDS,
    ROLE_KEYS,
    SCALAR_FIELDS,
    STAT_KEYS,
    Leaf,
    file_name,
    leaf_row,
    text,
)
from graphcmp.core.readers.naming import parse_node_id, parse_node_ids
from graphcmp.core.records import NodeKind, Role
from graphcmp.core.texts import TextCodes

__all__ = ["DUMP_FILE", "Leaf", "Leaves", "Misfit", "add_leaves", "collect_record", "collect_records", "collect_typed",
           "md5_flag", "mixed_records", "requires_grad_code", "typed_records"]

DUMP_FILE = "dump.json"  # the file these records come from, for messages
_PARAM_GRAD = int(Role.PARAM_GRAD)
_SLOTS = tuple(intern(str(i)) for i in range(64))  # the slots of top-level arguments, made once
_SLOT_RUNS = tuple(_SLOTS[:n] for n in range(len(_SLOTS) + 1))  # the slots of a list of n arguments


class Misfit(Exception):
    """A typed chunk holds a leaf that plain dicts would read differently: read the chunk as dicts."""


class _BadStatistic(Exception):
    """Leaf `index` has a statistic that is not a number (`add_leaves` names its node)."""

    def __init__(self, index: int, key: str, value: Any) -> None:
        super().__init__(index, key, value)
        self.index, self.key, self.value = index, key, value


_Item = Leaf | list[Leaf | list[Any] | None] | None
_Record = dict[str, list[_Item] | dict[str, _Item] | bool | None]
_RECORDS = msgspec.json.Decoder(dict[str, _Record])
_RECORD = msgspec.json.Decoder(_Record)
_RAW_RECORDS = msgspec.json.Decoder(dict[str, msgspec.Raw])


def typed_records(text: bytes) -> dict[str, dict[str, Any]] | None:
    """The records of a ``{node_id: record}`` object with `Leaf` structs, or None when it does not fit."""
    try:
        return _RECORDS.decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError):  # the last: bytes not UTF-8
        return None
    except RecursionError:  # nested deeper than msgspec follows: the whole-file read says so in one line
        return None


def mixed_records(text: bytes) -> tuple[dict[str, Any], set[str]] | None:
    """The records of a chunk that does not fit `typed_records` as a whole: each record typed when it fits,
    else as the plain dict orjson gives (a communication call's process-group argument has fields no
    `Leaf` declares); with the ids of the plain ones. None when the chunk is not JSON msgspec reads
    (bare NaN/Infinity)."""
    try:
        raw = _RAW_RECORDS.decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    records: dict[str, Any] = {}
    plain: set[str] = set()
    for node_id, value in raw.items():
        try:
            records[node_id] = _RECORD.decode(value)
        except msgspec.ValidationError:
            try:
                records[node_id] = orjson.loads(bytes(value))
            except orjson.JSONDecodeError:  # a number beyond float64, nesting beyond orjson's: read whole, said
                return None
            plain.add(node_id)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return None
    return records, plain


class Leaves:
    """Flattened leaves of a chunk's records: parallel lists, turned into columns in one go. A leaf's node is its
    record's position in `ids` (the records' node ids, in order): a code per leaf, the id looked up once per record."""

    __slots__ = ("ids", "leaf", "node", "role", "slot")

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        self.node: list[int] = []
        self.role: list[int] = []
        self.slot: list[str] = []
        self.leaf: list[Any] = []

    def node_ids(self) -> list[str]:
        """The node id of each leaf."""
        return list(map(self.ids.__getitem__, self.node))

    def collect(self, node: int, role: int, value: Any, prefix: str) -> None:
        """Flatten nested args of the record at position `node`: lists by index, dicts without "type" by key."""
        if type(value) is list:
            for i, item in enumerate(value):
                slot = _SLOTS[i] if not prefix and i < len(_SLOTS) else intern(f"{prefix}.{i}" if prefix else str(i))
                kind = type(item)
                if kind is Leaf or (kind is dict and "type" in item):  # the common case, without recursion
                    self.node.append(node)
                    self.role.append(role)
                    self.slot.append(slot)
                    self.leaf.append(item)
                elif item is not None:
                    self.collect(node, role, item, slot)
        elif isinstance(value, dict) and "type" not in value:
            for key, item in value.items():
                self.collect(node, role, item, f"{prefix}.{key}" if prefix else str(key))
        elif value is not None:
            self.node.append(node)
            self.role.append(role)
            self.slot.append(intern(prefix or "0"))
            self.leaf.append(value)


def collect_records(records: dict[str, Any], source: str) -> Leaves:
    """The leaves of plain-dict records, record by record."""
    leaves = Leaves(list(records))
    for row, record in enumerate(records.values()):
        collect_record(leaves, row, record, source)
    return leaves


def collect_record(leaves: Leaves, row: int, record: Any, source: str) -> None:
    """Add the leaves of the record of ``leaves.ids[row]`` (inputs, outputs, parameters, or a module's parameter
    gradients)."""
    if not isinstance(record, dict):
        raise DumpFormatError(f"{source}/{DUMP_FILE}: {leaves.ids[row]!r}: record is a {type(record).__name__}, "
                              "expected an object of inputs/outputs")
    if _is_param_grad(leaves.ids[row]):
        _collect_param_grads(leaves, row, record)
        return
    for role_key, role in ROLE_KEYS:
        value = record.get(role_key)
        if value is None:
            continue
        if isinstance(value, dict) and "type" in value:
            value = [value]
        leaves.collect(row, role, value, "")


def _collect_param_grads(leaves: Leaves, row: int, record: dict[str, Any]) -> None:
    """A module's parameter-gradient record: ``{parameter name: gradient or [gradient]}``."""
    for key, value in record.items():
        single = value[0] if isinstance(value, list) and len(value) == 1 else value
        leaves.collect(row, _PARAM_GRAD, single, str(key))


_PARAM_GRAD_KIND = int(NodeKind.PARAM_GRAD)


def _is_param_grad(node_id: str) -> bool:
    """True for a module's parameter-gradient record (only such ids hold "parameters_grad": the cheap test first)."""
    return "parameters_grad" in node_id and parse_node_id(node_id)[0] == _PARAM_GRAD_KIND


_NO_ROLES: dict[str, Any] = {}  # a record whose roles `collect_typed` leaves to another path


def collect_typed(records: dict[str, Any], source: str, plain: Container[str] = ()) -> Leaves:
    """The leaves of a `typed_records` chunk, role by role in bulk; the records named in `plain` (plain dicts among
    typed ones, see `mixed_records`) record by record.

    A role's values that are lists of `Leaf` structs and None (arguments, outputs) or dicts of them
    (keyword arguments, parameters, a module's parameter gradients) are flattened with
    `itertools.chain`, so no Python code runs per leaf; a value holding anything else (a nested list
    or dict) goes through `collect_record`'s per-record path. Leaves come out role-major instead of
    node-major: the tensor table sorts them by node (stable), which restores each node's own order.
    """
    ids = list(records)
    values = list(records.values())
    leaves = Leaves(ids)
    apart = [k for k, node_id in enumerate(ids) if node_id in plain] if plain else []
    named = [k for k, node_id in enumerate(ids) if "parameters_grad" in node_id and node_id not in plain]  # cheap first
    grads = [k for k, kind in zip(named, parse_node_ids(map(ids.__getitem__, named))[0]) if kind == _PARAM_GRAD_KIND]
    if grads:
        _add_param_grads(leaves, [values[k] for k in grads], grads)
    for k in apart:
        collect_record(leaves, k, values[k], source)
    for k in (*grads, *apart):
        values[k] = _NO_ROLES
    for role_key, role in ROLE_KEYS:
        column = list(map(dict.get, values, repeat(role_key)))  # the unbound method: no bound method per record
        kinds = list(map(type, column))
        if kinds.count(NoneType) == len(kinds):
            continue
        lists, dicts = kinds.count(list), kinds.count(dict)  # a role holds lists or dicts: skip the other kind
        rest = _add_lists(leaves, role, column, kinds) if lists else []
        rest += _add_dicts(leaves, role, column, kinds) if dicts else []
        if lists + dicts + kinds.count(NoneType) != len(kinds):  # a single leaf, another value
            rest += [k for k, kind in enumerate(kinds) if kind not in _CONTAINERS]
        for k in sorted(rest):
            value = column[k]
            leaves.collect(k, role, [value] if isinstance(value, dict) and "type" in value else value, "")
    return leaves


def _add_param_grads(leaves: Leaves, records: list[dict[str, Any]], rows: list[int]) -> None:
    """Add parameter-gradient records (``{name: gradient or [gradient]}``, the names are the slots) in bulk, those
    holding other values record by record."""
    gradients = chain.from_iterable(map(dict.values, records))
    items = [v[0] if type(v) is list and len(v) == 1 else v for v in gradients]
    odd = [k for k, record in enumerate(records) if "" in record]  # "": its leaf's slot is "0"
    rest = _add_flat(leaves, _PARAM_GRAD, rows, list(map(len, records)), items,
                     map(intern, chain.from_iterable(records)), odd)  # JSON keys: str already
    record_of = dict(zip(rows, records))
    for k in rest:
        _collect_param_grads(leaves, k, record_of[k])


def _add_lists(leaves: Leaves, role: int, column: list[Any], kinds: list[type]) -> list[int]:
    """Add the role's lists of `Leaf` structs and None (slots "0", "1", ...); return the positions of the others
    (a nested list, more than 64 arguments)."""
    rows = [k for k, kind in enumerate(kinds) if kind is list]
    lists = [column[k] for k in rows]
    lengths = list(map(len, lists))
    long = [k for k, n in enumerate(lengths) if n > len(_SLOTS)] if max(lengths, default=0) > len(_SLOTS) else []
    runs = [_SLOT_RUNS[n] if n < len(_SLOT_RUNS) else repeat("", n) for n in lengths] if long else \
        map(_SLOT_RUNS.__getitem__, lengths)  # a long list's leaves are left out: placeholders keep the count
    slots = chain.from_iterable(runs)
    return _add_flat(leaves, role, rows, lengths, chain.from_iterable(lists), slots, long)


def _add_dicts(leaves: Leaves, role: int, column: list[Any], kinds: list[type]) -> list[int]:
    """Add the role's dicts of `Leaf` structs and None (their keys are the slots); return the positions of the
    others (a nested value; a "type" key makes the dict one leaf to plain dicts; a "" key gives slot "0")."""
    rows = [k for k, kind in enumerate(kinds) if kind is dict and column[k]]
    dicts = [column[k] for k in rows]
    odd = [k for k, d in enumerate(dicts) if "type" in d or "" in d]
    items = chain.from_iterable(map(dict.values, dicts))
    return _add_flat(leaves, role, rows, list(map(len, dicts)), items,
                     map(intern, chain.from_iterable(dicts)), odd)  # JSON keys: str already


_CONTAINERS = frozenset({list, dict, NoneType})  # a role's values flattened in bulk (None: no value)
_ITEM_CODE = {Leaf: 0, NoneType: 1}  # anything else: 2, a value the per-record path flattens


def _add_flat(leaves: Leaves, role: int, rows: list[int], lengths: list[int], items: Iterable[Any],
              slots: Iterable[str], odd: list[int]) -> list[int]:
    """Add the items of the containers at positions `rows` (`lengths` items each; `items` and `slots` flattened)
    but those of containers holding something other than `Leaf` or None and the containers `odd` (indexes of
    `rows`); return the positions of the containers left out."""
    items = list(items)
    nodes = chain.from_iterable(map(repeat, rows, lengths))
    mask, skipped = _kept(items, rows, lengths, odd)
    if mask is None:
        leaves.leaf.extend(items)
        leaves.slot.extend(slots)
        leaves.node.extend(nodes)
    else:
        leaves.leaf.extend(compress(items, mask))
        leaves.slot.extend(compress(slots, mask))
        leaves.node.extend(compress(nodes, mask))
    leaves.role.extend(repeat(role, len(leaves.leaf) - len(leaves.role)))
    return [rows[k] for k in skipped]


def _kept(items: list[Any], rows: list[int], lengths: list[int], odd: list[int]) -> tuple[list[bool] | None, list[int]]:
    """Which `items` `_add_flat` adds (None: all, the common case) and the indexes of the containers it leaves out.
    Without numpy when the items are `Leaf` and None only (nearly all containers): a numpy call costs more than
    such a chunk's items."""
    kinds = set(map(type, items))
    if not odd and kinds <= _LEAF_OR_NONE:
        return (None if NoneType not in kinds else list(map(is_not, items, repeat(None)))), []
    codes = np.fromiter(map(_ITEM_CODE.get, map(type, items), repeat(2)), np.int8, len(items))
    owner = np.repeat(np.arange(len(rows)), lengths)
    skipped = np.zeros(len(rows), bool)
    skipped[owner[codes == 2]] = True
    skipped[odd] = True
    return ((codes == 0) & ~skipped[owner]).tolist(), np.flatnonzero(skipped).tolist()


_LEAF_OR_NONE = frozenset({Leaf, NoneType})


def md5_flag(records: dict[str, Any], source: str) -> bool | None:
    """Whether the first tensor record has an md5 (None when there is no tensor record)."""
    for node_id, record in records.items():
        for leaf in collect_records({node_id: record}, source).leaf:
            if type(leaf) is Leaf and leaf.dtype is not UNSET:
                return leaf.md5 is not UNSET
            if isinstance(leaf, dict) and "dtype" in leaf:
                return "md5" in leaf
    return None


def add_leaves(builder: HierarchyBuilder, leaves: Leaves, *, typed: bool = False, source: str = DUMP_FILE) -> None:
    """Turn the leaves into tensor columns of `builder`; `typed` when they come from `typed_records`.

    Raises
    ------
    Misfit
        If `typed` leaves hold one that plain dicts would read differently.
    DumpFormatError
        If a statistic is not a number (text, a list, an object; true/false but on a bool tensor), naming
        `source` (the dump.json), the node, the argument and the field: such a value is no measurement, and
        reading it as NaN would report an overflow that never happened.
    """
    items = leaves.leaf
    if not items:
        return
    try:
        dtype, shape, md5, file, value, stats, present, grad = (_struct_columns if typed else _dict_columns)(items)
    except _BadStatistic as bad:
        i = bad.index
        where = f"{Role(leaves.role[i]).name.lower().replace('_', ' ')} {leaves.slot[i]}"
        raise DumpFormatError(f"{source}: {leaves.ids[leaves.node[i]]!r} {where}: {bad.key} is {_shown(bad.value)}, "
                              "expected a number (or null); the record is damaged") from None
    slot = _part(_text_column(leaves.slot, str))  # str of a text is that text
    node = TextCodes(np.fromiter(leaves.node, np.int32, len(leaves.node)), leaves.ids)
    builder.add_tensors(node, leaves.role, slot, dtype=dtype, shape=shape, stats=stats, present=present, md5=md5,
                        file=file, value=value, requires_grad=grad)


def _dict_columns(items: list[Any]) -> tuple:
    """Columns of plain-dict leaves (route 2 of `msprobe_schema`): one comprehension per column over the
    tensor records (nearly all leaves), `leaf_row` for the few scalars and other values."""
    tensor = [type(x) is dict and ("dtype" in x or "Max" in x) for x in items]
    empty = {}
    recs = [x if t else empty for x, t in zip(items, tensor)]
    dtype = [intern(str(x.get("dtype") or "")) for x in recs]
    shape = [intern(str(x["shape"])) if "shape" in x else "" for x in recs]
    md5 = [str(x.get("md5") or "") for x in recs]
    file = [file_name(x.get(FILE_KEY)) for x in recs]
    stats = [[x.get("Max"), x.get("Min"), x.get("Mean"), x.get("Norm")] for x in recs]
    value = [""] * len(items)
    for i in [i for i, t in enumerate(tensor) if not t]:
        dtype[i], shape[i], md5[i], file[i], value[i], *stats[i] = leaf_row(items[i])
    raw = np.array(stats, dtype=object)
    present = raw != None  # noqa: E711 - elementwise test on an object array
    try:
        values = np.where(present, raw, 0.0).astype(np.float64)
    except (TypeError, ValueError):  # a text statistic ("inf" reads, "abc" does not), a list
        values = np.array([[_number(i, k, v) for k, v in zip(STAT_KEYS, row)] for i, row in enumerate(stats)],
                          np.float64).reshape(-1, 4)
    _check_bools(values, present, lambda i: stats[i], dtype, bool in set(map(type, raw.ravel().tolist())))
    grad = [requires_grad_code(x.get("requires_grad")) if type(x) is dict else -1 for x in items]
    return dtype, shape, md5, file, value, values, present.astype(bool), grad


_BLANK = Leaf(type="", dtype="", Max=None, Min=None, Mean=None, Norm=None)
_NUMBERS = (int, float, bool)
_PLAIN_FIELDS = (*SCALAR_FIELDS, *OBJECT_FIELDS)


def _struct_columns(items: list[Any]) -> tuple:
    """Columns of `typed_records` leaves (route 1 of `msprobe_schema`): attribute reads per column; stats
    straight into floats.

    A typed chunk holds no NaN (bare NaN is not JSON, so such a chunk is never typed): a NaN in
    the float array of a tensor row is a null or absent statistic, which is what `present` reads.

    Raises
    ------
    Misfit
        If a leaf that is not a tensor would read differently from its plain dict.
    """
    odd = [i for i, x in enumerate(items) if type(x) is not Leaf or (x.dtype is UNSET and x.Max is UNSET)]
    recs = items
    if odd:
        recs = items.copy()
        for i in odd:
            recs[i] = _BLANK
    dtypes, shapes, *stat_columns, grads, md5s, files = [list(map(get, recs)) for get in _FIELD_GETTERS]
    dtype = _text_column(dtypes, lambda v: intern(v or ""))
    shape = _text_column(shapes, _shape_text)
    md5 = _text_column(md5s, lambda v: v or "")
    file = _text_column(files, file_name)
    stats, present = _stat_array(stat_columns, len(items))
    has_bools = _holds_bool(stats, stat_columns)
    value = _TextColumn(np.zeros(len(items), np.int32), [""])
    if odd:
        _odd_rows(items, odd, dtype, shape, md5, file, value, stats, present)
    stats[~present] = 0.0  # as plain dicts give: an absent statistic is a 0 that `present` masks
    _check_bools(stats, present, lambda i: [None if v is UNSET else v for v in (c[i] for c in stat_columns)], dtype,
                 has_bools)
    grad = [1 if v is True else 0 if v is False else -1 for v in grads]  # not by value: True == 1
    for i in odd:  # read as plain dicts read them
        x = items[i]
        grad[i] = requires_grad_code(x.requires_grad if type(x) is Leaf else
                                     x.get("requires_grad") if type(x) is dict else None)
    return (*map(_part, (dtype, shape, md5, file, value)), stats, present, grad)


def _stat_array(stat_columns: list[tuple], n: int) -> tuple[np.ndarray, np.ndarray]:
    """The (n, 4) float statistics of the leaves (NaN where null or absent) and where they are present."""
    stats = np.empty((n, 4))
    try:
        for k, column in enumerate(stat_columns):  # column by column: no tuple per row
            stats[:, k] = np.fromiter(column, np.float64, n)
    except TypeError:  # an absent statistic (UNSET): as null
        rows = zip(*stat_columns)
        stats = np.array([[None if v is UNSET else v for v in row] for row in rows], np.float64).reshape(-1, 4)
    return stats, ~np.isnan(stats)


def _holds_bool(stats: np.ndarray, stat_columns: list[tuple]) -> bool:
    """Whether a statistic was decoded as true/false: only the raw values read as 0.0 or 1.0 are looked at."""
    for k, column in enumerate(stat_columns):
        rows = np.flatnonzero((stats[:, k] == 0.0) | (stats[:, k] == 1.0)).tolist()
        if bool in map(type, map(column.__getitem__, rows)):
            return True
    return False


def _odd_rows(items: list[Any], odd: list[int], dtype: list[str], shape: list[str], md5: list[str], file: list[str],
              value: list[str], stats: np.ndarray, present: np.ndarray) -> None:
    """Fill the rows of the leaves that are no tensor, as plain dicts read them (`leaf_row`); a number argument
    gets shape "scalar" and its value as max, min and mean."""
    scalars = [i for i in odd if type(x := items[i]) is Leaf and type(x.value) in _NUMBERS and x.shape is UNSET
               and x.Min is UNSET and x.Mean is UNSET and x.Norm is UNSET and x.md5 is UNSET
               and x.data_name is UNSET]
    if scalars:
        numbers = [items[i].value for i in scalars]
        stats[scalars, :3] = np.array(numbers, np.float64)[:, None]
        present[scalars] = (True, True, True, False)
        _set_all(dtype, scalars, [items[i].type for i in scalars])
        _set_all(shape, scalars, repeat("scalar", len(scalars)))
        _set_all(value, scalars, map(text, numbers))  # the number as JSON
    for i in sorted(set(odd).difference(scalars)):
        dtype[i], shape[i], md5[i], file[i], value[i], *row = leaf_row(_as_plain(items[i]))
        stats[i] = [math.nan if v is None else _number(i, k, v) for k, v in zip(STAT_KEYS, row)]
        present[i] = [v is not None for v in row]
        if (true_false := next((kv for kv in zip(STAT_KEYS, row) if type(kv[1]) is bool), None)) and (
                "bool" not in dtype[i].lower()):
            raise _BadStatistic(i, *true_false)  # as `_check_bools` does for the other rows


def _set_all(column: _TextColumn | list[Any], rows: list[int], values: Iterable[Any]) -> None:
    """``column[r] = v`` for every row and value, in C for a list."""
    if type(column) is _TextColumn:
        column.set_all(rows, values)
    else:
        deque(map(column.__setitem__, rows, values), maxlen=0)


_COLUMN_FIELDS = ("dtype", "shape", *STAT_KEYS, "requires_grad", "md5", FILE_KEY)
_FIELD_GETTERS = tuple(map(attrgetter, _COLUMN_FIELDS))
"""A leaf's fields that `_struct_columns` reads, a column each: one getter per field over a chunk's leaves (a fifth
faster than `msgspec.structs.astuple` of every leaf transposed by ``zip``, which also makes the fields no column
takes)."""


def requires_grad_code(value: Any) -> int:
    """A leaf's ``requires_grad`` as the tensor column holds it: 1 true, 0 false, -1 not recorded (or not a bool).

    >>> requires_grad_code(True), requires_grad_code(False), requires_grad_code(None), requires_grad_code("x")
    (1, 0, -1, -1)
    """
    return 1 if value is True else 0 if value is False else -1


class _TextColumn:
    """A chunk's text column as codes into its distinct texts, a few rows of which are set afterwards."""

    __slots__ = ("codes", "index", "names")

    def __init__(self, codes: np.ndarray, names: list[str]) -> None:
        self.codes, self.names = codes, names
        self.index = {name: k for k, name in enumerate(names)}

    def __getitem__(self, row: int) -> str:
        return self.names[self.codes[row]]

    def __setitem__(self, row: int, text: str) -> None:
        self.codes[row] = self._code(text)

    def set_all(self, rows: list[int], texts: Iterable[str]) -> None:
        texts = list(texts)
        code_of = {text: self._code(text) for text in dict.fromkeys(texts)}  # few distinct texts: each coded once
        self.codes[rows] = np.fromiter(map(code_of.__getitem__, texts), np.int32, len(rows))

    def _code(self, text: str) -> int:
        code = self.index.get(text)
        if code is None:
            code = self.index[text] = len(self.names)
            self.names.append(text)
        return code

    def coded(self) -> TextCodes:
        return TextCodes(self.codes, self.names)


def _part(column: _TextColumn | list[str]) -> TextCodes | list[str]:
    """A column as `HierarchyBuilder.add_tensors` takes it."""
    return column.coded() if type(column) is _TextColumn else column


def _text_column(values: Sequence[Any], convert: Any) -> _TextColumn | list[str]:
    """`convert` of every value, computed once per distinct value: codes when the column holds few distinct
    texts (dtypes, shapes), the texts themselves when most differ (the md5 of each tensor)."""
    n = len(values)
    if n and values[0] is values[-1] and values.count(values[0]) == n:  # one object throughout (absent md5s, files)
        return _TextColumn(np.zeros(n, np.int32), [convert(values[0])])
    distinct = dict.fromkeys(values)
    if len(distinct) * 2 > n and n > 1:
        table = {v: convert(v) for v in distinct}
        return list(map(table.__getitem__, values))
    texts = [convert(v) for v in distinct]
    names = list(dict.fromkeys(texts))
    code_of = dict(zip(distinct, map({name: k for k, name in enumerate(names)}.__getitem__, texts)))
    if len(code_of) == 1:
        return _TextColumn(np.zeros(n, np.int32), names)
    return _TextColumn(np.fromiter(itemgetter(*values)(code_of), np.int32, n), names)


def _shape_text(shape: tuple[int, ...] | UnsetType | None) -> str:
    """The text a plain dict's shape gives (``str([2, 32])``); "" when absent."""
    return "" if shape is UNSET else intern(str(None if shape is None else list(shape)))


def _as_plain(leaf: Any) -> Any:
    """A leaf that is not a tensor as the plain value it was decoded from."""
    if type(leaf) is Leaf:
        if any(getattr(leaf, f) is not UNSET for f in leaf.__struct_fields__ if f not in _PLAIN_FIELDS):
            raise Misfit  # its text would list the other fields in the file's order
        plain = {"type": leaf.type, **{f: v for f in OBJECT_FIELDS if (v := getattr(leaf, f)) is not UNSET}}
        return plain if leaf.value is UNSET else {**plain, "value": leaf.value}
    if _holds_leaf(leaf):
        raise Misfit  # a keyword dict with a "type" key, read as one leaf by plain dicts
    return leaf


def _holds_leaf(value: Any) -> bool:
    if type(value) is Leaf:
        return True
    if isinstance(value, dict):
        return any(_holds_leaf(v) for v in value.values())
    return isinstance(value, list) and any(_holds_leaf(v) for v in value)


def _number(index: int, key: str, value: Any) -> float:
    """A statistic as a float: a number, or text that is one ("inf", "nan"); else `_BadStatistic`."""
    if value is None:
        return 0.0  # absent: `present` masks it
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise _BadStatistic(index, key, value) from None


def _check_bools(stats: np.ndarray, present: np.ndarray, row: Any, dtype: list[str], has_bools: bool) -> None:
    """`_BadStatistic` for a true/false statistic of a tensor that is not bool (msprobe writes them for bool
    tensors only). Read as 1.0/0.0, so only when `has_bools` (the raw values hold one) are the rows holding such a
    value looked at, by `row(i)` (their raw values)."""
    if not has_bools:
        return
    candidates = np.flatnonzero(((stats == 0.0) | (stats == 1.0)) & present)
    for i in sorted_unique(candidates // stats.shape[1]).tolist():
        values = row(i)
        for key, v in zip(STAT_KEYS, values):
            if type(v) is bool and "bool" not in dtype[i].lower():
                raise _BadStatistic(i, key, v)


def _shown(value: Any) -> str:
    """A bad statistic as the file writes it (JSON), cut to 40 characters."""
    shown = text(value) if not isinstance(value, str) else orjson.dumps(value).decode()
    return shown if len(shown) <= 40 else shown[:37] + "..."

