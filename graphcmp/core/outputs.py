"""Output paths and writes: a path is refused when empty or when it would change something the user
gave, and every file is written under a fresh temporary name next to it and renamed when complete.

The temporary file is created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW`` under a random name,
which never follows a symbolic link and never opens an existing file): a ``<out>.part`` left behind, or
planted as a link to another file, is never written through. Renaming replaces the directory entry
of the target, never the content of a file it linked to; a target that is a device, a FIFO or a
socket is refused, since renaming over it would replace the node itself.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from graphcmp.core.errors import OutputError

__all__ = ["atomic_output", "atomic_path", "checked_folder", "checked_output", "sibling_part", "write_atomic"]

_FILE_SUFFIXES = (".json", ".npz", ".db", ".vis", ".gz", ".yaml", ".yml", ".toml", ".txt", ".csv")
"""Endings of a file name, refused where a results folder is expected (``-o mix.json`` for a job)."""


def checked_output(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str] | None] = ()) -> Path:
    """`path` as a Path, after checking it is a name, lies outside every input and is no special file.

    Writing over an input file, or into an input folder (an msprobe dump folder with an extra
    file is refused by msprobe itself), would modify what the user gave; so would replacing a
    device or a FIFO by a regular file. `inputs` are every file or folder the command reads (the
    runs, thresholds, mapping and matches files); None entries (options not given) are skipped.

    Raises
    ------
    OutputError
        If `path` is empty, is or lies inside one of `inputs`, or names a device, FIFO or socket.

    Examples
    --------
    >>> checked_output("cmp.json", ["npu", "bench", None]).name
    'cmp.json'
    >>> checked_output("npu/cmp.json", ["npu"])
    Traceback (most recent call last):
    graphcmp.core.errors.OutputError: npu/cmp.json: lies inside the input npu; write the result elsewhere
    >>> checked_output("/dev/null")
    Traceback (most recent call last):
    graphcmp.core.errors.OutputError: /dev/null: is a character device, not a file; write the result elsewhere
    """
    text = os.fspath(path)
    if not text.strip() or not Path(text).name:
        raise OutputError(f"{text!r}: not a file name; give the output with -o NAME")
    target = _resolved(text)
    for given in inputs:
        if given is None or not os.fspath(given):
            continue
        try:
            source = Path(given).resolve()
        except (OSError, RuntimeError):  # an input that loops: reading it says so
            continue
        if target == source:
            raise OutputError(f"{text}: is the input {os.fspath(given)}; write the result elsewhere")
        if source in target.parents:
            raise OutputError(f"{text}: lies inside the input {os.fspath(given)}; write the result elsewhere")
    kind = _special_kind(target)
    if kind:
        raise OutputError(f"{text}: is a {kind}, not a file; write the result elsewhere")
    return Path(text)


def checked_folder(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str] | None] = ()) -> Path:
    """`checked_output` for a results folder: also refused when it is a file or is named like one.

    A job of many runs writes one result per run and an index into a folder; ``-o mix.json`` would
    silently become a folder named like a file.

    Examples
    --------
    >>> checked_folder("results", ["npu"]).name
    'results'
    >>> checked_folder("mix.json", ["npu"])
    Traceback (most recent call last):
    graphcmp.core.errors.OutputError: mix.json: the inputs hold many runs, so -o names a results folder \
(one result per step and rank, and index.json), not a file; give a folder name such as -o results
    """
    out = checked_output(path, inputs)
    exists = out.exists() or out.is_symlink()
    if (exists and not out.is_dir()) or (not exists and out.name.lower().endswith(_FILE_SUFFIXES)):
        raise OutputError(f"{os.fspath(path)}: the inputs hold many runs, so -o names a results folder (one result "
                          "per step and rank, and index.json), not a file; give a folder name such as -o results")
    return out


def _resolved(text: str) -> Path:
    try:
        return Path(text).resolve()
    except (OSError, RuntimeError) as err:  # RuntimeError: a symbolic link loop (Python < 3.13)
        raise OutputError(f"{text}: cannot follow this path ({err}); write the result elsewhere") from err


def _special_kind(path: Path) -> str:
    """"" for a missing path, a regular file or a folder, else what it is (a device, a FIFO ...)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return ""
    for test, name in ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return ""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A fresh temporary file next to `path` to write, renamed to `path` once the block completes.

    The temporary file is created exclusively (never through an existing file or link) and is
    named ``.<name>.<random>.part``. A failed or interrupted write removes it and never leaves a
    half file under `path`; an `OSError` becomes an `OutputError` naming `path`.
    """
    with _temporary(path) as (handle, tmp):
        os.close(handle)
        yield tmp


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A buffered binary file written under a fresh temporary name and renamed to `path` once complete."""
    with _temporary(path) as (handle, _), os.fdopen(handle, "wb", buffering=1 << 20) as f:
        yield f


def sibling_part(path: str | os.PathLike[str]) -> Path:
    """A new empty file ``.<name>.<random>.part`` next to `path` (parent folders created), for a caller that writes
    part of `path` there first; the caller removes it."""
    path = checked_output(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = _create(path)
    os.close(handle)
    return tmp


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` through `atomic_output`."""
    with atomic_output(path) as f:
        f.write(data)


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@contextlib.contextmanager
def _temporary(path: str | os.PathLike[str]) -> Iterator[tuple[int, Path]]:
    """(open descriptor, path) of a new file next to `path`, renamed to `path` when the block completes."""
    path = checked_output(path)
    tmp: Path | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = _create(path)
        yield handle, tmp
        if kind := _special_kind(path):  # appeared while writing
            raise OutputError(f"{path}: is a {kind}, not a file; write the result elsewhere")
        _replace(tmp, path)
    except OSError as err:
        _remove(tmp)
        raise OutputError(f"{path}: cannot write ({err.strerror or err})") from err
    except BaseException:
        _remove(tmp)
        raise


FREED_ELSEWHERE_BYTES = 8 << 20
"""A file at least this large that a write replaces is swapped out and freed by a process of its own (`_replace`)."""
_SPAWNED: list[int] = []  # those processes, until reaped
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2  # linux/fcntl.h, linux/fs.h


def _replace(tmp: Path, path: Path) -> None:
    """Rename `tmp` to `path`, at once even when `path` holds a large file.

    Renaming over a file costs the renaming process twice on ext4: the new file's delayed blocks are allocated
    and its writeback started (``auto_da_alloc``, only when the rename replaces a file), and the old file's
    blocks are freed by whoever drops its last reference. A 650 MB result written over an older one took
    0.4-0.85 s so (`bench/bench_replace.py`). Here the two names are swapped atomically instead (``renameat2``
    with ``RENAME_EXCHANGE``, which replaces nothing), the old file is unlinked while this process holds it
    open, and a spawned `true` holding it too drops the last reference as it exits. Where a swap is not
    available (another system, a file system without it) the rename replaces the file as before.
    """
    old = _open_large(path)
    if old is None:
        tmp.replace(path)
        return
    try:
        if _exchange(tmp, path):
            with contextlib.suppress(OSError):  # the result is in place: the old file under `tmp` only wastes space
                tmp.unlink()
        else:
            tmp.replace(path)
    finally:
        _close_elsewhere(old)


def _exchange(tmp: Path, path: Path) -> bool:
    """Swap the files named `tmp` and `path` atomically; False where this system or file system cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    return renameat2(_AT_FDCWD, os.fsencode(tmp), _AT_FDCWD, os.fsencode(path), _RENAME_EXCHANGE) == 0


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    """The C library's ``renameat2`` (Linux, glibc 2.28 or later), else None."""
    import ctypes  # numpy has loaded it already

    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def _open_large(path: Path) -> int | None:
    """A descriptor of the regular file at `path` when it is large and this is its only name, else None."""
    if _true() is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_size >= FREED_ELSEWHERE_BYTES:
        return fd
    os.close(fd)
    return None


def _close_elsewhere(fd: int) -> None:
    """Close `fd` here, with a spawned `true` holding it (as descriptor 3, its output to the null device) so that
    its exit, not this process, drops the last reference; where it cannot be spawned, here."""
    _reap()
    null = [(os.POSIX_SPAWN_OPEN, k, os.devnull, os.O_RDWR, 0) for k in (0, 1, 2)]
    try:
        _SPAWNED.append(os.posix_spawn(_true(), ["true"], {}, file_actions=[*null, (os.POSIX_SPAWN_DUP2, fd, 3)]))
    except OSError:
        pass
    finally:
        os.close(fd)


def _reap() -> None:
    """Collect the spawned processes that have exited (a long-lived process writes many results)."""
    for pid in list(_SPAWNED):
        try:
            done = os.waitpid(pid, os.WNOHANG)[0] != 0
        except ChildProcessError:  # collected by someone else
            done = True
        if done:
            _SPAWNED.remove(pid)


@functools.cache
def _true() -> str | None:
    """The system's ``true`` where processes can be spawned, else None."""
    if not hasattr(os, "posix_spawn"):
        return None
    return next((p for p in ("/bin/true", "/usr/bin/true") if os.access(p, os.X_OK)), None)


def _create(path: Path) -> tuple[int, Path]:
    """Create ``.<name>.<random>.part`` next to `path` exclusively (mode 0666 less the umask, as `open` does)."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{os.urandom(4).hex()}.part")  # secrets' source, not its 8 ms import
        try:
            return os.open(tmp, _CREATE, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path.parent))


def _remove(tmp: Path | None) -> None:
    if tmp is not None:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
