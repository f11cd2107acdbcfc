"""Reader for Ascend raw dump folders: one file per executed op (GE, ACL, TF adapter, MindSpore async dumps).

A dump folder is laid out ``{dump_path}/{time}/{device}/{model}/{model_id}/{iteration}/`` (GE) or
``{dump_path}/{device}/{net}_graph_{id}/{id}/{iteration}/`` (MindSpore asynchronous dump); the files of one
iteration sit in its folder, ``{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}`` (`ascend_file`).
The reader takes any folder of such a tree: the first iteration found is the run (its number the step, the
device the rank), later ones are noted. Each op becomes a node named as its header names it (``/layer1/conv2/Conv``),
under scope modules from the ``/`` of its name, in order of its timestamp; its inputs and outputs become tensors
whose statistics are computed from the bytes (in the host layout), and whose data stay in the file
(``file#output.0``) for the real-tensor metrics. A tensor the writer skipped (size 0, device address 0) is kept
without data and named in the op's ``skipped`` attribute.

Statistics-mode dumps (``<dump file>.csv``: Max/Min/Avg/Count/NaN/Inf per tensor) are read as statistics.
Overflow files (``Opdebug.Node_OpDebug.*``, `opdebug`) are tied to the op with the task and stream ids they name
(attribute ``overflow``: block, status and its bits).
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from graphcmp.core import tensor_kernels
from graphcmp.core.ascend_dtypes import half_to_single
from graphcmp.core.dtypes import COMPILED_DTYPES
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.inputs import read_input
from graphcmp.core.readers.ascend_file import (
    FFTS_SLICE,
    DumpHeader,
    DumpName,
    TensorDesc,
    dtype_name,
    ffts_key,
    ffts_order,
    parse_dump_name,
    read_dump_elements,
    read_header,
)
from graphcmp.core.readers.opdebug import OPDEBUG_TYPE, OverflowRecord, read_opdebug
from graphcmp.core.records import Direction, DumpGraph, NodeKind, Role, RunInfo

__all__ = ["DumpOp", "elements_stats", "find_iterations", "folders_holding", "in_threads", "parse_ascend_dump",
           "read_ascend_dump", "read_workers", "scoped_nodes", "sniff", "step_and_rank", "tensor_stats"]

_SEARCH_DEPTH = 6
_STATS_HEADER = ("Input/Output", "Index", "Data Size", "Data Type", "Format", "Shape", "Max Value", "Min Value",
                 "Avg Value", "Count", "Nan Count", "Negative Inf Count", "Positive Inf Count")
_TIME_DIR = re.compile(r"^\d{14}$")


@dataclass(frozen=True, slots=True)
class DumpOp:
    """One dumped op: its file (relative to the run folder), its name parts, header and statistics.

    ``stats`` holds per tensor (max, min, mean, norm) and which exist, ``shapes`` the shape of each tensor
    as compared (the host shape when its layout is known), in the order of ``header.tensors``.
    """

    file: str
    name: DumpName
    header: DumpHeader
    stats: np.ndarray
    present: np.ndarray
    shapes: tuple[str, ...]
    dtypes: tuple[str, ...]
    has_data: tuple[bool, ...]
    threads: int = 1  # FFTS+ thread files whose outputs are joined (from this first one on)


def sniff(path: str | os.PathLike[str]) -> bool:
    """True for a folder holding (here or a few levels down) files named and laid out as Ascend raw dumps."""
    folder = Path(path)
    if not folder.is_dir():
        return False
    return bool(find_iterations(folder, limit=1))


def find_iterations(folder: Path, *, limit: int | None = None) -> list[Path]:
    """Folders at or below `folder` that hold dump files, in path order (numbers compared as numbers)."""
    return folders_holding(folder, _is_dump_file, key=_natural, depth=_SEARCH_DEPTH, limit=limit)


def folders_holding(folder: Path, holds: Callable[[os.DirEntry], bool], *, key: Callable[[str], tuple], depth: int,
                    limit: int | None = None) -> list[Path]:
    """Folders at or below `folder` (down to `depth` levels, hidden ones left out) with a regular file that `holds`
    accepts, breadth first, each folder's entries in `key` order of their names; a folder that holds such a file
    is not searched further. At most `limit` of them."""
    found: list[Path] = []
    todo = [(folder, 0)]
    while todo and (limit is None or len(found) < limit):
        current, level = todo.pop(0)
        try:
            entries = sorted(os.scandir(current), key=lambda e: key(e.name))
        except OSError:
            continue
        if any(e.is_file(follow_symlinks=False) and holds(e) for e in entries):
            found.append(current)
            continue
        if level < depth:
            todo.extend((Path(e.path), level + 1) for e in entries if e.is_dir(follow_symlinks=False)
                        and not e.name.startswith("."))
    return found


def _natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _is_dump_file(entry: os.DirEntry) -> bool:
    name = entry.name
    if name.endswith(".csv"):
        name = name[:-4]
    if parse_dump_name(name) is None:
        return False
    try:
        with open(entry.path, "rb") as file:
            head = file.read(8)
    except OSError:
        return False
    if entry.name.endswith(".csv"):
        return head.startswith(b"Input/Ou")
    return len(head) == 8 and (int.from_bytes(head, "little") < entry.stat().st_size or head[:1] == b"\x0a")


def read_ascend_dump(path: str | os.PathLike[str], op_names: Mapping[str, str] | None = None) -> DumpGraph:
    """Read a raw dump folder (its first iteration) into a run.

    A statistics-mode dump (``.csv`` files) names its ops only as the file names write them (``/`` and ``.`` as
    ``_``); `op_names` maps such a name to the op's own name (from the fusion rule), which the run then uses.

    Raises
    ------
    DumpFormatError
        If no folder at or below `path` holds dump files, or a dump file is damaged.
    """
    folder = Path(path)
    iterations = find_iterations(folder)
    if not iterations:
        raise DumpFormatError(f"{folder}: no Ascend raw dump files here or {_SEARCH_DEPTH} levels below "
                              "(named {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp})")
    notes = []
    if len(iterations) > 1:
        notes.append(f"{iterations[0].relative_to(folder) if iterations[0] != folder else '.'}: read; "
                     f"{len(iterations) - 1} later iteration(s) not read")
    run = iterations[0]
    ops, overflow = read_ops(run, notes)
    step, rank = step_and_rank(run)
    return parse_ascend_dump(ops, overflow, source=str(run), step=step, rank=rank, missing=notes, op_names=op_names)


def read_ops(folder: Path, notes: list[str]) -> tuple[list[DumpOp], list[OverflowRecord]]:
    """The dumped ops of one iteration folder (statistics from their bytes or their ``.csv``) and the overflow
    records of its Opdebug files.

    The files holding bytes are measured by a few threads at once (`read_workers`; numpy's loops let go of the
    interpreter lock), each mapping one tensor at a time; ops and notes keep the order of the file names.
    """
    overflow: list[OverflowRecord] = []
    names = sorted(os.listdir(folder))
    hashed = _hashed_names(folder / MAPPING_FILE) if MAPPING_FILE in names else {}
    work: list[tuple[Path, DumpName, bool]] = []  # (file, its name, holds bytes)
    for entry in names:
        base = entry[:-4] if entry.endswith(".csv") else entry
        parsed = parse_dump_name(hashed.get(base, base))
        if parsed is None:
            continue
        path = folder / entry
        if not path.is_file():
            continue
        if parsed.op_type == OPDEBUG_TYPE and entry == base:
            overflow.extend(read_opdebug(path))
        elif entry != base:
            if base not in names:  # when the bytes are there too, they are read
                work.append((path, parsed, False))
        else:
            work.append((path, parsed, True))
    work, joined = _ffts_ops(work, notes)
    compiled = compiled_stats_pay(path for path, _, data in work if data)

    def measure(item: tuple[Path, DumpName, bool]) -> tuple[DumpOp, str]:
        if not item[2]:
            return _stats_op(item[0], item[1]), ""
        return _data_op(item[0], item[1], joined.get(item[0].name, 1), compiled)

    ops: list[DumpOp] = []
    for op, note in in_threads(measure, work, sum(item[2] for item in work)):
        ops.append(op)
        if note:
            notes.append(note)
    return ops, overflow


def _ffts_ops(work: list[tuple[Path, DumpName, bool]],
              notes: list[str]) -> tuple[list[tuple[Path, DumpName, bool]], dict[str, int]]:
    """The work with each FFTS+ op's thread files (`graphcmp.core.readers.ascend_file.ffts_group`) down to one: the
    first, whose outputs `read_dump_tensor` joins from all of them, when the header says how they are cut, else the
    latest (as msaccucmp). Also the first files' number of thread files joined."""
    groups: dict[tuple[str, str], list[int]] = {}
    for k, (path, parsed, data) in enumerate(work):
        key = ffts_key(parsed) if data and parse_dump_name(path.name) == parsed else None
        if key is not None:
            groups.setdefault(key, []).append(k)
    dropped, joined = set(), {}
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda k: ffts_order(work[k][1]))
        first = work[members[0]][0]
        slices = read_header(first).slices
        if slices is not None and any(axis >= 0 for axis in slices.cut_axes):
            keep = members[0]
            joined[first.name] = len(members)
            if slices.threads != len(members):
                notes.append(f"{first.name}: FFTS+ op of {slices.threads} threads, {len(members)} thread files "
                             "found and joined")
        else:
            keep = max(members, key=lambda k: work[k][1].timestamp)
        dropped.update(k for k in members if k != keep)
    return [item for k, item in enumerate(work) if k not in dropped], joined


def read_workers() -> int:
    """Threads that measure dump files at once: the processors this process may run on, at most four (each maps
    one tensor and holds a few MiB of buffers)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def in_threads(function: Callable, items: Sequence, heavy: int | None = None) -> Iterable:
    """`function` over `items` in order, by `read_workers` threads when more than one item is `heavy` (all are
    when None); the first error raised is raised here."""
    heavy = len(items) if heavy is None else heavy
    workers = min(read_workers(), heavy)
    if workers <= 1:
        return map(function, items)
    with ThreadPoolExecutor(workers, thread_name_prefix="graphcmp-dump") as pool:
        return list(pool.map(function, items))


MAPPING_FILE = "mapping.csv"
"""Beside dump files whose names grew too long: rows ``{hash},{file name}`` for the files named by a hash."""


def _hashed_names(path: Path) -> dict[str, str]:
    """Hash -> dump file name, from a mapping file (rows of two cells; others are skipped)."""
    try:
        text = read_input(path, gunzip=False).decode("utf-8")
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise DumpFormatError(f"{path}: cannot read the file name mapping ({err})") from err
    return {row[0].strip(): row[1].strip() for row in rows if len(row) == 2}


def _data_op(path: Path, name: DumpName, threads: int = 1, compiled: bool = False) -> tuple[DumpOp, str]:
    """A dump file holding bytes: its header, and the statistics and host shape of each tensor (measured on the
    mapped device bytes, the padding of a device format left out; by the compiled pass when `compiled`); with a
    note naming the tensors a truncated file cuts off ("" when none). An FFTS+ thread file is named as its op
    (``_lxslice`` index left out); `threads` of them are joined."""
    header = read_header(path)
    if ffts_key(name) is not None:
        name = replace(name, op_name=FFTS_SLICE.sub("", name.op_name))
        header = replace(header, op_name=FFTS_SLICE.sub("", header.op_name))
    n = len(header.tensors)
    stats = np.full((n, 4), np.nan)
    present = np.zeros((n, 4), bool)
    shapes, dtypes, has = [], [], []
    # a buffer or workspace cut off costs no comparison (raw bytes, never compared): its attribute says so
    cut = [f"{t.role} {t.index}" for t in header.tensors if t.skipped.endswith("(truncated)")]
    note = f"{path.name}: cut short, {', '.join(cut)} not read" if cut else ""
    for k, desc in enumerate(header.tensors):
        dtypes.append(dtype_name(desc.dtype))
        if desc.offset < 0:
            shapes.append(_shape_text(desc.original_shape or desc.shape))
            has.append(False)
            continue
        pieces, shape = read_dump_elements(path, desc.role, desc.index)
        stats[k], present[k] = elements_stats(pieces, compiled=compiled)
        shapes.append(_shape_text(shape))
        has.append(True)
        del pieces  # the next tensor's map replaces this one's
    return DumpOp(path.name, name, header, stats, present, tuple(shapes), tuple(dtypes), tuple(has), threads), note


def _stats_op(path: Path, name: DumpName) -> DumpOp:
    """A statistics-mode dump: one row per tensor with Max/Min/Avg (no norm) and counts."""
    try:
        text = read_input(path, gunzip=False).decode("utf-8")
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise DumpFormatError(f"{path}: cannot read the statistics ({err})") from err
    if not rows or tuple(c.strip() for c in rows[0][:len(_STATS_HEADER)]) != _STATS_HEADER:
        raise DumpFormatError(f"{path}: not a statistics dump (expected the header {','.join(_STATS_HEADER)})")
    tensors, stats, present, shapes, dtypes = [], [], [], [], []
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        try:
            role, index = row[0].strip().lower(), int(row[1])
            values = [float(row[6]), float(row[7]), float(row[8])]
        except (IndexError, ValueError) as err:
            raise DumpFormatError(f"{path}: line {line}: not a row of tensor statistics ({err})") from err
        if role not in ("input", "output"):
            raise DumpFormatError(f"{path}: line {line}: {row[0]!r} is neither Input nor Output")
        tensors.append(TensorDesc(role, index, 0, 0, (), (), 0, 0, -1))
        stats.append([*values, np.nan])
        present.append([True, True, True, False])
        shapes.append(_csv_shape(row[5]))
        dtypes.append(_csv_dtype(row[3]))
    header = DumpHeader(name.op_name, name.timestamp, tuple(tensors), "statistics", 0, 0)
    n = len(tensors)
    return DumpOp(path.name, name, header, np.array(stats, float).reshape(n, 4),
                  np.array(present, bool).reshape(n, 4), tuple(shapes), tuple(dtypes), (False,) * n)


def _csv_shape(text: str) -> str:
    dims = re.findall(r"\d+", text)
    return "[" + ", ".join(dims) + "]"


def _csv_dtype(text: str) -> str:
    t = text.strip()
    return {"DT_FLOAT": "float32", "DT_FLOAT16": "float16", "DT_BF16": "bfloat16"}.get(t, t.lower())


def tensor_stats(array: np.ndarray, *, compiled: bool = False, float64: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(max, min, mean, norm) of an array as float64, and which of them exist (none for an empty array).

    One pass over the data in blocks of `STATS_BLOCK` values (`elements_stats`).

    >>> tensor_stats(np.array([3.0, -4.0], np.float16))[0].tolist()
    [3.0, -4.0, -0.5, 5.0]
    """
    return elements_stats([np.asarray(array)], compiled=compiled, float64=float64)


def compiled_stats_pay(files: Iterable[Path]) -> bool:
    """Whether the compiled statistics (`graphcmp.core.tensor_kernels`) repay taking them for a reading of `files`
    (`tensor_kernels.pays` of their sizes, without reading them)."""
    return tensor_kernels.pays(sum(path.stat().st_size for path in files))


def _compiled_stats(pieces: Sequence[np.ndarray], count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """`elements_stats` by the compiled pass, for contiguous float pieces without NaN/inf; else None."""
    dtype = pieces[0].dtype
    if not dtype.isnative or dtype.name not in COMPILED_DTYPES or not all(p.flags.c_contiguous for p in pieces):
        return None
    parts = [tensor_kernels.stats(piece.reshape(-1)) for piece in pieces if piece.size]
    if any(part is None for part in parts):
        return None
    high, low = max(part[0] for part in parts), min(part[1] for part in parts)
    total, squares = sum(part[2] for part in parts), sum(part[3] for part in parts)
    return np.array([high, low, total / count, math.sqrt(squares)]), np.ones(4, bool)


def elements_stats(pieces: Sequence[np.ndarray], *, compiled: bool = False,
                   float64: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """`tensor_stats` of the tensor whose elements `pieces` hold together (arrays of one dtype, any shapes and
    strides: the views `graphcmp.core.device_formats.original_elements` gives).

    One pass in blocks of at most `STATS_BLOCK` values: each block is widened once into a reused buffer (float16
    by `graphcmp.core.ascend_dtypes.half_to_single`, which also gathers a strided block; contiguous float32 read in
    place) and gives its max, min, sum and sum of squares while it is in cache. Float16/bfloat16/float32 data are
    summed in float32 within a block (pairwise: a few float32 ulps, far below any float16 noise) and the blocks'
    sums added in float64; everything wider in float64. A NaN anywhere makes max, min, mean and norm NaN, an inf
    makes them inf as numpy's reductions do. `float64`: every block is summed in float64 (no float32 rounding).

    `compiled`: contiguous float16/32/64 pieces are measured by one vectorised pass (`graphcmp.core.tensor_kernels`,
    sums in float64), for readings large enough to repay it (`compiled_stats_pay`).
    """
    pieces = [piece.real if piece.dtype.kind == "c" else piece for piece in pieces]
    count = sum(piece.size for piece in pieces)
    if count == 0:
        return np.full(4, np.nan), np.zeros(4, bool)
    if compiled and (measured := _compiled_stats(pieces, count)) is not None:
        return measured
    dtype = pieces[0].dtype
    narrow = not float64 and ((dtype.kind == "f" and dtype.itemsize <= 4) or dtype.kind == "b" or
                              (dtype.kind in "iu" and dtype.itemsize <= 2))
    work = np.dtype(np.float32 if narrow else np.float64)
    widened = np.empty(min(count, STATS_BLOCK), work)
    squares_buffer = np.empty(widened.size, work) if narrow else None
    highs, lows = [], []
    total, squares = 0.0, 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for part in (block for piece in pieces for block in _blocks(piece, STATS_BLOCK)):
            n = part.size
            if part.dtype == work and part.flags.c_contiguous:
                block = part.reshape(-1)
            elif part.dtype == np.float16 and narrow:
                block = half_to_single(part.view(np.uint16), widened[:n].reshape(part.shape)).reshape(-1)
            else:
                block = widened[:n]
                np.copyto(block.reshape(part.shape), part, casting="unsafe")
            highs.append(np.maximum.reduce(block))
            lows.append(np.minimum.reduce(block))
            total += float(np.add.reduce(block))
            if narrow:
                squares += float(np.add.reduce(np.multiply(block, block, out=squares_buffer[:n])))
            else:
                # numpy's own loop, on this thread: a BLAS dot spread each block over threads of its own, which
                # two reading threads kept waking (a MindSpore dump of 1 GB: 3.5 s, 1.3 s without)
                squares += float(np.einsum("i,i->", block, block))
        stats = np.array([np.max(highs), np.min(lows), total / count, np.sqrt(squares)], np.float64)
    return stats, np.ones(4, bool)


def _blocks(array: np.ndarray, size: int) -> Iterable[np.ndarray]:
    """Views of `array` of at most `size` elements that cover it once: runs of whole rows of its trailing axes."""
    if array.size == 0:
        return
    if array.ndim <= 1 or array.flags.c_contiguous:
        flat = array.reshape(-1)
        for start in range(0, flat.size, size):
            yield flat[start:start + size]
        return
    axis = array.ndim - 1
    while axis > 0 and math.prod(array.shape[axis:]) <= size:
        axis -= 1
    rows = max(1, size // math.prod(array.shape[axis + 1:]))
    for at in itertools.product(*map(range, array.shape[:axis])):
        for start in range(0, array.shape[axis], rows):
            yield array[(*at, slice(start, start + rows))]


STATS_BLOCK = 1 << 18
"""Values per block of `elements_stats` (1 MiB of float32: the block, its square and its codes stay in cache)."""


def _shape_text(shape: Iterable[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def step_and_rank(folder: Path) -> tuple[int | None, int | None]:
    """The iteration (the folder's name) and the device: GE ``{time}/{device}/{model}/{model_id}/{iteration}``,
    MindSpore ``{device}/{net}_graph_{id}/{id}/{iteration}``."""
    parts = folder.resolve().parts
    step = int(parts[-1]) if parts[-1].isdigit() else None
    rank = None
    ge = len(parts) >= 5 and _TIME_DIR.match(parts[-5]) is not None
    mindspore = len(parts) >= 4 and parts[-3].endswith(f"_graph_{parts[-2]}")
    if (ge or mindspore) and parts[-4].isdigit():
        rank = int(parts[-4])
    return step, rank


# --- building the run -----------------------------------------------------------------------------------

def scoped_nodes(builder: HierarchyBuilder, names: Sequence[str], types: Sequence[str],
                 attrs: Sequence[Iterable[tuple[str, str]]] = ()) -> None:
    """Add ops `names` (in execution order) under scope modules made from their ``/`` parts.

    An op named like the scope of another op is that scope's container (as in the GE reader). Each op carries its
    place in `names` as ``exec_order`` (rows group a scope's ops together; `hierarchy.execution_keys` reads it).
    """
    scopes = set()
    for name in names:
        scope = name.rpartition("/")[0]
        while scope and scope not in scopes:
            scopes.add(scope)
            scope = scope.rpartition("/")[0]
    ops = set(names)
    for seq, name in enumerate(names):
        scope = name.rpartition("/")[0]
        chain = []
        while scope and scope not in builder:
            chain.append(scope)
            scope = scope.rpartition("/")[0]
        for module in reversed(chain):
            if module in ops:
                continue  # added as an op (a container) in its own turn; a parent before its child is fine
            outer = module.rpartition("/")[0] or None
            builder.add_node(module, NodeKind.MODULE, module.rpartition("/")[2], Direction.NONE, outer, seq,
                             has_data=False)
        kind = NodeKind.MODULE if name in scopes else NodeKind.API
        builder.add_node(name, kind, types[seq], Direction.NONE, name.rpartition("/")[0] or None, seq,
                         attrs=(("exec_order", str(seq)), *(attrs[seq] if attrs else ())))


def parse_ascend_dump(
    ops: Sequence[DumpOp],
    overflow: Sequence[OverflowRecord] = (),
    *,
    source: str = "<memory>",
    step: int | None = None,
    rank: int | None = None,
    missing: Iterable[str] = (),
    op_names: Mapping[str, str] | None = None,
) -> DumpGraph:
    """Build a run from the dumped ops of one iteration (any order: they are sorted by timestamp, then task id);
    a statistics op's file-name form of its name is replaced by its own name from `op_names` where it has one.

    Raises
    ------
    DumpFormatError
        If there is no op.
    """
    if not ops:
        raise DumpFormatError(f"{source}: no dumped op in the folder")
    notes = list(missing)
    ordered = sorted(ops, key=lambda op: (op.name.timestamp, op.name.task_id))
    renamed = op_names or {}

    def op_name(op: DumpOp) -> str:
        name = op.header.op_name or op.name.op_name
        return renamed.get(name, name) if op.header.layout == "statistics" else name

    chosen: dict[str, DumpOp] = {}
    files: dict[str, int] = {}
    for op in ordered:
        key = op_name(op)
        chosen[key] = op  # an op dumped twice in an iteration (a loop, FFTS+ threads): its last file, as msaccucmp
        files[key] = files.get(key, 0) + 1
    by_task = {(op.name.task_id, op.name.stream_id): chosen[op_name(op)] for op in ordered}
    by_task.update({(op.name.task_id, None): chosen[op_name(op)] for op in ordered if op.name.stream_id < 0})
    ordered = [op for op in ordered if chosen[op_name(op)] is op]
    flagged: dict[int, list[OverflowRecord]] = {}
    for record in overflow:  # file names without a stream id (MindSpore) are found by their task id
        op = by_task.get((record.task_id, record.stream_id)) or by_task.get((record.task_id, None))
        if op is None:
            notes.append(f"overflow record of task {record.task_id} stream {record.stream_id} names no dumped op")
            continue
        flagged.setdefault(id(op), []).append(record)
    names = [op_name(op) for op in ordered]
    builder = HierarchyBuilder()
    scoped_nodes(builder, names, [op.name.op_type for op in ordered],
                 [_op_attrs(op, flagged.get(id(op), ()), files[name]) for op, name in zip(ordered, names)])
    _add_tensors(builder, names, ordered)
    task = "tensor" if any(any(op.has_data) for op in ordered) else "statistics"
    info = RunInfo(path=source, format="ascend_dump", framework="ascend", task=task, rank=rank, step=step,
                   missing=tuple(notes))
    return builder.build(info, group_apis=False)


def _op_attrs(op: DumpOp, overflow: Sequence[OverflowRecord], files: int = 1) -> tuple[tuple[str, str], ...]:
    attrs = [("task_id", str(op.name.task_id)), ("stream_id", str(op.name.stream_id)),
             ("timestamp", str(op.name.timestamp)), ("dump_file", op.file)]
    if files > 1:
        attrs.append(("dump_files", f"{files} files in this iteration, the last one read"))
    if op.threads > 1:
        attrs.append(("ffts_threads", f"outputs joined from {op.threads} FFTS+ thread files, this one first"))
    for t in op.header.tensors:
        if t.role == "output" and t.origin_name:
            attrs.append((f"origin_output.{t.index}", f"{t.origin_name}:{t.origin_index}"))
    attrs.extend((f"{e.kind}.{e.index}", f"{e.describe()}; raw bytes, not compared") for e in op.header.extras)
    skipped = [f"{t.role} {t.index} ({t.skipped})" for t in op.header.tensors if t.skipped and t.size]
    if skipped:
        attrs.append(("skipped", "; ".join(skipped)))
    if overflow:
        attrs.append(("overflow", "; ".join(r.describe() for r in overflow)))
    return tuple(attrs)


def _add_tensors(builder: HierarchyBuilder, names: Sequence[str], ops: Sequence[DumpOp]) -> None:
    node_ids, roles, slots, dtypes, shapes, files = [], [], [], [], [], []
    stats, present = [], []
    for name, op in zip(names, ops):
        for k, t in enumerate(op.header.tensors):
            node_ids.append(name)
            roles.append(int(Role.INPUT if t.role == "input" else Role.OUTPUT))
            slots.append(str(t.index))
            dtypes.append(op.dtypes[k])
            shapes.append(op.shapes[k])
            files.append(f"{op.file}#{t.role}.{t.index}" if op.has_data[k] else "")
        stats.append(op.stats)
        present.append(op.present)
    n = len(node_ids)
    if not n:
        return
    builder.add_tensors(node_ids, roles, slots, dtype=dtypes, shape=shapes, stats=np.concatenate(stats),
                        present=np.concatenate(present), md5=[""] * n, file=files, value=[""] * n)
