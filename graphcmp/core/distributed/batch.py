"""Comparing every (step, rank) of a job on a local process pool or a Dask cluster, resumably.

Each run reads one npu/bench pair, compares it, writes ``<out>/<stepK_rankN>.npz`` (the npz result
container, docs/format.md) and then a small entry ``<out>/entries/<stepK_rankN>.json`` (counts, first
divergence, communication calls, a module-level heat row). The worker writes both files itself and
hands back only (label, error): nothing large crosses the process boundary or a Dask scheduler.
Runs are submitted in chunks (a few per worker slot, smaller towards the end) so that per-task overhead
stays small and the workers finish together.
``index.json`` gathers the entries, the cross-rank links and the job-level divergence; the viewer's
overview reads only it.

**Resume.** An entry carries the run's `run_key`: a digest of every input file (path inside the
run, size, mtime in ns, inode), of the run paths, of the options that change results (fuzzy,
tensors, the rule specs, the content of the thresholds and mapping files, the reference job and every file of the
run's reference run) and of the graphcmp
version; and the size of its result file. A later batch into the same folder keeps a run only when
its key is the same and its result file is complete (that size, and a zip whose central directory
lists members that fit in the file); any other run is compared again.

**Stopping.** SIGTERM (and Ctrl-C) stop the local workers before the call returns (`BatchStopped`);
each local worker also asks Linux to kill it when its parent dies (``PR_SET_PDEATHSIG``, a
watchdog thread on other systems), so a ``kill -9`` of the parent leaves no worker behind. On Dask the
pending tasks are cancelled.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import signal
import socket
import stat
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphcmp._version import __version__
from graphcmp.core.distributed.allocator import reused_allocations
from graphcmp.core.distributed.crossrank import job_analysis
from graphcmp.core.distributed.layout import RunKey, discover_runs, pair_runs
from graphcmp.core.distributed.links import comm_calls
from graphcmp.core.errors import DumpFormatError, GraphcmpError, OutputError
from graphcmp.core.hierarchy import depths
from graphcmp.core.jsonio import dumps_strict, read_json, sanitize_floats
from graphcmp.core.outputs import checked_output, write_atomic
from graphcmp.core.readers import read_graph
from graphcmp.core.readers.msprobe import compiled_reads, reusing_structure
from graphcmp.core.readers.msprobe_scan import build_in_background, kernels_can_be_built
from graphcmp.core.rules import load_thresholds
from graphcmp.core.tensorcmp import tensor_metrics_for

__all__ = ["BATCH_FORMAT", "INDEX_FILE", "BatchOptions", "BatchStopped", "batch_summary", "compare_run",
           "is_batch_result", "load_index", "run_batch", "run_key"]

BATCH_FORMAT = "graphcmp.batch"
INDEX_FILE = "index.json"
ENTRIES = "entries"
HEAT_DEPTH = 2  # module rows of the rank x module overview: the root's children and grandchildren
CHUNKS_PER_SLOT = 4  # a chunk is about 1/4 of a slot's share of what is left: few tasks, balanced, live progress
MAX_CHUNK = 32

Progress = Callable[[int, int, str], None]
Task = tuple[str, str, "int | None", "int | None", str, str]  # npu, bench, step, rank, run key, reference run ("")


@dataclass(frozen=True, slots=True)
class BatchOptions:
    """What every task of a batch is asked to do."""

    fuzzy: bool = True
    thresholds_file: str | None = None
    tensors: bool = True
    rules: tuple[str, ...] = ()  # matcher specs of rule sources (mapping files ...), see matching.specs
    reference: str | None = None  # a reference job: its run of each (step, rank) measures the noise (core/reference.py)


class BatchStopped(KeyboardInterrupt):
    """The batch was stopped by a signal; its workers are gone, finished runs are kept for a resume."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def run_batch(
    npu_root: str | os.PathLike[str],
    bench_root: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    options: BatchOptions | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Compare every run found under both roots; return the index (also written to ``out_dir/index.json``).

    Parameters
    ----------
    npu_root, bench_root : path
        A rank folder, a step folder of rank folders, or a folder of step folders.
    out_dir : path
        Where result files, entries and the index go (created). Runs finished there by an earlier
        batch with the same inputs and options are kept (see the module docstring).
    options : BatchOptions, optional
        Per-task comparison options.
    workers : int, optional
        Local worker processes. Defaults to the number of cores.
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:8786``); tasks then run on its workers,
        which must see `out_dir` (they write the result files).
    progress : callable, optional
        Called as ``progress(done, total, label)`` after each finished chunk of runs.

    Raises
    ------
    BatchStopped
        On SIGTERM (the workers are stopped first).
    """
    options = options or BatchOptions()
    out = checked_output(out_dir, (npu_root, bench_root))
    pairs, only_npu, only_bench = pair_runs(npu_root, bench_root)
    if not pairs:
        raise DumpFormatError(f"{npu_root} / {bench_root}: no (step, rank) run is on both sides "
                              f"(npu only: {[k.label for k in only_npu]}, bench only: {[k.label for k in only_bench]})")
    try:
        (out / ENTRIES).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"{out}: cannot create the results folder ({err.strerror})") from err
    digest = options_digest(options)
    references = reference_runs(options.reference, pairs) if options.reference else {}
    todo = [(str(n), str(b), key.step, key.rank, run_key(n, b, digest, references.get(key)), references.get(key, ""))
            for key, (n, b) in pairs.items()]
    todo = [task for task in todo if not _done(out, RunKey(task[2], task[3]), task[4])]
    done = len(pairs) - len(todo)
    if progress and done:
        progress(done, len(pairs), "resumed")
    if todo:
        _remove_index(out)  # until the new one is written, no index disagrees with the results beside it
        with _stop_on_sigterm(), _pool(workers, scheduler, len(todo)) as (pool, slots):
            futures = [pool.submit(compare_runs, chunk, str(out), options) for chunk in _chunks(todo, slots)]
            for future in as_completed(futures):
                labels = future.result()
                done += len(labels)
                if progress:
                    progress(done, len(pairs), labels[-1])
    index = _index(out, pairs, only_npu, only_bench, npu_root, bench_root, options)
    write_atomic(out / INDEX_FILE, dumps_strict(index))
    return index


def _remove_index(out: Path) -> None:
    try:
        (out / INDEX_FILE).unlink(missing_ok=True)
    except OSError as err:
        raise OutputError(f"{out / INDEX_FILE}: cannot replace the index ({err.strerror})") from err


COMPILED_READS_FROM = 8
"""Runs of a pool task from which its dump.json files are read by the compiled pass where its kernels cannot be built
ahead of time (loading numba, about 0.3 s once per worker, is repaid by about 25 ms saved per 5,000-node run read).
Where they can be and are not yet, they are built in the background meanwhile (`msprobe_scan.build_in_background`:
a build takes about a minute, 2,600 such reads) and the runs read by the chunked read until they are. Once built, every
read takes the pass."""


def compare_runs(tasks: list[Task], out_dir: str, options: BatchOptions) -> list[str]:
    """One task of the pool: compare each run of `tasks`, write its result file and entry; return their labels.

    The thresholds file is read once per task. Rule matchers are built per run: they keep state of
    the comparison they serve. A run whose structure (construct.json and the dump's ids) is that of the run read
    before it reuses its node columns (`reusing_structure`); the memory a run frees is reused by the next on a worker
    started to hand it back eagerly (`reused_allocations`: a Dask nanny's workers).
    """
    out = Path(out_dir)
    try:
        thresholds: Any = load_thresholds(options.thresholds_file) if options.thresholds_file else None
    except GraphcmpError as err:
        thresholds = err
    labels = []
    # the structure kept is freed before the memory is handed back; the kernels are loaded once for a worker's runs
    many = len(tasks) >= COMPILED_READS_FROM or "numba" in sys.modules  # the last chunks are short: loaded already
    if kernels_can_be_built():  # built ahead of time, or to be: never numba's dispatchers
        many = False
        build_in_background()  # nothing when they are built or being built
    with reused_allocations(), reusing_structure(), compiled_reads(many):
        for npu, bench, step, rank, key, reference in tasks:
            entry = compare_run(npu, bench, out_dir, step, rank, options, key=key, thresholds=thresholds,
                                reference=reference or None)
            label = RunKey(step, rank).label
            write_atomic(out / ENTRIES / f"{label}.json", dumps_strict(entry))
            labels.append(label)
    return labels


def compare_run(npu: str, bench: str, out_dir: str, step: int | None, rank: int | None,
                options: BatchOptions, *, key: str | None = None, thresholds: Any = None,
                reference: str | None = None) -> dict[str, Any]:
    """Compare one run pair, write its result file, return its index entry (never raises bad input).

    `key` (`run_key`) is stored in the entry with the result file's size: what a resume checks.
    `thresholds` are those of `options` when already loaded (or the error loading them raised). `reference` is
    the reference run of this (step, rank) (`reference_runs`), when the batch has one.
    """
    from graphcmp.core.compare import compare_graphs
    from graphcmp.core.matching.specs import matchers_from_specs
    from graphcmp.core.report import save_report

    run = RunKey(step, rank)
    entry: dict[str, Any] = {"step": step, "rank": rank, "npu": npu, "bench": bench, "file": f"{run.label}.npz",
                             "key": key}
    try:
        if isinstance(thresholds, GraphcmpError):
            raise thresholds
        if thresholds is None and options.thresholds_file:
            thresholds = load_thresholds(options.thresholds_file)
        npu_graph, bench_graph = read_graph(npu), read_graph(bench)  # tasks already run side by side
        tensors = tensor_metrics_for(npu_graph, bench_graph) if options.tensors else None
        matchers = matchers_from_specs([*options.rules, "exact", *(["fuzzy"] if options.fuzzy else [])]) \
            if options.rules else None
        ref_graph = read_graph(reference) if reference else None
        ref_tensors = tensor_metrics_for(ref_graph, bench_graph) if options.tensors and ref_graph else None
        report = compare_graphs(npu_graph, bench_graph, fuzzy=options.fuzzy, matchers=matchers,
                                thresholds=thresholds, tensor_metrics=tensors, reference=ref_graph,
                                reference_metrics=ref_tensors)
        result = Path(out_dir) / entry["file"]
        save_report(report, result)
        analysis = report.analysis()
    except GraphcmpError as err:
        return {**entry, "error": str(err)}
    first = analysis.first
    return {
        **entry,
        "bytes": result.stat().st_size,
        "error": None,
        "summary": report.summary(),
        "first": None if first is None else {**first.to_dict(), "position": report.npu.row(first.node)},
        "comm": [c.to_list() for c in comm_calls(report.npu, rank if rank is not None else 0)],
        "heat": _heat_rows(report),
    }


def options_digest(options: BatchOptions) -> str:
    """Digest of what changes a run's result besides its inputs: options, the content of option files, version.

    A file that cannot be read digests as such (its runs then fail and are never kept).
    """
    files = [options.thresholds_file, *(spec.partition("=")[2] for spec in options.rules)]
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((__version__, options.fuzzy, options.tensors, options.rules, options.thresholds_file,
                   options.reference)).encode())
    for name in files:
        if name:
            h.update(_file_digest(Path(name)).encode())
    return h.hexdigest()


def run_key(npu: str | os.PathLike[str], bench: str | os.PathLike[str], options: str,
            reference: str | os.PathLike[str] | None = None) -> str:
    """Digest of a run: both paths (and its `reference` run's), every file under them (name, size, mtime in ns,
    inode) and `options`.

    Writing a file changes its mtime (and usually its size); replacing it changes its inode: a run
    made from other inputs gets another key. Statting is cheap (no file is read): about 1 µs a file.
    """
    h = hashlib.blake2b(options.encode(), digest_size=16)
    for side in (npu, bench, *([reference] if reference else [])):
        h.update(os.fsencode(side) + b"\0")
        for name, st in _stamps(Path(side)):
            h.update(os.fsencode(name) + f"\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode())
    return h.hexdigest()


def reference_runs(root: str | os.PathLike[str], pairs: dict[RunKey, Any]) -> dict[RunKey, str]:
    """The run of a reference job for each (step, rank) of `pairs` (a job of one run serves a batch of one).

    Raises
    ------
    DumpFormatError
        If the reference job lacks a run the batch compares: its noise could not be measured there.
    """
    runs = discover_runs(root)
    if len(runs) == 1 and len(pairs) == 1:
        return {next(iter(pairs)): str(next(iter(runs.values())))}
    missing = [key.label for key in pairs if key not in runs]
    if missing:
        raise DumpFormatError(f"{root}: the reference job has no run for {', '.join(missing[:5])}"
                              f"{' ...' if len(missing) > 5 else ''} (it needs the layout of the npu job)")
    return {key: str(runs[key]) for key in pairs}


def _stamps(path: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(name relative to `path`, stat) of `path` itself or of every file under it, symbolic links followed once."""
    try:
        top = path.stat()
    except OSError:
        yield "", _MISSING
        return
    if not stat.S_ISDIR(top.st_mode):
        yield "", top
        return
    seen, stack = {(top.st_dev, top.st_ino)}, [("", path)]
    while stack:
        prefix, folder = stack.pop()
        try:
            children = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            yield prefix, _MISSING
            continue
        for child in children:
            name = f"{prefix}/{child.name}" if prefix else child.name
            try:
                st = child.stat()
            except OSError:
                yield name, _MISSING
                continue
            if stat.S_ISDIR(st.st_mode):
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    stack.append((name, Path(child.path)))
            else:
                yield name, st


_MISSING = os.stat_result((0,) * 10)


def _file_digest(path: Path) -> str:
    try:
        return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    except OSError as err:
        return f"unreadable {err.errno}"


def _heat_rows(report: Any) -> list[list]:
    """[node id, worst status, worst severity] of the shallow module rows of the npu graph."""
    depth = depths(report.npu.nodes.parent)
    rows = np.flatnonzero((depth >= 1) & (depth <= HEAT_DEPTH)).tolist()
    v = report.verdicts
    return [[report.npu.nodes.ids[r], int(v.worst[r]), float(v.worst_severity[r])] for r in rows]


def _done(out: Path, run: RunKey, key: str) -> bool:
    """True when `run` was finished by a batch with the same key and its result file is complete."""
    entry = out / ENTRIES / f"{run.label}.json"
    if not entry.is_file():
        return False
    try:
        doc = read_json(entry, salvage=False).value
    except GraphcmpError:
        return False
    if not isinstance(doc, dict) or doc.get("error") is not None or doc.get("key") != key:
        return False
    file = doc.get("file")
    return isinstance(file, str) and file == f"{run.label}.npz" and _complete(out / file, doc.get("bytes"))


def _complete(path: Path, size: Any) -> bool:
    """True when `path` is a regular file of `size` bytes and a zip whose every member lies inside it."""
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return False
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return False
    return bool(members) and all(m.header_offset + m.compress_size <= st.st_size for m in members)


def _index(out: Path, pairs: dict[RunKey, Any], only_npu: list[RunKey], only_bench: list[RunKey],
           npu_root: Any, bench_root: Any, options: BatchOptions) -> dict[str, Any]:
    entries = [read_json(out / ENTRIES / f"{key.label}.json", salvage=False).value for key in pairs]
    return {  # entries were written by orjson, which writes no NaN or Infinity: only the analysis needs making safe
        "format": BATCH_FORMAT,
        "schema_version": 1,
        "tool": {"name": "graphcmp", "version": __version__},
        "inputs": {"npu": str(npu_root), "bench": str(bench_root)},
        "options": {"fuzzy": options.fuzzy, "thresholds_file": options.thresholds_file, "tensors": options.tensors,
                    "rules": list(options.rules), **({"reference": options.reference} if options.reference else {})},
        "missing": {"npu_only": [k.label for k in only_npu], "bench_only": [k.label for k in only_bench]},
        "runs": entries,
        "analysis": sanitize_floats(job_analysis(entries)),
    }


def is_batch_result(path: str | os.PathLike[str]) -> bool:
    """True for a results folder holding index.json, or a batch index.json itself."""
    path = Path(path)
    return (path / INDEX_FILE).is_file() or (path.name == INDEX_FILE and path.is_file())


def load_index(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a batch index (the folder or its index.json).

    Raises
    ------
    GraphcmpError
        If it is missing or not a graphcmp batch index.
    """
    path = Path(path)
    file = path / INDEX_FILE if path.is_dir() else path
    doc = read_json(file, salvage=False).value
    if not isinstance(doc, dict) or doc.get("format") != BATCH_FORMAT:
        raise DumpFormatError(f"{file}: not a graphcmp batch index")
    return doc


def _chunks(tasks: list[Task], slots: int) -> list[list[Task]]:
    """`tasks` in consecutive chunks, each about 1 / (`CHUNKS_PER_SLOT` x worker slots) of the runs still left (at most
    `MAX_CHUNK`, at least one): chunks shrink towards the end, so that no worker waits long for the last ones.

    Chunks of equal size left one worker idle for most of a chunk (about 8 s of 175 at 1,024 runs of 5,000 nodes
    on 2 workers); the chunks a pool takes last are now a run or two.
    """
    share = max(slots, 1) * CHUNKS_PER_SLOT
    chunks, start = [], 0
    while start < len(tasks):
        size = max(1, min(MAX_CHUNK, math.ceil((len(tasks) - start) / share)))
        chunks.append(tasks[start:start + size])
        start += size
    return chunks


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into `BatchStopped` in the main thread, so that the pool is stopped on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise BatchStopped(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _executor(workers: int | None, scheduler: str | None, tasks: int) -> Iterator[Executor]:
    """Local processes (stopped with the caller, see `_pool`), or the Dask cluster at `scheduler`."""
    with _pool(workers, scheduler, tasks) as (executor, _slots):
        yield executor


@contextmanager
def _pool(workers: int | None, scheduler: str | None, tasks: int) -> Iterator[tuple[Executor, int]]:
    """(executor, worker slots): local processes, or the Dask cluster at `scheduler`."""
    if scheduler:
        with _dask_client(scheduler) as client:
            executor = client.get_executor()
            try:
                yield executor, max(1, sum(client.nthreads().values()))
            except BaseException:
                executor.shutdown(wait=False)  # cancels what is pending or running
                raise
            executor.shutdown(wait=True)
        return
    count = max(1, min(workers or os.cpu_count() or 1, max(tasks, 1)))
    pool = ProcessPoolExecutor(max_workers=count, initializer=_worker_start, initargs=(os.getpid(),))
    try:
        yield pool, count
    except BaseException:
        _stop_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Kill the pool's processes now (the executor has no public way before Python 3.14), cancel the rest, and wait
    for the pool's manager thread to end.

    The wait matters: a manager thread still closing its wake-up pipe when the interpreter exits races with the
    exit hook that writes to that pipe (CPython 3.11), which then prints an OSError traceback after our message.
    """
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.kill()
    for process in processes:
        process.join(5)
    if manager is not None:
        manager.join(5)


_PR_SET_PDEATHSIG = 1


def _worker_start(parent: int) -> None:
    """Initializer of a local worker: leave stopping to the parent, and die with it.

    The worker ignores SIGINT (Ctrl-C reaches the whole process group; the parent stops the pool)
    and takes SIGTERM's default action (a forked worker would inherit the parent's handler). On
    Linux the kernel sends it SIGKILL when its parent ends, however it ends; elsewhere a thread
    checks every second that the parent is still there.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
            if os.getppid() != parent:  # the parent died before the request took effect
                os._exit(1)
            return
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="graphcmp-parent-watch").start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


@contextmanager
def _dask_client(scheduler: str) -> Iterator[Any]:
    try:
        from distributed import Client  # optional dependency: pip install graphcmp[dask]
    except ImportError as err:
        raise GraphcmpError("--scheduler needs Dask: pip install 'graphcmp[dask]'") from err
    try:
        _check_reachable(scheduler)
        client = Client(scheduler, timeout=20)
    except (OSError, TimeoutError, ValueError) as err:
        raise GraphcmpError(f"{scheduler}: cannot reach the Dask scheduler ({err}); "
                            "give its address as tcp://HOST:PORT") from err
    with client:
        yield client


def _check_reachable(scheduler: str) -> None:
    """Fail at once on a refused TCP address (Dask itself retries until its timeout)."""
    host, _, port = scheduler.removeprefix("tcp://").rpartition(":")
    if host and port.isdigit():
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()


def batch_summary(index: dict[str, Any]) -> dict[str, Any]:
    """Per (step, rank): node and match counts, verdicts, communication calls linked and unlinked."""
    unlinked: dict[tuple, int] = {}
    for step, result in index["analysis"]["steps"].items():
        for call in result["unlinked_calls"]:
            key = (step, call["rank"])
            unlinked[key] = unlinked.get(key, 0) + 1
    runs = []
    for entry in index["runs"]:
        row: dict[str, Any] = {"step": entry["step"], "rank": entry["rank"], "file": entry["file"],
                               "error": entry.get("error"), **({"merged": True} if entry.get("merged") else {}),
                               **({"replica": entry["replica"], "ranks": entry.get("ranks")}
                                  if "replica" in entry else {})}
        if entry.get("error") is None:
            summary = entry["summary"]
            calls = len(entry["comm"])
            missing = unlinked.get((str(entry["step"]), entry["rank"] or 0), 0)
            row.update({"nodes": {"npu": summary["npu"]["nodes"], "bench": summary["bench"]["nodes"]},
                        "matched": summary["matched"], "verdicts": summary["verdicts"],
                        "roles": summary.get("roles", {}), "precision": summary.get("precision", {}),
                        "comm": {"nodes": calls, "linked": calls - missing, "unlinked": missing},
                        "first": entry["first"]["node"] if entry.get("first") else None})
        runs.append(row)
    origin = index["analysis"]["origin"]
    fields = ("step", "rank", "node", "module", "cause", "source_id", "ranks")
    return {"runs": runs, "missing": index["missing"],
            "origin": None if origin is None else {k: origin.get(k) for k in fields}}
