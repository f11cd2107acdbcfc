"""Where the npu run first departs from the bench run, and why.

The walk visits the *leaf* calls (nodes with data and no data below them: API calls, or the
innermost modules of a module-level dump) in execution order, forward before backward, micro-step
by micro-step. A leaf is an **origin** of divergence when its output error is above a floor and
is not explained by its inputs:

* its output error exceeds ``growth`` times the error of the inputs it received from earlier
  calls (an input is "from an earlier call" when an earlier output has bit-identical statistics
  and dtype — msprobe dumps have no data-flow edges, the statistics fingerprint stands in), or
* an input that no earlier call produced (a weight, a batch of data) already differs.

The floor adapts to the kind of comparison (`DivergenceRule`): in an *exact rerun* (the first
difference, after bit-identical calls, is larger than float noise) any difference above
``exact_min_rel`` counts; otherwise (a real cross-device run, where every op differs slightly
from the first one on) only errors above ``cross_min_rel`` do. The cause is reported as
``overflow``, ``dtype change``, ``inputs differ`` (a weight or data difference, or an input made
by an npu call the bench run does not have) or ``op`` (inputs agree, outputs differ).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from graphcmp.core.dtypes import normalize_dtype, precision_changed
from graphcmp.core.hierarchy import depths, execution_keys, levels
from graphcmp.core.overflow import OVERFLOW_NAMES
from graphcmp.core.records import DumpGraph, NodeKind, Role, string_codes, string_column

__all__ = ["Analysis", "Divergence", "DivergenceRule", "Finding", "analyze", "find_divergence"]

CAUSES = ("overflow", "dtype change", "inputs differ", "op")


@dataclass(frozen=True, slots=True)
class DivergenceRule:
    """The one place that says what counts as a divergence (all errors are relative, unitless).

    Attributes
    ----------
    growth : float
        An output error must exceed this many times the error its inputs already carried. Default 10.
    exact_min_rel : float
        Floor of an output error in an exact rerun. Default 1e-6 (float32 noise).
    cross_min_rel : float
        Floor of an output error in a cross-device run. Default 1e-3 (the warning threshold).
    noise_rel : float
        A first difference at most this large looks like float noise of one op on other hardware
        (a cross-device run); a larger first difference after bit-identical calls marks an exact
        rerun. Default 1e-5.
    candidates : int
        How many further origins to report after the first. Default 5.
    """

    growth: float = 10.0
    exact_min_rel: float = 1e-6
    cross_min_rel: float = 1e-3
    noise_rel: float = 1e-5
    candidates: int = 5


@dataclass(frozen=True, slots=True)
class Divergence:
    """One origin of divergence with its evidence."""

    node: str
    module: str | None
    cause: str
    output_error: float
    input_error: float
    rank: int | None = None
    step: int | None = None
    micro_step: int = 0
    direction: str = "forward"
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "evidence": list(self.evidence)}


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of the advisor: what was found, and the node it refers to."""

    kind: str  # first_divergence, first_overflow, overflow, input_inconsistent, dtype_change, unmatched
    level: str  # info, warning, error
    node: str | None
    message: str


@dataclass(frozen=True, slots=True)
class Analysis:
    """The first divergence, further candidates, the first overflow and the advisor's findings."""

    first: Divergence | None
    candidates: tuple[Divergence, ...]
    first_overflow: Divergence | None
    findings: tuple[Finding, ...]
    exact_rerun: bool
    rule: DivergenceRule = field(default_factory=DivergenceRule)

    def to_dict(self) -> dict[str, Any]:
        return {
            "first": self.first.to_dict() if self.first else None,
            "candidates": [c.to_dict() for c in self.candidates],
            "first_overflow": self.first_overflow.to_dict() if self.first_overflow else None,
            "findings": [asdict(f) for f in self.findings],
            "exact_rerun": self.exact_rerun,
            "rule": asdict(self.rule),
        }


def find_divergence(report: Any, rule: DivergenceRule | None = None) -> Divergence | None:
    """The first origin of divergence of a `CompareReport`, or None when the runs agree.

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


def analyze(report: Any, rule: DivergenceRule | None = None) -> Analysis:
    """Find the first divergence, candidates, the first overflow and the advisor findings of a report."""
    rule = rule or DivergenceRule()
    npu = report.npu
    keys = execution_keys(npu)
    leaves = sorted(_leaf_rows(npu, report.matches), key=keys.__getitem__)
    io = _io_errors(report, keys)
    out_err = report.verdicts.severity
    levels = report.overflow_levels()
    dtype_rows = _precision_changes(report)
    exact = _is_exact(leaves, out_err, rule)
    floor = rule.exact_min_rel if exact else rule.cross_min_rel
    origin_mask = _origins(out_err, io, floor, rule) | (levels == 3)
    origins = [r for r in leaves if origin_mask[r]]
    divergences = [_divergence(report, r, io, levels, dtype_rows, floor) for r in origins[: rule.candidates + 1]]
    first_overflow = next((r for r in leaves if levels[r] >= 2), None)
    overflow = _divergence(report, first_overflow, io, levels, dtype_rows, floor) if first_overflow is not None \
        else None
    findings = _findings(report, divergences, overflow, levels, dtype_rows, io, leaves, floor)
    return Analysis(divergences[0] if divergences else None, tuple(divergences[1:]), overflow, findings, exact, rule)


def _leaf_rows(npu: DumpGraph, matches: Any) -> list[int]:
    """Matched rows with data and no data below them; a fused group counts as its enclosing module.

    The members of a fused group compared through their module (a MindSpore Dense's Reshape/MatMul/
    BiasAdd against one PyTorch linear) are not compared one by one, so the module is the leaf.
    """
    has_data = npu.nodes.has_data & (npu.nodes.kind != NodeKind.GROUP)
    data_below = np.zeros(len(npu), np.int8)
    parent = npu.nodes.parent
    for rows in reversed(levels(depths(parent))[1:]):
        np.maximum.at(data_below, parent[rows], (has_data[rows] | (data_below[rows] > 0)).astype(np.int8))
    leaf = has_data & (data_below == 0) & (matches.npu_to_bench >= 0)
    for group in getattr(matches, "groups", ()):
        if group.via >= 0:
            leaf[list(group.npu)] = False
            leaf[group.via] = True
    return np.flatnonzero(leaf).tolist()


@dataclass(frozen=True, slots=True)
class _InputErrors:
    upstream: np.ndarray  # per npu row: largest error of inputs an earlier call produced
    fresh: np.ndarray  # per npu row: largest error of inputs no earlier call produced
    graph: DumpGraph
    unexplained: np.ndarray  # pair indices of differing inputs no matched earlier call produced
    unexplained_node: np.ndarray  # their npu rows
    unexplained_tensor: np.ndarray  # their npu tensor rows
    unexplained_maker: np.ndarray  # npu row of an earlier (unmatched) producer, -1 when none

    def fresh_slots(self, row: int) -> list[str]:
        """The differing inputs of `row` that no matched earlier call produced, as ``input.1`` texts."""
        t, ids = self.graph.tensors, self.graph.nodes.ids
        out = []
        for k in np.flatnonzero(self.unexplained_node == row).tolist():
            i, maker = int(self.unexplained_tensor[k]), int(self.unexplained_maker[k])
            origin = f" (made by unmatched {ids[maker]})" if maker >= 0 else ""
            out.append(f"{Role(int(t.role[i])).name.lower()}.{t.slot[i]}{origin}")
        return out


def _io_errors(report: Any, keys: np.ndarray) -> _InputErrors:
    """Input errors per row, split by whether a matched earlier call produced the input.

    An input made by an npu call without a bench counterpart (an inserted Cast) is not explained
    by the comparison: it counts as fresh, so the call that consumes it becomes the origin.
    """
    npu = report.npu
    t = npu.tensors
    producer = _earliest_producer(npu, keys)
    matched = report.matches.npu_to_bench >= 0
    tensor = report.pairs.npu
    node = t.node[tensor]
    severity = np.where(np.isnan(report.verdicts.pair_severity), np.inf, report.verdicts.pair_severity)
    is_input = np.isin(t.role[tensor], (Role.INPUT, Role.PARAM))
    made_by = producer[tensor]
    earlier = (made_by >= 0) & (keys[np.maximum(made_by, 0)] < keys[node])
    explained = is_input & earlier & matched[np.maximum(made_by, 0)]
    unexplained = is_input & ~explained & (severity > 0)
    upstream = np.zeros(len(npu))
    fresh = np.zeros(len(npu))
    np.maximum.at(upstream, node[explained], severity[explained])
    np.maximum.at(fresh, node[unexplained], severity[unexplained])
    picked = np.flatnonzero(unexplained)
    maker = np.where(earlier[picked], made_by[picked], -1)
    return _InputErrors(upstream, fresh, npu, picked, node[picked], tensor[picked], maker)


def _earliest_producer(npu: DumpGraph, keys: np.ndarray) -> np.ndarray:
    """Per tensor row, the node row of the earliest call with an output of the same fingerprint (-1: none).

    The fingerprint is dtype and statistics, without shape: a transpose or view between two dumped
    calls keeps the statistics but not the shape.
    """
    t = npu.tensors
    fingerprint = _fingerprints(t)
    has_shape = t.has_shape()
    outputs = np.flatnonzero((t.role == Role.OUTPUT) & has_shape)
    made = t.node[outputs]
    order = np.lexsort((made, keys[made]))  # earliest call first (execution key, then row)
    first_fp, first_at = np.unique(fingerprint[outputs[order]], return_index=True)
    producer_of_fp = np.full(int(fingerprint.max(initial=-1)) + 1, -1, np.int64)
    producer_of_fp[first_fp] = made[order][first_at]
    return producer_of_fp[fingerprint]


def _fingerprints(t: Any) -> np.ndarray:
    """An integer id per tensor row; equal ids for equal (dtype, recorded statistics).

    The five values are mixed into one 64-bit hash (sorting int64 is far faster than sorting
    40-byte records); two different tensors sharing a hash is a 2**-64 event.
    """
    if not len(t):
        return np.zeros(0, np.int64)
    dtype_code = string_codes(t.dtype)[0].astype(np.uint64)
    stats = np.ascontiguousarray(np.where(t.present, t.stats, 0.0) + 0.0)  # + 0.0 folds -0.0 into 0.0
    bits = stats.view(np.uint64)
    mixed = dtype_code
    for column in bits.T:
        mixed = (mixed ^ column) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
        mixed ^= mixed >> np.uint64(29)
    return np.unique(mixed, return_inverse=True)[1].reshape(-1)


def _is_exact(leaves: list[int], out_err: np.ndarray, rule: DivergenceRule) -> bool:
    """An exact rerun: the first difference, after bit-identical calls, is more than float noise."""
    for row in leaves:
        if out_err[row] > 0:
            return bool(out_err[row] > rule.noise_rel)
    return True


def _origins(out_err: np.ndarray, io: _InputErrors, floor: float, rule: DivergenceRule) -> np.ndarray:
    """Per row: the output error is above the floor and not explained by the inputs."""
    with np.errstate(over="ignore", invalid="ignore"):
        grew = out_err > rule.growth * io.upstream
    return (out_err > floor) & (grew | (io.fresh > floor))


def _precision_changes(report: Any) -> dict[int, str]:
    nt, bt = report.npu.tensors, report.bench.tensors
    i, j = report.pairs.npu, report.pairs.bench
    npu_dtype, bench_dtype = string_column(nt.dtype, i), string_column(bt.dtype, j)
    differ = (nt.role[i] == Role.OUTPUT) & (npu_dtype != bench_dtype)
    rows: dict[int, str] = {}
    for k in np.flatnonzero(differ).tolist():
        a, b = npu_dtype[k], bench_dtype[k]
        if precision_changed(a, b):
            rows.setdefault(int(nt.node[i[k]]), f"{normalize_dtype(a)} vs {normalize_dtype(b)}")
    return rows


def _divergence(report: Any, row: int, io: _InputErrors, levels: np.ndarray, dtype_rows: dict[int, str],
                floor: float) -> Divergence:
    npu = report.npu
    nodes = npu.nodes
    cause, evidence = _cause(report, row, io, levels, dtype_rows, floor)
    return Divergence(
        node=nodes.ids[row], module=_innermost_module(npu, row), cause=cause,
        output_error=float(report.verdicts.severity[row]),
        input_error=float(max(io.upstream[row], io.fresh[row])),
        rank=npu.info.rank, step=npu.info.step, micro_step=int(nodes.micro_step[row]),
        direction="backward" if nodes.direction[row] == 1 else "forward", evidence=evidence,
    )


def _cause(report: Any, row: int, io: _InputErrors, levels: np.ndarray, dtype_rows: dict[int, str],
           floor: float) -> tuple[str, tuple[str, ...]]:
    evidence = [f"output error {report.verdicts.severity[row]:.3g} ({report.verdicts.reason[row] or 'see metrics'})",
                f"error of inputs from earlier calls {io.upstream[row]:.3g}"]
    if levels[row] >= 2:
        return "overflow", (*evidence, f"overflow level {OVERFLOW_NAMES[int(levels[row])]}")
    if row in dtype_rows:
        return "dtype change", (*evidence, f"output dtype {dtype_rows[row]}")
    if io.fresh[row] > floor:
        slots = io.fresh_slots(row)
        what = ("an input made by a call the bench run does not have" if any("unmatched" in s for s in slots)
                else "a weight or data difference")
        return "inputs differ", (*evidence, f"inputs no matched earlier call produced differ ({', '.join(slots)}): "
                                             f"error {io.fresh[row]:.3g} — {what}")
    return "op", (*evidence, "inputs agree, outputs differ")


def _innermost_module(npu: DumpGraph, row: int) -> str | None:
    parent = int(npu.nodes.parent[row])
    while parent > 0:
        if npu.nodes.kind[parent] == NodeKind.MODULE:
            return npu.nodes.ids[parent]
        parent = int(npu.nodes.parent[parent])
    return None


def _findings(report: Any, divergences: list[Divergence], overflow: Divergence | None, levels: np.ndarray,
              dtype_rows: dict[int, str], io: _InputErrors, leaves: list[int], floor: float) -> tuple[Finding, ...]:
    npu = report.npu
    ids = npu.nodes.ids
    out: list[Finding] = []
    if divergences:
        d = divergences[0]
        out.append(Finding("first_divergence", "error", d.node,
                           f"first divergence at {d.node} ({d.cause}); module {d.module or '-'}"))
    if overflow is not None:
        n = int(np.count_nonzero(levels >= 2))
        out.append(Finding("first_overflow", "error", overflow.node,
                           f"overflow first at {overflow.node}; {n} node(s) overflow (inf/NaN or dtype limit)"))
    inconsistent = next((r for r in leaves if io.fresh[r] > floor and io.upstream[r] <= floor), None)
    if inconsistent is not None:
        out.append(Finding("input_inconsistent", "warning", ids[inconsistent],
                           f"inputs differ at {ids[inconsistent]} although earlier outputs agree "
                           f"({', '.join(io.fresh_slots(inconsistent))})"))
    if dtype_rows:
        first = min(dtype_rows)
        message = f"{len(dtype_rows)} node(s) change float precision, first {ids[first]} ({dtype_rows[first]})"
        out.append(Finding("dtype_change", "warning", ids[first], message))
    out.extend(_unmatched_regions(report))
    return tuple(out)


def _unmatched_regions(report: Any, limit: int = 5) -> list[Finding]:
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

