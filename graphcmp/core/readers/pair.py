"""Reading an npu run and its bench run side by side: the npu run in a forked process."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import IO, Any

import numpy as np

from graphcmp.core.errors import GraphcmpError
from graphcmp.core.forking import Forked, Sender, can_fork_aside
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
    ahead_bench: Callable[[DumpGraph], object] | None = None,
    ahead_loaded: Callable[[DumpGraph], object] | None = None,
) -> tuple[DumpGraph, DumpGraph]:
    """Read the npu and the bench run; large inputs on a multi-core machine are read side by side.

    The npu run is read in a forked child process while this one reads the bench run; the child writes the run
    into a temporary file as soon as it is read, which this process loads while the child derives `ahead` from it
    (a bad input raises the same `GraphcmpError` as reading it here would; when both runs are bad, the npu run's
    error). `meanwhile` runs here first, once the child is reading: the command line loads the comparison's
    modules then. `ahead` is what the caller will derive from the npu run alone (kept with it, `DumpGraph.memo`;
    a module-level function): the child runs it once the run is written and sends what it derived (arrays) after
    the run. `ahead_bench` is the same for the bench run, run here once it is read, while the child still reads
    or derives; `ahead_loaded` is more to derive from the npu run, by whichever process gets to it first: here once
    the run is loaded (while the child runs `ahead`), or the child once it has derived `ahead` while this process
    still reads. So each process has its share of the work besides its read, whichever read ends first, and this
    one loads the npu run while the child derives from it rather than after.
    """
    if not side_by_side(npu_path, bench_path):
        if meanwhile is not None:
            meanwhile()
        npu = read_graph(npu_path, format)
        for derive in (ahead, ahead_loaded):
            if derive is not None:
                derive(npu)
        bench = read_graph(bench_path, format)
        if ahead_bench is not None:
            ahead_bench(bench)
        return npu, bench
    with _spool() as spool, _Claim() as claim:  # unnamed: nothing is left, however this ends
        reading = Forked(_read_spooled, npu_path, format, spool.fileno(), ahead, ahead_loaded, claim)
        try:
            if meanwhile is not None:
                meanwhile()
            try:
                bench = read_graph(bench_path, format)
            except GraphcmpError:
                _npu_run(reading, npu_path)  # the npu run's error first, as reading them in order would give
                raise
            if ahead_bench is not None:
                ahead_bench(bench)
            return _npu_run(reading, npu_path, spool, ahead_loaded, claim), bench
        finally:
            reading.stop()


def _spool() -> IO[bytes]:
    """An unnamed file for the run handed over: in memory (``memfd_create``) where the system has it, else a
    temporary file. Written and read at once, the run never needs a disk: at 1M nodes per side, writing the 190 MB
    into a memory file took 0.15 s against 0.25 s into a temporary file on the disk."""
    if hasattr(os, "memfd_create"):
        try:
            return open(os.memfd_create("graphcmp-run", os.MFD_CLOEXEC), "w+b")
        except OSError:
            pass
    import tempfile  # only where there is no memfd: 5-8 ms before every command

    return tempfile.TemporaryFile(prefix="graphcmp-run-")


class _Claim:
    """One piece of work that two processes may each do, done by the first that claims it: a pipe holding one
    byte, which one non-blocking read takes (the other finds the pipe empty). Made before forking."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.write(self._write, b"1")
        os.set_blocking(self._read, False)

    def take(self) -> bool:
        """True for the first call in either process, False after."""
        try:
            return os.read(self._read, 1) == b"1"
        except OSError:  # BlockingIOError too: the other process took it
            return False

    def __enter__(self) -> _Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._read)
        os.close(self._write)


def _npu_run(reading: Forked, path: str | os.PathLike[str], spool: IO[bytes] | None = None,
             ahead_loaded: Callable[[DumpGraph], object] | None = None, claim: _Claim | None = None) -> DumpGraph:
    """The run the forked process `reading` read (`_read_spooled`): loaded from `spool`, `ahead_loaded` derived
    from it unless that process claimed it first, then what that process derived; its error raised here. Without
    `spool`, only its error is wanted."""
    message = reading.receive()
    if message is not None and message[0] == "error":
        raise message[1]
    if spool is None:
        return None  # type: ignore[return-value]  # no error: the caller raises its own
    if message is not None and message[0] == "run":
        spool.seek(0)
        graph = load_run(spool)
        if ahead_loaded is not None and (claim is None or claim.take()):
            ahead_loaded(graph)
        message = reading.receive()
        if message is not None and message[0] == "memos":
            # read past the buffer `load_run` filled: it may hold bytes from before the memos were written
            for key, derived in _read_only(pickle.loads(_read_from(spool.fileno(), message[1]))).items():
                graph._cache.setdefault(key, derived)  # the first value of a memo stays (both are equal)
            return graph
        if message is None:  # the process ended after sending the run: its memos are a cache, made again here
            return graph
    if message is not None and message[0] == "graph":
        graph = message[1]
        _read_only(graph._cache)
        if ahead_loaded is not None:
            ahead_loaded(graph)  # a memo already sent with the run is kept as it is
        return graph
    raise RuntimeError(f"{path}: the process reading this run ended without sending it (killed?)")


def _read_spooled(answer: Sender, path: str | os.PathLike[str], format: str | None, spool: int,
                  ahead: Callable[[DumpGraph], object] | None = None,
                  ahead_loaded: Callable[[DumpGraph], object] | None = None, claim: _Claim | None = None) -> None:
    """Read a run, write it into the file `spool` (a descriptor inherited from the parent) and send ``("run",)``;
    derive `ahead` from it, and `ahead_loaded` too when it claims it before the parent has (the parent, still
    reading its own run, would do it later), and write what was derived after the run (``("memos", offset)``).
    When the file cannot take the run (a full disk), the run itself is sent (``("graph", run)``); a bad input's
    error as ``("error", error)``.

    Written into a file rather than sent whole through the pipe, the run is never one pickled bytes object
    here and another one there: at 1M nodes per side that was 0.5 GB in each process at the peak of the comparison.
    The memos are written at an offset of their own (``pwrite``): the parent reads the run through the same open
    file meanwhile.
    """
    try:
        graph = read_graph(path, format)
    except Exception as error:  # whatever it is, the parent raises it as reading the run there would
        answer.send(("error", error))
        return
    try:
        with open(spool, "wb", closefd=False) as file:
            dump_run(graph, file, memos=False)
            end = file.tell()
    except OSError:
        end = -1
    else:
        answer.send(("run",))
    if ahead is not None:
        ahead(graph)
    if ahead_loaded is not None and claim is not None and claim.take():
        ahead_loaded(graph)
    if end < 0:
        answer.send(("graph", graph))
        return
    memos = pickle.dumps(graph._cache, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        _write_at(spool, memos, end)
    except OSError:
        answer.send(("graph", graph))  # the parent loaded the run already: it takes this one instead
        return
    answer.send(("memos", end))


def _read_from(fd: int, offset: int) -> bytes:
    """The bytes of file `fd` from `offset` to its end, read by ``pread`` (no buffer in between)."""
    parts, size = [], os.fstat(fd).st_size
    while offset < size:
        part = os.pread(fd, size - offset, offset)
        if not part:
            break
        parts.append(part)
        offset += len(part)
    return b"".join(parts)


def _write_at(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _read_only(memos: dict[str, Any]) -> dict[str, Any]:
    """`memos` with their arrays read-only again (what was derived from a run stays as it was made)."""
    for derived in memos.values():
        if isinstance(derived, np.ndarray):
            derived.flags.writeable = False
    return memos


def dump_run(graph: DumpGraph, file: IO[bytes], *, memos: bool = True) -> None:
    """Pickle `graph` into `file` a part at a time (each of its fields, each column of its tables), for `load_run`;
    with ``memos=False`` without what was derived from it (`DumpGraph.memo`).

    Each part has a pickle memo of its own: one memo for the whole run would hold every object of it (a million-node
    run: tens of millions of entries, a third of the pickling time). A table's parts are those its own pickling
    gives (`FrozenColumns.__reduce__`: the node ids as one text).
    """
    for f in fields(graph):
        value = getattr(graph, f.name) if memos or f.name != "_cache" else {}
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
    _read_only(values["_cache"])  # what was derived from the run (`DumpGraph.memo`) stays read-only
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
