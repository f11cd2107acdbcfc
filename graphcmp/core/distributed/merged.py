"""Comparing two parallel jobs of any layouts: each merged into one logical run per step, then compared.

`run_merged` merges both job roots step by step (`graphcmp.core.distributed.merge`), compares the
logical runs with the usual matching, judging and divergence analysis, and writes a results folder
like a per-rank batch: ``<out>/step<K>_merged.json`` (a comparison report whose graphs keep their
shards) and ``index.json`` (format ``graphcmp.batch``, one entry per step with ``"merged": true``,
the layouts, and the job analysis whose origin is the merged first divergence with its rank).

Before judging, `resolve_against` settles what only the other run can tell:

* a replicated tensor whose replicas disagree (a desynchronised rank) shows the replica farthest from
  the bench tensor, so the comparison does not hide it;
* a split tensor whose sliced dimension the structure left open takes the logical shape that agrees
  with the other run's (the bench shape, or a shape both runs' slices can make; when none can, each side
  shows one its own slices make, and the judge reports the shapes that cannot agree).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from graphcmp._version import __version__
from graphcmp.core.compare import compare_graphs
from graphcmp.core.distributed.batch import _heat_rows
from graphcmp.core.distributed.merge import MergedStep, job_steps, merge_replicas, read_step
from graphcmp.core.distributed.topology import LayoutContradiction, LayoutSpec
from graphcmp.core.distributed.tp_merge import parse_shape
from graphcmp.core.errors import DumpFormatError, GraphcmpError, OutputError
from graphcmp.core.jsonio import dumps_strict, sanitize_floats
from graphcmp.core.matching import default_matchers, match_graphs
from graphcmp.core.matching.specs import matchers_from_specs
from graphcmp.core.metrics import stat_rel_errors
from graphcmp.core.outputs import checked_output, write_atomic
from graphcmp.core.pairing import pair_tensors
from graphcmp.core.records import DumpGraph
from graphcmp.core.report import save_report
from graphcmp.core.rules import DEFAULT_THRESHOLDS, load_thresholds
from graphcmp.core.shards import PARTIAL, REPLICATED, SINGLE, SPLIT, ShardTable, shape_text
from graphcmp.core.tensorcmp import tensor_file

__all__ = ["MergeOptions", "compare_merged", "merged_analysis", "resolve_against", "run_merged"]

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class MergeOptions:
    """How the merged runs are compared (the comparison options of `BatchOptions`, plus layouts)."""

    fuzzy: bool = True
    thresholds_file: str | None = None
    tensors: bool = True
    rules: tuple[str, ...] = ()
    npu_layout: LayoutSpec | None = None
    bench_layout: LayoutSpec | None = None


def compare_merged(npu: DumpGraph, bench: DumpGraph, *, fuzzy: bool = True, matchers: Any = None,
                   thresholds: Any = None, tensors: bool = True) -> Any:
    """Compare two merged runs: match, settle replicas and shapes against each other, then `compare_graphs`.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> from graphcmp.core.distributed.merge import merge_runs
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...      "Mean": 0.5, "Norm": 1.0}
    >>> run = parse_msprobe({"data": {"Functional.relu.0.forward": {"input_args": [t], "output": [t]}}})
    >>> merged = merge_runs({0: run}).graph
    >>> compare_merged(merged, merged).verdict("Functional.relu.0.forward").status
    'pass'
    """
    matchers = list(matchers) if matchers is not None else default_matchers(fuzzy=fuzzy)
    thresholds = thresholds or DEFAULT_THRESHOLDS
    matches = match_graphs(npu, bench, matchers)
    npu_rows, bench_rows = pair_tensors(npu, bench, matches)
    npu, bench = resolve_against(npu, bench, npu_rows, bench_rows, magnitude_floor=thresholds.magnitude_floor)
    npu, metrics = _tensor_metrics(npu, bench, npu_rows, bench_rows) if tensors else (npu, None)
    return compare_graphs(npu, bench, matchers=matchers, thresholds=thresholds, tensor_metrics=metrics)


def resolve_against(npu: DumpGraph, bench: DumpGraph, npu_rows: np.ndarray, bench_rows: np.ndarray, *,
                    magnitude_floor: float = 1e-3) -> tuple[DumpGraph, DumpGraph]:
    """Both merged runs with disagreeing npu replicas and open split shapes settled against each other."""
    npu = _worst_replicas(npu, bench, npu_rows, bench_rows, magnitude_floor)
    return _reconcile_shapes(npu, bench, npu_rows, bench_rows)


def _worst_replicas(npu: DumpGraph, bench: DumpGraph, npu_rows: np.ndarray, bench_rows: np.ndarray,
                    magnitude_floor: float) -> DumpGraph:
    shards: ShardTable | None = npu.shards  # type: ignore[assignment]
    if shards is None:
        return npu
    disagreeing = set(shards.disagreeing().tolist())
    picks = [(i, j) for i, j in zip(npu_rows.tolist(), bench_rows.tolist()) if i in disagreeing]
    if not picks:
        return npu
    stats, present = npu.tensors.stats.copy(), npu.tensors.present.copy()
    bt = bench.tensors
    for i, j in picks:
        rows = shards.rows(i)
        err = stat_rel_errors(shards.stats[rows], np.broadcast_to(bt.stats[j], (len(rows), 4)),
                              shards.present[rows] & bt.present[j], atol=0.0,
                              magnitude_floor=magnitude_floor).max(axis=1)
        worst = rows[int(np.argmax(err))]
        stats[i], present[i] = shards.stats[worst], shards.present[worst]
    return replace(npu, tensors=replace(npu.tensors, stats=stats, present=present))


def _reconcile_shapes(npu: DumpGraph, bench: DumpGraph, npu_rows: np.ndarray,
                      bench_rows: np.ndarray) -> tuple[DumpGraph, DumpGraph]:
    n_shape, b_shape = list(npu.tensors.shape), list(bench.tensors.shape)
    n_dim = _split_dims(npu)
    b_dim = _split_dims(bench)
    changed = False
    for i, j in zip(npu_rows.tolist(), bench_rows.tolist()):
        if n_shape[i] and b_shape[j]:
            continue
        mine, theirs = _candidates(npu, i), _candidates(bench, j)
        common = [shape for shape in mine if shape in theirs]
        if not common and not (mine and theirs):
            continue
        # one shape both runs' slices can make; several (the same layout on both sides): any, the same on both;
        # none: each side its own, and the judge reports the shapes that cannot agree
        n_pick = common[0] if common else next(iter(mine))
        b_pick = common[0] if common else next(iter(theirs))
        if not n_shape[i]:
            n_shape[i], changed = n_pick, True
            if n_dim is not None:
                n_dim[i] = mine[n_pick]
        if not b_shape[j]:
            b_shape[j], changed = b_pick, True
            if b_dim is not None:
                b_dim[j] = theirs[b_pick]
    if not changed:
        return npu, bench
    return _with_shapes(npu, n_shape, n_dim), _with_shapes(bench, b_shape, b_dim)


def _split_dims(graph: DumpGraph) -> np.ndarray | None:
    shards: ShardTable | None = graph.shards  # type: ignore[assignment]
    return None if shards is None else shards.split_dim.copy()


def _with_shapes(graph: DumpGraph, shapes: list[str], dims: np.ndarray | None) -> DumpGraph:
    shards = graph.shards
    if dims is not None and shards is not None:
        shards = replace(shards, split_dim=dims)
    return replace(graph, tensors=replace(graph.tensors, shape=tuple(shapes)), shards=shards)


def _candidates(graph: DumpGraph, row: int) -> dict[str, int]:
    """Logical shapes a tensor row can have -> the sliced dimension giving it (-1: not split)."""
    shape = graph.tensors.shape[row]
    if shape:
        return {shape: -1}
    shards: ShardTable | None = graph.shards  # type: ignore[assignment]
    if shards is None or shards.kind[row] != SPLIT:
        return {}
    rows = shards.rows(row)
    local = parse_shape(shards.shape[rows[0]]) if len(rows) else None
    if not local or any(shards.shape[r] != shards.shape[rows[0]] for r in rows.tolist()):
        return {}
    out: dict[str, int] = {}
    for d in range(len(local)):
        dims = list(local)
        dims[d] *= len(rows)
        out.setdefault(shape_text(dims), d)
    return out


def _tensor_metrics(npu: DumpGraph, bench: DumpGraph, npu_rows: np.ndarray,
                    bench_rows: np.ndarray) -> tuple[DumpGraph, Any]:
    """The npu run with its slices' errors, and the tensor-metrics step for `compare_graphs` (tensor task).

    Each pair's npu tensor is rebuilt from its shards' files: a split tensor concatenated along its
    sliced dimension, a replicated one from the replica the comparison shows; a partial sum has no file
    of its own and is judged on its statistics. Each slice of a split npu tensor is also compared with
    its slice of the bench tensor, into the npu shard table's `error` column (see `attribute_rank`).
    """
    if npu.info.task != "tensor" or bench.info.task != "tensor":
        return npu, None
    from graphcmp.core.tensor_metrics import TENSOR_METRICS, compare_tensors

    measured: dict[tuple[int, int], dict[str, float]] = {}
    shards: ShardTable | None = npu.shards  # type: ignore[assignment]
    errors = np.full(len(shards), np.nan) if shards is not None else None
    for i, j in zip(npu_rows.tolist(), bench_rows.tolist()):
        a, b = _tensor(npu, i), _tensor(bench, j)
        if a is None or b is None:
            continue
        measured[(i, j)] = compare_tensors(a, b)
        if errors is not None and shards is not None and shards.kind[i] == SPLIT:
            _slice_errors(shards, i, b, errors)
    if shards is not None:
        npu = replace(npu, shards=replace(shards, error=errors))

    def measure(_npu: DumpGraph, _bench: DumpGraph, rows_n: np.ndarray, rows_b: np.ndarray) -> dict[str, np.ndarray]:
        out = {name: np.full(len(rows_n), np.nan) for name in TENSOR_METRICS}
        for k, key in enumerate(zip(rows_n.tolist(), rows_b.tolist())):
            for name, value in measured.get(key, {}).items():
                out[name][k] = value
        return out

    return npu, measure


def _tensor(graph: DumpGraph, row: int) -> np.ndarray | None:
    from graphcmp.core.tensorio import read_tensor

    shards: ShardTable | None = graph.shards  # type: ignore[assignment]
    if shards is None:
        path = tensor_file(graph, row)
        return None if path is None else np.asarray(read_tensor(path))
    rows = shards.rows(row).tolist()
    files = [shards.file[r] for r in rows]
    kind = int(shards.kind[row])
    if not files or not all(files) or kind == PARTIAL:
        return None
    if kind in (SINGLE, REPLICATED):
        pick = next((r for r in rows if np.array_equal(shards.stats[r], graph.tensors.stats[row], equal_nan=True)),
                    rows[0])
        return np.asarray(read_tensor(shards.file[pick]))
    d = int(shards.split_dim[row])
    if d < 0:
        return None
    return np.concatenate([np.asarray(read_tensor(f)) for f in files], axis=d)


def _slice_errors(shards: ShardTable, row: int, bench: np.ndarray, errors: np.ndarray) -> None:
    from graphcmp.core.tensor_metrics import euc_rel
    from graphcmp.core.tensorio import read_tensor

    d = int(shards.split_dim[row])
    if d < 0 or d >= bench.ndim:
        return
    start = 0
    for r in shards.rows(row).tolist():
        part = np.asarray(read_tensor(shards.file[r]))
        size = part.shape[d] if part.ndim > d else 0
        piece = np.take(bench, np.arange(start, start + size), axis=d)
        start += size
        errors[r] = euc_rel(part, piece)


def run_merged(
    npu_root: str | os.PathLike[str],
    bench_root: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    options: MergeOptions | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Merge both jobs step by step, compare the logical runs, write the results folder; return the index.

    Raises
    ------
    LayoutError
        If either job cannot be merged (the caller may compare rank by rank instead).
    """
    options = options or MergeOptions()
    out = checked_output(out_dir, (npu_root, bench_root))
    npu_steps, bench_steps = job_steps(npu_root), job_steps(bench_root)
    pairs = _pair_steps(npu_steps, bench_steps)
    if not pairs:
        raise DumpFormatError(f"{npu_root} / {bench_root}: no step is on both sides (npu steps "
                              f"{sorted(map(str, npu_steps))}, bench steps {sorted(map(str, bench_steps))})")
    entries, layouts = [], {}
    unpaired: dict[str, list[str]] = {"npu": [], "bench": []}  # replicas the other job has no counterpart of
    for n_step, b_step in pairs:
        say = progress or (lambda _text: None)
        say(f"merging npu step {n_step}")
        npu = _merge_side("npu", npu_root, npu_steps[n_step], n_step, options.npu_layout, workers, scheduler)
        say(f"merging bench step {b_step}")
        bench = _merge_side("bench", bench_root, bench_steps[b_step], b_step, options.bench_layout, workers, scheduler)
        if not entries:  # the first step merged: its layouts hold, so the results have a folder to go to
            _make_folder(out)
        layouts.setdefault("npu", npu[0].layout.to_dict())
        layouts.setdefault("bench", bench[0].layout.to_dict())
        for side, replicas in (("npu", npu), ("bench", bench)):
            unpaired[side].extend(_replica_label(r) for r in replicas[1:] if len(npu) != len(bench))
        for n_rep, b_rep in _pair_replicas(npu, bench):
            say(f"comparing step {n_step}" + (f" replica {n_rep.replica}" if len(npu) > 1 else ""))
            entries.append(_compare_step(n_rep, b_rep, out, options, several=len(npu) > 1 or len(bench) > 1))
    index = sanitize_floats({
        "format": "graphcmp.batch",
        "schema_version": 1,
        "tool": {"name": "graphcmp", "version": __version__},
        "inputs": {"npu": str(npu_root), "bench": str(bench_root)},
        "options": {"fuzzy": options.fuzzy, "thresholds_file": options.thresholds_file, "tensors": options.tensors,
                    "rules": list(options.rules), "merged": True},
        "layouts": layouts,
        "missing": {"npu_only": [f"step{s}" for s in npu_steps if s not in {p[0] for p in pairs}] + unpaired["npu"],
                    "bench_only": [f"step{s}" for s in bench_steps if s not in {p[1] for p in pairs}]
                    + unpaired["bench"]},
        "runs": entries,
        "analysis": merged_analysis(entries),
    })
    write_atomic(out / "index.json", dumps_strict(index))
    return index


def _pair_steps(npu: dict, bench: dict) -> list[tuple[Any, Any]]:
    both = [s for s in npu if s in bench]
    if both:
        return [(s, s) for s in both]
    if len(npu) == 1 and len(bench) == 1:
        return [(next(iter(npu)), next(iter(bench)))]
    return []


def _make_folder(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"{out}: cannot create the results folder ({err.strerror})") from err


def _merge_side(side: str, root: str | os.PathLike[str], ranks: dict[int, Path], step: Any,
                spec: LayoutSpec | None, workers: int | None, scheduler: str | None) -> list[MergedStep]:
    """Every data-parallel replica of one job's step, merged; a stated layout the dump contradicts names the input."""
    try:
        return merge_replicas(read_step(ranks, workers=workers, scheduler=scheduler), spec=spec,
                              path=_folder(ranks, root), step=step)
    except LayoutContradiction as err:
        raise LayoutContradiction(f"{root}: --{side}-layout contradicts the dump: {err}") from err


def _reached_by_communication(found: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Replicas' first divergences in execution order -> (origins, spread).

    A replica whose first divergence is a communication call after another replica had diverged (the
    data-parallel gradient all_reduce sums every replica's gradient) was reached by that error: it is
    spread, not an origin of its own.
    """
    if len(found) < 2:
        return found, []
    first, origins, spread = found[0], found[:1], []
    for f in found[1:]:
        if str(f.get("node", "")).startswith("Distributed."):
            spread.append({"rank": f.get("rank"), "via": f.get("node"), "from_rank": first.get("rank"),
                           "from_node": first.get("node")})
        else:
            origins.append(f)
    return origins, spread


def _pair_replicas(npu: list[MergedStep], bench: list[MergedStep]) -> list[tuple[MergedStep, MergedStep]]:
    """Data-parallel replica r of one job with replica r of the other.

    Two jobs with as many replicas ran the same data on replica r (the data-parallel rank picks the
    samples), so each replica is compared: a bad card on any replica shows. With other counts only the
    first replicas are paired (the others saw other data); the others are listed as not compared, which
    leaves the job inconclusive unless it differs (`graphcmp consistency` checks them against each other).
    """
    if len(npu) == len(bench):
        return list(zip(npu, bench))
    return [(npu[0], bench[0])]


def _replica_label(replica: MergedStep) -> str:
    """``step0 data-parallel replica 1 (ranks 2,3)``: a replica the other job has no counterpart of."""
    ranks = sorted(r for group in replica.layout.replicas()[replica.replica] for r in group)
    step = f"step{replica.step}" if replica.step is not None else "the step"
    return f"{step} data-parallel replica {replica.replica} (ranks {','.join(map(str, ranks))})"


def _folder(ranks: dict[int, Path], root: str | os.PathLike[str]) -> str:
    paths = list(ranks.values())
    return str(paths[0].parent) if len(paths) > 1 else str(root)


def _compare_step(npu: MergedStep, bench: MergedStep, out: Path, options: MergeOptions, *,
                  several: bool = False) -> dict[str, Any]:
    label = (f"step{npu.step}" if npu.step is not None else "") + (f"_replica{npu.replica}" if several else "")
    label = f"{label}_merged".lstrip("_")
    entry: dict[str, Any] = {"step": npu.step, "rank": None, "merged": True, "npu": npu.graph.info.path,
                             "bench": bench.graph.info.path, "file": f"{label}.json",
                             "layouts": {"npu": npu.layout.describe(), "bench": bench.layout.describe()}}
    if several:
        entry["replica"] = npu.replica
        entry["ranks"] = sorted(r for group in npu.layout.replicas()[npu.replica] for r in group)
    try:
        thresholds = load_thresholds(options.thresholds_file) if options.thresholds_file else None
        matchers = matchers_from_specs([*options.rules, "exact", *(["fuzzy"] if options.fuzzy else [])]) \
            if options.rules else None
        report = compare_merged(npu.graph, bench.graph, fuzzy=options.fuzzy, matchers=matchers,
                                thresholds=thresholds, tensors=options.tensors)
        save_report(report, out / entry["file"])
        first = report.analysis().first
    except GraphcmpError as err:
        return {**entry, "error": str(err)}
    return {
        **entry,
        "error": None,
        "summary": report.summary(),
        "first": None if first is None else {**first.to_dict(), "position": report.npu.row(first.node)},
        "comm": [],
        "heat": _heat_rows(report),
    }


def merged_analysis(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The job analysis of merged comparisons: per step its first divergence; the origin is the earliest step's.

    Shaped like the per-rank job analysis (`job_analysis`), with no communication links: a merged run
    has one logical graph, and its first divergence names the rank itself.

    >>> merged_analysis([{"step": 0, "error": None, "first": None}])["origin"] is None
    True
    """
    steps: dict[str, Any] = {}
    origins: list[dict[str, Any]] = []
    by_step: dict[Any, list[dict[str, Any]]] = {}
    for entry in entries:
        by_step.setdefault(entry["step"], []).append(entry)
    for step in sorted(by_step, key=lambda s: -1 if s is None else s):
        found = []
        for entry in by_step[step]:  # each data-parallel replica: its first divergence
            first = entry.get("first") if entry.get("error") is None else None
            if first:
                found.append({**first, "step": step, **({"replica": entry["replica"]} if "replica" in entry else {})})
        # replicas run the same calls: the one that diverged earliest in execution order comes first
        found.sort(key=lambda f: (f.get("position") if f.get("position") is not None else 1 << 62,
                                  f.get("replica", 0)))
        found, spread = _reached_by_communication(found)
        steps[str(step)] = {"links": 0, "linked_calls": 0, "unlinked_calls": [], "origins": found, "spread": spread}
        if found and not origins:
            origins = found
    return {"origin": origins[0] if origins else None, "origins": origins, "steps": steps}
