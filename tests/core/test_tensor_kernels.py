"""The compiled kernels of tensor data (`core/tensor_kernels.py`): when they are taken, their build in the background,
and the build itself giving what numba's just-in-time kernels give, bit for bit."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest

from graphcmp.cli.kernels import build_tensor_kernels_later
from graphcmp.core import compiled, tensor_kernels
from graphcmp.core.compiled import AHEAD_OF_TIME_ENV
from graphcmp.core.tensor_fused_layout import NONFINITE

MB = 1 << 20


@pytest.fixture
def unbuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensor_kernels.KERNELS, "built", lambda: False)
    monkeypatch.setattr(tensor_kernels, "_wanted", False)


def test_until_built_only_inputs_that_repay_loading_numba_take_them(unbuilt: None) -> None:
    assert not tensor_kernels.pays(10 * MB) and not tensor_kernels._wanted  # too small to gain from a build
    assert not tensor_kernels.pays(100 * MB) and tensor_kernels._wanted  # would gain from a build
    assert tensor_kernels.pays(2048 * MB)


def test_once_built_every_input_of_some_size_takes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tensor_kernels.KERNELS, "built", lambda: True)
    assert tensor_kernels.pays(100 * MB) and not tensor_kernels.pays(1 * MB)


def test_a_process_that_wanted_them_starts_their_build(unbuilt: None, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    monkeypatch.setattr(tensor_kernels, "build_detached", lambda entry: started.append(entry) or True)
    monkeypatch.setattr(tensor_kernels.KERNELS, "buildable", lambda: True)
    assert not build_tensor_kernels_later(quiet=True) and not started  # no tensor data large enough yet
    tensor_kernels.pays(100 * MB)
    assert build_tensor_kernels_later(quiet=True) and started == ["graphcmp.core.tensor_kernels:build"]
    monkeypatch.delitem(sys.modules, "graphcmp.core.tensor_kernels")  # a process that never loaded them
    assert not build_tensor_kernels_later(quiet=True)


def _measured(kernels: object, rng: np.random.Generator) -> list:
    """Every kernel's output on pairs of every dtype, sizes around a chunk, matched infinities in one chunk."""
    original = tensor_kernels._kernels
    tensor_kernels._kernels = lambda: kernels  # both sets through the same wrappers
    try:
        out = []
        for npu_dtype in (np.float16, np.float32, np.float64):
            for bench_dtype in (np.float16, np.float32, np.float64):
                for size in (1, 100, 16384, 16385, 70000):
                    npu = (rng.standard_normal(size) * 3).astype(npu_dtype)
                    bench = (npu.astype(np.float64) + rng.standard_normal(size) * 0.01).astype(bench_dtype)
                    if size == 70000:
                        npu[5] = bench[5] = np.inf
                    partials, counts = tensor_kernels.first_pass(npu, bench)
                    finite = np.isfinite(npu)
                    ranges = [(float(side[finite].min()), float(side[finite].max())) for side in (npu, bench)]
                    kl = tensor_kernels.kl_pass(npu, bench, *ranges, nonfinite=counts[:, NONFINITE])
                    out.append((partials.tobytes(), counts.tobytes(), kl, tensor_kernels.stats(npu),
                                tensor_kernels.stats(bench)))
        return out
    finally:
        tensor_kernels._kernels = original


def test_the_build_gives_what_numbas_kernels_give_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    # built for this processor (its vector width), the sums are reassociated as the just-in-time code does; the
    # build is the one users load (the suite's own, `conftest.built_kernels`), loaded again here
    monkeypatch.delenv(AHEAD_OF_TIME_ENV, raising=False)
    kernels = dataclasses.replace(tensor_kernels.KERNELS, _loaded=None)
    built = kernels.load()
    assert kernels.built() and type(built).__name__ == "_Checked"
    jit = compiled._Jit(kernels.dispatchers())
    assert _measured(built, np.random.default_rng(7)) == _measured(jit, np.random.default_rng(7))
