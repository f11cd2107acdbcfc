"""A result as graphcmp's annotated JSON document (docs/format.md): the export of an npz result, or a copy.

`graphcmp compare` writes the npz container by default; the JSON document holds the same fields
(the schema in graphcmp/data/report.schema.json) for tools that read JSON, and reads back into the
same report.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from graphcmp._version import __version__
from graphcmp.core.export.vis import ExportResult
from graphcmp.core.records import DumpGraph
from graphcmp.core.report import CompareReport, save_graph, save_report

__all__ = ["write_json"]


def write_json(document: CompareReport | DumpGraph, path: str | os.PathLike[str]) -> ExportResult:
    """Write a comparison (or one run) as graphcmp's JSON document at `path`, whatever its name.

    Raises
    ------
    OutputError
        If the file cannot be written.
    """
    start = time.perf_counter()
    if isinstance(document, CompareReport):
        save_report(document, path, format="json")
        nodes = len(document.npu) + len(document.bench)
    else:
        save_graph(document, path, __version__, format="json")
        nodes = len(document)
    return ExportResult((str(path),), nodes, Path(path).stat().st_size, time.perf_counter() - start)
