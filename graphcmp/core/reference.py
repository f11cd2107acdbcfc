"""A measured noise floor: what a reference run at the npu run's precision shows at each call.

A *reference* run is a third run of the same model on the bench run's hardware (or any other) at the npu run's
precision: a GPU run in bfloat16 next to an NPU run in bfloat16 and a float32 baseline. Compared with the bench run,
it shows at every call how far that precision alone drifts from the baseline: the rounding noise of this very call,
measured instead of modeled (msprobe's API accuracy checker judges an NPU's error against a GPU's error from a
high-precision golden the same way).

The reference run is compared with the bench run like the npu run (same matching rules, same thresholds), and each
npu call is mapped to the reference call matched to the same bench call. What it measured there is the call's
**growth** ``g_ref = out_ref / (in_ref + u sqrt(n) + l)`` (core/noise.py, step 3): the noise the call added on top
of its inputs' error in the reference run. The noise model then allows the npu call
``max(1, g_ref) x (in_npu + u sqrt(n) + l)``: the reference's own output error, scaled to the npu run's input error
(the reference's inputs carry its own upstream rounding, the npu's its own), and never less than one rounding of the
call's output. Calls the reference run does not have (or did not compare) keep the run's calibrated growth limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphcmp.core.noise import LIBRARY_ERROR, NoiseModel
from graphcmp.core.records import FrozenColumns

__all__ = ["ReferenceGrowth", "reference_growth"]


@dataclass(frozen=True, slots=True, eq=False)
class ReferenceGrowth(FrozenColumns):
    """What a reference run measured, per npu node.

    Attributes
    ----------
    growth : ndarray
        float64 per npu node: the growth the reference run shows at the call matched to the same bench call
        (NaN where the reference has no compared call there).
    source : str
        The reference run's path, as the user gave it.
    """

    growth: np.ndarray
    source: str

    @property
    def measured(self) -> np.ndarray:
        """Per npu node, True where the reference run measured a growth."""
        return np.isfinite(self.growth)


def measured_growth(noise: NoiseModel) -> np.ndarray:
    """Per node of a comparison, its growth ``out / (in + u sqrt(n) + l)`` (NaN where it is not a compared leaf)."""
    growth = np.full(len(noise.output_error), np.nan)
    leaves = noise.leaves
    base = noise.input_error[leaves] + noise.unit[leaves] * np.sqrt(noise.reduction[leaves]) + LIBRARY_ERROR
    with np.errstate(invalid="ignore", divide="ignore"):
        growth[leaves] = noise.output_error[leaves] / base
    return growth


def reference_growth(npu_to_bench: np.ndarray, reference_to_bench: np.ndarray, reference: NoiseModel,
                     source: str) -> ReferenceGrowth:
    """The reference run's growth at each npu call, through the bench call both are matched to.

    Parameters
    ----------
    npu_to_bench : ndarray
        The npu run's matches (bench row per npu row, -1 for none).
    reference_to_bench : ndarray
        The reference run's matches against the same bench run.
    reference : NoiseModel
        The noise model of the reference run against the bench run.
    source : str
        The reference run's path.

    Examples
    --------
    >>> from graphcmp.core.compare import compare_graphs
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> def t(v, dtype="float32"):
    ...     return {"type": "torch.Tensor", "dtype": "torch." + dtype, "shape": [8], "Max": v, "Min": -v,
    ...             "Mean": 0.0, "Norm": 2 * v}
    >>> def run(a, dtype):
    ...     return parse_msprobe({"data": {"Functional.linear.0.forward": {"input_args": [t(1.0)],
    ...                                                                   "output": [t(a, dtype)]}}})
    >>> bench, ref = run(1.0, "float32"), run(1.01, "bfloat16")
    >>> r = compare_graphs(ref, bench)
    >>> g = reference_growth(r.matches.npu_to_bench, r.matches.npu_to_bench, r.noise, "ref")
    >>> [round(float(x), 2) for x in g.growth]
    [nan, 2.56]
    """
    growth = measured_growth(reference)
    bench_to_reference = np.full(int(max(npu_to_bench.max(initial=-1), reference_to_bench.max(initial=-1))) + 1, -1)
    matched = np.flatnonzero(reference_to_bench >= 0)
    bench_to_reference[reference_to_bench[matched]] = matched
    at = np.where(npu_to_bench >= 0, bench_to_reference[np.maximum(npu_to_bench, 0)], -1)
    return ReferenceGrowth(np.where(at >= 0, growth[np.maximum(at, 0)], np.nan), source)
