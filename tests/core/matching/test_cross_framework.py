"""MindSpore <-> PyTorch comparisons, both directions: clean baselines, the perturbed op found, zero gradients calm.

Real data: MindSpore 2.10 and PyTorch twins with bit-identical weights and inputs (losses agree to
1e-6). The cnn runs ship in tests/data; the transformer (tf) runs, TRUTH.json, the ground-truth
cell maps and msprobe's own results are read from ../shared/data/mindspore_msprobe.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.records import Role
from tests.conftest import DATA, shared
from tests.core.matching.helpers import compare_with, first_forward_error, partner, statuses

CNN_YAML = DATA / "mapping_files" / "cnn_ms_to_pt.yaml"
RUNS = {("ms", "baseline"): DATA / "mindspore_cnn" / "bench", ("ms", "perturb"): DATA / "mindspore_cnn" / "npu",
        ("pt", "baseline"): DATA / "pytorch_cnn" / "bench", ("pt", "perturb"): DATA / "pytorch_cnn" / "npu"}
RULES = {"file": [f"layer-mapping={CNN_YAML}", "exact"], "bare": ["layer-mapping", "api-mapping", "exact", "fused"]}


def _cnn(npu: tuple[str, str], bench: tuple[str, str], rules: str):
    return compare_with(read_msprobe(RUNS[npu]), read_msprobe(RUNS[bench]), RULES[rules])


@pytest.mark.parametrize("rules", ["file", "bare"])
@pytest.mark.parametrize(("npu", "bench"), [("ms", "pt"), ("pt", "ms")])
def test_cnn_baselines_across_frameworks_have_no_error(npu, bench, rules):
    report = _cnn((npu, "baseline"), (bench, "baseline"), rules)
    assert statuses(report, "error") == set()
    warnings = statuses(report, "warning")
    if npu == "ms":  # bare: the built-in framework layers pair BatchNorm with batch_norm as the file does
        # MindSpore's BatchNorm primitive returns y, batch mean/variance and two saved statistics; PyTorch's
        # batch_norm returns y only. y agrees to 2e-7; the four extra outputs have no counterpart.
        assert warnings == {"Primitive.bn_train.BatchNorm.0.forward", "Primitive.bn_train.BatchNorm.1.forward"}
        for node in warnings:
            outputs = report.npu.tensor_rows(node)[report.npu.tensors.role[report.npu.tensor_rows(node)] == Role.OUTPUT]
            assert len(outputs) == 5 and np.isin(outputs, report.pairs.npu).sum() == 1
            assert report.verdicts.severity[report.npu.row(node)] < 1e-6
    else:
        assert warnings == set()
    # msprobe 26.2.0 -lm cnn_ms_to_pt.yaml matches 56 of 73 and rates 55 of them error (dtype strings)
    assert report.matches.matched >= (67 if npu == "ms" else 55)


def test_dtypes_are_normalised_across_frameworks():
    report = _cnn(("ms", "baseline"), ("pt", "baseline"), "file")
    nt, bt = report.npu.tensors, report.bench.tensors
    kinds = {(nt.dtype[i], bt.dtype[j]) for i, j in zip(report.pairs.npu.tolist(), report.pairs.bench.tolist())}
    assert {("Float32", "torch.float32"), ("Int32", "torch.int64")} <= kinds  # labels, compared as numbers
    assert report.verdict("Functional.cross_entropy.0.forward").status == "pass"  # Int32 vs int64 labels


@pytest.mark.parametrize("rules", ["file", "bare"])
def test_perturbed_mindspore_run_first_errs_at_the_perturbed_cell(rules):
    # TRUTH.json: the first divergent op is Primitive.conv2d.Conv2D.1.forward in Cell.conv2.Conv2d.forward.0; against
    # PyTorch that op is half of a fused group (Conv2D + BiasAdd = conv2d), compared through the Cell
    report = _cnn(("ms", "perturb"), ("pt", "baseline"), rules)
    assert first_forward_error(report) == "Cell.conv2.Conv2d.forward.0"
    assert report.verdict("Cell.conv1.Conv2d.forward.0").status == "pass"


@pytest.mark.parametrize("rules", ["file", "bare"])
def test_perturbed_pytorch_run_against_mindspore_baseline(rules):
    report = _cnn(("pt", "perturb"), ("ms", "baseline"), rules)
    assert first_forward_error(report) == "Module.conv2.Conv2d.forward.0"  # the Module of Functional.conv2d.1


def test_gradients_zero_in_theory_are_not_flagged():
    # conv biases in front of BatchNorm get gradients of ~5e-8 that differ 10-30 % between the frameworks
    report = _cnn(("ms", "baseline"), ("pt", "baseline"), "file")
    for cell in ("Cell.conv1.Conv2d.parameters_grad.0", "Cell.conv2.Conv2d.parameters_grad.0"):
        rows = report.npu.tensor_rows(cell)
        bias = next(r for r in rows if report.npu.tensors.slot[r] == "bias")
        assert abs(report.npu.tensors.stats[bias, 3]) < 1e-7  # Norm
        assert report.verdict(cell).status == "pass"


def test_parameter_names_pair_across_frameworks():
    report = _cnn(("ms", "baseline"), ("pt", "baseline"), "file")
    grads = report.npu.tensor_rows("Cell.bn1.BatchNorm2d.parameters_grad.0")
    paired = dict(zip(report.pairs.npu.tolist(), report.pairs.bench.tolist()))
    names = {report.npu.tensors.slot[r]: report.bench.tensors.slot[paired[r]] for r in grads.tolist() if r in paired}
    assert names == {"gamma": "weight", "beta": "bias"}


def test_backward_api_outputs_are_not_paired_across_frameworks():
    # PyTorch's msprobe record of cross_entropy's backward holds -onehot/N (the nll_loss input gradient),
    # MindSpore's the real logits gradient: only their incoming gradient (the input) is compared
    report = _cnn(("ms", "baseline"), ("pt", "baseline"), "file")
    rows = report.npu.tensor_rows("Functional.cross_entropy.0.backward")
    roles = report.npu.tensors.role[rows]
    assert np.isin(rows[roles == Role.INPUT], report.pairs.npu).all()
    assert not np.isin(rows[roles == Role.OUTPUT], report.pairs.npu).any()
    assert report.verdict("Functional.cross_entropy.0.backward").status == "skip"


# ---------------------------------------------------------------------------------------------------------------
# The transformer, from ../shared/data/mindspore_msprobe


def _tf(framework: str, variant: str, model: str = "tf"):
    return read_msprobe(shared(f"mindspore_msprobe/dumps/{framework}/{model}/statistics_mix/{variant}/step0/rank0"))


def _truth() -> dict:
    return json.loads(shared("mindspore_msprobe/dumps/TRUTH.json").read_text())


TF_RULES = {"file": ["layer-mapping={yaml}", "exact"], "bare": ["layer-mapping", "api-mapping", "exact", "fused"]}


def _tf_specs(rules: str, yaml: str = "tf_ms_to_pt.yaml") -> list[str]:
    path = shared(f"mindspore_msprobe/mapping/{yaml}")
    return [s.format(yaml=path) for s in TF_RULES[rules]]


@pytest.mark.shared
@pytest.mark.parametrize("rules", ["file", "bare"])
@pytest.mark.parametrize(("npu", "bench"), [("ms", "pt"), ("pt", "ms")])
def test_tf_baselines_across_frameworks_are_clean(npu, bench, rules):
    report = compare_with(_tf(npu, "baseline"), _tf(bench, "baseline"), _tf_specs(rules))
    assert statuses(report, "error") == statuses(report, "warning") == set()
    assert report.matches.rule_report()["unused"] == []
    if npu == "ms":
        results = json.loads(shared("mindspore_msprobe/vis/results.json").read_text())
        npu_side = next(g for g in results["x_tf_stats_baseline_lmyaml"]["db"]["per_graph"] if g["side"] == "NPU")
        assert npu_side["matched"] == 149  # msprobe 26.2.0 with tf_ms_to_pt.yaml, all 148 matched nodes error
        assert report.matches.matched == 296 > npu_side["matched"]
    # attn.k_proj.bias gets ~4e-9 gradients (softmax is shift invariant), 10-30 % apart: pure noise, not flagged
    prefix = "Cell" if npu == "ms" else "Module"
    cls = "Dense" if npu == "ms" else "Linear"
    for layer in (0, 1):
        assert report.verdict(f"{prefix}.layers.{layer}.attn.k_proj.{cls}.parameters_grad.0").status == "pass"


@pytest.mark.shared
@pytest.mark.parametrize("rules", ["file", "bare"])
def test_tf_perturbed_mindspore_run_lands_on_the_truth(rules):
    truth = _truth()["ms/tf/statistics_mix/{baseline,perturb}/step0/rank0"]
    op = truth["first_record_with_different_output"]["name"]  # Primitive.matmul.MatMul.10.forward
    cell = truth["first_forward_layer_with_identical_inputs_but_different_output"]["name"]
    report = compare_with(_tf("ms", "perturb"), _tf("pt", "baseline"), _tf_specs(rules))
    assert first_forward_error(report) == cell
    group = next(g for g in report.matches.groups if report.npu.row(op) in g.npu)
    assert report.npu.nodes.ids[group.via] == cell  # the op is compared through its Cell


@pytest.mark.shared
def test_tf_perturbed_pytorch_run_lands_on_the_truth_module():
    truth = _truth()["pt/tf/statistics_mix/{baseline,perturb}/step0/rank0"]
    report = compare_with(_tf("pt", "perturb"), _tf("ms", "baseline"), _tf_specs("file"))
    assert first_forward_error(report) == truth["first_forward_layer_with_identical_inputs_but_different_output"][
        "name"]  # Module.layers.1.mlp.fc1.Linear.forward.0, holding Functional.linear.10.forward


@pytest.mark.shared
@pytest.mark.parametrize(("npu", "bench", "yaml", "cell_map", "matched"), [
    (("ms", "tf"), ("pt", "tf"), "tf_ms_to_pt.yaml", "cell_map_tf_ms_to_pt.json", 296),
    (("ms", "tf_renamed"), ("pt", "tf"), "tf_renamed_ms_to_pt.yaml", "cell_map_tf_renamed_ms_to_pt.json", 296),
    (("ms", "tf_renamed"), ("ms", "tf"), "tf_renamed_ms_to_ms.yaml", "cell_map_tf_renamed_ms_to_ms.json", 316),
])
def test_every_cell_of_the_ground_truth_map_is_matched(npu, bench, yaml, cell_map, matched):
    truth = json.loads(shared(f"mindspore_msprobe/mapping/{cell_map}").read_text())["map"]
    report = compare_with(_tf(npu[0], "baseline", npu[1]), _tf(bench[0], "baseline", bench[1]),
                          _tf_specs("file", yaml))
    assert {k: partner(report, k) for k in truth} == truth  # 77 Cells: forward, backward, parameters_grad
    assert report.matches.matched == matched  # msprobe 26.2.0 renamed ms->ms: 297 of 316 (19 grads unmatched)
    assert statuses(report, "error") == set()
