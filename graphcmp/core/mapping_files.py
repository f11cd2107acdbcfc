"""Reading matching-rule files (YAML, JSON, CSV) into entries that remember their file and line.

Every rule source (msprobe's layer/cell/API/data mapping files, get_op_map-style op tables,
Model Explorer mapping JSON) is read here into `RuleFile`s: a tuple of `RuleEntry` records, each
with ``where`` = ``"file:line"``, so a matcher can say which entry matched what and which
matched nothing. YAML is read with PyYAML (line numbers from its node tree), JSON with orjson
(plus a small scanner for line numbers), CSV with the standard library. Every problem with a
file is a `MappingError` whose message names the file and the line. A key repeated inside one
file is not an error: the first occurrence wins and the repeat is listed in `RuleFile.conflicts`.
"""

from __future__ import annotations

import csv
import io
import json.decoder
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from graphcmp.core.errors import DumpFormatError, MappingError
from graphcmp.core.inputs import open_regular

if TYPE_CHECKING:
    import yaml

__all__ = [
    "API_MAPPING_KEYS",
    "BUILTIN_MS_TO_PT_API",
    "BUILTIN_MS_TO_PT_LAYERS",
    "BUILTIN_MS_TO_PT_PARAMS",
    "MANUAL_FORMAT",
    "MANUAL_VERSION",
    "RuleEntry",
    "RuleFile",
    "load_api_mapping",
    "load_builtin",
    "load_builtin_op_table",
    "load_cell_mapping",
    "load_data_mapping",
    "load_layer_mapping",
    "load_manual_file",
    "load_me_mapping",
    "load_op_table",
    "parse_document",
]

BUILTIN_MS_TO_PT_API = "ms_to_pt_api.yaml"
"""Built-in MindSpore -> PyTorch API name table (msprobe's own, see the file's header)."""
BUILTIN_MS_TO_PT_PARAMS = "ms_to_pt_params.yaml"
BUILTIN_MS_TO_PT_LAYERS = "ms_to_pt_layers.yaml"
"""Built-in MindSpore -> PyTorch parameter names per layer class (``gamma`` -> ``weight`` ...)."""
BUILTIN_OP_TABLE = "pt15_npu_op_map.yaml"
"""Built-in op table of PyTorch 1.5 NPU dumps: Npu* autograd functions -> Cudnn* / Thnn* (see the file's header)."""
"""Built-in MindSpore -> PyTorch parameter names per layer class (``gamma`` -> ``weight`` ...)."""

API_MAPPING_KEYS = ("args", "outputs", "parameters", "parameters_grad")
"""Slot lists an msprobe API mapping may give per side (``ms_args`` / ``pt_args`` ...)."""

_TOP_LAYER = "TopLayer"
_LEGACY_TOP = "Cell"


@dataclass(frozen=True, slots=True)
class RuleEntry:
    """One rule as written in its file.

    Attributes
    ----------
    where : str
        ``"file:line"`` of the entry (1-based line).
    key : str
        The npu-side name (a child name, node id, API or op name ...).
    value : str or tuple of str
        The bench-side name(s).
    scope : str
        Where the entry applies: the npu class name of a layer-mapping entry (``"TopLayer"`` for
        the root), the op of an op-table parameter rename; ``""`` otherwise.
    extra : tuple of (str, tuple of str, tuple of str)
        Slot correspondences of an API mapping: (``"args"``, npu slots, bench slots) ...
    """

    where: str
    key: str
    value: str | tuple[str, ...]
    scope: str = ""
    extra: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()

    @property
    def text(self) -> str:
        """The entry in one line, as a person would write it."""
        value = self.value if isinstance(self.value, str) else "[" + ", ".join(self.value) + "]"
        head = f"{self.scope}: " if self.scope else ""
        return f"{head}{self.key} -> {value}"


@dataclass(frozen=True, slots=True)
class RuleFile:
    """The entries of one rule file (or built-in table) and the in-file repeats that were dropped.

    `ms_to_pt` is True when the keys are MindSpore names and the values PyTorch names by the
    format itself (msprobe's ``ms_api``/``pt_api`` lists, the built-in tables), so a PyTorch npu
    run against a MindSpore bench run reads the table backwards.
    """

    path: str
    entries: tuple[RuleEntry, ...]
    conflicts: tuple[str, ...] = ()
    builtin: bool = False
    ms_to_pt: bool = False


# ----------------------------------------------------------------------------------------------
# Documents with line numbers


@dataclass(slots=True)
class _Map:
    """A mapping with the line of every key, in file order (repeated keys kept)."""

    items: list[tuple[str, Any, int]]
    line: int


@dataclass(slots=True)
class _Seq:
    items: list[tuple[Any, int]]
    line: int


@dataclass(slots=True)
class _Doc:
    path: str
    root: Any
    repeats: list[str] = field(default_factory=list)


def parse_document(text: str, source: str, kind: str | None = None) -> Any:
    """Parse YAML, JSON or CSV text into plain Python (dicts keep their first key on repeats).

    `kind` is ``"yaml"``, ``"json"`` or ``"csv"``; by default it comes from the file suffix of
    `source` (anything but ``.json``/``.csv`` is YAML).

    Raises
    ------
    MappingError
        If the text does not parse; the message names `source` and the line.

    Examples
    --------
    >>> parse_document("a: 1\\nb: [x, y]\\n", "m.yaml")
    {'a': 1, 'b': ['x', 'y']}
    >>> parse_document('{"a": "b"}', "m.json")
    {'a': 'b'}
    >>> parse_document("npu,bench\\nA,B\\n", "t.csv")
    [['npu', 'bench'], ['A', 'B']]
    """
    return _plain(_parse(text, source, kind).root)


def _plain(node: Any) -> Any:
    if isinstance(node, _Map):
        out: dict[str, Any] = {}
        for key, value, _ in node.items:
            out.setdefault(key, _plain(value))
        return out
    if isinstance(node, _Seq):
        return [_plain(v) for v, _ in node.items]
    return node


def _read(path: str | os.PathLike[str]) -> _Doc:
    p = Path(path)
    if not os.path.lexists(p):
        raise MappingError(f"{p}: no such mapping file")
    try:
        with open_regular(p) as f:  # never a FIFO or a device
            text = f.read().decode("utf-8")
    except DumpFormatError as err:
        raise MappingError(f"mapping file {err}") from err
    except (OSError, UnicodeDecodeError) as err:
        raise MappingError(f"{p}: cannot read mapping file ({err})") from err
    return _parse(text, str(p), None)


def _kind(source: str, kind: str | None) -> str:
    if kind:
        return kind
    suffix = Path(source).suffix.lower()
    return {".json": "json", ".csv": "csv"}.get(suffix, "yaml")


def _parse(text: str, source: str, kind: str | None) -> _Doc:
    kind = _kind(source, kind)
    try:
        if kind == "json":
            return _Doc(source, _parse_json(text, source))
        if kind == "csv":
            return _Doc(source, _parse_csv(text, source))
        return _Doc(source, _parse_yaml(text, source))
    except RecursionError as err:
        raise MappingError(f"{source}: nested too deeply for a mapping file (more than {_MAX_DEPTH} levels)") from err
    except ValueError as err:  # a number longer than Python reads (int_max_str_digits)
        raise MappingError(f"{source}: cannot read a value ({err})") from err


def _parse_yaml(text: str, source: str) -> Any:
    import yaml  # lazy: only rule files need it, and every comparison imports this module

    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        if "nesting depth" in problem:  # libyaml (PyYAML >= 6.0.4) stops at 1,000 levels itself
            raise MappingError(f"{source}{line}: nested too deeply for a mapping file (more than {_MAX_DEPTH} "
                               "levels)") from err
        raise MappingError(f"{source}{line}: not valid YAML ({problem})") from err
    return None if node is None else _from_yaml(node, source, set(), 0)


_YAML_INT = "tag:yaml.org,2002:int"
_YAML_FLOAT = "tag:yaml.org,2002:float"
_YAML_BOOL = "tag:yaml.org,2002:bool"
_YAML_NULL = "tag:yaml.org,2002:null"


def _from_yaml(node: yaml.Node, source: str, seen: set[int], depth: int) -> Any:
    """Plain values of a composed YAML node.

    A node met twice is an alias (``*name`` of an ``&name`` anchor): rule files are lists of names and use
    none, and following them is how a few hundred bytes expand without end (or recurse forever), so
    they are refused, as is nesting deeper than `_MAX_DEPTH`.
    """
    import yaml

    line = node.start_mark.line + 1
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        if id(node) in seen:
            raise MappingError(f"{source}:{line}: uses a YAML alias (*name of an &name anchor); mapping files "
                               "must spell every entry out")
        seen.add(id(node))
        if depth >= _MAX_DEPTH:
            raise MappingError(f"{source}:{line}: nested too deeply for a mapping file (more than {_MAX_DEPTH} "
                               "levels)")
    if isinstance(node, yaml.MappingNode):
        items = []
        lines: dict[str, int] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                raise MappingError(f"{source}:{key.start_mark.line + 1}: a key must be a name, not a list or mapping")
            name, key_line = str(key.value), key.start_mark.line + 1
            if name in lines:  # YAML allows a key once per mapping; a parser would keep one of the two silently
                raise MappingError(f"{source}:{key_line}: {name!r} is a key twice in one mapping (lines "
                                   f"{lines[name]} and {key_line}); YAML allows each key once: merge the two")
            lines[name] = key_line
            items.append((name, _from_yaml(value, source, seen, depth + 1), key_line))
        return _Map(items, line)
    if isinstance(node, yaml.SequenceNode):
        return _Seq([(_from_yaml(v, source, seen, depth + 1), v.start_mark.line + 1) for v in node.value], line)
    return _scalar(node)


_MAX_DEPTH = 64
"""Deepest nesting a rule file may use: the deepest format (an API table with argument lists) needs 4."""


def _scalar(node: yaml.ScalarNode) -> Any:
    value, tag = node.value, node.tag
    if tag == _YAML_NULL:
        return None
    if tag == _YAML_BOOL:
        return value.lower() in ("true", "yes", "on", "y")
    if tag == _YAML_INT:
        try:
            return int(value.replace("_", ""), 0)
        except ValueError:
            return value
    if tag == _YAML_FLOAT:
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _parse_json(text: str, source: str) -> Any:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as err:
        raise MappingError(f"{source}:{err.lineno}: not valid JSON ({err.msg}, column {err.colno})") from err
    return _JsonLines(text).parse()


class _JsonLines:
    """Re-scans JSON that orjson accepted, recording the line where every key and item starts."""

    _NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
    _LITERALS = (("true", True), ("false", False), ("null", None))

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.newlines = [m.start() for m in re.finditer("\n", text)]

    def line(self, pos: int) -> int:
        lo, hi = 0, len(self.newlines)
        while lo < hi:  # bisect: number of newlines before pos
            mid = (lo + hi) // 2
            if self.newlines[mid] < pos:
                lo = mid + 1
            else:
                hi = mid
        return lo + 1

    def skip(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        self.pos = pos

    def parse(self) -> Any:
        self.skip()
        return self.value()

    def value(self) -> Any:
        self.skip()
        ch = self.text[self.pos]
        if ch == "{":
            return self.mapping()
        if ch == "[":
            return self.sequence()
        if ch == '"':
            value, self.pos = json.decoder.scanstring(self.text, self.pos + 1)
            return value
        for word, literal in self._LITERALS:
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return literal
        m = self._NUMBER.match(self.text, self.pos)
        self.pos = m.end()
        return float(m.group()) if m.group(1) or m.group(2) else int(m.group())

    def mapping(self) -> _Map:
        out = _Map([], self.line(self.pos))
        self.pos += 1
        self.skip()
        while self.text[self.pos] != "}":
            line = self.line(self.pos)
            key, self.pos = json.decoder.scanstring(self.text, self.pos + 1)
            self.skip()
            self.pos += 1  # ':'
            out.items.append((key, self.value(), line))
            self.skip()
            if self.text[self.pos] == ",":
                self.pos += 1
                self.skip()
        self.pos += 1
        return out

    def sequence(self) -> _Seq:
        out = _Seq([], self.line(self.pos))
        self.pos += 1
        self.skip()
        while self.text[self.pos] != "]":
            self.skip()
            line = self.line(self.pos)
            out.items.append((self.value(), line))
            self.skip()
            if self.text[self.pos] == ",":
                self.pos += 1
                self.skip()
        self.pos += 1
        return out


def _parse_csv(text: str, source: str) -> _Seq:
    reader = csv.reader(io.StringIO(text), strict=True)
    rows = _Seq([], 1)
    try:
        for row in reader:
            if row and any(cell.strip() for cell in row) and not row[0].lstrip().startswith("#"):
                rows.items.append(([cell.strip() for cell in row], reader.line_num))
    except csv.Error as err:
        raise MappingError(f"{source}:{reader.line_num}: not valid CSV ({err})") from err
    return rows


# ----------------------------------------------------------------------------------------------
# Shape checks shared by the formats


def _where(doc: _Doc, line: int) -> str:
    return f"{doc.path}:{line}"


def _expect_map(doc: _Doc, node: Any, what: str, line: int | None = None) -> _Map:
    if isinstance(node, _Map):
        return node
    found = "nothing" if node is None else ("a list" if isinstance(node, _Seq) else f"{type(node).__name__} {node!r}")
    at = line if line is not None else getattr(node, "line", 1)
    raise MappingError(f"{_where(doc, at)}: expected {what}, found {found}")


def _name(doc: _Doc, value: Any, line: int, what: str) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, (_Map, _Seq)):
        found = "nothing" if value is None else ("a list" if isinstance(value, _Seq) else
                                                 "a mapping" if isinstance(value, _Map) else repr(value))
        raise MappingError(f"{_where(doc, line)}: expected {what}, found {found}")
    return str(value).strip()


def _unique(doc: _Doc, items: Iterator[tuple[str, Any, int]], what: str) -> Iterator[tuple[str, Any, int]]:
    """Yield each key's first occurrence; note the repeats in `doc.repeats` (the first one wins)."""
    seen: dict[str, int] = {}
    for key, value, line in items:
        if key in seen:
            doc.repeats.append(f"{_where(doc, line)}: {what} {key!r} repeats line {seen[key]}; "
                               f"the first one (line {seen[key]}) is used")
            continue
        seen[key] = line
        yield key, value, line


def _rule_file(doc: _Doc, entries: list[RuleEntry], *, builtin: bool = False, ms_to_pt: bool = False) -> RuleFile:
    return RuleFile(doc.path, tuple(entries), tuple(doc.repeats), builtin, ms_to_pt or builtin)


def _flat_pairs(doc: _Doc, what: str) -> list[RuleEntry]:
    """Entries of a flat ``name: name`` mapping."""
    root = _expect_map(doc, doc.root, f"a mapping of {what}")
    return [RuleEntry(_where(doc, line), key.strip(), _name(doc, value, line, f"a name for {key!r}"))
            for key, value, line in _unique(doc, iter(root.items), "key")]


# ----------------------------------------------------------------------------------------------
# The formats


def load_layer_mapping(path: str | os.PathLike[str]) -> RuleFile:
    """Read an msprobe layer-mapping file (``-lm``): ``{NpuClass: {npu_child: bench_child}}``.

    ``TopLayer`` (legacy ``Cell``) is the root. Keys and values may be dotted paths; text after
    ``(`` in a value is dropped, as msprobe does. Each entry's `scope` is its class name.

    Raises
    ------
    MappingError
        If the file does not parse or is not a mapping of mappings of names.
    """
    doc = _read(path)
    root = _expect_map(doc, doc.root, "a mapping of layer class names to {child: child} tables")
    entries: list[RuleEntry] = []
    classes: dict[str, dict[str, int]] = {}
    for cls, table, line in root.items:
        scope = _TOP_LAYER if cls == _LEGACY_TOP else cls.strip()
        if table is None:
            continue
        table = _expect_map(doc, table, f"a {{child: child}} table under {cls!r}", line)
        seen = classes.setdefault(scope, {})
        for key, value, key_line in table.items:
            key = key.strip()
            if key in seen:
                doc.repeats.append(f"{_where(doc, key_line)}: {scope}: child {key!r} repeats line {seen[key]}; "
                                   f"the first one (line {seen[key]}) is used")
                continue
            seen[key] = key_line
            target = _name(doc, value, key_line, f"the bench name of {key!r}").split("(", 1)[0].strip()
            entries.append(RuleEntry(_where(doc, key_line), key, target, scope=scope))
    return _rule_file(doc, entries)


def load_cell_mapping(path: str | os.PathLike[str]) -> RuleFile:
    """Read an msprobe cell-mapping file (``-cm``): ``{cell_path.Class: module_path.Class}``.

    Raises
    ------
    MappingError
        If the file does not parse, is not a flat mapping of names, or a key has no class part.
    """
    doc = _read(path)
    entries = _flat_pairs(doc, "cell names to module names")
    for entry in entries:
        if "." not in entry.key or "." not in str(entry.value):
            raise MappingError(f"{entry.where}: {entry.key!r}: expected '<path>.<Class>: <path>.<Class>' "
                               "(e.g. 'fc1.Dense: fc1.Linear')")
    return _rule_file(doc, entries)


def load_data_mapping(path: str | os.PathLike[str]) -> RuleFile:
    """Read an msprobe data-mapping file (``-dm``): ``{npu full data name: bench full data name}``.

    Raises
    ------
    MappingError
        If the file does not parse or is not a flat mapping of names.
    """
    doc = _read(path)
    return _rule_file(doc, _flat_pairs(doc, "data names"))


def load_api_mapping(path: str | os.PathLike[str]) -> RuleFile:
    """Read an API mapping: a name table or msprobe's list of ``ms_api/pt_api/ms_args/...`` dicts.

    A flat ``{Functional.dense: Functional.linear}`` mapping is a name table. A list of mappings
    (or one mapping) with ``ms_api`` and ``pt_api`` also maps slots: ``ms_args: [0, 1]`` pairs
    with ``pt_args: [0, 1]`` position by position (likewise ``outputs``, ``parameters``,
    ``parameters_grad``); both lists of a pair must be equally long.

    Raises
    ------
    MappingError
        If the file does not parse, an entry lacks ``ms_api``/``pt_api``, or slot lists differ in length.
    """
    return _api_rules(_read(path))


def _api_rules(doc: _Doc) -> RuleFile:
    root = doc.root
    if isinstance(root, _Map) and not any(k == "ms_api" for k, _, _ in root.items):
        return _rule_file(doc, _flat_pairs(doc, "API names"))
    items = [(root, root.line)] if isinstance(root, _Map) else None
    if items is None:
        if not isinstance(root, _Seq):
            _expect_map(doc, root, "a list of {ms_api, pt_api, ms_args, pt_args, ...} mappings or a name table")
        items = root.items
    entries = [_api_entry(doc, item, line) for item, line in items]
    return _rule_file(doc, entries, ms_to_pt=True)


def _api_entry(doc: _Doc, item: Any, line: int) -> RuleEntry:
    table = _expect_map(doc, item, "a mapping with ms_api and pt_api", line)
    fields = {k: (v, ln) for k, v, ln in table.items}
    for key in ("ms_api", "pt_api"):
        if key not in fields:
            raise MappingError(f"{_where(doc, line)}: API mapping entry has no {key!r} (needs ms_api and pt_api)")
    extra = []
    for part in API_MAPPING_KEYS:
        npu_slots = _slot_list(doc, fields.get(f"ms_{part}"), f"ms_{part}", line)
        bench_slots = _slot_list(doc, fields.get(f"pt_{part}"), f"pt_{part}", line)
        if npu_slots is None and bench_slots is None:
            continue
        npu_slots, bench_slots = npu_slots or (), bench_slots or ()
        if len(npu_slots) != len(bench_slots):
            raise MappingError(f"{_where(doc, line)}: ms_{part} has {len(npu_slots)} entries but pt_{part} has "
                               f"{len(bench_slots)}; they pair position by position and must be equally long")
        extra.append((part, npu_slots, bench_slots))
    ms_api = _name(doc, fields["ms_api"][0], fields["ms_api"][1], "an API name")
    pt_api = _name(doc, fields["pt_api"][0], fields["pt_api"][1], "an API name")
    return RuleEntry(_where(doc, line), ms_api, pt_api, extra=tuple(extra))


def _slot_list(doc: _Doc, found: tuple[Any, int] | None, key: str, line: int) -> tuple[str, ...] | None:
    if found is None:
        return None
    value, at = found
    if not isinstance(value, _Seq):
        raise MappingError(f"{_where(doc, at)}: {key} must be a list of argument positions or names")
    return tuple(_name(doc, v, ln, f"an entry of {key}") for v, ln in value.items)


def load_op_table(path: str | os.PathLike[str]) -> tuple[RuleFile, RuleFile]:
    """Read a get_op_map-style op table: (op renames, parameter renames).

    Accepted shapes: a flat ``{NpuOp: BenchOp}`` mapping; ``{"ops": {...}, "params": {Op: {a: b}}}``;
    the pair ``[ir_map, param_map]`` that ``torch.utils.get_op_map()`` returns, as a JSON/YAML list;
    or a CSV with a ``npu,bench`` header and an optional third column ``op`` (a row with an op names
    a parameter rename of that op, e.g. ``epsilon,eps,CudnnBatchNormBackward``).

    Raises
    ------
    MappingError
        If the file does not parse or has none of these shapes.
    """
    doc = _read(path)
    root = doc.root
    if isinstance(root, _Seq) and _kind(doc.path, None) == "csv":
        return _op_table_csv(doc, root)
    if isinstance(root, _Seq):
        if len(root.items) != 2:
            raise MappingError(f"{_where(doc, root.line)}: a list op table must be [op map, parameter map] "
                               f"(as get_op_map returns), found {len(root.items)} items")
        ops, params = root.items[0][0], root.items[1][0]
    else:
        table = _expect_map(doc, root, "a mapping of op names (or {ops, params})")
        keys = {k for k, _, _ in table.items}
        if keys and keys <= {"ops", "params"}:
            found = {k: v for k, v, _ in table.items}
            ops, params = found.get("ops"), found.get("params")
        else:
            ops, params = table, None
    op_entries = [] if ops is None else _flat_pairs(_Doc(doc.path, ops, doc.repeats), "op names")
    param_entries = []
    if params is not None:
        for op, renames, line in _expect_map(doc, params, "a mapping of op names to {param: param}").items:
            table = _expect_map(doc, renames, f"a {{param: param}} table under {op!r}", line)
            param_entries.extend(RuleEntry(_where(doc, ln), k, _name(doc, v, ln, "a parameter name"), scope=op)
                                 for k, v, ln in _unique(doc, iter(table.items), f"{op} parameter"))
    return _rule_file(doc, op_entries), _rule_file(doc, param_entries)


def load_builtin_op_table() -> tuple[RuleFile, RuleFile]:
    """`load_op_table` of the table shipped in ``graphcmp/data`` (`BUILTIN_OP_TABLE`).

    >>> ops, params = load_builtin_op_table()
    >>> [(e.key, e.value) for e in ops.entries][0], ops.builtin
    (('NpuConvolutionBackward', 'CudnnConvolutionBackward'), True)
    """
    from importlib import resources  # with tempfile, 10 ms of every comparison: the built-in tables only

    with resources.as_file(resources.files("graphcmp").joinpath("data", BUILTIN_OP_TABLE)) as path:
        ops, params = load_op_table(path)
    return replace(ops, builtin=True), replace(params, builtin=True)


def _op_table_csv(doc: _Doc, rows: _Seq) -> tuple[RuleFile, RuleFile]:
    items = rows.items
    if items and [c.lower() for c in items[0][0][:2]] == ["npu", "bench"]:
        items = items[1:]
    ops, params = [], []
    for row, line in items:
        if len(row) < 2 or len(row) > 3:
            raise MappingError(f"{_where(doc, line)}: expected 'npu,bench' or 'npu,bench,op', found {len(row)} columns")
        entry = RuleEntry(_where(doc, line), row[0], row[1], scope=row[2] if len(row) == 3 else "")
        (params if entry.scope else ops).append(entry)
    return _rule_file(doc, ops), _rule_file(doc, params)


def load_me_mapping(path: str | os.PathLike[str]) -> RuleFile:
    """Read a Model Explorer navigation-sync mapping: left (npu) node ids to right (bench) node ids.

    Accepted: ``{"mapping": {id: id}, "mappingEntries": [{"leftNodeIds": [...], "rightNodeIds":
    [...]}]}`` (Model Explorer's ``SyncNavigationData``) or a bare ``{id: id or [ids]}``. An entry
    with several ids on a side is a one-to-many / many-to-one (fused) match.

    Raises
    ------
    MappingError
        If the file does not parse or an entry is not a list of ids.
    """
    doc = _read(path)
    root = _expect_map(doc, doc.root, "a Model Explorer mapping object")
    fields = {k: (v, ln) for k, v, ln in root.items}
    entries: list[RuleEntry] = []
    if "mapping" in fields or "mappingEntries" in fields:
        if "mapping" in fields:
            mapping = _expect_map(doc, fields["mapping"][0], "a {left id: right id} mapping", fields["mapping"][1])
            entries.extend(_me_flat(doc, mapping))
        if "mappingEntries" in fields:
            entries.extend(_me_entries(doc, *fields["mappingEntries"]))
    else:
        entries.extend(_me_flat(doc, root))
    return _rule_file(doc, entries)


def _me_flat(doc: _Doc, mapping: _Map) -> list[RuleEntry]:
    out = []
    for key, value, line in _unique(doc, iter(mapping.items), "node id"):
        ids = _ids(doc, value, line) if isinstance(value, _Seq) else (_name(doc, value, line, "a node id"),)
        out.append(RuleEntry(_where(doc, line), key, ids if len(ids) > 1 else ids[0]))
    return out


def _me_entries(doc: _Doc, node: Any, line: int) -> list[RuleEntry]:
    if not isinstance(node, _Seq):
        raise MappingError(f"{_where(doc, line)}: mappingEntries must be a list")
    out = []
    for item, at in node.items:
        fields = {k: (v, ln) for k, v, ln in _expect_map(doc, item, "a {leftNodeIds, rightNodeIds} entry", at).items}
        if "leftNodeIds" not in fields or "rightNodeIds" not in fields:
            raise MappingError(f"{_where(doc, at)}: a mapping entry needs leftNodeIds and rightNodeIds")
        left, right = _ids(doc, *fields["leftNodeIds"]), _ids(doc, *fields["rightNodeIds"])
        out.append(RuleEntry(_where(doc, at), "\n".join(left), right))
    return out


def _ids(doc: _Doc, node: Any, line: int) -> tuple[str, ...]:
    if not isinstance(node, _Seq) or not node.items:
        raise MappingError(f"{_where(doc, line)}: expected a non-empty list of node ids")
    return tuple(_name(doc, v, ln, "a node id") for v, ln in node.items)


MANUAL_FORMAT = "graphcmp.matches"
"""The ``format`` value of a manual-matches sidecar file (see docs/matching.md)."""
MANUAL_VERSION = 1


def load_manual_file(path: str | os.PathLike[str]) -> tuple[RuleFile, dict[str, str]]:
    """Read a manual-matches sidecar: (entries, header with the ``npu``/``bench`` run paths).

    Each entry's `scope` is ``"match"``, ``"match+children"`` or ``"unmatch"``; its key holds the
    npu ids joined by newlines (``""`` for an unmatch of a bench node only), its value the bench id(s).

    Raises
    ------
    MappingError
        If the file does not parse, is not a graphcmp matches file, or an item is malformed.
    """
    doc = _read(path)
    root = _expect_map(doc, doc.root, f"a {MANUAL_FORMAT} object")
    fields = {k: (v, ln) for k, v, ln in root.items}
    fmt = fields.get("format", (None, root.line))
    if fmt[0] != MANUAL_FORMAT:
        raise MappingError(f"{_where(doc, fmt[1])}: not a graphcmp manual-matches file "
                           f"(format is {fmt[0]!r}, expected {MANUAL_FORMAT!r})")
    version = fields.get("version", (None, root.line))
    if version[0] != MANUAL_VERSION:
        raise MappingError(f"{_where(doc, version[1])}: manual-matches version {version[0]!r} is not supported "
                           f"(this graphcmp reads {MANUAL_VERSION})")
    entries = [*_manual_items(doc, fields.get("matches"), "matches"),
               *_manual_items(doc, fields.get("unmatches"), "unmatches")]
    header = {side: str(fields[side][0]) for side in ("npu", "bench") if side in fields and fields[side][0]}
    return _rule_file(doc, entries), header


def _manual_items(doc: _Doc, found: tuple[Any, int] | None, key: str) -> list[RuleEntry]:
    if found is None or found[0] is None:
        return []
    node, line = found
    if not isinstance(node, _Seq):
        raise MappingError(f"{_where(doc, line)}: {key} must be a list")
    out = []
    for item, at in node.items:
        fields = {k: (v, ln) for k, v, ln in _expect_map(doc, item, f"an item of {key}", at).items}
        npu = _id_or_ids(doc, fields.get("npu"), at)
        bench = _id_or_ids(doc, fields.get("bench"), at)
        if key == "unmatches":
            if len(npu) > 1 or len(bench) > 1 or not (npu or bench):
                raise MappingError(f"{_where(doc, at)}: an unmatch names one npu node, one bench node or both")
            out.append(RuleEntry(_where(doc, at), npu[0] if npu else "", bench[0] if bench else "", "unmatch"))
            continue
        if not npu or not bench:
            raise MappingError(f"{_where(doc, at)}: a match needs both 'npu' and 'bench'")
        children = fields.get("children", ("none", at))[0]
        if children not in ("order", "none", True, False, None):
            raise MappingError(f"{_where(doc, at)}: 'children' is 'order' or 'none', found {children!r}")
        scope = "match+children" if children in ("order", True) else "match"
        out.append(RuleEntry(_where(doc, at), "\n".join(npu), bench if len(bench) > 1 else bench[0], scope))
    return out


def _id_or_ids(doc: _Doc, found: tuple[Any, int] | None, line: int) -> tuple[str, ...]:
    if found is None or found[0] is None:
        return ()
    value, at = found
    return _ids(doc, value, at) if isinstance(value, _Seq) else (_name(doc, value, at, "a node id"),)


def load_builtin(name: str) -> RuleFile:
    """A table shipped in ``graphcmp/data`` (`BUILTIN_MS_TO_PT_API`, `BUILTIN_MS_TO_PT_PARAMS` or
    `BUILTIN_MS_TO_PT_LAYERS`; the last two are ``{class: {name: name}}``).

    >>> table = load_builtin(BUILTIN_MS_TO_PT_API)
    >>> table.builtin, len(table.entries) > 300
    (True, True)
    """
    from importlib import resources  # see load_builtin_op_table

    text = resources.files("graphcmp").joinpath("data", name).read_text(encoding="utf-8")
    doc = _Doc(f"built-in {name}", _parse_yaml(text, f"built-in {name}"))
    if name in (BUILTIN_MS_TO_PT_PARAMS, BUILTIN_MS_TO_PT_LAYERS):
        entries = []
        for cls, table, line in _expect_map(doc, doc.root, "a mapping of classes").items:
            entries.extend(RuleEntry(_where(doc, ln), k, _name(doc, v, ln, "a name"), scope=cls)
                           for k, v, ln in _expect_map(doc, table, "a {param: param} table", line).items)
        return _rule_file(doc, entries, builtin=True)
    return _rule_file(doc, _flat_pairs(doc, "API names"), builtin=True)
