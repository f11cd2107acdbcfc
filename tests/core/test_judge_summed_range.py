"""A float16 statistic summed beyond the dtype's range is no overflow verdict (judge) when Max and Min are finite."""

from __future__ import annotations

import numpy as np

from graphcmp.core.compare import compare_graphs
from graphcmp.core.readers.msprobe import parse_msprobe
from graphcmp.core.rules import ERROR


def _fill(dtype: str, norm: float, minimum: float = -10000.0):
    """masked_fill of attention scores with -1e4 (a causal mask): 512 elements, half of them filled."""
    x = {"type": "torch.Tensor", "dtype": f"torch.{dtype}", "shape": [2, 16, 16], "Max": 1.22, "Min": -1.39,
         "Mean": 0.018, "Norm": 14.5}
    out = dict(x, Min=minimum, Mean=-4688.0, Norm=norm)
    return parse_msprobe({"data": {"Tensor.masked_fill.0.forward": {
        "input_args": [x, {"type": "float", "value": -10000.0}], "output": [out]}}})


def test_norm_summed_beyond_float16_range_is_no_error():
    report = compare_graphs(_fill("float16", float("inf")), _fill("float32", 309838.4))
    assert not np.any(report.verdicts.status == ERROR)
    assert "overflow" not in report.verdicts.reason[report.npu.row("Tensor.masked_fill.0.forward")]


def test_an_element_beyond_range_still_overflows():
    report = compare_graphs(_fill("float16", float("inf"), minimum=float("-inf")), _fill("float32", 309838.4))
    row = report.npu.row("Tensor.masked_fill.0.forward")
    assert report.verdicts.status[row] == ERROR and "overflow on npu" in report.verdicts.reason[row]
