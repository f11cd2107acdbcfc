"""Reader for MindSpore synchronous dumps (MindSpore 1.1-1.2): one raw ``.bin`` file per kernel input and output.

The layout is ``{path}/{net_name}/{device_id}/iteration_{i}/`` holding
``{op_name}_{input|output}_{index}_shape_{d0}_{d1}..._{DType}_{FORMAT}.bin`` (``/`` in the kernel's full name written
``--``; the bytes are the tensor as ``numpy.tofile`` writes it). The reader takes any folder of that tree: the first
iteration found is the run (its number the step, the device folder the rank), later ones are noted as in other
dumps. Kernels become op nodes under scope modules from their names, in the order of the execution-order CSV beside
the iteration (``execution_order/ms_execution_order_graph_{g}.csv``), else of their ``-op<N>`` kernel ids; a
tensor's statistics are computed from its file and its data stay there for the real-tensor metrics.

A tensor in a device format (``NC1HWC0``, ``FracZ`` ...) has its device shape in the file name, no original one.
The dump writes the kernel graph beside the iterations (``graphs/ms_output_trace_code_graph_{g}.ir``): under each
kernel the host types, ``(<Tensor[Float32]x[const vector][32, 128, 13, 13]>, ...) -> (<...>)``, then the kernel's
device types, ``(<Float16xNC1HWC0[const vector][32, 8, 13, 13, 16]>, ...) -> (...)``, then its full name. When that
IR gives a tensor's host shape, the tensor is turned back into its host layout (`graphcmp.core.device_formats`) and
read so (the run records ``{file}#host={dims}``); otherwise it keeps its device shape and the run says so.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from graphcmp.core.device_formats import (
    PLAIN_FORMATS,
    TILED_FORMATS,
    DeviceFormatError,
    original_elements,
    to_original,
)
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.inputs import read_input, regular_file
from graphcmp.core.readers.ascend_dump import elements_stats, folders_holding, scoped_nodes
from graphcmp.core.records import DumpGraph, Role, RunInfo

__all__ = ["BIN_NAME", "BinFile", "HostShapes", "device_format", "parse_bin_name", "parse_host_shapes",
           "parse_mindspore_sync", "read_bin_tensor", "read_execution_order", "read_host_shapes",
           "read_mindspore_sync", "sniff"]

BIN_NAME = re.compile(r"^(?P<op>.+)_(?P<role>input|output)_(?P<index>\d+)_shape_(?P<dims>\d+(?:_\d+)*)?_"
                      r"(?P<dtype>Bool|Int8|Int16|Int32|Int64|UInt8|UInt16|UInt32|UInt64|Float16|Float32|Float64)_"
                      r"(?P<format>[A-Za-z0-9_]+)\.bin$")
"""A synchronous dump file name; the dtype names are MindSpore's ``TypeId`` names."""

_NUMPY = {"Bool": "?", "Int8": "i1", "Int16": "<i2", "Int32": "<i4", "Int64": "<i8", "UInt8": "u1", "UInt16": "<u2",
          "UInt32": "<u4", "UInt64": "<u8", "Float16": "<f2", "Float32": "<f4", "Float64": "<f8"}
_FORMATS = {"FracZ": "FRACTAL_Z"}
"""MindSpore 1.x format names (``kOpFormat_FRAC_Z = "FracZ"``) -> the names `graphcmp.core.device_formats` knows."""
_ITERATION = re.compile(r"^iteration_(\d+)$")
_DEVICE = re.compile(r"^(?:device_)?(\d+)$")
_OP_NUMBER = re.compile(r"-op(\d+)$")
_ITEM = re.compile(r"<[^<>]*>")
_HOST_SHAPE = re.compile(r"Tensor.*?(?:\[([\d, ]*)\]|\(([\d, ]*)\))>$")
_DEVICE_ITEM = re.compile(r"^<(\w+)x(\w+)(?:\[const vector\])?\[([\d, ]*)\]>$")
_GETITEM = re.compile(r"^%\d+\([^)]*\) = TupleGetItem\(%(\d+), (?:I64\()?(\d+)\)")
_GRAPH_IR = "ms_output_trace_code_graph_*.ir"
_ORDER_CSV = "ms_execution_order_graph_*.csv"


@dataclass(frozen=True, slots=True)
class BinFile:
    """One dumped tensor file, its name taken apart."""

    file: str
    op_name: str  # the kernel's full name, "/" restored
    role: Role
    index: int
    shape: tuple[int, ...]
    dtype: str  # numpy-style name
    format: str  # as the file name writes it ("NC1HWC0", "FracZ", "DefaultFormat" ...)

    @property
    def device(self) -> bool:
        """True when the tensor is in a device format: its bytes and shape are not the host tensor's."""
        return self.format != "DefaultFormat" and device_format(self.format) not in PLAIN_FORMATS

    @property
    def tiled(self) -> bool:
        """True when the tensor is in a device format `graphcmp.core.device_formats` turns back."""
        return device_format(self.format) in TILED_FORMATS


@dataclass(frozen=True, slots=True)
class HostShapes:
    """The host (original) shape of kernel tensors, from the kernel graph IR of the dump.

    ``shapes`` maps (kernel full name, role, index) to the host shape; ``device`` to the device shape the IR
    records for the same tensor (absent when the IR has no kernel types line); ``files`` are the IR files read.
    """

    shapes: Mapping[tuple[str, Role, int], tuple[int, ...]]
    device: Mapping[tuple[str, Role, int], tuple[int, ...]]
    files: tuple[str, ...] = ()


def device_format(name: str) -> str:
    """The `graphcmp.core.device_formats` name of a MindSpore format name (``FracZ`` -> ``FRACTAL_Z``)."""
    return _FORMATS.get(name, name)


def parse_bin_name(name: str) -> BinFile | None:
    """Take a synchronous dump file name apart (None when it is not one).

    >>> f = parse_bin_name("Default--network-WithLossCell--_backbone-AlexNet--conv3-Conv2d--Conv2D-op107_output_0"
    ...                    "_shape_32_12_13_13_16_Float16_NC1HWC0.bin")
    >>> f.op_name, f.role.name, f.index, f.shape, f.dtype, f.format
    ('Default/network-WithLossCell/_backbone-AlexNet/conv3-Conv2d/Conv2D-op107', 'OUTPUT', 0, (32, 12, 13, 13, 16), \
'float16', 'NC1HWC0')
    """
    m = BIN_NAME.match(name)
    if m is None:
        return None
    shape = tuple(int(d) for d in m["dims"].split("_")) if m["dims"] else ()
    role = Role.INPUT if m["role"] == "input" else Role.OUTPUT
    return BinFile(name, m["op"].replace("--", "/"), role, int(m["index"]), shape,
                   np.dtype(_NUMPY[m["dtype"]]).name, m["format"])


def sniff(path: str | os.PathLike[str]) -> bool:
    """True for a folder holding (here or up to three levels down) ``.bin`` files named as a synchronous dump."""
    return bool(_iterations(Path(path), limit=1))


def read_bin_tensor(path: str | os.PathLike[str], host_shape: Sequence[int] | None = None) -> np.ndarray:
    """The tensor of one synchronous dump file (memory-mapped), in the shape its name records, or turned back from
    its device format into `host_shape` (a new array) when that is given.

    Raises
    ------
    DumpFormatError
        If the name is not a dump file's, the bytes do not fill the shape, or the device shape does not hold
        `host_shape`.
    """
    name = os.fspath(path)
    parsed = parse_bin_name(os.path.basename(name))
    if parsed is None:
        raise DumpFormatError(f"{name}: not a MindSpore synchronous dump file name "
                              "({op}_{input|output}_{i}_shape_{dims}_{DType}_{FORMAT}.bin)")
    data = _device_array(name, parsed)
    if host_shape is None:
        return data
    try:
        return to_original(data, device_format(parsed.format), parsed.shape, tuple(host_shape))
    except DeviceFormatError as error:
        raise DumpFormatError(f"{name}: {error}") from None


def _device_array(name: str, parsed: BinFile) -> np.ndarray:
    regular_file(name)
    dtype = np.dtype(parsed.dtype).newbyteorder("<")
    count = int(np.prod(parsed.shape, dtype=np.int64)) if parsed.shape else 1
    size = os.path.getsize(name)
    if size < count * dtype.itemsize:
        raise DumpFormatError(f"{name}: holds {size} bytes, its name records {count} {parsed.dtype} values")
    if count == 0:
        return np.zeros(parsed.shape, dtype)
    return np.memmap(name, dtype=dtype, mode="r", shape=(count,)).view(np.ndarray).reshape(parsed.shape)


# --- the kernel graph IR and the execution order beside the dump ----------------------------------------------

def read_host_shapes(device_folder: Path) -> HostShapes:
    """The host shapes the kernel graph IRs in ``{device_folder}/graphs`` record (empty when there are none).

    Raises
    ------
    DumpFormatError
        If an IR file cannot be read.
    """
    shapes: dict[tuple[str, Role, int], tuple[int, ...]] = {}
    device: dict[tuple[str, Role, int], tuple[int, ...]] = {}
    files = sorted((device_folder / "graphs").glob(_GRAPH_IR))
    for file in files:
        text = read_input(file, gunzip=False).decode("utf-8", errors="replace")
        found = parse_host_shapes(text)
        shapes.update(found.shapes)
        device.update(found.device)
    return HostShapes(shapes, device, tuple(str(f) for f in files))


def parse_host_shapes(text: str) -> HostShapes:
    r"""The host and device shapes of each kernel's tensors in the text of a MindSpore 1.x kernel graph IR.

    A kernel is a line ``  %N(...) = Op(...)`` followed by indented ``: (...)`` lines: its host types
    ``(<Tensor[Float32]x[const vector][2, 3]>, ...) -> (<...>)``, then (for a kernel with build info) its device
    types ``(<Float16xNC1HWC0[const vector][2, 1, 1, 3, 16]>, ...) -> (...)``, then its full name ``(Default/...)``.
    The host type of a kernel with several outputs is a tuple without shapes: output k's host shape is then that of
    the ``TupleGetItem(%N, k)`` node reading it, when the graph has one.

    >>> found = parse_host_shapes("  %1(x) = ReLU(%0)\n      : (<Tensor[Float16]x[const vector][2, 3]>) -> "
    ...     "(<Tensor[Float16]x[const vector][2, 3]>)\n      : (<Float16xFRACTAL_NZ[const vector][1, 1, 16, 16]>) -> "
    ...     "(<Float16xFRACTAL_NZ[const vector][1, 1, 16, 16]>)\n      : (Default/ReLU-op1)\n")
    >>> found.shapes[("Default/ReLU-op1", Role.OUTPUT, 0)], found.device[("Default/ReLU-op1", Role.INPUT, 0)]
    ((2, 3), (1, 1, 16, 16))
    """
    shapes: dict[tuple[str, Role, int], tuple[int, ...]] = {}
    device: dict[tuple[str, Role, int], tuple[int, ...]] = {}
    items: list[tuple[str, int, tuple[int, ...]]] = []  # (producer full name, output index, host shape)
    names: dict[tuple[str, str], str] = {}  # (subgraph, %N) -> full name
    for node in _ir_nodes(text.splitlines()):
        types = [_type_groups(line) for line in node.details if line.startswith(("(<", "()"))]
        if node.name and node.ref:
            names[(node.graph, node.ref)] = node.name
        item = _GETITEM.match(node.header)
        if item and types and len(types[0][1]) == 1 and (shape := _host_dims(types[0][1][0])) is not None:
            producer = names.get((node.graph, f"%{item[1]}"))
            if producer:
                items.append((producer, int(item[2]), shape))
        if node.name and types:
            _record(shapes, node.name, types[0], _host_dims)
        if node.name and len(types) > 1:
            _record(device, node.name, types[1], _device_dims)
    for producer, index, shape in items:
        shapes.setdefault((producer, Role.OUTPUT, index), shape)
    return HostShapes(shapes, device)


@dataclass(frozen=True, slots=True)
class _IrNode:
    graph: str  # the subgraph line it is in
    ref: str  # "%N" ("" for the return)
    header: str  # the node line without its indent
    details: tuple[str, ...]  # its ": (...)" lines without the ": "
    name: str | None  # its full name, when the IR prints one


def _ir_nodes(lines: Sequence[str]) -> Iterable[_IrNode]:
    """The nodes of an IR text, each with the detail lines that follow it."""
    graph, header, details = "", "", []
    for line in [*lines, "}"]:
        if line.startswith("      : ("):
            details.append(line.strip()[2:])
            continue
        if not (line.startswith(("}", "subgraph @")) or (line.startswith("  ") and line[2:3] not in ("", " "))):
            continue
        if header:
            ref = header.partition("(")[0] if header.startswith("%") else ""
            name = next((d[1:-1] for d in details if _is_full_name(d)), None)
            yield _IrNode(graph, ref, header, tuple(details), name)
        header, details = line.strip() if line.startswith("  ") else "", []
        if line.startswith("subgraph @"):
            graph = line


def _is_full_name(detail: str) -> bool:
    return detail.endswith(")") and not detail.startswith(("(<", "()")) and ") -> (" not in detail


def _type_groups(line: str) -> tuple[list[str], list[str]]:
    """(input items, output items) of ``(<a>, <b>) -> (<c>)``; the last group is the outputs."""
    groups = line.split(") -> (")
    if len(groups) < 2:
        return _ITEM.findall(line), []
    return [item for group in groups[:-1] for item in _ITEM.findall(group)], _ITEM.findall(groups[-1])


def _record(into: dict, name: str, groups: tuple[list[str], list[str]], dims) -> None:
    for role, items in ((Role.INPUT, groups[0]), (Role.OUTPUT, groups[1])):
        for index, item in enumerate(items):
            shape = dims(item)
            if shape is not None:
                into[(name, role, index)] = shape


def _host_dims(item: str) -> tuple[int, ...] | None:
    m = _HOST_SHAPE.search(item)
    if m is None or _DEVICE_ITEM.match(item):
        return None
    return _dims(m[1] if m[1] is not None else m[2])


def _device_dims(item: str) -> tuple[int, ...] | None:
    m = _DEVICE_ITEM.match(item)
    return None if m is None else _dims(m[3])


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.replace(" ", "").split(",") if d)


def read_execution_order(device_folder: Path) -> dict[str, int]:
    """Kernel full name -> its place in the execution-order CSVs of ``{device_folder}/execution_order`` (graphs in
    id order; a header line ``NodeExecutionOrder-FullNameWithScope`` is skipped). Empty when there are none."""
    order: dict[str, int] = {}
    files = sorted((device_folder / "execution_order").glob(_ORDER_CSV), key=lambda f: _number_key(f.stem))
    for file in files:
        text = read_input(file, gunzip=False).decode("utf-8", errors="replace")
        for line in text.splitlines():
            name = line.strip().rpartition(",")[2]
            if "/" in name:
                order.setdefault(name, len(order))
    return order


# --- the run -----------------------------------------------------------------------------------------------------

def read_mindspore_sync(path: str | os.PathLike[str]) -> DumpGraph:
    """Read a synchronous dump (its first iteration) into a run, device formats turned back where the IR beside
    the dump gives the host shapes.

    Raises
    ------
    DumpFormatError
        If no folder at or below `path` holds synchronous dump files, or a file is damaged.
    """
    folder = Path(path)
    iterations = _iterations(folder)
    if not iterations:
        raise DumpFormatError(f"{folder}: no MindSpore synchronous dump files here or three levels below")
    notes = [f"{len(iterations) - 1} later iteration(s) not read"] if len(iterations) > 1 else []
    run = iterations[0]
    files = [f for f in map(parse_bin_name, sorted(os.listdir(run))) if f is not None]
    m = _ITERATION.match(run.name)
    device = _DEVICE.match(run.parent.name)
    return parse_mindspore_sync(files, source=str(run), step=int(m[1]) if m else None,
                                rank=int(device[1]) if device else None, missing=notes, folder=run,
                                host=read_host_shapes(run.parent), order=read_execution_order(run.parent))


def parse_mindspore_sync(files: Sequence[BinFile], *, source: str = "<memory>", step: int | None = None,
                         rank: int | None = None, missing: Iterable[str] = (), folder: Path | None = None,
                         host: HostShapes | None = None, order: Mapping[str, int] | None = None) -> DumpGraph:
    """Build a run from the files of one iteration (kernels in `order`, then by their ``-op<N>`` ids and name).

    Raises
    ------
    DumpFormatError
        If there is no file, or a file is damaged.
    """
    if not files:
        raise DumpFormatError(f"{source}: no synchronous dump file in the folder")
    host = host or HostShapes({}, {})
    key = _order_key(order or {})
    ops = sorted({f.op_name for f in files}, key=key)
    ordered = sorted(files, key=lambda f: (key(f.op_name), int(f.role), f.index))
    shapes = [_host_shape(f, host) for f in ordered]
    stats, present, shapes = _all_stats(ordered, shapes, folder)
    builder = HierarchyBuilder()
    types = [_OP_NUMBER.sub("", op.rpartition("/")[2]) for op in ops]
    scoped_nodes(builder, ops, types, _layout_attrs(ops, ordered, shapes))
    n = len(ordered)
    builder.add_tensors([f.op_name for f in ordered], [int(f.role) for f in ordered], [str(f.index) for f in ordered],
                        dtype=[f.dtype for f in ordered], shape=[_shape(s or f.shape) for f, s in zip(ordered, shapes)],
                        stats=stats, present=present, md5=[""] * n,
                        file=[_reference(f, s) if folder is not None else "" for f, s in zip(ordered, shapes)],
                        value=[""] * n)
    notes = (*missing, *_kept_notes(ordered, shapes, host, folder))
    info = RunInfo(path=source, format="mindspore_sync", framework="mindspore",
                   task="tensor" if folder is not None else "statistics", rank=rank, step=step, missing=notes)
    return builder.build(info, group_apis=False)


def _order_key(order: Mapping[str, int]):
    def key(name: str) -> tuple[int, int, str]:
        m = _OP_NUMBER.search(name)
        return (order.get(name, len(order)), int(m[1]) if m else -1, name)
    return key


def _host_shape(f: BinFile, host: HostShapes) -> tuple[int, ...] | None:
    """The host shape of a tiled tensor when the IR gives one and its device shape is the file's."""
    if not f.tiled:
        return None
    key = (f.op_name, f.role, f.index)
    shape = host.shapes.get(key)
    if shape is None or host.device.get(key, f.shape) != f.shape:
        return None
    return shape


def _layout_attrs(ops: Sequence[str], files: Sequence[BinFile],
                  shapes: Sequence[tuple[int, ...] | None]) -> list[tuple[tuple[str, str], ...]]:
    kept = {f.op_name for f, s in zip(files, shapes) if f.device and s is None}
    restored = {f.op_name for f, s in zip(files, shapes) if s is not None}
    out = []
    for op in ops:
        if op in kept:
            out.append((("layout", "device format kept: no host shape in the IR or no inverse for it"),))
        elif op in restored:
            out.append((("layout", "device format turned back to the host shape of the IR"),))
        else:
            out.append(())
    return out


def _all_stats(files: Sequence[BinFile], shapes: Sequence[tuple[int, ...] | None], folder: Path | None
               ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, ...] | None]]:
    """Statistics of each file's tensor (of its host elements where `shapes` gives a host shape), and the host
    shapes that fit their device shapes (None for one that does not: the tensor keeps its device shape)."""
    stats = np.full((len(files), 4), np.nan)
    present = np.zeros((len(files), 4), bool)
    fitting = list(shapes)
    if folder is None:
        return stats, present, fitting
    for k, (f, shape) in enumerate(zip(files, shapes)):
        data = _device_array(str(folder / f.file), f)
        pieces = [data]
        if shape is not None:
            try:
                pieces = original_elements(data, device_format(f.format), f.shape, shape)
            except DeviceFormatError:
                fitting[k] = None
        stats[k], present[k] = elements_stats(pieces)
    return stats, present, fitting


def _reference(f: BinFile, shape: tuple[int, ...] | None) -> str:
    return f.file if shape is None else f"{f.file}#host={','.join(map(str, shape))}"


def _kept_notes(files: Sequence[BinFile], shapes: Sequence[tuple[int, ...] | None], host: HostShapes,
                folder: Path | None) -> list[str]:
    """The run's notes on the tensors that keep their device shape: those whose host shape the IR does not give (or
    does not fit their device shape), and those in a format with no inverse."""
    lost = [f for f, s in zip(files, shapes) if f.tiled and s is None]
    other = [f for f in files if f.device and not f.tiled]
    notes = []
    if lost:
        where = ", ".join(host.files) if host.files else \
            f"no {_GRAPH_IR} in {(folder.parent / 'graphs') if folder is not None else 'graphs/'}"
        notes.append(f"{len(lost)} tensor(s) in a device format keep their device shape, their host shape not found "
                     f"or not fitting ({where}); first: {lost[0].file}")
    if other:
        formats = ", ".join(sorted({f.format for f in other}))
        notes.append(f"{len(other)} tensor(s) in a device format graphcmp does not turn back ({formats}) keep their "
                     f"device shape; first: {other[0].file}")
    return notes


def _shape(shape: Iterable[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _iterations(folder: Path, *, limit: int | None = None) -> list[Path]:
    """Folders at or below `folder` (three levels) holding synchronous dump files, iterations in number order."""
    return folders_holding(folder, lambda e: e.name.endswith(".bin") and bool(BIN_NAME.match(e.name)),
                           key=_number_key, depth=3, limit=limit)


def _number_key(name: str) -> tuple:
    m = _ITERATION.match(name) or re.search(r"_(\d+)$", name)
    return (0, int(m[1]), name) if m else (1, 0, name)
