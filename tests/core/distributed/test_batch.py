"""Step/rank layouts, batch comparison (process pool and a Dask LocalCluster), resume, cross-rank analysis."""

from __future__ import annotations

import shutil

import pytest

from graphcmp.core.distributed.batch import MAX_CHUNK, BatchOptions, _chunks, batch_summary, load_index, run_batch
from graphcmp.core.distributed.layout import RunKey, discover_runs, is_batch_root, pair_runs
from graphcmp.core.distributed.links import comm_calls, link_calls
from graphcmp.core.readers import read_graph
from graphcmp.samples import samples_dir
from tests.conftest import shared

SAMPLE = samples_dir() / "msprobe" / "tf_small"
DIST4 = "msprobe/dumps/dist4/statistics"


def test_discover_step_and_rank_layouts(perturb_pair):
    runs = discover_runs(SAMPLE / "baseline")
    assert sorted(runs) == [RunKey(0, 0), RunKey(1, 0)]
    assert discover_runs(SAMPLE / "baseline" / "step1") == {RunKey(1, 0): SAMPLE / "baseline" / "step1" / "rank0"}
    assert discover_runs(perturb_pair[0]) == {RunKey(0, 0): perturb_pair[0]}
    assert is_batch_root(SAMPLE / "baseline") and not is_batch_root(perturb_pair[0])


@pytest.mark.parametrize(("runs", "slots"), [(1024, 2), (64, 2), (300, 8), (5, 4), (1, 1), (0, 2)])
def test_chunks_shrink_towards_the_end_so_workers_finish_together(runs, slots):
    tasks = [(f"npu{i}", f"bench{i}", 0, i, "key") for i in range(runs)]
    chunks = _chunks(tasks, slots)
    sizes = [len(c) for c in chunks]
    assert [t for c in chunks for t in c] == tasks  # every run once, in order
    assert all(1 <= k <= MAX_CHUNK for k in sizes) and sizes == sorted(sizes, reverse=True)
    if runs >= 4 * slots:  # the last chunk of each worker slot is a single run: none waits for a long one
        assert sizes[-slots:] == [1] * slots
    assert len(chunks) <= max(runs // MAX_CHUNK, 0) + 4 * slots * (1 + runs.bit_length())  # few tasks to schedule


def test_missing_runs_are_reported_not_fatal(tmp_path):
    bench = tmp_path / "bench"
    shutil.copytree(SAMPLE / "baseline", bench)
    shutil.rmtree(bench / "step1")
    both, only_npu, only_bench = pair_runs(SAMPLE / "perturb", bench)
    assert list(both) == [RunKey(0, 0)] and only_npu == [RunKey(1, 0)] and only_bench == []
    index = run_batch(SAMPLE / "perturb", bench, tmp_path / "out", workers=1)
    assert index["missing"] == {"npu_only": ["step1_rank0"], "bench_only": []}
    assert [r["file"] for r in index["runs"]] == ["step0_rank0.npz"]


def test_batch_writes_results_and_resumes(tmp_path):
    out = tmp_path / "results"
    index = run_batch(SAMPLE / "perturb", SAMPLE / "baseline", out, workers=2)
    assert {(r["step"], r["rank"]) for r in index["runs"]} == {(0, 0), (1, 0)}
    assert (out / "step0_rank0.npz").is_file() and (out / "step1_rank0.npz").is_file()
    origin = index["analysis"]["origin"]
    assert (origin["step"], origin["node"]) == (0, "Functional.linear.2.forward")
    entry = out / "entries" / "step0_rank0.json"
    stamp = entry.stat().st_mtime_ns
    seen = []
    again = run_batch(SAMPLE / "perturb", SAMPLE / "baseline", out, workers=2,
                      progress=lambda done, total, label: seen.append(label))
    assert entry.stat().st_mtime_ns == stamp  # finished runs are not redone
    assert seen == ["resumed"] and again["analysis"]["origin"] == origin
    assert load_index(out)["runs"] == again["runs"]


def test_same_code_path_on_a_dask_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        index = run_batch(SAMPLE / "perturb", SAMPLE / "baseline", tmp_path / "dask",
                          scheduler=cluster.scheduler_address, options=BatchOptions())
    local = run_batch(SAMPLE / "perturb", SAMPLE / "baseline", tmp_path / "local", workers=1)
    assert batch_summary(index)["runs"] == batch_summary(local)["runs"]


@pytest.mark.shared
def test_every_communication_call_of_dist4_is_linked():
    root = shared(f"{DIST4}/baseline") / "step0"
    calls = []
    for key, path in discover_runs(root).items():
        rank_calls = comm_calls(read_graph(path), key.rank)
        assert len(rank_calls) == 67  # broadcast x30, all_reduce x30, all_gather, isend, irecv, batch, reduce, ...
        calls += rank_calls
    links = link_calls(calls)
    assert all(link.complete for link in links)
    ops = {c.op for c in calls}
    assert {"isend", "irecv", "batch_isend_irecv", "broadcast", "all_reduce", "reduce", "gather", "scatter"} <= ops
    batch = [link for link in links if link.key.startswith("batch|")]
    assert len(batch) == 4 and all(len(link.members) == 2 for link in batch)  # reverse ring: one pair per rank


@pytest.mark.shared
def test_dist4_origin_is_rank2_embedding_and_spreads_through_all_reduce(tmp_path):
    index = run_batch(shared(f"{DIST4}/perturb_rank2"), shared(f"{DIST4}/baseline"), tmp_path / "r", workers=2)
    analysis = index["analysis"]
    origin = analysis["origin"]
    assert (origin["rank"], origin["step"], origin["node"]) == (2, 0, "Functional.embedding.0.forward")
    spread = analysis["steps"]["0"]["spread"]
    assert {hop["rank"] for hop in spread} == {0, 1, 3}
    assert all(hop["via"] == "Distributed.all_reduce.0.forward" and hop["from_rank"] == 2 for hop in spread)
    summary = batch_summary(index)
    assert all(run["comm"] == {"nodes": 67, "linked": 67, "unlinked": 0} for run in summary["runs"])
    assert [run["nodes"]["npu"] for run in summary["runs"] if run["step"] == 0] == [231, 227, 227, 227]



def test_a_worker_with_many_runs_reads_them_by_the_compiled_pass(tmp_path, monkeypatch):
    import json

    from graphcmp.core.distributed import batch
    from graphcmp.core.readers import msprobe_scan

    count = batch.COMPILED_READS_FROM
    tasks = [(str(SAMPLE / "perturb" / "step0" / "rank0"), str(SAMPLE / "baseline" / "step0" / "rank0"), 0, rank,
              "key", "") for rank in range(count)]
    walked = []
    read = msprobe_scan.read_dump_compiled
    monkeypatch.setattr(msprobe_scan, "read_dump_compiled", lambda folder: walked.append(folder) or read(folder))
    assert len(batch.compare_runs(tasks, str(tmp_path / "compiled"), BatchOptions())) == count
    assert len(walked) == 2 * count  # every run's npu and bench dump.json, though each is small
    monkeypatch.setattr(msprobe_scan, "read_dump_compiled", lambda folder: None)  # the chunked read
    batch.compare_runs(tasks, str(tmp_path / "chunked"), BatchOptions())
    for rank in range(count):
        entries = [json.loads((tmp_path / way / "entries" / f"step0_rank{rank}.json").read_text())
                   for way in ("compiled", "chunked")]
        assert entries[0] == entries[1] and entries[0]["summary"]["tensor_pairs"] > 0


@pytest.mark.parametrize(("can_be_built", "compiled", "started"), [
    (True, False, 1),  # to be built ahead of time: the chunked read while a build runs in the background
    (False, True, 0),  # numba's dispatchers: loaded once for the worker's many runs
])
def test_a_worker_never_waits_for_a_build(tmp_path, monkeypatch, can_be_built, compiled, started):
    from graphcmp.core.distributed import batch
    from graphcmp.core.readers import msprobe_scan

    tasks = [(str(SAMPLE / "perturb" / "step0" / "rank0"), str(SAMPLE / "baseline" / "step0" / "rank0"), 0, rank,
              "key", "") for rank in range(batch.COMPILED_READS_FROM)]
    walked, builds = [], []
    monkeypatch.setattr(msprobe_scan, "kernels_built", lambda: False)  # not yet built
    monkeypatch.setattr(batch, "kernels_can_be_built", lambda: can_be_built)
    monkeypatch.setattr(batch, "build_in_background", lambda: builds.append(1) or True)
    read = msprobe_scan.read_dump_compiled
    monkeypatch.setattr(msprobe_scan, "read_dump_compiled", lambda folder: walked.append(folder) or read(folder))
    assert len(batch.compare_runs(tasks, str(tmp_path), BatchOptions())) == len(tasks)
    assert len(walked) == (2 * len(tasks) if compiled else 0) and len(builds) == started
