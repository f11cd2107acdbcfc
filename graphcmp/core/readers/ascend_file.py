"""One Ascend raw dump file: its name, its ``DumpData`` header, and its tensors read lazily from a memory map.

An NPU dump writes one file per executed op, ``{op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}``
(MindSpore's asynchronous dump leaves out the stream id; FFTS+ ops add ``.4.{context}.{thread}.{device}``).
Two layouts exist (shared/data/formats/ASCEND_RAW_DUMP.md section 1):

* current: ``uint64 LE header length L | DumpData protobuf (tensor data fields empty) | bytes of the
  inputs, outputs, buffers and workspaces in that order``; the writer skips a tensor of size 0 or with
  device address 0 (its header entry stays, with its size), so such a tensor has no bytes here;
* older: the whole file is one ``DumpData`` with each tensor's bytes in its ``data`` field.

`read_header` maps the file, decodes the header only and says where each tensor's bytes lie
(`TensorDesc.offset`, -1 when the file holds none), and where the bytes of the op's buffers (``OpBuffer``, e.g. its
L1 buffer) and workspaces (``Workspace``) lie after the outputs (`ExtraDesc`: not tensors, nothing compares them;
`read_dump_extra` maps them); `read_dump_tensor` maps one tensor's bytes again
when the comparison needs them, and `read_dump_elements` gives the views its statistics read (a device format
not turned back). Nothing reads the whole file into memory. An FFTS+ op writes one file per thread; its outputs
are joined from all of them (`merged_output`) when read through any one.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import struct
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from google.protobuf.message import DecodeError

from graphcmp.core.ascend_dtypes import decode, itemsize_bits
from graphcmp.core.device_formats import DeviceFormatError, original_elements, to_original
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.inputs import open_regular
from graphcmp.core.readers.proto_gen import dump_data_pb2

__all__ = [
    "DUMP_NAME",
    "FFTS_PLUS_TASK",
    "FFTS_SLICE",
    "DumpHeader",
    "DumpName",
    "ExtraDesc",
    "FftsSlices",
    "TensorDesc",
    "decode_header",
    "dtype_name",
    "ffts_group",
    "ffts_key",
    "ffts_order",
    "ffts_slices",
    "format_name",
    "merged_output",
    "parse_dump_name",
    "read_dump_elements",
    "read_dump_extra",
    "read_dump_tensor",
    "read_header",
    "tensor_array",
]

DUMP_NAME = re.compile(
    r"^(?P<type>[A-Za-z0-9_-]+)\.(?P<name>[A-Za-z0-9_-]+)\.(?P<task>\d+)(?:\.(?P<stream>\d+))?"
    r"\.(?P<ts>\d{1,255})(?P<ffts>\.\d+\.\d+\.\d+\.\d+)?$")
"""A raw dump file name (msaccucmp's pattern, anchored): type, name with ``/ . space`` as ``_``, ids, time."""

_DTYPES: dict[int, str] = {
    1: "float32", 2: "float16", 3: "int8", 4: "uint8", 5: "int16", 6: "uint16", 7: "int32", 8: "int64",
    9: "uint32", 10: "uint64", 11: "bool", 12: "float64", 16: "complex64", 17: "complex128",
    18: "int8", 19: "int16", 20: "int32", 21: "uint8", 22: "uint16", 27: "bfloat16",
}
"""Dump dtype code -> numpy-style name, for the types numpy holds directly (bfloat16: widened to float32)."""

_NUMPY = {"float32": "<f4", "float16": "<f2", "float64": "<f8", "int8": "i1", "uint8": "u1", "int16": "<i2",
          "uint16": "<u2", "int32": "<i4", "int64": "<i8", "uint32": "<u4", "uint64": "<u8", "bool": "?",
          "complex64": "<c8", "complex128": "<c16"}

HOST_FORMATS = frozenset({"NCHW", "NHWC", "ND", "HWCN", "CHWN", "NDHWC", "NCDHW", "DHWCN", "DHWNC", "NC", "CN",
                          "NCL", "MD", "RESERVED"})
"""Formats whose bytes are the host layout (a plain reshape); the others are device layouts."""


@dataclass(frozen=True, slots=True)
class DumpName:
    """A dump file name taken apart."""

    op_type: str
    op_name: str  # as in the name: "/", "." and spaces are "_"
    task_id: int
    stream_id: int  # -1 when the name has none (MindSpore asynchronous dump)
    timestamp: int
    ffts: tuple[int, ...] = ()  # FFTS+ suffix: (task type, context id, thread id, device id); () when none


@dataclass(frozen=True, slots=True)
class TensorDesc:
    """One input or output of a dump file, as its header describes it.

    ``offset`` is where its bytes start in the file (-1: the file holds none, see ``skipped``);
    ``shape`` is the device shape, ``original_shape`` the host one (empty when not recorded).
    """

    role: str  # "input" or "output"
    index: int
    dtype: int
    format: int
    shape: tuple[int, ...]
    original_shape: tuple[int, ...]
    size: int
    address: int
    offset: int
    origin_name: str = ""
    origin_index: int = -1
    skipped: str = ""  # why the file holds no bytes for it ("" when it does)
    origin_format: str = ""  # the original op's layout (NCHW, NHWC ...) a device format turns back into
    sub_format: int = 0  # FRACTAL_Z of a group convolution: its group count


@dataclass(frozen=True, slots=True)
class ExtraDesc:
    """One buffer (``OpBuffer``) or workspace (``Workspace``) of a dump file: raw bytes of the op's scratch memory
    that follow its outputs, kept as they are (no dtype or shape; never compared).

    ``kind`` is ``"buffer"`` or ``"workspace"``, ``type`` its ``BufferType`` / ``SpaceType`` name (``L1``,
    ``LOG``), ``offset`` where its bytes start in the file (-1: the file holds none, see ``skipped``).
    """

    kind: str
    index: int
    type: str
    size: int
    offset: int
    skipped: str = ""

    def describe(self) -> str:
        """``"L1, 4096 bytes"`` (or why the file holds none)."""
        return f"{self.type}, {self.size} bytes" + (f" ({self.skipped})" if self.skipped else "")


@dataclass(frozen=True, slots=True)
class DumpHeader:
    """What a dump file's header says: op name, time, tensors (inputs first), and the layout found."""

    op_name: str
    dump_time: int
    tensors: tuple[TensorDesc, ...]
    layout: str  # "binary" (header + raw bytes) or "protobuf" (the whole file one message)
    payload: int  # bytes of tensor data the file holds after the header
    declared: int  # sum of the sizes the header declares for inputs, outputs, buffers and workspaces
    slices: FftsSlices | None = None  # how an FFTS+ op's outputs are cut between its thread files
    extras: tuple[ExtraDesc, ...] = ()  # its buffers then its workspaces, whose bytes follow the outputs


@dataclass(frozen=True, slots=True)
class FftsSlices:
    """What the FFTS+ attribute of a dump header (``attr[0]``, JSON) says about the op's thread slices.

    ``threads`` is ``slice_instance_num``; ``auto`` the ``threadMode`` (automatic: every thread file holds its
    slice of each output, of the shape ``output_tensor_slice`` gives, ``shapes[thread][output]``); ``cut_axes`` per
    output the axis ``outputCutList`` cuts (the first entry other than 1), -1 for an output not cut.
    """

    threads: int
    auto: bool
    cut_axes: tuple[int, ...]
    shapes: tuple[tuple[tuple[int, ...], ...], ...] = ()


def parse_dump_name(name: str) -> DumpName | None:
    """Take a raw dump file name apart (None when it is not one).

    >>> parse_dump_name("Conv2D._layer1_conv2_Conv.7.0.1741141530000246")
    DumpName(op_type='Conv2D', op_name='_layer1_conv2_Conv', task_id=7, stream_id=0, timestamp=1741141530000246, \
ffts=())
    >>> parse_dump_name("Conv2D.conv_lxslice1.2.9.1670205069987340.4.330.0.0").ffts
    (4, 330, 0, 0)
    >>> parse_dump_name("ReLU.Default_relu-ReLU-op3.12.1617345").stream_id
    -1
    >>> parse_dump_name("_conv1_Conv.0.1741141000000013.npy") is None
    True
    """
    m = DUMP_NAME.match(name)
    if m is None:
        return None
    stream = int(m["stream"]) if m["stream"] is not None else -1
    ffts = tuple(int(part) for part in m["ffts"].split(".")[1:]) if m["ffts"] else ()
    return DumpName(m["type"], m["name"], int(m["task"]), stream, int(m["ts"]), ffts)


def dtype_name(code: int) -> str:
    """Numpy-style name of a dump dtype code (``DT_<NAME>`` for the types without a numpy twin).

    >>> dtype_name(2), dtype_name(27), dtype_name(35)
    ('float16', 'bfloat16', 'DT_FLOAT8_E4M3FN')
    """
    if code in _DTYPES:
        return _DTYPES[code]
    try:
        return dump_data_pb2.OutputDataType.Name(code)
    except ValueError:
        return f"DT_{code}"


def format_name(code: int) -> str:
    """Name of a dump format code without its ``FORMAT_`` prefix (primary format: the low byte).

    >>> format_name(3), format_name(29), format_name(2)
    ('NC1HWC0', 'FRACTAL_NZ', 'ND')
    """
    try:
        return dump_data_pb2.OutputFormat.Name(code & 0xFF).removeprefix("FORMAT_")
    except ValueError:
        return f"FORMAT_{code & 0xFF}"


def read_header(path: str | os.PathLike[str]) -> DumpHeader:
    """Decode the header of the dump file at `path` (either layout), the tensors' bytes left in the file.

    The last headers read are kept (keyed by the file's modification time and size), so reading a file's tensors
    after its header decodes it once.

    Raises
    ------
    DumpFormatError
        If the file cannot be read or is not a dump file in either layout.
    """
    name = os.fspath(path)
    return _cached_header(name, *_stamp(name))


def _read_header(name: str) -> DumpHeader:
    try:
        with open_regular(name) as file:
            size = os.fstat(file.fileno()).st_size
            if size == 0:
                raise DumpFormatError(f"{name}: empty file; not an Ascend dump file")
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return decode_header(data, source=name)
    except OSError as err:
        raise DumpFormatError(f"{name}: cannot read ({err})") from err


def decode_header(data: bytes | mmap.mmap, *, source: str = "<bytes>") -> DumpHeader:
    """Decode a dump file's bytes (a memory map is only sliced where the header lies).

    Raises
    ------
    DumpFormatError
        If the bytes are neither layout.
    """
    size = len(data)
    if size >= 8:
        (length,) = struct.unpack_from("<Q", data, 0)
        if 0 < length <= size - 8:
            message = _parse(bytes(data[8:8 + length]))
            if message is not None and (message.op_name or message.input or message.output):
                return _binary_header(message, size - 8 - length, 8 + length, source)
    if size <= 64 << 20:  # the older layout holds the tensors inline: only small files are decoded whole
        message = _parse(bytes(data))
        if message is not None and (message.op_name or message.input or message.output):
            return _protobuf_header(message, source)
    raise DumpFormatError(f"{source}: not an Ascend dump file (neither an 8-byte header length followed by a "
                          "DumpData header nor a whole DumpData message)")


def _parse(raw: bytes) -> dump_data_pb2.DumpData | None:
    message = dump_data_pb2.DumpData()
    try:
        message.ParseFromString(raw)
    except (DecodeError, RuntimeError, ValueError):
        return None
    return message


def _declared(message: dump_data_pb2.DumpData) -> int:
    return sum(t.size for t in (*message.input, *message.output, *message.buffer, *message.space))


def _binary_header(message: dump_data_pb2.DumpData, payload: int, start: int, source: str) -> DumpHeader:
    """Offsets of the tensors after the header: each in turn, skipping what the writer skips when that
    accounts for the payload (size 0, or device address 0 in a header that records addresses)."""
    items = [("input", k, t) for k, t in enumerate(message.input)] + \
            [("output", k, t) for k, t in enumerate(message.output)]
    declared = _declared(message)
    has_address = any(t.address for _, _, t in items)
    skip_null = has_address and declared > payload
    tensors = []
    offset = start
    end = start + payload
    hint = _layout_hint(message)
    for role, k, t in items:
        skipped = ""
        if t.size == 0:
            skipped = "size 0"
        elif skip_null and t.address == 0:
            skipped = "device address 0: the writer skipped it"
        elif offset + t.size > end:
            skipped = "its bytes lie past the end of the file (truncated)"
        tensors.append(_desc(role, k, t, -1 if skipped else offset, skipped, hint))
        if not skipped:
            offset += t.size
    cut = any(t.skipped.endswith("(truncated)") for t in tensors)
    return DumpHeader(message.op_name, message.dump_time, tuple(tensors), "binary", payload, declared,
                      ffts_slices(message), _binary_extras(message, offset, end, cut))


def _extra_items(message: dump_data_pb2.DumpData
                 ) -> list[tuple[str, int, str, dump_data_pb2.OpBuffer | dump_data_pb2.Workspace]]:
    """(kind, index, type name, message) of the buffers then the workspaces, in the order the writer writes them."""
    items = [("buffer", k, _enum_name(dump_data_pb2.BufferType, b.buffer_type), b)
             for k, b in enumerate(message.buffer)]
    items += [("workspace", k, _enum_name(dump_data_pb2.Workspace.SpaceType, w.type), w)
              for k, w in enumerate(message.space)]
    return items


def _enum_name(enum, value: int) -> str:
    try:
        return enum.Name(value)
    except ValueError:
        return str(value)


def _binary_extras(message: dump_data_pb2.DumpData, offset: int, end: int, cut: bool) -> tuple[ExtraDesc, ...]:
    """Where each buffer's and workspace's bytes lie, from `offset` (the end of the last output's bytes) on; `cut`
    (a tensor before them is cut off) and the first one cut off leave all those after it unread too."""
    extras = []
    for kind, k, type_name, item in _extra_items(message):
        cut = cut or (item.size > 0 and offset + item.size > end)
        skipped = "size 0" if item.size == 0 else "its bytes lie past the end of the file (truncated)" if cut else ""
        extras.append(ExtraDesc(kind, k, type_name, int(item.size), -1 if skipped else offset, skipped))
        if not skipped:
            offset += item.size
    return tuple(extras)


def _protobuf_header(message: dump_data_pb2.DumpData, source: str) -> DumpHeader:
    """The older layout: bytes inline; `offset` counts within the message's ``data`` fields (see `_inline`)."""
    tensors = []
    hint = _layout_hint(message)
    for role, items in (("input", message.input), ("output", message.output)):
        for k, t in enumerate(items):
            skipped = "" if t.data else "no data recorded"
            tensors.append(_desc(role, k, t, 0 if t.data else -1, skipped, hint))
    extras = tuple(ExtraDesc(kind, k, type_name, int(item.size or len(item.data)), 0 if item.data else -1,
                             "" if item.data else "no data recorded")
                   for kind, k, type_name, item in _extra_items(message))
    return DumpHeader(message.op_name, message.dump_time, tuple(tensors), "protobuf", 0, _declared(message),
                      ffts_slices(message), extras)


def ffts_slices(message: dump_data_pb2.DumpData) -> FftsSlices | None:
    """The FFTS+ thread slices a header's first attribute describes (None without one, or when it is not the JSON
    of a thread slice map)."""
    if not message.attr:
        return None
    try:
        info = json.loads(message.attr[0].value)
        threads = int(info["slice_instance_num"])
        cuts = tuple(next((k for k, v in enumerate(row) if v != 1), -1) for row in info.get("outputCutList") or ())
        shapes = tuple(tuple(tuple(int(d["higher"]) - int(d["lower"]) for d in tensor) for tensor in thread)
                       for thread in info.get("output_tensor_slice") or ())
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return FftsSlices(threads, bool(info.get("threadMode")), cuts, shapes)


_LAYOUTS = frozenset({"NCHW", "NHWC", "HWCN", "CHWN", "NCDHW", "NDHWC", "DHWCN", "DHWNC"})


def _layout_hint(message: dump_data_pb2.DumpData) -> str:
    """The original layout the op's outputs name (``original_op.format``), which its inputs share in practice."""
    for t in message.output:
        if t.HasField("original_op") and format_name(t.original_op.format) in _LAYOUTS:
            return format_name(t.original_op.format)
    return ""


def _desc(role: str, k: int, t: dump_data_pb2.OpInput | dump_data_pb2.OpOutput, offset: int,
          skipped: str, hint: str = "") -> TensorDesc:
    origin_name, origin_index = "", -1
    layout = hint
    if role == "output" and t.HasField("original_op"):
        own = format_name(t.original_op.format)
        layout = own if own in _LAYOUTS else hint
    if role == "output" and t.HasField("original_op") and t.original_op.name:
        origin_name, origin_index = t.original_op.name, int(t.original_op.output_index)
    size = t.size or len(t.data)
    return TensorDesc(role, k, int(t.data_type), int(t.format), tuple(int(d) for d in t.shape.dim),
                      tuple(int(d) for d in t.original_shape.dim), int(size), int(t.address), offset,
                      origin_name, origin_index, skipped, layout, int(t.sub_format))


# --- FFTS+ ops: one op, a file per thread ----------------------------------------------------------------

FFTS_PLUS_TASK = 4
"""Task type of an FFTS+ op in the name suffix ``.{task type}.{context}.{thread}.{device}`` (AICORE 0, AICPU 1,
DEBUG 2, HCCL 3, FFTSPLUS 4)."""

FFTS_SLICE = re.compile(r"_lxslice(\d+)")
"""The slice index a manual-mode FFTS+ op carries in its name (``Conv2D_lxslice1``)."""


def ffts_key(name: DumpName) -> tuple[str, str] | None:
    """(op type, op name without its ``_lxslice`` index) of an FFTS+ thread file, None for other dump files."""
    if not name.ffts or name.ffts[0] != FFTS_PLUS_TASK:
        return None
    return name.op_type, FFTS_SLICE.sub("", name.op_name)


def ffts_order(name: DumpName) -> tuple[int, int]:
    """Where a thread file goes among its op's files: its slice index (manual mode, in the name) or thread id
    (automatic mode, in the suffix), then its time."""
    m = FFTS_SLICE.search(name.op_name)
    return (int(m[1]) if m else name.ffts[2] if len(name.ffts) > 2 else 0), name.timestamp


def ffts_group(path: str | os.PathLike[str]) -> list[str]:
    """The thread files of the FFTS+ op whose file is `path` (itself among them), in `ffts_order`; just `path`
    for a file of another kind."""
    name = os.fspath(path)
    parsed = parse_dump_name(os.path.basename(name))
    key = None if parsed is None else ffts_key(parsed)
    if key is None:
        return [name]
    folder = os.path.dirname(name)
    try:
        stamp = os.stat(folder or ".").st_mtime_ns
    except OSError as err:
        raise DumpFormatError(f"{name}: cannot list its folder ({err})") from err
    return [os.path.join(folder, f) for f in _ffts_groups(folder, stamp).get(key, [os.path.basename(name)])]


@lru_cache(maxsize=8)
def _ffts_groups(folder: str, _mtime: int) -> dict[tuple[str, str], list[str]]:
    groups: dict[tuple[str, str], list[tuple[tuple[int, int], str]]] = {}
    for entry in os.listdir(folder or "."):
        parsed = parse_dump_name(entry)
        key = None if parsed is None else ffts_key(parsed)
        if key is not None:
            groups.setdefault(key, []).append((ffts_order(parsed), entry))
    return {key: [entry for _, entry in sorted(files)] for key, files in groups.items()}


def merged_output(path: str | os.PathLike[str], index: int) -> tuple[np.ndarray, TensorDesc] | None:
    """Output `index` of the FFTS+ op whose thread file is `path`, its threads' slices joined along the axis the
    header's ``outputCutList`` cuts (as msaccucmp's FFTS+ parser joins them): the device array and the first
    file's description of it with the joined shape. None when there is nothing to join (one file, or the output
    is not cut).

    Raises
    ------
    DumpFormatError
        If a thread file lacks the output or the slices do not fit together.
    """
    files = ffts_group(path)
    if len(files) < 2:
        return None
    base = _cached_header(files[0], *_stamp(files[0]))
    slices = base.slices
    if slices is None or index >= len(slices.cut_axes) or slices.cut_axes[index] < 0:
        return None
    parts = []
    for thread, file in enumerate(files):
        _, desc, raw = _tensor_bytes(file, "output", index)
        array = _device_array(raw, desc, file)
        if slices.auto and thread < len(slices.shapes) and index < len(slices.shapes[thread]):
            shape = slices.shapes[thread][index]
            if int(np.prod(shape, dtype=np.int64)) == array.size:
                array = array.reshape(shape)
        parts.append(array)
    axis = slices.cut_axes[index]
    try:
        joined = np.concatenate(parts, axis=axis)
    except ValueError as err:  # numpy.exceptions.AxisError is one
        raise DumpFormatError(f"{files[0]}: the {len(files)} FFTS+ thread files of output {index} do not join "
                              f"along axis {axis} ({err})") from err
    desc = next(t for t in base.tensors if t.role == "output" and t.index == index)
    return joined, replace(desc, shape=tuple(joined.shape), size=joined.nbytes)


# --- tensor bytes -> array ------------------------------------------------------------------------------

def read_dump_tensor(path: str | os.PathLike[str], role: str, index: int, *, widen: bool = False) -> np.ndarray:
    """The tensor `role` `index` of a dump file as a numpy array in its host layout where known.

    The bytes are mapped, not read: a header-plus-bytes file is mapped once and the array views the map. With
    `widen`, a float16 tensor in a device format comes back as float32.

    Raises
    ------
    DumpFormatError
        If the file has no such tensor, holds no bytes for it, or its dtype cannot be decoded.
    """
    merged = merged_output(path, index) if role == "output" else None
    if merged is not None:
        array, desc = merged
        return to_host(array, desc, np.float32 if widen and array.dtype == np.float16 else None)
    name, desc, raw = _tensor_bytes(path, role, index)
    return tensor_array(raw, desc, source=name, widen=widen)


def read_dump_elements(path: str | os.PathLike[str], role: str, index: int) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """The elements of tensor `role` `index` of a dump file, in no particular order, and the shape
    `read_dump_tensor` gives it: what its statistics need, without turning a device format back
    (`graphcmp.core.device_formats.original_elements`: views of the mapped bytes, padding left out).

    Raises
    ------
    DumpFormatError
        As `read_dump_tensor`.
    """
    merged = merged_output(path, index) if role == "output" else None
    if merged is not None:
        host = to_host(*merged)
        return [host], tuple(host.shape)
    name, desc, raw = _tensor_bytes(path, role, index)
    array = _device_array(raw, desc, name)
    fmt = format_name(desc.format)
    target = desc.original_shape
    if fmt in HOST_FORMATS or not target or 0 in array.shape:
        host = to_host(array, desc)
        return [host], tuple(host.shape)
    try:
        pieces = original_elements(array, fmt, array.shape, target, desc.origin_format or None, desc.sub_format)
    except DeviceFormatError:
        return [array], tuple(array.shape)
    return pieces, tuple(target)


def read_dump_extra(path: str | os.PathLike[str], kind: str, index: int) -> np.ndarray:
    """The raw bytes (uint8, mapped) of buffer or workspace `index` of a dump file; `kind` is ``"buffer"`` or
    ``"workspace"``.

    Raises
    ------
    DumpFormatError
        If the file has no such buffer or workspace, or holds no bytes for it.
    """
    name = os.fspath(path)
    header = _cached_header(name, *_stamp(name))
    extra = next((e for e in header.extras if e.kind == kind and e.index == index), None)
    return _stored_bytes(name, header, extra, kind, index, "buffer" if kind == "buffer" else "space")


def _tensor_bytes(path: str | os.PathLike[str], role: str, index: int) -> tuple[str, TensorDesc, np.ndarray]:
    name = os.fspath(path)
    header = _cached_header(name, *_stamp(name))
    desc = next((t for t in header.tensors if t.role == role and t.index == index), None)
    return name, desc, _stored_bytes(name, header, desc, role, index, role)


def _stored_bytes(name: str, header: DumpHeader, part: TensorDesc | ExtraDesc | None, kind: str, index: int,
                  field: str) -> np.ndarray:
    """The bytes of tensor, buffer or workspace `kind` `index` (`part`, None when the header has none): mapped
    from the file, or the message's `field` (``input``, ``output``, ``buffer``, ``space``) in the whole-protobuf
    layout."""
    if part is None:
        raise DumpFormatError(f"{name}: has no {kind} {index}")
    if part.offset < 0:
        raise DumpFormatError(f"{name}: {kind} {index} holds no data ({part.skipped})")
    if header.layout == "protobuf":
        return _inline(name, field, index)
    try:
        return np.memmap(name, dtype=np.uint8, mode="r", offset=part.offset, shape=(part.size,)).view(np.ndarray)
    except (OSError, ValueError) as err:
        raise DumpFormatError(f"{name}: cannot map {kind} {index} ({err})") from err


def _stamp(name: str) -> tuple[int, int]:
    try:
        st = os.stat(name)
    except OSError as err:
        raise DumpFormatError(f"{name}: cannot read ({err})") from err
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=64)
def _cached_header(name: str, _mtime: int, _size: int) -> DumpHeader:
    return _read_header(name)


def _inline(name: str, field: str, index: int) -> np.ndarray:
    with open_regular(name) as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        message = _parse(bytes(data))
    if message is None:
        raise DumpFormatError(f"{name}: not a DumpData message any more (changed while read?)")
    return np.frombuffer(getattr(message, field)[index].data, np.uint8)


def tensor_array(raw: np.ndarray, desc: TensorDesc, *, source: str = "<bytes>", widen: bool = False) -> np.ndarray:
    """Decode a tensor's bytes into an array: its dtype, its device shape, then its host layout.

    The host layout comes from `graphcmp.core.device_formats` when that module knows the format, and a
    device shape stays as dumped otherwise (the caller's shape check says so).

    Raises
    ------
    DumpFormatError
        If the dtype cannot be decoded or the bytes do not fill the shape.
    """
    array = _device_array(raw, desc, source)
    return to_host(array, desc, np.float32 if widen and array.dtype == np.float16 else None)


def _device_array(raw: np.ndarray, desc: TensorDesc, source: str) -> np.ndarray:
    """The tensor's bytes decoded, in its device shape."""
    flat = _decode(raw, desc, source)
    shape = desc.shape or ((flat.size,) if flat.size else ())
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if 0 in shape:
        return np.zeros(shape, flat.dtype)
    if flat.size < count:
        raise DumpFormatError(f"{source}: {desc.role} {desc.index} holds {flat.size} values, its shape "
                              f"{list(shape)} needs {count}")
    return flat[:count].reshape(shape)


def to_host(array: np.ndarray, desc: TensorDesc, dtype: type | None = None) -> np.ndarray:
    """`array` (device shape) in the host layout of `desc`: reshaped for host formats, converted back for device
    formats by `graphcmp.core.device_formats`; unchanged when the header records no original shape or the format
    has no inverse (FRACTAL_ZN_LSTM ...: the shape check of the comparison then names it). A group convolution's
    FRACTAL_Z weight is turned back with its `sub_format` (the group count)."""
    fmt = format_name(desc.format)
    target = desc.original_shape
    if fmt in HOST_FORMATS or not target:
        if target and int(np.prod(target, dtype=np.int64)) == array.size:
            return array.reshape(target)
        return array
    try:
        return to_original(array, fmt, array.shape, target, desc.origin_format or None, dtype, desc.sub_format)
    except DeviceFormatError:
        return array


def _decode(raw: np.ndarray, desc: TensorDesc, source: str) -> np.ndarray:
    name = dtype_name(desc.dtype)
    count = int(np.prod(desc.shape, dtype=np.int64)) if desc.shape else -1
    if name in _NUMPY:
        code = np.dtype(_NUMPY[name])
        return raw[: raw.size - raw.size % code.itemsize].view(code)
    if count < 0:
        count = raw.size * 8 // itemsize_bits(desc.dtype)
    try:
        return decode(raw, desc.dtype, count)
    except DumpFormatError as err:
        raise DumpFormatError(f"{source}: {desc.role} {desc.index}: {err}") from err
