"""msprobe's `compare` result table of a comparison: one row per npu tensor, msprobe's columns for the task mode.

`compare_table` gives the column names and the cells of every row from a `CompareReport` alone (no file is
read): msprobe's columns in msprobe's order and spelling for the run's task mode (statistics, tensor or md5;
facts from msprobe's ``CompareConst`` listed at `MSPROBE_COLUMNS`), then graphcmp's own (`GRAPHCMP_COLUMNS`:
the node's verdict, its role in the noise model, its margin beyond the noise, the cause of an origin and the
user's line in the call stack). The rows follow the npu run's execution order; within a call, inputs, then
parameters, outputs and parameter gradients, as msprobe orders them. An npu tensor without a bench twin has a
row too, its bench cells ``N/A`` (msprobe's ``No bench data matched.``).

Cells are Python values: a number where msprobe writes one (a float, ``inf`` too; an int or a bool where
msprobe's JSON holds one), a str where msprobe writes text (``N/A``, ``Nan``, a relative error as ``12.5%``).
The CSV and xlsx writers (`graphcmp.core.export.table_files`) and the viewer's table read the same
`CompareTable` (`CompareTable.records` gives JSON-safe rows).
"""

from __future__ import annotations

import json.encoder
import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from graphcmp.core.judge import STATUS_NAMES, pair_messages, pair_notes
from graphcmp.core.noise import NodeRole
from graphcmp.core.records import DumpGraph, Role
from graphcmp.core.report import CompareReport
from graphcmp.core.rules import ERROR, WARNING, Status

__all__ = [
    "GRAPHCMP_COLUMNS",
    "MSPROBE_COLUMNS",
    "NA",
    "TASK_MODES",
    "CompareTable",
    "call_site",
    "compare_table",
    "plain_cell",
    "table_mode",
]

UNMATCHED = Status.UNMATCHED
NA = "N/A"
"""msprobe's text for a cell that has no value (``CompareConst.N_A``): no bench twin, a statistic not recorded."""
NAN = "Nan"
"""msprobe's text for a NaN statistic or difference (``CompareConst.NAN``)."""
NO_BENCH = "No bench data matched."
"""msprobe's ``Err_message`` of a row without a bench twin (``CompareConst.NO_BENCH``)."""
REQ_GRAD_MESSAGE = "Requires_grad inconsistent."
"""msprobe's ``Err_message`` of a row whose runs disagree on requires_grad."""

TASK_MODES = ("statistics", "tensor", "md5")
"""graphcmp's task modes, as msprobe's dump modes ``summary``, ``all`` and ``md5``."""

_BASIC = ("NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
          "NPU Requires_grad", "Bench Requires_grad")
_STATS = ("NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm")
_EXTRACT = ("Requires_grad Consistent", "Result", "Err_message")
STACK_COLUMN = "NPU_Stack_Info"
DATA_NAME_COLUMN = "Data_name"

# Facts from msprobe (Ascend/msprobe, python/msprobe/core/common/const.py, class CompareConst, commit 8ff00da3,
# lines 698-756): BASIC_INFO, SUMMARY_COMPARE_INDEX, ALL_COMPARE_INDEX, SUMMARY_INFO and EXTRACT_INDEX make
# HEAD_OF_COMPARE_MODE; stack mode appends NPU_Stack_Info and tensor ("all") mode then Data_name
# (python/msprobe/core/compare/acc_compare.py, make_result_df, lines 1364-1372).
MSPROBE_COLUMNS: dict[str, tuple[str, ...]] = {
    "statistics": (*_BASIC, "Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr",
                   "MeanRelativeErr", "NormRelativeErr", *_STATS, *_EXTRACT),
    "tensor": (*_BASIC, "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
               "Five Thousandths Err Ratio", *_STATS, *_EXTRACT),
    "md5": (*_BASIC, "NPU MD5", "BENCH MD5", *_EXTRACT),
}
"""msprobe's result columns per task mode, without the stack and data-name columns (`compare_table` adds
``NPU_Stack_Info`` when the npu run has stacks, and ``Data_name`` in tensor mode)."""

GRAPHCMP_COLUMNS = ("Verdict", "Role", "Margin", "Cause", "Call Site")
"""graphcmp's columns after msprobe's: the node's verdict (pass, warning, error, skip, unmatched), its role in
the noise model (origin, propagated, within noise, not compared), how many times the noise it allows its
error is, the cause of an origin of divergence and the user's line in its call stack."""

_TENSOR_METRICS = (("cosine", 6), ("euc_rel", None), ("max_abs", 6), ("max_rel", 6), ("one_thousandth", 6),
                   ("five_thousandths", 6))
"""graphcmp's tensor metric behind each of msprobe's tensor columns, and the decimals msprobe rounds it to
(npy_compare.format_value: 6; its Euclidean distance is not rounded). ``euc_rel`` is relative: the table's
EucDist is it times the bench l2norm, msprobe's absolute distance."""
_ROLE_ORDER = np.array([0, 2, 1, 3], np.int64)
"""Place of each `Role` within a call: inputs, parameters, outputs, parameter gradients (msprobe's order)."""
_ROLE_KEY = {int(Role.INPUT): ".input.", int(Role.OUTPUT): ".output.", int(Role.PARAM): ".parameters.",
             int(Role.PARAM_GRAD): "."}
"""What joins a node id and a slot into msprobe's tensor name (a parameter gradient's node id ends in
``parameters_grad`` already)."""
_ROLE_NAMES = {int(r): r.name.lower().replace("_", " ") for r in NodeRole}


@dataclass(frozen=True, slots=True)
class CompareTable:
    """msprobe's result table of a comparison: column names and one tuple of cells per column.

    Attributes
    ----------
    mode : str
        The task mode whose columns these are (``statistics``, ``tensor`` or ``md5``).
    names : tuple of str
        Column names: msprobe's for the mode, then `GRAPHCMP_COLUMNS`.
    columns : tuple of tuple
        The cells of each column, one per row (float, str or bool).
    npu_rows : numpy.ndarray
        The npu tensor row of each table row.
    pairs : numpy.ndarray
        The tensor pair of each row, -1 for an npu tensor without a bench twin.
    levels : numpy.ndarray
        int8 `Status` of each row: its pair's level, ``UNMATCHED`` without a bench twin. Error rows are the ones
        msprobe's highlighting colours red, warning rows yellow (`highlights`).
    msprobe_columns : int
        How many of the columns are msprobe's (the rest are graphcmp's).
    """

    mode: str
    names: tuple[str, ...]
    columns: tuple[tuple, ...]
    npu_rows: np.ndarray
    pairs: np.ndarray
    levels: np.ndarray
    msprobe_columns: int

    def __len__(self) -> int:
        return len(self.npu_rows)

    def rows(self, start: int = 0, stop: int | None = None) -> Iterator[tuple]:
        """The cells of rows [start, stop), a tuple per row in column order."""
        return zip(*(column[start:stop] for column in self.columns))

    def column(self, name: str) -> tuple:
        """The cells of the column `name`."""
        return self.columns[self.names.index(name)]

    def records(self, start: int = 0, stop: int | None = None) -> list[dict[str, object]]:
        """Rows [start, stop) as dicts keyed by column name, every cell JSON-safe (`plain_cell`): what a table
        widget (Dash's DataTable) takes."""
        return [dict(zip(self.names, map(plain_cell, row))) for row in self.rows(start, stop)]

    def highlights(self) -> np.ndarray:
        """Per row ``"red"`` (an error), ``"yellow"`` (a warning) or ``""``: the rows msprobe's xlsx colours."""
        out = np.full(len(self), "", object)
        out[self.levels == WARNING] = "yellow"
        out[self.levels == ERROR] = "red"
        return out


def plain_cell(value: object) -> object:
    """A cell that JSON and a spreadsheet hold: a finite number or a bool as it is, an infinity or NaN as the text
    msprobe writes (``inf``, ``-inf``, ``Nan``).

    >>> [plain_cell(v) for v in (0.1, float("inf"), float("-inf"), float("nan"), False, "x")]
    [0.1, 'inf', '-inf', 'Nan', False, 'x']
    """
    if type(value) is float and not math.isfinite(value):
        return NAN if value != value else ("inf" if value > 0 else "-inf")
    return value


def table_mode(report: CompareReport) -> str:
    """The task mode of a comparison's table: the npu run's (statistics for any other).

    >>> from graphcmp.core.compare import compare_graphs
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> g = parse_msprobe({"task": "md5", "data": {}})
    >>> table_mode(compare_graphs(g, g))
    'md5'
    """
    task = report.npu.info.task
    return task if task in TASK_MODES else "statistics"


def compare_table(report: CompareReport, mode: str | None = None) -> CompareTable:
    """msprobe's `compare` result table of `report`, with graphcmp's columns after msprobe's.

    Parameters
    ----------
    report : CompareReport
        The comparison.
    mode : str, optional
        ``statistics``, ``tensor`` or ``md5``; defaults to the npu run's task mode (`table_mode`).

    Returns
    -------
    CompareTable
        One row per npu tensor in execution order (an npu tensor without a bench twin included, its bench
        cells ``N/A``).

    Examples
    --------
    >>> from graphcmp.core.compare import compare_graphs
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> def run(top):
    ...     t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "requires_grad": False,
    ...          "Max": top, "Min": 0.0, "Mean": top / 2, "Norm": top}
    ...     return parse_msprobe({"task": "statistics", "data": {"Torch.relu.0.forward": {"output": [t]}}})
    >>> table = compare_table(compare_graphs(run(2.0), run(1.0)))
    >>> row = dict(zip(table.names, next(table.rows())))
    >>> row["NPU Name"], row["Max diff"], row["MaxRelativeErr"], row["Result"], row["Verdict"]
    ('Torch.relu.0.forward.output.0', 1.0, '100.0%', 'error', 'error')
    """
    mode = mode or table_mode(report)
    if mode not in TASK_MODES:
        raise ValueError(f"mode {mode!r}: expected one of {', '.join(TASK_MODES)}")
    npu, bench, pairs = report.npu, report.bench, report.pairs
    t = npu.tensors
    rows = np.lexsort((np.arange(len(t)), _ROLE_ORDER[t.role.astype(np.int64)], t.node)) if len(t) else (
        np.zeros(0, np.int64))
    pair_of = np.full(len(t), -1, np.int64)
    pair_of[pairs.npu] = np.arange(len(pairs))
    ks = pair_of[rows]
    matched = ks >= 0
    brows = np.where(matched, pairs.bench[np.where(matched, ks, 0)] if len(pairs) else -1, -1)
    levels = np.full(len(rows), UNMATCHED, np.int8)
    levels[matched] = report.verdicts.pair_level[ks[matched]]
    cells = _Cells(report, rows, brows, matched)
    columns = _msprobe_cells(report, mode, cells, ks, levels)
    names = list(MSPROBE_COLUMNS[mode])
    if any(npu.stacks):
        names.append(STACK_COLUMN)
        columns[STACK_COLUMN] = _stack_cells(npu, rows)
    if mode == "tensor":
        names.append(DATA_NAME_COLUMN)
        columns[DATA_NAME_COLUMN] = _data_names(npu, bench, rows, brows)
    msprobe_columns = len(names)
    names += GRAPHCMP_COLUMNS
    columns.update(_graphcmp_columns(report, t.node[rows]))
    return CompareTable(mode, tuple(names), tuple(tuple(columns[name]) for name in names), rows, ks,
                        levels, msprobe_columns)


def _msprobe_cells(report: CompareReport, mode: str, cells: _Cells, ks: np.ndarray,
                   levels: np.ndarray) -> dict[str, Sequence]:
    """msprobe's columns of `mode` (`MSPROBE_COLUMNS`) by name."""
    rows, brows, matched = cells.rows, cells.brows, cells.matched
    columns: dict[str, Sequence] = {
        "NPU Name": _names(report.npu, rows), "Bench Name": cells.bench_texts(_names(report.bench, brows[matched])),
        **cells.basics(),
        "NPU Requires_grad": cells.npu_grad, "Bench Requires_grad": cells.bench_grad,
        "Requires_grad Consistent": cells.grad_consistent,
        "Result": [STATUS_NAMES[level] if level != UNMATCHED else NA for level in levels.tolist()],
        "Err_message": _messages(report, rows, ks, matched, levels, cells.grad_consistent),
    }
    if mode in ("statistics", "tensor"):
        columns.update(cells.stat_values())
    if mode == "statistics":
        columns.update(cells.stat_diffs())
    elif mode == "tensor":
        columns.update(cells.tensor_metrics(report.pairs.metrics, ks))
    else:
        columns["NPU MD5"] = _texts(report.npu.tensors.md5, rows)
        columns["BENCH MD5"] = cells.bench_texts(_texts(report.bench.tensors.md5, brows[matched]))
    return columns


class _Side:
    """One run's cells of some tensor rows as msprobe writes them: dtype, shape, requires_grad and the four
    statistics, with a scalar argument as msprobe records one (dtype ``<class 'float'>``, shape ``[]``, its value
    as each of the four statistics) and the statistics of an integer or bool tensor as ints or bools."""

    def __init__(self, graph: DumpGraph, rows: np.ndarray) -> None:
        t = graph.tensors
        dtypes, shapes = _texts(t.dtype, rows), _texts(t.shape, rows)
        self.scalar = np.array([s == "scalar" for s in shapes], bool)
        self.dtypes = [f"<class '{d}'>" if sc else d for d, sc in zip(dtypes, self.scalar.tolist())]
        self.shapes = ["[]" if sc else s for s, sc in zip(shapes, self.scalar.tolist())]
        kinds = {d: _number_kind(d) for d in set(dtypes)}
        self.kind = np.array([kinds[d] for d in dtypes], np.int8)
        self.stats = t.stats[rows] if len(rows) else np.zeros((0, 4))
        self.present = t.present[rows] if len(rows) else np.zeros((0, 4), bool)
        if self.scalar.any():  # msprobe gives a number argument its value as max, min, mean and l2norm
            self.stats = np.where(self.scalar[:, None], self.stats[:, :1], self.stats)
            self.present = np.where(self.scalar[:, None], self.present[:, :1], self.present)
        self.grad = _requires_grad(t, rows, self.scalar)


class _Cells:
    """The columns that pair an npu cell with a bench cell, ``N/A`` on the bench side without a twin."""

    def __init__(self, report: CompareReport, rows: np.ndarray, brows: np.ndarray, matched: np.ndarray) -> None:
        self.rows, self.brows, self.matched = rows, brows, matched
        self.npu = _Side(report.npu, rows)
        self.bench = _Side(report.bench, brows[matched])
        self.npu_grad = self.npu.grad
        self.bench_grad = self.bench_texts(self.bench.grad)
        self.grad_consistent = [a == b for a, b in zip(self.npu_grad, self.bench_grad)]

    def bench_texts(self, values: Sequence) -> list:
        """The bench cells of the matched rows (`values`, in row order) with ``N/A`` in the other rows."""
        out = np.full(len(self.rows), NA, object)
        out[self.matched] = values
        return out.tolist()

    def _bench_full(self, values: np.ndarray, fill: object) -> np.ndarray:
        """A bench column over every row (`fill` in the rows without a twin)."""
        out = np.full((len(self.rows), *values.shape[1:]), fill, values.dtype)
        out[self.matched] = values
        return out

    def basics(self) -> dict[str, list]:
        """Dtype and shape of both runs."""
        return {"NPU Dtype": self.npu.dtypes, "Bench Dtype": self.bench_texts(self.bench.dtypes),
                "NPU Tensor Shape": self.npu.shapes, "Bench Tensor Shape": self.bench_texts(self.bench.shapes)}

    def stat_values(self) -> dict[str, list]:
        """``NPU max`` ... ``Bench l2norm``: the number (an int or a bool for such a tensor), ``Nan`` for NaN,
        ``None`` where not recorded (msprobe's ``str(None)``), ``N/A`` on the bench side without a twin."""
        out = {}
        for j in range(4):
            out[_STATS[j]] = _stat_cells(self.npu.stats[:, j], self.npu.present[:, j], self.npu.kind)
            out[_STATS[4 + j]] = self.bench_texts(
                _stat_cells(self.bench.stats[:, j], self.bench.present[:, j], self.bench.kind))
        return out

    def stat_diffs(self) -> dict[str, list]:
        """``Max diff`` ... ``NormRelativeErr`` as msprobe computes them from the two statistics
        (acc_compare.CalcStatsDiff): npu - bench, and |npu - bench| / |bench| as a percentage."""
        b = self._bench_full(self.bench.stats, np.nan)
        pb = self._bench_full(self.bench.present, False)
        bools = (self.npu.kind == _BOOL) | (self._bench_full(self.bench.kind, 0) == _BOOL)
        ints = (self.npu.kind == _INT) & (self._bench_full(self.bench.kind, 0) == _INT)
        names = (("Max diff", "MaxRelativeErr"), ("Min diff", "MinRelativeErr"), ("Mean diff", "MeanRelativeErr"),
                 ("L2norm diff", "NormRelativeErr"))
        out = {}
        for j, (diff_name, rel_name) in enumerate(names):
            out[diff_name], out[rel_name] = _stat_diff(self.npu.stats[:, j], self.npu.present[:, j], b[:, j],
                                                       pb[:, j], self.matched, bools, ints)
        return out

    def tensor_metrics(self, metrics, ks: np.ndarray) -> dict[str, list]:
        """msprobe's tensor columns from graphcmp's tensor metrics of each pair (`metrics`, pairs `ks`), ``N/A``
        where a pair has no tensor files or a row no twin."""
        bench_norm = self._bench_full(np.where(self.bench.present[:, 3], self.bench.stats[:, 3], np.nan), np.nan)
        out = {}
        for name, (metric, decimals) in zip(MSPROBE_COLUMNS["tensor"][8:14], _TENSOR_METRICS):
            values = np.full(len(self.rows), np.nan)
            if metric in metrics:
                values[self.matched] = metrics[metric][ks[self.matched]]
            if metric == "euc_rel":
                with np.errstate(invalid="ignore", over="ignore"):
                    values = values * np.abs(bench_norm)
            if decimals is not None:
                values = np.round(values, decimals)
            out[name] = _metric_cells(values)
        return out


def _names(graph: DumpGraph, rows: np.ndarray) -> list[str]:
    """msprobe's name of each tensor of `rows`: ``<node id>.input.0``, ``.output.0``, ``.parameters.weight``."""
    t = graph.tensors
    ids, slots = graph.nodes.ids, t.slot
    return [ids[n] + _ROLE_KEY[r] + slots[i]
            for i, n, r in zip(rows.tolist(), t.node[rows].tolist(), t.role[rows].tolist())]


def _texts(values: Sequence[str], rows: np.ndarray) -> list[str]:
    return [values[i] for i in rows.tolist()]


_FLOAT, _INT, _BOOL = 0, 1, 2


def _number_kind(dtype: str) -> int:
    """How msprobe's JSON holds a tensor's statistics: floats, ints (an integer dtype) or bools.

    >>> [_number_kind(d) for d in ("torch.float32", "torch.int64", "int", "Int32", "torch.bool", "bool")]
    [0, 1, 1, 1, 2, 2]
    """
    name = dtype.lower()
    return _BOOL if "bool" in name else _INT if "int" in name else _FLOAT


def _requires_grad(table, rows: np.ndarray, scalar: np.ndarray) -> list:
    """msprobe's requires_grad cell: True, False, or ``N/A`` where the dump does not record it (a scalar)."""
    if table.requires_grad is None or not len(rows):
        return [NA] * len(rows)
    texts = np.array([False, True, NA], object)  # codes 0, 1 and -1 (unknown)
    out = texts[table.requires_grad[rows].astype(np.int64)]
    out[scalar] = NA
    return out.tolist()


def _typed(values: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """Numbers as msprobe's JSON gives them: an int for an integer tensor's integral value, a bool for a bool
    tensor's, a float otherwise (an object array)."""
    out = values.astype(object)
    finite = np.isfinite(values)
    ints = np.flatnonzero((kind == _INT) & finite & (values == np.round(values)))
    if len(ints):
        out[ints] = values[ints].astype(np.int64).tolist()
    bools = np.flatnonzero((kind == _BOOL) & finite)
    if len(bools):
        out[bools] = (values[bools] != 0).tolist()
    return out


def _stat_cells(values: np.ndarray, present: np.ndarray, kind: np.ndarray) -> list:
    out = _typed(values, kind)
    out[np.isnan(values)] = NAN
    out[~present] = "None"
    return out.tolist()


def _stat_diff(a: np.ndarray, pa: np.ndarray, b: np.ndarray, pb: np.ndarray, matched: np.ndarray,
               bools: np.ndarray, ints: np.ndarray) -> tuple[list, list]:
    """(difference, relative error) cells of one statistic, by msprobe's rules for each kind of value pair:
    equal values ``0``, a NaN ``Nan``, an infinity ``inf`` or ``-inf``, a value against no value or a bool
    against another ``Diff``, numbers npu - bench (an int between integer tensors) and |npu - bench| / |bench|
    as ``<percent>%`` (``inf`` when bench is 0)."""
    n = len(a)
    diff = np.full(n, NA, object)
    rel = np.full(n, NA, object)
    both = matched & pa & pb
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        numbers = both & np.isfinite(a) & np.isfinite(b)
        d = a - b
        at = np.flatnonzero(numbers)
        diff[at] = _typed(d[at], np.where(ints[at], _INT, _FLOAT))
        zero = numbers & (b == 0)
        rel[np.flatnonzero(zero)] = "inf"
        at = np.flatnonzero(numbers & ~zero)
        rel[at] = np.char.add(np.abs(d[at] / b[at] * 100).astype(str), "%").tolist()  # numpy's str: repr's digits
    inf_a, inf_b = both & np.isinf(a), both & np.isinf(b)
    pos = (inf_a & (a > 0)) | (inf_b & (b < 0))
    neg = (inf_a & (a < 0)) | (inf_b & (b > 0))
    for mask, text in ((pos, "inf"), (neg, "-inf"), (both & (np.isnan(a) | np.isnan(b)), NAN),
                       (matched & ((pa != pb) | (bools & both)), "Diff")):
        diff[mask] = text
        rel[mask] = text
    equal = matched & ((pa & pb & ((a == b) | (np.isnan(a) & np.isnan(b)))) | ~(pa | pb))
    diff[equal] = "0"
    rel[equal] = "0"
    return diff.tolist(), rel.tolist()


def _metric_cells(values: np.ndarray) -> list:
    """A tensor metric's cells: the value, ``N/A`` where there is none (NaN)."""
    out = values.astype(object)
    out[np.isnan(values)] = NA
    return out.tolist()


def _messages(report: CompareReport, rows: np.ndarray, ks: np.ndarray, matched: np.ndarray, levels: np.ndarray,
              grad_consistent: list) -> list[str]:
    """``Err_message``: the row's messages as the JSON list msprobe writes (``[]`` for none): msprobe's texts (no
    bench twin, requires_grad inconsistent), then graphcmp's line for a pair judged warning or error
    (`judge.pair_messages`: ``error: output.0: Max rel err 0.28``, as msprobe's ``warning: ...``)."""
    lines: list[list[str]] = [[] for _ in range(len(rows))]
    for r in np.flatnonzero(~matched).tolist():
        lines[r].append(NO_BENCH)
    for r in np.flatnonzero(matched & ~np.array(grad_consistent, bool)).tolist():
        lines[r].append(REQ_GRAD_MESSAGE)
    flagged = np.flatnonzero(matched & (levels >= WARNING) & (levels <= ERROR))
    if len(flagged):
        notes = pair_notes(report.npu, report.bench, report.pairs, report.noise.precision.mixed)
        texts = pair_messages(report.npu, report.pairs, ks[flagged], levels[flagged], notes)
        for r, text in zip(flagged.tolist(), texts):
            lines[r].append(text)
    quoted = json.encoder.encode_basestring_ascii  # what json.dumps writes for a str, msprobe's encoder
    return ["[" + ", ".join(map(quoted, line)) + "]" for line in lines]


def _stack_cells(graph: DumpGraph, rows: np.ndarray) -> list[str]:
    """``NPU_Stack_Info``: a call's stack (msprobe's list of frames, as Python prints it) on its first row,
    ``N/A`` on its other rows and where it has none, as msprobe writes it."""
    texts = np.array([str(list(frames)) for frames in graph.stacks] + [NA], object)
    node = graph.tensors.node[rows]
    first = np.ones(len(rows), bool)
    first[1:] = node[1:] != node[:-1]
    out = np.full(len(rows), NA, object)
    out[first] = texts[graph.nodes.stack[node[first]]]
    return out.tolist()


def _data_names(npu: DumpGraph, bench: DumpGraph, rows: np.ndarray, brows: np.ndarray) -> list[str]:
    """``Data_name``: the npu and bench tensor files of a row, as msprobe prints the pair (``['a.pt', 'b.pt']``;
    ``-1`` for no file, ``N/A`` for no twin)."""
    nf, bf = npu.tensors.file, bench.tensors.file
    return [str([_file_name(nf[i]), _file_name(bf[j]) if j >= 0 else NA])
            for i, j in zip(rows.tolist(), brows.tolist())]


def _file_name(path: str) -> str:
    """A tensor file's name as msprobe's Data_name gives it (no folder), ``-1`` for none."""
    return os.path.basename(path) if path else "-1"


_FRAME = re.compile(r"^File (?P<path>.+?), line (?P<line>\d+), in (?P<func>[^,]+),?\s*(?P<code>.*)$", re.S)
_LIBRARY_MARKERS = ("site-packages", "dist-packages", "/lib/python")


def call_site(frames: Sequence[str]) -> str:
    """The user's line of a call stack: the first frame outside installed packages (else the first), as
    ``path:line in function: code``; "" for no stack.

    >>> call_site(("File /v/site-packages/torch/nn/modules/module.py, line 1811, in inner, \\n x = hook()",
    ...            "File /home/me/models.py, line 26, in forward, \\n x = self.embedding(tokens)"))
    '/home/me/models.py:26 in forward: x = self.embedding(tokens)'
    """
    if not frames:
        return ""
    frame = next((f for f in frames if not any(m in f for m in _LIBRARY_MARKERS)), frames[0])
    found = _FRAME.match(frame.strip())
    if found is None:
        return " ".join(frame.split())
    code = " ".join(found["code"].replace("\\n", " ").split())
    return f"{found['path']}:{found['line']} in {found['func']}" + (f": {code}" if code else "")


def _graphcmp_columns(report: CompareReport, node: np.ndarray) -> dict[str, list]:
    """Verdict, Role, Margin, Cause and Call Site of each row's npu node."""
    noise = report.noise
    distinct, inverse = np.unique(node, return_inverse=True)
    inverse = inverse.reshape(-1)
    status = report.verdicts.status[distinct].tolist()
    roles = noise.role[distinct]
    margins = noise.margins_of(distinct).astype(object)
    margins[roles == NodeRole.NOT_COMPARED] = ""
    analysis = report.analysis()
    causes = {d.node: d.cause for d in (analysis.first_overflow, *reversed(analysis.candidates), analysis.first)
              if d is not None}
    ids = report.npu.nodes.ids
    sites = [call_site(frames) for frames in report.npu.stacks] + [""]
    stacks = report.npu.nodes.stack[distinct]

    def spread(values: list) -> list:
        return np.array(values, object)[inverse].tolist() if len(distinct) else []

    return {
        "Verdict": spread([STATUS_NAMES[s] for s in status]),
        "Role": spread([_ROLE_NAMES[int(r)] for r in roles.tolist()]),
        "Margin": spread(margins.tolist()),
        "Cause": spread([causes.get(ids[n], "") for n in distinct.tolist()]),
        "Call Site": spread([sites[s] for s in stacks.tolist()]),
    }
