"""Ranks checked against each other on real jobs: a desynchronised replica is found, clean jobs agree."""

from __future__ import annotations

import json
import shutil

import pytest

from graphcmp.core.distributed.consistency import check_consistency, check_job
from graphcmp.core.distributed.merge import job_steps, read_step
from tests.conftest import DATA, shared

PARALLEL = DATA / "parallel"
LN = "Module.module.decoder.layers.1.input_layernorm.LayerNorm.forward.0"


def _graphs(root):
    return read_step(next(iter(job_steps(root).values())), workers=1)


def test_desynchronised_replica_names_rank_and_parameter():
    result = check_job(PARALLEL / "tp2_desync", workers=1)
    first = result["bad_ranks"][0]
    assert (first["rank"], first["reference"], first["node"], first["tensor"], first["parameter"]) == (
        1, 0, LN, "param.weight", "module.decoder.layers.1.input_layernorm.weight")
    assert first["check"] == "replicated" and "Norm 7.857922 vs 7.852091" in first["detail"]
    assert [b["rank"] for b in result["bad_ranks"]] == [1]
    findings = result["steps"][0]["findings"]
    assert findings[1]["node"] == LN and findings[1]["tensor"] == "output.0"
    assert {"Functional.layer_norm.2.forward", LN} <= {f["node"] for f in findings}


def test_clean_tp2pp2_checks_every_kind_and_finds_nothing():
    result = check_consistency(_graphs(PARALLEL / "tp2pp2"))
    assert result["findings"] == []
    assert result["checked"]["replicated"] > 0 and result["checked"]["collectives"] > 0
    assert result["checked"]["p2p"] == 4  # first micro-batch: activation forward, gradient back, on both TP ranks


def test_a_received_tensor_that_differs_from_the_sent_one(tmp_path):
    copy = tmp_path / "tp2pp2"
    shutil.copytree(PARALLEL / "tp2pp2", copy)
    dump_file = copy / "step0" / "rank2" / "dump.json"
    dump = json.loads(dump_file.read_text())
    dump["data"]["Distributed.irecv.0.forward"]["output"][0]["Norm"] *= 1.01
    dump_file.write_text(json.dumps(dump))
    findings = check_consistency(_graphs(copy))["findings"]
    p2p = [f for f in findings if f["check"] == "p2p"]
    assert [(f["rank"], f["reference"], f["node"]) for f in p2p] == [(2, 0, "Distributed.irecv.0.forward")]


def test_a_collective_output_one_member_disagrees_on(tmp_path):
    copy = tmp_path / "tp2pp2"
    shutil.copytree(PARALLEL / "tp2pp2", copy)
    dump_file = copy / "step0" / "rank1" / "dump.json"
    dump = json.loads(dump_file.read_text())
    dump["data"]["Distributed.all_reduce.1.forward"]["output"][0]["Max"] += 0.5
    dump_file.write_text(json.dumps(dump))
    findings = check_consistency(_graphs(copy))["findings"]
    # a TP all_reduce output is also a replicated tensor of the group: reported once
    assert [(f["rank"], f["reference"], f["node"], f["tensor"]) for f in findings][:1] == [
        (1, 0, "Distributed.all_reduce.1.forward", "output.0")]


@pytest.mark.shared
def test_shared_desync_names_rank_1_and_the_layernorm_weight():
    result = check_job(shared("msprobe/dumps/parallel/tp2_desync"), workers=1)
    truth = json.loads(shared("msprobe/dumps/parallel/TRUTH.json").read_text())["variants"]["tp2_desync"]["cross_rank"]
    first = result["bad_ranks"][0]
    assert (first["rank"], first["parameter"]) == (1, "module.decoder.layers.1.input_layernorm.weight")
    found = {(f["node"], f["tensor"].replace("input.", "input_args.").replace("param.", "parameters."))
             for f in result["steps"][0]["findings"]}
    assert {tuple(pair.split(" ")) for pair in truth["must_be_equal_but_differ"]} <= found


@pytest.mark.shared
@pytest.mark.parametrize("job", ["tp2", "tp2_perturb", "tp2pp2", "pp2_perturb"])
def test_shared_jobs_without_desync_agree(job):
    assert check_job(shared(f"msprobe/dumps/parallel/{job}"), workers=1)["bad_ranks"] == []


def test_a_single_rank_checks_nothing_and_is_inconclusive():
    result = check_job(PARALLEL / "tp1", workers=1)
    assert result["checked"] == 0 and result["bad_ranks"] == []
    assert result["verdict"] == "inconclusive" and result["reason"].startswith("inconclusive: nothing to check")


def test_a_clean_job_agrees_with_what_it_checked():
    result = check_job(PARALLEL / "tp2pp2", workers=1)
    assert result["verdict"] == "agree" and result["checked"] > 0


@pytest.mark.shared
@pytest.mark.parametrize("job", ["baseline", "perturb_rank2"])
def test_a_data_parallel_job_with_a_ring_of_sends_is_no_pipeline(job):
    """dist4: four data-parallel ranks that each isend to the next and irecv from the one before (a ring).

    Every rank starts by sending, so no stage waits for another: no pipeline. The irecv records hold the
    buffer before the transfer (none matches what was sent), so they are not checked. Each rank ran its own
    data (rank 2 of perturb_rank2 other tokens than the baseline's rank 2, but no less its own than the others'),
    so only the collectives and parameters can disagree, and none does.
    """
    result = check_job(shared(f"msprobe/dumps/dist4/statistics/{job}"), workers=1)
    assert result["layout"]["pp_groups"] == [] and result["layout"]["dp"] == 4
    assert [s["checked"]["p2p"] for s in result["steps"]] == [0, 0]
    assert all(s["checked"]["collectives"] > 0 and s["checked"]["dp"] > 0 for s in result["steps"])
    assert result["verdict"] == "agree"


def _three_replicas(tmp_path):
    """tp1 as three data-parallel replicas fed the same data (no communication: the layout is stated)."""
    for rank in range(3):
        shutil.copytree(PARALLEL / "tp1" / "step0" / "rank0", tmp_path / "step0" / f"rank{rank}")
    return tmp_path


def test_replicas_fed_the_same_data_name_the_one_that_departs(tmp_path):
    from graphcmp.core.distributed.topology import parse_layout

    job = _three_replicas(tmp_path)
    dump_file = job / "step0" / "rank2" / "dump.json"
    dump = json.loads(dump_file.read_text())
    dump["data"]["Functional.layer_norm.2.forward"]["output"][0]["Max"] += 0.25
    dump_file.write_text(json.dumps(dump))
    result = check_job(job, spec=parse_layout("tp=1,dp=3"), workers=1)
    first = result["bad_ranks"][0]
    assert (first["check"], first["rank"], first["node"], first["tensor"]) == (
        "dp replica", 2, "Functional.layer_norm.2.forward", "output.0")
    assert result["steps"][0]["checked"]["dp_tensors"] > 0 and result["verdict"] == "differ"


def test_replicas_fed_different_data_report_nothing_for_their_activations(tmp_path):
    from graphcmp.core.distributed.topology import parse_layout

    job = _three_replicas(tmp_path)
    for rank in (1, 2):  # every replica's own data: the same activation differs on each
        dump_file = job / "step0" / f"rank{rank}" / "dump.json"
        dump = json.loads(dump_file.read_text())
        dump["data"]["Functional.layer_norm.2.forward"]["output"][0]["Max"] += 0.25 * rank
        dump_file.write_text(json.dumps(dump))
    result = check_job(job, spec=parse_layout("tp=1,dp=3"), workers=1)
    assert result["bad_ranks"] == []
