"""Choosing the reader for a path: automatic detection, or the format the user names."""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import import_module

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.inputs import check_input, special_entries
from graphcmp.core.records import DumpGraph

__all__ = ["FORMATS", "VIS_SUFFIXES", "detect_format", "read_graph", "reader"]

VIS_SUFFIXES = (".vis", ".vis.gz", ".vis.db", ".vis.db.gz")
"""File name endings of tb-graph-ascend files (msprobe gzips large ones): documents, read by `readers.vis`."""

FORMATS: dict[str, tuple[str, str, str]] = {
    "msprobe": ("msprobe", "sniff", "read_msprobe"),
    "mindspore_dump": ("mindspore_dump", "sniff", "read_mindspore_dump"),
    "ascend_dump": ("ascend_dump", "sniff", "read_ascend_dump"),
    "mindspore_sync": ("mindspore_sync", "sniff", "read_mindspore_sync"),
    "ascend_golden": ("ascend_golden", "sniff", "read_golden"),
    "ge": ("ge", "sniff", "read_ge"),
    "mindspore_ir": ("mindspore_ir", "sniff", "read_mindspore_ir"),
}
"""Format name -> (module under `graphcmp.core.readers`, its sniff, its read). Readers register here;
the first whose sniff accepts a path wins. Modules load when asked for (GE's pulls in protobuf)."""


def reader(name: str) -> tuple[Callable[[str | os.PathLike[str]], bool], Callable[..., DumpGraph]]:
    """(sniff, read) of format `name`."""
    module, sniff, read = FORMATS[name]
    loaded = import_module(f"graphcmp.core.readers.{module}")
    return getattr(loaded, sniff), getattr(loaded, read)


def detect_format(path: str | os.PathLike[str]) -> str:
    """Name of the format of `path`.

    Raises
    ------
    DumpFormatError
        If the path does not exist or no reader recognises it.
    """
    _check_input(path)
    for name in FORMATS:
        if reader(name)[0](path):
            return name
    known = ", ".join(FORMATS)
    raise DumpFormatError(f"{path}: unknown input format (known: {known}); "
                          "for msprobe, point at the rank folder that holds dump.json")


def read_graph(path: str | os.PathLike[str], format: str | None = None) -> DumpGraph:
    """Read one run from `path`, detecting its format unless `format` names it."""
    if format is not None:
        if format not in FORMATS:
            raise DumpFormatError(f"{path}: unknown format {format!r} (known: {', '.join(FORMATS)})")
        _check_input(path)
    return reader(format or detect_format(path))[1](path)


def _check_input(path: str | os.PathLike[str]) -> None:
    """Refuse a path no reader may open: missing, a link loop, a device or FIFO, or a folder holding one.

    Readers open the files of a folder by name; a FIFO or a device among them would block or never end.
    """
    if check_input(path).is_dir() and (special := special_entries(path)):
        raise DumpFormatError(special[0] + (f" (and {len(special) - 1} more)" if len(special) > 1 else ""))
