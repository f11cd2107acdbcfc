"""msprobe's `compare` result table of a comparison as a CSV or xlsx file (`graphcmp export --to csv|xlsx`).

The rows and cells are `graphcmp.core.export.table.compare_table`'s; this module only spells them as msprobe's
files do. CSV (msprobe's default output, written by ``pandas.DataFrame.to_csv``): UTF-8, a header row, fields
quoted only when they need it, numbers as Python prints them (shortest round-trip), True/False, an infinite
number as `` inf`` / `` -inf`` (msprobe replaces them so that Excel does not read ``#NAME?``). xlsx (msprobe's
``--xlsx``): one sheet of the same cells (sheets ``part_0``, ``part_1`` ... for a table too long for one, as
msprobe splits it), numbers as numbers, an infinity or NaN as text (a spreadsheet holds none), and the row of an
error filled red and of a warning yellow, as msprobe's highlighting did (solid fills FF0000 and FFFF00; the row's
format, so its empty cells too). A text cell is never read as a formula: the xlsx holds it as text, and in the
CSV one that starts with ``=``, ``+``, ``@`` or a tab gets a leading ``'`` (msprobe refuses to write such a
value at all).

Files are written through `graphcmp.core.outputs` (a temporary file renamed when complete).
"""

from __future__ import annotations

import csv
import io
import math
import os
import time
from collections.abc import Iterator

from graphcmp.core.export.table import CompareTable, compare_table, plain_cell
from graphcmp.core.export.vis import ExportResult
from graphcmp.core.outputs import atomic_output, atomic_path
from graphcmp.core.report import CompareReport

__all__ = ["HIGHLIGHT_COLOURS", "SHEET_NAME", "SHEET_ROWS", "csv_cell", "write_csv_table", "write_xlsx_table",
           "xlsx_cell", "xlsx_rows"]

HIGHLIGHT_COLOURS = {"red": "#FF0000", "yellow": "#FFFF00"}
"""Fill of an error row and of a warning row (msprobe's CompareConst.RED ``FFFF0000`` and YELLOW ``FFFF00``)."""
SHEET_NAME = "compare_result"
_FORMULA_STARTS = ("=", "+", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A cell as msprobe's CSV spells it (`csv` writes the result with `str`).

    >>> [csv_cell(v) for v in (0.1, float("inf"), float("-inf"), float("nan"), True, "N/A", "=1+1")]
    [0.1, ' inf', ' -inf', 'Nan', True, 'N/A', "'=1+1"]
    """
    if type(value) is float and not math.isfinite(value):
        return "Nan" if value != value else (" inf" if value > 0 else " -inf")
    if type(value) is str and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


xlsx_cell = plain_cell
"""A cell as the xlsx holds it: a finite number or a bool as it is, an infinity or NaN as text (`plain_cell`)."""


def _spelled(table: CompareTable, spell, start: int = 0, stop: int | None = None) -> Iterator[tuple]:
    """Rows [start, stop) of the table with every cell spelled by `spell` (columns without such cells left as
    they are)."""
    columns = []
    for column in table.columns:
        column = column[start:stop] if start or stop is not None else column
        if any((type(v) is float and not math.isfinite(v)) or (type(v) is str and v.startswith(_FORMULA_STARTS))
               for v in column):
            column = tuple(map(spell, column))
        columns.append(column)
    return zip(*columns)


def xlsx_rows(table: CompareTable, start: int = 0, stop: int | None = None) -> Iterator[tuple]:
    """The rows [start, stop) of `table` with their cells as the xlsx holds them (`xlsx_cell`)."""
    return _spelled(table, xlsx_cell, start, stop)


def write_csv_table(document: CompareReport | CompareTable, path: str | os.PathLike[str]) -> ExportResult:
    """Write msprobe's compare result table of `document` (a report, or its `compare_table`) as CSV.

    Raises
    ------
    OutputError
        If `path` cannot be written (nothing is left under it then).
    """
    start = time.perf_counter()
    table = document if isinstance(document, CompareTable) else compare_table(document)
    with atomic_output(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(table.names)
        writer.writerows(_spelled(table, csv_cell))
        text.flush()
        text.detach()
    return _result(path, len(table), start)


def write_xlsx_table(document: CompareReport | CompareTable, path: str | os.PathLike[str]) -> ExportResult:
    """Write msprobe's compare result table of `document` as an xlsx workbook, error rows red, warnings yellow.

    One sheet ``compare_result``; a table of `SHEET_ROWS` rows or more is split as msprobe splits it, into
    sheets ``part_0``, ``part_1`` ... of equal size (a sheet holds 1,048,576 rows).

    Raises
    ------
    OutputError
        If `path` cannot be written (nothing is left under it then).
    """
    start = time.perf_counter()
    table = document if isinstance(document, CompareTable) else compare_table(document)
    colours = table.highlights().tolist()
    parts = -(-len(table) // SHEET_ROWS) if len(table) >= SHEET_ROWS else 1
    size = -(-len(table) // parts) if len(table) else 0
    bounds = [(i * size, min((i + 1) * size, len(table))) for i in range(parts)]
    sheets = [(SHEET_NAME if parts == 1 else f"part_{i}", lo, hi) for i, (lo, hi) in enumerate(bounds)]
    with atomic_path(path) as tmp:
        _write_xlsx(tmp, table, sheets, colours)
    return _result(path, len(table), start)


SHEET_ROWS = 1_048_500
"""Rows of a sheet from which the table is split into several (msprobe's ``CompareConst.MAX_EXCEL_LENGTH``)."""


def _write_xlsx(path: os.PathLike[str], table: CompareTable, sheets: list[tuple[str, int, int]],
                colours: list[str]) -> None:
    """The sheets (name, first row, end row) of `table`: a header, then the rows streamed as dicts
    (rustpy-xlsxwriter's records), each row whose colour is ``red`` or ``yellow`` filled with it across the row
    (a row format)."""
    import rustpy_xlsxwriter as rx  # lazy: only an xlsx export needs it

    fills = {name: rx.Format().set_background_color(colour.lstrip("#")) for name, colour in HIGHLIGHT_COLOURS.items()}
    names = table.names
    records = [(name, (dict(zip(names, row)) for row in xlsx_rows(table, lo, hi))) for name, lo, hi in sheets]
    formats = {name: {r - lo: fills[colours[r - 1]] for r in range(lo + 1, hi + 1) if colours[r - 1]}
               for name, lo, hi in sheets}
    rx.write_worksheets(records, os.fspath(path), freeze_panes={"general": {"row": 1, "col": 0}},
                        row_formats=formats)


def _result(path: str | os.PathLike[str], rows: int, start: float) -> ExportResult:
    return ExportResult((os.fspath(path),), rows, os.path.getsize(path), time.perf_counter() - start)
