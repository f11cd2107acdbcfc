"""Choosing the reader for a path: automatic detection, or the format the user names."""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import import_module

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.inputs import check_input, special_entries
from graphcmp.core.records import DumpGraph

__all__ = ["FORMATS", "VIS_SUFFIXES", "detect_format", "read_graph", "reader", "saved_kind"]

VIS_SUFFIXES = (".vis", ".vis.gz", ".vis.db", ".vis.db.gz")
"""File name endings of tb-graph-ascend files (msprobe gzips large ones): documents, read by `readers.vis`."""

FORMATS: dict[str, tuple[str, str, str]] = {
    "msprobe": ("msprobe", "sniff", "read_msprobe"),
    # a synchronous dump has an execution_order/ folder as a kernel dump has: it goes first (its sniff wants .bin files)
    "mindspore_sync": ("mindspore_sync", "sniff", "read_mindspore_sync"),
    "mindspore_dump": ("mindspore_dump", "sniff", "read_mindspore_dump"),
    "ascend_dump": ("ascend_dump", "sniff", "read_ascend_dump"),
    "ascend_golden": ("ascend_golden", "sniff", "read_golden"),
    "pytorch_h5": ("pytorch_h5", "sniff", "read_pytorch_h5"),
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
    if (document := saved_kind(path)) is not None:
        raise DumpFormatError(f"{path}: is {document}, not a run; open it with graphcmp info, diverge or serve "
                              "(graphcmp compare takes two runs: dump folders or graph files)")
    if os.path.isdir(path):
        raise DumpFormatError(f"{path}: holds no dump (no dump.json, kernel dump or graph file graphcmp reads); "
                              "for msprobe, point at the rank folder that holds dump.json")
    known = ", ".join(FORMATS)
    raise DumpFormatError(f"{path}: unknown input format (known: {known}); "
                          "for msprobe, point at the rank folder that holds dump.json")


_HEAD_BYTES = 4096


def saved_kind(path: str | os.PathLike[str]) -> str | None:
    """What a file that graphcmp or msprobe wrote as a result is ("a graphcmp result file", "a tb-graph-ascend
    file"), from its name and first bytes; None for anything else (a folder, a run, an unknown file)."""
    name = os.fspath(path)
    if name.endswith(VIS_SUFFIXES):
        return "a tb-graph-ascend file (msprobe's .vis/.vis.db)"
    if not os.path.isfile(name):
        return None
    try:
        with open(name, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return None
    name_size = int.from_bytes(head[26:28], "little")  # a zip's first member: its name's length, then the name
    if head.startswith(b"PK\x03\x04") and head[30: 30 + name_size].endswith((b".npy", b".json")):
        return "a graphcmp result file (npz)"
    if head.lstrip().startswith(b"{") and (b'"graphcmp.compare"' in head or b'"graphcmp.graph"' in head):
        return "a graphcmp result file (JSON)"
    return None


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
