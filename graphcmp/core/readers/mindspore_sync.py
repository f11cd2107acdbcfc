"""Reader for MindSpore synchronous dumps (MindSpore 1.1-1.2): one raw ``.bin`` file per kernel input and output.

The layout is ``{path}/{net_name}/{device_id}/iteration_{i}/`` holding
``{op_name}_{input|output}_{index}_shape_{d0}_{d1}..._{DType}_{FORMAT}.bin`` (``/`` in the kernel's full name written
``--``; the bytes are the tensor as ``numpy.tofile`` writes it). The reader takes any folder of that tree: the first
iteration found is the run (its number the step, the device folder the rank), later ones are noted as in other
dumps. Kernels become op nodes under scope modules from their names, in the order of their ``-op<N>`` kernel ids; a
tensor's statistics are computed from its file and its data stay there for the real-tensor metrics. A tensor in a
device format (``NC1HWC0`` ...) keeps its device shape: the file name records no original shape.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.inputs import regular_file
from graphcmp.core.readers.ascend_dump import folders_holding, scoped_nodes, tensor_stats
from graphcmp.core.records import DumpGraph, Role, RunInfo

__all__ = ["BIN_NAME", "BinFile", "parse_bin_name", "parse_mindspore_sync", "read_bin_tensor",
           "read_mindspore_sync", "sniff"]

BIN_NAME = re.compile(r"^(?P<op>.+)_(?P<role>input|output)_(?P<index>\d+)_shape_(?P<dims>\d+(?:_\d+)*)?_"
                      r"(?P<dtype>Bool|Int8|Int16|Int32|Int64|UInt8|UInt16|UInt32|UInt64|Float16|Float32|Float64)_"
                      r"(?P<format>[A-Za-z0-9_]+)\.bin$")
"""A synchronous dump file name; the dtype names are MindSpore's ``TypeId`` names."""

_NUMPY = {"Bool": "?", "Int8": "i1", "Int16": "<i2", "Int32": "<i4", "Int64": "<i8", "UInt8": "u1", "UInt16": "<u2",
          "UInt32": "<u4", "UInt64": "<u8", "Float16": "<f2", "Float32": "<f4", "Float64": "<f8"}
_HOST = frozenset({"DefaultFormat", "NCHW", "NHWC", "ND", "HWCN", "NCDHW", "NDHWC"})
_ITERATION = re.compile(r"^iteration_(\d+)$")
_OP_NUMBER = re.compile(r"-op(\d+)$")


@dataclass(frozen=True, slots=True)
class BinFile:
    """One dumped tensor file, its name taken apart."""

    file: str
    op_name: str  # the kernel's full name, "/" restored
    role: Role
    index: int
    shape: tuple[int, ...]
    dtype: str  # numpy-style name
    format: str


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


def read_bin_tensor(path: str | os.PathLike[str]) -> np.ndarray:
    """The tensor of one synchronous dump file (memory-mapped), in the shape its name records.

    Raises
    ------
    DumpFormatError
        If the name is not a dump file's or the bytes do not fill the shape.
    """
    name = os.fspath(path)
    parsed = parse_bin_name(os.path.basename(name))
    if parsed is None:
        raise DumpFormatError(f"{name}: not a MindSpore synchronous dump file name "
                              "({op}_{input|output}_{i}_shape_{dims}_{DType}_{FORMAT}.bin)")
    regular_file(name)
    dtype = np.dtype(parsed.dtype).newbyteorder("<")
    count = int(np.prod(parsed.shape, dtype=np.int64)) if parsed.shape else 1
    size = os.path.getsize(name)
    if size < count * dtype.itemsize:
        raise DumpFormatError(f"{name}: holds {size} bytes, its name records {count} {parsed.dtype} values")
    if count == 0:
        return np.zeros(parsed.shape, dtype)
    return np.memmap(name, dtype=dtype, mode="r", shape=(count,)).view(np.ndarray).reshape(parsed.shape)


def read_mindspore_sync(path: str | os.PathLike[str]) -> DumpGraph:
    """Read a synchronous dump (its first iteration) into a run.

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
    device = run.parent.name
    return parse_mindspore_sync(files, source=str(run), step=int(m[1]) if m else None,
                                rank=int(device) if device.isdigit() else None, missing=notes, folder=run)


def parse_mindspore_sync(files: Sequence[BinFile], *, source: str = "<memory>", step: int | None = None,
                         rank: int | None = None, missing: Iterable[str] = (), folder: Path | None = None
                         ) -> DumpGraph:
    """Build a run from the files of one iteration (kernels ordered by their ``-op<N>`` ids, then by name).

    Raises
    ------
    DumpFormatError
        If there is no file.
    """
    if not files:
        raise DumpFormatError(f"{source}: no synchronous dump file in the folder")
    ops = sorted({f.op_name for f in files}, key=_op_order)
    builder = HierarchyBuilder()
    types = [_OP_NUMBER.sub("", op.rpartition("/")[2]) for op in ops]
    device = {f.op_name for f in files if f.format not in _HOST}
    attrs = [(("layout", "device format kept: no original shape recorded"),) if op in device else () for op in ops]
    scoped_nodes(builder, ops, types, attrs)
    ordered = sorted(files, key=lambda f: (_op_order(f.op_name), int(f.role), f.index))
    n = len(ordered)
    stats = np.full((n, 4), np.nan)
    present = np.zeros((n, 4), bool)
    if folder is not None:
        for k, f in enumerate(ordered):
            stats[k], present[k] = tensor_stats(read_bin_tensor(folder / f.file))
    builder.add_tensors([f.op_name for f in ordered], [int(f.role) for f in ordered], [str(f.index) for f in ordered],
                        dtype=[f.dtype for f in ordered], shape=[_shape(f.shape) for f in ordered], stats=stats,
                        present=present, md5=[""] * n, file=[f.file if folder is not None else "" for f in ordered],
                        value=[""] * n)
    info = RunInfo(path=source, format="mindspore_sync", framework="mindspore",
                   task="tensor" if folder is not None else "statistics", rank=rank, step=step, missing=tuple(missing))
    return builder.build(info, group_apis=False)


def _op_order(name: str) -> tuple[int, str]:
    m = _OP_NUMBER.search(name)
    return (int(m[1]) if m else -1, name)


def _shape(shape: Iterable[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _iterations(folder: Path, *, limit: int | None = None) -> list[Path]:
    """Folders at or below `folder` (three levels) holding synchronous dump files, iterations in number order."""
    return folders_holding(folder, lambda e: e.name.endswith(".bin") and bool(BIN_NAME.match(e.name)),
                           key=_number_key, depth=3, limit=limit)


def _number_key(name: str) -> tuple:
    m = _ITERATION.match(name)
    return (0, int(m[1]), name) if m else (1, 0, name)
