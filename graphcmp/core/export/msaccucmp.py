"""Writing a comparison as msaccucmp's ``result_*.csv``, so scripts written for MindStudio's accuracy comparison keep
working.

One row per NPU tensor (each dumped op's inputs, then its outputs), in the order of msaccucmp's ``Index`` (the op's
place in the fusion rule when the golden run was laid out by one, else its execution order). The columns are those
msaccucmp writes with ``-advisor`` for an NPU dump against ``.npy`` golden data (its ``GroundTruth`` side has no
``Address``): ``Index, OpType, NPUDump, DataType, Address, GroundTruth, DataType, TensorIndex, Shape, OverFlow``, its
ten algorithms in its order, ``CompareFailReason``. Numbers are written ``{:.6f}``, ``StandardDeviation`` as
``(mean;std),(mean;std)`` of NPU and golden with three decimals, a missing value as ``NaN``; ``OverFlow`` is ``YES``
or ``NO`` for float16 NPU tensors (``max |x| >= 65504``, NaN propagating as in numpy) and ``NaN`` for others.
Rows of ops the dump does not hold (``Data``, ``Const``) are not written, and ``Address`` is ``NaN``: graphcmp keeps
neither.
"""

from __future__ import annotations

import csv
import io
import math
import os
import time
from collections.abc import Mapping

import numpy as np

from graphcmp.core.dtypes import normalize_dtype
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.export.vis import ExportResult
from graphcmp.core.hierarchy import execution_keys
from graphcmp.core.outputs import write_atomic
from graphcmp.core.records import DumpGraph, Role
from graphcmp.core.report import CompareReport
from graphcmp.core.tensorcmp import recorded_shape

__all__ = ["ALGORITHMS", "HEADER", "msaccucmp_rows", "write_msaccucmp"]

ALGORITHMS = (("CosineSimilarity", "cosine"), ("MaxAbsoluteError", "max_abs"),
              ("AccumulatedRelativeError", "are"), ("RelativeEuclideanDistance", "euc_rel"),
              ("KullbackLeiblerDivergence", "kl"), ("StandardDeviation", ""), ("MeanAbsoluteError", "mean_abs"),
              ("RootMeanSquareError", "rmse"), ("MaxRelativeError", "max_rel_nz"), ("MeanRelativeError", "mean_rel"))
"""msaccucmp's built-in algorithms in its column order, with graphcmp's metric for each (StandardDeviation is made
from the statistics)."""

HEADER = ("Index", "OpType", "NPUDump", "DataType", "Address", "GroundTruth", "DataType", "TensorIndex", "Shape",
          "OverFlow", *(name for name, _ in ALGORITHMS), "CompareFailReason")
"""The header of msaccucmp's result CSV for an NPU dump against golden ``.npy`` files, with ``-advisor``."""

_LAYOUT_OPS = frozenset({"Cast", "TransData"})
_FP16_MAX = 65504.0


def write_msaccucmp(report: CompareReport, path: str | os.PathLike[str]) -> ExportResult:
    """Write `report` as msaccucmp's result CSV at `path`; see the module notes.

    Raises
    ------
    DumpFormatError
        If `report` is a single run, not a comparison.
    OutputError
        If the file cannot be written.
    """
    start = time.perf_counter()
    if not isinstance(report, CompareReport):
        raise DumpFormatError(f"{path}: msaccucmp's result CSV needs a comparison, not a single run")
    text = io.StringIO(newline="")
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(HEADER)
    rows = msaccucmp_rows(report)
    writer.writerows(rows)
    data = text.getvalue().encode("utf-8")
    write_atomic(path, data)
    return ExportResult((str(path),), len({row[2] for row in rows}), len(data), time.perf_counter() - start)


def msaccucmp_rows(report: CompareReport) -> list[list[str]]:
    """The rows of the CSV (cells as text), sorted by Index."""
    npu, bench = report.npu, report.bench
    t = npu.tensors
    pair_of = {int(r): k for k, r in enumerate(report.pairs.npu.tolist())}
    metrics = {name: np.asarray(report.pairs.metrics[name]) for _, name in ALGORITHMS
               if name and name in report.pairs.metrics}
    keys = execution_keys(npu)
    ops = sorted({int(n) for n in t.node.tolist()}, key=lambda n: keys[n])
    by_op: dict[int, list[int]] = {}
    for row in np.lexsort((_slot_numbers(t.slot), t.role, keys[t.node])).tolist():
        by_op.setdefault(int(t.node[row]), []).append(row)
    out = []
    for position, op in enumerate(ops):
        partner = int(report.matches.npu_to_bench[op])
        attrs = dict(bench.nodes.attrs[partner]) if partner >= 0 and bench.nodes.attrs else {}
        index = int(attrs["rule_index"]) if attrs.get("rule_index", "").isdigit() else position
        name, op_type = npu.nodes.ids[op], npu.nodes.op[op]
        truth = "*" if op_type in _LAYOUT_OPS or partner < 0 else attrs.get("original_op_names") or name
        for row in by_op.get(op, ()):
            k = pair_of.get(row)
            out.append(_row(report, row, k, metrics, index, op_type, name, truth))
    out.sort(key=lambda r: int(r[0]))
    return out


def _slot_numbers(slots: tuple[str, ...]) -> np.ndarray:
    return np.array([int(s) if s.isdigit() else 0 for s in slots])


def _row(report: CompareReport, row: int, k: int | None, metrics: Mapping[str, np.ndarray], index: int,
         op_type: str, name: str, truth: str) -> list[str]:
    npu, bench = report.npu, report.bench
    t = npu.tensors
    io_name = "input" if t.role[row] == Role.INPUT else "output"
    tensor = f"{name}:{io_name}:{t.slot[row]}"
    has_data = bool(t.present[row].any())
    b = int(report.pairs.bench[k]) if k is not None else -1
    values = []
    for column, metric in ALGORITHMS:
        if column == "StandardDeviation":
            values.append(_std_text(npu, row, bench, b) if b >= 0 else "NaN")
        else:
            v = float(metrics[metric][k]) if k is not None and metric in metrics else math.nan
            values.append("NaN" if math.isnan(v) else f"{v:.6f}")
    if not has_data:
        reason = f"[{name}] There is no dump data for {tensor}."
    elif b < 0:
        reason = f"[{name}] There is no the ground truth dump file for {tensor}."
    elif values[0] == "NaN":
        reason = f"[{name}] The shape or the non-finite values of {tensor} differ from the ground truth."
    else:
        reason = ""
    return [str(index), op_type, name, t.dtype[row] if has_data else "NaN", "NaN", truth,
            bench.tensors.dtype[b] if b >= 0 else "NaN", tensor, _shape_text(t.shape[row]),
            _overflow(npu, row), *values, reason]


def _shape_text(shape: str) -> str:
    return shape.replace(" ", "") or "NaN"


def _overflow(npu: DumpGraph, row: int) -> str:
    t = npu.tensors
    if normalize_dtype(t.dtype[row]) != "float16" or not t.present[row].any():
        return "NaN"
    with np.errstate(invalid="ignore"):  # as msaccucmp: max |x| >= 65504, so a tensor holding NaN is "NO"
        return "YES" if np.abs(t.stats[row][:2]).max() >= _FP16_MAX else "NO"


def _std_text(npu: DumpGraph, row: int, bench: DumpGraph, b: int) -> str:
    return f"{_mean_std(npu, row)},{_mean_std(bench, b)}"


def _mean_std(graph: DumpGraph, row: int) -> str:
    """``(mean;std)`` of one tensor from its statistics: std = sqrt(Norm^2 / n - Mean^2), population as numpy's."""
    t = graph.tensors
    mean, norm = float(t.stats[row][2]), float(t.stats[row][3])
    if not (t.present[row][2] and t.present[row][3]):
        return "(NaN;NaN)"
    shape = recorded_shape(t.shape[row])  # "scalar" (a scalar argument) holds one value
    n = math.prod(shape) if shape is not None else 1
    with np.errstate(all="ignore"):
        std = math.sqrt(max(norm * norm / max(n, 1) - mean * mean, 0.0)) if math.isfinite(norm) else math.nan
    return f"({_three(mean)};{_three(std)})"


def _three(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{0.0 if abs(value) < 0.001 else value:.3f}"
