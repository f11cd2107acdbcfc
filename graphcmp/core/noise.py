"""The noise model: how far the npu run may drift from the bench run by rounding alone, and which
calls drift further.

Two runs of one model on different hardware, or in different precisions (an NPU in bfloat16 against
a float32 baseline), never agree bit for bit: every call rounds, and the rounding of one call is the
input error of the next. The model below says, per call, how much of its output error rounding and
its inputs explain; a call whose error is well beyond that is an **origin** of divergence. The
numbers, in the order they are computed (docs/noise.md works one case through by hand):

1. **Tensor error** ``e`` (unitless, per tensor pair; `pair_errors`): the largest of
   ``|dMax| / A`` and ``|dMin| / A`` (``A`` = the bench tensor's magnitude max(|Max|, |Min|)),
   ``|dNorm| / Norm`` and ``|dMean| / RMS`` (RMS = Norm / sqrt(element count)). Every statistic is
   measured against the tensor's own scale, so a Mean or a Min near zero never blows up. Real tensors
   (task ``tensor``) add the Euclidean relative distance, which also sees a permutation that keeps
   the statistics. A gradient that is zero in theory (a bias gradient in front of a normalisation)
   counts as agreeing when, on each side, its magnitude is below ``sqrt(u)`` of the largest gradient
   of the same backward call (at most half of its digits survive such a cancellation). A number
   argument (a scale, an eps) is compared by value, other arguments (a ``dim``, a string) by text;
   the arguments that name a dtype or a device are context, not a difference, and so are all
   arguments between MindSpore and PyTorch, whose conventions differ.
2. **Unit roundoff** ``u`` (per call): the coarsest of ``UNIT_ROUNDOFF`` over the float dtypes of
   both runs seen so far in execution order (bfloat16 ``2**-8``, float16 ``2**-11``, float32
   ``2**-24``). Once a bfloat16 call ran, every later value may carry bfloat16 rounding.
3. **Growth** ``g = out / (in + u sqrt(n) + l)`` per compared leaf call: ``out`` the largest error
   of its outputs, ``in`` the largest error of what it computed from — its inputs, and for a
   backward call also the inputs and outputs of its forward call (and for parameter gradients those
   of the module's backward and forward calls); ``n`` the number of values a backward output sums
   (a bias gradient sums over the batch; the normalised axis of a `NORMALIZING_OPS` op's backward; 1 in
   forward); ``l`` = `LIBRARY_ERROR`, the few float32
   ulps two math libraries may differ by. Rounding and error propagation keep ``g`` near 1 or
   below. The backward calls of `SWITCHING_OPS` (ReLU, max-pool, dropout ...) are not bounded by
   their inputs: a forward rounding flips their masks.
4. **Calibration**: the run's own growth limit ``G`` per direction (forward, backward) and call
   kind (API, module, parameter gradient) is the ``NoiseRule.quantile`` of ``g`` over those calls
   (at least 1; groups with fewer than ``NoiseRule.min_samples`` calls use their direction's limit).
   Communication calls are left out, and their limit is 1: their outputs also hold other ranks' data,
   so an output that differs while the local inputs agree is an origin on this rank, reached from
   another (core/distributed/crossrank.py follows it back to the rank it came from).
   The noise the model allows at a call's output is ``G * (in + u sqrt(n) + l)``, never more than
   `noise_ceiling` (``sqrt(u)``) unless the inputs carried more, and its **margin** is ``out`` over
   that. With a reference run at the npu run's precision (``compare --reference``, core/reference.py),
   ``G`` of each call the reference has is measured there instead (`_measured_limits`).
5. **Origins**: a compared leaf whose margin exceeds ``NoiseRule.origin_margin`` (``tensor_origin_margin`` outside
   the backward pass when both runs hold real tensors, whose errors are measured, `origin_margins`); or one with an
   input no matched earlier call produced (a weight, data, an argument, or the output of a call the
   bench run does not have) that differs by more than that margin over its own noise: the coarsest
   ``u``, the largest output error of the calls before it (what an input computed outside the dump
   may carry), and for weights the largest drift of the trained parameters of the other modules and the error
   of its own module's gradients in a mixed-precision step after the first (after a step, every
   weight carries the previous step's noise, and a weight that started at zero is mostly accumulated
   gradients; a wrong one drifts further);
   or one whose output overflows while its inputs are finite, or changes its element count.
   After the first origin, a call that is an origin by its growth alone while what it computed from
   already carries that difference is propagated instead (one origin per cause, `_one_per_cause`).
6. **Roles**: every node is the origin, *propagated* (after the first origin, with an error above
   the largest error of the calls before it), *within noise*, or *not compared*. A forward noise
   level beyond `noise_ceiling` is one no rounding explains (`NoiseModel.explains_noise`).

The comparison's precision (`Precision`) says which dtypes met: an *exact rerun* (same dtypes, every
call before the first origin bit-identical), *same precision* on other hardware, or *mixed
precision*, with the number of output tensors per dtype pair.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np

from graphcmp.core.arrays import sorted_unique
from graphcmp.core.dataflow import communication_calls, earliest_producers, forward_twins, trained_parameters
from graphcmp.core.dtypes import normalize_dtype
from graphcmp.core.hierarchy import execution_keys, node_levels
from graphcmp.core.matching import MatchTable
from graphcmp.core.matching.by_api import is_cross_framework
from graphcmp.core.metrics import by_blocks, mark_nonfinite, rows_max
from graphcmp.core.overflow import OverflowLevel, recorded_statistics, summed_beyond_range
from graphcmp.core.pairing import TensorPairs
from graphcmp.core.records import (
    Direction,
    DumpGraph,
    FrozenColumns,
    NodeKind,
    Role,
    is_input,
    is_output,
    string_codes,
    string_column,
)
from graphcmp.core.rules import NoiseRule
from graphcmp.core.stat_kernels import stat_errors
from graphcmp.core.texts import CodedTexts

if TYPE_CHECKING:
    from graphcmp.core.reference import ReferenceGrowth

__all__ = [
    "CONTEXT_VALUE_TYPES",
    "NORMALIZING_OPS",
    "UNIT_ROUNDOFF",
    "Calibration",
    "NodeRole",
    "NoiseModel",
    "Precision",
    "compared_leaves",
    "element_count",
    "noise_ceiling",
    "noise_model",
    "origin_margins",
    "pair_errors",
    "unit_roundoff",
]

UNIT_ROUNDOFF: dict[str, float] = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
    "float8_e4m3fn": 2.0**-4,
    "float8_e4m3": 2.0**-4,
    "float8_e5m2": 2.0**-3,
}
"""Unit roundoff (half the distance from 1 to the next number) of each float format: 2**-p for p
significand bits. Integer and boolean values are exact (0)."""

LIBRARY_ERROR = 2 * 4 * 2 * UNIT_ROUNDOFF["float32"]
"""The most two float32 implementations of one function may differ by: math libraries give
exp, log, tanh, erf ... to within 4 ulps (1 ulp = 2 u), on either side. It matters in same-precision
comparisons (MindSpore against PyTorch, one device against another); half precision rounds far more."""

SWITCHING_OPS = frozenset({
    "relu", "relu6", "leakyrelu", "prelu", "rrelu", "hardtanh", "threshold", "hardswish", "hardsigmoid",
    "maxpool1d", "maxpool2d", "maxpool3d", "maxpool", "adaptivemaxpool1d", "adaptivemaxpool2d", "adaptivemaxpool3d",
    "fractionalmaxpool2d", "fractionalmaxpool3d", "maxpoolwithargmax", "dropout", "dropout1d", "dropout2d",
    "dropout3d", "alphadropout", "featurealphadropout", "clamp", "clip", "clipbyvalue", "abs", "sign", "max",
    "min", "maximum", "minimum", "amax", "amin", "topk", "sort", "argmax", "argmin", "maskedfill", "where"})
"""Ops whose derivative switches on the forward values (a ReLU's mask, a max-pool's argmax, a dropout
mask): rounding in the forward pass flips elements of their backward output whole, so the backward
error of these ops is not bounded by their input errors. Their backward calls are not calibrated
and are origins only through their inputs, arguments, overflow or shape."""

NORMALIZING_OPS: dict[str, str] = {
    "softmax": "last", "logsoftmax": "last", "softmin": "last", "layernorm": "last", "rmsnorm": "last",
    "normalize": "last", "batchnorm": "channels", "instancenorm": "channels", "groupnorm": "channels",
}
"""Ops whose backward subtracts a sum over the values they normalise from each gradient (softmax:
``y (g - sum(g y))``; a norm: ``g - mean(g) - x mean(g x)``): the sum of n terms rounds like ``sqrt(n) u``
and the difference cancels, so their backward reduces over the normalised axis: the last one (softmax,
layer and RMS norms) or every axis but the channels (batch, instance and group norms)."""


def noise_ceiling(unit: float | np.ndarray) -> float | np.ndarray:
    """The largest error rounding alone can leave on a value of unit roundoff `unit`: ``sqrt(u)``.

    A value that lost more than half of its significand's digits did not lose them to rounding: a
    well-scaled call rounds by about u, and errors carried through a network grow by a few u per call
    at most (the growth the run calibrates is near 1), so half the digits (``sqrt(u)``, 2**-4 of
    bfloat16's 2**-8, 2**-12 of float32's 2**-24) is reached only by a difference or by wrong pairs.
    The tensors whose magnitude is tied to the dtype's range (values cancelled to zero in theory) are
    left out before this is applied (`_zero_in_theory`).

    >>> float(noise_ceiling(2.0**-8)), float(noise_ceiling(2.0**-24))
    (0.0625, 0.000244140625)
    """
    return np.sqrt(unit)


CONTEXT_VALUE_TYPES = frozenset({"torch.dtype", "torch.device", "mindspore.dtype", "mindspore.Type", "device"})
"""Argument types that name a precision or a device: they differ between the runs by design."""



_NO_ROWS = np.zeros(0, bool)


class NodeRole(enum.IntEnum):
    """What the noise model makes of a node."""

    NOT_COMPARED = 0  # no output of it was compared (unmatched, no data)
    WITHIN_NOISE = 1  # its error is what rounding alone can give
    PROPAGATED = 2  # after an origin, its error is above the noise: an origin upstream explains it
    ORIGIN = 3  # its error is well beyond what its dtype and its inputs explain


@dataclass(frozen=True, slots=True)
class Precision:
    """Which dtypes met in the comparison.

    Attributes
    ----------
    kind : str
        ``exact rerun``, ``same precision`` or ``mixed precision``.
    dtype_pairs : tuple of (str, str, int)
        (npu dtype, bench dtype, number of npu nodes whose coarsest compared float output is that pair),
        most frequent first.
    unit_roundoff : float
        The coarsest unit roundoff of the compared float dtypes (0 when none).
    """

    kind: str
    dtype_pairs: tuple[tuple[str, str, int], ...]
    unit_roundoff: float

    @property
    def mixed(self) -> bool:
        return self.kind == "mixed precision"

    def describe(self) -> str:
        """One line, e.g. ``mixed precision: 120 nodes bfloat16 vs float32, 90 float32 vs float32 (...)``."""
        pairs = ", ".join(f"{n} {a} vs {b}" for a, b, n in self.dtype_pairs) or "no float outputs"
        pairs = f"nodes {pairs}" if self.dtype_pairs else pairs
        return f"{self.kind}: {pairs} (unit roundoff {self.unit_roundoff:.3g})"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "unit_roundoff": self.unit_roundoff,
                "dtype_pairs": [{"npu": a, "bench": b, "nodes": n} for a, b, n in self.dtype_pairs]}


@dataclass(frozen=True, slots=True)
class Calibration:
    """The growth limit the run's own calls give one group (direction and call kind)."""

    direction: str
    kind: str
    calls: int
    growth_limit: float

    def to_dict(self) -> dict[str, Any]:
        return {"direction": self.direction, "kind": self.kind, "calls": self.calls,
                "growth_limit": self.growth_limit}


@dataclass(frozen=True, slots=True, eq=False)
class NoiseModel(FrozenColumns):
    """Errors, noise allowances, margins and roles of one comparison (see the module docstring).

    Node columns are over the npu rows; `pair_error` is over the tensor pairs.
    """

    pair_error: np.ndarray  # float64 per pair
    fresh_pair: np.ndarray  # bool per pair: an input no matched earlier call produced
    producer: np.ndarray  # int64 per pair: npu row of the earliest call that output the same tensor, -1
    unit: np.ndarray  # float64 per node: u
    output_error: np.ndarray  # float64 per node
    input_error: np.ndarray  # float64 per node: what it computed from
    fresh_error: np.ndarray  # float64 per node: its tensor inputs no matched earlier call produced
    argument_error: np.ndarray  # float64 per node: its non-tensor arguments
    reduction: np.ndarray  # float64 per node: values a backward output element sums (1 in forward)
    growth_limit: np.ndarray  # float64 per node: G (NaN where not a compared leaf, inf for switching ops)
    margin: np.ndarray  # float64 per node: out / (G (in + u)) (NaN where not a compared leaf)
    fresh_margin: np.ndarray  # float64 per node: max(fresh / (F u), argument / u)
    shape_changed: np.ndarray  # bool per node: an output's shape differs
    role: np.ndarray  # int8 NodeRole per node
    leaves: np.ndarray  # int64 rows of the compared leaf calls, in execution order
    origin_rows: np.ndarray  # int64 rows of the origins, in the order their outputs appear
    first_origin: int  # row, -1 when none
    noise_level: float  # the largest output error before the first origin (with u as a floor)
    fresh_limit: float  # the largest parameter drift, in units of the coarsest u
    calibration: tuple[Calibration, ...]
    precision: Precision
    dtype_pair: np.ndarray  # int16 per node: index into precision.dtype_pairs of its coarsest output, -1
    rule: NoiseRule
    measured: np.ndarray = field(default_factory=lambda: _NO_ROWS)  # bool per node: G measured by a reference run
    reference: str = ""  # the reference run's path ("" without one): see core/reference.py

    def origins(self) -> np.ndarray:
        """Rows of the origins, in the order their outputs appear."""
        return self.origin_rows

    def margin_of(self, row: int) -> float:
        """How far beyond the noise `row` is: its growth or fresh-input margin, inf for a change no noise
        explains (an element count that differs, an overflow from finite inputs, a module's own output)."""
        return float(self.margins_of(np.array([row]))[0])

    def margins_of(self, rows: np.ndarray) -> np.ndarray:
        """`margin_of` each of `rows`."""
        growth = np.nan_to_num(self.margin[rows], nan=0.0, posinf=np.inf)
        fresh = self.fresh_margin[rows]
        margin = np.where(fresh > growth, fresh, growth)  # the growth margin unless the fresh one is larger
        hard = self.shape_changed[rows] | np.isnan(self.growth_limit[rows])
        return np.where(hard, np.where(self.role[rows] == NodeRole.ORIGIN, np.inf, 0.0), margin)

    def allowed(self, row: int) -> float:
        """The output error the model allows at `row` (NaN where it is not a compared leaf)."""
        return float(self.growth_limit[row] * (self.input_error[row] + self.unit[row] * np.sqrt(self.reduction[row])
                                               + LIBRARY_ERROR))

    @property
    def ceiling(self) -> float:
        """The most noise the comparison's precision can explain (`noise_ceiling` of its coarsest u)."""
        return float(noise_ceiling(max(self.precision.unit_roundoff, LIBRARY_ERROR)))

    def forward_noise(self, direction: np.ndarray) -> tuple[float, int]:
        """The largest output error of the forward calls within the noise level (before the first origin), and
        the first call (row) with it (-1: none); `direction` is the npu run's node column."""
        leaves = self.leaves[direction[self.leaves] == Direction.FORWARD]
        errors = self.output_error[leaves]
        errors = np.where(errors <= self.noise_level, errors, 0.0)
        if not len(leaves) or not errors.max() > 0:
            return 0.0, -1
        return float(errors.max()), int(leaves[np.argmax(errors)])

    def explains_noise(self, direction: np.ndarray) -> bool:
        """True when the forward calls' noise (`forward_noise`) is within what the precision can produce
        (`ceiling`); `direction` is the npu run's node column.

        A level beyond it (0.378 between two float32 runs) is a finding in itself: pairs that are not the
        same call, or a difference the calls' growth alone does not single out. Such a comparison never
        agrees. The backward pass is left out: a gradient summed from terms that nearly cancel (a
        normalisation's weight gradient) keeps few digits of its own and still is only rounding.
        """
        return not self.forward_noise(direction)[0] > self.ceiling

    def role_counts(self) -> dict[str, int]:
        counts = np.bincount(self.role, minlength=len(NodeRole))
        return {r.name.lower(): int(counts[r]) for r in NodeRole}

    def summary(self) -> dict[str, Any]:
        """What a person checks first: the precision, the measured noise and the roles."""
        return {
            "precision": self.precision.to_dict(),
            "noise_level": self.noise_level,
            "noise_level_units": self.noise_level / self.precision.unit_roundoff
            if self.precision.unit_roundoff else None,
            "noise_ceiling": self.ceiling,
            "fresh_limit": self.fresh_limit,
            "calibration": [c.to_dict() for c in self.calibration],
            "roles": self.role_counts(),
            "rule": {"origin_margin": self.rule.origin_margin, "quantile": self.rule.quantile,
                     "min_samples": self.rule.min_samples, "tensor_origin_margin": self.rule.tensor_origin_margin},
            **self._reference_summary(),
        }

    def is_measured(self, row: int) -> bool:
        """True when the noise allowed at `row` was measured from a reference run (core/reference.py)."""
        return bool(len(self.measured) and self.measured[row])

    def _reference_summary(self) -> dict[str, Any]:
        """The reference run and how many compared calls it measured (nothing without one)."""
        if not self.reference:
            return {}
        return {"reference": {"path": self.reference, "measured_calls": int(np.count_nonzero(self.measured)),
                              "compared_calls": len(self.leaves)}}


def unit_roundoff(dtype: str) -> float:
    """Unit roundoff of a dtype name in any framework's spelling (0 for exact types).

    >>> unit_roundoff("torch.bfloat16"), unit_roundoff("Float32"), unit_roundoff("torch.int64")
    (0.00390625, 5.960464477539063e-08, 0.0)
    """
    name = normalize_dtype(dtype)
    if name in UNIT_ROUNDOFF:
        return UNIT_ROUNDOFF[name]
    return UNIT_ROUNDOFF["float32"] if "float" in name else 0.0


def noise_model(
    npu: DumpGraph,
    bench: DumpGraph,
    matches: MatchTable,
    pairs: TensorPairs,
    rule: NoiseRule | None = None,
    overflow: np.ndarray | None = None,
    reference: ReferenceGrowth | None = None,
) -> NoiseModel:
    """Errors, calibrated noise, margins and roles of a matched, paired comparison.

    Parameters
    ----------
    npu, bench : DumpGraph
        The run under test and the baseline.
    matches : MatchTable
        Node matches.
    pairs : TensorPairs
        Paired tensors with their metric columns (`pair_metrics`).
    rule : NoiseRule, optional
        Margins and calibration settings. Defaults to ``NoiseRule()``.
    overflow : ndarray, optional
        Overflow level per npu node (`overflow_levels`); a call whose outputs overflow while its
        inputs are finite (level 3) is an origin.
    reference : ReferenceGrowth, optional
        The growth a reference run at the npu run's precision measured at each call (`reference_growth`):
        where it has one, it replaces the run's calibrated growth limit (`_measured_limits`).

    Examples
    --------
    >>> from graphcmp.core.compare import compare_graphs
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> def t(v, dtype="float32"):
    ...     return {"type": "torch.Tensor", "dtype": "torch." + dtype, "shape": [8], "Max": v, "Min": -v,
    ...             "Mean": 0.0, "Norm": 2 * v}
    >>> def run(a, b, dtype):
    ...     return parse_msprobe({"data": {
    ...         "Functional.linear.0.forward": {"input_args": [t(1.0)], "output": [t(a, dtype)]},
    ...         "Torch.relu.0.forward": {"input_args": [t(a, dtype)], "output": [t(b, dtype)]}}})
    >>> noise = compare_graphs(run(1.002, 1.2, "bfloat16"), run(1.0, 1.0, "float32")).noise
    >>> [NodeRole(int(noise.role[r])).name for r in noise.leaves]
    ['WITHIN_NOISE', 'ORIGIN']
    """
    rule = rule or NoiseRule()
    beyond = origin_margins(npu, bench, rule)
    keys = execution_keys(npu)
    texts = _pair_texts(npu, bench, pairs)
    e = _errors(npu, bench, matches, pairs, keys, texts)
    reduction, growth_limit, calibration, margin, measured = _growth_margins(npu, texts, e, pairs.npu, rule, reference)
    fresh_margin, fresh_limit = _fresh_margins(npu, pairs, e, texts)
    shape_changed = _shape_changes(texts, e.node, e.is_out, len(npu))
    compared = e.has_out & (matches.npu_to_bench >= 0)
    end = _subtree_end_keys(npu, keys)
    origin = _origins(npu, e.leaves, margin, fresh_margin, e.output_error, shape_changed, overflow, beyond, compared)
    with np.errstate(invalid="ignore"):
        by_growth = (margin > beyond) & ~(fresh_margin > beyond) & ~shape_changed
    if overflow is not None:
        by_growth &= ~((overflow == OverflowLevel.CRITICAL) & (e.output_error > 0))
    origin = _one_per_cause(npu, origin, by_growth, end, keys, e)
    roles, origins, level = _roles(keys, end, e.leaves, origin, compared, e.output_error, e.unit)
    first = int(origins[0]) if len(origins) else -1
    precision, dtype_pair = _precision(npu, pairs, texts, e.is_out, e.leaves, keys, first, e.output_error, e.inner)
    return NoiseModel(
        pair_error=e.error, fresh_pair=e.fresh, producer=e.producer, unit=e.unit, output_error=e.output_error,
        input_error=e.input_error, fresh_error=e.fresh_error, argument_error=e.argument_error,
        reduction=reduction, growth_limit=growth_limit, margin=margin, fresh_margin=fresh_margin,
        shape_changed=shape_changed, role=roles, leaves=e.leaves, origin_rows=origins, first_origin=first,
        noise_level=level, fresh_limit=fresh_limit, calibration=calibration, precision=precision,
        dtype_pair=dtype_pair, rule=rule, measured=measured if reference is not None else _NO_ROWS,
        reference=reference.source if reference is not None else "",
    )


@dataclass(frozen=True, slots=True)
class _PairTexts:
    """What the dtype and shape texts of the paired tensors say, per pair (scratch columns of one
    `noise_model` call: each text column is coded once)."""

    npu_dtype: np.ndarray  # per pair: code into npu_dtypes
    bench_dtype: np.ndarray  # per pair: code into bench_dtypes
    npu_dtypes: list[str]
    bench_dtypes: list[str]
    npu_unit: np.ndarray  # per pair: unit roundoff of the npu dtype (0 for exact types)
    bench_unit: np.ndarray
    npu_count: np.ndarray  # per pair: elements of the npu tensor (0 where the shape is not a tensor's)
    bench_count: np.ndarray
    npu_kind: np.ndarray  # per pair: what the npu shape says: _TENSOR, _SCALAR or _OTHER
    bench_kind: np.ndarray


def _pair_texts(npu: DumpGraph, bench: DumpGraph, pairs: TensorPairs) -> _PairTexts:
    npu_dtype, npu_dtypes = _codes_at(npu.tensors.dtype, pairs.npu)
    bench_dtype, bench_dtypes = _codes_at(bench.tensors.dtype, pairs.bench)
    npu_count, npu_kind = _shape_columns(npu.tensors.shape, pairs.npu)
    bench_count, bench_kind = _shape_columns(bench.tensors.shape, pairs.bench)
    return _PairTexts(npu_dtype, bench_dtype, npu_dtypes, bench_dtypes, _unit_table(npu_dtypes)[npu_dtype],
                      _unit_table(bench_dtypes)[bench_dtype], npu_count, bench_count, npu_kind, bench_kind)


def _codes_at(texts: tuple[str, ...], rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The codes of `texts` (`string_codes`) at `rows`, and the distinct texts; a `CodedTexts`'s own narrow codes
    (a pair column of them is 2.9 MB at 2.9M pairs, not 23 MB)."""
    if type(texts) is CodedTexts:
        return (texts.codes[rows] if len(rows) else np.zeros(0, np.int64)), list(texts.names)
    codes, names = string_codes(texts)
    return (codes[rows] if len(rows) else np.zeros(0, np.int64)), names


def _unit_table(dtypes: list[str]) -> np.ndarray:
    return np.array([unit_roundoff(name) for name in dtypes] + [0.0])


def _shape_columns(shapes: tuple[str, ...], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row in `rows`, the element count of its shape text (0 where not a tensor shape) and what the text
    says the value is: _TENSOR (``[2, 3]``), _SCALAR (``scalar``) or _OTHER (``""``: a string, None ...)."""
    codes, names = _codes_at(shapes, rows)
    counts = np.array([element_count(s) for s in names] + [0], np.float64)
    kinds = np.array([_SCALAR if s == "scalar" else _OTHER if s == "" else _TENSOR for s in names] + [_TENSOR],
                     np.int8)
    return counts[codes], kinds[codes]


@dataclass(slots=True)
class _Errors:
    """Steps 1-2 of the module docstring: per pair and per node errors, units and what is fresh (scratch
    columns of one `noise_model` call, handed on to the `NoiseModel`)."""

    node: np.ndarray  # per pair: npu node row
    role: np.ndarray  # per pair: Role
    is_in: np.ndarray  # per pair
    is_out: np.ndarray  # per pair
    error: np.ndarray  # per pair: e
    producer: np.ndarray  # per pair: earliest npu row that output the same tensor, -1
    fresh: np.ndarray  # per pair: an input no matched earlier call produced
    unit: np.ndarray  # per node: u
    has_out: np.ndarray  # per node: some output compared
    output_error: np.ndarray  # per node
    input_error: np.ndarray  # per node: what it computed from
    fresh_error: np.ndarray  # per node: its fresh tensor inputs
    argument_error: np.ndarray  # per node: its fresh non-tensor arguments
    leaves: np.ndarray  # compared leaf rows in execution order
    inner: tuple[np.ndarray, np.ndarray, list[str]]  # `_inner_precision`


def _errors(npu: DumpGraph, bench: DumpGraph, matches: MatchTable, pairs: TensorPairs, keys: np.ndarray,
            texts: _PairTexts) -> _Errors:
    n = len(npu)
    i = pairs.npu
    node = npu.tensors.node[i].astype(np.int64)
    role = npu.tensors.role[i]
    is_out, is_in = is_output(role), is_input(role)
    order = np.argsort(keys, kind="stable")
    inner = _inner_precision(npu, pairs)
    npu_units = _chain_units(order, node, texts.npu_unit, n,
                             _trained_floor(npu, np.append(texts.npu_unit, inner[0])), inner[0])
    bench_units = _chain_units(order, node, texts.bench_unit, n, _trained_floor(bench, texts.bench_unit))
    error = _pair_errors(npu, bench, pairs, npu_units[node], bench_units[node], texts.bench_count, texts.bench_kind,
                         node)
    producer = earliest_producers(npu)[i] if len(i) else np.zeros(0, np.int64)
    made = np.maximum(producer, 0)
    has_out = np.bincount(node[is_out], minlength=n) > 0
    # made by a compared call before it; a call the bench run holds no data for explains nothing
    fresh = is_in & ~((producer >= 0) & (keys[made] < keys[node]) & (matches.npu_to_bench[made] >= 0) & has_out[made])
    if is_cross_framework(npu, bench):  # positional arguments of API calls pair unreliably across frameworks:
        stats = npu.tensors.stats[i]  # weights (made by no call; a constant's statistics name no maker) count
        constant = stats[:, 0] == stats[:, 1]  # through the modules' named parameters
        uncompared = (producer >= 0) & (matches.npu_to_bench[made] >= 0) & ~constant  # made by a matched call the
        api = npu.nodes.kind[node] == NodeKind.API  # bench run holds no data for: a real input; a Cell's inputs are
        error[fresh & (role == Role.INPUT) & api & ~uncompared] = 0.0  # its forward's arguments, the same in both
    output_error = _node_max(node[is_out], error[is_out], n)
    leaves = compared_leaves(npu, matches, has_out, keys)
    input_error = _context_errors(npu, _node_max(node[is_in], error[is_in], n), output_error, leaves)
    tensor = texts.npu_kind == _TENSOR
    return _Errors(
        node=node, role=role, is_in=is_in, is_out=is_out, error=error, producer=producer, fresh=fresh,
        unit=np.maximum(npu_units, bench_units), has_out=has_out, output_error=output_error,
        input_error=input_error, fresh_error=_node_max(node[fresh & tensor], error[fresh & tensor], n),
        argument_error=_node_max(node[fresh & ~tensor], error[fresh & ~tensor], n), leaves=leaves, inner=inner,
    )


def _growth_margins(npu: DumpGraph, texts: _PairTexts, e: _Errors, tensor_rows: np.ndarray, rule: NoiseRule,
                    reference: ReferenceGrowth | None = None,
                    ) -> tuple[np.ndarray, np.ndarray, tuple[Calibration, ...], np.ndarray, np.ndarray]:
    """Steps 3-4: per node the summed values n, the growth limit G, the calibration, the margin, and where a
    reference run measured G."""
    reduction = np.maximum(_backward_reductions(npu, texts.npu_count, e.node, e.is_in, e.is_out),
                           _normalized_lengths(npu, tensor_rows, e.node, e.is_out))
    base = e.input_error + e.unit * np.sqrt(reduction) + LIBRARY_ERROR
    with np.errstate(invalid="ignore"):  # inf / inf (an overflowed input and output) is NaN: no growth measured
        growth = e.output_error / base
    communication = communication_calls(npu)
    switching = _switching_backward(npu)
    leaves = e.leaves
    growth_limit, calibration = _calibrate(npu, leaves[~(communication | switching)[leaves]], growth, rule)
    with np.errstate(divide="ignore", invalid="ignore"):  # the precision bounds what calibration may allow
        bound = np.maximum(1.0, noise_ceiling(np.maximum(e.unit, LIBRARY_ERROR)) / base)
    growth_limit = np.where(np.isnan(growth_limit), growth_limit, np.minimum(growth_limit, bound))
    growth_limit, measured = _measured_limits(growth_limit, leaves[~(communication | switching)[leaves]], bound,
                                              reference)
    growth_limit[leaves[communication[leaves]]] = 1.0  # its other inputs come from other ranks
    growth_limit[leaves[switching[leaves]]] = np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        return reduction, growth_limit, calibration, growth / growth_limit, measured


def _measured_limits(growth_limit: np.ndarray, calibrated: np.ndarray, bound: np.ndarray,
                     reference: ReferenceGrowth | None) -> tuple[np.ndarray, np.ndarray]:
    """The growth limit with a reference run's measurement where it has one (core/reference.py), and per node
    whether it has.

    At a `calibrated` leaf the reference measured (``g_ref``), the limit is ``max(1, g_ref)`` instead of the run's
    percentile: the reference's own output error at that call scaled to the npu run's input error, at least one
    rounding. It stays within `bound`, what the precision can explain: a reference that departs from the bench
    run by more than rounding (a bug of its own) measures no more noise than the precision can make.
    """
    measured = np.zeros(len(growth_limit), bool)
    if reference is None:
        return growth_limit, measured
    rows = calibrated[np.isfinite(reference.growth[calibrated])]
    measured[rows] = True
    limit = growth_limit.copy()
    limit[rows] = np.minimum(np.maximum(reference.growth[rows], 1.0), bound[rows])
    return limit, measured


def _fresh_margins(npu: DumpGraph, pairs: TensorPairs, e: _Errors, texts: _PairTexts) -> tuple[np.ndarray, float]:
    """Step 5's fresh inputs: per node the margin of its weights, data and arguments over their noise,
    and the largest parameter drift (in units of the coarsest u)."""
    n = len(npu)
    coarsest = float(e.unit.max(initial=UNIT_ROUNDOFF["float64"]))
    earlier = _noise_before(e.leaves, e.output_error, n, npu.nodes.direction)
    drift = _drift_of_others(npu, e.node, e.error, trained_parameters(npu)[pairs.npu])
    if npu.info.step != 0 and np.any(texts.npu_unit != texts.bench_unit):  # mixed precision: weights updated
        drift = np.maximum(drift, _gradient_error_of_module(npu, e.output_error))
    weights = np.maximum.reduce([np.full(n, coarsest), drift, earlier])
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = np.maximum(np.where(e.fresh_error > 0, e.fresh_error / weights, 0.0),
                            np.where(e.argument_error > 0, e.argument_error / np.maximum(coarsest, earlier), 0.0))
    return margin, float(drift[e.leaves].max(initial=0.0) / coarsest)


def compared_leaves(npu: DumpGraph, matches: MatchTable, has_out: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Rows of the matched calls with compared outputs and no matched data below them, in execution order.

    These are the innermost compared calls (API calls, or modules in a module-level dump). A module whose
    calls inside are all unmatched (a MindSpore Dense's Primitive calls against one PyTorch linear, with no
    table pairing them) stands for them, and so does the module of a fused group compared through it.
    """
    nodes = npu.nodes
    matched = matches.npu_to_bench >= 0
    has_data = nodes.has_data & (nodes.kind != NodeKind.GROUP)
    data_below = np.zeros(len(npu), bool)
    parent = nodes.parent
    for rows in reversed(node_levels(npu)[1:]):
        np.logical_or.at(data_below, parent[rows], (has_data[rows] & matched[rows]) | data_below[rows])
    leaf = has_data & ~data_below & matched
    for group in matches.groups:
        if group.via >= 0:
            leaf[list(group.npu)] = False
            leaf[group.via] = True
    rows = np.flatnonzero(leaf & has_out)
    return rows[np.argsort(keys[rows], kind="stable")]


def pair_errors(npu: DumpGraph, bench: DumpGraph, pairs: TensorPairs, npu_unit: np.ndarray,
                bench_unit: np.ndarray) -> np.ndarray:
    """The noise model's error of every tensor pair (step 1 of the module docstring).

    `npu_unit` and `bench_unit` are each side's unit roundoff per pair (at the pair's node), used to
    recognise gradients that are zero in theory.
    """
    return _pair_errors(npu, bench, pairs, npu_unit, bench_unit, *_shape_columns(bench.tensors.shape, pairs.bench))


def _pair_errors(npu: DumpGraph, bench: DumpGraph, pairs: TensorPairs, npu_unit: np.ndarray, bench_unit: np.ndarray,
                 count: np.ndarray, shape: np.ndarray, node: np.ndarray | None = None) -> np.ndarray:
    """`pair_errors` with the bench tensors' element counts and shape kinds (`_shape_columns`) and, when the caller
    has them, the npu node row of each pair (int64)."""
    nt, bt = npu.tensors, bench.tensors
    i, j = pairs.npu, pairs.bench
    npu_beyond, bench_beyond = summed_beyond_range(npu), summed_beyond_range(bench)  # a Norm summed beyond float16's
    # range: not recorded; taken a block of pairs at a time (whole (n, 4) masks were 46 MB more at the model's peak)
    compiled = stat_errors(nt.stats, recorded_statistics(npu), bt.stats, recorded_statistics(bench), i, j, count)
    error, first_stat, magnitude_a, magnitude_b = compiled if compiled is not None else by_blocks(
        lambda i, j, count: _stat_errors(nt.stats[i], bt.stats[j], nt.present[i] & ~npu_beyond[i] & bt.present[j]
                                         & ~bench_beyond[j], count),
        i, j, count)
    scalar = shape == _SCALAR
    if is_cross_framework(npu, bench):  # argument conventions differ (MindSpore's BatchNorm momentum is 1 - torch's)
        error[scalar | (shape == _OTHER)] = 0.0
    else:
        error[scalar] = first_stat[scalar]
        error = np.where(_values_differ(npu, bench, pairs, shape), np.inf, error)
    if npu.info.task == "md5":  # a checksum difference the statistics do not show: at least one rounding
        md5 = pairs.metrics["md5_diff"] == 1.0
        error = np.where(md5 & (error == 0), np.maximum(npu_unit, bench_unit), error)
    euclidean = pairs.metrics.get("euc_rel")
    if euclidean is not None:
        error = np.fmax(error, euclidean)
    error[_zero_in_theory(npu, i, magnitude_a, magnitude_b, npu_unit, bench_unit, shape, node)] = 0.0
    return error


_TENSOR, _SCALAR, _OTHER = 0, 1, 2  # what a shape text says a value is: "[2, 3]" a tensor, "scalar", "" another value


def _stat_errors(a: np.ndarray, b: np.ndarray, present: np.ndarray,
                 count: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per pair of npu and bench statistics (`a`, `b`; `count`: the bench tensor's elements): the largest
    statistic error, the error of the first statistic (Max: a scalar's value), and each side's magnitude.

    Each statistic's error is ``|a - b| / scale`` (inf for a difference over a zero scale, 0 for none); a
    non-finite value on either side gives inf unless both sides hold the same one; 0 where a statistic is
    not recorded. Computed in place on one (n, 4) array: the rare cases are fixed on their rows only.
    """
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        per_stat = np.subtract(a, b)
        np.abs(per_stat, out=per_stat)
        magnitude_a, magnitude_b = _magnitude(a, present), _magnitude(b, present)
        norm = np.abs(b[:, 3])
        rms = np.where(count > 0, norm / np.sqrt(np.maximum(count, 1)), magnitude_b)
        scale = np.empty((len(b), 4), np.result_type(magnitude_b, rms, norm))
        scale[:, 0], scale[:, 1], scale[:, 2], scale[:, 3] = magnitude_b, magnitude_b, rms, norm
        no_scale = ~(scale > 0)
        np.divide(per_stat, scale, out=per_stat)
        if no_scale.any():  # a difference over a zero (or NaN) scale: inf, none: 0
            diff = np.abs(a[no_scale] - b[no_scale])
            per_stat[no_scale] = np.where(diff > 0, np.inf, 0.0)
    mark_nonfinite(per_stat, a, b)
    np.copyto(per_stat, 0.0, where=~present)
    return rows_max(per_stat), per_stat[:, 0], magnitude_a, magnitude_b


def _magnitude(stats: np.ndarray, present: np.ndarray) -> np.ndarray:
    """max(|Max|, |Min|) over the recorded finite ones, 0 when none."""
    high, low = np.abs(stats[:, 0]), np.abs(stats[:, 1])
    high[~(present[:, 0] & np.isfinite(high))] = 0.0
    low[~(present[:, 1] & np.isfinite(low))] = 0.0
    return np.maximum(high, low, out=high)


_DIMS = re.compile(r"-?\d+")



def element_count(shape: str) -> float:
    """Elements of a tensor from its shape text; 0 when the text is not a tensor shape.

    >>> element_count("[4, 16, 64]"), element_count("[]"), element_count("scalar")
    (4096.0, 1.0, 0.0)
    """
    if not shape.startswith("["):
        return 0.0
    return float(np.prod([float(d) for d in _DIMS.findall(shape)], dtype=np.float64))  # a 400-digit dim: inf


def _values_differ(npu: DumpGraph, bench: DumpGraph, pairs: TensorPairs, shape: np.ndarray) -> np.ndarray:
    """Non-numeric arguments (strings, None, slices ...) whose text differs, dtypes and devices left out
    (`shape`: per pair, the kind of value the bench shape says)."""
    other = shape == _OTHER
    if not other.any():
        return other
    k = np.flatnonzero(other)
    a = string_column(npu.tensors.value, pairs.npu[k])
    b = string_column(bench.tensors.value, pairs.bench[k])
    kind = string_column(bench.tensors.dtype, pairs.bench[k])
    context = np.isin(kind, list(CONTEXT_VALUE_TYPES))
    other[k] = (a != b) & ~context & (a != "") & (b != "")
    return other


def _zero_in_theory(npu: DumpGraph, rows: np.ndarray, magnitude_a: np.ndarray, magnitude_b: np.ndarray,
                    npu_unit: np.ndarray, bench_unit: np.ndarray, shape: np.ndarray,
                    node: np.ndarray | None = None) -> np.ndarray:
    """Gradient pairs that are numerically zero on both sides (a bias gradient in front of a normalisation).

    A value below ``sqrt(u)`` of the largest gradient of the same backward call (for parameter
    gradients, also of the module's incoming gradients) keeps at most half of its digits through a
    rounding of that size: a cancellation, compared as zero when both sides, each at its own
    precision, are that small.
    """
    n = len(npu)
    node = npu.tensors.node[rows].astype(np.int64) if node is None else node
    scale = _node_max(node, magnitude_b, n)
    grads = np.flatnonzero(npu.nodes.kind == NodeKind.PARAM_GRAD)
    parents = npu.nodes.parent[grads]
    scale[grads] = np.maximum(scale[grads], scale[parents])
    # the magnitudes are compared at the backward tensor pairs only (about half of a training step's)
    k = np.flatnonzero((npu.nodes.direction[node] == Direction.BACKWARD) & (shape == _TENSOR))
    s, b = scale[node[k]], magnitude_b[k]
    zero = np.zeros(len(rows), bool)
    zero[k] = (b < s) & (b <= np.sqrt(bench_unit[k]) * s) & (magnitude_a[k] <= np.sqrt(npu_unit[k]) * s)
    return zero



def _chain_units(order: np.ndarray, node: np.ndarray, unit_pair: np.ndarray, n: int,
                 floor: float = UNIT_ROUNDOFF["float64"], inner: np.ndarray | None = None) -> np.ndarray:
    """u per node: the coarsest unit roundoff of any pair of a call at or before it in execution order
    (`order`: the rows in execution order), or of the unmatched calls such a call stands for (`inner`), at
    least `floor`."""
    own = _node_max(node, unit_pair, n)
    if inner is not None:
        np.maximum(own, inner, out=own)
    chained = np.empty(n)
    chained[order] = np.maximum.accumulate(own[order]) if n else own
    return np.maximum(chained, max(floor, UNIT_ROUNDOFF["float64"]))


def _inner_precision(npu: DumpGraph, pairs: TensorPairs) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per npu node, the coarsest float precision of the calls below it that it is compared for: the unit roundoff
    and the dtype (a code into the returned names, -1 for none) of every tensor of a call without compared tensors
    (unmatched, or a member of a fused group), down to the next compared call. A MindSpore Dense under mixed
    precision casts to float16 inside (its Primitive calls) and back: its own inputs and outputs say float32, the
    rounding it did was float16's."""
    n = len(npu)
    unit, code = np.zeros(n), np.full(n, -1, np.int64)
    compared = np.zeros(n, bool)
    compared[npu.tensors.node[pairs.npu]] = True
    owner = np.where(compared, np.arange(n), -1)  # the nearest compared call at or above each row (-1: none)
    parent = npu.nodes.parent
    for rows in node_levels(npu)[1:]:
        up = rows[~compared[rows]]
        owner[up] = owner[parent[up]]
    tensors = npu.tensors
    stands_for = np.zeros(n + 1, bool)  # a compared call with no compared call below it stands for what is below
    stands_for[:n] = compared
    np.logical_and.at(stands_for, owner[parent[compared & (parent >= 0)]], False)
    inner = ~compared[tensors.node] & stands_for[owner[tensors.node]]
    if not inner.any():
        return unit, code, []
    codes, names = string_codes(tensors.dtype)
    table = _unit_table(names)
    at, c = owner[tensors.node[inner]], codes[inner]
    order = np.argsort(table[c], kind="stable")  # finest first: the coarsest is written last
    unit[at[order]] = table[c[order]]
    code[at[order]] = c[order]
    return unit, np.where(unit > 0, code, -1), names


def _trained_floor(graph: DumpGraph, unit_pair: np.ndarray) -> float:
    """The unit roundoff every value of a step after the first may carry: the weights were updated with
    gradients computed at the run's coarsest precision, so even the first call (an embedding run in float32
    under autocast) reads values that carry its rounding. The first step starts from the same weights."""
    return float(unit_pair.max(initial=0.0)) if graph.info.step not in (None, 0) else 0.0


def _node_max(node: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n)
    np.maximum.at(out, node, np.where(np.isnan(values), np.inf, values))
    return out


def _context_errors(npu: DumpGraph, own_input: np.ndarray, output_error: np.ndarray,
                    leaves: np.ndarray) -> np.ndarray:
    """Per node, the largest error of what it computed from: its inputs; for a backward call also its
    forward call's inputs and outputs; for parameter gradients those of the module's backward call.
    (Computed for the compared leaves and the parents of parameter gradients.)"""
    grads = np.flatnonzero(npu.nodes.kind == NodeKind.PARAM_GRAD)
    twin = forward_twins(npu, np.concatenate([leaves, npu.nodes.parent[grads]]))
    context = own_input.copy()
    backward = np.flatnonzero(twin >= 0)
    context[backward] = np.maximum.reduce([own_input[backward], own_input[twin[backward]],
                                           output_error[twin[backward]]])
    parents = npu.nodes.parent[grads]
    ok = parents >= 0
    context[grads[ok]] = np.maximum(context[grads[ok]], context[parents[ok]])
    return context



_DIRECTIONS = {Direction.FORWARD: "forward", Direction.BACKWARD: "backward", Direction.NONE: "none"}
_KINDS = {NodeKind.API: "api", NodeKind.MODULE: "module", NodeKind.PARAM_GRAD: "parameter gradient"}


def _backward_reductions(npu: DumpGraph, count: np.ndarray, node: np.ndarray, is_in: np.ndarray,
                         is_out: np.ndarray) -> np.ndarray:
    """Per node, how many incoming values a backward output element sums at most (1 in forward).

    A parameter gradient sums over every token or pixel of the batch (a bias gradient of a linear
    over batch x sequence), and some kernels accumulate such sums in the gradient's own half
    precision: the rounding of n terms grows like sqrt(n) u. Estimated as the largest input (for a
    parameter gradient, the module's incoming gradient) over the output's element count.
    """
    n = len(npu)
    incoming = _node_max(node[is_in], count[is_in], n)
    grads = np.flatnonzero(npu.nodes.kind == NodeKind.PARAM_GRAD)
    incoming[grads] = np.maximum(incoming[grads], incoming[npu.nodes.parent[grads]])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(count > 0, incoming[node] / count, 1.0)
    backward = npu.nodes.direction[node] == Direction.BACKWARD
    return np.maximum(_node_max(node[is_out & backward], ratio[is_out & backward], n), 1.0)


def _normalized_lengths(npu: DumpGraph, tensor_rows: np.ndarray, node: np.ndarray, is_out: np.ndarray) -> np.ndarray:
    """Per node, the values the backward call of a `NORMALIZING_OPS` op sums along its normalised axis, read from
    the shape of its first compared output (`tensor_rows`: each pair's npu tensor row); 1 for every other call."""
    out = np.ones(len(npu))
    codes, names = string_codes(npu.nodes.op)
    axis = [NORMALIZING_OPS.get(re.sub(r"[^a-z0-9]", "", name.lower())) for name in names] + [None]
    normalizing = np.array([a is not None for a in axis])[codes] & (npu.nodes.direction == Direction.BACKWARD)
    if not normalizing.any():
        return out
    ks = np.flatnonzero(is_out & normalizing[node])
    rows = node[ks].astype(np.int64)
    shape_code, shapes = string_codes(npu.tensors.shape)
    last = np.array([a == "last" for a in axis])[codes[rows]]
    # the length is a function of the shape text and the axis: computed once per distinct pair of them
    distinct, at = np.unique(shape_code[tensor_rows[ks]].astype(np.int64) * 2 + last, return_inverse=True)
    lengths = [_normalized_length(shapes[key >> 1], bool(key & 1)) for key in distinct.tolist()]
    length = np.array([np.nan if v is None else v for v in lengths] + [np.nan])[at.reshape(-1)]
    has_dims = np.array([v is not None for v in lengths] + [False])[at.reshape(-1)]
    # per call, its first output whose shape gives a length above 1, else the last one whose shape gives one
    rows, length = rows[has_dims], length[has_dims]
    ends = len(rows) - 1 - np.unique(rows[::-1], return_index=True)[1]
    out[rows[ends]] = length[ends]
    above = length > 1
    firsts = np.unique(rows[above], return_index=True)[1]
    out[rows[above][firsts]] = length[above][firsts]
    return out


def _normalized_length(shape: str, last: bool) -> float | None:
    """The values a normalisation sums over in a tensor of `shape` (its text): along the last axis (`last`), or
    along every axis but the channels (axis 1); None when the text holds no dimension."""
    dims = [float(d) for d in _DIMS.findall(shape)]
    if not dims:
        return None
    if last:
        return dims[-1]
    return float(np.prod(dims)) / (dims[1] if len(dims) > 1 and dims[1] > 0 else 1.0)


def _switching_backward(npu: DumpGraph) -> np.ndarray:
    """Per node, True for the backward call of a `SWITCHING_OPS` op."""
    codes, names = string_codes(npu.nodes.op)
    switching = np.array([re.sub(r"[^a-z0-9]", "", name.lower()) in SWITCHING_OPS for name in names] + [False])
    return switching[codes] & (npu.nodes.direction == Direction.BACKWARD) if len(codes) else np.zeros(0, bool)


def _calibrate(npu: DumpGraph, leaves: np.ndarray, growth: np.ndarray,
               rule: NoiseRule) -> tuple[np.ndarray, tuple[Calibration, ...]]:
    """The growth limit G per compared leaf (step 4 of the module docstring)."""
    limit = np.full(len(npu), np.nan)
    calibration = []
    direction, kind = npu.nodes.direction[leaves], npu.nodes.kind[leaves]
    for d, d_name in _DIRECTIONS.items():
        in_direction = direction == d
        if not in_direction.any():
            continue
        direction_limit = _limit(growth[leaves[in_direction]], rule)
        for k in sorted_unique(kind[in_direction]).tolist():
            rows = leaves[in_direction & (kind == k)]
            own = len(rows) >= rule.min_samples
            value = _limit(growth[rows], rule) if own else direction_limit
            limit[rows] = value
            calibration.append(Calibration(d_name, _KINDS.get(NodeKind(k), NodeKind(k).name.lower())
                                           + ("" if own else f" (with all {d_name} calls)"), len(rows), value))
    return limit, tuple(calibration)


def _limit(values: np.ndarray, rule: NoiseRule) -> float:
    finite = values[np.isfinite(values)]
    if len(finite) < rule.min_samples:
        return 1.0
    # "lower": an order statistic, not an interpolation towards the largest value (a bug, in a small group)
    return max(1.0, float(np.quantile(finite, rule.quantile, method="lower")))


def _drift_of_others(npu: DumpGraph, node: np.ndarray, error: np.ndarray, param: np.ndarray) -> np.ndarray:
    """Per node, the largest drift of the trained parameters (`param`: per pair) of every *other* module
    (0 when the dump records none).

    After an optimizer step every weight carries the previous step's noise, some far more than others; a
    weight that is wrong drifts further than all the rest. A module called several times (micro-steps)
    is one module.
    """
    n = len(npu)
    out = np.zeros(n)
    if not param.any():
        return out
    if npu.nodes.kind[0] == NodeKind.MODULE:  # every slot of `drift` may hold a module (no root above them)
        owner = _module_identity(npu)
        drift = np.zeros(int(owner.max(initial=0)) + 1)
        np.maximum.at(drift, owner[node[param]], np.where(np.isnan(error[param]), np.inf, error[param]))
        order = np.argsort(-drift, kind="stable")
        top, second = drift[order[0]], drift[order[1]] if len(order) > 1 else 0.0
        return np.where(owner == order[0], second, top)
    # The same as above for a run with a root: the root owns no module, so some owner has no drift (0), and
    # only the modules that own a parameter need their names; the others' rows are found by the top one's.
    owners = _module_of(npu, node[param])
    key, rows = _owner_keys(npu, owners)
    drift = np.zeros(len(rows))
    np.maximum.at(drift, key, np.where(np.isnan(error[param]), np.inf, error[param]))
    ranked = np.sort(drift)[::-1]
    top, second = ranked[0], ranked[1] if len(ranked) > 1 else 0.0
    if not top > second:  # a tie: every row gets the same
        return np.full(n, top)
    at_top = np.zeros(n, bool)
    at_top[_rows_of_owner(npu, int(rows[int(np.argmax(drift))]))] = True
    return np.where(at_top[_module_of(npu, np.arange(n))], second, top)


def _module_name(node_id: str) -> str:
    """The name every call of a module shares (``Module.fc.Linear`` of ``Module.fc.Linear.forward.0``)."""
    return node_id.rpartition(".forward")[0] or node_id


def _owner_keys(npu: DumpGraph, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_module_identity` for the owner rows given only: a key per item of `owners` (equal for the calls of one
    module) and, per key, one of its rows."""
    distinct, at = np.unique(owners, return_inverse=True)
    is_module = npu.nodes.kind[distinct] == NodeKind.MODULE
    ids = npu.nodes.ids
    names = [_module_name(ids[r]) if m else r for r, m in zip(distinct.tolist(), is_module.tolist())]
    table: dict[str | int, int] = {}
    code = np.array([table.setdefault(name, len(table)) for name in names], np.int64)
    first = np.zeros(len(table), np.int64)
    first[code[::-1]] = distinct[::-1]
    return code[at.reshape(-1)], first


def _rows_of_owner(npu: DumpGraph, row: int) -> np.ndarray:
    """The owner rows with `row`'s `_module_identity`: the calls of its module (`row` alone when not a module)."""
    nodes = npu.nodes
    if nodes.kind[row] != NodeKind.MODULE:
        return np.array([row])
    name = _module_name(nodes.ids[row])
    modules = np.flatnonzero(nodes.kind == NodeKind.MODULE)
    ids = list(map(nodes.ids.__getitem__, modules.tolist()))
    maybe = np.flatnonzero(np.fromiter(map(str.startswith, ids, repeat(name)), bool, len(ids)))  # a name is a prefix
    return modules[[k for k in maybe.tolist() if _module_name(ids[k]) == name]]


def _module_identity(npu: DumpGraph) -> np.ndarray:
    """Per node, an id of the module it belongs to (a module's own, or an API call's parent's), the same
    for every call of that module (``Module.fc.Linear.forward.0`` and ``.forward.1``)."""
    ids, kind, parent = npu.nodes.ids, npu.nodes.kind, npu.nodes.parent
    is_module = kind == NodeKind.MODULE
    module = np.where(is_module, np.arange(len(npu)), np.maximum(parent, 0))
    identity = np.arange(len(npu)) + len(npu)  # rows that are no module's: each its own
    rows = np.flatnonzero(is_module)
    names = list(map(_module_name, map(ids.__getitem__, rows.tolist())))
    identity[rows] = string_codes(names)[0]  # numbered in order of first appearance
    return identity[module]



def _gradient_error_of_module(npu: DumpGraph, output_error: np.ndarray) -> np.ndarray:
    """Per node, the error of its module's parameter gradients in this run (0 when none).

    A weight that started at zero (a bias, a norm's shift) is after a few steps mostly accumulated
    updates: its relative drift is its gradients' relative error, which the backward pass shows. Used
    in mixed-precision runs after the first step (step 0, and an exact rerun, has no drift to explain).
    Matched by name: ``Module.bn1.BatchNorm2d.parameters_grad.0`` belongs to ``Module.bn1.BatchNorm2d``.
    """
    ids = npu.nodes.ids
    grads = np.flatnonzero(npu.nodes.kind == NodeKind.PARAM_GRAD)
    by_module: dict[str, float] = {}
    for row in grads.tolist():
        name = ids[row].rpartition(".parameters_grad")[0]
        by_module[name] = max(by_module.get(name, 0.0), float(output_error[row]))
    out = np.zeros(len(npu))
    if not by_module:
        return out
    modules = np.flatnonzero(npu.nodes.kind == NodeKind.MODULE)
    for row in modules.tolist():
        name = ids[row].rpartition(".forward")[0]
        if name in by_module:
            out[row] = by_module[name]
    owner = _module_of(npu, np.arange(len(npu)))
    return np.maximum(out, out[owner])


def _module_of(npu: DumpGraph, rows: np.ndarray) -> np.ndarray:
    """The row itself for a module, else its parent (an API call's parameters are its module's)."""
    kind = npu.nodes.kind[rows]
    return np.where(kind == NodeKind.MODULE, rows, np.maximum(npu.nodes.parent[rows], 0))


def _noise_before(leaves: np.ndarray, output_error: np.ndarray, n: int, direction: np.ndarray) -> np.ndarray:
    """Per node, the largest output error of the compared leaves before it in execution order (0 for
    the first): the noise an input computed outside the dump (a gradient summed by autograd) may carry.
    A forward call (also one run during the backward pass: a recomputed block) computes from forward
    values only, so only the forward calls before it count for it."""
    earlier = np.zeros(n)
    if len(leaves) < 2:
        return earlier
    errors = np.where(np.isfinite(output_error[leaves]), output_error[leaves], 0.0)
    forward = direction[leaves] == Direction.FORWARD
    running = np.maximum.accumulate(errors)
    running_forward = np.maximum.accumulate(np.where(forward, errors, 0.0))
    earlier[leaves[1:]] = np.where(forward[1:], running_forward[:-1], running[:-1])
    return earlier


def _shape_changes(texts: _PairTexts, node: np.ndarray, is_out: np.ndarray, n: int) -> np.ndarray:
    a, b = texts.npu_count, texts.bench_count
    changed = is_out & (a != b) & (a > 0) & (b > 0)  # a view of the same elements ([72, 96] vs [3, 24, 96]) is not
    out = np.zeros(n, bool)
    out[node[changed]] = True
    return out


GRADIENT_SCOPE = re.compile(r"(?:^|/)[Gg]radients(?:/|$)")
"""A kernel of the backward pass in a graph dump, whose ops have no direction: MindSpore's ``Gradients/...`` and
TensorFlow's ``gradients/...`` scopes."""


def origin_margins(npu: DumpGraph, bench: DumpGraph, rule: NoiseRule, rows: np.ndarray | None = None) -> np.ndarray:
    """Per npu node (of `rows`, all by default), the margin beyond which it is an origin: ``rule.tensor_origin_margin``
    outside the backward pass when both runs hold real tensors, ``rule.origin_margin`` everywhere else
    (`NoiseRule`). A graph dump's op (no direction) is in the backward pass when a `GRADIENT_SCOPE` holds it."""
    rows = np.arange(len(npu)) if rows is None else np.asarray(rows, dtype=np.int64)
    beyond = np.full(len(rows), rule.origin_margin)
    if npu.info.task == "tensor" and bench.info.task == "tensor":
        direction = npu.nodes.direction[rows]
        forward = direction == Direction.FORWARD
        undirected = np.flatnonzero(direction == Direction.NONE)
        forward[undirected] = [GRADIENT_SCOPE.search(npu.nodes.ids[row]) is None for row in rows[undirected].tolist()]
        beyond[forward] = rule.tensor_origin_margin
    return beyond


def _origins(npu: DumpGraph, leaves: np.ndarray, margin: np.ndarray, fresh_margin: np.ndarray,
             output_error: np.ndarray, shape_changed: np.ndarray, overflow: np.ndarray | None, beyond: np.ndarray,
             compared: np.ndarray) -> np.ndarray:
    """Per node, True for an origin: a leaf beyond the noise (`origin_margins`), or the innermost compared node
    whose outputs change their element count or overflow from finite inputs (a module's outputs too: no noise
    explains it)."""
    n = len(npu)
    with np.errstate(invalid="ignore"):
        flagged = (margin > beyond) | ((fresh_margin > beyond) & (output_error > 0))
    origin = np.zeros(n, bool)
    origin[leaves] = flagged[leaves]
    hard = shape_changed.copy()
    if overflow is not None:  # an inf the bench run has as well (a mask of -inf before a softmax) is no difference
        hard |= (overflow == OverflowLevel.CRITICAL) & (output_error > 0)
    hard &= compared
    below = np.zeros(n, bool)
    parent = npu.nodes.parent
    for rows in reversed(node_levels(npu)[1:]):
        np.logical_or.at(below, parent[rows], hard[rows] | below[rows])
    return origin | (hard & ~below)


def _one_per_cause(npu: DumpGraph, origin: np.ndarray, by_growth: np.ndarray, end: np.ndarray, keys: np.ndarray,
                   e: _Errors) -> np.ndarray:
    """`origin` without the calls after the first origin that are origins by their growth alone (`by_growth`)
    while their inputs already carry more error than the noise before it, or were made by a call the first
    origin's difference reached (a gradient flowing back from it).

    Statistics see only part of an input's error (a perturbation orthogonal to a tensor barely moves its
    norm), so a call downstream of a difference shows more "growth" than rounding gives it: that is the
    first origin's difference coming to light, not a cause of its own. Such a call keeps being an origin
    when its weights, data or arguments differ, its shape changes or it overflows from finite inputs.
    """
    origins = np.flatnonzero(origin)
    if len(origins) < 2:
        return origin
    first_row = int(origins[np.argmin(end[origins])])
    first = float(end[first_row])
    level = _level_before(e.leaves, end, first, e.output_error, e.unit)
    leaves = e.leaves
    after = (end > first) | (keys >= keys[first_row])  # the first origin's calls inside it too
    differing = origin | (after & (e.output_error > level))  # what the first origin's difference reached
    differing = _reached(npu, differing, keys)
    made = e.is_in & (e.producer >= 0)
    fed = np.zeros(len(origin), bool)  # an input made by such a call: its difference, whatever its statistics show
    fed[e.node[made][differing[e.producer[made]] & (keys[e.producer[made]] < keys[e.node[made]])]] = True
    fed |= _gradients_after(differing, keys, npu.nodes.direction, npu.nodes.micro_step)  # autograd sums them
    carried = leaves[(end[leaves] > first) & by_growth[leaves] & ((e.input_error[leaves] > level) | fed[leaves])]
    kept = origin.copy()
    kept[carried] = False
    return kept


def _reached(npu: DumpGraph, differing: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """`differing` with every call that took an input from a differing call, and the calls after those in turn.

    Statistics see only part of an input's error: a causal mask of -1e4 added to attention scores hides their
    difference in the sum's statistics, and a call whose outputs were not compared (a MindSpore amp cast cell)
    shows none; the difference still flows on to the calls that read them. Each round follows one more step of
    the data flow, so the rounds are as many as the longest such hidden chain."""
    t = npu.tensors
    producer = earliest_producers(npu)
    rows = np.flatnonzero(is_input(t.role) & (producer >= 0))
    rows = rows[keys[producer[rows]] < keys[t.node[rows]]]
    made_by, reader = producer[rows], t.node[rows]
    out = differing.copy()
    while True:
        reached = reader[out[made_by] & ~out[reader]]
        if not len(reached):
            return out
        out[reached] = True


def _gradients_after(differing: np.ndarray, keys: np.ndarray, direction: np.ndarray, micro: np.ndarray) -> np.ndarray:
    """Per node, True for a backward call that runs after a differing call of its micro-step: the gradients it
    receives are sums autograd made of what ran before it, so they carry that difference."""
    micro = micro.astype(np.int64)
    start = np.full(int(micro.max(initial=0)) + 1, np.inf)
    rows = np.flatnonzero(differing)
    np.minimum.at(start, micro[rows], keys[rows])
    return (direction == Direction.BACKWARD) & (keys > start[micro])


def _level_before(leaves: np.ndarray, end: np.ndarray, first: float, output_error: np.ndarray,
                  unit: np.ndarray) -> float:
    """The largest output error of the leaves that end before execution key `first`, at least their u (`end`: the
    subtree end keys; a module standing for its unmatched calls ends with the last of them)."""
    before = leaves[end[leaves] < first]
    floor = float(unit[leaves].max(initial=0.0))
    return max(float(output_error[before].max(initial=0.0)), floor)


def _roles(keys: np.ndarray, end: np.ndarray, leaves: np.ndarray, origin: np.ndarray, compared: np.ndarray,
           output_error: np.ndarray, unit: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Role per node, the origins in the order their outputs appear, and the noise level (the largest
    output error of the leaves before the first origin, at least u)."""
    role = np.full(len(keys), NodeRole.NOT_COMPARED, np.int8)
    role[compared] = NodeRole.WITHIN_NOISE
    origins = np.flatnonzero(origin)
    origins = origins[np.argsort(end[origins], kind="stable")]
    if not len(origins):
        return role, origins, _level_before(leaves, end, np.inf, output_error, unit)
    first = end[origins[0]]
    level = _level_before(leaves, end, first, output_error, unit)
    role[compared & (end >= first) & (output_error > level)] = NodeRole.PROPAGATED
    role[origins] = NodeRole.ORIGIN
    return role, origins, level


def _subtree_end_keys(npu: DumpGraph, keys: np.ndarray) -> np.ndarray:
    """The latest execution key within each node's subtree (a module's outputs exist once it ends)."""
    end = keys.copy()
    parent = npu.nodes.parent
    for rows in reversed(node_levels(npu)[1:]):
        np.maximum.at(end, parent[rows], end[rows])
    return end


def _precision(npu: DumpGraph, pairs: TensorPairs, texts: _PairTexts, is_out: np.ndarray, leaves: np.ndarray,
               keys: np.ndarray, first: int, output_error: np.ndarray,
               inner: tuple[np.ndarray, np.ndarray, list[str]]) -> tuple[Precision, np.ndarray]:
    """The comparison's precision, and per npu node the index of its dtype pair in it (-1: none).

    A node's dtype pair is that of its coarsest compared float output (npu dtype, bench dtype); its npu dtype is
    the coarser one of the unmatched calls it stands for (`inner`, `_inner_precision`) where they rounded coarser.
    """
    node = npu.tensors.node[pairs.npu[is_out]]
    npu_names, bench_names = texts.npu_dtypes, texts.bench_dtypes
    width = max(len(bench_names), 1)
    names = [(normalize_dtype(npu_names[c // width]), normalize_dtype(bench_names[c % width]))
             for c in range(len(npu_names) * len(bench_names))]  # none when a run holds no tensor
    unit = np.array([max(unit_roundoff(a), unit_roundoff(b)) for a, b in names] + [0.0])
    combined = texts.npu_dtype[is_out].astype(np.int64) * width + texts.bench_dtype[is_out]
    floats = unit[combined] > 0
    order = np.lexsort((-unit[combined[floats]], node[floats]))  # per node, its coarsest pair first
    owners, picked = node[floats][order], combined[floats][order]
    head = np.ones(len(owners), bool)
    head[1:] = owners[1:] != owners[:-1]
    owners, picked = owners[head], picked[head]
    inner_unit, inner_code, inner_names = inner
    coded = {pair: code for code, pair in enumerate(names)}
    for k in np.flatnonzero(inner_unit[owners] > unit[picked]).tolist():  # it rounded coarser inside
        pair = (normalize_dtype(inner_names[inner_code[owners[k]]]), names[picked[k]][1])
        if pair not in coded:
            coded[pair] = len(names)
            names.append(pair)
        picked[k] = coded[pair]
    counts: dict[tuple[str, str], int] = {}
    codes, per_code = np.unique(picked, return_counts=True)
    for code, k in zip(codes.tolist(), per_code.tolist()):
        counts[names[code]] = counts.get(names[code], 0) + k
    dtype_pairs = tuple((a, b, k) for (a, b), k in sorted(counts.items(), key=lambda item: -item[1]))
    index = {(a, b): k for k, (a, b, _) in enumerate(dtype_pairs)}
    node_pair = np.full(len(npu), -1, np.int16)
    node_pair[owners] = np.array([index[names[c]] for c in codes.tolist()], np.int16)[np.searchsorted(codes, picked)]
    coarsest = max((max(unit_roundoff(a), unit_roundoff(b)) for a, b, _ in dtype_pairs), default=0.0)
    if any(a != b for a, b, _ in dtype_pairs):
        kind = "mixed precision"
    else:
        before = leaves if first < 0 else leaves[keys[leaves] < keys[first]]
        kind = "exact rerun" if not np.any(output_error[before] > 0) else "same precision"
    return Precision(kind, dtype_pairs, coarsest), node_pair
