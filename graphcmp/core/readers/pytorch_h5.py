"""Reader for the PyTorch 1.5 dump of Ascend's fork (``torch.utils.dumper``): one HDF5 file per run.

The dumper (Ascend/pytorch, ``src/aten/src/ATen/utils/DumpUtils.cpp``) writes every executed op under
``/{op}/{seq}/{input|output}/{param}``: ``op`` is the IR name (an autograd function such as
``NpuConvolutionBackward`` on the NPU, ``CudnnConvolutionBackward`` or ``ThnnConv2DBackward`` on a GPU or CPU),
``seq`` the run-wide call number, ``param`` the argument's name; a list argument is a group ``{param}`` holding
``{param}_{i}``. A tensor dataset carries the attributes ``DataType`` (the dumper's dtype code), ``DeviceType``,
``FormatType``, ``Stride`` and ``Type`` 0; float16 tensors are stored as float32 (exactly). Any other dataset is a
scalar or list argument (``Type`` names which) and is kept as a value.

Each call becomes an API node ``{op}.{k}`` (its k-th call, ordered by ``seq``), backward for ``*Backward`` names;
the NPU and GPU names of one op pair through the op table (`matching.by_op_table`). Tensors stay in the file:
their statistics are computed here, one dataset at a time, and the real-tensor metrics read them again by the
reference ``{file}#h5:{dataset path}`` (`read_h5_tensor`).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.inputs import regular_file
from graphcmp.core.readers.ascend_dump import tensor_stats
from graphcmp.core.records import Direction, DumpGraph, NodeKind, Role, RunInfo

__all__ = ["DUMP_DTYPES", "H5Value", "parse_pytorch_h5", "read_h5_tensor", "read_pytorch_h5", "sniff"]

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
"""The first 8 bytes of an HDF5 file (at offset 0, or 512, 1024 ... after a user block)."""

DUMP_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
               10: "float16", 11: "float64"}
"""The dumper's ``DataType`` codes (``scalarTypeToDumpTypeMap`` in DumpUtils.cpp) -> numpy dtype names."""

_TENSOR = 0  # SaveType::TENSOR
_TENSOR_OPTIONS = 18  # SaveType::TENSOR_OPTS: attributes only, no value
_SUFFIXES = (".h5", ".hdf5")
_SEQ = re.compile(r"^\d+$")


@dataclass(frozen=True, slots=True)
class H5Value:
    """One dumped argument or result of one call.

    ``path`` is the dataset's path in the file; ``array`` holds the data of a non-tensor value (a scalar or a
    short list) and None for a tensor, whose data stay in the file; ``readable`` is False for a tensor whose data
    could not be read (no statistics, no reference for the tensor metrics).
    """

    op: str
    seq: int
    role: Role
    slot: str
    path: str
    dtype: str
    shape: tuple[int, ...]
    tensor: bool
    array: np.ndarray | None = None
    readable: bool = True


def sniff(path: str | os.PathLike[str]) -> bool:
    """True for an HDF5 file, or a file named ``*.h5`` / ``*.hdf5`` (which `read_pytorch_h5` then checks)."""
    name = os.fspath(path)
    if not os.path.isfile(name):
        return False
    if name.lower().endswith(_SUFFIXES):
        return True
    try:
        with open(name, "rb") as f:
            return f.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE
    except OSError:
        return False


def read_pytorch_h5(path: str | os.PathLike[str]) -> DumpGraph:
    """Read a PyTorch 1.5 ``.h5`` dump into a run (tensor statistics computed, data left in the file).

    Raises
    ------
    DumpFormatError
        If the file is not HDF5, is truncated or damaged, or holds no ``/{op}/{seq}/{input|output}`` groups.
    """
    import h5py  # see tests/test_layers.py: only runs of this format load it

    name = os.fspath(regular_file(path))
    with open(name, "rb") as f:
        head = f.read(len(HDF5_SIGNATURE))
    if head != HDF5_SIGNATURE:
        raise DumpFormatError(f"{name}: not an HDF5 file (no HDF5 signature); a PyTorch 1.5 dump is one")
    try:
        with h5py.File(name, "r") as file:
            values, skipped = _walk(file)
            stats, present, lost = _statistics(file, values)
    except DumpFormatError:
        raise
    except (OSError, KeyError, ValueError, RuntimeError) as err:
        raise DumpFormatError(f"{name}: cannot read the HDF5 file, truncated or damaged ({_one_line(err)})") from err
    notes = [f"{skipped} object(s) outside /{{op}}/{{seq}}/{{input|output}} not read"] if skipped else []
    notes += lost
    return parse_pytorch_h5(values, source=name, stats=stats, present=present, missing=notes)


def parse_pytorch_h5(values: Sequence[H5Value], *, source: str = "<memory>", stats: np.ndarray | None = None,
                     present: np.ndarray | None = None, missing: Iterable[str] = ()) -> DumpGraph:
    """Build a run from the values of a dump (any order): calls ordered by ``seq``, tensors referenced in `source`.

    `stats` / `present` (n, 4) give each value's statistics; without them only non-tensor values have any.

    Raises
    ------
    DumpFormatError
        If there is no value.
    """
    if not values:
        raise DumpFormatError(f"{source}: no /{{op}}/{{seq}}/{{input|output}}/{{param}} dataset in the file "
                              "(not a PyTorch 1.5 dump)")
    calls = sorted({(v.seq, v.op) for v in values})
    counts: dict[str, int] = defaultdict(int)
    ids: dict[tuple[int, str], str] = {}
    builder = HierarchyBuilder()
    for seq, op in calls:
        ids[(seq, op)] = node = f"{op}.{counts[op]}"
        counts[op] += 1
        direction = Direction.BACKWARD if op.endswith("Backward") else Direction.FORWARD
        builder.add_node(node, NodeKind.API, op, direction, None, seq, attrs=(("seq", str(seq)),))
    n = len(values)
    if stats is None or present is None:
        stats, present = np.full((n, 4), np.nan), np.zeros((n, 4), bool)
        for k, v in enumerate(values):
            if v.array is not None:
                stats[k], present[k] = tensor_stats(v.array)
    base = os.path.basename(source)
    builder.add_tensors([ids[(v.seq, v.op)] for v in values], [int(v.role) for v in values],
                        [v.slot for v in values], dtype=[v.dtype for v in values],
                        shape=["scalar" if not v.tensor and not v.shape else _shape(v.shape) for v in values],
                        stats=stats, present=present, md5=[""] * n,
                        file=[f"{base}#h5:{v.path}" if v.tensor and v.readable else "" for v in values],
                        value=[_value_text(v.array) if v.array is not None else "" for v in values])
    info = RunInfo(path=source, format="pytorch_h5", framework="pytorch", task="tensor", missing=tuple(missing))
    return builder.build(info, group_apis=False)


def read_h5_tensor(path: str | os.PathLike[str], dataset: str) -> np.ndarray:
    """The tensor at `dataset` of a dump file, in its recorded shape (a strided view when its strides say so).

    Raises
    ------
    DumpFormatError
        If the file cannot be read or holds no such tensor.
    """
    import h5py  # see tests/test_layers.py: LAZY_IMPORTS

    name = os.fspath(regular_file(path))
    try:
        with h5py.File(name, "r") as file:
            node = file.get(dataset)
            if not isinstance(node, h5py.Dataset):
                raise DumpFormatError(f"{name}: holds no dataset {dataset!r}")
            return _tensor(node)
    except DumpFormatError:
        raise
    except (OSError, KeyError, ValueError, RuntimeError) as err:
        raise DumpFormatError(f"{name}: cannot read {dataset} ({_one_line(err)})") from err


def _walk(file) -> tuple[list[H5Value], int]:
    """Every value under ``/{op}/{seq}/{input|output}``, and how many other objects there were."""
    import h5py

    values: list[H5Value] = []
    skipped = 0
    for op, calls in file.items():
        if not isinstance(calls, h5py.Group):
            skipped += 1
            continue
        for seq, call in calls.items():
            if not (_SEQ.match(seq) and isinstance(call, h5py.Group)):
                skipped += 1
                continue
            for role_name, group in call.items():
                if role_name not in ("input", "output") or not isinstance(group, h5py.Group):
                    skipped += 1
                    continue
                role = Role.INPUT if role_name == "input" else Role.OUTPUT
                for param, item in group.items():
                    members = item.items() if isinstance(item, h5py.Group) else [(param, item)]
                    for slot, node in members:
                        if not isinstance(node, h5py.Dataset):
                            skipped += 1
                        elif (value := _value(node, op, int(seq), role, slot)) is not None:
                            values.append(value)  # None: tensor options, attributes without a value
    return values, skipped


def _value(node, op: str, seq: int, role: Role, slot: str) -> H5Value | None:
    """The value a dataset holds, None for one with no value (tensor options)."""
    kind = _int_attr(node, "Type")
    if kind == _TENSOR_OPTIONS:
        return None
    if "DataType" in node.attrs or kind == _TENSOR:
        dtype = DUMP_DTYPES.get(_int_attr(node, "DataType") or -1, node.dtype.name)
        return H5Value(op, seq, role, slot, node.name, dtype, tuple(node.shape), True)
    array = np.asarray(node[()])
    return H5Value(op, seq, role, slot, node.name, array.dtype.name, tuple(array.shape), False, array)


def _statistics(file, values: list[H5Value]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each value's statistics, and a note on the tensors whose data could not be read (a damaged dataset), which
    are marked unreadable in `values`."""
    stats = np.full((len(values), 4), np.nan)
    present = np.zeros((len(values), 4), bool)
    lost: list[str] = []
    for k, v in enumerate(values):
        try:
            array = _tensor(file[v.path]) if v.tensor else v.array
        except (OSError, KeyError, ValueError, RuntimeError) as err:
            lost.append(f"{v.path} ({_one_line(err)})")
            values[k] = replace(v, readable=False)
            continue
        if array is not None:
            stats[k], present[k] = tensor_stats(array)
    notes = [f"{len(lost)} tensor(s) unreadable, left without statistics or data: {lost[0]}"
             + (f" and {len(lost) - 1} more" if len(lost) > 1 else "")] if lost else []
    return stats, present, notes


def _tensor(node) -> np.ndarray:
    """A tensor dataset's data; a non-contiguous tensor (the dumper writes its storage) seen through its strides."""
    array = np.asarray(node[()])
    stride = node.attrs.get("Stride")
    if stride is None or array.ndim == 0 or array.size == 0:
        return array
    stride = tuple(int(s) for s in np.asarray(stride).reshape(-1))
    dense = tuple(int(s) for s in np.cumprod((1, *array.shape[:0:-1]))[::-1])
    if len(stride) != array.ndim or stride == dense or min(stride) < 0:
        return array
    reach = sum((d - 1) * s for d, s in zip(array.shape, stride))
    if reach >= array.size:
        return array  # the storage is larger than the dataset: the bytes beyond it were not written
    flat = array.reshape(-1)
    return np.lib.stride_tricks.as_strided(flat, array.shape, tuple(s * flat.itemsize for s in stride),
                                           writeable=False)


def _int_attr(node, key: str) -> int | None:
    value = node.attrs.get(key)
    if value is None:
        return None
    try:
        return int(np.asarray(value).reshape(-1)[0])
    except (ValueError, IndexError, TypeError):
        return None


def _value_text(array: np.ndarray) -> str:
    return str(array.tolist())


def _shape(shape: Iterable[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__

