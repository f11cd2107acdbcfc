"""Merged runs of different layouts compared: clean jobs agree, a perturbed shard or replica is named with its rank."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from graphcmp.core.distributed.merge import job_steps, merge_reason, merge_runs, read_step
from graphcmp.core.distributed.merged import compare_merged, merged_analysis, run_merged
from graphcmp.core.distributed.topology import parse_layout
from graphcmp.core.records import Role
from graphcmp.core.report import load_report
from tests.conftest import DATA, shared

PARALLEL = DATA / "parallel"
SHARED = "msprobe/dumps/parallel"


def _merged(root):
    return merge_runs(read_step(next(iter(job_steps(root).values())), workers=1), path=str(root), step=0).graph


@pytest.fixture(scope="module")
def tp1():
    return _merged(PARALLEL / "tp1")


def _plant(tmp_path, job, rank, node, scale=1.25):
    """A copy of `job` whose `node` on `rank` has every tensor's Max and Min scaled (a perturbed weight shard)."""
    copy = tmp_path / job
    shutil.copytree(PARALLEL / job, copy)
    dump_file = copy / "step0" / f"rank{rank}" / "dump.json"
    dump = json.loads(dump_file.read_text())

    def scale_stats(value):
        if isinstance(value, dict) and value.get("type") == "torch.Tensor":
            value["Max"], value["Min"] = value["Max"] * scale, value["Min"] * scale
        elif isinstance(value, dict):
            for v in value.values():
                scale_stats(v)
        elif isinstance(value, list):
            for v in value:
                scale_stats(v)

    scale_stats(dump["data"][node])
    dump_file.write_text(json.dumps(dump))
    return copy


def test_clean_tp2pp2_agrees_with_tp1(tp1):
    report = compare_merged(_merged(PARALLEL / "tp2pp2"), tp1)
    assert report.summary()["verdicts"].get("error", 0) == 0
    assert report.analysis().first is None
    unmatched = [report.npu.nodes.ids[r] for r in np.flatnonzero(report.matches.npu_to_bench < 0)]
    assert unmatched and all(i.startswith(("Distributed.", "Apis_Between_Modules")) for i in unmatched)


def test_open_split_shapes_take_the_bench_shape(tp1):
    npu = _merged(PARALLEL / "tp2pp2")
    softmax = "Functional.softmax.0.forward"
    out = next(k for k in npu.tensor_rows(softmax).tolist() if npu.tensors.role[k] == Role.OUTPUT)
    assert npu.tensors.shape[out] == ""  # heads sliced, which dimension the structure does not say
    report = compare_merged(npu, tp1)
    assert report.npu.tensors.shape[out] == "[2, 4, 16, 16]" and report.npu.shards.split_dim[out] == 1


def test_desynchronised_replica_is_compared_by_its_worst_rank(tp1):
    report = compare_merged(_merged(PARALLEL / "tp2_desync"), tp1)
    node = "Functional.layer_norm.2.forward"
    weight = next(k for k in report.npu.tensor_rows(node).tolist() if report.npu.tensors.slot[k] == "2")
    rows = report.npu.shards.rows(weight)
    assert np.array_equal(report.npu.tensors.stats[weight], report.npu.shards.stats[rows[1]])  # rank 1's replica
    assert report.pairs.metrics["rel_err"][np.flatnonzero(report.pairs.npu == weight)[0]] > 1e-3  # not hidden


def test_desynchronised_replica_is_the_first_divergence_on_its_rank(tp1):
    first = compare_merged(_merged(PARALLEL / "tp2_desync"), tp1).analysis().first
    assert (first.node, first.rank, first.ranks, first.cause) == ("Functional.layer_norm.2.forward", 1, (0, 1),
                                                                  "inputs differ")
    assert first.module == "Module.module.decoder.layers.1.input_layernorm.LayerNorm.forward.0"


@pytest.mark.parametrize("rank, node, module", [
    (3, "Tensor.t.6.forward", "Module.module.decoder.layers.3.mlp.linear_fc1.ColumnParallelLinear.forward.0"),
    (2, "Tensor.t.4.forward", "Module.module.decoder.layers.3.self_attention.linear_qkv.ColumnParallelLinear"
                              ".forward.0"),
    (1, "Tensor.t.0.forward", "Module.module.decoder.layers.0.self_attention.linear_qkv.ColumnParallelLinear"
                              ".forward.0"),
])
def test_planted_shard_names_its_op_and_rank(tmp_path, tp1, rank, node, module):
    report = compare_merged(_merged(_plant(tmp_path, "tp2pp2", rank, node)), tp1)
    first = report.analysis().first
    assert (first.module, first.rank, first.source_id, first.cause) == (module, rank, node, "inputs differ")
    assert first.node.startswith("Tensor.t.")


def test_a_shard_within_the_range_of_the_whole_names_no_rank(tmp_path, tp1):
    report = compare_merged(_merged(_plant(tmp_path, "tp2pp2", 3, "Tensor.t.6.forward", scale=0.8)), tp1)
    first = report.analysis().first
    assert first.source_id == "Tensor.t.6.forward" and first.rank is None and first.ranks == (2, 3)


def test_results_folder_index_and_analysis(tmp_path):
    index = run_merged(PARALLEL / "tp2_desync", PARALLEL / "tp1", tmp_path / "out", workers=1)
    assert (tmp_path / "out" / "index.json").is_file() and (tmp_path / "out" / "step0_merged.json").is_file()
    run = index["runs"][0]
    assert run["merged"] and run["rank"] is None and run["error"] is None
    origin = index["analysis"]["origin"]
    report = load_report(tmp_path / "out" / "step0_merged.json")
    first = report.analysis().first
    assert (origin["node"], origin["rank"], origin["source_id"], origin["ranks"], origin["step"]) == (
        first.node, first.rank, first.source_id, list(first.ranks), 0)
    assert (origin["node"], origin["rank"]) == ("Functional.layer_norm.2.forward", 1)
    assert index["layouts"]["npu"]["tp"] == 2 and index["layouts"]["bench"]["tp"] == 1


def test_merged_analysis_takes_the_earliest_step():
    entries = [{"step": 1, "error": None, "first": {"node": "b"}}, {"step": 0, "error": None, "first": None}]
    analysis = merged_analysis(entries)
    assert analysis["origin"] == {"node": "b", "step": 1} and set(analysis["steps"]) == {"0", "1"}


def test_merge_reason():
    assert merge_reason(PARALLEL / "tp2pp2", PARALLEL / "tp1").startswith("the jobs have different ranks")
    assert merge_reason(PARALLEL / "tp1", PARALLEL / "tp1") is None
    assert merge_reason(PARALLEL / "tp1", PARALLEL / "tp1", parse_layout("tp=1")) == "a layout was stated"


def test_communication_arguments_are_in_the_layout_s_terms():
    merged = _merged(PARALLEL / "tp2pp2")
    t = merged.tensors
    send = next(i for i in merged.nodes.ids if i.startswith("Distributed.isend."))
    values = {t.slot[k]: (t.value[k], float(t.stats[k, 0])) for k in merged.tensor_rows(send).tolist()
              if t.role[k] == Role.INPUT}
    assert values["group"][0] == '{"group": "pipeline-parallel"}' and values["dst"][1] == 1.0  # the next stage
    reduce = next(i for i in merged.nodes.ids if i.startswith("Distributed.all_reduce."))
    assert '{"group": "tensor-parallel"}' in {t.value[k] for k in merged.tensor_rows(reduce).tolist()}


@pytest.mark.shared
@pytest.mark.parametrize("npu, bench", [("pp2", "tp2pp2"), ("tp2pp2", "tp2"), ("tp2", "pp2")])
def test_shared_clean_jobs_of_any_two_layouts_agree(tmp_path, npu, bench):
    index = run_merged(shared(f"{SHARED}/{npu}"), shared(f"{SHARED}/{bench}"), tmp_path / "out", workers=1)
    assert index["analysis"]["origin"] is None
    assert index["runs"][0]["summary"]["verdicts"].get("error", 0) == 0


@pytest.mark.shared
@pytest.mark.parametrize("job", ["tp2", "pp2", "tp2pp2"])
def test_shared_clean_jobs_have_no_origin_and_no_error(tmp_path, job):
    index = run_merged(shared(f"{SHARED}/{job}"), shared(f"{SHARED}/tp1"), tmp_path / "out", workers=1)
    assert index["analysis"]["origin"] is None
    assert index["runs"][0]["summary"]["verdicts"].get("error", 0) == 0


@pytest.mark.shared
@pytest.mark.parametrize("job", ["tp2_perturb", "pp2_perturb", "tp2_desync"])
def test_shared_perturbed_jobs_name_the_truth_op_and_rank(tmp_path, job):
    truth = json.loads(shared(f"{SHARED}/TRUTH.json").read_text())["variants"][job]
    op = truth["first_divergent_op"]
    ids = {op["node"], op["module"], *op["first_compute_ops"], truth["merged_graph_ids"]["module"]}
    origin = run_merged(shared(f"{SHARED}/{job}"), shared(f"{SHARED}/tp1"), tmp_path / "out",
                        workers=1)["analysis"]["origin"]
    assert origin["rank"] == op["rank"]
    assert origin["node"] in ids or origin["module"] in ids
    assert origin["source_id"] in ids or origin["module"] in ids
