"""Real-tensor comparison of paired tensors: find each pair's files, load one pair at a time, measure.

Used when both runs dumped tensors (msprobe task ``tensor``). Files are looked up in the run's
``dump_tensor_data`` folder by the name the dump records; a pair whose files are missing keeps
NaN metrics and is judged on its statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.records import DumpGraph

__all__ = ["TENSOR_DATA_DIR", "tensor_file", "tensor_metrics_for"]

TENSOR_DATA_DIR = "dump_tensor_data"

Progress = Callable[[int, int], None]


def tensor_file(graph: DumpGraph, row: int) -> Path | None:
    """Path of the file holding tensor `row`, or None if the run has none for it."""
    name = graph.tensors.file[row]
    if not name:
        return None
    folder = Path(graph.info.path)
    for candidate in (folder / TENSOR_DATA_DIR / name, folder / name):
        if candidate.is_file():
            return candidate
    return None


def tensor_metrics_for(
    npu: DumpGraph, bench: DumpGraph, *, progress: Progress | None = None
) -> Callable[[DumpGraph, DumpGraph, np.ndarray, np.ndarray], dict[str, np.ndarray]] | None:
    """The tensor-metrics step for `compare_graphs` when both runs hold tensor files, else None."""
    if npu.info.task != "tensor" or bench.info.task != "tensor":
        return None

    def measure(npu: DumpGraph, bench: DumpGraph, npu_rows: np.ndarray, bench_rows: np.ndarray):
        return measure_pairs(npu, bench, npu_rows, bench_rows, progress=progress)

    return measure


def measure_pairs(
    npu: DumpGraph, bench: DumpGraph, npu_rows: np.ndarray, bench_rows: np.ndarray,
    *, progress: Progress | None = None,
) -> dict[str, np.ndarray]:
    """Tensor metrics per pair (NaN where either file is missing), loading one pair at a time."""
    from graphcmp.core.tensor_metrics import TENSOR_METRICS  # lazy: statistics-only runs never need it

    out = {name: np.full(len(npu_rows), np.nan) for name in TENSOR_METRICS}
    total = len(npu_rows)
    for k, (i, j) in enumerate(zip(npu_rows.tolist(), bench_rows.tolist())):
        a, b = tensor_file(npu, i), tensor_file(bench, j)
        if a is not None and b is not None:
            for name, value in _compare_files(a, b).items():
                out[name][k] = value
        if progress is not None:
            progress(k + 1, total)
    return out


def _compare_files(npu_file: Path, bench_file: Path) -> dict[str, float]:
    from graphcmp.core.tensor_metrics import compare_tensors
    from graphcmp.core.tensorio import read_tensor

    try:
        return compare_tensors(np.asarray(read_tensor(npu_file)), np.asarray(read_tensor(bench_file)))
    except DumpFormatError:
        raise
    except (OSError, ValueError) as err:
        raise DumpFormatError(f"{npu_file} / {bench_file}: cannot compare tensors ({err})") from err
