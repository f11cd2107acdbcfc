"""Real-tensor comparison of paired tensors: find each pair's files, load one pair at a time, measure.

Used when both runs dumped tensors (msprobe task ``tensor``). Files are looked up in the run's
``dump_tensor_data`` folder by the name the dump records; a pair whose files are missing keeps
NaN metrics and is judged on its statistics.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.inputs import regular_file, split_tensor_part
from graphcmp.core.records import DumpGraph

__all__ = ["TENSOR_DATA_DIR", "recorded_shape", "tensor_file", "tensor_metrics_for"]

TENSOR_DATA_DIR = "dump_tensor_data"

Progress = Callable[[int, int], None]


def tensor_file(graph: DumpGraph, row: int) -> Path | None:
    """Path of the file holding tensor `row`, or None if the run has none for it.

    The name a dump records is looked up inside the run's folder only: a name that leads out of it
    (``../x.pt``, an absolute path elsewhere) is refused, as is a FIFO, a device or a link loop there.

    Raises
    ------
    DumpFormatError
        If the recorded name points outside the run's folder, or names no regular file.
    """
    name = graph.tensors.file[row]
    if not name:
        return None
    name, part = split_tensor_part(name)
    suffix = f"#{part}" if part else ""
    folder = os.path.normpath(graph.info.path)
    if os.path.isfile(folder):  # a run that is one file (an HDF5 dump) names its tensors inside it
        folder = os.path.dirname(os.path.abspath(folder))
    for candidate in (os.path.join(folder, TENSOR_DATA_DIR, name), os.path.join(folder, name)):
        candidate = os.path.normpath(candidate)
        if os.path.commonpath([folder, candidate]) != folder:
            raise DumpFormatError(f"{graph.info.path}: the tensor file {name!r} lies outside the dump folder; "
                                  "graphcmp reads a run's tensors from its own folder only")
        if os.path.lexists(candidate) and (os.path.exists(candidate) or _loops(candidate)):
            return Path(str(regular_file(candidate)) + suffix)
    return None


def _loops(path: str) -> bool:
    try:
        os.stat(path)
    except OSError as err:
        return err.errno == errno.ELOOP
    return False


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
            for name, value in _compare_files(a, b, npu.tensors.shape[i], bench.tensors.shape[j]).items():
                out[name][k] = value
        if progress is not None:
            progress(k + 1, total)
    return out


def _compare_files(npu_file: Path, bench_file: Path, npu_shape: str = "", bench_shape: str = "") -> dict[str, float]:
    from graphcmp.core.tensor_metrics import compare_tensors
    from graphcmp.core.tensorio import read_tensor

    try:
        npu = _checked(np.asarray(read_tensor(npu_file)), npu_file, npu_shape)
        bench = _checked(np.asarray(read_tensor(bench_file)), bench_file, bench_shape)
        return compare_tensors(npu, bench)
    except DumpFormatError:
        raise
    except (OSError, ValueError) as err:
        raise DumpFormatError(f"{npu_file} / {bench_file}: cannot compare tensors ({err})") from err


def _checked(array: np.ndarray, file: Path, recorded: str) -> np.ndarray:
    """`array` once its shape is the one the dump records for it (not checked when none is recorded)."""
    shape = recorded_shape(recorded)
    if shape is not None and tuple(array.shape) != shape:
        raise DumpFormatError(f"{file}: holds a tensor of shape {list(array.shape)}, but the dump records "
                              f"{list(shape)} for it; the file belongs to another tensor or run")
    return array


def recorded_shape(text: str) -> tuple[int, ...] | None:
    """The shape a dump records (``"[4, 16]"``, ``"[]"`` or ``"scalar"``), None when it records none.

    >>> recorded_shape("[4, 16]"), recorded_shape("scalar"), recorded_shape("")
    ((4, 16), (), None)
    """
    text = text.strip()
    if text in ("scalar", "[]", "()"):
        return ()
    if not (text.startswith(("[", "(")) and text.endswith(("]", ")"))):
        return None
    parts = [p.strip() for p in text[1:-1].split(",") if p.strip()]
    if not all(p.isdigit() and len(p) <= 19 for p in parts):
        return None
    return tuple(int(p) for p in parts)
