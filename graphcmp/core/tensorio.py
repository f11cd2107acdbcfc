"""Reading one dumped tensor file (``.npy`` or ``.pt``) into a numpy array, without torch.

msprobe writes each dumped tensor to its own file: ``.pt`` on PyTorch (``torch.save`` of one
tensor, the zip layout of torch >= 1.6) and ``.npy`` on MindSpore. ``read_tensor`` dispatches on
the suffix; ``parse_pt`` decodes a ``.pt`` archive already in memory.

A ``.pt`` file is a zip archive ``<name>/data.pkl`` + ``<name>/data/<key>`` + ``<name>/byteorder``.
``data.pkl`` is a pickle, and unpickling runs whatever callables it names, so it is read here with
a restricted unpickler: the only globals it resolves are torch's tensor rebuild functions, its
storage classes and dtypes and ``collections.OrderedDict``, each mapped to a small numpy stand-in.
Any other global (``os.system``, ``builtins.eval``...) raises ``DumpFormatError`` before anything
runs. Torch itself is never imported.
"""

from __future__ import annotations

import io
import math
import mmap
import os
import pickle
import pickletools
import struct
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.inputs import INFLATE_RATIO_LIMIT, open_regular, regular_file, split_tensor_part

__all__ = ["TENSOR_SUFFIXES", "is_tensor_file", "parse_pt", "read_tensor"]


TENSOR_SUFFIXES = (".npy", ".pt")
"""File suffixes ``read_tensor`` can read, lower case."""

# torch dtype name -> little-endian numpy dtype. bfloat16 has no numpy dtype: see _storage_array.
_NUMPY_DTYPES = {
    "float64": "<f8", "float32": "<f4", "float16": "<f2",
    "int64": "<i8", "int32": "<i4", "int16": "<i2", "int8": "i1",
    "uint64": "<u8", "uint32": "<u4", "uint16": "<u2", "uint8": "u1",
    "bool": "?", "complex128": "<c16", "complex64": "<c8",
}
_ITEMSIZES = {name: np.dtype(code).itemsize for name, code in _NUMPY_DTYPES.items()} | {"bfloat16": 2}

# Legacy typed storage classes (``torch.FloatStorage``...) as written by torch.save -> torch dtype name.
_STORAGE_DTYPES = {
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
    "ComplexDoubleStorage": "complex128", "ComplexFloatStorage": "complex64",
}
_PICKLE_ERRORS = (
    pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
    IndexError, KeyError, OverflowError, struct.error, RecursionError,
)
# ValueError: bad seek offsets or undecodable member names in a damaged central directory.
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError)


@dataclass(frozen=True, slots=True)
class _DType:
    """Stand-in for a ``torch.<dtype>`` global such as ``torch.float32``."""

    name: str


@dataclass(frozen=True, slots=True)
class _StorageType:
    """Stand-in for a storage class; ``dtype`` is "uint8" for ``UntypedStorage`` (raw bytes)."""

    dtype: str


@dataclass(frozen=True, slots=True)
class _Storage:
    """The bytes of one ``data/<key>`` record and the dtype its storage type declares."""

    raw: bytes | memoryview
    dtype: str


def is_tensor_file(path: str | os.PathLike[str]) -> bool:
    """Return True if `path` has a suffix that `read_tensor` can read.

    Only the name is looked at: the file is not opened and need not exist.

    Parameters
    ----------
    path : str or os.PathLike
        A file name or path.

    Examples
    --------
    >>> is_tensor_file("dump_tensor_data/Functional.conv2d.0.forward.output.0.pt")
    True
    >>> is_tensor_file("step0/rank0/dump.json")
    False
    """
    return os.path.splitext(os.fspath(path))[1].lower() in TENSOR_SUFFIXES


def read_tensor(path: str | os.PathLike[str]) -> np.ndarray:
    """Read one dumped tensor file into a numpy array, dispatching on its suffix.

    ``.npy`` files are memory-mapped read-only (``allow_pickle=False``); ``.pt`` files are decoded
    by `parse_pt` without importing torch. bfloat16 tensors come back as float32 (exactly), every
    other dtype unchanged. The array may be read-only: copy it before writing to it.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npy`` or ``.pt`` file (suffix case-insensitive).

    Returns
    -------
    numpy.ndarray
        The tensor, with its dumped shape (0-d for scalars).

    Raises
    ------
    DumpFormatError
        If the suffix is neither ``.npy`` nor ``.pt``, or the file is missing, unreadable,
        truncated, corrupt, or (for ``.pt``) holds anything but one plain tensor.

    See Also
    --------
    parse_pt : decode a ``.pt`` archive held in memory.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "out.npy"
    >>> np.save(path, np.arange(6, dtype=np.float32).reshape(2, 3))
    >>> read_tensor(path)
    array([[0., 1., 2.],
           [3., 4., 5.]], dtype=float32)
    """
    name = os.fspath(path)
    file, part = split_tensor_part(name)
    if part.startswith(("input.", "output.")):
        from graphcmp.core.readers.ascend_file import read_dump_tensor  # see tests/test_layers.py: LAZY_IMPORTS

        role, _, index = part.partition(".")
        return read_dump_tensor(file, role, int(index))
    if part.startswith("h5:"):
        from graphcmp.core.readers.pytorch_h5 import read_h5_tensor  # see tests/test_layers.py: LAZY_IMPORTS

        return read_h5_tensor(file, part[3:])
    if part.startswith("host="):
        from graphcmp.core.readers.mindspore_sync import read_bin_tensor  # see tests/test_layers.py: LAZY_IMPORTS

        return read_bin_tensor(file, tuple(int(d) for d in part[5:].split(",") if d))
    if part:
        return _reshaped(read_tensor(file), part, file)
    suffix = os.path.splitext(name)[1].lower()
    if suffix == ".bin" and "_shape_" in os.path.basename(name):  # a MindSpore synchronous dump file
        from graphcmp.core.readers.mindspore_sync import read_bin_tensor  # see tests/test_layers.py: LAZY_IMPORTS

        return read_bin_tensor(name)
    if suffix == ".npy":
        return _read_npy(name)
    if suffix == ".pt":
        return _read_pt(name)
    raise DumpFormatError(f"{name}: cannot read a tensor from a '{suffix}' file; expected .npy or .pt")


def _reshaped(array: np.ndarray, part: str, name: str) -> np.ndarray:
    """`array` seen through a ``shape=`` or ``perm=`` part of a tensor reference (see `split_tensor_part`)."""
    kind, _, text = part.partition("=")
    numbers = tuple(int(d) for d in text.split(",") if d)
    if kind == "perm":
        if sorted(numbers) != list(range(array.ndim)):
            raise DumpFormatError(f"{name}: a {array.ndim}-D tensor cannot be read with its axes as {list(numbers)}")
        return array.transpose(numbers)
    if math.prod(numbers) != array.size:
        raise DumpFormatError(f"{name}: holds {array.size} values, cannot be read as shape {list(numbers)}")
    return array.reshape(numbers)


def parse_pt(data: bytes, name: str = "<bytes>") -> np.ndarray:
    """Decode the bytes of a ``torch.save`` zip archive holding one tensor, without torch.

    Parameters
    ----------
    data : bytes
        The whole content of a ``.pt`` file.
    name : str, optional
        What to call the data in error messages. Defaults to ``"<bytes>"``.

    Returns
    -------
    numpy.ndarray
        The tensor; bfloat16 is widened to float32, strided views are made contiguous.

    Raises
    ------
    DumpFormatError
        If `data` is not a zip archive (the legacy pre-1.6 format is named as such), lacks
        ``data.pkl`` or a storage record, is big-endian, truncated or corrupt, or its pickle
        names a global other than torch's tensor-rebuilding ones (nothing named is ever called).

    Examples
    --------
    >>> parse_pt(b"\\x80\\x02\\x8a\\x0al\\xfc\\x9cF\\xf9 j\\xa8P\\x19.", name="old.pt")
    Traceback (most recent call last):
    ...
    graphcmp.core.errors.DumpFormatError: old.pt: legacy (non-zip) torch.save format is not supported; \
re-save the tensor with torch >= 1.6 and the default _use_new_zipfile_serialization=True
    """
    return _load_pt(io.BytesIO(data), name)


def _read_npy(name: str) -> np.ndarray:
    # open_memmap reads only the .npy format (never a pickle or an .npz) and maps the data lazily.
    regular_file(name)  # a FIFO or a device named .npy would block the read or never end
    try:
        array = np.lib.format.open_memmap(name, mode="r")
    except FileNotFoundError as err:
        raise DumpFormatError(f"{name}: no such file") from err
    except (ValueError, OSError, EOFError) as err:
        message = f"{name}: not a readable .npy file ({err}); it is corrupt or truncated"
        raise DumpFormatError(message) from err
    return array.view(np.ndarray)  # a plain array; it keeps the read-only mapping alive


def _read_pt(name: str) -> np.ndarray:
    if not os.path.lexists(name):
        raise DumpFormatError(f"{name}: no such file")
    try:
        with open_regular(name) as file:
            return _load_pt(file, name, _mapped(file))
    except OSError as err:
        raise DumpFormatError(f"{name}: cannot be read: {err}") from err


def _mapped(file: IO[bytes]) -> mmap.mmap | None:
    """The file mapped read-only, its pages loaded now (``MAP_POPULATE``: by the thread reading ahead, not by the
    one measuring); None if it cannot be mapped (empty, or not a mappable file: it is then read with zipfile)."""
    try:
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return mmap.mmap(file.fileno(), 0, flags=flags, prot=mmap.PROT_READ)
    except (OSError, ValueError, AttributeError):  # AttributeError: no MAP_SHARED/PROT_READ (Windows)
        return None


def _load_pt(file: IO[bytes], name: str, mapped: mmap.mmap | None = None) -> np.ndarray:
    try:
        with zipfile.ZipFile(file) as archive:
            return _load_archive(archive, name, mapped)
    except _ZIP_ERRORS as err:
        raise DumpFormatError(_not_a_zip_message(file, name, err)) from err


def _not_a_zip_message(file: IO[bytes], name: str, err: Exception) -> str:
    file.seek(0)
    if file.read(2) == b"\x80\x02":  # a bare pickle: what torch.save wrote before 1.6
        return (f"{name}: legacy (non-zip) torch.save format is not supported; re-save the tensor with "
                "torch >= 1.6 and the default _use_new_zipfile_serialization=True")
    return f"{name}: not a readable PyTorch zip archive ({err}); the file is corrupt or truncated"


def _load_archive(archive: zipfile.ZipFile, name: str, mapped: mmap.mmap | None = None) -> np.ndarray:
    names = archive.namelist()
    prefix = names[0].split("/")[0] + "/" if names else ""
    if prefix + "data.pkl" not in names:
        raise DumpFormatError(f"{name}: no '<archive>/data.pkl' record; not a file written by torch.save")
    if prefix + "byteorder" in names:  # absent in archives of torch < 1.10, which were little-endian
        byteorder = bytes(_stored_member(archive, prefix + "byteorder", name, None, mapped))
        byteorder = byteorder.decode("ascii", "replace").strip()
        if byteorder != "little":
            raise DumpFormatError(f"{name}: byte order is '{byteorder:.20}'; only little-endian .pt files "
                                  "can be read, re-save it on a little-endian machine")
    pickled = bytes(_stored_member(archive, prefix + "data.pkl", name, None, mapped))
    try:
        for _ in pickletools.genops(pickled):  # validate lengths first: no allocation on a corrupt one
            pass
        result = _TensorUnpickler(io.BytesIO(pickled), archive, prefix, name, mapped).load()
    except _PICKLE_ERRORS as err:
        raise DumpFormatError(f"{name}: corrupt data.pkl: {type(err).__name__}: {err}") from err
    if not isinstance(result, np.ndarray):
        raise DumpFormatError(f"{name}: holds a {type(result).__name__}, expected a single tensor")
    return result


class _TensorUnpickler(pickle.Unpickler):
    """Unpickler resolving only what rebuilds a tensor; storages are read from the archive."""

    def __init__(self, file: IO[bytes], archive: zipfile.ZipFile, prefix: str, name: str,
                 mapped: mmap.mmap | None = None) -> None:
        super().__init__(file)
        self._archive, self._prefix, self._name, self._mapped = archive, prefix, name, mapped
        self._storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str) -> Any:
        found = _allowed_global(module, name)
        if found is None:
            raise DumpFormatError(f"{self._name}: refused to load '{module}.{name}': "
                                  "only tensors can be read from .pt files")
        return found

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType)):
            raise DumpFormatError(f"{self._name}: unexpected persistent id {pid!r:.80}; "
                                  "expected ('storage', storage_type, key, location, numel)")
        _, storage_type, key, _location, numel = pid
        key, numel = str(key), int(numel)
        if numel < 0:
            raise ValueError(f"storage '{key}' declares {numel} elements")
        if key not in self._storages:
            self._storages[key] = self._read_storage(key, storage_type.dtype, numel)
        return self._storages[key]

    def _read_storage(self, key: str, dtype: str, numel: int) -> _Storage:
        record, nbytes = f"{self._prefix}data/{key}", numel * _ITEMSIZES[dtype]
        try:
            raw = _stored_member(self._archive, record, self._name, nbytes, self._mapped)
        except KeyError as err:
            raise DumpFormatError(f"{self._name}: storage record '{record}' is missing") from err
        if len(raw) < nbytes:
            raise DumpFormatError(f"{self._name}: storage record '{record}' holds {len(raw)} bytes, "
                                  f"expected {nbytes} ({numel} x {dtype}); the file is truncated")
        return _Storage(raw, dtype)


def _member(archive: zipfile.ZipFile, record: str, name: str, size: int | None = None) -> bytes:
    """The bytes of one archive member (`size` of them when given), read within what the archive allows.

    torch.save stores members uncompressed, so a member holds at most its stored size; a compressed one
    may inflate to `INFLATE_RATIO_LIMIT` times its compressed size (see core/inputs.py). A storage that
    declares more bytes than that, or than its member declares, is refused before anything is read.
    """
    info = archive.getinfo(record)
    allowed = info.compress_size if info.compress_type == zipfile.ZIP_STORED else \
        INFLATE_RATIO_LIMIT * max(info.compress_size, 1)
    wanted = info.file_size if size is None else min(size, info.file_size)  # fewer: the caller says truncated
    if wanted > allowed:
        raise DumpFormatError(f"{name}: record '{record}' would inflate {info.compress_size} bytes to {wanted}, "
                              f"more than {INFLATE_RATIO_LIMIT} times; torch.save writes no such file (a "
                              "compression bomb?)")
    with archive.open(record) as member:
        return member.read(wanted)  # never more than declared: no zip-bomb inflation


def _stored_member(archive: zipfile.ZipFile, record: str, name: str, size: int | None,
                   mapped: mmap.mmap | None) -> bytes | memoryview:
    """`_member`, read in place from the mapped file when the member is stored uncompressed (as torch.save
    writes them): a view of the page cache instead of a copy.

    The CRC-32 of a member read in place is not checked, as ``torch.load`` does not check it: ``torch.save`` may
    write none (``torch.serialization.set_crc32_options(False)`` writes 0, and torch loads the file), and
    checking it cost a third of the reading (zlib's CRC-32 runs at 1-2.5 GB/s here, against 5 GB/s for mapping
    the pages). Sizes and offsets are checked: a truncated file is still refused.
    """
    info = archive.getinfo(record)
    if mapped is None or info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:  # 0x1: encrypted
        return _member(archive, record, name, size)
    header = info.header_offset
    if mapped[header:header + 4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header of record '{record}'")
    name_length, extra_length = struct.unpack_from("<HH", mapped, header + 26)
    start = header + 30 + name_length + extra_length
    end = start + info.compress_size
    if end > len(mapped):
        raise DumpFormatError(f"{name}: record '{record}' runs past the end of the file; the file is truncated")
    wanted = info.file_size if size is None else min(size, info.file_size)
    return memoryview(mapped)[start:min(end, start + wanted)]


def _allowed_global(module: str, name: str) -> Any:
    """Return the stand-in for an allowed pickle global, or None to refuse it."""
    if (module, name) in _REBUILDERS:
        return _REBUILDERS[module, name]
    if module == "torch" and name in _STORAGE_DTYPES:
        return _StorageType(_STORAGE_DTYPES[name])
    if module in ("torch", "torch.storage") and name == "UntypedStorage":
        return _StorageType("uint8")
    if module == "torch" and name in _ITEMSIZES:
        return _DType(name)
    return None


def _rebuild_tensor(storage: _Storage, offset: int, size: tuple[int, ...],
                    stride: tuple[int, ...]) -> np.ndarray:
    if not isinstance(storage, _Storage):
        raise TypeError(f"tensor storage is a {type(storage).__name__}, expected a persistent storage")
    return _strided(_storage_array(storage.raw, storage.dtype), offset, size, stride)


def _rebuild_tensor_v2(storage: _Storage, offset: int, size: tuple[int, ...], stride: tuple[int, ...],
                       *_flags: Any) -> np.ndarray:
    return _rebuild_tensor(storage, offset, size, stride)  # requires_grad, hooks, metadata: unused


def _rebuild_tensor_v3(storage: _Storage, offset: int, size: tuple[int, ...], stride: tuple[int, ...],
                       _requires_grad: Any, _hooks: Any, dtype: _DType, *_metadata: Any) -> np.ndarray:
    if not (isinstance(storage, _Storage) and isinstance(dtype, _DType)):
        raise TypeError("_rebuild_tensor_v3 expects a persistent storage and a torch dtype")
    return _strided(_storage_array(storage.raw, dtype.name), offset, size, stride)


def _rebuild_parameter(data: np.ndarray, *_flags: Any) -> np.ndarray:
    return data  # nn.Parameter: the tensor itself; requires_grad, hooks and state are dropped


_REBUILDERS: dict[tuple[str, str], Callable[..., Any]] = {
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_tensor_v3"): _rebuild_tensor_v3,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("collections", "OrderedDict"): OrderedDict,
}


def _storage_array(raw: bytes, dtype: str) -> np.ndarray:
    """View `raw` as a flat array of torch dtype `dtype`; bfloat16 becomes float32 exactly."""
    if dtype == "bfloat16":
        bits = np.frombuffer(raw, dtype="<u2", count=len(raw) // 2)
        return (bits.astype("<u4") << 16).view("<f4")  # bf16 is the high half of a float32
    code = np.dtype(_NUMPY_DTYPES[dtype])
    return np.frombuffer(raw, dtype=code, count=len(raw) // code.itemsize)


def _strided(flat: np.ndarray, offset: int, size: tuple[int, ...], stride: tuple[int, ...]) -> np.ndarray:
    """Apply torch's (storage_offset, size, stride) to a flat storage, bounds-checked first."""
    offset, size, stride = int(offset), tuple(map(int, size)), tuple(map(int, stride))
    if len(size) != len(stride) or min((offset, *size, *stride)) < 0:
        raise ValueError(f"invalid tensor geometry: offset {offset}, size {size}, stride {stride}")
    if 0 in size:
        return np.zeros(size, dtype=flat.dtype)
    count = math.prod(size)
    if count > flat.size:
        raise ValueError(f"tensor of size {size} holds {count} elements over a storage of {flat.size} "
                         f"(stride {stride}: a broadcast view); msprobe dumps whole tensors")
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= flat.size:
        raise ValueError(f"tensor (offset {offset}, size {size}, stride {stride}) overruns "
                         f"its storage of {flat.size} elements")
    view = as_strided(flat[offset:], shape=size, strides=[s * flat.itemsize for s in stride], writeable=False)
    return view if view.flags.c_contiguous else view.copy()
