"""Comparing every (step, rank) of a job: one task per run on a process pool or a Dask cluster.

Each task reads one npu/bench pair, compares it, writes ``<out>/<stepK_rankN>.npz`` (the npz result
container, docs/format.md) and a small entry ``<out>/entries/<stepK_rankN>.json`` (counts, first
divergence, communication calls, a module-level heat row). Entries are written as tasks finish, so
an interrupted batch resumes without redoing finished runs. ``index.json`` gathers the entries, the
cross-rank links and the job-level divergence; the viewer's overview reads only it.

Local processes and Dask run the same code: both are `concurrent.futures` executors
(`distributed.Client.get_executor`), tasks are submitted per run and gathered as they complete.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphcmp._version import __version__
from graphcmp.core.distributed.crossrank import job_analysis
from graphcmp.core.distributed.layout import RunKey, pair_runs
from graphcmp.core.distributed.links import comm_calls
from graphcmp.core.errors import DumpFormatError, GraphcmpError, OutputError
from graphcmp.core.hierarchy import depths
from graphcmp.core.jsonio import dumps_strict, read_json, sanitize_floats
from graphcmp.core.outputs import checked_output, write_atomic
from graphcmp.core.readers import read_graph
from graphcmp.core.rules import load_thresholds
from graphcmp.core.tensorcmp import tensor_metrics_for

__all__ = ["BATCH_FORMAT", "INDEX_FILE", "BatchOptions", "batch_summary", "compare_run", "is_batch_result",
           "load_index", "run_batch"]

BATCH_FORMAT = "graphcmp.batch"
INDEX_FILE = "index.json"
ENTRIES = "entries"
HEAT_DEPTH = 2  # module rows of the rank x module overview: the root's children and grandchildren

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class BatchOptions:
    """What every task of a batch is asked to do."""

    fuzzy: bool = False
    thresholds_file: str | None = None
    tensors: bool = True
    rules: tuple[str, ...] = ()  # matcher specs of rule sources (mapping files ...), see matching.specs


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
        Where result files, entries and the index go (created).
    options : BatchOptions, optional
        Per-task comparison options.
    workers : int, optional
        Local worker processes. Defaults to the number of cores.
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:8786``); tasks then run on its workers.
    progress : callable, optional
        Called as ``progress(done, total, label)`` after each finished run.
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
    todo = {key: paths for key, paths in pairs.items() if not _done(out, key)}
    done = len(pairs) - len(todo)
    if progress and done:
        progress(done, len(pairs), "resumed")
    with _executor(workers, scheduler, len(todo)) as pool:
        futures = {pool.submit(compare_run, str(n), str(b), str(out), key.step, key.rank, options): key
                   for key, (n, b) in todo.items()}
        for future in as_completed(futures):
            entry = future.result()
            write_atomic(out / ENTRIES / f"{futures[future].label}.json", dumps_strict(entry))
            done += 1
            if progress:
                progress(done, len(pairs), futures[future].label)
    index = _index(out, pairs, only_npu, only_bench, npu_root, bench_root, options)
    write_atomic(out / INDEX_FILE, dumps_strict(index))
    return index


def compare_run(npu: str, bench: str, out_dir: str, step: int | None, rank: int | None,
                options: BatchOptions) -> dict[str, Any]:
    """One task: compare one run pair, write its result file, return its index entry (never raises bad input)."""
    from graphcmp.core.compare import compare_graphs
    from graphcmp.core.matching.specs import matchers_from_specs
    from graphcmp.core.report import save_report

    key = RunKey(step, rank)
    entry: dict[str, Any] = {"step": step, "rank": rank, "npu": npu, "bench": bench, "file": f"{key.label}.npz"}
    try:
        thresholds = load_thresholds(options.thresholds_file) if options.thresholds_file else None
        npu_graph, bench_graph = read_graph(npu), read_graph(bench)  # tasks already run side by side
        tensors = tensor_metrics_for(npu_graph, bench_graph) if options.tensors else None
        matchers = matchers_from_specs([*options.rules, "exact", *(["fuzzy"] if options.fuzzy else [])]) \
            if options.rules else None
        report = compare_graphs(npu_graph, bench_graph, fuzzy=options.fuzzy, matchers=matchers,
                                thresholds=thresholds, tensor_metrics=tensors)
        save_report(report, Path(out_dir) / entry["file"])
        analysis = report.analysis()
    except GraphcmpError as err:
        return {**entry, "error": str(err)}
    first = analysis.first
    return {
        **entry,
        "error": None,
        "summary": report.summary(),
        "first": None if first is None else {**first.to_dict(), "position": report.npu.row(first.node)},
        "comm": [c.to_list() for c in comm_calls(report.npu, rank if rank is not None else 0)],
        "heat": _heat_rows(report),
    }


def _heat_rows(report: Any) -> list[list]:
    """[node id, worst status, worst severity] of the shallow module rows of the npu graph."""
    depth = depths(report.npu.nodes.parent)
    rows = np.flatnonzero((depth >= 1) & (depth <= HEAT_DEPTH)).tolist()
    v = report.verdicts
    return [[report.npu.nodes.ids[r], int(v.worst[r]), float(v.worst_severity[r])] for r in rows]


def _done(out: Path, key: RunKey) -> bool:
    entry = out / ENTRIES / f"{key.label}.json"
    if not entry.is_file():
        return False
    try:
        doc = read_json(entry, salvage=False).value
    except GraphcmpError:
        return False
    return doc.get("error") is None and (out / doc.get("file", "")).is_file()


def _index(out: Path, pairs: dict[RunKey, Any], only_npu: list[RunKey], only_bench: list[RunKey],
           npu_root: Any, bench_root: Any, options: BatchOptions) -> dict[str, Any]:
    entries = [read_json(out / ENTRIES / f"{key.label}.json", salvage=False).value for key in pairs]
    return sanitize_floats({
        "format": BATCH_FORMAT,
        "schema_version": 1,
        "tool": {"name": "graphcmp", "version": __version__},
        "inputs": {"npu": str(npu_root), "bench": str(bench_root)},
        "options": {"fuzzy": options.fuzzy, "thresholds_file": options.thresholds_file, "tensors": options.tensors,
                    "rules": list(options.rules)},
        "missing": {"npu_only": [k.label for k in only_npu], "bench_only": [k.label for k in only_bench]},
        "runs": entries,
        "analysis": job_analysis(entries),
    })


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


@contextmanager
def _executor(workers: int | None, scheduler: str | None, tasks: int) -> Iterator[Executor]:
    if scheduler:
        with _dask_client(scheduler) as client:
            yield client.get_executor()
        return
    count = max(1, min(workers or os.cpu_count() or 1, max(tasks, 1)))
    with ProcessPoolExecutor(max_workers=count) as pool:
        yield pool



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
                               "error": entry.get("error"), **({"merged": True} if entry.get("merged") else {})}
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
