"""`judge`: the one place that decides pass / warning / error, per tensor pair and per node.

Metrics measure and rules bin; `judge` applies the rules of each pair's task mode, adds the
checks no single metric expresses (overflow, shape and precision changes, "inputs agree but
outputs differ"), then follows the noise model (core/noise.py): a node within the noise its
precision allows passes, an origin is an error, a node an origin propagates to keeps its rule
level. In a mixed-precision comparison a dtype change is expected and raises nothing by itself.
Node levels roll up the hierarchy so a module shows its worst descendant.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from graphcmp.core import stat_kernels
from graphcmp.core.dtypes import precision_changed
from graphcmp.core.hierarchy import node_levels
from graphcmp.core.matching import MatchTable
from graphcmp.core.metrics import by_blocks, is_nonfinite
from graphcmp.core.noise import NodeRole, NoiseModel, element_count
from graphcmp.core.overflow import recorded_statistics
from graphcmp.core.pairing import TensorPairs
from graphcmp.core.records import (
    STAT_NAMES,
    DumpGraph,
    FrozenColumns,
    NodeKind,
    Role,
    TensorTable,
    is_output,
    shared_codes,
    string_codes,
)
from graphcmp.core.rules import ERROR, PASS, WARNING, Status, Thresholds
from graphcmp.core.texts import formatted

__all__ = ["SKIP", "STATUS_NAMES", "UNMATCHED", "NodeVerdicts", "Status", "Verdict", "judge", "pair_messages",
           "pair_notes", "status_code"]

SKIP, UNMATCHED = Status.SKIP, Status.UNMATCHED
STATUS_NAMES = {PASS: "pass", WARNING: "warning", ERROR: "error", SKIP: "skip", UNMATCHED: "unmatched"}


def status_code(name: str) -> int:
    """Code of a status name (inverse of `STATUS_NAMES`)."""
    return {v: k for k, v in STATUS_NAMES.items()}[name]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judgement of one npu node."""

    node: str
    status: str  # pass, warning, error, skip, unmatched
    severity: float
    reason: str = ""
    worst: str = "pass"  # worst status in the node's subtree

    def __bool__(self) -> bool:
        return self.status != "error"


@dataclass(frozen=True, slots=True, eq=False)
class NodeVerdicts(FrozenColumns):
    """Verdict columns over the npu rows, plus the level of every tensor pair.

    `severity` is the driving metric of the node's outputs (relative error of statistics,
    Euclidean relative distance of tensors, 1.0 for an md5 difference); `input_severity` the same
    over its inputs and parameters. `worst`/`worst_severity` roll both up over the subtree.
    """

    status: np.ndarray  # int8
    severity: np.ndarray  # float64
    input_severity: np.ndarray  # float64
    inputs_identical: np.ndarray  # bool
    reason: tuple[str, ...]
    worst: np.ndarray  # int8
    worst_severity: np.ndarray  # float64
    unmatched_below: np.ndarray  # int32
    pair_level: np.ndarray  # int8 per tensor pair
    pair_severity: np.ndarray  # float64 per tensor pair

    def verdict(self, graph: DumpGraph, node_id: str) -> Verdict:
        """The `Verdict` record of one npu node."""
        row = graph.row(node_id)
        return Verdict(node_id, STATUS_NAMES[int(self.status[row])], float(self.severity[row]),
                       self.reason[row], STATUS_NAMES[int(self.worst[row])])

    def histogram(self) -> dict[str, int]:
        """Number of npu nodes per status name."""
        codes, counts = np.unique(self.status, return_counts=True)
        return {STATUS_NAMES[int(c)]: int(n) for c, n in zip(codes, counts)}


def judge(
    npu: DumpGraph, bench: DumpGraph, matches: MatchTable, pairs: TensorPairs, thresholds: Thresholds,
    noise: NoiseModel | None = None,
) -> NodeVerdicts:
    """Judge every tensor pair and every npu node; see the module docstring for the checks.

    Without `noise` the rules alone decide (every difference is judged as in an exact rerun).
    """
    expected_dtypes = noise is not None and noise.precision.mixed
    level, severity, notes = _pair_levels(npu, bench, pairs, thresholds, expected_dtypes)
    n = len(npu)
    node = npu.tensors.node[pairs.npu]
    is_out = is_output(npu.tensors.role[pairs.npu])
    status = np.full(n, SKIP, np.int8)
    np.maximum.at(status, node[is_out], level[is_out])
    node_sev = np.zeros(n)
    np.maximum.at(node_sev, node[is_out], _nan_as_inf(severity[is_out]))
    in_sev = np.zeros(n)
    np.maximum.at(in_sev, node[~is_out], _nan_as_inf(severity[~is_out]))
    identical = _inputs_identical(npu, pairs, node, is_out)
    same_in = identical & (status == PASS) & (node_sev > thresholds.same_input_rel)
    status[same_in] = WARNING
    unpaired = _unpaired_outputs(npu, pairs, matches)
    status[unpaired & (status == PASS)] = WARNING
    quiet = np.zeros(n, bool)
    if noise is not None:
        quiet = _follow_noise(status, noise, _hard_nodes(node, is_out, notes, n) | unpaired)
    status[matches.npu_to_bench < 0] = UNMATCHED
    reason = _reasons(npu, bench, pairs, status, level, severity, notes, same_in, unpaired, quiet, noise)
    worst, worst_sev, unmatched = _roll_up(npu, status, node_sev)
    return NodeVerdicts(status, node_sev, in_sev, identical, reason, worst, worst_sev, unmatched, level, severity)


def _nan_as_inf(values: np.ndarray) -> np.ndarray:
    """A metric that could not be computed counts as the worst error (unlike nan_to_num, inf stays inf)."""
    return np.where(np.isnan(values), np.inf, values)


def _follow_noise(status: np.ndarray, noise: NoiseModel, hard: np.ndarray) -> np.ndarray:
    """Apply the noise model's roles to `status` in place; return the nodes lowered to pass."""
    quiet = (noise.role == NodeRole.WITHIN_NOISE) & (status > PASS) & ~hard
    status[quiet] = PASS
    status[noise.role == NodeRole.ORIGIN] = ERROR
    return quiet


def _hard_nodes(node: np.ndarray, is_out: np.ndarray, notes: dict[int, str], n: int) -> np.ndarray:
    """Nodes with an output whose shape changed or that overflowed: no noise explains those."""
    hard = np.zeros(n, bool)
    for k, note in notes.items():
        if is_out[k] and not note.startswith(("dtype", "layout")):
            hard[node[k]] = True
    return hard


def _pair_levels(
    npu: DumpGraph, bench: DumpGraph, pairs: TensorPairs, thresholds: Thresholds, expected_dtypes: bool = False,
) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    m = pairs.metrics
    nt, bt = npu.tensors, bench.tensors
    level = _rule_levels(thresholds, "statistics", m)
    severity = m["rel_err"].astype(np.float64).copy()
    if "cosine" in m:
        use = ~np.isnan(m["cosine"])
        level[use] = _rule_levels(thresholds, "tensor", m)[use]
        severity[use] = np.where(np.isnan(m["euc_rel"][use]), 1.0 - m["cosine"][use], m["euc_rel"][use])
    use_md5 = ~np.isnan(m["md5_diff"]) & (npu.info.task == "md5")
    level[use_md5] = _rule_levels(thresholds, "md5", m)[use_md5]
    severity[use_md5] = m["md5_diff"][use_md5]
    nonfinite = _nonfinite_pairs(npu, bench, pairs)
    notes = _pair_notes(nt, bt, pairs, nonfinite, expected_dtypes)
    level[nonfinite] = ERROR
    for k, note in notes.items():
        if not nonfinite[k]:
            level[k] = ERROR if note.startswith("shape") else max(int(level[k]), WARNING)
    return level, severity, notes


def _nonfinite_pairs(npu: DumpGraph, bench: DumpGraph, pairs: TensorPairs) -> np.ndarray:
    """Pairs with an inf/NaN statistic on one side (inf/NaN both runs hold at the same statistic agree). A float16
    Mean or Norm summed beyond the dtype's range while Max and Min are finite (`summed_beyond_range`) is no overflow
    of the tensor: that statistic is not recorded."""
    nt, bt = npu.tensors, bench.tensors
    npu_present, bench_present = recorded_statistics(npu), recorded_statistics(bench)
    compiled = stat_kernels.nonfinite(nt.stats, npu_present, bt.stats, bench_present, pairs.npu, pairs.bench)
    if compiled is not None:
        return compiled
    return by_blocks(lambda i, j: _nonfinite_statistics(nt.stats[i], bt.stats[j], npu_present[i], bench_present[j]),
                     pairs.npu, pairs.bench)


def _nonfinite_statistics(a: np.ndarray, b: np.ndarray, npu_recorded: np.ndarray,
                          bench_recorded: np.ndarray) -> np.ndarray:
    """Per row of statistics `a` (npu) and `b` (bench): an inf or NaN one side recorded where the other side does
    not hold the same value."""
    finite = np.isfinite(a)
    finite &= np.isfinite(b)
    if finite.all():  # the usual block: nothing to look at
        return np.zeros(len(a), bool)
    held_by_both = (a == b) | (np.isnan(a) & np.isnan(b))
    return is_nonfinite(a, npu_recorded & ~held_by_both) | is_nonfinite(b, bench_recorded & ~held_by_both)


def pair_notes(npu: DumpGraph, bench: DumpGraph, pairs: TensorPairs, expected_dtypes: bool = False) -> dict[int, str]:
    """The notes `judge` gives tensor pairs, by pair index: an overflow, a shape or layout change, a precision
    change (left out when `expected_dtypes`: a mixed-precision comparison)."""
    return _pair_notes(npu.tensors, bench.tensors, pairs, _nonfinite_pairs(npu, bench, pairs),
                       expected_dtypes)


def pair_messages(npu: DumpGraph, pairs: TensorPairs, ks: np.ndarray, levels: np.ndarray,
                  notes: dict[int, str]) -> list[str]:
    """One line per pair of `ks` at `levels` (its verdict): ``error: output.0: Norm rel err 0.12``, the line
    `judge` gives a node for its worst pair (`pair_notes` for `notes`).

    >>> from graphcmp.core.compare import compare_graphs
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...      "Mean": 0.5, "Norm": 1.0}
    >>> r = compare_graphs(parse_msprobe({"data": {"Torch.relu.0.forward": {"output": [dict(t, Max=2.0)]}}}),
    ...                    parse_msprobe({"data": {"Torch.relu.0.forward": {"output": [t]}}}))
    >>> pair_messages(r.npu, r.pairs, np.array([0]), r.verdicts.pair_level[:1], {})
    ['error: output.0: Max rel err 1']
    """
    texts = _pair_reasons(npu, pairs, ks, notes)
    return [f"{STATUS_NAMES[level]}: {texts[k]}" for k, level in zip(ks.tolist(), levels.tolist())]


def _pair_notes(nt: TensorTable, bt: TensorTable, pairs: TensorPairs, nonfinite: np.ndarray,
                expected_dtypes: bool = False) -> dict[int, str]:
    """Overflow, shape and precision notes of the pairs that have one, by pair index (`nonfinite`: per pair).

    Precision changes are left out when they are expected (a mixed-precision comparison).
    """
    i, j = pairs.npu, pairs.bench
    notes: dict[int, str] = {}
    if not expected_dtypes:
        dtype_a, dtype_b, dtypes = shared_codes(nt.dtype, bt.dtype)
        dtype_a, dtype_b = dtype_a[i], dtype_b[j]
        differ = np.flatnonzero(dtype_a != dtype_b)
        for k, a, b in zip(differ.tolist(), map(dtypes.__getitem__, dtype_a[differ].tolist()),
                           map(dtypes.__getitem__, dtype_b[differ].tolist())):
            if a and b and precision_changed(a, b):
                notes[k] = f"dtype {a} vs {b}"
    shape_a, shape_b, shapes = shared_codes(nt.shape, bt.shape)
    shape_a, shape_b = shape_a[i], shape_b[j]
    empty = shapes.index("") if "" in shapes else -1
    for k in np.flatnonzero((shape_a != shape_b) & (shape_a != empty) & (shape_b != empty)).tolist():
        a, b = shapes[shape_a[k]], shapes[shape_b[k]]
        same = element_count(a) == element_count(b)
        notes[k] = f"{'layout' if same else 'shape'} {a} vs {b}"
    for k in np.flatnonzero(nonfinite).tolist():
        notes[k] = _nonfinite_text(nt, int(i[k]), "npu") or _nonfinite_text(bt, int(j[k]), "bench")
    return notes


def _rule_levels(thresholds: Thresholds, task: str, metrics: dict[str, np.ndarray]) -> np.ndarray:
    rules = thresholds.rules[task]
    return np.maximum.reduce([rule.levels(metrics[rule.metric]) for rule in rules]).astype(np.int8)


def _nonfinite_text(table, row: int, side: str) -> str:
    bad = [f"{name.capitalize()}={table.stats[row, k]}" for k, name in enumerate(STAT_NAMES)
           if table.present[row, k] and not np.isfinite(table.stats[row, k])]
    return f"overflow on {side}: {', '.join(bad)}" if bad else ""


def _inputs_identical(npu: DumpGraph, pairs: TensorPairs, node: np.ndarray, is_out: np.ndarray) -> np.ndarray:
    n = len(npu)
    ident = pairs.metrics["identical"] & (pairs.metrics["md5_diff"] != 1.0)
    all_same = np.ones(n, bool)
    np.logical_and.at(all_same, node[~is_out], ident[~is_out])
    paired_inputs = np.bincount(node[~is_out], minlength=n)
    t = npu.tensors
    inputs = np.bincount(t.node[~is_output(t.role)], minlength=n)
    return all_same & (paired_inputs > 0) & (paired_inputs == inputs)


def _unpaired_outputs(npu: DumpGraph, pairs: TensorPairs, matches: MatchTable) -> np.ndarray:
    n = len(npu)
    t = npu.tensors
    has_shape = t.has_shape()
    tensor_outputs = is_output(t.role) & has_shape
    outputs = np.bincount(t.node[tensor_outputs], minlength=n)
    paired = np.zeros(len(t), bool)
    paired[pairs.npu] = True
    paired_outputs = np.bincount(t.node[tensor_outputs & paired], minlength=n)
    return (matches.npu_to_bench >= 0) & (outputs > paired_outputs)


def _reasons(
    npu: DumpGraph, bench: DumpGraph, pairs: TensorPairs, status: np.ndarray, level: np.ndarray,
    severity: np.ndarray, notes: dict[int, str], same_in: np.ndarray, unpaired: np.ndarray,
    quiet: np.ndarray, noise: NoiseModel | None,
) -> tuple[str, ...]:
    reason = np.full(len(npu), "", object)
    reason[status == UNMATCHED] = "no counterpart in the bench run"
    skipped = (status == SKIP) & (npu.nodes.kind != NodeKind.ROOT)
    reason[skipped & npu.nodes.has_data] = "no output data to compare"
    reason[skipped & ~npu.nodes.has_data] = "not dumped (structure only)"
    node = npu.tensors.node[pairs.npu]
    is_out = is_output(npu.tensors.role[pairs.npu])
    flagged = np.flatnonzero((status >= WARNING) | quiet)
    if not len(flagged):
        return tuple(reason.tolist())
    wanted = np.zeros(len(npu), bool)
    wanted[flagged] = True
    owners, best = _worst_output_pair(node, is_out, wanted[node], level, severity)
    text = np.full(len(npu), "", object)
    text[owners] = _pair_texts(npu, pairs, best, notes)
    origin = noise.role == NodeRole.ORIGIN if noise is not None else np.zeros(len(npu), bool)
    reason[flagged] = text[flagged]
    changed = same_in | (unpaired & (text == "")) | quiet | origin
    rows = flagged[changed[flagged]]
    margins = dict(zip(rows.tolist(), noise.margins_of(rows).tolist())) if noise is not None else {}
    for row in rows.tolist():
        line = text[row]
        if same_in[row]:
            line = f"inputs agree, outputs differ ({line})" if line else "inputs agree, outputs differ"
        elif unpaired[row] and not line:
            line = "an output has no counterpart in the bench run"
        if quiet[row]:
            line = f"within {noise.precision.kind} noise: {line}"
        elif origin[row]:
            line = f"origin ({_margin_text(margins[row])}): {line}"
        reason[row] = line
    return tuple(reason.tolist())


def _margin_text(margin: float) -> str:
    return f"{margin:.3g}x the noise allowed" if np.isfinite(margin) else "beyond any noise"


def _worst_output_pair(node: np.ndarray, is_out: np.ndarray, wanted: np.ndarray, level: np.ndarray,
                       severity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The node rows that have a wanted output pair, and for each the index of its pair with the highest
    (level, severity): a NaN severity above any number, of equals the last."""
    candidates = np.flatnonzero(is_out & wanted)
    owners = node[candidates]
    if len(owners) > 1 and (owners[1:] < owners[:-1]).any():  # pairs not in node order: sorted by all three keys
        order = candidates[np.lexsort((severity[candidates], level[candidates], owners))]
        owners = node[order]
        last = np.ones(len(order), bool)
        last[:-1] = owners[1:] != owners[:-1]
        return owners[last], order[last]
    return _worst_in_runs(candidates, owners, level[candidates], severity[candidates])


def _worst_in_runs(candidates: np.ndarray, owners: np.ndarray, level: np.ndarray,
                   severity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_worst_output_pair` of candidates whose owners come in runs, ascending: a few reductions over the runs
    instead of a sort by three keys (1.5M candidates: 0.2 s against 0.8 s)."""
    if not len(candidates):
        return owners, candidates
    first = np.ones(len(owners), bool)
    first[1:] = owners[1:] != owners[:-1]
    starts = np.flatnonzero(first)
    run = np.cumsum(first) - 1
    top = level == np.maximum.reduceat(level, starts)[run]
    nan = np.isnan(severity) & top
    highest = np.fmax.reduceat(np.where(top & ~nan, severity, -np.inf), starts)[run]
    chosen = np.where(np.logical_or.reduceat(nan, starts)[run], nan, top & (severity == highest))
    return owners[starts], candidates[np.maximum.reduceat(np.where(chosen, np.arange(len(chosen)), -1), starts)]


def _pair_reasons(npu: DumpGraph, pairs: TensorPairs, ks: np.ndarray, notes: dict[int, str]) -> dict[int, str]:
    """One line per given pair: where it is and the metric that crossed its limit."""
    return dict(zip(ks.tolist(), _pair_texts(npu, pairs, ks, notes)))


def _pair_texts(npu: DumpGraph, pairs: TensorPairs, ks: np.ndarray, notes: dict[int, str]) -> list[str]:
    """`_pair_reasons` as a list, one line per item of `ks`."""
    t = npu.tensors
    m = pairs.metrics.at(ks, ("rel_errs", "md5_diff", "cosine", "euc_rel"))  # a result's: computed for these only
    rows = pairs.npu[ks]
    stat = np.argmax(m["rel_errs"], axis=1) if len(ks) else np.zeros(0, np.int64)
    rel = (m["rel_errs"][np.arange(len(ks)), stat] if len(ks) else np.zeros(0)).tolist()
    # "{role}.{slot}: {Stat} rel err " is made once per distinct (role, slot, statistic), the value per pair
    slot_code, slots = string_codes(t.slot)
    width, stats = max(len(slots), 1), len(STAT_NAMES)
    key = (t.role[rows].astype(np.int64) * width + slot_code[rows]) * stats + stat
    distinct, at = np.unique(key, return_inverse=True)
    heads = np.array([f"{_ROLE_NAMES[k // stats // width]}.{slots[k // stats % width]}: "
                      f"{STAT_NAMES[k % stats].capitalize()} rel err " for k in distinct.tolist()], object)
    texts = list(map(operator.add, heads[at.reshape(-1)].tolist(), formatted(rel, "%.3g")))

    def where(i: int) -> str:
        row = int(rows[i])
        return f"{_ROLE_NAMES[t.role[row]]}.{t.slot[row]}"

    md5 = (m["md5_diff"] == 1.0) & (npu.info.task == "md5")
    for i in np.flatnonzero(md5).tolist():
        texts[i] = f"{where(i)}: md5 differs"
    if "cosine" in m:
        cosine, euc = m["cosine"], m["euc_rel"] if "euc_rel" in m else np.full(len(ks), np.nan)
        for i in np.flatnonzero(~np.isnan(cosine)).tolist():  # real tensors were compared
            texts[i] = f"{where(i)}: cosine {float(cosine[i]):.6f}, euclidean rel {float(euc[i]):.3g}"
    if notes:
        keys = ks.tolist()
        for i in np.flatnonzero(np.isin(ks, np.fromiter(notes, np.int64, len(notes)))).tolist():
            texts[i] = f"{where(i)}: {notes[keys[i]]}"
    return texts


_ROLE_NAMES = tuple(r.name.lower() for r in Role)


def _roll_up(npu: DumpGraph, status: np.ndarray, severity: np.ndarray) -> tuple[np.ndarray, ...]:
    parent = npu.nodes.parent
    worst = np.maximum(status, PASS).astype(np.int8)
    worst_sev = severity.copy()
    unmatched = (status == UNMATCHED).astype(np.int32)
    for rows in reversed(node_levels(npu)[1:]):
        np.maximum.at(worst, parent[rows], worst[rows])
        np.maximum.at(worst_sev, parent[rows], worst_sev[rows])
        np.add.at(unmatched, parent[rows], unmatched[rows])
    return worst, worst_sev, unmatched


