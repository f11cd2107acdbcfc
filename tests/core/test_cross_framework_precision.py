"""A MindSpore run under mixed precision against a PyTorch float32 run: the rounding a Cell did inside (its Primitive
calls in float16) counts, its parameters pair though the class was renamed, and an input made by a call the bench
run holds no data for is named as such."""

from __future__ import annotations

import numpy as np

from graphcmp.core.compare import compare_graphs
from graphcmp.core.divergence import find_divergence
from graphcmp.core.matching.specs import matchers_from_specs
from graphcmp.core.noise import NodeRole
from graphcmp.core.readers.msprobe import parse_msprobe

U16 = 2.0 ** -11


def _t(scale: float, dtype: str, framework: str, n: int = 256) -> dict:
    kind, name = ("mindspore.Tensor", dtype.capitalize()) if framework == "mindspore" else (
        "torch.Tensor", f"torch.{dtype}")
    return {"type": kind, "dtype": name, "shape": [n], "Max": scale, "Min": -scale, "Mean": 0.01 * scale,
            "Norm": 0.5 * scale * np.sqrt(n)}


def _runs(out_scale: float, gamma: float = 1.0, cls: str = "DenseOpt_3", inner: str = "float16"):
    """npu: MindSpore Cell.fc.<cls> (float32 in and out, float16 MatMul inside) then a LayerNorm Cell renamed by
    mixed precision; bench: the PyTorch twin in float32, whose linear the npu's MatMul is not paired with."""
    ms, pt = "mindspore", "pytorch"
    npu = {"framework": ms, "data": {
        "Primitive.matmul.MatMul.0.forward": {"input_args": [_t(1.0, inner, ms), _t(0.5, inner, ms)],
                                              "output": [_t(out_scale, inner, ms)]},
        f"Cell.fc.{cls}.forward.0": {"input_args": [_t(1.0, "float32", ms)], "output": [_t(out_scale, "float32", ms)],
                                     "parameters": {"weight": _t(0.5, "float32", ms)}},
        "Cell.ln.LayerNormOpt_6.forward.0": {"input_args": [_t(out_scale, "float32", ms)],
                                             "output": [_t(gamma, "float32", ms)],
                                             "parameters": {"gamma": _t(gamma, "float32", ms),
                                                            "beta": _t(0.1, "float32", ms)}}}}
    construct = {"Primitive.matmul.MatMul.0.forward": f"Cell.fc.{cls}.forward.0", f"Cell.fc.{cls}.forward.0": None,
                 "Cell.ln.LayerNormOpt_6.forward.0": None}
    bench = {"framework": pt, "data": {
        "Module.fc.Linear.forward.0": {"input_args": [_t(1.0, "float32", pt)], "output": [_t(2.0, "float32", pt)],
                                       "parameters": {"weight": _t(0.5, "float32", pt)}},
        "Module.ln.LayerNorm.forward.0": {"input_args": [_t(2.0, "float32", pt)], "output": [_t(1.0, "float32", pt)],
                                          "parameters": {"weight": _t(1.0, "float32", pt),
                                                         "bias": _t(0.1, "float32", pt)}}}}
    return parse_msprobe(npu, construct), parse_msprobe(bench, {k: None for k in bench["data"]})


def _compare(npu, bench):
    return compare_graphs(npu, bench, matchers=matchers_from_specs(["layer-mapping", "exact"]))


def test_a_cell_standing_for_float16_calls_rounds_at_float16():
    npu, bench = _runs(2.0 * (1 + 2 * U16))  # two float16 roundings on the Dense's output
    report = _compare(npu, bench)
    dense = npu.row("Cell.fc.DenseOpt_3.forward.0")
    assert dense in report.noise.leaves  # its MatMul is unmatched: the Cell is compared for it
    assert report.noise.unit[dense] == U16
    assert ("float16", "float32") in {(a, b) for a, b, _ in report.noise.precision.dtype_pairs}
    assert report.noise.first_origin < 0 and find_divergence(report) is None


def test_the_same_difference_in_float32_calls_is_an_origin():
    npu, bench = _runs(2.0 * (1 + 2 * U16), inner="float32")
    report = _compare(npu, bench)
    assert {(a, b) for a, b, _ in report.noise.precision.dtype_pairs} == {("float32", "float32")}
    assert NodeRole(int(report.noise.role[npu.row("Cell.fc.DenseOpt_3.forward.0")])) == NodeRole.ORIGIN


def test_parameters_of_a_class_renamed_by_mixed_precision_pair_by_the_framework_names():
    npu, bench = _runs(2.0, gamma=1.5)
    report = _compare(npu, bench)
    ln = npu.row("Cell.ln.LayerNormOpt_6.forward.0")
    t = npu.tensors
    paired = {t.slot[i] for i in report.pairs.npu.tolist() if t.node[i] == ln}
    assert {"gamma", "beta"} <= paired
    d = find_divergence(report)
    assert d is not None and d.node == "Cell.ln.LayerNormOpt_6.forward.0" and d.cause == "inputs differ"
    assert "gamma" in d.summary


def test_a_difference_hidden_by_a_mask_in_the_statistics_is_not_a_second_origin():
    # MindSpore O1 against PyTorch float32, layers.1.attn's k and v weights swapped (tests/gen/make_ms_cases28.py):
    # the scores differ by 0.3, scores + a causal mask of -1e4 by 1e-4 in their statistics (the mask dominates);
    # the softmax after it is the same difference coming to light, not a cause of its own
    from graphcmp.core.compare import compare_paths
    from tests.conftest import DATA

    case = DATA / "cases28" / "ms_amp_swap_kv"
    report = compare_paths(case / "npu" / "step0" / "rank0", case / "bench" / "step0" / "rank0",
                           matchers=matchers_from_specs(["layer-mapping", "api-mapping", "exact", "fuzzy"]))
    origins = [report.npu.nodes.ids[r] for r in report.noise.origin_rows.tolist()]
    assert origins == ["Functional.matmul.2.forward"]
    softmax = report.npu.row("Primitive.softmax.Softmax.1.forward")
    assert NodeRole(int(report.noise.role[softmax])) == NodeRole.PROPAGATED
