"""Writing comparisons (or runs) as msprobe's SQLite `.vis.db`, the file tb-graph-ascend 8.2+/26.x opens.

One file holds every (step, rank): pass several documents and each becomes one graph pair. The
tables and indexes are msprobe 26.2's (``tb_nodes``, ``tb_stack``, ``tb_config``); a node's row holds
the texts of its `.vis` record (`graphcmp.core.export.vis_records`), made and inserted a block of
nodes at a time, and the indexes are built once at the end, as msprobe does. For a large document on a
machine with a second core, a forked process makes the texts while this one inserts the rows and hands them
over through files in memory (`_Slots`); making them takes longer than inserting them, so whenever this
process would wait for a block it makes the next one nobody has taken itself (`_Claims`).
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import orjson

from graphcmp.core.errors import OutputError
from graphcmp.core.export.vis import VIS_COLORS, VIS_TOOL_TIP, ExportResult
from graphcmp.core.export.vis_records import (
    VIS_NODE_TYPE,
    VisBlock,
    VisSide,
    VisTexts,
    block_starts,
    precision_indices,
    vis_sides,
    vis_task,
)
from graphcmp.core.forking import Forked, Sender, can_fork_aside
from graphcmp.core.outputs import atomic_path
from graphcmp.core.readers.vis import ATTR_OVERFLOW
from graphcmp.core.records import DumpGraph
from graphcmp.core.report import CompareReport

__all__ = ["AHEAD_BLOCKS", "FORK_NODES", "SCHEMA", "write_vis_db"]

SCHEMA = (
    """CREATE TABLE tb_nodes (
    id TEXT PRIMARY KEY, graph_id TEXT NOT NULL, node_order INTEGER NOT NULL, node_name TEXT NOT NULL,
    node_type TEXT NOT NULL, up_node TEXT, sub_nodes TEXT, precision_index INTEGER, overflow_level TEXT,
    micro_step_id INTEGER NOT NULL, matched_node_link TEXT, stack_id TEXT, parallel_merge_info TEXT,
    matched_distributed TEXT, modified INTEGER NOT NULL, input_data TEXT, output_data TEXT, data_source TEXT,
    dump_data_dir TEXT, step INTEGER NOT NULL, rank INTEGER NOT NULL, is_distributed INTEGER)""",
    "CREATE TABLE tb_stack (id TEXT PRIMARY KEY, stack_info TEXT)",
    """CREATE TABLE tb_config (
    id TEXT PRIMARY KEY, graph_type TEXT NOT NULL, task TEXT, tool_tip TEXT, micro_steps INTEGER,
    overflow_check INTEGER, node_colors TEXT NOT NULL, rank_list TEXT NOT NULL, step_list TEXT NOT NULL)""",
)
"""Tables of a `.vis.db`, as msprobe 26.2.0 creates them."""

_INDEXES = (
    "CREATE INDEX index1 ON tb_nodes (step, rank, data_source, up_node, node_order)",
    "CREATE INDEX index2 ON tb_nodes (step, rank, data_source, node_name)",
    "CREATE INDEX index3 ON tb_nodes (step, rank, data_source, node_order)",
    "CREATE INDEX index4 ON tb_nodes (step, rank, node_order)",
    "CREATE INDEX index5 ON tb_nodes (step, rank, micro_step_id, node_order)",
    "CREATE INDEX index6 ON tb_nodes (step, rank, modified, matched_node_link)",
    "CREATE INDEX index7 ON tb_nodes (is_distributed)",
)
_PRAGMAS = ("PRAGMA page_size=65536", "PRAGMA journal_mode=OFF", "PRAGMA synchronous=OFF",
            "PRAGMA temp_store=MEMORY", "PRAGMA cache_size=-65536")
"""A new file written under a temporary name and renamed when complete needs no journal and no syncs (a failed
write leaves no file); a 64 MiB page cache holds the primary key's index of a 200k comparison (inserts are no
faster with 256 MiB, which took 170 MB more). 64 KiB pages (SQLite's largest)
hold a node's row (2.7 KB on average, with its tensors' texts) without overflow pages: inserting and each index's
scan of the table take half the time they take with 4 KiB pages."""
_INDEX_CACHE = "PRAGMA cache_size=-8192"
"""Building the indexes: SQLite's sorter sorts runs the size of the page cache and merges them; 8 MiB runs sort
faster than one 256 MiB run (0.4 s of 3.7 s for the 200k result's seven indexes)."""
FORK_NODES = 20_000
"""A document of at least this many nodes (both runs) has its record texts made by a forked process while this one
inserts the rows (below it, starting the process costs more than it saves)."""


def write_vis_db(
    documents: CompareReport | DumpGraph | Iterable[CompareReport | DumpGraph], path: str | os.PathLike[str]
) -> ExportResult:
    """Write comparisons (or runs) into one tb-graph-ascend `.vis.db`, one graph pair per (step, rank).

    Parameters
    ----------
    documents : CompareReport, DumpGraph or an iterable of them
        Consumed one at a time; step and rank come from each npu run's `RunInfo` (None counts as 0).
        All must be comparisons, or all runs.
    path : path-like
        The file to write (replaced if it exists).

    Raises
    ------
    OutputError
        If the file cannot be written, two documents share a (step, rank), or comparisons and runs are mixed.
    """
    start = time.perf_counter()
    if isinstance(documents, (CompareReport, DumpGraph)):
        documents = (documents,)
    with atomic_path(path) as tmp:
        tmp.unlink(missing_ok=True)
        try:
            count = _write(tmp, documents, str(path))
        except sqlite3.Error as err:
            raise OutputError(f"{path}: cannot write ({err})") from err
    return ExportResult((str(path),), count, Path(path).stat().st_size, time.perf_counter() - start)


def _write(db_path: Path, documents: Iterable[CompareReport | DumpGraph], target: str) -> int:
    conn = sqlite3.connect(db_path)
    try:
        for pragma in _PRAGMAS:
            conn.execute(pragma)
        for statement in SCHEMA:
            conn.execute(statement)
        seen: dict[tuple[int, int], None] = {}
        config: dict[str, Any] = {}
        count = 0
        for document in documents:
            key = _key(document, seen, config, target)
            sides = vis_sides(document)
            with _texts_of(sides) as texts:
                for index, side in enumerate(sides):
                    count += _insert_side(conn, side, key, texts(index))
        if not seen:
            raise OutputError(f"{target}: nothing to write (no documents)")
        _insert_config(conn, config, seen)
        conn.execute(_INDEX_CACHE)
        for statement in _INDEXES:
            conn.execute(statement)
        conn.commit()
        return count
    finally:
        conn.close()


def _key(document: CompareReport | DumpGraph, seen: dict, config: dict[str, Any], target: str) -> tuple[int, int]:
    npu = document.npu if isinstance(document, CompareReport) else document
    key = (npu.info.step or 0, npu.info.rank or 0)
    if key in seen:
        raise OutputError(f"{target}: two documents are step {key[0]} rank {key[1]}; each (step, rank) "
                          "can be written once")
    seen[key] = None
    graph_type = "compare" if isinstance(document, CompareReport) else "build"
    if config.setdefault("graph_type", graph_type) != graph_type:
        raise OutputError(f"{target}: cannot mix comparisons and single runs in one .vis.db")
    config.setdefault("task", vis_task(npu))
    config["micro_steps"] = max(config.get("micro_steps", 1), int(npu.nodes.micro_step.max(initial=0)) + 1)
    config["overflow"] = config.get("overflow", False) or _has_overflow(npu)
    return key


def _has_overflow(graph: DumpGraph) -> bool:
    return bool(graph.nodes.attrs) and any(k == ATTR_OVERFLOW for a in graph.nodes.attrs for k, _ in a)


def _insert_side(conn: sqlite3.Connection, side: VisSide, key: tuple[int, int], blocks: Iterator[_RowTexts]) -> int:
    step, rank = key
    graph_id = f"{side.name}_{step}_{rank}"
    stacks = side.graph.stacks
    conn.executemany("INSERT INTO tb_stack VALUES (?, ?)",
                     [(f"{graph_id}_{k}", orjson.dumps(list(s)).decode()) for k, s in enumerate(stacks)]
                     + [(f"{graph_id}_none", "[]")])
    columns = _NodeColumns(side, graph_id)
    insert = _insert_statement(columns, step, rank)
    for block in blocks:
        conn.executemany(insert, _rows(block, columns))
    return len(side.graph)


class _RowTexts(NamedTuple):
    """The values of rows [start, stop) of one side that come from its `.vis` records: each JSON column's texts
    joined by newlines (orjson never writes a raw newline), which is all that crosses from a forked text maker
    (the four texts through `_Slots`, which gives them back decoded, the rest through the pipe)."""

    start: int
    stop: int
    outputs: bytes | str  # output_data
    inputs: bytes | str  # input_data
    subnodes: bytes | str  # sub_nodes ("" for a node without children)
    links: bytes | str  # matched_node_link
    overflow: list[str | None] | None  # overflow_level, None when no node has attributes
    distributed: tuple[list[str], list[int]] | None  # matched_distributed, is_distributed; idem


def _row_texts(texts: VisTexts, block: VisBlock) -> _RowTexts:
    lo, hi = block.start, block.stop
    overflow = [v or None for v in texts.overflow[lo:hi]] if texts.overflow is not None else None
    distributed = None
    if texts.distributed is not None:
        pairs = [_distributed(v) for v in texts.distributed[lo:hi]]
        distributed = ([text for text, _ in pairs], [flag for _, flag in pairs])
    return _RowTexts(lo, hi, b"\n".join(block.outputs), b"\n".join(block.inputs),
                     b"\n".join([t if t != b"[]" else b"" for t in block.subnodes]), b"\n".join(block.links),
                     overflow, distributed)


def _side_texts(side: VisSide) -> Iterator[_RowTexts]:
    """The `_RowTexts` of a side's blocks, made here."""
    texts = VisTexts(side)
    for block in texts.blocks():
        yield _row_texts(texts, block)


@contextmanager
def _texts_of(sides: tuple[VisSide, ...]) -> Iterator[Callable[[int], Iterator[_RowTexts]]]:
    """The `_RowTexts` of each side (by its index): made by a forked process and this one while this one inserts
    the rows when the document is large and the machine has a second core, else made here when asked for."""
    if sum(len(side.graph) for side in sides) < FORK_NODES or not can_fork_aside():
        yield lambda index: _side_texts(sides[index])
        return
    maker = _ForkedTexts(sides)
    try:
        yield maker.texts
    finally:
        maker.stop()


class _Makers:
    """Any block of a document's sides, numbered across the sides in order, as `_RowTexts`; a side's `VisTexts` is
    made when first needed (by each process that makes its texts: `prepare` it before forking to share it)."""

    def __init__(self, sides: tuple[VisSide, ...]) -> None:
        self.sides = sides
        self.blocks = [(index, lo) for index, side in enumerate(sides) for lo in block_starts(len(side.graph))]
        """(side, first row) of each block."""
        counts = [len(block_starts(len(side.graph))) for side in sides]
        self.side_blocks = [range(end - count, end) for count, end in zip(counts, accumulate(counts))]
        """The numbers of each side's blocks."""
        self._texts: dict[int, VisTexts] = {}

    def prepare(self, index: int) -> VisTexts:
        """The `VisTexts` of side `index`."""
        texts = self._texts.get(index)
        if texts is None:
            texts = self._texts[index] = VisTexts(self.sides[index])
        return texts

    def make(self, k: int) -> _RowTexts:
        index, lo = self.blocks[k]
        texts = self.prepare(index)
        return _row_texts(texts, texts.block(lo))


class _Claims:
    """The blocks taken so far, shared by this process and the forked one: both take the next block in order
    (`next`); this one also takes the block it is to insert next while nobody has (`take`).

    Neither waits for the counter's lock longer than `LOCK_WAIT` seconds (a process killed while holding it never
    gives it back): it then takes nothing, and the forked process stops, so that this one makes the rest.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self._next = multiprocessing.get_context("fork").Value("q", 0)

    def next(self, stop: int | None = None) -> int | None:
        """Take the next block; None when every block (before block `stop`) is taken, or the lock stays held."""
        stop = self.count if stop is None else min(stop, self.count)
        return self._take(lambda k: k < stop)

    def take(self, k: int) -> bool:
        """Take block `k` if it is the next one."""
        return self._take(lambda next_k: next_k == k) is not None

    def _take(self, wanted: Callable[[int], bool]) -> int | None:
        lock = self._next.get_lock()
        if not lock.acquire(timeout=LOCK_WAIT):
            return None
        try:
            k = self._next.value
            if not wanted(k):
                return None
            self._next.value = k + 1
            return k
        finally:
            lock.release()


LOCK_WAIT = 1.0
"""Seconds `_Claims` waits for its lock, held for a few instructions at a time: longer only if its holder died."""


AHEAD_BLOCKS = 4
"""Blocks this process makes ahead of those it inserts while it waits for the forked process (more would only
hold texts in memory: the two share the blocks as they go)."""


class _ForkedTexts:
    """A document's `_RowTexts` made by a forked process (which shares the document with this one without a copy)
    and, whenever this one would wait for it, by this one: each takes the next block nobody has taken (`_Claims`).
    The forked process hands its blocks over through `_Slots`; should it fail, this process makes the rest itself.

    The first side's `VisTexts` is made before forking and shared by both; this process makes blocks of that side
    only (it is the slow one, with the comparison's texts: the forked process makes the bench side's faster than this
    one inserts them), so it holds no other side's `VisTexts` unless the forked process fails.
    """

    def __init__(self, sides: tuple[VisSide, ...]) -> None:
        self._makers = _Makers(sides)
        self._makers.prepare(0)
        self._own = self._makers.side_blocks[0].stop  # this process makes blocks before this one, unless it fails
        self._claims = _Claims(len(self._makers.blocks))
        self._slots = _Slots()
        self._maker = Forked(_send_texts, self._makers, self._claims, self._slots)
        self._ready: dict[int, _RowTexts] = {}  # blocks made or received ahead of their turn
        self._failed = False

    def texts(self, index: int) -> Iterator[_RowTexts]:
        """The `_RowTexts` of side `index`, in row order (the sides are asked for in order)."""
        for k in self._makers.side_blocks[index]:
            yield self._block(k)

    def _block(self, k: int) -> _RowTexts:
        """Block `k`, made here if nobody has taken it, else received (and first side's blocks made meanwhile)."""
        while (texts := self._ready.pop(k, None)) is None:
            if self._failed or (k < self._own and self._claims.take(k)):
                return self._makers.make(k)
            if self._maker.has_sent() or len(self._ready) >= AHEAD_BLOCKS or not self._make_ahead():
                self._receive()
        return texts

    def _make_ahead(self) -> bool:
        """Make the next block nobody has taken, if it is one of the first side's."""
        k = self._claims.next(self._own)
        if k is None:
            return False
        self._ready[k] = self._makers.make(k)
        return True

    def _receive(self) -> None:
        """Wait for the forked process's next block; if it failed, or the block cannot be read back, the rest is
        made here."""
        item = self._maker.receive()
        texts = self._slots.take(*item[1:]) if item is not None else None
        if texts is None:
            self._failed = True
        else:
            self._ready[item[0]] = texts

    def stop(self) -> None:
        self._maker.stop()
        self._slots.close()


def _send_texts(answer: Sender, makers: _Makers, claims: _Claims, slots: _Slots) -> None:
    """Make the next block nobody has taken and hand it over, with its number, until none is left; None if
    anything fails (the parent then makes the rest)."""
    try:
        while (k := claims.next()) is not None:
            answer.send((k, *slots.put(makers.make(k))))
    except Exception:  # whatever it was (a closed pipe too), the parent makes the rest itself
        with suppress(OSError):
            answer.send(None)


_TEXT_FIELDS = ("outputs", "inputs", "subnodes", "links")


class _Slots:
    """Files in memory through which a forked process hands a block's texts to this one: it writes them into a free
    file and sends their sizes through the pipe; this process reads them back into a buffer it keeps for the file
    and decodes them from there.

    Through the pipe itself (``Sender.send``) the texts cross in 64 KiB pieces, each copied twice more here and
    waking both processes: about 1 s of this process's CPU per 900 MB (the 200k comparison). Two files: the forked
    process fills one while this one reads the other, and waits when it is a block ahead.
    """

    def __init__(self, count: int = 2) -> None:
        self.files = [_memory_file() for _ in range(count)]
        self.free = multiprocessing.get_context("fork").Semaphore(count)
        self._next = 0  # in the forked process: the file it fills next
        self._buffers = [bytearray() for _ in range(count)]  # in this process: kept (new memory is slow to touch)

    def put(self, texts: _RowTexts) -> tuple[int, list[int], _RowTexts]:
        """Write the texts of a block into the next file once it is free (forked process); what to send."""
        self.free.acquire()
        slot, self._next = self._next, (self._next + 1) % len(self.files)
        parts = [getattr(texts, field) for field in _TEXT_FIELDS]
        if os.pwritev(self.files[slot].fileno(), parts, 0) != sum(map(len, parts)):
            raise OSError("short write")
        return slot, [len(part) for part in parts], texts._replace(**dict.fromkeys(_TEXT_FIELDS, b""))

    def take(self, slot: int, sizes: list[int], texts: _RowTexts) -> _RowTexts | None:
        """The block `put` wrote into file `slot`, decoded (this process); the file is then free again. None if it
        cannot be read."""
        try:
            return texts._replace(**dict(zip(_TEXT_FIELDS, self._read(slot, sizes))))
        except (OSError, UnicodeDecodeError):
            return None
        finally:
            self.free.release()

    def _read(self, slot: int, sizes: list[int]) -> list[str]:
        total = sum(sizes)
        if len(self._buffers[slot]) < total:
            self._buffers[slot] = bytearray(total)
        with memoryview(self._buffers[slot]) as view:
            if os.preadv(self.files[slot].fileno(), [view[:total]], 0) != total:
                raise OSError("short read")
            cuts = [0, *accumulate(sizes)]
            return [str(view[a:b], "utf-8") for a, b in pairwise(cuts)]

    def close(self) -> None:
        for file in self.files:
            file.close()


def _memory_file() -> BinaryIO:
    """An unnamed file in memory (Linux), else a temporary file."""
    if hasattr(os, "memfd_create"):
        return os.fdopen(os.memfd_create("graphcmp-vis-db", os.MFD_CLOEXEC), "r+b", buffering=0)
    return tempfile.TemporaryFile(buffering=0)


class _NodeColumns:
    """The values of a side's rows that are not texts of its records, as object arrays indexed by node row, and which
    of the record columns no node of the side has (written in the INSERT, not bound: binding None is slow)."""

    def __init__(self, side: VisSide, graph_id: str) -> None:
        nodes = side.graph.nodes
        self.graph_id = graph_id
        self.name = side.name
        self.ids = _objects([*nodes.ids, "None"])  # row -1: "None"
        self.parent = nodes.parent
        self.node_type = _objects([str(VIS_NODE_TYPE.get(k, 0)) for k in range(max(VIS_NODE_TYPE) + 1)])[nodes.kind]
        self.stack_id = _objects([f"{graph_id}_{k}" for k in range(len(side.graph.stacks))] + [f"{graph_id}_none"])[
            nodes.stack]
        self.micro_step = nodes.micro_step
        self.precision = precision_indices(side.report)
        self.absent = {**(_NO_PRECISION if self.precision is None else {}), **({} if nodes.attrs else _NO_ATTRIBUTES)}
        """Column -> the SQL value of every row, for the columns that `_rows` does not bind."""


_BOUND = ("node_name", "node_order", "node_type", "up_node", "sub_nodes", "precision_index", "overflow_level",
          "micro_step_id", "matched_node_link", "stack_id", "matched_distributed", "input_data", "output_data",
          "is_distributed")
"""The columns `_rows` can bind, in the order it binds them."""
_NO_PRECISION = {"precision_index": "NULL"}  # a side without verdicts
_NO_ATTRIBUTES = {"overflow_level": "NULL", "matched_distributed": "'{}'", "is_distributed": "0"}  # without attributes


def _insert_statement(columns: _NodeColumns, step: int, rank: int) -> str:
    """The INSERT of a side's node rows with what is the same in all of them written in the statement (fewer values
    to bind per row): the graph id, `_NodeColumns.absent`, and the rest; `_rows`'s values bound by position."""
    graph_id = _quoted(columns.graph_id)
    values = {name: f"?{k}" for k, name in enumerate([c for c in _BOUND if c not in columns.absent], 1)}
    values |= columns.absent
    return (f"INSERT INTO tb_nodes VALUES ({graph_id} || '_' || ?1, {graph_id}, {values['node_order']}, ?1, "
            f"{values['node_type']}, {values['up_node']}, {values['sub_nodes']}, {values['precision_index']}, "
            f"{values['overflow_level']}, {values['micro_step_id']}, {values['matched_node_link']}, "
            f"{values['stack_id']}, '', {values['matched_distributed']}, 0, {values['input_data']}, "
            f"{values['output_data']}, {_quoted(columns.name)}, NULL, {int(step)}, {int(rank)}, "
            f"{values['is_distributed']})")


def _quoted(text: str) -> str:
    """An SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _rows(texts: _RowTexts, columns: _NodeColumns) -> Iterator[tuple]:
    """The values `_insert_statement` binds for each row of a block: those of `_BOUND` not absent from the side."""
    lo, hi = texts.start, texts.stop
    up = columns.ids[columns.parent[lo:hi]].tolist()
    if lo == 0:
        up[0] = ""
    values = {"node_name": columns.ids[lo:hi].tolist(), "node_order": range(lo, hi),
              "node_type": columns.node_type[lo:hi].tolist(), "up_node": up, "sub_nodes": _decoded(texts.subnodes),
              "micro_step_id": columns.micro_step[lo:hi].tolist(), "matched_node_link": _decoded(texts.links),
              "stack_id": columns.stack_id[lo:hi].tolist(), "input_data": _decoded(texts.inputs),
              "output_data": _decoded(texts.outputs)}
    if "precision_index" not in columns.absent:
        values["precision_index"] = columns.precision[lo:hi]
    if "overflow_level" not in columns.absent:  # the side's nodes have attributes: its texts have these columns
        values["overflow_level"] = texts.overflow
        values["matched_distributed"], values["is_distributed"] = texts.distributed
    return zip(*(values[name] for name in _BOUND if name not in columns.absent))


def _decoded(texts: bytes | str) -> list[str]:
    """Newline-joined JSON texts as a list of str, decoded at once."""
    return (texts if isinstance(texts, str) else texts.decode()).split("\n")


def _distributed(value: str | None) -> tuple[str, int]:
    """msprobe's ``matched_distributed`` text of a node read from a file that has it, and whether it says anything."""
    loaded = orjson.loads(value) if value is not None else None
    return (orjson.dumps(loaded).decode(), 1) if loaded else ("{}", 0)


def _objects(values: list) -> np.ndarray:
    out = np.empty(len(values), object)
    out[:] = values
    return out


def _insert_config(conn: sqlite3.Connection, config: dict[str, Any], keys: dict[tuple[int, int], None]) -> None:
    ranks = sorted({rank for _, rank in keys})
    steps = sorted({step for step, _ in keys})
    conn.execute("INSERT INTO tb_config VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (
        "1", config["graph_type"], config["task"], _text(VIS_TOOL_TIP), config["micro_steps"],
        int(config["overflow"]), _text(VIS_COLORS), _text(ranks), _text(steps)))


def _text(value: Any) -> str:
    return orjson.dumps(value).decode()
