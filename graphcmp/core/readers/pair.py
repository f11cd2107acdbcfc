"""Reading an npu run and its bench run side by side: the npu run in a forked process."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import fields
from pathlib import Path
from typing import IO, Any

import numpy as np

from graphcmp.core.errors import GraphcmpError
from graphcmp.core.forking import can_fork_aside
from graphcmp.core.readers.detect import read_graph
from graphcmp.core.records import DumpGraph, FrozenColumns

__all__ = ["PARALLEL_READ_BYTES", "read_pair", "side_by_side"]

PARALLEL_READ_BYTES = 8_000_000
"""Above this total input size the two runs are read in two processes (below it, start-up costs more)."""


def read_pair(
    npu_path: str | os.PathLike[str],
    bench_path: str | os.PathLike[str],
    *,
    format: str | None = None,
    meanwhile: Callable[[], object] | None = None,
    ahead: Callable[[DumpGraph], object] | None = None,
) -> tuple[DumpGraph, DumpGraph]:
    """Read the npu and the bench run; large inputs on a multi-core machine are read side by side.

    The npu run is read in a forked child process while this one reads the bench run; the child writes the
    finished `DumpGraph` into a temporary file that this process loads once the child has ended (a bad input
    raises the same `GraphcmpError` as reading it here would; when both runs are bad, the npu run's error).
    `meanwhile` runs here first, once the child is reading: the command line loads the comparison's modules then.
    `ahead` is what the caller will derive from the npu run alone (kept with it, `DumpGraph.memo`; a module-level
    function, sent to the child by name): the child runs it once the npu run is read and sends it with the run. So
    each process has one piece of work besides its read (the imports here, the derivation there); with the npu run
    read here, this process did both while the child waited.
    """
    if not side_by_side(npu_path, bench_path):
        if meanwhile is not None:
            meanwhile()
        npu = read_graph(npu_path, format)
        if ahead is not None:
            ahead(npu)
        return npu, read_graph(bench_path, format)
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryFile(prefix="graphcmp-run-") as spool:  # unnamed: nothing is left, however this ends
        with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_quiet_interrupt) as pool:
            npu_future = pool.submit(_read_spooled, npu_path, format, spool.fileno(), ahead)
            if meanwhile is not None:
                meanwhile()
            try:
                bench = read_graph(bench_path, format)
            except GraphcmpError:
                npu_future.result()  # the npu run's error first, as reading them in order would give
                raise
            npu = npu_future.result()
        # the pool has ended: the reading process's memory is free before the run it spooled is loaded here
        if npu is None:
            spool.seek(0)
            npu = load_run(spool)
        return npu, bench


def _quiet_interrupt() -> None:
    """Ctrl-C is this process's to answer: the reading process finishes its run and stops with the pool (ended
    while sending its run, it would leave the pool waiting for the rest for ever), without a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _read_spooled(path: str | os.PathLike[str], format: str | None, spool: int,
                  ahead: Callable[[DumpGraph], object] | None = None) -> DumpGraph | None:
    """Read a run and derive `ahead` from it; write it into the file `spool` (a descriptor inherited from the parent)
    and return None, or return the run itself when the file cannot take it (a full disk).

    Written into a file rather than sent whole through the pool's pipe, the run is never one pickled bytes object
    here and another one there: at 1M nodes per side that was 0.5 GB in each process at the peak of the comparison.
    """
    graph = read_graph(path, format)
    if ahead is not None:
        ahead(graph)
    try:
        with open(spool, "wb", closefd=False) as file:
            dump_run(graph, file)
    except OSError:
        return graph
    return None


def dump_run(graph: DumpGraph, file: IO[bytes]) -> None:
    """Pickle `graph` into `file` a part at a time (each of its fields, each column of its tables), for `load_run`.

    Each part has a pickle memo of its own: one memo for the whole run would hold every object of it (a million-node
    run: tens of millions of entries, a third of the pickling time). A table's parts are those its own pickling
    gives (`FrozenColumns.__reduce__`: the node ids as one text).
    """
    for f in fields(graph):
        value = getattr(graph, f.name)
        parts = value.__reduce__() if isinstance(value, FrozenColumns) else (None, (value,))
        for part in ((f.name, parts[0], len(parts[1])), *parts[1]):
            pickle.dump(part, file, protocol=pickle.HIGHEST_PROTOCOL)


def load_run(file: IO[bytes]) -> DumpGraph:
    """The run `dump_run` wrote into `file`."""
    values: dict[str, Any] = {}
    for _ in fields(DumpGraph):
        name, table, count = pickle.load(file)
        parts = [pickle.load(file) for _ in range(count)]
        values[name] = table(*parts) if table is not None else parts[0]
    for derived in values["_cache"].values():  # what was derived from the run (`DumpGraph.memo`) stays read-only
        if isinstance(derived, np.ndarray):
            derived.flags.writeable = False
    return DumpGraph(**values)


def side_by_side(*paths: str | os.PathLike[str]) -> bool:
    """True when runs at `paths` are worth reading (and their result writing) in two processes: `can_fork_aside`,
    and more than `PARALLEL_READ_BYTES` of input."""
    return can_fork_aside() and sum(_input_bytes(Path(p)) for p in paths) > PARALLEL_READ_BYTES


def _input_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    return 0
