"""Reader for msprobe dump folders (one rank): dump.json + construct.json + stack.json.

`parse_msprobe` turns the three parsed documents into a `DumpGraph` and is what tests call;
`read_msprobe` reads the files (salvaging a run killed mid-dump) and delegates. A dump.json laid
out as msprobe writes it (``indent=1``) is read in chunks of whole records (`MemberChunks`): each
chunk's leaves become tensor columns before the next chunk is parsed, so memory holds the columns
and node ids, never the whole file's dicts. Any other layout, and any chunk that does not parse,
goes through the whole-file path, which builds the same graph. PyTorch
(``Module``/``Functional``/``Tensor``/``Torch``/``Distributed``) and MindSpore (``Cell``/``Primitive``/
``Mint``/``Jit``) naming are both read, as are both stack.json layouts.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from sys import intern
from typing import Any

import numpy as np
import orjson

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.jsonio import LayoutMismatch, MemberChunks, gc_paused, read_json
from graphcmp.core.readers.naming import parse_node_id
from graphcmp.core.records import DumpGraph, NodeKind, Role, RunInfo

__all__ = ["parse_msprobe", "read_msprobe", "sniff"]

DUMP_FILE, CONSTRUCT_FILE, STACK_FILE = "dump.json", "construct.json", "stack.json"
_STAT_KEYS = ("Max", "Min", "Mean", "Norm")
_ROLE_KEYS = (  # plain ints: enum access is slow in the per-leaf loop
    ("input_args", int(Role.INPUT)),
    ("input", int(Role.INPUT)),
    ("input_kwargs", int(Role.INPUT)),
    ("output", int(Role.OUTPUT)),
    ("parameters", int(Role.PARAM)),
)
_PARAM_GRAD = int(Role.PARAM_GRAD)
_SCALAR_FIELDS = {"type", "value", "requires_grad"}
_NO_FILE = (None, "-1", -1)
CHUNK_BYTES = 2 << 20
"""Bytes of dump.json text parsed at a time by `read_msprobe` (a chunk's dicts take ~7x that)."""


def sniff(path: str | os.PathLike[str]) -> bool:
    """True when `path` is a folder holding an msprobe dump.json."""
    return (Path(path) / DUMP_FILE).is_file()


def read_msprobe(path: str | os.PathLike[str], *, chunk_bytes: int | None = CHUNK_BYTES) -> DumpGraph:
    """Read one msprobe rank folder into a `DumpGraph`.

    A missing construct.json or stack.json, or a file cut short, still loads what is there;
    the loss is listed in ``graph.info.missing``. An ``indent=1`` dump.json is parsed
    `chunk_bytes` at a time; ``chunk_bytes=None`` parses it whole (same graph, more memory).

    Raises
    ------
    DumpFormatError
        If the folder or its dump.json is missing, or a file is not msprobe JSON.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise DumpFormatError(f"{folder}: no such folder" if not folder.exists() else
                              f"{folder}: expected an msprobe dump folder, got a file")
    if not (folder / DUMP_FILE).is_file():
        raise DumpFormatError(f"{folder}: not an msprobe dump folder (no {DUMP_FILE}); "
                              "point at the folder that holds dump.json, construct.json and stack.json")
    missing: list[str] = []
    with gc_paused():
        if chunk_bytes is not None and (streamed := _read_dump_chunked(folder, chunk_bytes)) is not None:
            builder, header, data, md5 = streamed
            construct = _read_part(folder / CONSTRUCT_FILE, missing)
            stack = _read_part(folder / STACK_FILE, missing)
            return _assemble(builder, header, data, construct, stack, source=str(folder), notes=missing,
                             md5=lambda: md5)
        dump = _read_part(folder / DUMP_FILE, missing, required=True)
        construct = _read_part(folder / CONSTRUCT_FILE, missing)
        stack = _read_part(folder / STACK_FILE, missing)
        return parse_msprobe(dump, construct, stack, source=str(folder), missing=tuple(missing))


def _read_dump_chunked(
    folder: Path, chunk_bytes: int
) -> tuple[HierarchyBuilder, dict[str, Any], dict[str, None], bool] | None:
    """Tensor columns of dump.json, read chunk by chunk: (builder, header, node ids in order, md5 task).

    None when the file is not in msprobe's indented layout, is damaged, or holds something the
    whole-file path reports or resolves differently (a bad record, a node id in two chunks).
    """
    chunks = MemberChunks(folder / DUMP_FILE, "data", chunk_bytes=chunk_bytes)
    builder = HierarchyBuilder()
    data: dict[str, None] = {}
    md5: bool | None = None
    try:
        for chunk in chunks:
            known = len(data)
            data.update(dict.fromkeys(chunk))
            if len(data) != known + len(chunk):
                return None
            if md5 is None:
                md5 = _md5_flag(chunk, str(folder))
            leaves = _Leaves()
            for node_id, record in chunk.items():
                _collect_record(leaves, node_id, record, str(folder))
            _add_leaves(builder, leaves)
            del chunk, leaves  # free this chunk's dicts before the next one is parsed
    except (LayoutMismatch, DumpFormatError):
        return None
    header = chunks.rest or {}
    return builder, header, data, bool(md5)


def _read_part(path: Path, missing: list[str], *, required: bool = False) -> dict[str, Any]:
    if not path.is_file() and not required:
        missing.append(f"{path.name}: file not found")
        return {}
    loaded = read_json(path)
    if loaded.truncated:
        missing.append(loaded.truncated)
    if not isinstance(loaded.value, dict):
        raise DumpFormatError(f"{path}: expected a JSON object, got {type(loaded.value).__name__}")
    return loaded.value


def parse_msprobe(
    dump: Mapping[str, Any],
    construct: Mapping[str, Any] | None = None,
    stack: Mapping[str, Any] | None = None,
    *,
    source: str = "<memory>",
    missing: tuple[str, ...] = (),
) -> DumpGraph:
    """Build a run's hierarchy from parsed msprobe documents.

    Parameters
    ----------
    dump : Mapping
        dump.json: ``{"task", "level", "framework", "dump_data_dir", "data": {node_id: record}}``.
    construct : Mapping, optional
        construct.json: ``{node_id: parent_id or None}``.
    stack : Mapping, optional
        stack.json, either ``{"0": [[node ids], [frames]]}`` or ``{node_id: [frames]}``.
    source : str
        Folder the documents came from, for messages and `RunInfo.path`.
    missing : tuple of str
        What the caller could not load, recorded in `RunInfo.missing`.

    Examples
    --------
    >>> g = parse_msprobe({"task": "statistics", "data": {
    ...     "Functional.relu.0.forward": {"input_args": [], "output": [
    ...         {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0,
    ...          "Min": 0.0, "Mean": 0.5, "Norm": 1.0}]},
    ...     "Module.act.ReLU.forward.0": {}}},
    ...     {"Functional.relu.0.forward": "Module.act.ReLU.forward.0", "Module.act.ReLU.forward.0": None})
    >>> g.nodes.ids
    ('DefaultModel', 'Module.act.ReLU.forward.0', 'Functional.relu.0.forward')
    >>> g.view("Functional.relu.0.forward").tensors[0].stats["mean"]
    0.5
    """
    data = dump.get("data")
    if not isinstance(data, Mapping):
        raise DumpFormatError(f"{source}/{DUMP_FILE}: no \"data\" object; is this an msprobe dump.json?")

    def add_tensors(builder: HierarchyBuilder) -> None:
        leaves = _Leaves()
        for node_id, record in data.items():
            _collect_record(leaves, node_id, record, source)
        _add_leaves(builder, leaves)

    return _assemble(HierarchyBuilder(), dump, data, construct, stack, source=source, notes=list(missing),
                     md5=lambda: bool(_md5_flag(data, source)), add_tensors=add_tensors)


def _assemble(
    builder: HierarchyBuilder,
    header: Mapping[str, Any],
    data: Mapping[str, Any],
    construct: Mapping[str, Any] | None,
    stack: Mapping[str, Any] | None,
    *,
    source: str,
    notes: list[str],
    md5: Callable[[], bool],
    add_tensors: Callable[[HierarchyBuilder], None] | None = None,
) -> DumpGraph:
    """Nodes (ids and order from `data`'s keys), tensors (already in `builder`, or `add_tensors`), stacks.

    `md5` tells whether the first tensor record has an md5 (called last: records are checked first).
    """
    construct = construct or {}
    seq = _sequence(construct, data)
    parents = _parents(construct, data, source, notes)
    for node_id, position in seq.items():
        kind, op, direction, _ = parse_node_id(node_id)
        builder.add_node(node_id, kind, op, direction, parents.get(node_id), position,
                         has_data=node_id in data)
    if add_tensors is not None:
        add_tensors(builder)
    _attach_stacks(builder, stack or {}, source, notes)
    step, rank = _step_rank(source)
    info = RunInfo(
        path=source, format="msprobe", framework=str(header.get("framework") or ""),
        task=_task(header, md5()), level=str(header.get("level") or ""), rank=rank, step=step, missing=tuple(notes),
    )
    return builder.build(info)


def _task(header: Mapping[str, Any], md5: bool) -> str:
    task = str(header.get("task") or "statistics")
    return "md5" if task == "statistics" and md5 else task


def _md5_flag(data: Mapping[str, Any], source: str) -> bool | None:
    """Whether the first tensor record of `data` has an md5 (None when `data` has no tensor record)."""
    for node_id, record in data.items():
        leaves = _Leaves()
        _collect_record(leaves, node_id, record, source)
        for leaf in leaves.leaf:
            if isinstance(leaf, dict) and "dtype" in leaf:
                return "md5" in leaf
    return None


def _sequence(construct: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, float]:
    """Order nodes by construct.json (creation order); dump-only nodes go after their dump predecessor."""
    seq = {node_id: float(i) for i, node_id in enumerate(construct)}
    previous, extra = -1.0, 0
    step = 1.0 / (len(data) + 2)
    for node_id in data:
        if node_id in seq:
            previous, extra = seq[node_id], 0
        else:
            extra += 1
            seq[node_id] = previous + extra * step
    return dict(sorted(seq.items(), key=lambda item: item[1]))


def _parents(
    construct: Mapping[str, Any], data: Mapping[str, Any], source: str, notes: list[str]
) -> dict[str, str | None]:
    parents: dict[str, str | None] = {}
    for node_id, parent in construct.items():
        if parent is not None and not isinstance(parent, str):
            raise DumpFormatError(f"{source}/{CONSTRUCT_FILE}: {node_id!r}: parent is a "
                                  f"{type(parent).__name__}, expected a node id or null")
        parents[node_id] = parent
    ids = set(construct) | set(data)
    orphans = 0
    for node_id in data:
        if node_id in parents:
            continue
        kind = parse_node_id(node_id)[0]
        if kind == NodeKind.PARAM_GRAD:
            parents[node_id] = _param_grad_owner(node_id, ids)
        elif construct:
            orphans += 1
    if orphans:
        notes.append(f"{CONSTRUCT_FILE}: {orphans} node(s) of {DUMP_FILE} are not in it; shown at top level")
    _adopt_backward_calls(parents, ids)
    return parents


def _adopt_backward_calls(parents: dict[str, str | None], ids: set[str]) -> None:
    """A top-level backward API call goes under the backward call of the module its forward twin ran in.

    construct.json gives some backward calls no parent (``Functional.embedding.0.backward``: the
    module's backward hook fires after the call); msprobe's own graph puts them under
    ``Module.embedding.Embedding.backward.0``, which is where a reader looks for them.
    """
    for node_id, parent in list(parents.items()):
        if parent is not None or not node_id.endswith(".backward"):
            continue
        twin_parent = parents.get(node_id[: -len("backward")] + "forward")
        if twin_parent and twin_parent.rsplit(".", 2)[-2] == "forward":
            stem, _, counter = twin_parent.rpartition(".forward.")
            candidate = f"{stem}.backward.{counter}"
            if candidate in ids:
                parents[node_id] = candidate


_GRAD_SUFFIX = re.compile(r"\.parameters_grad(?:\.(\d+))?$")


def _param_grad_owner(node_id: str, ids: set[str]) -> str | None:
    """The backward call of the module whose parameter gradients these are (else its forward call)."""
    m = _GRAD_SUFFIX.search(node_id)
    stem, counter = node_id[: m.start()], m.group(1) or "0"
    for candidate in (f"{stem}.backward.{counter}", f"{stem}.forward.{counter}"):
        if candidate in ids:
            return candidate
    calls = sorted((i for i in ids if i.startswith(stem + ".backward.")), key=lambda i: int(i.rsplit(".", 1)[1]))
    return calls[-1] if calls else None


class _Leaves:
    """Flattened leaves of every record: parallel lists, turned into columns in one go."""

    __slots__ = ("leaf", "node", "role", "slot")

    def __init__(self) -> None:
        self.node: list[str] = []
        self.role: list[int] = []
        self.slot: list[str] = []
        self.leaf: list[Any] = []

    def collect(self, node_id: str, role: int, value: Any, prefix: str) -> None:
        """Flatten nested args: lists by index, dicts without "type" by key."""
        if type(value) is list:
            for i, item in enumerate(value):
                slot = intern(f"{prefix}.{i}" if prefix else str(i))
                if type(item) is dict and "type" in item:  # the common case, without recursion
                    self.node.append(node_id)
                    self.role.append(role)
                    self.slot.append(slot)
                    self.leaf.append(item)
                elif item is not None:
                    self.collect(node_id, role, item, slot)
        elif isinstance(value, dict) and "type" not in value:
            for key, item in value.items():
                self.collect(node_id, role, item, f"{prefix}.{key}" if prefix else str(key))
        elif value is not None:
            self.node.append(node_id)
            self.role.append(role)
            self.slot.append(intern(prefix or "0"))
            self.leaf.append(value)


def _collect_record(leaves: _Leaves, node_id: str, record: Any, source: str) -> None:
    if not isinstance(record, dict):
        raise DumpFormatError(f"{source}/{DUMP_FILE}: {node_id!r}: record is a {type(record).__name__}, "
                              "expected an object of inputs/outputs")
    if parse_node_id(node_id)[0] == NodeKind.PARAM_GRAD:
        for key, value in record.items():
            single = value[0] if isinstance(value, list) and len(value) == 1 else value
            leaves.collect(node_id, _PARAM_GRAD, single, str(key))
        return
    for role_key, role in _ROLE_KEYS:
        value = record.get(role_key)
        if value is None:
            continue
        if isinstance(value, dict) and "type" in value:
            value = [value]
        leaves.collect(node_id, role, value, "")


def _add_leaves(builder: HierarchyBuilder, leaves: _Leaves) -> None:
    """Turn the leaves into tensor columns: one comprehension per column over the tensor records
    (nearly all leaves), `_leaf_fields` for the few scalars and other values."""
    items = leaves.leaf
    if not items:
        return
    tensor = [type(x) is dict and ("dtype" in x or "Max" in x) for x in items]
    empty = {}
    recs = [x if t else empty for x, t in zip(items, tensor)]
    dtype = [intern(str(x.get("dtype") or "")) for x in recs]
    shape = [intern(str(x["shape"])) if "shape" in x else "" for x in recs]
    md5 = [str(x.get("md5") or "") for x in recs]
    file = [_file_name(x.get("data_name")) for x in recs]
    stats = [[x.get("Max"), x.get("Min"), x.get("Mean"), x.get("Norm")] for x in recs]
    value = [""] * len(items)
    for i in [i for i, t in enumerate(tensor) if not t]:
        dtype[i], shape[i], md5[i], file[i], value[i], *stats[i] = _leaf_fields(items[i])
    raw = np.array(stats, dtype=object)
    present = raw != None  # noqa: E711 - elementwise test on an object array
    try:
        values = np.where(present, raw, 0.0).astype(np.float64)
    except (TypeError, ValueError):
        values = np.vectorize(_float, otypes=[np.float64])(np.where(present, raw, 0.0))
    builder.add_tensors(leaves.node, leaves.role, leaves.slot, dtype=dtype, shape=shape, stats=values,
                        present=present.astype(bool), md5=md5, file=file, value=value)


def _file_name(name: Any) -> str:
    return "" if name in _NO_FILE else str(name)


def _leaf_fields(leaf: Any) -> tuple:
    """(dtype, shape, md5, file, value, max, min, mean, norm) of a leaf that is not a tensor record."""
    if not isinstance(leaf, dict):
        return type(leaf).__name__, "", "", "", _text(leaf), None, None, None, None
    kind = str(leaf.get("type", ""))
    value = leaf.get("value")
    if isinstance(value, (int, float)):  # bool included: True compares as 1.0
        v = float(value)
        return kind, "scalar", "", "", _text(value), v, v, v, None
    text = _text(value) if "value" in leaf else _text({k: v for k, v in leaf.items() if k not in _SCALAR_FIELDS})
    return kind, "", "", "", text, None, None, None, None


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str).decode()


def _attach_stacks(builder: HierarchyBuilder, stack: Mapping[str, Any], source: str, notes: list[str]) -> None:
    unknown = 0
    for key, entry in stack.items():
        if _is_grouped_entry(entry):
            ids, frames = entry
            row = builder.add_stack([str(f) for f in frames])
            targets = ids
        elif isinstance(entry, list):
            row = builder.add_stack([str(f) for f in entry])
            targets = [key]
        else:
            raise DumpFormatError(f"{source}/{STACK_FILE}: entry {key!r} is a {type(entry).__name__}, "
                                  "expected a list of frames or [[node ids], [frames]]")
        for node_id in targets:
            if node_id in builder:
                builder.set_stack(node_id, row)
            else:
                unknown += 1
    if unknown:
        notes.append(f"{STACK_FILE}: {unknown} stack entr{'y' if unknown == 1 else 'ies'} name nodes not in the dump")


def _is_grouped_entry(entry: Any) -> bool:
    return isinstance(entry, list) and len(entry) == 2 and all(isinstance(part, list) for part in entry) and (
        not entry[0] or isinstance(entry[0][0], str)) and not (entry[0] and entry[0][0].startswith("File "))


_STEP = re.compile(r"^step(\d+)$")
_RANK = re.compile(r"^rank(\d*)$")


def _step_rank(source: str) -> tuple[int | None, int | None]:
    parts = Path(source).parts
    rank = step = None
    if parts and (m := _RANK.match(parts[-1])):
        rank = int(m.group(1)) if m.group(1) else 0
        if len(parts) > 1 and (s := _STEP.match(parts[-2])):
            step = int(s.group(1))
    return step, rank

