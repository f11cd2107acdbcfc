"""Finding the runs under a dump root: one rank folder, all ranks of a step, or all steps.

msprobe writes ``<root>/step<K>/rank<N>/`` (``rank`` without a number in older versions, and
``proc<pid>`` when it did not know the rank). A root may be a rank folder itself, a step folder
holding rank folders, or a folder of step folders. An Ascend raw dump root holding several iteration
folders (``{time}/{device}/{model}/{model_id}/{iteration}``) is one run per iteration (the step) and device (the
rank). Any other input (a graph file) is one run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from graphcmp.core.errors import DumpFormatError

__all__ = ["RunKey", "discover_runs", "is_batch_root", "pair_runs"]

_STEP = re.compile(r"^step(\d+)$")
_RANK = re.compile(r"^rank(\d*)$")
_PROC = re.compile(r"^proc(\d+)$")
_DUMP = "dump.json"


@dataclass(frozen=True, slots=True, order=True)
class RunKey:
    """The (step, rank) a run belongs to; None where the layout does not say."""

    step: int | None
    rank: int | None

    @property
    def label(self) -> str:
        """``step0_rank2``-style name used for result files."""
        step = "stepNA" if self.step is None else f"step{self.step}"
        rank = "rankNA" if self.rank is None else f"rank{self.rank}"
        return f"{step}_{rank}"


def discover_runs(root: str | os.PathLike[str]) -> dict[RunKey, Path]:
    """Every run under `root`, by (step, rank).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> for s, r in [(0, 0), (0, 1), (1, 0)]:
    ...     d = tmp / f"step{s}" / f"rank{r}"; d.mkdir(parents=True); _ = (d / "dump.json").write_text("{}")
    >>> sorted(k.label for k in discover_runs(tmp))
    ['step0_rank0', 'step0_rank1', 'step1_rank0']
    """
    path = Path(root)
    if not path.exists():
        raise DumpFormatError(f"{path}: no such file or folder")
    if path.is_file() or (path / _DUMP).is_file():
        return {_key_of_run(path): path}
    steps = _numbered(path, _STEP)
    if steps:
        runs: dict[RunKey, Path] = {}
        for step, step_dir in steps.items():
            runs.update({RunKey(step, key.rank): run for key, run in _ranks(step_dir, step).items()})
        return runs
    ranks = _ranks(path, _step_of(path))
    if ranks:
        return ranks
    ascend = _ascend_runs(path)
    if len(ascend) > 1:
        return ascend
    return {_key_of_run(path): path}  # let the reader say what is wrong with it


def is_batch_root(path: str | os.PathLike[str]) -> bool:
    """True when `path` holds more than one run (or is a step/rank layout rather than a run)."""
    p = Path(path)
    return p.is_dir() and not (p / _DUMP).is_file() and bool(_numbered(p, _STEP) or _ranks(p, None)
                                                             or len(_ascend_runs(p)) > 1)


def _ascend_runs(path: Path) -> dict[RunKey, Path]:
    """The iteration folders of an Ascend raw dump below `path` by (iteration, device); empty when it holds none,
    or when two of them share a key (several models on one device: each is compared on its own)."""
    if not path.is_dir():
        return {}
    from graphcmp.core.readers.ascend_dump import find_iterations, step_and_rank  # see tests/test_layers.py

    runs: dict[RunKey, Path] = {}
    for folder in find_iterations(path):
        key = RunKey(*step_and_rank(folder))
        if key in runs or key.step is None:
            return {}
        runs[key] = folder
    return runs


def pair_runs(npu_root: str | os.PathLike[str], bench_root: str | os.PathLike[str]
              ) -> tuple[dict[RunKey, tuple[Path, Path]], list[RunKey], list[RunKey]]:
    """Runs present on both sides, and the keys only the npu or only the bench side has."""
    npu, bench = discover_runs(npu_root), discover_runs(bench_root)
    if len(npu) == 1 and len(bench) == 1:
        (nk, np_), (bk, bp) = next(iter(npu.items())), next(iter(bench.items()))
        return {nk if nk == bk else RunKey(nk.step, nk.rank): (np_, bp)}, [], []
    both = {k: (npu[k], bench[k]) for k in sorted(npu.keys() & bench.keys(), key=_sort_key)}
    only_npu = sorted(npu.keys() - bench.keys(), key=_sort_key)
    only_bench = sorted(bench.keys() - npu.keys(), key=_sort_key)
    return both, only_npu, only_bench


def _sort_key(key: RunKey) -> tuple[int, int]:
    return (-1 if key.step is None else key.step, -1 if key.rank is None else key.rank)


def _numbered(path: Path, pattern: re.Pattern[str]) -> dict[int, Path]:
    found = {}
    for child in path.iterdir():
        m = pattern.match(child.name)
        if m and child.is_dir():
            found[int(m.group(1)) if m.group(1) else 0] = child
    return dict(sorted(found.items()))


def _ranks(path: Path, step: int | None) -> dict[RunKey, Path]:
    if not path.is_dir():
        return {}
    ranks = {RunKey(step, rank): run for rank, run in _numbered(path, _RANK).items() if (run / _DUMP).is_file()}
    procs = [p for p in sorted(path.iterdir()) if _PROC.match(p.name) and (p / _DUMP).is_file()]
    for index, proc in enumerate(procs):  # msprobe did not know the rank: order by pid
        ranks.setdefault(RunKey(step, len(ranks) + index if ranks else index), proc)
    return ranks


def _step_of(path: Path) -> int | None:
    m = _STEP.match(path.name)
    return int(m.group(1)) if m else None


def _key_of_run(path: Path) -> RunKey:
    m = _RANK.match(path.name)
    rank = (int(m.group(1)) if m.group(1) else 0) if m else None
    return RunKey(_step_of(path.parent) if m else None, rank)
