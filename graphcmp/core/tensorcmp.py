"""Real-tensor comparison of paired tensors: find each pair's files, load one pair at a time, measure.

Used when both runs dumped tensors (msprobe task ``tensor``). Files are looked up in the run's
``dump_tensor_data`` folder by the name the dump records; a pair whose files are missing keeps
NaN metrics and is judged on its statistics, and a `MissingTensorFiles` warning names the first of them.

Two pairs are read and measured at once, each on its own thread (a ``.pt`` storage is mapped in place; the
compiled kernels and numpy release the GIL), so both cores work; no more than two pairs are held at once.
Large pairs are measured by the compiled kernels (`graphcmp.core.tensor_kernels`) where the comparison's tensor
files repay them (`tensor_kernels.pays`).
"""

from __future__ import annotations

import errno
import os
import queue
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.inputs import regular_file, split_tensor_part
from graphcmp.core.records import DumpGraph

__all__ = ["TENSOR_DATA_DIR", "MissingTensorFiles", "recorded_shape", "tensor_file", "tensor_metrics_for"]

TENSOR_DATA_DIR = "dump_tensor_data"

Progress = Callable[[int, int], None]


class MissingTensorFiles(UserWarning):
    """Tensor files a dump records are not in its folder: their pairs keep NaN tensor metrics."""


def tensor_file(graph: DumpGraph, row: int) -> Path | None:
    """Path of the file holding tensor `row`, or None if the run has none for it.

    The name a dump records is looked up inside the run's folder only: a name that leads out of it
    (``../x.pt``, an absolute path elsewhere) is refused, as is a FIFO, a device or a link loop there.
    A relative name is looked up in the run's ``dump_tensor_data`` folder, in the run's folder, then as it
    reads from the working folder, which is how a reader given a relative run folder records the files it
    found there (MindSpore kernel dumps).

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
        if _present(candidate):
            return Path(str(regular_file(candidate)) + suffix)
    if not os.path.isabs(name) and _present(name):  # already holds the run's (relative) folder
        inside = os.path.commonpath([os.path.abspath(folder), os.path.abspath(name)]) == os.path.abspath(folder)
        if inside:
            return Path(str(regular_file(os.path.normpath(name))) + suffix)
    return None


def _present(path: str) -> bool:
    return os.path.lexists(path) and (os.path.exists(path) or _loops(path))


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
    """Tensor metrics per pair (NaN where either file is missing, with a `MissingTensorFiles` warning).

    Two pairs are read and measured at once (`_WORKERS`); at most two pairs are held.
    """
    import graphcmp.core.tensor_kernels as tensor_kernels  # see tests/test_layers.py: LAZY_IMPORTS
    from graphcmp.core.tensor_metrics import TENSOR_METRICS

    out = {name: np.full(len(npu_rows), np.nan) for name in TENSOR_METRICS}
    pairs, missing = _pair_files(npu, bench, npu_rows, bench_rows)
    for graph, names in missing:
        warnings.warn(MissingTensorFiles(
            f"{graph.info.path}: {len(names)} tensor file(s) the dump records are not in its folder (first: "
            f"{names[0]!r}); their pairs have no tensor metrics and are judged on their statistics"), stacklevel=2)
    fused = tensor_kernels.pays(sum(_file_bytes(a) + _file_bytes(b) for _, a, b, _, _ in pairs))
    total = len(npu_rows)
    for done, (k, values) in enumerate(_measured(pairs, fused), 1):
        for name, value in values.items():
            out[name][k] = value
        if progress is not None:
            progress(done, total)
    if progress is not None and total:
        progress(total, total)
    return out


_Pair = tuple[int, Path, Path, str, str]


def _pair_files(npu: DumpGraph, bench: DumpGraph, npu_rows: np.ndarray,
                bench_rows: np.ndarray) -> tuple[list[_Pair], list[tuple[DumpGraph, list[str]]]]:
    """The pairs whose two files are found (position, files, recorded shapes), and for each run with some
    missing, the recorded names of the files that are not found."""
    pairs: list[_Pair] = []
    missing: tuple[list[str], list[str]] = ([], [])
    for k, (i, j) in enumerate(zip(npu_rows.tolist(), bench_rows.tolist())):
        a, b = tensor_file(npu, i), tensor_file(bench, j)
        for lost, graph, row, found in ((missing[0], npu, i, a), (missing[1], bench, j, b)):
            if found is None and graph.tensors.file[row]:
                lost.append(graph.tensors.file[row])
        if a is not None and b is not None:
            pairs.append((k, a, b, npu.tensors.shape[i], bench.tensors.shape[j]))
    return pairs, [(graph, lost) for graph, lost in zip((npu, bench), missing) if lost]


def _file_bytes(path: Path) -> int:
    try:
        return os.path.getsize(split_tensor_part(str(path))[0])
    except OSError:
        return 0


def _measured(pairs: list[_Pair], fused: bool) -> Iterator[tuple[int, dict[str, float]]]:
    """(position, metrics) of each pair as it is done, `_WORKERS` pairs read and measured at once (one per core).

    Each worker thread takes the next pair itself as soon as it is done with one, whatever the other measures: taken
    in order and handed out by this thread, a worker that had finished a small pair waited for the other's large one,
    then for this thread to wake (a tenth to a third of a worker's time on the 10 GB pair). The pairs are taken in
    order, so when one fails, every pair before it has been taken: once the workers stop, the first failure by
    position is raised, as measuring them in order would.
    """
    if len(pairs) < 2:
        yield from ((pair[0], _measure_pair(pair, fused)) for pair in pairs)
        return
    work = _Work(pairs, fused)
    threads = [threading.Thread(target=work.run, name=f"graphcmp-tensors_{k}", daemon=True) for k in range(_WORKERS)]
    for thread in threads:
        thread.start()
    try:
        yield from work.results(len(threads))
    finally:
        work.stop.set()
        for thread in threads:
            thread.join()


class _Work:
    """The pairs shared by the worker threads of `_measured`, and what they measured."""

    def __init__(self, pairs: list[_Pair], fused: bool) -> None:
        self.waiting, self.fused = iter(pairs), fused
        self.taking = threading.Lock()
        self.stop = threading.Event()  # a pair failed, or the results are no longer wanted
        self.done: queue.SimpleQueue = queue.SimpleQueue()  # (position, metrics, error), None as a worker ends

    def run(self) -> None:
        """A worker: measure the next pair until there is none or `stop` is set."""
        try:
            while not self.stop.is_set():
                with self.taking:
                    pair = next(self.waiting, None)
                if pair is None:
                    break
                try:
                    self.done.put((pair[0], _measure_pair(pair, self.fused), None))
                except BaseException as error:  # raised by the consuming thread, the first by position
                    self.stop.set()
                    self.done.put((pair[0], None, error))
        finally:
            self.done.put(None)

    def results(self, workers: int) -> Iterator[tuple[int, dict[str, float]]]:
        failures: list[tuple[int, BaseException]] = []
        while workers:
            item = self.done.get()
            if item is None:
                workers -= 1
            elif item[2] is not None:
                failures.append((item[0], item[2]))
            elif not failures:
                yield item[0], item[1]
        if failures:
            raise min(failures, key=lambda failure: failure[0])[1]


_WORKERS = max(1, min(2, os.cpu_count() or 1))
"""Pairs read and measured at once: one per core of the 2-core machines graphcmp is measured on, each pair on one
thread (the compiled kernels and numpy release the GIL); two pairs' tensors are held at most."""


def _measure_pair(pair: _Pair, fused: bool) -> dict[str, float]:
    from graphcmp.core.tensor_metrics import compare_tensors

    npu, bench = _read_pair(pair)
    try:
        return compare_tensors(npu, bench, fused=fused)
    except (OSError, ValueError) as err:
        raise DumpFormatError(f"{pair[1]} / {pair[2]}: cannot compare tensors ({err})") from err


def _read_pair(pair: _Pair) -> tuple[np.ndarray, np.ndarray]:
    _, npu_file, bench_file, npu_shape, bench_shape = pair
    return _read_checked(npu_file, npu_shape), _read_checked(bench_file, bench_shape)


def _read_checked(file: Path, recorded: str) -> np.ndarray:
    from graphcmp.core.tensorio import read_tensor

    try:
        return _checked(np.asarray(read_tensor(file)), file, recorded)
    except DumpFormatError:
        raise
    except (OSError, ValueError) as err:
        raise DumpFormatError(f"{file}: cannot read the tensor ({err})") from err


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
