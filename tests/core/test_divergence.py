"""The first divergence on every real pair whose truth is known, planted faults, tolerance modes, overflow."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from graphcmp.core.compare import compare_graphs, compare_paths
from graphcmp.core.divergence import analyze, find_divergence
from graphcmp.core.overflow import decode_overflow_status, overflow_levels, read_overflow_records
from graphcmp.core.readers.msprobe import parse_msprobe, read_msprobe
from tests.conftest import DATA, shared

# (npu dump, bench dump, expected first divergent call, its innermost module); truth from the dumps' READMEs
REAL_CASES = [
    ("msprobe/dumps/tf_small/statistics/perturb/step0/rank0", "msprobe/dumps/tf_small/statistics/baseline/step0/rank0",
     "Functional.linear.2.forward", "Module.encoder.layers.1.linear1.Linear.forward.0"),
    ("msprobe/dumps/tf_small/tensor/perturb/step0/rank0", "msprobe/dumps/tf_small/tensor/baseline/step0/rank0",
     "Functional.linear.2.forward", "Module.encoder.layers.1.linear1.Linear.forward.0"),
    ("msprobe/dumps/tf_small/statistics_L0/perturb/step0/rank0",
     "msprobe/dumps/tf_small/statistics_L0/baseline/step0/rank0",
     "Module.encoder.layers.1.linear1.Linear.forward.0", "Module.encoder.layers.1.TransformerEncoderLayer.forward.0"),
    ("msprobe/dumps/cnn/statistics/perturb/step0/rank0", "msprobe/dumps/cnn/statistics/baseline/step0/rank0",
     "Functional.conv2d.1.forward", "Module.conv2.Conv2d.forward.0"),
    ("msprobe/dumps/tf_big/statistics/perturb/step0/rank0", "msprobe/dumps/tf_big/statistics/baseline/step0/rank0",
     "Functional.linear.2.forward", "Module.encoder.layers.1.linear1.Linear.forward.0"),
    ("msprobe/dumps/tf_huge/statistics/perturb/step0/rank0", "msprobe/dumps/tf_huge/statistics/baseline/step0/rank0",
     "Functional.linear.2.forward", "Module.encoder.layers.1.linear1.Linear.forward.0"),
    ("msprobe/dumps/dist4/statistics/perturb_rank2/step0/rank2", "msprobe/dumps/dist4/statistics/baseline/step0/rank2",
     "Functional.embedding.0.forward", "Module.embedding.Embedding.forward.0"),
    ("mindspore_msprobe/dumps/ms/tf/statistics_mix/perturb/step0/rank0",
     "mindspore_msprobe/dumps/ms/tf/statistics_mix/baseline/step0/rank0",
     "Primitive.matmul.MatMul.10.forward", "Cell.layers.1.mlp.fc1.Dense.forward.0"),
    ("mindspore_msprobe/dumps/ms/tf/statistics_L0/perturb/step0/rank0",
     "mindspore_msprobe/dumps/ms/tf/statistics_L0/baseline/step0/rank0",
     "Cell.layers.1.mlp.fc1.Dense.forward.0", "Cell.layers.1.mlp.MLP.forward.0"),
    ("mindspore_msprobe/dumps/ms/cnn/statistics_mix/perturb/step0/rank0",
     "mindspore_msprobe/dumps/ms/cnn/statistics_mix/baseline/step0/rank0",
     "Primitive.conv2d.Conv2D.1.forward", "Cell.conv2.Conv2d.forward.0"),
    ("mindspore_msprobe/dumps/ms/tf/statistics_mix_2steps/perturb/step1/rank0",
     "mindspore_msprobe/dumps/ms/tf/statistics_mix_2steps/baseline/step1/rank0",
     "Primitive.gather.Gather.0.forward", "Cell.embedding.Embedding.forward.0"),
]


def test_sample_pair_names_the_perturbed_linear(perturb_pair):
    d = find_divergence(compare_paths(*perturb_pair))
    assert (d.node, d.module) == ("Functional.linear.2.forward", "Module.encoder.layers.1.linear1.Linear.forward.0")
    assert d.cause == "inputs differ" and "weight (encoder.layers.1.linear1.weight)" in d.evidence[-1]  # input.1
    assert d.summary.startswith("weight (encoder.layers.1.linear1.weight) differs from the bench run's by")
    assert d.call_site.endswith("x = self.encoder(x)")  # the user's line, from stack.json
    assert (d.rank, d.step, d.micro_step, d.direction) == (0, 0, 0, "forward")


@pytest.mark.shared
@pytest.mark.parametrize(("npu", "bench", "node", "module"), REAL_CASES,
                         ids=[c[0].split("/")[2] + "/" + c[0].split("/")[4] for c in REAL_CASES])
def test_real_pairs(npu, bench, node, module):
    d = find_divergence(compare_paths(shared(npu), shared(bench)))
    assert (d.node, d.module) == (node, module)
    assert d.cause == "inputs differ"


def test_overflow_is_the_cause_and_first_overflow_is_reported():
    report = compare_paths(DATA / "msprobe_overflow_tokens" / "npu", DATA / "msprobe_overflow_tokens" / "bench")
    analysis = analyze(report)
    assert analysis.first.node == "Functional.conv2d.1.forward" and analysis.first.cause == "overflow"
    assert analysis.first_overflow.node == "Functional.conv2d.1.forward"
    assert any(f.kind == "first_overflow" for f in analysis.findings)


def test_overflow_levels_on_real_dump():
    graph = read_msprobe(DATA / "msprobe_overflow_tokens" / "npu")
    levels = overflow_levels(graph)
    # high: the 1e38-scaled weight's own Norm is already inf in float32, and the output Mean/Norm overflow too
    conv2 = graph.view("Functional.conv2d.1.forward")
    assert any(t.stats.get("norm") == float("inf") for t in conv2.tensors if t.slot == "1")
    assert levels[graph.row("Functional.conv2d.1.forward")] == 2
    assert levels[graph.row("Functional.conv2d.0.forward")] == 0
    downstream = graph.row("Functional.batch_norm.1.forward")
    assert levels[downstream] in (1, 2)  # its input is already bad


def test_fp16_limit_counts_as_overflow():
    t = {"type": "torch.Tensor", "dtype": "torch.float16", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
         "Norm": 1.0}
    graph = parse_msprobe({"data": {"Functional.mul.0.forward": {"input_args": [t], "output": [dict(t, Max=65504.0)]}}})
    assert overflow_levels(graph)[graph.row("Functional.mul.0.forward")] == 3


def _planted(bench_dir, node, factor):
    docs = {name: json.loads((bench_dir / f"{name}.json").read_text()) for name in ("dump", "construct", "stack")}
    npu_docs = copy.deepcopy(docs)
    for out in npu_docs["dump"]["data"][node]["output"]:
        for key in ("Max", "Min", "Mean", "Norm"):
            out[key] *= factor
    make = lambda d: parse_msprobe(d["dump"], d["construct"], d["stack"])  # noqa: E731
    return make(npu_docs), make(docs)


@pytest.mark.parametrize("node", ["Functional.layer_norm.0.forward", "Functional.linear.3.forward",
                                  "Torch.relu.2.forward", "Functional.layer_norm.6.forward"])
def test_planted_output_fault_is_found_with_cause_op(perturb_pair, node):
    npu, bench = _planted(perturb_pair[1], node, 1.05)
    d = find_divergence(compare_graphs(npu, bench))
    assert d.node == node and d.cause == "op"


def test_cross_device_noise_is_not_a_divergence_but_growth_is(perturb_pair):
    docs = {name: json.loads((perturb_pair[1] / f"{name}.json").read_text()) for name in ("dump", "construct")}
    rng = np.random.default_rng(0)
    noisy = copy.deepcopy(docs)
    for record in noisy["dump"]["data"].values():
        for out in record.get("output") or []:
            if isinstance(out, dict) and isinstance(out.get("Norm"), float):
                out["Norm"] *= 1 + rng.uniform(1e-7, 5e-6)  # float32 noise of other hardware
    bench = parse_msprobe(docs["dump"], docs["construct"])
    analysis = analyze(compare_graphs(parse_msprobe(noisy["dump"], noisy["construct"]), bench))
    assert not analysis.exact_rerun and analysis.first is None
    grown = copy.deepcopy(noisy)
    grown["dump"]["data"]["Functional.linear.3.forward"]["output"][0]["Norm"] *= 1.02
    d = find_divergence(compare_graphs(parse_msprobe(grown["dump"], grown["construct"]), bench))
    assert d.node == "Functional.linear.3.forward"


def test_identical_runs_have_no_divergence(perturb_pair):
    analysis = analyze(compare_paths(perturb_pair[1], perturb_pair[1]))
    assert analysis.first is None and analysis.exact_rerun and not analysis.findings


def test_clean_mixed_precision_run_has_no_divergence(perturb_pair):
    analysis = analyze(compare_paths(DATA / "msprobe_bf16" / "npu", perturb_pair[1]))
    assert analysis.first is None and analysis.precision.kind == "mixed precision"


def test_dtype_change_is_the_cause_only_where_the_precision_explains_the_error(perturb_pair):
    # float16 cannot hold values below its smallest normal number (6.1e-5): the npu's tiny outputs lose digits
    def run(dtype, small):
        t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [64], "Max": 1.0, "Min": -1.0,
             "Mean": 0.0, "Norm": 4.0}
        out = dict(t, dtype=f"torch.{dtype}", Max=small, Min=-small, Norm=4 * small)
        return parse_msprobe({"data": {"Torch.mul.0.forward": {"input_args": [t], "output": [out]}}})
    d = find_divergence(compare_graphs(run("float16", 3e-6), run("float32", 2e-6)))
    assert d.cause == "dtype change" and "smallest normal" in d.evidence[-1]


def test_inserted_cast_in_a_kernel_dump(data_dir):
    # MindSpore GRAPH_MODE kernel dump: the npu run has a real fp16 round-trip Cast after conv2
    case = data_dir / "mindspore_dump_lenet_cast"
    d = find_divergence(compare_paths(case / "npu", case / "bench"))
    assert d.node.endswith("relu-ReLU/ReLU-op1") and d.cause == "inputs differ"
    assert "computed by" in d.evidence[-1] and "Cast-op" in d.evidence[-1]
    assert d.evidence[-1].endswith("an input computed by a call the bench run does not have")


def test_decode_overflow_status(tmp_path):
    assert decode_overflow_status(0x08 | 0x10 | 0x400) == (
        "min-negative sign flip", "integer add/sub/mul overflow", "cube accumulation overflow")
    record = tmp_path / "overflow.json"
    record.write_text(json.dumps({"AI Core": {"model_id": 1, "task_id": 7, "status": 32},
                                  "DHA Atomic Add": {"status": 0}, "L2 Atomic Add": {"status": 256}}))
    decoded = read_overflow_records(record)
    assert decoded == {"AI Core": ("float overflow",), "DHA Atomic Add": (),
                       "L2 Atomic Add": ("FP32 to FP16 or int32 to FP16 overflow",)}


@pytest.mark.shared
@pytest.mark.parametrize(("npu", "bench", "mapping", "expected"), [
    ("ms/tf", "pt/tf", "tf_ms_to_pt.yaml", "Cell.layers.1.mlp.fc1.Dense.forward.0"),
    ("pt/tf", "ms/tf", "tf_ms_to_pt.yaml", "Module.layers.1.mlp.fc1.Linear.forward.0"),
    ("ms/cnn", "pt/cnn", "cnn_ms_to_pt.yaml", "Cell.conv2.Conv2d.forward.0"),
    ("pt/cnn", "ms/cnn", "cnn_ms_to_pt.yaml", "Module.conv2.Conv2d.forward.0"),
])
def test_cross_framework_divergence(npu, bench, mapping, expected):
    """MindSpore vs PyTorch: baselines agree; the perturbed run diverges at the Cell/Module of the truth op."""
    from graphcmp.core.matching.specs import matchers_from_specs

    root = "mindspore_msprobe/dumps/{}/statistics_mix/{}/step0/rank0"
    matchers = matchers_from_specs([f"layer-mapping={shared('mindspore_msprobe/mapping/' + mapping)}", "exact"])
    baseline = compare_graphs(read_msprobe(shared(root.format(npu, "baseline"))),
                              read_msprobe(shared(root.format(bench, "baseline"))), matchers=matchers)
    assert find_divergence(baseline) is None
    perturbed = compare_graphs(read_msprobe(shared(root.format(npu, "perturb"))),
                               read_msprobe(shared(root.format(bench, "baseline"))), matchers=matchers)
    d = find_divergence(perturbed)
    assert d.node == expected and d.cause == "inputs differ"
