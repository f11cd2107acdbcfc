"""The results a viewer serves: one report or graph file, a folder of per-step/rank reports, or two dump folders.

The set is fixed at start-up: the browser names an entry by its key and never sends a path, so
nothing it asks for reaches the disk beyond the files listed here. The entry a page opens on (the
first, or the origin's step and rank in a batch job) is read at start-up (a missing or corrupt file
is a `GraphcmpError` before the server starts); others are read when first selected and a few are
kept in memory.

A folder lists its results as `graphcmp.core.distributed.results_folder` reads them (its ``index.json``,
else the files named ``step<K>_rank<N>.npz`` or ``.json``).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphcmp.app.job import JobIndex
from graphcmp.core.compare import apply_manual_matches, compare_paths, load_document
from graphcmp.core.distributed.batch import BATCH_FORMAT
from graphcmp.core.distributed.results_folder import folder_results
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.matching.manual import load_manual_matches, sidecar_path
from graphcmp.core.records import DumpGraph
from graphcmp.core.report import CompareReport

__all__ = ["Document", "Entry", "ResultSet", "load_entry", "open_results"]

Document = CompareReport | DumpGraph
_KEEP = 2  # documents kept in memory (a 100k-node report takes about 1 GB)


@dataclass(frozen=True, slots=True)
class Entry:
    """One selectable result: its key (sent to the browser), step, rank and where it comes from.

    `sidecar` is where the manual matches of a result file live (``cmp.json`` -> ``cmp.matches.json``,
    fixed at start-up); empty for two dump folders compared on the spot, which have no file to sit next to.
    """

    key: str
    step: int | None
    rank: int | None
    source: str
    sidecar: str = ""
    replica: int | None = None  # the data-parallel replica of a merged run, when a job has several

    @property
    def title(self) -> str:
        if self.replica is not None:
            return f"step {'-' if self.step is None else self.step} · replica {self.replica}"
        if self.step is None and self.rank is None:
            return Path(self.source).name or self.source
        parts = ([f"step {self.step}"] if self.step is not None else []) + \
            ([f"rank {self.rank}"] if self.rank is not None else [])
        return " · ".join(parts)


class ResultSet:
    """Entries in (step, rank) order and their documents, read on demand and cached.

    Parameters
    ----------
    entries : sequence of Entry
        What can be shown; keys are unique.
    loader : callable
        Reads the document of one entry; raises `GraphcmpError` on bad input.
    """

    def __init__(self, entries: Sequence[Entry], loader: Callable[[Entry], Document]) -> None:
        if not entries:
            raise DumpFormatError("no results to show")
        self.entries = tuple(entries)
        self._by_key = {e.key: e for e in self.entries}
        self._loader = loader
        self._docs: OrderedDict[str, Document] = OrderedDict()
        self._lock = threading.Lock()
        self.job: JobIndex | None = None  # the batch index of a `graphcmp compare -o` folder (job overview)

    @property
    def default(self) -> Entry:
        return self.entries[0]

    @property
    def start(self) -> Entry:
        """The entry a page opens on: the job's origin (its rank and step) when the batch index names one,
        else the first."""
        origin = (self.job.analysis.get("origin") or {}) if self.job is not None else {}
        found = self.find(origin.get("step"), origin.get("rank")) if origin else None
        if found is None and origin.get("replica") is not None:  # a merged job's replica holding the origin
            found = next((e for e in self.entries if e.step == origin.get("step")
                          and e.replica == origin["replica"]), None)
        return found or self.default

    def entry(self, key: str | None) -> Entry:
        """The entry named `key`, or the one a page opens on (`start`) for an unknown key."""
        return self._by_key.get(key or "") or self.start

    def steps(self) -> list[int | None]:
        return sorted({e.step for e in self.entries}, key=_none_first)

    def ranks(self) -> list[int | None]:
        return sorted({e.rank for e in self.entries}, key=_none_first)

    def find(self, step: int | None, rank: int | None) -> Entry | None:
        """The entry of (step, rank), if any."""
        return next((e for e in self.entries if e.step == step and e.rank == rank), None)

    def replace(self, key: str, doc: Document) -> None:
        """Keep `doc` as the document of entry `key` (after manual matches changed it)."""
        with self._lock:
            self._docs[self.entry(key).key] = doc
            self._docs.move_to_end(self.entry(key).key)
            while len(self._docs) > _KEEP:
                self._docs.popitem(last=False)

    def document(self, key: str | None) -> Document:
        """The document of an entry (read on first use; the last few stay in memory)."""
        entry = self.entry(key)
        with self._lock:
            if entry.key in self._docs:
                self._docs.move_to_end(entry.key)
                return self._docs[entry.key]
            doc = self._loader(entry)
            self._docs[entry.key] = doc
            while len(self._docs) > _KEEP:
                self._docs.popitem(last=False)
            return doc


def _none_first(v: int | None) -> tuple[int, int]:
    return (0, 0) if v is None else (1, v)


def open_results(paths: Sequence[str | os.PathLike[str]], **compare_options: Any) -> ResultSet:
    """A `ResultSet` for the command line's arguments; reads the document a page opens on to check it.

    Parameters
    ----------
    paths : sequence of path
        One report/graph file, one folder of report files, or two dump folders (npu, bench)
        compared on the spot with `compare_paths`.
    **compare_options
        Passed to `compare_paths` for two dump folders.

    Raises
    ------
    DumpFormatError
        A path is missing, a folder holds no results, or the first document cannot be read.
    """
    paths = [Path(p) for p in paths]
    for p in paths:
        if not p.exists():
            raise DumpFormatError(f"{p}: no such file or folder")
    if len(paths) == 2:
        npu, bench = paths
        entry = Entry("0", None, None, f"{npu} vs {bench}")
        results = ResultSet([entry], lambda _e: compare_paths(npu, bench, **compare_options))
    elif len(paths) == 1 and paths[0].is_dir():
        entries, doc = _folder_entries(paths[0])
        results = ResultSet(entries, load_entry)
        if isinstance(doc, dict) and doc.get("format") == BATCH_FORMAT:
            results.job = JobIndex(doc)
    elif len(paths) == 1:
        results = ResultSet([Entry("0", None, None, str(paths[0]), str(sidecar_path(paths[0])))], load_entry)
    else:
        raise DumpFormatError("give one result file, one folder of results, or two dump folders (npu, bench)")
    results.document(results.start.key)
    return results


def load_entry(entry: Entry) -> Document:
    """The document of a file entry, with the manual matches of its sidecar applied when the sidecar exists.

    Raises
    ------
    GraphcmpError
        The file or its sidecar cannot be read, or the sidecar is malformed (the message names the file).
    """
    doc = load_document(entry.source)
    if isinstance(doc, CompareReport) and entry.sidecar and Path(entry.sidecar).is_file():
        doc = apply_manual_matches(doc, load_manual_matches(entry.sidecar))
    return doc


def _folder_entries(folder: Path) -> tuple[list[Entry], Any]:
    results, doc = folder_results(folder)
    entries = [Entry(f"s{_key(r.step)}r{_key(r.rank)}" + (f"d{r.replica}" if r.replica is not None else "")
                     if (r.step, r.rank) != (None, None) else r.path.name,
                     r.step, r.rank, str(r.path), str(sidecar_path(r.path)), r.replica) for r in results]
    return entries, doc


def _key(v: int | None) -> str:
    return "" if v is None else str(v)


