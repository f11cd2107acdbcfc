"""Output paths: refused when empty, or when writing them would change something the user gave."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from graphcmp.core.errors import OutputError

__all__ = ["checked_output"]


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
