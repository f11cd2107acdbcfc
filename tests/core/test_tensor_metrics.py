"""Tests for graphcmp.core.tensor_metrics: hand-computed values, edge cases and a real perturbed run."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from graphcmp.core.tensor_metrics import (
    TENSOR_METRICS,
    are,
    compare_tensors,
    cosine,
    euc_rel,
    five_thousandths,
    kl,
    max_abs,
    max_rel,
    one_thousandth,
    shapes_match,
)
from graphcmp.core.tensorio import read_tensor

CNN = Path(__file__).resolve().parents[1] / "data" / "tensors" / "cnn_conv2_perturbed"
EPS = np.finfo(np.float64).eps
IDENTICAL = {"cosine": 1.0, "max_abs": 0.0, "max_rel": 0.0, "euc_rel": 0.0,
             "one_thousandth": 1.0, "five_thousandths": 1.0, "kl": 0.0, "are": 0.0, "mean_abs": 0.0, "rmse": 0.0,
             "max_rel_nz": 0.0, "mean_rel": 0.0}


def _all_nan(result: dict[str, float]) -> bool:
    return list(result) == list(TENSOR_METRICS) and all(math.isnan(v) for v in result.values())


def test_registry_names_and_order() -> None:
    assert list(TENSOR_METRICS) == list(IDENTICAL)
    assert list(compare_tensors(np.ones(3), np.ones(3))) == list(TENSOR_METRICS)


def test_identical_tensors() -> None:
    values = np.random.default_rng(0).standard_normal((4, 8, 16)).astype(np.float32)
    assert compare_tensors(values, values.copy()) == IDENTICAL


def test_each_function_agrees_with_compare_tensors() -> None:
    rng = np.random.default_rng(1)
    bench = rng.standard_normal(1000)
    npu = bench + rng.normal(0, 1e-3, 1000)
    together = compare_tensors(npu, bench)
    for name, metric in TENSOR_METRICS.items():
        assert metric(npu, bench) == together[name], name


# --- hand-computed values --------------------------------------------------------------------------


@pytest.mark.parametrize(("npu", "bench", "expected"), [
    ([1.0, 0.0], [0.0, 1.0], 0.0),
    ([1.0, 0.0], [1.0, 1.0], 1 / math.sqrt(2)),
    ([1.0, 2.0], [-1.0, -2.0], -1.0),
    ([1.0, 2.0], [2.0, 4.0], 1.0),  # scale does not matter
    ([3.0], [-5.0], -1.0),  # one element: sign agreement
])
def test_cosine(npu: list, bench: list, expected: float) -> None:
    assert np.isclose(cosine(np.array(npu), np.array(bench)), expected, rtol=1e-12, atol=1e-15)


def test_max_abs_and_max_rel() -> None:
    npu, bench = np.array([1.5, 2.0, 4.0]), np.array([1.0, 2.0, 5.0])
    assert max_abs(npu, bench) == 1.0  # |4 - 5|
    assert max_rel(npu, bench) == 0.5  # |1.5 - 1| / 1 beats |4 - 5| / 5 = 0.2


def test_euc_rel() -> None:
    assert euc_rel(np.array([3.0, 4.0]), np.array([0.0, 4.0])) == 0.75  # ||(3, 0)|| / ||(0, 4)||
    assert np.isclose(euc_rel(np.array([1.0, 1.0, 1.0, 1.0]), np.array([2.0, 2.0, 2.0, 2.0])), 0.5)


def test_error_ratios_are_strict_below_threshold() -> None:
    bench = np.ones(5)
    npu = bench + np.array([0.0, 0.0005, 0.002, 0.004, 0.01])  # relative errors, since bench is 1
    assert one_thousandth(npu, bench) == 0.4  # 0 and 0.0005
    assert five_thousandths(npu, bench) == 0.8  # all but 0.01
    assert one_thousandth(np.array([1001.0]), np.array([1000.0])) == 0.0  # exactly 0.001 is not below it
    assert five_thousandths(np.array([1005.0]), np.array([1000.0])) == 0.0


def test_kl_hand_computed() -> None:
    # Min-max scaling gives (0, 0.5, 1) and (0, 1, 0.5), so p = (0, 1/3, 2/3) and q = (0, 2/3, 1/3):
    # KL = 1/3 ln(1/2) + 2/3 ln 2 = ln(2) / 3, up to the float32-eps floor on the zero entry.
    assert np.isclose(kl(np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 1.0])), math.log(2) / 3, rtol=1e-6)
    assert kl(np.array([5.0, 5.0]), np.array([-1.0, -1.0])) == 0.0  # constants are both uniform


def test_kl_is_not_symmetric_and_positive() -> None:
    npu, bench = np.array([0.0, 1.0, 3.0, 4.0]), np.array([0.0, 2.0, 2.0, 4.0])
    assert kl(npu, bench) > 0
    assert kl(npu, bench) != kl(bench, npu)


def test_are_sums_relative_errors_skipping_zero_bench() -> None:
    assert are(np.array([1.5, 3.0, 5.0]), np.array([1.0, 2.0, 0.0])) == 1.0  # 0.5 + 0.5, bench 0 skipped
    assert are(np.full(100, 1.01), np.ones(100)) == pytest.approx(1.0)  # grows with the element count


# --- zeros in the reference ------------------------------------------------------------------------


def test_zero_bench_matched_by_zero_counts_as_exact() -> None:
    npu, bench = np.array([0.0, 2.0]), np.array([0.0, 2.0])
    assert compare_tensors(npu, bench) == IDENTICAL


def test_nonzero_npu_against_zero_bench() -> None:
    npu, bench = np.array([1e-3, 2.0]), np.array([0.0, 2.0])
    assert max_rel(npu, bench) == pytest.approx(1e-3 / EPS)  # msprobe: eps is added to both sides
    assert one_thousandth(npu, bench) == 0.5
    assert are(npu, bench) == 0.0  # msaccucmp skips |bench| <= eps
    assert math.isnan(cosine(np.array([1.0, 2.0]), np.zeros(2)))
    assert math.isnan(cosine(np.zeros(2), np.array([1.0, 2.0])))


def test_all_zero_bench() -> None:
    zeros = np.zeros(4)
    assert compare_tensors(zeros, zeros.copy()) == IDENTICAL
    assert euc_rel(np.array([0.0, 1.0, 0.0, 0.0]), zeros) == math.inf
    assert cosine(np.full(4, 1e-20), zeros) == 1.0  # both norms below eps


# --- NaN and inf -----------------------------------------------------------------------------------


def test_same_non_finite_values_at_same_positions_count_as_matches() -> None:
    npu = np.array([1.0, np.nan, np.inf, -np.inf, 3.0])
    bench = np.array([1.0, np.nan, np.inf, -np.inf, 2.0])
    result = compare_tensors(npu, bench)
    assert result["max_abs"] == 1.0
    assert result["max_rel"] == 0.5
    assert result["one_thousandth"] == 0.8
    assert result == compare_tensors(np.array([1.0, 0, 0, 0, 3.0]), np.array([1.0, 0, 0, 0, 2.0]))


@pytest.mark.parametrize(("npu", "bench"), [
    ([1.0, np.nan], [1.0, 2.0]),
    ([1.0, 2.0], [1.0, np.nan]),
    ([np.inf, 2.0], [-np.inf, 2.0]),
    ([np.inf, 2.0], [np.nan, 2.0]),
    ([1.0, np.inf], [np.inf, 1.0]),
])
def test_different_non_finite_values_give_nan_everywhere(npu: list, bench: list) -> None:
    npu_array, bench_array = np.array(npu), np.array(bench)
    assert _all_nan(compare_tensors(npu_array, bench_array))
    assert all(math.isnan(metric(npu_array, bench_array)) for metric in TENSOR_METRICS.values())


def test_no_numpy_warnings() -> None:
    cases = [
        (np.array([np.nan, np.inf, 0.0, 1.0]), np.array([np.nan, np.inf, 0.0, 0.0])),
        (np.array([1.0, np.nan]), np.array([1.0, 2.0])),
        (np.zeros(3), np.zeros(3)),
        (np.array([1e300, -1e300]), np.array([-1e300, 1e300])),
        (np.array([1e-300, 0.0]), np.array([0.0, 1e-300])),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for npu, bench in cases:
            compare_tensors(npu, bench)
            for metric in TENSOR_METRICS.values():
                metric(npu, bench)


# --- dtypes, shapes, sizes -------------------------------------------------------------------------


def test_fp16_is_upcast_before_subtracting() -> None:
    npu = np.array([65504.0, -65504.0], dtype=np.float16)
    bench = np.array([-65504.0, 65504.0], dtype=np.float16)
    with np.errstate(over="ignore"):
        assert np.isinf(npu - bench).all()  # what subtracting in fp16 would give
    assert max_abs(npu, bench) == 131008.0
    assert euc_rel(npu, bench) == 2.0
    assert cosine(npu, bench) == -1.0


def test_mixed_integer_and_float_dtypes() -> None:
    npu, bench = np.array([1, 2, 3], dtype=np.int32), np.array([1.0, 2.0, 4.0], dtype=np.float32)
    assert max_abs(npu, bench) == 1.0
    assert max_rel(npu, bench) == 0.25


def test_zero_dimensional_tensors() -> None:
    result = compare_tensors(np.float32(2.0), np.float32(2.5))
    assert result["cosine"] == 1.0
    assert result["max_abs"] == 0.5
    assert result["max_rel"] == 0.2
    assert result["one_thousandth"] == 0.0


def test_empty_tensors_compare_as_identical() -> None:
    assert compare_tensors(np.zeros((0, 4)), np.zeros((0, 4))) == IDENTICAL


@pytest.mark.parametrize(("npu_shape", "bench_shape"),
                         [((2, 3), (3, 2)), ((1, 3), (3,)), ((), (1,)), ((4,), (5,))])
def test_shape_mismatch_gives_nan_everywhere(npu_shape: tuple, bench_shape: tuple) -> None:
    npu, bench = np.ones(npu_shape), np.ones(bench_shape)
    assert not shapes_match(npu, bench)
    assert _all_nan(compare_tensors(npu, bench))
    assert all(math.isnan(metric(npu, bench)) for metric in TENSOR_METRICS.values())


def test_shapes_match_ignores_dtype() -> None:
    assert shapes_match(np.zeros((2, 3), dtype=np.float16), np.zeros((2, 3), dtype=np.int64))


# --- real data: cnn run with conv2.weight perturbed ------------------------------------------------


def test_real_perturbed_conv2_weight() -> None:
    """Only conv2.weight differs between the runs: conv2's input is identical, its output is not."""
    conv2_input = "Functional.conv2d.1.forward.input.0.pt"  # = output of the conv1 block
    same = compare_tensors(read_tensor(CNN / "perturb" / conv2_input),
                           read_tensor(CNN / "baseline" / conv2_input))
    assert same == IDENTICAL

    conv2_output = "Module.conv2.Conv2d.forward.0.output.0.pt"
    diff = compare_tensors(read_tensor(CNN / "perturb" / conv2_output),
                           read_tensor(CNN / "baseline" / conv2_output))
    assert np.isclose(diff["cosine"], 0.7635201503, rtol=1e-8)
    assert np.isclose(diff["max_abs"], 1.9733245485, rtol=1e-8)
    assert np.isclose(diff["euc_rel"], 0.7763026870, rtol=1e-8)
    assert diff["one_thousandth"] < diff["five_thousandths"] < 0.01
    assert diff["kl"] > 0
