"""The results a viewer serves: one report or graph file, a folder of per-step/rank reports, or two dump folders.

The set is fixed at start-up: the browser names an entry by its key and never sends a path, so
nothing it asks for reaches the disk beyond the files listed here. The entry a page opens on (the
first, or the origin's step and rank in a batch job) is read at start-up (a missing or corrupt file
is a `GraphcmpError` before the server starts); others are read when first selected and a few are
kept in memory.

A folder is read from its ``index.json`` when present (the ``runs`` of a `graphcmp compare` batch
index, ``{"results": [{"file": "step0_rank0.json", "step": 0, "rank": 0}, ...]}`` or a bare list;
files relative to the folder and inside it; runs the batch could not compare are left out), else
from the files named ``step<K>_rank<N>.json`` in it.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphcmp.app.job import JobIndex
from graphcmp.core.compare import apply_manual_matches, compare_paths, load_document
from graphcmp.core.distributed.batch import BATCH_FORMAT
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.jsonio import read_json
from graphcmp.core.matching.manual import load_manual_matches, sidecar_path
from graphcmp.core.records import DumpGraph
from graphcmp.core.report import CompareReport

__all__ = ["Document", "Entry", "ResultSet", "load_entry", "open_results"]

Document = CompareReport | DumpGraph
_STEP_RANK = re.compile(r"^step(?P<step>\d+)_rank(?P<rank>\d+)\.json$")
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

    @property
    def title(self) -> str:
        if self.step is None and self.rank is None:
            return Path(self.source).name or self.source
        return f"step {'-' if self.step is None else self.step} · rank {'-' if self.rank is None else self.rank}"


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
        index = paths[0] / "index.json"
        doc = read_json(index, salvage=False).value if index.is_file() else None
        results = ResultSet(_folder_entries(paths[0], doc), load_entry)
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


def _folder_entries(folder: Path, doc: Any) -> list[Entry]:
    index = folder / "index.json"
    if doc is not None:
        items = _index_items(index, doc)
    else:
        items = [(p.name, int(m["step"]), int(m["rank"])) for p in sorted(folder.iterdir())
                 if (m := _STEP_RANK.match(p.name))]
    if not items:
        raise DumpFormatError(f"{folder}: no index.json and no step<K>_rank<N>.json result files in the folder")
    entries = []
    root = folder.resolve()
    for name, step, rank in sorted(items, key=lambda i: (_none_first(i[1]), _none_first(i[2]), i[0])):
        path = (folder / name).resolve()
        if root not in path.parents:
            raise DumpFormatError(f"{index}: {name!r} is outside the results folder")
        if not path.is_file():
            raise DumpFormatError(f"{path}: listed result file not found")
        entries.append(Entry(f"s{_key(step)}r{_key(rank)}" if (step, rank) != (None, None) else name,
                             step, rank, str(path), str(sidecar_path(path))))
    if len({e.key for e in entries}) != len(entries):
        raise DumpFormatError(f"{folder}: two results have the same step and rank")
    return entries


def _key(v: int | None) -> str:
    return "" if v is None else str(v)


def _index_items(index: Path, doc: Any) -> list[tuple[str, int | None, int | None]]:
    items = (doc.get("results", doc.get("runs")) if isinstance(doc, dict) else doc)
    if not isinstance(items, list):
        raise DumpFormatError(f"{index}: expected a list of results (or {{\"results\": [...]}}, "
                              "or a graphcmp batch index with \"runs\")")
    out = []
    for k, item in enumerate(items):
        if isinstance(item, dict) and item.get("error"):  # a run the batch could not compare: nothing to show
            continue
        name = item.get("file", item.get("path")) if isinstance(item, dict) else None
        if not isinstance(name, str):
            raise DumpFormatError(f"{index}: results[{k}] has no \"file\" name")
        out.append((name, _int_or_none(item.get("step"), index, k), _int_or_none(item.get("rank"), index, k)))
    return out


def _int_or_none(value: Any, index: Path, k: int) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise DumpFormatError(f"{index}: results[{k}]: step and rank must be integers, got {value!r}")
