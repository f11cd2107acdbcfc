"""Verdicts on real pairs and on planted cases: the known failure modes of existing tools."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from graphcmp.core.compare import compare_graphs, compare_paths
from graphcmp.core.judge import ERROR, PASS, WARNING, _worst_output_pair
from graphcmp.core.readers.msprobe import parse_msprobe
from tests.conftest import DATA

T = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4, 8], "Max": 3.0, "Min": -3.0,
     "Mean": 1e-9, "Norm": 12.0}


def _pair(npu_out, bench_out, npu_in=T, bench_in=T):
    def graph(inp, out):
        return parse_msprobe({"task": "statistics", "data": {
            "Functional.layer_norm.0.forward": {"input_args": [inp], "output": [out]}}})
    return compare_graphs(graph(npu_in, npu_out), graph(bench_in, bench_out))


def test_mean_near_zero_does_not_turn_red():
    report = _pair(dict(T, Mean=2e-9, Norm=12.0000001), T, npu_in=dict(T, Max=3.0000001))
    assert report.verdict("Functional.layer_norm.0.forward").status == "pass"


def test_inf_in_norm_alone_is_an_error():
    report = _pair(dict(T, Norm=float("inf")), T)
    verdict = report.verdict("Functional.layer_norm.0.forward")
    assert verdict.status == "error" and "Norm=inf" in verdict.reason and not verdict


def test_equal_inputs_differing_outputs_is_never_a_pass():
    # float32 on both sides: 1e-5 is 168 unit roundoffs, far beyond one call's rounding
    report = _pair(dict(T, Norm=12.0 * (1 + 1e-5)), T)
    verdict = report.verdict("Functional.layer_norm.0.forward")
    assert verdict.status == "error" and "inputs agree, outputs differ" in verdict.reason
    assert report.analysis().first.cause == "op"


def test_small_output_difference_explained_by_its_inputs_passes():
    def run(scale):
        out = dict(T, Norm=12.0 * scale)
        return parse_msprobe({"data": {
            "Functional.linear.0.forward": {"input_args": [T], "output": [out]},
            "Functional.layer_norm.0.forward": {"input_args": [out], "output": [dict(out, Max=3.0 * scale)]}}})
    report = compare_graphs(run(1 + 1e-5), run(1.0))
    assert report.analysis().first.node == "Functional.linear.0.forward"
    assert report.verdict("Functional.layer_norm.0.forward").status == "pass"  # carries the error it was given


def test_shape_change_is_an_error():
    report = _pair(dict(T, shape=[8, 8]), T)
    verdict = report.verdict("Functional.layer_norm.0.forward")
    assert verdict.status == "error" and "shape [8, 8] vs [4, 8]" in verdict.reason
    assert report.analysis().first.cause == "shape change"


def test_another_view_of_the_same_elements_is_not_a_shape_change():
    # autocast's bf16 linear backward returns [3, 24, 96] where float32's addmm returns [72, 96]
    report = _pair(dict(T, shape=[2, 2, 8]), T)
    verdict = report.verdict("Functional.layer_norm.0.forward")
    assert verdict.status == "pass" and "layout [2, 2, 8] vs [4, 8]" in verdict.reason
    assert report.analysis().first is None


def test_perturbed_linear_is_an_error_even_though_its_weight_changed(perturb_pair):
    # msprobe 26.2.0 marks this Linear "pass" because its weight input changed too
    report = compare_paths(*perturb_pair)
    assert report.verdict("Functional.linear.2.forward").status == "error"
    assert report.verdict("Module.encoder.layers.1.linear1.Linear.forward.0").status == "error"
    # everything in layer 0 is untouched
    layer0 = [i for i in report.npu.nodes.ids if ".layers.0." in i and i.endswith("forward.0")]
    assert layer0 and all(report.verdict(i).status in ("pass", "skip") for i in layer0)


def test_roll_up_shows_the_worst_descendant(perturb_pair):
    report = compare_paths(*perturb_pair)
    root = report.verdict("DefaultModel")
    assert root.worst == "error"
    v = report.verdicts
    parent = report.npu.nodes.parent
    for row in range(1, len(parent)):
        assert v.worst[parent[row]] >= v.worst[row]
        assert v.worst_severity[parent[row]] >= v.worst_severity[row]


def test_overflow_dump(perturb_pair):
    report = compare_paths(DATA / "msprobe_overflow_tokens" / "npu", DATA / "msprobe_overflow_tokens" / "bench")
    verdict = report.verdict("Functional.conv2d.1.forward")
    # msprobe's colour rule checks inf/nan only in Max/Min and leaves this node "pass"
    assert verdict.status == "error" and "overflow on npu" in verdict.reason
    assert report.verdict("Functional.conv2d.0.forward").status == "pass"


def test_bf16_precision_change_is_context_stated_once(perturb_pair):
    # a clean bf16 autocast run against float32: the dtype change is expected, stated once, and paints nothing
    report = compare_paths(DATA / "msprobe_bf16" / "npu", perturb_pair[1])
    assert not np.any(report.verdicts.status >= WARNING) and bool(report)
    precision = report.noise.precision
    assert precision.kind == "mixed precision"
    assert ("bfloat16", "float32") in {(a, b) for a, b, _ in precision.dtype_pairs}
    findings = [f for f in report.analysis().findings if "bfloat16 vs float32" in f.message]
    assert len(findings) == 1 and findings[0].kind == "precision"
    assert report.verdict("Functional.embedding.0.forward").status == "pass"


def test_md5_mode_any_difference_counts():
    report = compare_paths(DATA / "msprobe_md5" / "npu", DATA / "msprobe_md5" / "bench")
    assert report.npu.info.task == "md5"
    assert report.verdict("Functional.linear.2.forward").status == "error"
    assert "md5 differs" in report.verdict("Functional.linear.2.forward").reason
    assert report.verdict("Functional.linear.0.forward").status == "pass"


def test_identical_runs_all_pass(perturb_pair):
    report = compare_paths(perturb_pair[1], perturb_pair[1])
    assert set(np.unique(report.verdicts.status).tolist()) <= {PASS, -1}
    assert bool(report)


def test_unmatched_output_slot_is_flagged():
    bench = parse_msprobe({"data": {"Functional.split.0.forward": {"input_args": [T], "output": [T, T]}}})
    npu_data = {"data": {"Functional.split.0.forward": {"input_args": [T], "output": [T]}}}
    npu = parse_msprobe(copy.deepcopy(npu_data))
    assert compare_graphs(bench, npu).verdict("Functional.split.0.forward").status == "warning"
    assert ERROR == 2


def _worst_by_sort(node, is_out, wanted, level, severity):
    candidates = np.flatnonzero(is_out & wanted)
    order = candidates[np.lexsort((severity[candidates], level[candidates], node[candidates]))]
    owners = node[order]
    last = np.ones(len(order), bool)
    last[:-1] = owners[1:] != owners[:-1]
    return owners[last], order[last]


@pytest.mark.parametrize("seed", range(6))
def test_worst_output_pair_is_the_last_of_a_sort_by_node_level_severity(seed):
    """Highest level, then severity (NaN above every number), then the last of equals; in node order or not."""
    rng = np.random.default_rng(seed)
    n = 5_000
    node = np.sort(rng.integers(0, 800, n)) if seed % 2 == 0 else rng.integers(0, 800, n)
    level = rng.integers(0, 3, n).astype(np.int8)
    severity = rng.choice([0.0, 0.5, 1.0, 2.0, np.inf, -np.inf, np.nan], n)  # ties, infinities and NaN
    is_out, wanted = rng.random(n) < 0.7, rng.random(n) < 0.8
    got, expected = (_worst_output_pair(node, is_out, wanted, level, severity),
                     _worst_by_sort(node, is_out, wanted, level, severity))
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    none = _worst_output_pair(node, np.zeros(n, bool), wanted, level, severity)
    assert len(none[0]) == len(none[1]) == 0
