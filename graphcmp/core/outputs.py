"""Output paths and writes: a path is refused when empty or when it would change something the user
gave, and every file is written under a temporary name and renamed when complete."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from graphcmp.core.errors import OutputError

__all__ = ["atomic_output", "atomic_path", "checked_output", "write_atomic"]


def checked_output(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """`path` as a Path, after checking it is a name and lies outside every input.

    Writing over an input file, or into an input folder (an msprobe dump folder with an extra
    file is refused by msprobe itself), would modify what the user gave.

    Raises
    ------
    OutputError
        If `path` is empty or is, or lies inside, one of `inputs`.

    Examples
    --------
    >>> checked_output("cmp.json", ["npu", "bench"]).name
    'cmp.json'
    >>> checked_output("npu/cmp.json", ["npu"])
    Traceback (most recent call last):
    graphcmp.core.errors.OutputError: npu/cmp.json: lies inside the input npu; write the result elsewhere
    """
    text = os.fspath(path)
    if not text.strip() or not Path(text).name:
        raise OutputError(f"{text!r}: not a file name; give the output with -o NAME")
    target = Path(text).resolve()
    for given in inputs:
        source = Path(given).resolve()
        if target == source:
            raise OutputError(f"{text}: is the input {os.fspath(given)}; write the result elsewhere")
        if source in target.parents:
            raise OutputError(f"{text}: lies inside the input {os.fspath(given)}; write the result elsewhere")
    return Path(text)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary ``<path>.part`` to write, renamed to `path` once the block completes.

    A failed or interrupted write removes the temporary file and never leaves a half file under
    `path`; an `OSError` becomes an `OutputError` naming `path`.
    """
    path = checked_output(path)
    tmp = path.with_name(path.name + ".part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        tmp.replace(path)
    except OSError as err:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot write ({err.strerror})") from err
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A buffered binary file written under ``<path>.part`` and renamed to `path` once complete."""
    with atomic_path(path) as tmp, tmp.open("wb", buffering=1 << 20) as f:
        yield f


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` through `atomic_output`."""
    with atomic_output(path) as f:
        f.write(data)
