"""Where the npu run first departs from the bench run, and why.

The noise model (core/noise.py, docs/noise.md) decides which calls are **origins**: compared leaf
calls whose output error is well beyond what their dtype and their inputs' error explain, or whose
weights, data or arguments differ beyond noise. This module names them in execution order (forward
before backward, micro-step by micro-step) with a cause and the evidence:

* ``overflow`` — the outputs hold inf/NaN or reach the dtype's limit (see core/overflow.py);
* ``shape change`` — an output's shape differs between the runs;
* ``argument differs`` — a non-tensor argument (a scale, an eps, a dim, a flag) differs;
* ``inputs differ`` — a weight or data differs (an input no matched earlier call produced, or one
  made by a call the bench run does not have);
* ``dtype change`` — the npu precision itself explains the error: values beyond its range or below
  its smallest normal number, or a result far smaller than the values it was computed from
  (cancellation). A dtype change alone, as in every call of a mixed-precision run, is context;
* ``communication`` — a communication call's output differs while its local inputs agree: another
  rank sent different data (core/distributed/crossrank.py finds which);
* ``op`` — the inputs agree within noise and the outputs do not.

Each origin reports its margin: its error divided by the noise the model allows it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from graphcmp.core.dataflow import communication_calls, earliest_producers
from graphcmp.core.dtypes import normalize_dtype
from graphcmp.core.hierarchy import execution_keys
from graphcmp.core.noise import LIBRARY_ERROR, NoiseModel, Precision, origin_margins, unit_roundoff
from graphcmp.core.overflow import OVERFLOW_ATTR, OVERFLOW_NAMES, OverflowLevel
from graphcmp.core.readers.naming import argument_name
from graphcmp.core.records import Direction, DumpGraph, NodeKind, Role, TensorTable, is_input, is_output
from graphcmp.core.shards import attribute_rank

if TYPE_CHECKING:
    from graphcmp.core.judge import NodeVerdicts
    from graphcmp.core.matching import MatchTable
    from graphcmp.core.pairing import TensorPairs

__all__ = ["ADVISOR_COSINE", "CAUSES", "Analysis", "Comparison", "Divergence", "DivergenceRule", "Finding",
           "advisor_findings", "analyze", "find_divergence"]

CAUSES = ("overflow", "shape change", "argument differs", "inputs differ", "dtype change", "communication", "op")

_SMALLEST_NORMAL = {"float16": 2.0**-14, "bfloat16": 2.0**-126, "float32": 2.0**-126}
_LARGEST = {"float16": 65504.0, "bfloat16": 3.3895e38, "float32": 3.4028e38}


class Comparison(Protocol):
    """What the analysis reads of a judged comparison (a `CompareReport` is one): both runs, the matches, the
    tensor pairs, the verdicts, the noise model and the npu run's overflow levels."""

    @property
    def npu(self) -> DumpGraph: ...
    @property
    def bench(self) -> DumpGraph: ...
    @property
    def matches(self) -> MatchTable: ...
    @property
    def pairs(self) -> TensorPairs: ...
    @property
    def verdicts(self) -> NodeVerdicts: ...
    @property
    def noise(self) -> NoiseModel: ...
    def overflow_levels(self) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class DivergenceRule:
    """What the divergence report lists (what counts as an origin is `NoiseRule`'s, in core/rules.py).

    Attributes
    ----------
    candidates : int
        How many further origins to report after the first. Default 5.
    """

    candidates: int = 5


@dataclass(frozen=True, slots=True)
class Divergence:
    """One origin of divergence with its evidence.

    `output_error` and `input_error` are the noise model's errors (relative to each tensor's scale),
    `allowed` the output error the model allows the call, `margin` how far beyond it the call is.
    `direction` is the pass the call ran in: a forward call made during the backward pass (a custom autograd
    Function's backward, a recomputed block) is ``backward``. `ranks` lists the ranks a node of a merged parallel
    run came from and `source_id` its id in the
    dump of `rank` (empty for a run of one rank). `call_site` is the user's line that made the call
    (``model.py:26 in forward: x = self.fc(x)``, from stack.json; "" without one) and `summary` the cause in
    one plain sentence with its numbers.
    """

    node: str
    module: str | None
    cause: str
    output_error: float
    input_error: float
    margin: float
    allowed: float
    rank: int | None = None
    step: int | None = None
    micro_step: int = 0
    direction: str = "forward"
    evidence: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    source_id: str = ""
    call_site: str = ""
    summary: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "evidence": list(self.evidence), "ranks": list(self.ranks)}


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of the advisor: what was found, and the node it refers to."""

    kind: str  # first_divergence, first_overflow, precision, reference, unmatched, advisor_* (msaccucmp's three checks)
    level: str  # info, warning, error
    node: str | None
    message: str


@dataclass(frozen=True, slots=True)
class Analysis:
    """The first divergence, further candidates, the first overflow, the advisor's findings and the
    noise the comparison was judged against."""

    first: Divergence | None
    candidates: tuple[Divergence, ...]
    first_overflow: Divergence | None
    findings: tuple[Finding, ...]
    precision: Precision
    noise: dict[str, Any] = field(default_factory=dict)
    rule: DivergenceRule = field(default_factory=DivergenceRule)

    @property
    def exact_rerun(self) -> bool:
        """True when both runs use the same dtypes and every call before the first origin is bit-identical."""
        return self.precision.kind == "exact rerun"

    def to_dict(self) -> dict[str, Any]:
        return {
            "first": self.first.to_dict() if self.first else None,
            "candidates": [c.to_dict() for c in self.candidates],
            "first_overflow": self.first_overflow.to_dict() if self.first_overflow else None,
            "findings": [asdict(f) for f in self.findings],
            "exact_rerun": self.exact_rerun,
            "precision": self.precision.to_dict(),
            "noise": self.noise,
            "rule": asdict(self.rule),
        }


def find_divergence(report: Comparison, rule: DivergenceRule | None = None) -> Divergence | None:
    """The first origin of divergence of a comparison (a `CompareReport`), or None when the runs agree.

    Examples
    --------
    >>> from graphcmp.core.compare import compare_graphs
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> def t(v):
    ...     return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": v, "Min": 0.0,
    ...             "Mean": v / 2, "Norm": v}
    >>> def run(w):
    ...     return parse_msprobe({"data": {
    ...         "Functional.linear.0.forward": {"input_args": [t(1.0), t(w)], "output": [t(2.0 * w)]},
    ...         "Torch.relu.0.forward": {"input_args": [t(2.0 * w)], "output": [t(2.0 * w)]}}})
    >>> d = find_divergence(compare_graphs(run(1.5), run(1.0)))
    >>> d.node, d.cause
    ('Functional.linear.0.forward', 'inputs differ')
    """
    return analyze(report, rule).first


def analyze(report: Comparison, rule: DivergenceRule | None = None) -> Analysis:
    """The first divergence, candidates, the first overflow and the advisor's findings of a report."""
    rule = rule or DivergenceRule()
    noise = report.noise
    levels = report.overflow_levels()
    origins = noise.origins()[: rule.candidates + 1].tolist()
    divergences = [_divergence(report, r) for r in origins]
    overflowing = noise.leaves[levels[noise.leaves] >= OverflowLevel.HIGH]
    overflow = _divergence(report, int(overflowing[0])) if len(overflowing) else None
    findings = _findings(report, divergences, overflow, levels)
    summary = noise.summary()
    return Analysis(divergences[0] if divergences else None, tuple(divergences[1:]), overflow, findings,
                    noise.precision, summary, rule)


def _divergence(report: Comparison, row: int) -> Divergence:
    npu, noise = report.npu, report.noise
    nodes = npu.nodes
    cause, evidence = _cause(report, row)
    margin = noise.margin_of(row)
    site = npu.call_site(row) or _module_call_site(npu, row)
    attrs = dict(nodes.attrs[row]) if nodes.attrs else {}
    ranks = tuple(int(r) for r in attrs.get("ranks", "").split(",") if r.strip().lstrip("-").isdigit())
    rank = int(attrs["rank"]) if attrs.get("rank", "").lstrip("-").isdigit() else (
        None if len(ranks) > 1 else ranks[0] if ranks else npu.info.rank)
    if rank is None and len(ranks) > 1:  # a merged node: the one shard whose records depart beyond noise
        mine = np.flatnonzero(npu.tensors.node[report.pairs.npu] == row)
        beyond = _fresh_rounding(report, row)
        rank = attribute_rank(npu, report.bench, report.pairs.npu[mine], report.pairs.bench[mine], beyond)
    return Divergence(
        node=nodes.ids[row], module=_innermost_module(npu, row), cause=cause,
        output_error=float(noise.output_error[row]), input_error=float(noise.input_error[row]),
        margin=margin, allowed=noise.allowed(row), rank=rank, step=npu.info.step,
        micro_step=int(nodes.micro_step[row]),
        direction="backward" if nodes.direction[row] == Direction.BACKWARD or _ran_in_backward(npu, row) else "forward",
        evidence=evidence, ranks=ranks, source_id=attrs.get("source_id", ""), call_site=site,
        summary=_summary(report, row, cause, margin),
    )


def _ran_in_backward(npu: DumpGraph, row: int) -> bool:
    """True for a forward call made during its micro-step's backward pass (a custom autograd Function's backward
    running ops, a checkpointed block recomputed): a backward call ran before it in the same micro-step."""
    nodes = npu.nodes
    if nodes.direction[row] != Direction.FORWARD:
        return False
    before = slice(0, row)
    return bool(np.any((nodes.direction[before] == Direction.BACKWARD)
                       & (nodes.micro_step[before] == nodes.micro_step[row])))


def _module_call_site(npu: DumpGraph, row: int) -> str:
    """The call site of the innermost module around `row` that has one (a call's own stack may be missing)."""
    parent = int(npu.nodes.parent[row])
    while parent > 0:
        site = npu.call_site(parent)
        if site:
            return site
        parent = int(npu.nodes.parent[parent])
    return ""


def _summary(report: Comparison, row: int, cause: str, margin: float) -> str:
    """The cause of origin `row` in one plain sentence with its numbers."""
    noise = report.noise
    out, allowed = float(noise.output_error[row]), noise.allowed(row)
    allows = "noise measured from the reference run" if noise.is_measured(row) else "rounding allows"
    beyond = f"{_margin(margin)} the {allowed:.3g} {allows}" if np.isfinite(allowed) else "beyond rounding"
    if cause == "overflow":
        return "its output overflows (inf/NaN or the dtype's limit) while its inputs are finite"
    if cause == "shape change":
        return "an output's shape differs between the runs"
    if cause == "argument differs":
        args = _fresh_slots(report, row, False, _fresh_rounding(report, row))
        return f"a non-tensor argument differs: {', '.join(args)}"
    if cause == "inputs differ":
        names = ", ".join(_fresh_slots(report, row, True, _fresh_rounding(report, row))) or "an input"
        return (f"{names} differs from the bench run's by {noise.fresh_error[row]:.3g} (relative), "
                f"{_margin(noise.fresh_margin[row])} what rounding lets such an input carry")
    if cause == "communication":
        return f"its output differs by {out:.3g}, {beyond}, while the inputs this rank sent agree"
    if cause == "dtype change":
        return f"its output differs by {out:.3g}: the npu dtype cannot hold these values"
    return (f"its output differs by {out:.3g} while its inputs differ by only {noise.input_error[row]:.3g}: "
            f"{beyond}")


def _cause(report: Comparison, row: int) -> tuple[str, tuple[str, ...]]:
    noise = report.noise
    output = f"output error {noise.output_error[row]:.3g} ({report.verdicts.reason[row] or 'see metrics'})"
    level = int(report.overflow_levels()[row])
    if level >= OverflowLevel.HIGH:
        attrs = dict(report.npu.nodes.attrs[row]) if report.npu.nodes.attrs else {}
        record = (f"the device's overflow record: {attrs[OVERFLOW_ATTR]}",) if OVERFLOW_ATTR in attrs else ()
        return "overflow", (output, f"overflow level {OVERFLOW_NAMES[level]}", *record)
    if noise.shape_changed[row]:
        return "shape change", (output, "an output's shape differs between the runs")
    fresh = _fresh_cause(report, row)
    if fresh:
        return fresh[0], (output, *fresh[1:])
    growth = _growth_evidence(noise, row)
    explained = _precision_explains(report, row)
    if explained:
        return "dtype change", (output, *growth, explained)
    if communication_calls(report.npu)[row]:
        return "communication", (output, *growth, "local inputs agree, the output differs: another rank sent it")
    return "op", (output, *growth, "inputs agree within noise, outputs differ")


def _growth_evidence(noise: NoiseModel, row: int) -> list[str]:
    """The line that shows how the noise allowed at `row` is made (none where no growth applies)."""
    if not np.isfinite(noise.allowed(row)):
        return []
    growth = "measured growth limit" if noise.is_measured(row) else "growth limit"
    line = (f"allowed by noise {noise.allowed(row):.3g} = {growth} {noise.growth_limit[row]:.3g} x "
            f"(input error {noise.input_error[row]:.3g} + unit roundoff {noise.unit[row]:.3g}"
            f"{_summed(noise.reduction[row])} + library error {LIBRARY_ERROR:.2g})")
    return [line, *_reference_evidence(noise, row)]


def _reference_evidence(noise: NoiseModel, row: int) -> list[str]:
    """Where the noise allowed at `row` comes from when the comparison had a reference run (none without)."""
    if not noise.reference:
        return []
    if noise.is_measured(row):
        return [f"noise measured from the reference run {noise.reference}: the limit is its growth at this call (its "
                "output error over its own input error and one rounding), at least 1, at most what the precision "
                "explains"]
    return [f"the reference run {noise.reference} has no compared call here: noise modeled from this run"]


def _fresh_cause(report: Comparison, row: int) -> tuple[str, ...]:
    """("argument differs" or "inputs differ", evidence) when an argument, a weight or data of `row` differs
    beyond rounding (the origin may have been found by its growth: its weights still explain it), else ()."""
    noise = report.noise
    rounding = _fresh_rounding(report, row)
    if noise.argument_error[row] > rounding and noise.argument_error[row] >= noise.fresh_error[row]:
        return "argument differs", f"arguments differ: {', '.join(_fresh_slots(report, row, False, rounding))}"
    if noise.fresh_error[row] <= rounding:
        return ()
    slots = _fresh_slots(report, row, True, rounding)
    what = ("an input computed by a call the bench run does not have" if any("computed by" in s for s in slots)
            else "a difference made by calls the bench run holds no data for" if any("made by" in s for s in slots)
            else "a weight or data difference")
    carry = noise.fresh_error[row] / noise.fresh_margin[row] if noise.fresh_margin[row] > 0 else rounding
    return ("inputs differ", f"{', '.join(slots)} differ{'s' if len(slots) == 1 else ''} by "
                             f"{noise.fresh_error[row]:.3g}, where rounding lets such an input carry {carry:.3g} "
                             f"(no compared call made it): {what}")


def _fresh_rounding(report: Comparison, row: int) -> float:
    """The largest difference a weight, data or argument of `row` may show from rounding alone."""
    noise = report.noise
    beyond = float(origin_margins(report.npu, report.bench, noise.rule, np.array([row]))[0])
    return beyond * max(float(noise.unit[row]), noise.precision.unit_roundoff)


def _fresh_slots(report: Comparison, row: int, tensors: bool, beyond: float = 0.0) -> list[str]:
    """The inputs of `row` no matched earlier call produced that differ by more than `beyond`, named as the user
    knows them (``weight (encoder.layers.1.linear1.weight)``, ``eps 1e-05 vs 1e-06``), worst first."""
    npu, noise = report.npu, report.noise
    t = npu.tensors
    rows = report.pairs.npu
    fresh = np.flatnonzero(noise.fresh_pair)  # only these pairs can be such inputs: the others are not looked at
    picked = fresh[(t.node[rows[fresh]] == row) & (noise.pair_error[fresh] > beyond)]
    picked = picked[np.argsort(-np.nan_to_num(noise.pair_error[picked], nan=np.inf), kind="stable")]
    out = []
    for k in picked.tolist():
        i = int(rows[k])
        if (t.shape[i] not in ("", "scalar")) != tensors:  # `TensorTable.has_shape` of this row
            continue
        name = _input_name(npu, row, i)
        if not tensors:
            bench_value = report.bench.tensors.value[int(report.pairs.bench[k])]
            out.append(f"{name} {t.value[i] or t.stats[i, 0]!s} vs {bench_value}")
            continue
        maker = int(noise.producer[k])
        if maker < 0 or maker == row:
            out.append(name)
        elif report.matches.npu_to_bench[maker] >= 0:
            out.append(name if _outputs_compared(report, maker) else
                       f"{name} (made by {npu.nodes.ids[maker]}, whose outputs the bench run holds no data for)")
        elif _computed(npu, maker):
            out.append(f"{name} (computed by {npu.nodes.ids[maker]}, which has no counterpart in the bench run)")
        else:
            out.append(f"{name} (through {npu.nodes.ids[maker]}, which has no counterpart in the bench run)")
    return out


def _outputs_compared(report: Comparison, row: int) -> bool:
    rows = report.pairs.npu
    return bool(np.any((report.npu.tensors.node[rows] == row) & is_output(report.npu.tensors.role[rows])))


def _input_name(npu: DumpGraph, row: int, tensor: int) -> str:
    """An input's name: a module parameter's own (``weight``), an API argument's from its signature; with the
    parameter's path in the model when the enclosing module holds a parameter of that name."""
    t = npu.tensors
    role, slot = Role(int(t.role[tensor])), t.slot[tensor]
    name = slot if role == Role.PARAM else argument_name(npu.nodes.op[row], slot) if role == Role.INPUT else (
        f"{role.name.lower()}.{slot}")
    module = row if npu.nodes.kind[row] == NodeKind.MODULE else _module_row(npu, row)
    if module < 0:
        return name
    params = [k for k in npu.tensor_rows_at(module).tolist() if t.role[k] == Role.PARAM]
    same = [k for k in params if t.slot[k] == name]
    if not same and role == Role.INPUT:  # an argument that is the module's parameter (the same statistics)
        same = [k for k in params if t.present[k].all() and np.array_equal(t.stats[k], t.stats[tensor])]
        name = t.slot[same[0]] if same else name
    if same:
        return f"{name} ({_parameter_path(npu.nodes.ids[module], name)})"
    return name


def _parameter_path(module_id: str, name: str) -> str:
    """``encoder.layers.1.linear1.weight`` of ``Module.encoder.layers.1.linear1.Linear.forward.0`` and ``weight``."""
    body = module_id.split(".", 1)[-1]
    path = body.rsplit(".forward", 1)[0].rsplit(".backward", 1)[0]
    return f"{path.rsplit('.', 1)[0]}.{name}" if "." in path else name


def _computed(npu: DumpGraph, maker: int) -> bool:
    """True when call `maker` computed from what an earlier call produced (not only from weights or data)."""
    t = npu.tensors
    made = np.flatnonzero((t.node == maker) & is_input(t.role))
    makers = earliest_producers(npu)[made]
    return bool(np.any((makers >= 0) & (makers != maker)))


def _precision_explains(report: Comparison, row: int) -> str:
    """Why the npu dtype itself explains a large output error at `row`, or "" when it does not."""
    npu, bench, noise = report.npu, report.bench, report.noise
    k = np.flatnonzero((npu.tensors.node[report.pairs.npu] == row)
                       & np.isin(npu.tensors.role[report.pairs.npu], (Role.OUTPUT, Role.PARAM_GRAD)))
    if not len(k):
        return ""
    worst = int(k[np.argmax(noise.pair_error[k])])
    i, j = int(report.pairs.npu[worst]), int(report.pairs.bench[worst])
    npu_dtype, bench_dtype = normalize_dtype(npu.tensors.dtype[i]), normalize_dtype(bench.tensors.dtype[j])
    if npu_dtype == bench_dtype or unit_roundoff(npu_dtype) <= unit_roundoff(bench_dtype):
        return ""
    stats = bench.tensors.stats[j]
    magnitude = float(np.nanmax(np.abs(stats[:2])))
    if magnitude > _LARGEST.get(npu_dtype, np.inf):
        return f"output dtype {npu_dtype} vs {bench_dtype}: bench values reach {magnitude:.3g}, beyond {npu_dtype}"
    if 0 < magnitude < _SMALLEST_NORMAL.get(npu_dtype, 0.0):
        return (f"output dtype {npu_dtype} vs {bench_dtype}: bench values are at most {magnitude:.3g}, below "
                f"{npu_dtype}'s smallest normal number")
    inputs = np.flatnonzero((bench.tensors.node == bench.tensors.node[j])
                            & np.isin(bench.tensors.role, (Role.INPUT, Role.PARAM)))
    scale = float(np.nanmax(np.abs(bench.tensors.stats[inputs, :2]), initial=0.0)) if len(inputs) else 0.0
    if magnitude > 0 and scale / magnitude > 1.0 / unit_roundoff(npu_dtype):
        return (f"output dtype {npu_dtype} vs {bench_dtype}: the result ({magnitude:.3g}) is below {npu_dtype}'s "
                f"resolution of the values it was computed from ({scale:.3g}): cancellation")
    return ""


def _innermost_module(npu: DumpGraph, row: int) -> str | None:
    module = _module_row(npu, row)
    return npu.nodes.ids[module] if module >= 0 else None


def _module_row(npu: DumpGraph, row: int) -> int:
    parent = int(npu.nodes.parent[row])
    while parent > 0:
        if npu.nodes.kind[parent] == NodeKind.MODULE:
            return parent
        parent = int(npu.nodes.parent[parent])
    return -1


def _findings(report: Comparison, divergences: list[Divergence], overflow: Divergence | None,
              levels: np.ndarray) -> tuple[Finding, ...]:
    noise = report.noise
    out: list[Finding] = []
    if divergences:
        d = divergences[0]
        out.append(Finding("first_divergence", "error", d.node,
                           f"first divergence at {d.node} ({d.cause}, {_margin(d.margin)} the noise allowed); "
                           f"module {d.module or '-'}"))
    if overflow is not None:
        n = int(np.count_nonzero(levels >= OverflowLevel.HIGH))
        out.append(Finding("first_overflow", "error", overflow.node,
                           f"overflow first at {overflow.node}; {n} node(s) overflow (inf/NaN or dtype limit)"))
    if noise.precision.kind != "exact rerun":
        out.append(Finding("precision", "info", None, f"{noise.precision.describe()}; measured noise level "
                           f"{noise.noise_level:.3g}{_in_units(noise.noise_level, noise.precision.unit_roundoff)}"))
    if noise.reference:
        out.append(Finding("reference", "info", None,
                           f"noise measured from the reference run {noise.reference} at "
                           f"{int(np.count_nonzero(noise.measured))} of {len(noise.leaves)} compared calls (the "
                           "others: modeled)"))
    out.extend(_unmatched_regions(report))
    out.extend(advisor_findings(report))
    return tuple(out)


ADVISOR_COSINE = 0.99
"""msaccucmp's advisor threshold on the cosine similarity (``advisor_const.py ACCURACY_THRESHOLD``)."""
MODEL_INPUTS_ATTR = "model_inputs"
"""Node attribute of a golden run laid out by a fusion rule: the input slots that stand for the model's inputs
(`graphcmp.core.readers.ascend_golden.MODEL_INPUTS_ATTR`, the same name)."""
_FP16_MAX = 65504.0


def advisor_findings(report: Comparison) -> list[Finding]:
    """msaccucmp's advisor on an Ascend raw dump compared with real tensors, its three checks in its order (the
    first that fires is its answer; graphcmp lists each that applies): FP16 overflow (an fp16 tensor of the NPU
    reaching 65504 or infinity), input inconsistency (a model input whose cosine is below 0.99), and the whole
    network's consistency (the first tensor whose cosine is below 0.99, a problem when the last one is too, a
    deviation of internal optimisations otherwise). Empty for other runs.
    """
    if report.npu.info.format != "ascend_dump" or "cosine" not in report.pairs.metrics:
        return []
    npu, t = report.npu, report.npu.tensors
    when = execution_keys(npu)[t.node]
    order = np.lexsort((t.role, when))
    out = []
    fp16 = np.array([normalize_dtype(d) == "float16" for d in t.dtype], bool)
    with np.errstate(invalid="ignore"):  # as msaccucmp: max |x| >= 65504 (inf counts, a NaN maximum does not)
        big = np.where(t.present[:, :2], np.abs(t.stats[:, :2]), 0.0).max(axis=1)
        over = fp16 & (big >= _FP16_MAX)
    hit = [r for r in order.tolist() if over[r]]
    if hit:
        node = npu.nodes.ids[t.node[hit[0]]]
        out.append(Finding("advisor_fp16_overflow", "error", node, f"FP16 overflow: {node} "
                           f"{_tensor_name(t, hit[0])} reaches the float16 limit; rectify it and compare again"))
    cosine = np.asarray(report.pairs.metrics["cosine"])
    pairs = sorted(range(len(report.pairs.npu)), key=lambda k: (when[report.pairs.npu[k]],
                                                                int(t.role[report.pairs.npu[k]])))
    rows = [(k, int(report.pairs.npu[k]), float(cosine[k])) for k in pairs if np.isfinite(cosine[k])]
    bench = report.bench
    for k, row, value in rows:
        b = int(report.pairs.bench[k])
        slots = dict(bench.nodes.attrs[bench.tensors.node[b]]).get(MODEL_INPUTS_ATTR, "") if bench.nodes.attrs \
            else ""
        if value < ADVISOR_COSINE and t.role[row] == Role.INPUT and t.slot[row] in slots.split(","):
            node = npu.nodes.ids[t.node[row]]
            out.append(Finding("advisor_input_inconsistent", "error", node,
                               f"input inconsistent: the model input at {node} {_tensor_name(t, row)} has cosine "
                               f"{value:.6f} < {ADVISOR_COSINE}; check the input data and its preprocessing"))
            break
    low = [(row, value) for _, row, value in rows if value < ADVISOR_COSINE]
    if not low:
        out.append(Finding("advisor_consistency", "info", None, "global consistency: every compared tensor has "
                           f"cosine >= {ADVISOR_COSINE}; if the model's accuracy is still not up to standard, check "
                           "the post-processing of its outputs"))
    else:
        node = npu.nodes.ids[t.node[low[0][0]]]
        last_low = bool(rows) and rows[-1][2] < ADVISOR_COSINE
        advice = ("the final output is affected: a problem to fix (quantization or a wrong op)" if last_low else
                  "the final output is within the threshold: a deviation from internal optimisation")
        out.append(Finding("advisor_consistency", "warning", node, f"global consistency: cosine first below "
                           f"{ADVISOR_COSINE} at {node} {_tensor_name(t, low[0][0])} ({low[0][1]:.6f}); {advice}"))
    return out


def _tensor_name(t: TensorTable, row: int) -> str:
    return f"{'input' if t.role[row] == Role.INPUT else 'output'}:{t.slot[row]}"


def _summed(reduction: float) -> str:
    return f" x sqrt({reduction:.0f} summed values)" if reduction > 1 else ""


def _margin(margin: float) -> str:
    return f"{margin:.3g}x" if np.isfinite(margin) else "far beyond"


def _in_units(value: float, unit: float) -> str:
    return f" ({value / unit:.3g} unit roundoffs)" if unit else ""


def _unmatched_regions(report: Comparison, limit: int = 5) -> list[Finding]:
    npu = report.npu
    partner = report.matches.npu_to_bench
    parent = npu.nodes.parent
    tops = [r for r in np.flatnonzero(partner < 0).tolist() if parent[r] >= 0 and partner[parent[r]] >= 0]
    if not tops:
        return []
    sizes = {r: int(report.verdicts.unmatched_below[r]) for r in tops}
    biggest = sorted(tops, key=lambda r: -sizes[r])[:limit]
    total = int(np.count_nonzero(partner < 0))
    return [Finding("unmatched", "warning", npu.nodes.ids[r],
                    f"unmatched region of {sizes[r]} node(s) at {npu.nodes.ids[r]} ({total} unmatched in all)")
            for r in biggest]
