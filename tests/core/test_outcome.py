"""One verdict for a comparison: agree, differ, or inconclusive when too little was compared (core/outcome.py)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from graphcmp.core.compare import compare_graphs, compare_paths
from graphcmp.core.matching import default_matchers, match_graphs
from graphcmp.core.outcome import (
    AGREE,
    DIFFER,
    INCONCLUSIVE,
    MIN_MATCHED_SHARE,
    Coverage,
    Outcome,
    SideCoverage,
    decide,
    job_outcome,
    report_outcome,
)
from graphcmp.core.readers import read_graph
from graphcmp.core.readers.msprobe import parse_msprobe
from tests.conftest import DATA, shared

GPT = DATA / "msprobe_gpt_mapping"


def test_renamed_modules_without_their_mapping_are_inconclusive_with_a_hint():
    report = compare_paths(GPT / "npu", GPT / "bench")
    outcome = report_outcome(report)
    assert outcome.verdict == INCONCLUSIVE and outcome.exit_code == 1
    # the blocks' modules and their calls are named differently: only the calls outside them pair
    cov = outcome.coverage
    assert cov.npu.share < MIN_MATCHED_SHARE and cov.bench.share < MIN_MATCHED_SHARE
    assert cov.npu.matched == cov.bench.matched == int(np.count_nonzero(
        report.npu.nodes.has_data[report.matches.npu_to_bench >= 0][1:]))
    assert any("--layer-mapping FILE" in h for h in outcome.hints)
    assert report.analysis().first is None  # nothing found among what was compared: still not "agree"


def test_the_same_runs_with_their_mapping_agree():
    from graphcmp.core.mapping_files import load_layer_mapping
    from graphcmp.core.matching.by_layer import LayerMatcher
    from graphcmp.core.matching.by_name import ExactMatcher

    npu, bench = read_graph(GPT / "npu"), read_graph(GPT / "bench")
    matchers = [LayerMatcher(load_layer_mapping(GPT / "mapping.yaml")), ExactMatcher()]
    outcome = report_outcome(compare_graphs(npu, bench, matchers=matchers))
    assert outcome.verdict == AGREE and outcome.exit_code == 0 and outcome.coverage.npu.share == 1.0


def test_mindspore_against_pytorch_without_mapping_options_names_them():
    report = compare_paths(DATA / "mindspore_cnn" / "bench", DATA / "pytorch_cnn" / "bench")
    outcome = report_outcome(report)
    assert outcome.verdict == INCONCLUSIVE
    assert outcome.hints and "--layer-mapping --api-mapping" in outcome.hints[0]
    assert "mindspore against pytorch" in outcome.hints[0]


def test_a_graph_against_a_dump_compares_no_tensor_and_says_so():
    report = compare_paths(DATA / "ge_tf_gatherv2" / "ge_proto_00056_Build.txt", DATA / "msprobe_md5" / "bench")
    outcome = report_outcome(report)
    assert outcome.verdict == INCONCLUSIVE and outcome.coverage.tensor_pairs == 0
    assert "no tensor pair was compared" in outcome.reason
    assert "different formats (ge against msprobe)" in outcome.hints[0]


@pytest.mark.parametrize("empty_side", ["npu", "bench"])
def test_a_dump_without_data_is_never_agreement(perturb_pair, empty_side):
    empty = parse_msprobe({"data": {}})
    full = read_graph(perturb_pair[1])
    npu, bench = (empty, full) if empty_side == "npu" else (full, empty)
    outcome = report_outcome(compare_graphs(npu, bench))
    assert outcome.verdict == INCONCLUSIVE
    assert outcome.reason == (f"inconclusive: the {empty_side} run holds no node with data; the {empty_side} run is "
                              "incomplete: dump.json: \"data\" holds no call (msprobe recorded nothing: was the dump "
                              "stopped before the first step?)")
    assert outcome.hints == ()


def test_a_truncated_dump_is_incomplete_even_where_all_it_holds_agrees(perturb_pair, tmp_path):
    cut = tmp_path / "cut"
    shutil.copytree(perturb_pair[1], cut)
    data = (cut / "dump.json").read_bytes()
    (cut / "dump.json").write_bytes(data[: len(data) * 9 // 10])  # the last tenth of the run is lost
    report = compare_paths(cut, perturb_pair[1])
    outcome = report_outcome(report)
    assert report.analysis().first is None and not np.any(report.verdicts.status == 2)
    assert outcome.verdict == INCONCLUSIVE
    assert "the npu run is incomplete: " in outcome.reason and "file ends early" in outcome.reason


def test_notes_about_call_stacks_only_do_not_make_a_run_incomplete(perturb_pair, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(perturb_pair[1], run)
    (run / "stack.json").unlink()
    report = compare_paths(run, perturb_pair[1])
    assert report.npu.info.missing == ("stack.json: file not found",)
    assert report_outcome(report).verdict == AGREE


def test_a_difference_wins_over_low_coverage_and_keeps_the_hint():
    cov = Coverage(SideCoverage(100, 10), SideCoverage(100, 10), 5)
    outcome = decide(cov, differs="first divergence at X (op)")
    assert outcome.verdict == DIFFER and outcome.reason.startswith("differ: first divergence at X (op)")
    assert "only 10 of 100 npu nodes" in outcome.reason


def test_the_threshold_is_a_majority_of_each_run():
    at = Coverage(SideCoverage(10, 5), SideCoverage(10, 5), 5)
    below = Coverage(SideCoverage(10, 5), SideCoverage(11, 5), 5)
    assert decide(at).verdict == AGREE and decide(below).verdict == INCONCLUSIVE


def test_extraop_with_fuzzy_pairs_each_add_with_its_twin_and_agrees(perturb_pair):
    npu, bench = read_graph(DATA / "msprobe_extraop" / "npu"), read_graph(perturb_pair[1])
    report = compare_graphs(npu, bench, fuzzy=True)
    partner = report.matches.npu_to_bench
    # the extra call shifts every add's counter by one: layers.0's first add is the bench run's add 1
    assert bench.nodes.ids[partner[npu.row("Tensor.__add__.2.forward")]] == "Tensor.__add__.1.forward"
    assert bench.nodes.ids[partner[npu.row("Tensor.__add__.3.forward")]] == "Tensor.__add__.2.forward"
    # no pair crosses another among the children of any matched pair
    for parent in np.flatnonzero(partner >= 0).tolist():
        kids = np.flatnonzero((npu.nodes.parent == parent) & (partner >= 0))
        assert np.all(np.diff(partner[kids]) > 0)
    # x + 0.0 * linear(x) = x: every paired tensor is bit-identical, so this is an exact rerun that agrees
    assert report.noise.precision.kind == "exact rerun"
    assert report_outcome(report).verdict == AGREE


def test_job_outcome_takes_the_worst_run_and_runs_on_one_side_only():
    def run(verdict):
        outcome = {"verdict": verdict, "reason": f"{verdict}: x"}
        return {"step": 0, "rank": 0, "error": None, "summary": {"outcome": outcome}}

    index = {"runs": [run(AGREE), run(AGREE)], "missing": {"npu_only": [], "bench_only": []},
             "analysis": {"origin": None}}
    assert job_outcome(index).verdict == AGREE
    assert job_outcome({**index, "runs": [run(AGREE), run(INCONCLUSIVE)]}).verdict == INCONCLUSIVE
    assert job_outcome({**index, "runs": [run(INCONCLUSIVE), run(DIFFER)]}).verdict == DIFFER
    assert job_outcome({**index, "missing": {"npu_only": [], "bench_only": ["step1_rank0"]}}).reason == \
        "inconclusive: step1_rank0 is only on the bench side (not compared)"
    origin = {"rank": 2, "step": 0, "node": "Functional.embedding.0.forward"}
    assert job_outcome({**index, "analysis": {"origin": origin}}).verdict == DIFFER
    # an entry without a recorded outcome (an older graphcmp) is never read as agreement
    legacy = {"step": 0, "rank": 0, "error": None, "summary": {"verdicts": {"pass": 3}}}
    assert job_outcome({**index, "runs": [legacy]}).verdict == INCONCLUSIVE


def test_outcome_round_trips_through_a_summary():
    outcome = Outcome(INCONCLUSIVE, "inconclusive: x", ("try y",), Coverage(SideCoverage(3, 1), SideCoverage(3, 1), 2))
    again = Outcome.from_dict(outcome.to_dict())
    assert (again.verdict, again.reason, again.hints) == (outcome.verdict, outcome.reason, outcome.hints)
    assert Outcome.from_dict({"verdict": "fine", "reason": "x"}) is None and Outcome.from_dict([]) is None


def test_coverage_counts_only_nodes_holding_data(perturb_pair):
    run = read_graph(perturb_pair[1])
    from graphcmp.core.outcome import coverage

    cov = coverage(run, run, match_graphs(run, run, default_matchers()), 7)
    holding = int(np.count_nonzero(run.nodes.has_data & (run.nodes.kind != 0) & (run.nodes.kind != 4)))
    assert cov.npu.nodes == cov.npu.matched == holding == 147 and cov.tensor_pairs == 7


@pytest.mark.shared
def test_mindspore_against_pytorch_transformer_shared():
    base = "mindspore_msprobe/dumps/{}/tf/statistics_mix/baseline/step0/rank0"
    report = compare_paths(shared(base.format("ms")), shared(base.format("pt")))
    outcome = report_outcome(report)
    assert outcome.verdict == INCONCLUSIVE and outcome.coverage.npu.matched < 0.05 * outcome.coverage.npu.nodes


def test_an_invented_parent_makes_a_run_incomplete_though_all_it_holds_agrees(perturb_pair, tmp_path):
    import json

    run = tmp_path / "run"
    shutil.copytree(perturb_pair[1], run)
    parents = json.loads((run / "construct.json").read_text())
    parents["Functional.embedding.0.forward"] = "Module.nowhere.Foo.forward.0"  # named, listed nowhere
    (run / "construct.json").write_text(json.dumps(parents, indent=1))
    outcome = report_outcome(compare_paths(perturb_pair[1], run))
    assert outcome.verdict == INCONCLUSIVE
    assert outcome.reason == ("inconclusive: the bench run is incomplete: construct.json: parent "
                              "'Module.nowhere.Foo.forward.0' named but not listed; added at top level, without data")


def test_msprobe_links_that_lead_nowhere_make_the_npu_run_incomplete():
    from graphcmp.core.compare import compare_vis
    from graphcmp.core.readers.vis import parse_vis

    leaf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": "[2]", "Max": "1.0", "Min": "0.0",
            "Mean": "0.5", "Norm": "1.0", "data_name": "-1"}

    def side(relu: str, link: list[str]) -> dict:
        node = {"node_type": 1, "subnodes": [], "matched_node_link": link,
                "output_data": {f"{relu}.output.0": leaf}, "input_data": {f"{relu}.input.0": leaf}}
        root = {"node_type": 0, "subnodes": [relu], "matched_node_link": ["DefaultModel"]}
        return {"root": "DefaultModel", "node": {"DefaultModel": root, relu: node}}

    good = parse_vis({"NPU": side("Functional.relu.0.forward", ["Functional.relu.0.forward"]),
                      "Bench": side("Functional.relu.0.forward", [])}, source="cmp.vis")
    assert report_outcome(compare_vis(good)).verdict == AGREE
    lost = parse_vis({"NPU": side("Functional.relu.0.forward", ["Functional.gelu.0.forward"]),
                      "Bench": side("Functional.relu.0.forward", [])}, source="cmp.vis")
    outcome = report_outcome(compare_vis(lost))
    assert outcome.verdict == INCONCLUSIVE
    assert ("the npu run is incomplete: matched_node_link of 1 npu node(s) links to a bench node the file does not "
            "hold (first: 'Functional.relu.0.forward' -> 'Functional.gelu.0.forward')") in outcome.reason
