"""Element-wise comparison of one tensor pair (the single-op view's numbers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphcmp.core.elementwise import elementwise
from graphcmp.core.tensorio import read_tensor

CNN = Path(__file__).resolve().parents[1] / "data" / "tensors" / "cnn_conv2_perturbed"


def test_real_conv_output_worst_elements_histogram_and_sample():
    name = "Module.conv2.Conv2d.forward.0.output.0.pt"
    npu, bench = np.asarray(read_tensor(CNN / "perturb" / name)), np.asarray(read_tensor(CNN / "baseline" / name))
    e = elementwise(npu, bench, worst=10, sample=500)
    diff = np.abs(npu.astype(np.float64) - bench.astype(np.float64))
    assert e.count == npu.size and e.exact == int(np.count_nonzero(diff == 0))
    assert int(e.counts.sum()) + e.nonfinite == e.count - e.exact  # every differing element is in a bin
    assert e.edges[0] == pytest.approx(diff[diff > 0].min()) and e.edges[-1] == pytest.approx(diff.max())
    top = np.sort(diff.reshape(-1))[::-1][:10]
    assert np.allclose(e.worst_abs, top)
    for index, a, b in zip(e.worst.tolist(), e.worst_npu, e.worst_bench):  # the indices name those elements
        assert float(npu[tuple(index)]) == a and float(bench[tuple(index)]) == b
    assert len(e.sample_npu) == 500 and np.allclose(e.sample_npu[:10], e.worst_npu)


def test_nan_inf_and_equal_tensors():
    e = elementwise(np.array([1.0, np.nan, np.inf, 2.0]), np.array([1.0, np.nan, 3.0, 0.0]))
    assert e.exact == 2 and e.nonfinite == 1 and int(e.counts.sum()) == 1
    assert e.worst.tolist() == [[2], [3]] and e.worst_rel[1] == np.inf
    same = elementwise(np.ones((2, 3)), np.ones((2, 3)))
    assert same.exact == 6 and len(same.worst) == 0 and len(same.edges) == 0
    with pytest.raises(ValueError, match="shapes differ"):
        elementwise(np.ones(3), np.ones(4))
