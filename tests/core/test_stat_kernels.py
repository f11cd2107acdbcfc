"""The compiled statistics metrics (`core/stat_kernels.py`): the same bits as the numpy paths they replace, on
statistics with every special value; taken by a comparison only where built; built with the dump.json reader."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core import stat_kernels
from graphcmp.core.compare import compare_paths
from graphcmp.core.judge import _nonfinite_statistics
from graphcmp.core.metrics import by_blocks, stat_rel_error, stats_identical
from graphcmp.core.noise import _stat_errors
from graphcmp.core.readers import msprobe_scan


@pytest.fixture(scope="module")
def built() -> None:
    stat_kernels.build()  # built by tests/conftest.py already: loads it
    if not stat_kernels.KERNELS.built():
        pytest.skip("no C compiler to build the kernels ahead of time")


def _statistics(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Statistics of every scale, with NaN, inf, -inf, zeros, ones and equal Max and Min, some not recorded."""
    stats = rng.standard_normal((n, 4)) * rng.choice([1e-300, 1e-30, 1e-3, 1.0, 1e3, 1e30, 1e300], (n, 4))
    special = rng.random((n, 4))
    for value, (low, high) in zip((np.nan, np.inf, -np.inf, 0.0, 1.0, -0.0),
                                  ((0, .03), (.03, .05), (.05, .07), (.07, .12), (.12, .14), (.14, .15))):
        stats[(special >= low) & (special < high)] = value
    return stats, rng.random((n, 4)) > 0.08


def _pairs(seed: int = 7, n: int = 20_000) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    npu, npu_present = _statistics(rng, n)
    bench, bench_present = _statistics(rng, n)
    bench[: n // 4] = npu[: n // 4]  # bit-equal rows
    near = slice(n // 4, n // 2)  # rounding noise
    bench[near] = npu[near] * (1 + 1e-4 * rng.standard_normal(npu[near].shape))
    npu_rows = np.concatenate([np.arange(n), rng.integers(0, n, n)])
    bench_rows = np.concatenate([np.arange(n), rng.integers(0, n, n)])
    return npu, npu_present, bench, bench_present, npu_rows, bench_rows


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize(("atol", "floor"), [(0.0, 1e-3), (2.0**-20, 1e-3), (0.0, 0.0), (2.0**-100, 0.5)])
def test_rel_err_and_identical_are_numpys_bit_for_bit(built: None, atol: float, floor: float) -> None:
    npu, npu_present, bench, bench_present, i, j = _pairs()
    npu[-100:], bench[-100:] = 4 * atol, 3 * atol  # differences of exactly `atol`: zero
    rel_err, identical = stat_kernels.rel_err_identical(npu, npu_present, bench, bench_present, i, j, atol=atol,
                                                        magnitude_floor=floor)

    def numpy_block(i: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        present = npu_present[i] & bench_present[j]
        return (stat_rel_error(npu[i], bench[j], present, atol=atol, magnitude_floor=floor),
                stats_identical(npu[i], bench[j], present))

    expected_rel_err, expected_identical = by_blocks(numpy_block, i, j)
    assert _same_bits(rel_err, expected_rel_err)
    assert _same_bits(identical, expected_identical)
    assert 0.1 < identical.mean() < 0.5 and np.isinf(rel_err).any() and (rel_err == 0).any()  # every case is there


def test_the_noise_models_statistic_errors_are_numpys_bit_for_bit(built: None) -> None:
    npu, npu_present, bench, bench_present, i, j = _pairs(seed=11)
    rng = np.random.default_rng(3)
    npu_recorded = npu_present & (rng.random(npu.shape) > 0.03)  # some summed beyond their dtype's range
    bench_recorded = bench_present & (rng.random(bench.shape) > 0.03)
    count = rng.choice([0.0, 0.5, 1.0, 7.0, 4096.0, 1e300, np.inf, np.nan], len(i))
    compiled = stat_kernels.stat_errors(npu, npu_recorded, bench, bench_recorded, i, j, count)
    expected = by_blocks(lambda i, j, count: _stat_errors(npu[i], bench[j], npu_recorded[i] & bench_recorded[j],
                                                          count), i, j, count)
    for got, want in zip(compiled, expected, strict=True):
        assert _same_bits(got, want)
    assert np.isinf(compiled[0]).any() and (compiled[0] == 0).any() and (compiled[2] > 0).any()


def test_the_judges_overflow_pairs_are_numpys(built: None) -> None:
    npu, npu_present, bench, bench_present, i, j = _pairs(seed=13)
    compiled = stat_kernels.nonfinite(npu, npu_present, bench, bench_present, i, j)
    expected = by_blocks(lambda i, j: _nonfinite_statistics(npu[i], bench[j], npu_present[i], bench_present[j]), i, j)
    assert _same_bits(compiled, expected)
    assert 0.1 < compiled.mean() < 0.9


def test_rows_outside_the_statistics_are_refused_before_the_compiled_code_reads_them(built: None) -> None:
    npu, npu_present, bench, bench_present, i, j = _pairs(n=100)
    with pytest.raises(IndexError, match="outside the 100 rows"):
        stat_kernels.rel_err_identical(npu, npu_present, bench, bench_present, i, j + 1, atol=0.0,
                                       magnitude_floor=0.0)
    with pytest.raises(ValueError, match="their mask"):
        stat_kernels.rel_err_identical(npu, npu_present[:, :3], bench, bench_present, i, j, atol=0.0,
                                       magnitude_floor=0.0)
    with pytest.raises(ValueError, match="element counts"):
        stat_kernels.stat_errors(npu, npu_present, bench, bench_present, i, j, np.ones(3))


def test_a_float_argument_is_checked_as_one(built: None) -> None:
    kernels = stat_kernels.KERNELS.load(build=False)
    npu, npu_present, bench, bench_present, i, j = _pairs(n=10)
    with pytest.raises(TypeError, match="argument 6 is int, expected a float"):
        kernels.rel_err_identical(npu, npu_present, bench, bench_present, i, j, 0, 0.0, np.empty(len(i)),
                                  np.empty(len(i), bool))


def test_a_comparison_gives_the_same_result_with_the_kernels_and_without(built: None, perturb_pair,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[object] = []
    kernels = stat_kernels._built
    monkeypatch.setattr(stat_kernels, "_built", lambda: asked.append(kernels()) or asked[-1])
    with_kernels = compare_paths(*perturb_pair)
    assert len(asked) == 3 and None not in asked  # the pairs' metrics, the noise model's errors, the overflow pairs
    monkeypatch.setattr(stat_kernels.KERNELS, "built", lambda: False)
    without = compare_paths(*perturb_pair)
    assert len(asked) == 6 and asked[3:] == [None, None, None]
    for column in ("rel_err", "identical"):
        assert _same_bits(with_kernels.pairs.metrics[column], without.pairs.metrics[column])
    assert _same_bits(with_kernels.noise.pair_error, without.noise.pair_error)
    assert _same_bits(with_kernels.verdicts.severity, without.verdicts.severity)
    assert with_kernels.verdicts.reason == without.verdicts.reason
    assert with_kernels.analysis() == without.analysis()


def test_they_are_built_in_the_background_with_the_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    monkeypatch.setattr(msprobe_scan, "build_detached", lambda entry: started.append(entry) or True)
    assert not msprobe_scan.build_in_background() and started == []  # every set built (tests/conftest.py)
    monkeypatch.setattr(stat_kernels.KERNELS, "buildable", lambda: True)
    assert msprobe_scan.build_in_background() and started == ["graphcmp.core.readers.msprobe_scan:build_kernels"]
