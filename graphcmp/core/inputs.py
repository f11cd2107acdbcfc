"""Opening what the user gave: regular files and folders only, every read bounded by what its format allows.

A FIFO or a device given as an input (``/dev/zero``, a pipe nobody writes) would block a read forever
or feed it without end, so every file is opened without blocking (``O_NONBLOCK``) and checked to be a
regular file before a byte is read; a path that loops through symbolic links is named as such.

Compressed inputs are inflated with a bound. Deflate can inflate 1032-fold, but only data made to
inflate does: the text and SQLite files graphcmp reads inflate at most 38-fold under ``gzip -9``
(msprobe's JSON ``.vis`` files, the highest; GE graph text 9-fold, atc JSON 14-fold, ``.vis.db``
16-fold). Inflating stops past `INFLATE_RATIO_LIMIT` times the compressed size (2.6 times the highest
real ratio; any file may inflate to 1 MiB) with a one-line error: a 3 MB file never becomes gigabytes in
memory or on disk.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from graphcmp.core.errors import DumpFormatError

__all__ = [
    "GZIP_MAGIC",
    "INFLATE_RATIO_LIMIT",
    "check_input",
    "copy_inflated",
    "inflate",
    "open_regular",
    "read_input",
    "regular_file",
    "special_entries",
    "split_tensor_part",
]

_PART = re.compile(r"^(?P<file>.+)#(?P<part>(?:input|output)\.\d+|shape=[\d,]*|perm=[\d,]*|host=[\d,]*|h5:/[^#]*)$")
"""A reference to one tensor of a file: see `split_tensor_part`."""

INFLATE_RATIO_LIMIT = 100
"""Most a compressed input may inflate, as a multiple of its compressed size (see the module notes)."""

GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = zlib.MAX_WBITS | 16
_HARMLESS = 1 << 20  # a small file may inflate to this much whatever its ratio
_CHUNK = 1 << 20
_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    """What a special file is ("" for a regular file or a folder)."""
    return next((name for test, name in _KINDS if test(mode)), "")


def check_input(path: str | os.PathLike[str], *, what: str = "input") -> Path:
    """`path` as a Path once it is known to be an existing regular file or folder.

    Raises
    ------
    DumpFormatError
        If `path` does not exist, loops through symbolic links, cannot be looked at, or is a device,
        a FIFO or a socket.

    Examples
    --------
    >>> check_input("/dev/zero")
    Traceback (most recent call last):
    graphcmp.core.errors.DumpFormatError: /dev/zero: is a character device, not a file or folder; \
graphcmp reads regular files only
    """
    file = Path(path)
    try:
        mode = file.stat().st_mode
    except FileNotFoundError as err:
        dangling = file.is_symlink()
        raise DumpFormatError(f"{file}: {'a symbolic link to nothing' if dangling else 'no such file or folder'}"
                              + (f" ({what})" if what != "input" else "")) from err
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise DumpFormatError(f"{file}: its symbolic links form a loop") from err
        raise DumpFormatError(f"{file}: cannot look at it ({err.strerror or err})") from err
    kind = _kind(mode)
    if kind:
        raise DumpFormatError(f"{file}: is {kind}, not a file or folder; graphcmp reads regular files only")
    return file


def regular_file(path: str | os.PathLike[str], *, what: str = "input") -> Path:
    """`check_input` for a path that must be a file (not a folder)."""
    file = check_input(path, what=what)
    if file.is_dir():
        raise DumpFormatError(f"{file}: is a folder; expected a file" + (f" ({what})" if what != "input" else ""))
    return file


def special_entries(folder: str | os.PathLike[str]) -> list[str]:
    """Lines naming the entries of `folder` that are no regular file or folder (devices, FIFOs, link loops).

    Only the folder itself is looked at (not its subfolders): a reader opens the files it knows by name.
    """
    found = []
    try:
        entries = list(os.scandir(folder))
    except OSError as err:
        raise DumpFormatError(f"{folder}: cannot list it ({err.strerror or err})") from err
    for entry in entries:
        try:
            kind = _kind(entry.stat().st_mode)
        except FileNotFoundError:
            continue  # a dangling link: what it would be is told where it is read
        except OSError as err:
            kind = "a symbolic link loop" if err.errno == errno.ELOOP else ""
        if kind:
            found.append(f"{entry.path}: is {kind}, not a file or folder; graphcmp reads regular files only")
    return found


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a regular file for reading in binary mode, without ever blocking on a FIFO or a device.

    Raises
    ------
    DumpFormatError
        If the file is missing, unreadable, a folder, a link loop, a device, a FIFO or a socket.
    """
    file = Path(path)
    try:
        handle = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as err:
        raise DumpFormatError(f"{file}: file not found") from err
    except IsADirectoryError as err:
        raise DumpFormatError(f"{file}: is a folder; expected a file") from err
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise DumpFormatError(f"{file}: its symbolic links form a loop") from err
        raise DumpFormatError(f"{file}: cannot read ({err.strerror or err})") from err
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            kind = _kind(mode) or "a folder"
            raise DumpFormatError(f"{file}: is {kind}, not a regular file; graphcmp reads regular files only")
        if hasattr(os, "set_blocking"):
            os.set_blocking(handle, True)
        return os.fdopen(handle, "rb")
    except BaseException:
        os.close(handle)
        raise


def read_input(path: str | os.PathLike[str], *, limit: int | None = None, gunzip: bool = True) -> bytes:
    """The bytes of a regular file (inflated when it is gzip and `gunzip`), at most `limit` of them.

    With `limit`, only that many bytes are read (a sniffer's head). Without it, a gzip file
    inflates to at most `INFLATE_RATIO_LIMIT` times its size; beyond that, or when it is not
    whole, `DumpFormatError` names the file.
    """
    with open_regular(path) as f:
        head = f.read(len(GZIP_MAGIC))
        if not (gunzip and head == GZIP_MAGIC):
            rest = f.read(-1 if limit is None else max(limit - len(head), 0))
            return head + rest
        f.seek(0)
        size = os.fstat(f.fileno()).st_size
        return b"".join(_inflated(f, str(path), size, limit))


def inflate(data: bytes, source: str) -> bytes:
    """Inflate gzip `data` held in memory, bounded as `read_input` bounds a file."""
    import io

    return b"".join(_inflated(io.BytesIO(data), source, len(data), None))


def copy_inflated(src: str | os.PathLike[str], dst: BinaryIO) -> int:
    """Inflate the gzip file `src` into `dst` (bounded as `read_input`); return the bytes written."""
    written = 0
    with open_regular(src) as f:
        size = os.fstat(f.fileno()).st_size
        for chunk in _inflated(f, str(src), size, None):
            dst.write(chunk)
            written += len(chunk)
    return written


def _inflated(f: BinaryIO, source: str, size: int, limit: int | None) -> Iterator[bytes]:
    """The inflated chunks of the gzip stream in `f` (members one after another, zero padding between them
    skipped, as gzip itself reads them), at most `limit` bytes or else `INFLATE_RATIO_LIMIT` x `size`."""
    bound = max(INFLATE_RATIO_LIMIT * size, _HARMLESS) if limit is None else limit
    total = 0
    decoder = zlib.decompressobj(_GZIP_WBITS)
    data = b""
    while True:
        if not data:
            data = f.read(_CHUNK)
            if not data:
                break
        if decoder.eof:  # one member ended: another may follow
            data = data.lstrip(b"\0")
            if not data:
                continue
            decoder = zlib.decompressobj(_GZIP_WBITS)
        try:
            out = decoder.decompress(data, bound - total + 1)
        except zlib.error as err:
            raise DumpFormatError(f"{source}: not a readable gzip file ({err})") from err
        data = decoder.unused_data if decoder.eof else decoder.unconsumed_tail
        total += len(out)
        if total > bound:
            if limit is not None:
                yield out[: len(out) - (total - bound)]
                return
            raise DumpFormatError(f"{source}: inflates to more than {INFLATE_RATIO_LIMIT} times its {size} bytes; "
                                  "not a dump or graph file (a compression bomb?)")
        yield out
    if not decoder.eof and limit is None:
        raise DumpFormatError(f"{source}: the gzip file ends early (truncated)")


def split_tensor_part(name: str) -> tuple[str, str]:
    """(file, part) of a tensor reference: ``{file}#{input|output}.{index}`` names one tensor of a file holding
    several (an Ascend raw dump file), ``{file}#shape={d0},{d1}`` a tensor file read as another shape of as many
    elements (a golden tensor where the NPU graph dropped a reshape), ``{file}#perm=0,3,1,2`` one read with its axes
    permuted (an NHWC golden tensor against the NPU's NCHW), ``{file}#h5:/{op}/{seq}/output/{param}`` one dataset of
    an HDF5 dump, ``{file}#host={d0},{d1}`` a MindSpore synchronous dump file in a device format read back into that
    host shape; part is "" for a whole file.

    >>> split_tensor_part("Conv2D.conv.7.0.1741#output.0"), split_tensor_part("a.npy#shape=1,32")
    (('Conv2D.conv.7.0.1741', 'output.0'), ('a.npy', 'shape=1,32'))
    >>> split_tensor_part("a.npy")
    ('a.npy', '')
    """
    m = _PART.match(name)
    return (m["file"], m["part"]) if m else (name, "")
