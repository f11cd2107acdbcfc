"""Reader for msprobe dump folders (one rank): dump.json + construct.json + stack.json.

`parse_msprobe` turns the three parsed documents into a `DumpGraph` and is what tests call;
`read_msprobe` reads the files (salvaging a run killed mid-dump) and delegates. A dump.json, as
msprobe writes it (``indent=1``), compact or one record per line, is read in chunks of whole
records (`MemberChunks`): each chunk's leaves become tensor columns before the next chunk is
parsed, so memory holds the columns and node ids, never the whole file's dicts. A file whose
chunks do not parse (damaged, cut short, another shape) goes through the whole-file path, which
builds the same graph. PyTorch
(``Module``/``Functional``/``Tensor``/``Torch``/``Distributed``) and MindSpore (``Cell``/``Primitive``/
``Mint``/``Jit``) naming are both read, as are both stack.json layouts.
"""

from __future__ import annotations

import os
import re
from collections import ChainMap
from collections.abc import Callable, Container, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import compress, count, islice, repeat
from pathlib import Path
from typing import Any

import numpy as np

from graphcmp.core.errors import DumpFormatError, GraphCycleError
from graphcmp.core.hierarchy import HierarchyBuilder, reusing_node_tables
from graphcmp.core.inputs import open_regular
from graphcmp.core.jsonio import LayoutMismatch, MemberChunks, gc_paused, loads_object, read_json, repeated_keys
from graphcmp.core.readers.msprobe_leaves import (
    DUMP_FILE,
    Misfit,
    add_leaves,
    collect_records,
    collect_typed,
    md5_flag,
    mixed_records,
    typed_records,
)
from graphcmp.core.readers.naming import parse_node_id, parse_node_ids
from graphcmp.core.records import REUSE_MAX_NODES, DumpGraph, NodeKind, RunInfo

__all__ = ["BUILD_FROM_BYTES", "COMPILED_FROM_BYTES", "REUSE_MAX_NODES", "compiled_reads", "parse_msprobe",
           "read_msprobe", "reusing_structure", "sniff"]

CONSTRUCT_FILE, STACK_FILE = "construct.json", "stack.json"
CHUNK_BYTES = 256 << 10
"""Bytes of dump.json text parsed at a time by `read_msprobe`. A chunk's records take ~7x that in memory and are
passed over several times (roles, leaves, fields): at this size they stay in the processor's caches (a 35k-node
read 8-14 % and a 200k-node one 20 % faster than with 2 MiB chunks)."""


def sniff(path: str | os.PathLike[str]) -> bool:
    """True when `path` is a folder holding an msprobe dump.json."""
    return (Path(path) / DUMP_FILE).is_file()


COMPILED_FROM_BYTES = 64 << 20
"""dump.json bytes from which `read_msprobe` walks the text by the compiled pass (`msprobe_scan`) where its kernels
cannot be built ahead of time (``GRAPHCMP_AHEAD_OF_TIME=0``, no C compiler): numba loads them then, about 0.9 s once
per process, and the pass reads the text several times faster. Once they are built, every dump.json is read by the
pass (loading them takes milliseconds; 2x faster at 0.4 MB)."""

BUILD_FROM_BYTES = 2 << 30
"""dump.json bytes from which `read_msprobe` builds the pass's kernels ahead of time before reading, when they can be
built and are not yet. A smaller one is read by the chunked read, and the command line builds them in the background
as it ends (`cli/kernels.py`). The build takes 60-70 s on the 2-core machine; the pass saves 23-28 ms per MB
against the chunked read (a 549 MB side: 21.7 s chunked, 9.2 s by the pass; bench/README.md): it pays for its build
within the read from 2-3 GB."""


def read_msprobe(path: str | os.PathLike[str], *, chunk_bytes: int | None = CHUNK_BYTES,
                 compiled: bool | None = None) -> DumpGraph:
    """Read one msprobe rank folder into a `DumpGraph`.

    A missing construct.json or stack.json, or a file cut short, still loads what is there;
    the loss is listed in ``graph.info.missing``. dump.json is parsed `chunk_bytes` at a time;
    ``chunk_bytes=None`` parses it whole (same graph, more memory). `compiled`: walk dump.json by the compiled pass
    (same graph; None: when its kernels are built, with the default `chunk_bytes`, or from `COMPILED_FROM_BYTES`).

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
        if chunk_bytes is not None and (streamed := _read_dump_streamed(folder, chunk_bytes, compiled)) is not None:
            builder, info = _streamed_nodes(folder, streamed[0], missing, compiled=streamed[1])
            del streamed  # its table of the dump's ids is not needed to build: free before the columns are made
            return _built(builder, info)
        dump = _read_part(folder / DUMP_FILE, missing, required=True)
        construct = _read_part(folder / CONSTRUCT_FILE, missing)
        stack = _read_part(folder / STACK_FILE, missing)
        return parse_msprobe(dump, construct, stack, source=str(folder), missing=tuple(missing))


_COMPILED_READS: ContextVar[bool] = ContextVar("_COMPILED_READS", default=False)


@contextmanager
def compiled_reads(many: bool = True) -> Iterator[None]:
    """Within the block (when `many`), `read_msprobe` walks every dump.json by the compiled pass, whatever its size,
    its kernels built first if they are not yet: for a process that reads many runs (a batch's worker), which then
    reads a 5,000-node dump.json in about half the time of the chunked read (`bench/bench_batch.py`)."""
    token = _COMPILED_READS.set(many)
    try:
        yield
    finally:
        _COMPILED_READS.reset(token)


def _read_dump_streamed(
    folder: Path, chunk_bytes: int, compiled: bool | None
) -> tuple[tuple[HierarchyBuilder, dict[str, Any], dict[str, int], bool], bool] | None:
    """`_read_dump_chunked`, or the compiled pass's same result when it is asked for or the file is large enough;
    and whether the compiled pass read it."""
    from graphcmp.core.readers.msprobe_scan import read_dump_compiled  # see LAZY_IMPORTS

    if compiled is None:
        compiled = _COMPILED_READS.get() or _compiled_pays(folder / DUMP_FILE, chunk_bytes)
    if compiled and (walked := read_dump_compiled(folder)) is not None:
        return walked, True
    chunked = _read_dump_chunked(folder, chunk_bytes)
    return None if chunked is None else (chunked, False)


def _compiled_pays(dump: Path, chunk_bytes: int) -> bool:
    """Whether the compiled pass reads `dump` sooner than the chunked read, counting what its kernels cost to load:
    nothing once they are built (with the default chunks); their build, from `BUILD_FROM_BYTES`; numba, where they
    cannot be built, from `COMPILED_FROM_BYTES`."""
    from graphcmp.core.readers.msprobe_scan import kernels_built, kernels_can_be_built  # see LAZY_IMPORTS

    if chunk_bytes == CHUNK_BYTES and kernels_built():
        return True
    try:
        size = dump.stat().st_size
    except OSError:
        return False
    return size >= BUILD_FROM_BYTES or (size >= COMPILED_FROM_BYTES and not kernels_can_be_built())


def _read_dump_chunked(
    folder: Path, chunk_bytes: int
) -> tuple[HierarchyBuilder, dict[str, Any], dict[str, int], bool] | None:
    """Tensor columns of dump.json, read chunk by chunk: (builder, header, each node id's position, md5 task).

    None when the file's chunks do not parse (damaged, cut short, "data" not the last member) or hold
    something the whole-file path reports or resolves differently (a bad record, a node id in two chunks).
    """
    chunks = MemberChunks(folder / DUMP_FILE, "data", chunk_bytes=chunk_bytes)
    builder = HierarchyBuilder()
    data: dict[str, int] = {}
    md5: bool | None = None
    state: dict[str, bool] = {}
    try:
        for text in chunks.texts():
            records = _add_chunk(builder, text, str(folder), state, chunks.split_members)
            if chunks.may_repeat(text, records) and (twice := repeated_keys(text)):
                raise _Twice(folder / DUMP_FILE, twice)
            before = len(data)
            data.update(zip(records, range(before, before + len(records))))
            if len(data) != before + len(records):  # an id of an earlier chunk: not added again
                added = set(list(data)[before:])
                raise _Twice(folder / DUMP_FILE, [k for k in records if k not in added])
            if md5 is None:
                md5 = md5_flag(records, str(folder))
            del records  # free this chunk's records before the next one is parsed
    except _Twice:
        raise
    except (LayoutMismatch, DumpFormatError):
        return None
    header = chunks.rest or {}
    return builder, header, data, bool(md5)


def _streamed_nodes(folder: Path, streamed: tuple[HierarchyBuilder, dict[str, Any], dict[str, int], bool],
                    missing: list[str], *, compiled: bool = False) -> tuple[HierarchyBuilder, RunInfo]:
    """`_add_nodes` on what `_read_dump_chunked` gave, with construct.json and stack.json read here: the parsed
    documents are freed when this returns, before the builder makes the run's columns (the read's peak: 11 % lower
    at 200k nodes)."""
    builder, header, data, md5 = streamed
    construct = _read_construct(folder / CONSTRUCT_FILE, missing)
    stack = _read_part(folder / STACK_FILE, missing)
    info = _add_nodes(builder, header, data, construct, stack, source=str(folder), notes=missing, md5=lambda: md5,
                      compiled=compiled)
    return builder, info


class _Twice(DumpFormatError):
    """dump.json records a node id twice in "data"."""

    def __init__(self, path: Path, ids: list[str]) -> None:
        more = f" (and {len(ids) - 1} other id(s))" if len(ids) > 1 else ""
        super().__init__(f"{path}: {ids[0]!r}{more} is recorded twice in \"data\"; a node id names one call "
                         "(a JSON parser would keep the last record silently)")


def _add_chunk(builder: HierarchyBuilder, text: bytes, source: str, state: dict[str, bool],
               members: Callable[[bytes], list[bytes] | None]) -> dict[str, Any]:
    """Add the tensors of one chunk of records (typed when they fit, else record by record, else the records
    holding bare NaN/Infinity as plain dicts and the others so, else all as plain dicts); return the records.
    `state` carries what earlier chunks of the file needed; `members` splits a chunk into its records' texts.

    The text is searched for bare NaN/Infinity (msgspec stops there) only once a chunk did not decode, or first
    once a chunk of the file held them: the search costs a twentieth of a chunk's read."""
    records = None
    if state.get("non_finite") and _non_finite(text):
        records = _add_non_finite_apart(builder, text, source, state, members)
    if records is None:
        records = _add_decoded(builder, text, source, state)
    if records is None and not state.get("non_finite") and _non_finite(text):
        state["non_finite"] = True  # the file's next chunks likely hold such tokens too: split them first
        records = _add_non_finite_apart(builder, text, source, state, members)
    if records is None:
        records = loads_object(text)
        _add_records(builder, records, source)
    return records


def _non_finite(text: bytes) -> bool:
    """Whether JSON text may hold a bare NaN or Infinity (or only the word, in a string)."""
    return b"NaN" in text or b"Infinity" in text


def _add_decoded(builder: HierarchyBuilder, text: bytes, source: str, state: dict[str, bool]) -> dict[str, Any] | None:
    """`_add_chunk` by msgspec (typed, else record by record); None, and nothing added, when that does not read it."""
    records = None if state.get("mixed") else typed_records(text)
    plain: set[str] = set()
    if records is None and (mixed := mixed_records(text)) is not None:
        records, plain = mixed
        state["mixed"] = bool(plain)  # the file's next chunks likely hold such records too: decode them so first
    if records is None:
        return None
    leaves = collect_typed(records, source, plain)  # plain records' leaves are read by `leaf_row`, as on the dict route
    try:
        add_leaves(builder, leaves, typed=True, source=f"{source}/{DUMP_FILE}")
    except Misfit:
        return None
    return records


def _add_non_finite_apart(builder: HierarchyBuilder, text: bytes, source: str, state: dict[str, bool],
                          members: Callable[[bytes], list[bytes] | None]) -> dict[str, Any] | None:
    """`_add_chunk` for a chunk msgspec cannot read because a few records hold bare NaN or Infinity (JSON has
    neither; a mask filled with -inf, one call per layer, puts one in nearly every chunk): those records as plain
    dicts, the others by `_add_decoded`. None, and nothing added, when the chunk's layout does not split."""
    parts = members(text)
    if not parts:
        return None
    odd = [b"NaN" in part or b"Infinity" in part for part in parts]
    if all(odd):
        return None
    decoded = _add_decoded(builder, b"{" + b",".join(compress(parts, [not o for o in odd])) + b"}", source, state)
    if decoded is None:
        return None
    plain = loads_object(b"{" + b",".join(compress(parts, odd)) + b"}")
    _add_records(builder, plain, source)
    return _in_text_order(parts, odd, decoded, plain)


def _in_text_order(parts: list[bytes], odd: list[bool], decoded: dict[str, Any], plain: dict[str, Any]) -> dict:
    """The records of both halves of a split chunk in the order of its text (a key repeated within a half is
    kept once, as a parser keeps it; the caller checks the text for repeats)."""
    halves = iter(decoded.items()), iter(plain.items())
    merged: dict[str, Any] = {}
    for is_odd in odd:
        key, value = next(halves[is_odd], (None, None))
        if key is not None and key not in merged:
            merged[key] = value
    for half in halves:  # a repeated key leaves its half short: add what remains
        merged.update(half)
    return merged


def _add_records(builder: HierarchyBuilder, records: Mapping[str, Any], source: str) -> None:
    add_leaves(builder, collect_records(records, source), source=f"{source}/{DUMP_FILE}")


def _read_part(path: Path, missing: list[str], *, required: bool = False, data: bytes | None = None) -> dict[str, Any]:
    """A part of the dump folder (`data`: its bytes, when read already); {} and a note when it is missing."""
    if data is None and not path.is_file() and not required:
        missing.append(f"{path.name}: file not found")
        return {}
    loaded = read_json(path, flat_keys=path.name == CONSTRUCT_FILE, unique_keys=path.name != CONSTRUCT_FILE,
                       data=data)
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

    builder = HierarchyBuilder()
    info = _add_nodes(builder, dump, dict(zip(data, count())), construct, stack, source=source, notes=list(missing),
                      md5=lambda: bool(md5_flag(data, source)), add_tensors=lambda b: _add_records(b, data, source))
    return _built(builder, info)


def _add_nodes(
    builder: HierarchyBuilder,
    header: Mapping[str, Any],
    data: Mapping[str, int],
    construct: Mapping[str, Any] | None,
    stack: Mapping[str, Any] | None,
    *,
    source: str,
    notes: list[str],
    md5: Callable[[], bool],
    add_tensors: Callable[[HierarchyBuilder], None] | None = None,
    compiled: bool = False,
) -> RunInfo:
    """Add the nodes (ids and order from `data`: each dump.json id and its position there), tensors (already in
    `builder`, or `add_tensors`) and stacks to `builder`; return the run's `RunInfo`.

    `md5` tells whether the first tensor record has an md5 (called last: records are checked first). `compiled`: numba
    is loaded (the compiled pass read dump.json), so the node ids are parsed by its compiled parser too.
    """
    structure = _structure(construct or {}, data, source, compiled=compiled)
    start = len(builder)
    builder.add_nodes(*structure.columns, index=structure.index[0] if structure.index and not start else None)
    builder.expect_tensor_order(list(data), structure.dump_rows + start)  # the records' order: their tensors'
    notes.extend(structure.notes)
    if not data:  # a dump of nothing: said, so that the run is never taken for a whole one
        notes.append(f"{DUMP_FILE}: \"data\" holds no call (msprobe recorded nothing: was the dump stopped before "
                     "the first step?)")
    if add_tensors is not None:
        add_tensors(builder)
    _attach_stacks(builder, stack or {}, source, notes)
    _add_implicit_parents(builder, notes)
    if not structure.index and structure.dump_ids and not start and len(builder) == len(structure.columns[0]):
        structure.index.append(builder.node_index())  # a structure kept for the next read: its rows found once
    step, rank = _step_rank(source)
    return RunInfo(
        path=source, format="msprobe", framework=str(header.get("framework") or ""),
        task=_task(header, md5()), level=str(header.get("level") or ""), rank=rank, step=step, missing=tuple(notes),
    )


@dataclass(frozen=True, slots=True)
class _Structure:
    """What `_add_nodes` derives from construct.json and the ids of dump.json alone: `HierarchyBuilder.add_nodes`'s
    columns and the notes on construct.json. The lists are never changed (the builder copies them)."""

    construct: list[tuple[str, Any]]
    dump_ids: list[str]
    columns: tuple[list, ...]
    dump_rows: np.ndarray  # the row among the columns of each dump.json record's node, in the records' order
    notes: tuple[str, ...]
    source: Mapping[str, Any]  # the construct.json object itself (`_read_construct` gives it again for the same text)
    text: bytes | None  # the text of that construct.json, when it was read whole from a file
    index: list[tuple[dict[str, int], np.ndarray]] = field(default_factory=list)  # `node_index` of its first read

    def fits(self, construct: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
        """Whether `construct` and `data`'s ids are those this structure was made from (members in order)."""
        if len(construct) != len(self.construct) or len(data) != len(self.dump_ids) or list(data) != self.dump_ids:
            return False
        return construct is self.source or list(construct.items()) == self.construct


@dataclass(slots=True)
class _Reuse:
    """What a `reusing_structure` block keeps between reads: the last structure, and the text and object of the
    construct.json just parsed (until its structure is made and takes the text)."""

    last: _Structure | None = None
    parsed: tuple[bytes, Mapping[str, Any]] | None = None


_REUSE: ContextVar[_Reuse | None] = ContextVar("_REUSE", default=None)


@contextmanager
def reusing_structure() -> Iterator[None]:
    """Within the block, a read whose construct.json and dump.json ids equal those of the previous read (of at most
    `REUSE_MAX_NODES` nodes) reuses the node columns derived from them instead of deriving them again, and when its
    stacks are the same too, the previous read's node table (`hierarchy.reusing_node_tables`).

    The two runs of a pair, and the ranks of a job, usually have the same model and so the same structure: a batch
    of small runs (`graphcmp batch`) reads them one after the other. The graphs read are the same either way.
    """
    reuse = _Reuse()
    token = _REUSE.set(reuse)
    try:
        with reusing_node_tables():
            yield
    finally:
        _REUSE.reset(token)
        reuse.last = reuse.parsed = None


def _structure(construct: Mapping[str, Any], data: Mapping[str, int], source: str, *,
               compiled: bool = False) -> _Structure:
    """The node columns of `construct` and `data`'s ids (each dump.json id and its position there; the previous
    read's columns when they are the same, see `reusing_structure`)."""
    reuse = _REUSE.get()
    if reuse is not None and reuse.last is not None and reuse.last.fits(construct, data):
        reuse.parsed = None
        return reuse.last
    notes: list[str] = []
    ids, seq, dump_only, order, has_data, dump_rows = _sequence(construct, data)
    kinds, ops, directions = _parsed_ids(ids, compiled)
    parents = _parents(construct, data, [(ids[r], kinds[r]) for r in dump_only], source, notes)
    # construct's own parents come first in `parents`, in its order: placed by `order`, not looked up one by one
    parent_of = list(islice(parents.values(), len(construct)))
    if order is not None:
        parent_of.extend(parents.get(ids[r]) for r in sorted(dump_only, key=order.__getitem__))
        parent_of = list(map(parent_of.__getitem__, order))
    parsed = reuse.parsed if reuse is not None else None
    text = parsed[0] if parsed is not None and parsed[1] is construct else None
    kept = reuse is not None and len(ids) <= REUSE_MAX_NODES
    structure = _Structure(list(construct.items()) if kept else [], list(data) if kept else [], (
        ids, kinds, ops, directions, parent_of, seq, has_data), dump_rows, tuple(notes), construct, text)
    if reuse is not None:  # the text now lives in the structure, or not at all
        reuse.last, reuse.parsed = (structure if kept else None), None
    return structure


def _parsed_ids(ids: list[str], compiled: bool) -> tuple[list[int], list[str], list[int]]:
    """`parse_node_ids` of the ids; by the compiled parser when numba is loaded already (the same columns)."""
    if not compiled:
        return parse_node_ids(ids)
    from graphcmp.core.readers.naming_compiled import parse_joined  # see tests/test_layers.py: LAZY_IMPORTS

    kinds, ops, directions, _ = parse_joined(ids)
    return kinds.tolist(), ops, directions.tolist()


def _read_construct(path: Path, missing: list[str]) -> dict[str, Any]:
    """`_read_part` of construct.json; within `reusing_structure`, the previous structure's object itself when the
    file's text is the same (read, not parsed: a twentieth of the parse), else the text read parsed."""
    reuse = _REUSE.get()
    if reuse is None:
        return _read_part(path, missing)
    last, text = reuse.last, _text_of(path)
    if last is not None and last.text is not None and text == last.text:
        return last.source  # type: ignore[return-value]
    notes = len(missing)
    construct = _read_part(path, missing, data=text)
    reuse.parsed = (text, construct) if len(missing) == notes and text is not None else None  # read whole, in full
    return construct


def _text_of(path: Path) -> bytes | None:
    try:
        with open_regular(path) as f:
            return f.read()
    except (OSError, DumpFormatError):
        return None


def _built(builder: HierarchyBuilder, info: RunInfo) -> DumpGraph:
    try:
        return builder.build(info)
    except GraphCycleError as err:  # the parents come from construct.json: name it
        raise GraphCycleError(f"{info.path}/{CONSTRUCT_FILE}: {str(err).removeprefix(f'{info.path}: ')}") from None


def _add_implicit_parents(builder: HierarchyBuilder, notes: list[str]) -> None:
    """A parent construct.json names but never lists becomes a top-level node starting with its first child, and
    `notes` say so: msprobe lists every node it names, so the file lost entries (or was edited), and what
    stood above that parent is unknown."""
    missing = builder.missing_parents()
    for parent, seq in missing.items():
        kind, op, direction, _ = parse_node_id(parent)
        builder.add_node(parent, kind, op, direction, None, seq, has_data=False)
    if missing:
        first = next(iter(missing))
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        notes.append(f"{CONSTRUCT_FILE}: parent {first!r}{more} named but not listed; added at top level, "
                     "without data")


def _task(header: Mapping[str, Any], md5: bool) -> str:
    task = str(header.get("task") or "statistics")
    return "md5" if task == "statistics" and md5 else task


def _sequence(construct: Mapping[str, Any], data: Mapping[str, int]) -> tuple[list[str], list[float], list[int],
                                                                              list[int] | None, list[bool],
                                                                              np.ndarray]:
    """Node ids in creation order (construct.json's), their order keys, the rows of the dump-only nodes among them
    (dump-only nodes go after their dump predecessor), where each id is in construct.json's ids followed by the
    dump-only ones in dump.json's order (None: construct.json's ids alone, in order), whether each has a record,
    and the row of each record's node (in the records' order).

    `data` gives each dump.json id's position there: one look per construct.json id tells both which of its nodes
    have a record and which records have no node in it."""
    ids, dump_ids = list(construct), list(data)
    position = _record_positions(data, ids)  # each id's record, -1: none
    dumped = position >= 0
    listed = np.flatnonzero(dumped)
    dump_rows = np.empty(len(dump_ids), np.int64)
    if len(listed) == len(dump_ids):  # every record's node is in construct.json: in its order
        dump_rows[position[listed]] = listed
        return ids, list(map(float, range(len(ids)))), [], None, dumped.tolist(), dump_rows
    row_of = np.full(len(dump_ids), -1, np.int64)  # each record's node among construct.json's ids, -1: dump-only
    row_of[position[dumped]] = listed
    rows = np.arange(len(dump_ids))
    extra = row_of < 0
    before = np.maximum.accumulate(np.where(extra, -1, rows))[extra]  # each dump-only node's dump predecessor
    previous = np.where(before >= 0, row_of[before], -1).astype(np.float64)
    values = previous + (rows[extra] - before) / (len(dump_ids) + 2)  # the k-th dump-only node after it: k steps on
    keys = np.concatenate([np.arange(len(ids), dtype=np.float64), values])
    listed_count = len(ids)
    ids.extend(compress(dump_ids, extra.tolist()))
    order = np.argsort(keys, kind="stable")
    placed = np.empty(len(order), np.int64)  # each id's row once ordered
    placed[order] = np.arange(len(order))
    dump_rows[position[dumped]] = placed[:listed_count][dumped]
    dump_rows[extra] = placed[listed_count:]
    at = order.tolist()
    has_data = np.concatenate([dumped, np.ones(len(ids) - listed_count, bool)])[order].tolist()
    return (list(map(ids.__getitem__, at)), keys[order].tolist(), np.flatnonzero(order >= listed_count).tolist(), at,
            has_data, dump_rows)


def _record_positions(data: Mapping[str, int], ids: list[str]) -> np.ndarray:
    """The position in `data` of each of `ids` (-1: none): all at once by their bytes when `data` is a compiled
    read's (`id_kernels.IdRows`), else one look each."""
    from graphcmp.core.id_kernels import IdRows  # see tests/test_layers.py: LAZY_IMPORTS

    if isinstance(data, IdRows):
        return data.rows_of(ids)
    return np.fromiter(map(data.get, ids, repeat(-1)), np.int64, len(ids))


def _parents(
    construct: Mapping[str, Any], data: Mapping[str, int], dump_only: list[tuple[str, int]], source: str,
    notes: list[str],
) -> dict[str, str | None]:
    """Each node's parent: construct.json's, a parameter-gradient node's module call, a backward API call adopted
    (`_adopt_backward_calls`); `dump_only` holds the ids of dump.json that construct.json lacks, with their kinds."""
    if not set(map(type, construct.values())) <= {str, type(None)}:
        node_id, parent = next((k, p) for k, p in construct.items() if p is not None and not isinstance(p, str))
        raise DumpFormatError(f"{source}/{CONSTRUCT_FILE}: {node_id!r}: parent is a "
                              f"{type(parent).__name__}, expected a node id or null")
    parents: dict[str, str | None] = dict(construct)
    ids = _Ids(construct, data)
    orphans = 0
    for node_id, kind in dump_only:
        if kind == NodeKind.PARAM_GRAD:
            parents[node_id] = _param_grad_owner(node_id, ids)
        elif construct:
            orphans += 1
    if orphans:
        notes.append(f"{CONSTRUCT_FILE}: {orphans} node(s) of {DUMP_FILE} are not in it; shown at top level")
    _adopt_backward_calls(parents, ids)
    return parents


class _Ids(ChainMap):
    """The node ids of construct.json and dump.json together, without a set of a million ids built for a few
    looks; a look is two dict looks (ChainMap's own runs a generator)."""

    def __contains__(self, node_id: object) -> bool:
        construct, data = self.maps
        return node_id in construct or node_id in data


def _adopt_backward_calls(parents: dict[str, str | None], ids: Container[str]) -> None:
    """A top-level backward API call goes under the backward call of the module its forward twin ran in.

    construct.json gives some backward calls no parent (``Functional.embedding.0.backward``: the
    module's backward hook fires after the call); msprobe's own graph puts them under
    ``Module.embedding.Embedding.backward.0``, which is where a reader looks for them.
    """
    for node_id in [n for n, parent in parents.items() if parent is None and n.endswith(".backward")]:
        twin_parent = parents.get(node_id[: -len("backward")] + "forward")
        if twin_parent and twin_parent.rsplit(".", 2)[-2] == "forward":
            stem, _, counter = twin_parent.rpartition(".forward.")
            candidate = f"{stem}.backward.{counter}"
            if candidate in ids:
                parents[node_id] = candidate


_GRAD_SUFFIX = re.compile(r"\.parameters_grad(?:\.(\d+))?$")


def _param_grad_owner(node_id: str, ids: Mapping[str, Any]) -> str | None:
    """The backward call of the module whose parameter gradients these are: the one of the same counter, else
    its latest (a checkpointed module's backward belongs to its recomputed call, ``backward.1``), else its
    forward call. The gradients then stand where they were computed, in the backward pass."""
    m = _GRAD_SUFFIX.search(node_id)
    stem, counter = node_id[: m.start()], m.group(1) or "0"
    if f"{stem}.backward.{counter}" in ids:
        return f"{stem}.backward.{counter}"
    calls = sorted((i for i in ids if i.startswith(stem + ".backward.") and i.rsplit(".", 1)[1].isdigit()),
                   key=lambda i: int(i.rsplit(".", 1)[1]))
    if calls:
        return calls[-1]
    return f"{stem}.forward.{counter}" if f"{stem}.forward.{counter}" in ids else None


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
        unknown += builder.set_stacks(targets, row)
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

