"""Reader for MindSpore kernel dumps (``e2e_dump_settings``): ``.npy`` per kernel input/output, joined to the graph.

A dump's rank folder holds ``execution_order/ms_execution_order_graph_<g>.csv`` (one kernel full
name per line, in execution order), ``graphs/ms_output_trace_code_graph_<g>.ir`` (the kernel graph)
and ``<net>/<g>/<iteration>/`` with one ``.npy`` per tensor, named
``{type}.{name with / -> _}.{task}.{stream}.{timestamp}.{input|output}.{slot}.{format}.{dtype}.npy``.
Kernels become op nodes under their scope modules (as in `mindspore_ir`), in execution order; the
graph adds op types, stacks and data edges between kernels. Files are joined to kernels by exact
name first, then by type and scope in ``-opN`` order, because MindSpore numbers a few kernels
differently in file names and in the CSV; what cannot be joined is listed in ``RunInfo.missing``.
``Parameter.*`` files (values after the step) become nodes under ``Parameters``. Tensor statistics
are computed from the arrays and the file paths kept, so tensors compare in ``tensor`` mode.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.inputs import read_input, regular_file
from graphcmp.core.readers.ascend_dump import compiled_stats_pay, in_threads
from graphcmp.core.readers.ascend_dump import tensor_stats as blockwise_stats
from graphcmp.core.readers.mindspore_ir import IrNode, add_ir_node, ir_cut_short, parse_ir_nodes
from graphcmp.core.records import Direction, DumpGraph, NodeKind, Role, RunInfo

__all__ = ["DumpFile", "find_rank_folder", "parse_dump_name", "parse_mindspore_dump", "read_mindspore_dump",
           "sniff", "tensor_stats"]

ORDER_DIR, GRAPH_DIR = "execution_order", "graphs"
PARAMETERS = "Parameters"
_ORDER_CSV = re.compile(r"^ms_execution_order_graph_(\d+)\.csv$")
_OP_SUFFIX = re.compile(r"-op(\d+)$")
_RANK = re.compile(r"^rank_(\d+)$")
_PASS_THROUGH = {"TupleGetItem": None, "MakeTuple": None, "Depend": 1}  # op -> how many leading inputs carry data


@dataclass(frozen=True, slots=True)
class DumpFile:
    """One dumped tensor file, its name taken apart."""

    path: str
    op_type: str
    op_name: str  # the kernel's full name with "/" replaced by "_"
    role: Role
    slot: str
    dtype: str
    timestamp: int


def sniff(path: str | os.PathLike[str]) -> bool:
    """True for a folder that holds (at most two levels down) a MindSpore dump rank folder."""
    try:
        return find_rank_folder(path) is not None
    except DumpFormatError:
        return True  # a dump with several ranks: read_mindspore_dump says which to pick


def find_rank_folder(path: str | os.PathLike[str]) -> Path | None:
    """The rank folder (the one holding ``execution_order/``) at or below `path`, None if there is none.

    Raises
    ------
    DumpFormatError
        If `path` holds several rank folders.
    """
    folder = Path(path)
    if not folder.is_dir():
        return None
    for level in (folder, *_subdirs(folder), *(s for d in _subdirs(folder) for s in _subdirs(d))):
        if not _has_order(level):
            continue
        ranks = [d for d in _subdirs(level.parent) if _has_order(d)] if level != folder else [level]
        if len(ranks) > 1:
            names = ", ".join(sorted(d.name for d in ranks))
            raise DumpFormatError(f"{folder}: holds several dump ranks ({names}); point at one of them")
        return level
    return None


def read_mindspore_dump(path: str | os.PathLike[str]) -> DumpGraph:
    """Read a MindSpore kernel dump (a run folder, its ``dump/`` folder or a ``rank_N`` folder).

    Raises
    ------
    DumpFormatError
        If no rank folder with an execution-order CSV is found, or a file cannot be read.
    """
    rank = find_rank_folder(path)
    if rank is None:
        raise DumpFormatError(f"{path}: not a MindSpore dump (no {ORDER_DIR}/ms_execution_order_graph_*.csv "
                              "in it or two levels below)")
    notes: list[str] = []
    kernels: dict[int, list[str]] = {}
    graphs: dict[int, list[IrNode]] = {}
    files: dict[int, list[DumpFile]] = {}
    for graph_id, csv_path in _order_files(rank):
        kernels[graph_id] = _read_order(csv_path)
        ir_path = rank / GRAPH_DIR / f"ms_output_trace_code_graph_{graph_id}.ir"
        if ir_path.is_file():
            text = read_input(ir_path, gunzip=False).decode("utf-8", "replace")
            graphs[graph_id] = parse_ir_nodes(text, source=str(ir_path))
            notes.extend(ir_cut_short(text, ir_path.name))
        else:
            notes.append(f"{ir_path.name}: not found; kernels have no types, stacks or edges")
        files[graph_id] = _dump_files(rank, graph_id, notes)
    m = _RANK.match(rank.name)
    return parse_mindspore_dump(kernels, files, graphs, source=str(rank), rank=int(m[1]) if m else None,
                                missing=notes)


def parse_mindspore_dump(
    kernels: Mapping[int, Sequence[str]],
    files: Mapping[int, Sequence[DumpFile]],
    graphs: Mapping[int, Sequence[IrNode]] | None = None,
    *,
    source: str = "<memory>",
    rank: int | None = None,
    missing: Iterable[str] = (),
) -> DumpGraph:
    """Build a run from kernel names in execution order, dump files and (optionally) the kernel graphs.

    Parameters
    ----------
    kernels : Mapping
        Graph id -> kernel full names in execution order (the execution-order CSV).
    files : Mapping
        Graph id -> dumped tensor files of one iteration.
    graphs : Mapping, optional
        Graph id -> nodes of the kernel graph (``parse_ir_nodes``), for op types, stacks and edges.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> name = os.path.join(folder, "ReLU.Default_relu-ReLU_ReLU-op3.0.0.17.output.0.DefaultFormat.Float32.npy")
    >>> np.save(name, np.array([1.0, -2.0], np.float32))
    >>> g = parse_mindspore_dump({0: ["Default/relu-ReLU/ReLU-op0"]}, {0: [parse_dump_name(name)]})
    >>> g.nodes.ids, g.info.task
    (('DefaultModel', 'Default', 'Default/relu-ReLU', 'Default/relu-ReLU/ReLU-op0'), 'tensor')
    >>> g.view("Default/relu-ReLU/ReLU-op0").tensors[0].stats["min"]
    -2.0
    """
    graphs = graphs or {}
    notes = list(missing)
    builder = HierarchyBuilder()
    rows: list[tuple[str, DumpFile]] = []
    seq = 0
    several = len(kernels) > 1
    for graph_id, names in kernels.items():
        prefix = f"graph_{graph_id}/" if several else ""
        ir = {node.full_name: node for node in graphs.get(graph_id, ())}
        joined = _join(names, files.get(graph_id, ()), notes)
        for name in names:
            node = ir.get(name) or IrNode(name, _OP_SUFFIX.sub("", name.rpartition("/")[2]))
            node_id = prefix + name
            add_ir_node(builder, IrNode(node_id, node.op, stack=node.stack), seq,
                        attrs=(("exec_order", str(seq)),), source=source)
            rows.extend((node_id, f) for f in joined.get(name, ()))
            seq += 1
        for src, dst in _kernel_edges(names, ir):
            builder.add_edge(prefix + src, prefix + dst)
        _add_parameters(builder, files.get(graph_id, ()), prefix, seq, rows)
    if not seq:
        raise DumpFormatError(f"{source}: the execution order lists no kernels")
    _add_file_tensors(builder, rows, source)
    info = RunInfo(path=source, format="mindspore_dump", framework="mindspore", task="tensor", rank=rank,
                   missing=tuple(notes))
    return builder.build(info, group_apis=False)


def parse_dump_name(path: str | os.PathLike[str]) -> DumpFile | None:
    """Take a dump file name apart (None when it is not a dump file name).

    The form is ``{type}.{name}.{task}.{stream}.{ts}.{input|output}.{slot}.{format}.{dtype}.npy``.


    >>> f = parse_dump_name("/d/Conv2D.Default_conv1-Conv2d_Conv2D-op0.0.0.1795.input.1.DefaultFormat.Float32.npy")
    >>> f.op_type, f.op_name, f.role.name, f.slot, f.dtype
    ('Conv2D', 'Default_conv1-Conv2d_Conv2D-op0', 'INPUT', '1', 'Float32')
    """
    parts = Path(path).name.split(".")
    if len(parts) < 10 or parts[-1] != "npy" or parts[-5] not in ("input", "output"):
        return None
    try:
        timestamp = int(parts[-6])
    except ValueError:
        return None
    role = Role.INPUT if parts[-5] == "input" else Role.OUTPUT
    return DumpFile(str(path), parts[0], ".".join(parts[1:-8]), role, parts[-4], parts[-2], timestamp)


def tensor_stats(array: np.ndarray, *, compiled: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(max, min, mean, norm) of an array as float64, and which of them exist (none for an empty array): one pass
    in blocks summed in float64, no float64 copy of the array (`graphcmp.core.readers.ascend_dump.tensor_stats`).

    >>> tensor_stats(np.array([3.0, -4.0], np.float16))[0].tolist()
    [3.0, -4.0, -0.5, 5.0]
    """
    return blockwise_stats(array, compiled=compiled, float64=True)


# --- finding the parts of a dump ----------------------------------------------------------------------

def _subdirs(folder: Path) -> list[Path]:
    try:
        return sorted(d for d in folder.iterdir() if d.is_dir())
    except OSError:
        return []


def _has_order(folder: Path) -> bool:
    order = folder / ORDER_DIR
    return order.is_dir() and any(_ORDER_CSV.match(p.name) for p in order.iterdir())


def _order_files(rank: Path) -> list[tuple[int, Path]]:
    found = [(int(m[1]), p) for p in (rank / ORDER_DIR).iterdir() if (m := _ORDER_CSV.match(p.name))]
    return sorted(found)


def _read_order(path: Path) -> list[str]:
    try:
        text = read_input(path, gunzip=False).decode("utf-8")
        rows = [row[0].strip() for row in csv.reader(io.StringIO(text, newline="")) if row and row[0].strip()]
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise DumpFormatError(f"{path}: cannot read the execution order ({err})") from err
    if rows and "/" not in rows[0]:
        rows = rows[1:]  # the header, NodeExecutionOrder-FullNameWithScope
    return rows


def _dump_files(rank: Path, graph_id: int, notes: list[str]) -> list[DumpFile]:
    """Files of the first dumped iteration of graph `graph_id` (under ``<net>/<graph_id>/<iteration>``)."""
    folders = [it for net in _subdirs(rank) if net.name not in (ORDER_DIR, GRAPH_DIR) and not net.name.startswith(".")
               for it in _subdirs(net / str(graph_id))]
    iterations = sorted((f for f in folders if f.name.isdigit()), key=lambda f: int(f.name))
    if not iterations:
        notes.append(f"graph {graph_id}: no dumped iteration folder found; kernels have no tensors")
        return []
    if len(iterations) > 1:
        notes.append(f"graph {graph_id}: iteration {iterations[0].name} read, "
                     f"{len(iterations) - 1} later iteration(s) not read")
    parsed = [parse_dump_name(p) for p in sorted(iterations[0].glob("*.npy"))]
    bad = sum(f is None for f in parsed)
    if bad:
        notes.append(f"graph {graph_id}: {bad} .npy file(s) with names not of the dump's form were skipped")
    return [f for f in parsed if f is not None]


# --- joining files to kernels -------------------------------------------------------------------------

def _join(names: Sequence[str], files: Sequence[DumpFile], notes: list[str]) -> dict[str, list[DumpFile]]:
    """Kernel full name -> its files: exact mangled name first, then same type and scope in -opN order."""
    groups: dict[tuple[str, str], list[DumpFile]] = defaultdict(list)
    for f in files:
        if f.op_type != "Parameter":
            groups[(f.op_type, f.op_name)].append(f)
    joined: dict[str, list[DumpFile]] = {}
    left: list[str] = []
    by_name = {name: key for key in groups for name in [key[1]]}
    for name in names:
        key = by_name.get(name.replace("/", "_"))
        if key is not None and key in groups:
            joined[name] = groups.pop(key)
        else:
            left.append(name)
    _join_by_scope(left, groups, joined)
    unjoined = [n for n in left if n not in joined]
    if unjoined:
        notes.append(f"{len(unjoined)} kernel(s) have no dump files: {', '.join(unjoined[:5])}"
                     + (" ..." if len(unjoined) > 5 else ""))
    if groups:
        names_left = sorted(f"{t}.{n}" for t, n in groups)
        notes.append(f"{len(groups)} dumped kernel(s) match no kernel of the execution order: "
                     f"{', '.join(names_left[:5])}" + (" ..." if len(names_left) > 5 else ""))
    return joined


def _join_by_scope(left: list[str], groups: dict[tuple[str, str], list[DumpFile]],
                   joined: dict[str, list[DumpFile]]) -> None:
    """Pair kernels and file groups of the same type and scope, each side in -opN order."""
    kernels_by: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name in left:
        leaf = name.rpartition("/")[2]
        kernels_by[(_OP_SUFFIX.sub("", leaf), _OP_SUFFIX.sub("", name.replace("/", "_")))].append(name)
    files_by: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for op_type, op_name in groups:
        files_by[(op_type, _OP_SUFFIX.sub("", op_name))].append((op_type, op_name))
    for key, kernel_names in kernels_by.items():
        candidates = sorted(files_by.get(key, ()), key=_op_number)
        for name, group in zip(sorted(kernel_names, key=_op_number), candidates):
            joined[name] = groups.pop(group)


def _op_number(item: str | tuple[str, str]) -> int:
    name = item if isinstance(item, str) else item[1]
    m = _OP_SUFFIX.search(name)
    return int(m[1]) if m else -1


def _kernel_edges(names: Sequence[str], ir: Mapping[str, IrNode]) -> list[tuple[str, str]]:
    """Data edges between kernels, looking through TupleGetItem / MakeTuple / Depend nodes of the graph."""
    kernels = set(names)
    edges = []
    for name in names:
        node = ir.get(name)
        if node is None:
            continue
        for src in dict.fromkeys(_producers(node.inputs, ir, kernels, set())):
            edges.append((src, name))
    return edges


def _producers(inputs: Iterable[str], ir: Mapping[str, IrNode], kernels: set[str], seen: set[str]) -> Iterable[str]:
    for src in inputs:
        if src in kernels:
            yield src
        elif src in ir and src not in seen and ir[src].op in _PASS_THROUGH:
            seen.add(src)
            carried = ir[src].inputs[: _PASS_THROUGH[ir[src].op]]
            yield from _producers(carried, ir, kernels, seen)


# --- tensors ------------------------------------------------------------------------------------------

def _add_parameters(builder: HierarchyBuilder, files: Sequence[DumpFile], prefix: str, seq: int,
                    rows: list[tuple[str, DumpFile]]) -> None:
    params = sorted((f for f in files if f.op_type == "Parameter"), key=lambda f: f.op_name)
    if not params:
        return
    group = f"{prefix}{PARAMETERS}"
    builder.add_node(group, NodeKind.MODULE, PARAMETERS, Direction.NONE, prefix.rstrip("/") or None, seq,
                     has_data=False)
    for k, f in enumerate(params):
        node_id = f"{group}/{f.op_name}"
        builder.add_node(node_id, NodeKind.API, "Parameter", Direction.NONE, group, seq + k / (len(params) + 1))
        rows.append((node_id, f))


def _add_file_tensors(builder: HierarchyBuilder, rows: list[tuple[str, DumpFile]], source: str) -> None:
    if not rows:
        return
    n = len(rows)
    compiled = compiled_stats_pay(Path(f.path) for _, f in rows)

    def measure(f: DumpFile) -> tuple[np.ndarray, np.ndarray, str]:
        array = _load(f.path, source)
        return (*tensor_stats(array, compiled=compiled), "[" + ", ".join(str(d) for d in array.shape) + "]")

    measured = list(in_threads(measure, [f for _, f in rows]))  # numpy's loops let go of the interpreter lock
    stats = np.array([m[0] for m in measured]).reshape(n, 4)
    present = np.array([m[1] for m in measured]).reshape(n, 4)
    shapes = [m[2] for m in measured]
    builder.add_tensors([node for node, _ in rows], [int(f.role) for _, f in rows], [f.slot for _, f in rows],
                        dtype=[f.dtype for _, f in rows], shape=shapes, stats=stats, present=present,
                        md5=[""] * n, file=[f.path for _, f in rows], value=[""] * n)


def _load(path: str, source: str) -> np.ndarray:
    regular_file(path)  # a FIFO or a device named like a dump file would block the read or never end
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise DumpFormatError(f"{path}: cannot read the dumped tensor ({err}); dump {source}") from err
