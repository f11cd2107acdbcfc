"""The block-wise one-pass metrics of graphcmp.core.tensor_metrics against a whole-array float64 reference."""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest

from graphcmp.core import tensor_fused_layout, tensor_kernels, tensor_metrics
from graphcmp.core.tensor_metrics import TENSOR_METRICS, compare_tensors

EPS = float(np.finfo(np.float64).eps)


def _reference(npu: np.ndarray, bench: np.ndarray) -> dict[str, float]:
    """Every metric written out on whole float64 arrays, one numpy expression each (the module's definitions)."""
    n, b = (np.asarray(x, dtype=np.float64).reshape(-1) for x in (npu, bench))
    finite = np.isfinite(n) & np.isfinite(b)
    bad = ~finite
    if not np.all((n[bad] == b[bad]) | (np.isnan(n[bad]) & np.isnan(b[bad]))):
        return dict.fromkeys(TENSOR_METRICS, math.nan)
    n, b = np.where(finite, n, 0.0), np.where(finite, b, 0.0)
    size = n.size
    diff, abs_b = np.abs(n - b), np.abs(b)
    rel = np.where(b == 0, np.abs((n + EPS) - EPS) / EPS, diff / np.where(b == 0, 1.0, abs_b))
    rel_nz = np.where(abs_b > EPS, diff / np.where(abs_b > EPS, abs_b, 1.0), 0.0)
    nn, bb = math.fsum(n * n), math.fsum(b * b)
    cosine = 1.0 if nn <= EPS**2 and bb <= EPS**2 else math.nan if min(nn, bb) <= EPS**2 else \
        min(max(math.fsum(n * b) / math.sqrt(nn * bb), -1.0), 1.0)
    bench_norm, diff_norm = math.sqrt(bb), math.sqrt(math.fsum(diff * diff))
    euc = (0.0 if diff_norm <= EPS else math.inf) if bench_norm <= EPS else diff_norm / bench_norm

    def scaled(x: np.ndarray) -> np.ndarray:
        s = (x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.ones_like(x)
        s = np.maximum(s, np.finfo(np.float32).eps)
        return s / math.fsum(s)

    p, q = scaled(n), scaled(b)
    kl = math.fsum(p * np.log(p / q))
    return {
        "cosine": cosine, "max_abs": float(diff.max()), "max_rel": float(rel.max()), "euc_rel": euc,
        "one_thousandth": np.count_nonzero(rel < 0.001) / size,
        "five_thousandths": np.count_nonzero(rel < 0.005) / size,
        "kl": 0.0 if abs(kl) < EPS else kl, "are": math.fsum(rel_nz), "mean_abs": math.fsum(diff) / size,
        "rmse": math.sqrt(math.fsum(diff * diff) / size), "max_rel_nz": float(rel_nz.max()),
        "mean_rel": math.fsum(rel_nz) / size,
    }


def _pair(rng: np.random.Generator, size: int, dtype: type, special: bool) -> tuple[np.ndarray, np.ndarray]:
    npu = rng.standard_normal(size) * 10 ** rng.uniform(-3, 3)
    bench = npu * (1 + rng.standard_normal(size) * 10 ** rng.uniform(-7, -1))
    npu[rng.integers(0, size, 3)] = 0.0  # zeros on either side: msprobe's eps guard and msaccucmp's skip
    bench[rng.integers(0, size, 3)] = 0.0
    bench[rng.integers(0, size, 2)] = 1e-300  # 0 < |bench| <= eps: counted by max_rel, skipped by are
    if special:  # NaN and ±inf at the same positions on both sides, in some blocks only
        for value in (np.nan, np.inf, -np.inf):
            where = rng.integers(0, size, 2)
            npu[where] = bench[where] = value
    return npu.astype(dtype), bench.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("special", [False, True])
def test_block_pass_equals_the_whole_array_reference(monkeypatch: pytest.MonkeyPatch, dtype: type,
                                                     special: bool) -> None:
    monkeypatch.setattr(tensor_metrics, "_BLOCK", 128)  # many blocks, and a short last one
    rng = np.random.default_rng(32)
    for size in (1, 127, 128, 1000, 4099):
        npu, bench = _pair(rng, size, dtype, special)
        got, want = compare_tensors(npu, bench), _reference(npu, bench)
        assert list(got) == list(TENSOR_METRICS)
        for name in TENSOR_METRICS:
            assert np.isclose(got[name], want[name], rtol=1e-12, atol=4 * EPS, equal_nan=True), \
                (name, size, got[name], want[name])
            assert TENSOR_METRICS[name](npu, bench) == pytest.approx(got[name], rel=1e-15, abs=0, nan_ok=True)


def test_block_pass_equals_the_reference_on_a_large_float32_pair() -> None:
    rng = np.random.default_rng(7)
    npu, bench = _pair(rng, 3 * tensor_metrics._BLOCK + 17, np.float32, True)
    got, want = compare_tensors(npu, bench), _reference(npu, bench)
    for name in TENSOR_METRICS:
        assert np.isclose(got[name], want[name], rtol=1e-12, atol=4 * EPS), (name, got[name], want[name])


def test_unmatched_nonfinite_in_a_later_block_gives_nan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensor_metrics, "_BLOCK", 16)
    npu, bench = np.ones(100, dtype=np.float32), np.ones(100, dtype=np.float32)
    npu[90] = np.inf
    assert all(math.isnan(v) for v in compare_tensors(npu, bench).values())
    bench[90] = -np.inf  # +inf against -inf is a difference
    assert all(math.isnan(v) for v in compare_tensors(npu, bench).values())
    bench[90] = np.inf
    assert compare_tensors(npu, bench)["cosine"] == 1.0


def test_integer_bool_and_complex_tensors_upcast_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensor_metrics, "_BLOCK", 8)
    rng = np.random.default_rng(3)
    ints = rng.integers(-2**40, 2**40, 50)
    assert compare_tensors(ints, ints + 1)["max_abs"] == 1.0  # beyond float32's 24 bits: float64 blocks
    flags = rng.integers(0, 2, 50).astype(bool)
    assert compare_tensors(flags, flags)["cosine"] == 1.0
    npu = rng.standard_normal(20) + 1j * rng.standard_normal(20)
    bench = npu + 0.5j
    interleaved = np.stack((npu.real, npu.imag), -1), np.stack((bench.real, bench.imag), -1)
    want = _reference(*interleaved)
    for name, value in compare_tensors(npu, bench).items():
        assert np.isclose(value, want[name], rtol=1e-12, atol=4 * EPS), name


# --- the compiled kernels (graphcmp.core.tensor_kernels), used by compare_tensors(fused=True) -------------------

fused_module = pytest.importorskip("graphcmp.core.tensor_fused")  # numba
simd = pytest.importorskip("graphcmp.core.simd")


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensor_metrics, "FUSED_MIN_SIZE", 1)  # every pair through the kernels
    monkeypatch.setattr(tensor_fused_layout, "CHUNK", 128)  # many chunks, and a short last one


@pytest.mark.parametrize(("npu_dtype", "bench_dtype"), [
    (np.float64, np.float64), (np.float32, np.float32), (np.float16, np.float16), (np.float16, np.float32)])
@pytest.mark.parametrize("special", [False, True])
def test_fused_kernels_equal_the_whole_array_reference(small_chunks: None, npu_dtype: type, bench_dtype: type,
                                                       special: bool) -> None:
    rng = np.random.default_rng(33)
    for size in (1, 127, 128, 1000, 4099):
        npu, bench = _pair(rng, size, np.float64, special)
        npu, bench = npu.astype(npu_dtype), bench.astype(bench_dtype)
        got, want = compare_tensors(npu, bench, fused=True), _reference(npu, bench)
        assert list(got) == list(TENSOR_METRICS)
        for name in TENSOR_METRICS:
            assert np.isclose(got[name], want[name], rtol=1e-12, atol=4 * EPS, equal_nan=True), \
                (name, size, got[name], want[name])


@pytest.mark.parametrize("seed", [8, 9])
def test_fused_kernels_equal_the_reference_on_a_large_pair(seed: int) -> None:
    # kl adds log(T / S) to a nearly opposite term: S and T summed without compensation over chunks of 16 K
    # elements were 1e-9 off in kl here (seed 9)
    npu, bench = _pair(np.random.default_rng(seed), 5 * tensor_fused_layout.CHUNK + 17, np.float32, True)
    assert npu.size >= tensor_metrics.FUSED_MIN_SIZE
    got, want = compare_tensors(npu, bench, fused=True), _reference(npu, bench)
    for name in TENSOR_METRICS:
        assert np.isclose(got[name], want[name], rtol=1e-12, atol=4 * EPS), (name, got[name], want[name])


def test_fused_kernels_give_nan_for_unmatched_nonfinite_values(small_chunks: None) -> None:
    npu, bench = np.ones(1000, dtype=np.float32), np.ones(1000, dtype=np.float32)
    npu[900] = np.inf
    assert all(math.isnan(v) for v in compare_tensors(npu, bench, fused=True).values())
    bench[900] = -np.inf  # +inf against -inf is a difference
    assert all(math.isnan(v) for v in compare_tensors(npu, bench, fused=True).values())
    bench[900] = np.inf
    npu[5] = bench[5] = np.nan
    result = compare_tensors(npu, bench, fused=True)
    assert result["cosine"] == 1.0 and result["max_abs"] == 0.0 and result["kl"] == 0.0


def test_fused_kernels_leave_other_dtypes_and_small_pairs_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the kernels were called")

    monkeypatch.setattr(tensor_kernels, "first_pass", refuse)
    ints = np.arange(tensor_metrics.FUSED_MIN_SIZE)
    assert compare_tensors(ints, ints, fused=True)["max_abs"] == 0.0
    small = np.ones(tensor_metrics.FUSED_MIN_SIZE - 1, dtype=np.float32)
    assert compare_tensors(small, small, fused=True)["cosine"] == 1.0
    with pytest.raises(AssertionError, match="kernels were called"):
        compare_tensors(np.ones(tensor_metrics.FUSED_MIN_SIZE, np.float32), np.ones(tensor_metrics.FUSED_MIN_SIZE),
                        fused=True)


def test_float16_bits_decode_exactly_inside_the_kernels() -> None:
    import numba

    @numba.njit
    def decode(bits: np.ndarray, out: np.ndarray) -> None:
        for i in range(bits.size):
            out[i] = simd.as_float(bits[i])

    bits = np.arange(1 << 16, dtype=np.uint16)
    out = np.empty(bits.size)
    decode(bits, out)
    want = bits.view(np.float16).astype(np.float64)
    assert np.array_equal(out, want, equal_nan=True)
    assert np.array_equal(np.signbit(out), np.signbit(want))


def test_fused_kernels_keep_msprobes_eps_shift_where_bench_is_zero(small_chunks: None) -> None:
    # (x + eps) - eps is 0 for |x| below half a unit of eps: folded to x by a compiler, max_rel would be x / eps
    npu, bench = np.full(1000, 1e-33), np.zeros(1000)
    assert compare_tensors(npu, bench, fused=True)["max_rel"] == 0.0
    npu[7] = 3 * EPS
    assert compare_tensors(npu, bench, fused=True)["max_rel"] == compare_tensors(npu, bench)["max_rel"] == 3.0


def test_fused_kl_sums_are_exact(small_chunks: None) -> None:
    # kl adds log(T / S) to a nearly opposite term: S and T - S are the exact sums, rounded once
    rng = np.random.default_rng(12)
    npu = rng.random(1 << 16)
    bench = npu + rng.standard_normal(npu.size) * 1e-9
    sums = tensor_kernels.kl_pass(npu, bench, (float(npu.min()), float(npu.max())),
                                (float(bench.min()), float(bench.max())))
    floor = np.finfo(np.float32).eps
    s = np.maximum((npu - npu.min()) / (npu.max() - npu.min()), floor)
    t = np.maximum((bench - bench.min()) / (bench.max() - bench.min()), floor)
    exact_s = sum(map(Fraction, s))
    exact_gap = sum(map(Fraction, t)) - exact_s
    assert sums[0] == float(exact_s) and sums[1] == float(exact_gap)


def test_fused_log_of_a_ratio_keeps_its_digits_near_one_and_everywhere_else() -> None:
    # kl's log(s / t) is compiled: 2 atanh((ms - mt) / (ms + mt)) of the mantissas, ms - mt exact. The ratio rounded
    # to a float64 first (numpy's log(s / t)) loses the digits of kl's nearly cancelling terms, all for neighbours
    rng = np.random.default_rng(22)
    context = Context(prec=50)
    pairs = []
    for k in range(2000):
        s = float(np.exp2(rng.uniform(-23, 0)))
        other = (s * float(np.exp2(rng.uniform(-0.6, 0.6))), s * (1 + float(rng.uniform(-1e-6, 1e-6))),
                 float(np.nextafter(s, 2.0 if k % 2 else 0.0)), float(np.exp2(rng.uniform(-23, 0))))[k % 4]
        pairs.append((s, other))
    sqrt2 = math.sqrt(2)
    pairs += [(2.0**-23, 1.0), (1.0, 2.0**-23), (0.5, 0.5), (1.0, np.nextafter(1.0, 0)), (0.5, np.nextafter(0.5, 0)),
              (sqrt2 / 2, 0.5), (np.nextafter(sqrt2 / 2, 1), 0.5), (0.75, 0.5), (np.nextafter(0.5, 1), 0.5 * sqrt2)]
    for s, t in pairs:
        if not 2.0**-23 <= t <= 1.0:
            continue
        got = fused_module._log_ratio(s, t)
        exact = context.divide(Decimal(s), Decimal(t)).ln(context) if s != t else Decimal(0)
        assert abs(Decimal(got) - exact) <= 2 * Decimal(float(np.spacing(abs(float(exact))))), (s, t, got)


def test_fused_kernels_refuse_what_their_loops_cannot_check() -> None:
    with pytest.raises(ValueError, match="1000 and 3 elements"):
        tensor_kernels.first_pass(np.ones(1000, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="at most"):
        tensor_kernels.kl_pass(np.ones(8), np.ones(8), (0.0, 1.0), (0.0, 1.0), chunk=1 << 26)


def test_a_big_endian_pair_is_measured_by_its_values_not_its_bytes(small_chunks: None) -> None:
    native = np.random.default_rng(4).standard_normal(1000).astype(np.float32)
    swapped = native.astype(">f4")  # the same values, the other byte order: the kernels read native bytes only
    got, want = compare_tensors(swapped, native * 2, fused=True), compare_tensors(native, native * 2, fused=True)
    for name in TENSOR_METRICS:
        assert np.isclose(got[name], want[name], rtol=1e-12, atol=4 * EPS), (name, got[name], want[name])
