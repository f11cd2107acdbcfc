"""The result files of a job's results folder: what `graphcmp compare NPU_ROOT BENCH_ROOT -o results/` writes.

A folder is read from its ``index.json`` when present (the ``runs`` of a batch index,
``{"results": [{"file": "step0_rank0.npz", "step": 0, "rank": 0}, ...]}`` or a bare list; files relative to the
folder and inside it; runs the batch could not compare are left out), else from the files named
``step<K>_rank<N>.npz`` (or ``.json``) in it. The viewer serves such a folder and `graphcmp export` writes it
into one `.vis.db`, both through `folder_results`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.jsonio import read_json

__all__ = ["INDEX_FILE", "FolderResult", "folder_results"]

INDEX_FILE = "index.json"
_STEP_RANK = re.compile(r"^step(?P<step>\d+)_rank(?P<rank>\d+)\.(?:npz|json)$")


@dataclass(frozen=True, slots=True)
class FolderResult:
    """One result file of a results folder, with the step and rank it holds (None: not known).

    `replica` is the data-parallel replica of a merged run (None: not one of several).
    """

    path: Path
    step: int | None
    rank: int | None
    replica: int | None = None


def folder_results(folder: str | os.PathLike[str]) -> tuple[list[FolderResult], Any]:
    """The result files of `folder`, ordered by step then rank, and its parsed ``index.json`` (None without one).

    Raises
    ------
    DumpFormatError
        If the index is malformed, names a file outside the folder or one that is missing, the folder holds no
        results, or two results have the same step and rank.
    """
    folder = Path(folder)
    index = folder / INDEX_FILE
    doc = read_json(index, salvage=False).value if index.is_file() else None
    if doc is not None:
        items = _index_items(index, doc)
    else:
        items = [(p.name, int(m["step"]), int(m["rank"]), None) for p in sorted(folder.iterdir())
                 if (m := _STEP_RANK.match(p.name))]
    if not items:
        raise DumpFormatError(f"{folder}: no index.json and no step<K>_rank<N>.npz result files in the folder")
    root = folder.resolve()
    results = []
    for name, step, rank, replica in sorted(items, key=lambda i: (_none_first(i[1]), _none_first(i[2]),
                                                                   _none_first(i[3]), i[0])):
        path = (folder / name).resolve()
        if root not in path.parents:
            raise DumpFormatError(f"{index}: {name!r} is outside the results folder")
        if not path.is_file():
            raise DumpFormatError(f"{path}: listed result file not found")
        results.append(FolderResult(path, step, rank, replica))
    if len({(r.step, r.rank, r.replica) if (r.step, r.rank) != (None, None) else r.path for r in results}
           ) != len(results):
        raise DumpFormatError(f"{folder}: two results have the same step and rank")
    return results, doc


def _none_first(v: int | None) -> tuple[int, int]:
    return (0, 0) if v is None else (1, v)


def _index_items(index: Path, doc: Any) -> list[tuple[str, int | None, int | None, int | None]]:
    items = doc.get("results", doc.get("runs")) if isinstance(doc, dict) else doc
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
        replica = _int_or_none(item.get("replica"), index, k) if isinstance(item, dict) else None
        out.append((name, _int_or_none(item.get("step"), index, k), _int_or_none(item.get("rank"), index, k),
                    replica))
    return out


def _int_or_none(value: Any, index: Path, k: int) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise DumpFormatError(f"{index}: results[{k}]: step and rank must be integers, got {value!r}")
