"""The compiled kernels of the statistics metrics (`graphcmp.core.stat_fused`), taken where they are built ahead of
time: one pass over a comparison's tensor pairs instead of a dozen numpy passes a block at a time, the same bits (the
pairs' largest relative error and bit-equality, the noise model's statistic errors, the judge's overflow pairs).

They are a `KernelSet` (`graphcmp.core.compiled`) built with the compiled dump.json reader, in the background after
a command that read msprobe runs (`readers.msprobe_scan.build_in_background`). Until they are built, each function
here returns None and its caller computes the values with numpy: loading numba instead (0.5-0.9 s a process)
would cost more than the pass saves below tens of millions of pairs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from graphcmp.core.compiled import KernelSet

__all__ = ["KERNELS", "nonfinite", "rel_err_identical", "stat_errors"]

_STATS, _MASK, _ROWS = "f8[:, ::1]", "b1[:, ::1]", "i8[::1]"

SIGNATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "rel_err_identical": ("void", (_STATS, _MASK, _STATS, _MASK, _ROWS, _ROWS, "f8", "f8", "f8[::1]", "b1[::1]")),
    "stat_errors": ("void", (_STATS, _MASK, _STATS, _MASK, _ROWS, _ROWS, "f8[::1]", "f8[::1]", "f8[::1]", "f8[::1]",
                             "f8[::1]")),
    "nonfinite": ("void", (_STATS, _MASK, _STATS, _MASK, _ROWS, _ROWS, "b1[::1]")),
}


def _dispatchers() -> dict[str, Any]:
    from graphcmp.core.stat_fused import dispatchers  # see tests/test_layers.py: LAZY_IMPORTS

    return dispatchers()


KERNELS = KernelSet("stat", Path(__file__).with_name("stat_fused.py"), SIGNATURES, _dispatchers,
                    flags={"error_model": "numpy"})


def _built() -> Any | None:
    """The kernels when built ahead of time (loaded in milliseconds), else None: never numba, never a build here."""
    return KERNELS.load(build=False) if KERNELS.built() else None


def rel_err_identical(npu_stats: np.ndarray, npu_present: np.ndarray, bench_stats: np.ndarray,
                      bench_present: np.ndarray, npu_rows: np.ndarray, bench_rows: np.ndarray, *, atol: float,
                      magnitude_floor: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Per pair of rows (`npu_rows`, `bench_rows`) of two runs' statistics and their recorded masks: the largest
    relative error (`metrics.stat_rel_error`) and whether every statistic both record is bit-equal
    (`metrics.stats_identical`); None where the kernels are not built."""
    kernels = _built()
    if kernels is None:
        return None
    rel_err, identical = np.empty(len(npu_rows)), np.empty(len(npu_rows), bool)
    kernels.rel_err_identical(*_operands(npu_stats, npu_present, bench_stats, bench_present, npu_rows, bench_rows),
                              float(atol), float(magnitude_floor), rel_err, identical)
    return rel_err, identical


def stat_errors(npu_stats: np.ndarray, npu_recorded: np.ndarray, bench_stats: np.ndarray, bench_recorded: np.ndarray,
                npu_rows: np.ndarray, bench_rows: np.ndarray,
                count: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The noise model's statistic errors of each pair (`noise._stat_errors`: the largest, the first statistic's,
    each side's magnitude) over the statistics recorded on both sides (`npu_recorded`, `bench_recorded`: per row),
    `count` the bench tensor's elements per pair; None where the kernels are not built."""
    kernels = _built()
    if kernels is None:
        return None
    if len(count) != len(npu_rows):
        raise ValueError(f"{len(count)} element counts for {len(npu_rows)} pairs")
    out = tuple(np.empty(len(npu_rows)) for _ in range(4))
    kernels.stat_errors(*_operands(npu_stats, npu_recorded, bench_stats, bench_recorded, npu_rows, bench_rows),
                        np.ascontiguousarray(count, np.float64), *out)
    return out  # type: ignore[return-value]


def nonfinite(npu_stats: np.ndarray, npu_recorded: np.ndarray, bench_stats: np.ndarray, bench_recorded: np.ndarray,
              npu_rows: np.ndarray, bench_rows: np.ndarray) -> np.ndarray | None:
    """Per pair: an inf or NaN statistic one side recorded (`npu_recorded`, `bench_recorded`: per row) where the
    other side does not hold the same value (the judge's `_nonfinite_pairs`); None where the kernels are not built."""
    kernels = _built()
    if kernels is None:
        return None
    out = np.empty(len(npu_rows), bool)
    kernels.nonfinite(*_operands(npu_stats, npu_recorded, bench_stats, bench_recorded, npu_rows, bench_rows), out)
    return out


def _operands(npu_stats: np.ndarray, npu_mask: np.ndarray, bench_stats: np.ndarray, bench_mask: np.ndarray,
              npu_rows: np.ndarray, bench_rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """The arrays as the kernels read them (C order, their dtypes), the rows checked: compiled code checks no index."""
    npu_rows, bench_rows = np.ascontiguousarray(npu_rows, np.int64), np.ascontiguousarray(bench_rows, np.int64)
    if len(npu_rows) != len(bench_rows):
        raise ValueError(f"{len(npu_rows)} npu rows and {len(bench_rows)} bench rows")
    for rows, stats, mask in ((npu_rows, npu_stats, npu_mask), (bench_rows, bench_stats, bench_mask)):
        if stats.shape != mask.shape or stats.shape[1:] != (4,):
            raise ValueError(f"statistics {stats.shape} and their mask {mask.shape}: expected (n, 4) both")
        if len(rows) and (rows.min() < 0 or rows.max() >= len(stats)):
            raise IndexError(f"a row outside the {len(stats)} rows of statistics")
    return (np.ascontiguousarray(npu_stats, np.float64), np.ascontiguousarray(npu_mask, bool),
            np.ascontiguousarray(bench_stats, np.float64), np.ascontiguousarray(bench_mask, bool), npu_rows, bench_rows)


def build() -> None:
    """Build the kernels where they are not built."""
    KERNELS.load()
