"""The noise model on real mixed-precision pairs (bf16/fp16 npu against fp32) and on planted cases."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from graphcmp.core.compare import compare_graphs, compare_paths
from graphcmp.core.dataflow import trained_parameters
from graphcmp.core.noise import (
    NORMALIZING_OPS,
    NodeRole,
    _drift_of_others,
    _module_identity,
    _normalized_lengths,
    element_count,
    unit_roundoff,
)
from graphcmp.core.readers.msprobe import parse_msprobe, read_msprobe
from graphcmp.core.readers.pair import read_pair
from graphcmp.core.records import Direction
from graphcmp.core.rules import ERROR
from graphcmp.core.tensorcmp import tensor_metrics_for
from tests.conftest import DATA, SHARED, shared

NOISE = "msprobe/dumps/noise"


def _noise_cases() -> list[tuple[str, int]]:
    path = SHARED / NOISE / "TRUTH.json"
    if not path.is_file():
        return []
    truth = json.loads(path.read_text())
    return [(name, step) for name, case in truth.items() if not name.startswith("_")
            for step in range(case.get("steps", 1))]


def _compare(npu, bench):
    npu, bench = read_pair(npu, bench)
    return compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))


@pytest.mark.shared
@pytest.mark.parametrize(("case", "step"), _noise_cases() or [("", 0)], ids=lambda v: str(v))
def test_every_shared_noise_case(case, step):
    """Bug cases: the truth op (or its module) is the first origin; clean cases: no origin, no error verdict."""
    truth = json.loads(shared(f"{NOISE}/TRUTH.json").read_text())[case]
    report = _compare(shared(f"{NOISE}/{truth['npu']}/step{step}/rank0"),
                      shared(f"{NOISE}/{truth['bench']}/step{step}/rank0"))
    first = report.analysis().first
    assert report.noise.precision.kind == "mixed precision"
    if truth["truth_nodes"] and step == truth.get("truth_step", 0):
        assert first is not None and {first.node, first.module} & set(truth["truth_nodes"])
        assert first.margin > report.noise.rule.origin_margin
    else:
        assert first is None
        assert not np.any(report.verdicts.status == ERROR)
        assert report.noise.role_counts()["propagated"] == 0


def test_wrong_attention_scale_is_an_argument_that_differs():
    report = compare_paths(DATA / "noise_softmax_scale_bf16" / "npu", DATA / "noise_softmax_scale_bf16" / "bench")
    first = report.analysis().first
    assert first.node == "Tensor.__mul__.2.forward"
    assert first.module == "Module.blocks.2.attn.CausalSelfAttention.forward.0"
    assert first.cause == "argument differs" and "input.1 0.125 vs 0.25" in first.evidence[-1]
    assert report.verdict("Tensor.__mul__.2.forward").status == "error"
    # the same op in the other blocks, fed the same bf16 rounding, is within noise
    for block in (0, 1, 3):
        assert report.noise.role[report.npu.row(f"Tensor.__mul__.{block}.forward")] == NodeRole.WITHIN_NOISE


def test_clean_fp16_run_is_within_noise_everywhere():
    report = compare_paths(DATA / "noise_clean_fp16" / "npu", DATA / "noise_clean_fp16" / "bench")
    assert report.analysis().first is None and bool(report)
    assert report.noise.precision.dtype_pairs == (("float16", "float32", 141), ("float32", "float32", 131))
    assert not np.any(report.verdicts.status == ERROR)  # msprobe 26.2.0 paints 179 nodes of this run error
    assert report.noise.noise_level < 20 * unit_roundoff("float16")


def test_clean_bf16_runs_statistics_and_tensor(perturb_pair):
    for npu, bench in ((DATA / "msprobe_bf16" / "npu", perturb_pair[1]),):
        report = _compare(npu, bench)
        assert report.analysis().first is None and not np.any(report.verdicts.status == ERROR)


@pytest.mark.shared
def test_clean_bf16_tensor_run():
    report = _compare(shared("msprobe/dumps/tf_small/tensor/bf16/step0/rank0"),
                      shared("msprobe/dumps/tf_small/tensor/baseline/step0/rank0"))
    assert np.isfinite(report.pairs.metrics["cosine"]).any()
    assert report.analysis().first is None and not np.any(report.verdicts.status == ERROR)


def _tensor_run(tmp_path, name, tensors):
    """A tensor-mode msprobe folder whose every output is an .npy file (stats computed from the values)."""
    folder = tmp_path / name
    (folder / "dump_tensor_data").mkdir(parents=True)
    data = {}
    for node, (inputs, output) in tensors.items():
        record = {}
        for role, values in (("input_args", inputs), ("output", [output])):
            leaves = []
            for k, value in enumerate(values):
                file = f"{node}.{role}.{k}.npy"
                np.save(folder / "dump_tensor_data" / file, value)
                leaves.append({"type": "torch.Tensor", "dtype": "torch.float32", "shape": list(value.shape),
                               "Max": float(value.max()), "Min": float(value.min()), "Mean": float(value.mean()),
                               "Norm": float(np.linalg.norm(value)), "data_name": file})
            record[role] = leaves
        data[node] = record
    (folder / "dump.json").write_text(json.dumps({"task": "tensor", "level": "L1", "data": data}))
    return folder


def test_tensor_mode_finds_a_permutation_that_keeps_the_statistics(tmp_path):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((16, 16)).astype(np.float32)
    y = x @ w
    z = np.maximum(y, 0)
    flipped = y[:, ::-1].copy()  # a kernel that writes its columns in the wrong order: same Max/Min/Mean/Norm
    bench = _tensor_run(tmp_path, "bench", {"Functional.linear.0.forward": ([x, w], y),
                                             "Functional.relu.0.forward": ([y], z)})
    npu = _tensor_run(tmp_path, "npu", {"Functional.linear.0.forward": ([x, w], flipped),
                                         "Functional.relu.0.forward": ([flipped], np.maximum(flipped, 0))})
    report = _compare(npu, bench)
    assert report.pairs.metrics["rel_err"].max() < 1e-6  # the statistics cannot see it
    first = report.analysis().first
    assert first.node == "Functional.linear.0.forward" and first.cause == "op"


def _call(out_dtype, out, args=(), kwargs=None, name="Torch.mul.0.forward"):
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [64], "Max": 1.0, "Min": -1.0,
              "Mean": 0.0, "Norm": 4.0}
    output = dict(tensor, dtype=f"torch.{out_dtype}", **out)
    return {name: {"input_args": [tensor, *args], "input_kwargs": kwargs or {}, "output": [output]}}


def test_dtype_and_device_arguments_are_context():
    npu = parse_msprobe({"data": _call("bfloat16", {}, kwargs={"dtype": {"type": "torch.dtype",
                                                                         "value": "torch.bfloat16"}})})
    bench = parse_msprobe({"data": _call("float32", {}, kwargs={"dtype": {"type": "torch.dtype",
                                                                          "value": "torch.float32"}})})
    assert compare_graphs(npu, bench).analysis().first is None


def test_a_string_argument_that_differs_is_an_origin():
    npu = parse_msprobe({"data": _call("float32", {"Max": 1.5}, kwargs={"reduction": {"type": "str", "value": "sum"}})})
    bench = parse_msprobe({"data": _call("float32", {}, kwargs={"reduction": {"type": "str", "value": "mean"}})})
    first = compare_graphs(npu, bench).analysis().first
    assert first.cause == "argument differs" and "sum vs mean" in first.evidence[-1]


def test_mean_near_zero_never_drives_the_error():
    # the Mean moves by 100 % of itself, which is 1e-9 of the tensor's RMS
    npu = parse_msprobe({"data": _call("bfloat16", {"Mean": 2e-9})})
    bench = parse_msprobe({"data": _call("float32", {"Mean": 1e-9})})
    report = compare_graphs(npu, bench)
    assert report.noise.output_error.max() < 1e-8 and report.analysis().first is None


def test_bias_gradient_zero_in_theory_agrees():
    def run(bias_max, dtype):
        grad = {"type": "torch.Tensor", "dtype": f"torch.{dtype}", "shape": [4, 8], "Max": 2e-3, "Min": -2e-3,
                "Mean": 0.0, "Norm": 1e-2}
        weight = dict(grad, shape=[8, 8])
        bias = dict(grad, shape=[8], Max=bias_max, Min=-bias_max, Norm=2 * bias_max)
        return parse_msprobe({"data": {"Functional.linear.0.backward": {"input_args": [grad],
                                                                        "output": [grad, weight, bias]}}})
    # float32 keeps 1e-10 of a cancelled sum, bfloat16 1e-6: both are zero at their precision
    report = compare_graphs(run(1e-6, "bfloat16"), run(1e-10, "float32"))
    assert report.noise.pair_error.max() == 0 and report.analysis().first is None
    report = compare_graphs(run(5e-4, "bfloat16"), run(1e-10, "float32"))  # a real bias gradient on one side
    assert report.analysis().first is not None


def test_growth_limit_is_an_order_statistic_one_outlier_cannot_raise():
    def run(scales):
        data = {}
        for k, scale in enumerate(scales):
            data.update(_call("bfloat16", {"Max": scale, "Min": -scale, "Norm": 4.0 * scale},
                              name=f"Functional.gelu.{k}.forward"))
        return parse_msprobe({"data": data})
    noisy = [1.0 + 0.002 * (k % 3) for k in range(11)] + [1.3]  # eleven rounding-sized errors, one bug
    report = compare_graphs(run(noisy), run([1.0] * 12))
    (calibration,) = report.noise.calibration
    assert calibration.calls == 12 and calibration.growth_limit < 1.1  # the bug's own growth is about 77
    assert report.analysis().first.node == "Functional.gelu.11.forward"


def test_backward_of_a_switching_op_is_not_an_origin_by_growth():
    def run(scale):
        g = {"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [64], "Max": 1e-3, "Min": -1e-3,
             "Mean": 0.0, "Norm": 4e-3}
        return parse_msprobe({"data": {"Torch.relu.0.backward": {"input_args": [g],
                                                                 "output": [dict(g, Max=1e-3 * scale)]}}})
    assert compare_graphs(run(1.5), run(1.0)).analysis().first is None  # a ReLU mask flipped by forward rounding


def test_communication_output_differing_from_agreeing_inputs_is_reached_from_another_rank():
    def run(total):
        t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [8], "Max": 1.0, "Min": -1.0,
             "Mean": 0.0, "Norm": 2.0}
        return parse_msprobe({"data": {"Distributed.all_reduce.0.forward": {"input_args": [t],
                                                                            "output": [dict(t, Max=total)]}}})
    first = compare_graphs(run(4.5), run(4.0)).analysis().first
    assert first.cause == "communication"


def test_element_count_and_unit_roundoff():
    assert element_count("[2, 3]") == 6 and element_count("") == 0
    assert unit_roundoff("bf16") == 2**-8 and unit_roundoff("Float16") == 2**-11 and unit_roundoff("int32") == 0


def test_noise_rule_is_overridable_from_a_thresholds_file(tmp_path):
    from graphcmp.core.rules import load_thresholds

    path = tmp_path / "t.toml"
    path.write_text("[noise]\norigin_margin = 8\nquantile = 0.95\n")
    rule = load_thresholds(path).noise
    assert (rule.origin_margin, rule.quantile, rule.min_samples) == (8.0, 0.95, 10)


def test_real_md5_run_uses_the_statistics(perturb_pair):
    report = compare_paths(DATA / "msprobe_md5" / "npu", DATA / "msprobe_md5" / "bench")
    first = report.analysis().first
    assert first.node == "Functional.linear.2.forward" and first.cause == "inputs differ"
    assert read_msprobe(DATA / "msprobe_md5" / "npu").info.task == "md5"


def _drift_over_every_module(npu, node, error, param):
    """`_drift_of_others` as first written: every module of the run named, the drift of every owner."""
    owner = _module_identity(npu)
    drift = np.zeros(int(owner.max(initial=0)) + 1)
    np.maximum.at(drift, owner[node[param]], np.where(np.isnan(error[param]), np.inf, error[param]))
    order = np.argsort(-drift, kind="stable")
    return np.where(owner == order[0], drift[order[1]], drift[order[0]])


def test_drift_of_others_names_only_the_modules_that_own_parameters(perturb_pair):
    """The same drift as naming every module: real errors, none, one module ahead, and ties at the top."""
    report = compare_paths(*perturb_pair)
    npu, pairs = report.npu, report.pairs
    node = npu.tensors.node[pairs.npu].astype(np.int64)
    param = trained_parameters(npu)[pairs.npu]
    assert param.any()
    rng = np.random.default_rng(0)
    ahead = np.where(param & (node == node[param][-1]), 1.0, 0.5)  # the last module's weights drift furthest
    tied = np.where(param, 0.25, 0.0)
    for error in (report.noise.pair_error, np.zeros(len(pairs)), rng.random(len(pairs)), ahead, tied):
        expected = _drift_over_every_module(npu, node, error, param)
        assert np.array_equal(_drift_of_others(npu, node, error, param), expected)
    assert len(np.unique(_drift_of_others(npu, node, ahead, param))) == 2  # its calls see the others' 0.5


def _t(v: float, dtype: str = "float32", **stats) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch." + dtype, "shape": [64], "Max": v, "Min": -v, "Mean": 0.0,
            "Norm": 8 * v, **stats}


def test_noise_the_precision_cannot_explain_is_never_agree():
    """Two float32 runs whose second call's input is not the first call's output on the bench side (pairs of
    different calls): every call's growth is 1, no origin, but an error of 0.23 is 4e6 unit roundoffs."""
    from graphcmp.core.outcome import report_outcome

    def run(b_in: float) -> object:
        return parse_msprobe({"data": {
            "Functional.linear.0.forward": {"input_args": [_t(1.0)], "output": [_t(2.0)]},
            "Functional.gelu.0.forward": {"input_args": [_t(b_in)], "output": [_t(1.5 * b_in)]}}})

    report = compare_graphs(run(2.0), run(2.6))
    assert not len(report.noise.origins())
    assert not report.noise.explains_noise(report.npu.nodes.direction)
    outcome = report_outcome(report)
    assert outcome.verdict == "inconclusive" and "beyond what" in outcome.reason
    assert "Functional.gelu.0.forward" in outcome.reason
    same = compare_graphs(run(2.0), run(2.0 * (1 + 2e-7)))  # float32 rounding: explained, agree
    assert report_outcome(same).verdict == "agree"


def test_a_half_precision_norm_summed_beyond_its_range_is_no_overflow():
    """msprobe sums a float16 tensor's Norm in float16: 256 values of -1e4 (a causal mask) give inf, while every
    element is finite. In float32 a Norm of inf needs elements near 3e38: that stays an overflow."""
    from graphcmp.core.overflow import OverflowLevel, overflow_levels, summed_beyond_range

    masked = _t(1.0e4, "float16", Min=-1.0e4, Norm=float("inf"), Mean=-4688.0)
    run = parse_msprobe({"data": {"Tensor.masked_fill.0.forward": {"input_args": [_t(1.0, "float16")],
                                                                    "output": [masked]}}})
    row = run.row("Tensor.masked_fill.0.forward")
    assert overflow_levels(run)[row] == OverflowLevel.NONE
    assert summed_beyond_range(run)[:, 3].any()
    huge = parse_msprobe({"data": {"Tensor.mul.0.forward": {"input_args": [_t(1.0)],
                                                             "output": [_t(1.0e38, Norm=float("inf"))]}}})
    assert overflow_levels(huge)[huge.row("Tensor.mul.0.forward")] == OverflowLevel.CRITICAL
    bench = parse_msprobe({"data": {"Tensor.masked_fill.0.forward": {
        "input_args": [_t(1.0)], "output": [_t(1.0e4, Min=-1.0e4, Norm=309838.0, Mean=-4687.5)]}}})
    report = compare_graphs(run, bench)
    assert not len(report.noise.origins())  # the same mask on both sides: no difference


@pytest.mark.shared
def test_one_origin_per_cause_on_a_deep_exact_rerun():
    """tf_huge (48 layers x 4 micro-batches, one perturbed weight): the calls downstream of the weight show more
    growth than rounding (statistics see part of an input's error), but only the weight's call is an origin."""
    report = compare_paths(shared("msprobe/dumps/tf_huge/statistics/perturb/step0/rank0"),
                           shared("msprobe/dumps/tf_huge/statistics/baseline/step0/rank0"))
    origins = report.noise.origins().tolist()
    assert report.npu.nodes.ids[origins[0]] == "Functional.linear.2.forward"
    modules = {report.npu.nodes.ids[report.npu.nodes.parent[r]].rsplit(".forward", 1)[0] for r in origins}
    assert modules == {"Module.encoder.layers.1.linear1.Linear"}  # the weight's calls (one per micro-step at most)
    assert len(origins) <= 4


def test_gradients_after_a_backward_origin_are_propagated():
    """A custom autograd Function's backward is wrong (forward right): the gradients autograd sums after it carry
    its difference, whatever their statistics show, so later backward calls (an RMSNorm's rsqrt backward at 5x
    its growth) are propagated, not origins of their own."""
    case = DATA / "cases28" / "fn_backward_bf16"
    report = compare_paths(case / "npu" / "step0" / "rank0", case / "bench" / "step0" / "rank0")
    assert [report.npu.nodes.ids[r] for r in report.noise.origins().tolist()] == ["Tensor.__mul__.49.forward"]


def _normalized_lengths_one_by_one(npu, tensor_rows, node, is_out):
    """The normalised lengths as the call-by-call definition gives them: per backward call of a normalising op,
    the length read from its first compared output whose shape gives one above 1 (else the last that gives one)."""
    out = np.ones(len(npu))
    for k in np.flatnonzero(is_out).tolist():
        row = int(node[k])
        op = "".join(c for c in npu.nodes.op[row].lower() if c.isalnum())
        if op not in NORMALIZING_OPS or npu.nodes.direction[row] != Direction.BACKWARD:
            continue
        dims = [float(d) for d in re.findall(r"-?\d+", npu.tensors.shape[int(tensor_rows[k])])]
        if out[row] > 1 or not dims:
            continue
        last = NORMALIZING_OPS[op] == "last"
        out[row] = dims[-1] if last else float(np.prod(dims)) / (dims[1] if len(dims) > 1 and dims[1] > 0 else 1.0)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_normalized_lengths_are_those_of_the_first_output_that_gives_one(seed):
    def t(shape):
        return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": 1.0, "Min": 0.0,
                "Mean": 0.5, "Norm": 1.0}

    shapes = [[4, 1], [4, 8], [2, 3, 5], [1], [0, 7], [6, 0, 2], []]
    rng = np.random.default_rng(seed)
    calls = {f"Functional.{op}.{n}.{direction}": {"output": [t(shapes[s]) for s in rng.integers(0, 7, 3)]}
             for op in ("layer_norm", "batch_norm", "softmax", "linear") for n in range(6)
             for direction in ("forward", "backward")}
    calls["Functional.batch_norm.9.backward"] = {"output": [t([1]), t([0, 7]), t([])]}  # lengths 1, then 0
    npu = parse_msprobe({"data": calls})
    last_call = np.flatnonzero(npu.tensors.node == npu.row("Functional.batch_norm.9.backward"))
    k = np.concatenate([rng.integers(0, len(npu.tensors), 400), last_call])
    tensor_rows = k
    node = npu.tensors.node[k].astype(np.int64)
    node[:400][rng.random(400) < 0.1] = rng.integers(0, len(npu), 1)  # an output of another call: its shape counts
    is_out = np.concatenate([rng.random(400) < 0.8, np.ones(len(last_call), bool)])
    got = _normalized_lengths(npu, tensor_rows, node, is_out)
    assert np.array_equal(got, _normalized_lengths_one_by_one(npu, tensor_rows, node, is_out), equal_nan=True)
    assert (got > 1).any() and (got < 1).any()


def test_real_tensors_take_the_tight_origin_margin_outside_the_backward_pass(tmp_path):
    from graphcmp.core.noise import origin_margins
    from graphcmp.core.rules import NoiseRule

    x = np.linspace(-1.0, 1.0, 64).reshape(8, 8)
    calls = {"Functional.linear.0.forward": ([x], x * 2), "Functional.linear.0.backward": ([x], x * 3)}
    npu, bench = (read_msprobe(_tensor_run(tmp_path, side, calls)) for side in ("npu", "bench"))
    rule = NoiseRule()
    beyond = origin_margins(npu, bench, rule)
    forward, backward = (npu.row(f"Functional.linear.0.{d}") for d in ("forward", "backward"))
    assert beyond[forward] == rule.tensor_origin_margin < beyond[backward] == rule.origin_margin
    statistics = dataclasses.replace(npu, info=dataclasses.replace(npu.info, task="statistics"))
    assert (origin_margins(statistics, bench, rule) == rule.origin_margin).all()


def test_a_graph_dumps_gradient_kernels_keep_the_statistics_margin():
    from graphcmp.core.noise import GRADIENT_SCOPE

    assert GRADIENT_SCOPE.search("Gradients/Default/net-Net/gradMatMul/MatMul-op2")
    assert GRADIENT_SCOPE.search("model/gradients/dense/MatMul_grad/MatMul")
    assert not GRADIENT_SCOPE.search("Default/net-Net/MatMul-op1")
    assert not GRADIENT_SCOPE.search("/layer1/gradients_norm/Mul")


def test_origin_margins_of_some_rows_are_those_rows_of_all(tmp_path):
    from graphcmp.core.noise import origin_margins
    from graphcmp.core.rules import NoiseRule

    x = np.linspace(-1.0, 1.0, 64).reshape(8, 8)
    calls = {"Functional.linear.0.forward": ([x], x * 2), "Functional.linear.0.backward": ([x], x * 3)}
    npu, bench = (read_msprobe(_tensor_run(tmp_path, side, calls)) for side in ("npu", "bench"))
    every = origin_margins(npu, bench, NoiseRule())
    rows = np.array([len(npu) - 1, 0])
    assert origin_margins(npu, bench, NoiseRule(), rows).tolist() == every[rows].tolist()
