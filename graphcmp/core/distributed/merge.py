"""Merging the ranks of a tensor/pipeline-parallel job into one logical run per step.

For each step: read every rank's run, detect the layout (`detect_layout`, or the one a user states),
merge the tensor-parallel group of each pipeline stage of the first model replica
(`merge_tensor_parallel`), then stitch the stages in execution order (`stitch_stages`). The result
is a `DumpGraph` like one device's run of the whole model, whose `shards` keep every rank's records.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from graphcmp.core.distributed.batch import _executor
from graphcmp.core.distributed.layout import RunKey, discover_runs
from graphcmp.core.distributed.stitch import StageRun, stitch_stages
from graphcmp.core.distributed.topology import LayoutError, LayoutSpec, ParallelLayout, comm_records, detect_layout
from graphcmp.core.distributed.tp_merge import merge_tensor_parallel
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers import read_graph
from graphcmp.core.records import DumpGraph, RunInfo
from graphcmp.core.shards import node_provenance

__all__ = ["MergedStep", "comm_signature", "job_steps", "layout_relative", "merge_reason", "merge_replicas",
           "merge_runs", "read_step"]

Reader = Callable[[str], DumpGraph]
_COMM_ID = re.compile(rb'"Distributed\.([A-Za-z_]\w*)\.\d+\.(?:forward|backward)"')


@dataclass(frozen=True, slots=True)
class MergedStep:
    """One step of a job as one logical run, with the layout it was merged from."""

    step: int | None
    graph: DumpGraph
    layout: ParallelLayout
    replica: int = 0  # which data-parallel replica (0: the one holding the lowest rank)


def job_steps(root: str | os.PathLike[str]) -> dict[int | None, dict[int, Path]]:
    """The rank folders under a job root, by step then rank (a single run counts as rank 0)."""
    steps: dict[int | None, dict[int, Path]] = {}
    for key, path in sorted(discover_runs(root).items(), key=lambda kv: _key_order(kv[0])):
        steps.setdefault(key.step, {})[key.rank if key.rank is not None else 0] = path
    return steps


def _key_order(key: RunKey) -> tuple[int, int]:
    return (-1 if key.step is None else key.step, -1 if key.rank is None else key.rank)


def read_step(ranks: Mapping[int, Path], *, workers: int | None = None, scheduler: str | None = None,
              read: Reader | None = None) -> dict[int, DumpGraph]:
    """Read every rank of one step, on a local process pool (or Dask) when there are several."""
    reader = read or read_graph
    if len(ranks) == 1 or workers == 1:
        return {rank: reader(str(path)) for rank, path in ranks.items()}
    with _executor(workers, scheduler, len(ranks)) as pool:
        futures = {rank: pool.submit(reader, str(path)) for rank, path in ranks.items()}
        return {rank: future.result() for rank, future in futures.items()}


def merge_runs(graphs: Mapping[int, DumpGraph], *, spec: LayoutSpec | None = None, path: str = "",
               step: int | None = None, replica: int = 0) -> MergedStep:
    """Merge the runs of one step (by rank) into one logical run: one data-parallel replica.

    Parameters
    ----------
    graphs : Mapping[int, DumpGraph]
        Every rank's run of the step.
    spec : LayoutSpec, optional
        A stated layout; detected from the communication calls when None.
    path : str
        What the merged run's `RunInfo.path` names (the step folder).
    step : int, optional
        The step number.
    replica : int
        Which data-parallel replica (`ParallelLayout.replicas` order; 0 holds the lowest rank).

    Raises
    ------
    LayoutError
        If the layout cannot be merged (the message names the ranks and nodes).
    """
    if not graphs:
        raise DumpFormatError(f"{path}: no rank folder to merge")
    layout = detect_layout(graphs, spec)
    replicas = layout.replicas()
    if not 0 <= replica < len(replicas):
        raise LayoutError(f"{path}: no data-parallel replica {replica} (the job has {len(replicas)})")
    return _merge_replica(graphs, layout, replica, path, step)


def merge_replicas(graphs: Mapping[int, DumpGraph], *, spec: LayoutSpec | None = None, path: str = "",
                   step: int | None = None) -> list[MergedStep]:
    """Every data-parallel replica of one step, each merged into one logical run (`merge_runs`), in replica order.

    Raises
    ------
    LayoutError
        If the layout cannot be merged (the message names the ranks and nodes).
    """
    if not graphs:
        raise DumpFormatError(f"{path}: no rank folder to merge")
    layout = detect_layout(graphs, spec)
    return [_merge_replica(graphs, layout, index, path, step) for index in range(len(layout.replicas()))]


def _merge_replica(graphs: Mapping[int, DumpGraph], layout: ParallelLayout, index: int, path: str,
                   step: int | None) -> MergedStep:
    replica = layout.replicas()[index]
    stages = []
    for stage, group in enumerate(replica):
        missing = [r for r in group if r not in graphs]
        if missing:
            raise LayoutError(f"{path}: ranks {missing} of stage {stage} have no dump")
        stages.append(StageRun(stage, tuple(group), merge_tensor_parallel([(r, graphs[r]) for r in group])))
    held = sorted(r for group in replica for r in group)
    first = graphs[held[0]].info
    missing_lines = tuple(f"rank {rank}: {line}" for rank in held for line in graphs[rank].info.missing)
    info = RunInfo(path=path or first.path, format=first.format, framework=first.framework, task=first.task,
                   level=first.level, rank=None, step=step, missing=missing_lines)
    return MergedStep(step, layout_relative(stitch_stages(stages, layout.pp, info), layout), layout, index)


def layout_relative(graph: DumpGraph, layout: ParallelLayout) -> DumpGraph:
    """The merged run with its communication arguments in the layout's own terms.

    A group (``group_ranks``) becomes its kind — tensor-parallel, pipeline-parallel or other — and a send's or
    receive's peer rank its stage offset (+1: the next stage), so the logical runs of two layouts agree on them.
    """
    t = graph.tensors
    values, stats = list(t.value), t.stats.copy()
    tp, pp = set(map(frozenset, layout.tp_groups)), set(map(frozenset, layout.pp_groups))
    changed = False
    for call in comm_records(graph):
        own = node_provenance(graph, call.row).ranks
        peers = {peer for _, peer in call.peers}
        for k in graph.tensor_rows(call.node).tolist():
            if "group_ranks" in values[k]:
                try:
                    ranks = frozenset(json.loads(values[k]).get("group_ranks") or ())
                except (ValueError, AttributeError):
                    continue
                kind = "tensor-parallel" if ranks in tp else "pipeline-parallel" if ranks in pp else "other"
                values[k], changed = json.dumps({"group": kind}), True
            elif own and t.shape[k] == "scalar" and t.present[k, 0] and stats[k, 0] in peers:
                offset = layout.stage(int(stats[k, 0])) - layout.stage(own[0])
                stats[k, t.present[k]], changed = offset, True
    return replace(graph, tensors=replace(t, value=tuple(values), stats=stats)) if changed else graph


def comm_signature(run: str | os.PathLike[str]) -> frozenset[str]:
    """The communication calls a rank made, by name (``all_reduce``, ``isend`` ...), read cheaply.

    construct.json lists every call id; without one, dump.json's text is scanned for the ids.
    """
    folder = Path(run)
    for name in ("construct.json", "dump.json"):
        file = folder / name
        if file.is_file():
            found = frozenset(m.decode() for m in _COMM_ID.findall(file.read_bytes()))
            if found or name == "dump.json":
                return found
    return frozenset()


def merge_reason(npu_root: str | os.PathLike[str], bench_root: str | os.PathLike[str],
                 npu_layout: LayoutSpec | None = None, bench_layout: LayoutSpec | None = None) -> str | None:
    """Why two job roots are compared as merged logical runs rather than rank N with rank N (None: they are not).

    They are merged when a layout is stated, when their steps hold different ranks, or when a rank's
    communication calls differ by kind between the jobs (``all_reduce`` in one, ``isend`` in the other).
    """
    if npu_layout is not None or bench_layout is not None:
        return "a layout was stated"
    npu, bench = job_steps(npu_root), job_steps(bench_root)
    if not npu or not bench:
        return None  # nothing to merge on one side: the per-rank comparison says what is missing
    n_ranks = {step: sorted(ranks) for step, ranks in npu.items()}
    b_ranks = {step: sorted(ranks) for step, ranks in bench.items()}
    if sorted(map(len, n_ranks.values())) != sorted(map(len, b_ranks.values())):
        return (f"the jobs have different ranks (npu {max(map(len, n_ranks.values()), default=0)}, "
                f"bench {max(map(len, b_ranks.values()), default=0)} per step)")
    for step in npu.keys() & bench.keys():
        for rank in npu[step].keys() & bench[step].keys():
            mine, theirs = comm_signature(npu[step][rank]), comm_signature(bench[step][rank])
            if mine != theirs:
                return (f"rank {rank} communicates differently (npu: {', '.join(sorted(mine)) or 'nothing'}; "
                        f"bench: {', '.join(sorted(theirs)) or 'nothing'})")
        break  # one step tells the layout
    return None
