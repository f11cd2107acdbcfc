"""The table view: msprobe's compare result table of the result shown, sortable and filterable, a page at a time.

The rows are those of `graphcmp.core.export.table.compare_table` (the CSV / xlsx export's rows: one per npu
tensor in execution order, msprobe's columns for the task mode, then graphcmp's verdict, role, margin, cause
and call site), made once per result and kept with its view model. The browser holds one page of `PAGE_SIZE`
rows: sorting (``sort_by``) and filtering (``filter_query``, the DataTable's syntax: ``{Verdict} = error &&
{MaxRelativeErr} > 1``; msprobe's percentages ``12.5%`` compare and sort as 12.5) run here over the whole
table with numpy, so a result of millions of tensors is browsed like a small one. Error rows are red and warning
rows yellow, as msprobe's xlsx colours them; clicking a cell selects that tensor's node in the panes (``row_id``
is the npu tensor row).
"""

from __future__ import annotations

import re
import threading

import numpy as np
from dash import dash_table

from graphcmp.app.model import ViewModel
from graphcmp.core.export.table import STACK_COLUMN, CompareTable, compare_table

__all__ = ["PAGE_SIZE", "TableColumns", "parse_filter", "ready_table", "table_columns", "table_component",
           "table_page"]

PAGE_SIZE = 50
_HIDDEN = {STACK_COLUMN}  # the whole stack: the call site column names the user's line of it
_CLAUSE = re.compile(r"\s*\{(?P<col>[^}]+)\}\s*(?P<op>scontains|icontains|contains|s=|i=|!=|>=|<=|=|>|<|eq|ne|gt|"
                     r"lt|ge|le)\s*(?P<value>\"[^\"]*\"|'[^']*'|`[^`]*`|[^&|]*?)\s*$")
_OPS = {"eq": "=", "s=": "=", "i=": "=", "ne": "!=", "gt": ">", "lt": "<", "ge": ">=", "le": "<=",
        "scontains": "contains", "icontains": "contains"}


class TableColumns:
    """The table of one result as the view sorts and filters it: a column's cells as numbers (NaN where a cell is
    not one) and as lower-case text, each made the first time a sort or a filter needs that column."""

    def __init__(self, table: CompareTable) -> None:
        self.table = table
        self.names = tuple(n for n in table.names if n not in _HIDDEN)
        self.highlight = table.highlights()
        self._number: dict[str, np.ndarray] = {}
        self._text: dict[str, np.ndarray] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def number(self, name: str) -> np.ndarray:
        if name not in self._number:
            cells = self.table.column(name)
            self._number[name] = np.fromiter((_number(c) for c in cells), np.float64, len(cells))
        return self._number[name]

    def text(self, name: str) -> np.ndarray:
        if name not in self._text:
            self._text[name] = np.array([_text(c).lower() for c in self.table.column(name)], dtype=object)
        return self._text[name]

    def numeric(self, name: str) -> bool:
        """True when some cell of the column is a number."""
        return any(_number(c) == _number(c) for c in self.table.column(name)[:1000])


def _number(cell: object) -> float:
    """A cell's value as a number: a number as is, msprobe's ``12.5%`` as 12.5; NaN for any other text.

    >>> _number(0.5), _number("12.5%"), _number("N/A") != _number("N/A"), _number(True) != _number(True)
    (0.5, 12.5, True, True)
    """
    if type(cell) is float or type(cell) is int:
        return float(cell)
    if isinstance(cell, str) and cell.endswith("%"):
        try:
            return float(cell[:-1])
        except ValueError:
            return np.nan
    return np.nan


class _Making:
    """The table of one result being made in a thread of its own (a million-node result's table takes tens of
    seconds: the page keeps answering meanwhile)."""

    def __init__(self, model: ViewModel) -> None:
        self.done = threading.Event()
        self.value: TableColumns | None = None
        self.error: BaseException | None = None
        threading.Thread(target=self._make, args=(model,), name="graphcmp-table", daemon=True).start()

    def _make(self, model: ViewModel) -> None:
        try:
            self.value = TableColumns(compare_table(model.report))
        except Exception as err:
            self.error = err
        finally:
            self.done.set()


def ready_table(model: ViewModel) -> TableColumns | None:
    """The table of a comparison's result when it is made; None while it is being made (the first call starts it).

    Raises
    ------
    Exception
        Whatever making the table raised.
    """
    making = model.keep(("compare_table",), lambda: _Making(model))
    if not making.done.is_set():
        return None
    if making.error is not None:
        raise making.error
    return making.value


def table_columns(model: ViewModel, timeout: float | None = None) -> TableColumns:
    """The table of a comparison's result, waiting for it to be made (started on first use, kept with the model)."""
    making = model.keep(("compare_table",), lambda: _Making(model))
    making.done.wait(timeout)
    table = ready_table(model)
    if table is None:
        raise TimeoutError("the table is still being made")
    return table


def _text(cell: object) -> str:
    if isinstance(cell, float):
        return f"{cell:.6g}"
    return str(cell)


def parse_filter(query: object) -> list[tuple[str, str, str]]:
    """The clauses (column, operator, value) of a DataTable ``filter_query``; a clause not understood is left out.

    >>> parse_filter('{Verdict} = error && {MaxRelativeErr} > 0.01 && {NPU Name} contains "linear"')
    [('Verdict', '=', 'error'), ('MaxRelativeErr', '>', '0.01'), ('NPU Name', 'contains', 'linear')]
    >>> parse_filter("{a} scontains x && nonsense"), parse_filter(None)
    ([('a', 'contains', 'x')], [])
    """
    if not isinstance(query, str):
        return []
    out = []
    for part in query.split("&&"):
        found = _CLAUSE.match(part)
        if found is None:
            continue
        value = found["value"]
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
            value = value[1:-1]
        out.append((found["col"], _OPS.get(found["op"], found["op"]), value))
    return out


def _mask(cols: TableColumns, clauses: list[tuple[str, str, str]]) -> np.ndarray:
    keep = np.ones(len(cols.table), bool)
    for name, op, value in clauses:
        if name not in cols:
            continue
        try:
            number = float(value)
        except ValueError:
            number = None
        wanted = value.lower()
        if op == "contains":
            keep &= np.fromiter((wanted in t for t in cols.text(name)), bool, len(keep))
        elif op in ("=", "!=") and number is None:
            equal = cols.text(name) == wanted
            keep &= equal if op == "=" else ~equal
        elif number is not None:
            x = cols.number(name)
            with np.errstate(invalid="ignore"):
                keep &= {"=": x == number, "!=": x != number, ">": x > number, "<": x < number,
                         ">=": x >= number, "<=": x <= number}[op]
    return keep


def _order(cols: TableColumns, rows: np.ndarray, sort_by: object) -> np.ndarray:
    """`rows` sorted by the DataTable's ``sort_by`` (numbers by value, then texts; a text-only column by text)."""
    if not isinstance(sort_by, list):
        return rows
    for spec in reversed(sort_by):  # the first key last: stable sorts make it the primary one
        name = spec.get("column_id") if isinstance(spec, dict) else None
        if name not in cols:
            continue
        descending = spec.get("direction") == "desc"
        number = cols.number(name)[rows]
        if np.isnan(number).all():
            order = np.argsort(cols.text(name)[rows].astype(str), kind="stable")
            order = order[::-1] if descending else order
        else:
            key = np.where(np.isnan(number), np.inf, -number if descending else number)
            order = np.argsort(key, kind="stable")
        rows = rows[order]
    return rows


def table_page(cols: TableColumns, page: object, sort_by: object, filter_query: object,
               size: int = PAGE_SIZE) -> tuple[list[dict], int, int]:
    """(rows of the page as DataTable records, number of pages, rows that pass the filter)."""
    rows = np.flatnonzero(_mask(cols, parse_filter(filter_query)))
    rows = _order(cols, rows, sort_by)
    pages = max(1, -(-len(rows) // size))
    page = page if isinstance(page, int) and not isinstance(page, bool) and 0 <= page < pages else 0
    shown = rows[page * size:(page + 1) * size]
    records = []
    npu_rows, table = cols.table.npu_rows, cols.table
    for r in shown.tolist():
        record = {name: _cell(table.column(name)[r]) for name in cols.names}
        record["id"] = int(npu_rows[r])
        record["_hl"] = str(cols.highlight[r])
        records.append(record)
    return records, pages, len(rows)


def _cell(cell: object) -> object:
    """A cell as JSON carries it: a finite number as is, inf/NaN and everything else as text."""
    if type(cell) is float or type(cell) is int:
        return cell if np.isfinite(cell) else str(cell)
    return cell if isinstance(cell, str) else str(cell)


def table_component(cols: TableColumns) -> dash_table.DataTable:
    """The DataTable of a result's table (the first page; the table callback serves the others)."""
    data, pages, _ = table_page(cols, 0, None, None)
    numeric = {n for n in cols.names if cols.numeric(n)}
    return dash_table.DataTable(
        id={"type": "ctable", "index": "rows"}, data=data, page_count=pages, page_current=0, page_size=PAGE_SIZE,
        columns=[{"name": n, "id": n, "type": "numeric" if n in numeric else "text"} for n in cols.names],
        page_action="custom", sort_action="custom", sort_mode="multi", filter_action="custom", filter_query="",
        sort_by=[], fixed_rows={"headers": True}, cell_selectable=True,
        style_table={"overflowX": "auto", "minWidth": "100%"},
        style_cell={"fontFamily": "monospace", "fontSize": "11px", "padding": "1px 6px", "maxWidth": "320px",
                    "textAlign": "left",
                    "overflow": "hidden", "textOverflow": "ellipsis", "whiteSpace": "nowrap"},
        style_header={"fontFamily": "sans-serif", "fontWeight": "600", "backgroundColor": "#eceff1"},
        style_data_conditional=[
            {"if": {"filter_query": '{_hl} = "red"'}, "backgroundColor": "#ffcdd2"},
            {"if": {"filter_query": '{_hl} = "yellow"'}, "backgroundColor": "#fff9c4"},
        ],
        tooltip_delay=300, tooltip_duration=None,
    )
