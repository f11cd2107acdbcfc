"""The one answer of a comparison: the runs agree, differ, or too little was compared to say.

`compare`, `diverge` and a job of many runs all end in an `Outcome`, decided here and nowhere
else. A comparison **differs** when `judge` gave an error verdict or the noise model found an
origin (the two go together, docs/noise.md), or, when asked, when the npu run overflows. It
**agrees** only when it did not differ *and* it compared enough to speak for both runs:

* at least one tensor pair was compared;
* each run had most (`MIN_MATCHED_SHARE`, one half) of its nodes that hold data matched: when
  more than half of a run has no partner, the unmatched part outweighs what was compared;
* neither run is incomplete (`RunInfo.missing`: a file cut short, dump files that could not be
  joined ...): what could not be read was not compared. Notes about call stacks only (stack.json)
  and later iterations of a kernel dump cost no comparison and do not count.

Otherwise it is **inconclusive**. The exit code is 0 only for *agree*: a script that reads
non-zero as "not shown equal" stays right. Each inconclusive outcome carries hints naming the
options that usually fix it (mapping options between frameworks, a mapping file for renamed
modules, leaving out ``--no-fuzzy`` for shifted call counters).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from graphcmp.core.records import DumpGraph, NodeKind
from graphcmp.core.rules import ERROR

if TYPE_CHECKING:  # types only: a job's outcome needs none of the analysis below it (keeps `info results/` quick)
    from graphcmp.core.divergence import Analysis, Comparison
    from graphcmp.core.matching import MatchTable

    class _Options(Protocol):
        @property
        def matchers(self) -> tuple[str, ...]: ...
        @property
        def fuzzy(self) -> bool: ...

    class Reported(Comparison, Protocol):
        """What the outcome reads of a comparison (a `CompareReport` is one): a `Comparison` with its options
        and its analysis."""

        @property
        def options(self) -> _Options: ...
        def analysis(self) -> Analysis: ...

__all__ = [
    "AGREE",
    "DIFFER",
    "INCONCLUSIVE",
    "MIN_MATCHED_SHARE",
    "Coverage",
    "Outcome",
    "SideCoverage",
    "coverage",
    "decide",
    "job_outcome",
    "report_outcome",
]

AGREE, DIFFER, INCONCLUSIVE = "agree", "differ", "inconclusive"
VERDICTS = (AGREE, DIFFER, INCONCLUSIVE)

MIN_MATCHED_SHARE = 0.5
"""Share of a run's nodes holding data that must be matched before the comparison can speak for it: a
majority, so that what was compared outweighs what was not."""

_EXIT = {AGREE: 0, DIFFER: 1, INCONCLUSIVE: 1}

_CONTEXT_ONLY = re.compile(r"(^|: )stack\.json: |later iteration\(s\) not read")
"""Notes of `RunInfo.missing` that cost no comparison: call stacks (shown, never compared) and later iterations
of a kernel dump (the first is compared whole). Every other note makes a run incomplete."""


@dataclass(frozen=True, slots=True)
class SideCoverage:
    """How much of one run was matched: its nodes holding data (no root, no group) and how many have a partner."""

    nodes: int
    matched: int

    @property
    def share(self) -> float:
        """`matched` / `nodes`; 0 when the run holds no data at all."""
        return self.matched / self.nodes if self.nodes else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "matched": self.matched, "share": round(self.share, 4)}


@dataclass(frozen=True, slots=True)
class Coverage:
    """What a comparison covered: each run's matched nodes and the tensor pairs compared."""

    npu: SideCoverage
    bench: SideCoverage
    tensor_pairs: int

    def to_dict(self) -> dict[str, Any]:
        return {"npu": self.npu.to_dict(), "bench": self.bench.to_dict(), "tensor_pairs": self.tensor_pairs}


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verdict of a comparison (or of a job), the line that says why, and what to try.

    Attributes
    ----------
    verdict : str
        ``"agree"``, ``"differ"`` or ``"inconclusive"``.
    reason : str
        One line saying why.
    hints : tuple of str
        Options that usually raise the coverage (empty when none applies).
    coverage : Coverage or None
        The numbers behind an inconclusive verdict (None for a job).
    """

    verdict: str
    reason: str
    hints: tuple[str, ...] = ()
    coverage: Coverage | None = None

    @property
    def exit_code(self) -> int:
        """0 when the runs agree, 1 when they differ or the comparison is inconclusive."""
        return _EXIT[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "hints": list(self.hints),
                **({"coverage": self.coverage.to_dict()} if self.coverage is not None else {})}

    @classmethod
    def from_dict(cls, doc: Any) -> Outcome | None:
        """The outcome a summary recorded, or None when `doc` is not one (an older or damaged entry)."""
        if not (isinstance(doc, dict) and doc.get("verdict") in VERDICTS and isinstance(doc.get("reason"), str)):
            return None
        hints = doc.get("hints")
        return cls(doc["verdict"], doc["reason"],
                   tuple(h for h in hints if isinstance(h, str)) if isinstance(hints, list) else ())


def coverage(npu: DumpGraph, bench: DumpGraph, matches: MatchTable, tensor_pairs: int) -> Coverage:
    """Each run's nodes holding data and how many of them are matched, and the tensor pairs compared.

    Examples
    --------
    >>> from graphcmp.core.matching import default_matchers, match_graphs
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1], "Max": 1, "Min": 1, "Mean": 1, "Norm": 1}
    >>> npu = parse_msprobe({"data": {"Functional.relu.0.forward": {"output": [t]}}})
    >>> bench = parse_msprobe({"data": {"Torch.relu.0.forward": {"output": [t]}}})
    >>> coverage(npu, bench, match_graphs(npu, bench, default_matchers()), 0).to_dict()["npu"]
    {'nodes': 1, 'matched': 0, 'share': 0.0}
    """
    return Coverage(_side(npu, matches.npu_to_bench), _side(bench, matches.bench_to_npu), int(tensor_pairs))


def _side(graph: DumpGraph, partner: np.ndarray) -> SideCoverage:
    nodes = graph.nodes
    data = nodes.has_data & (nodes.kind != NodeKind.ROOT) & (nodes.kind != NodeKind.GROUP)
    return SideCoverage(int(np.count_nonzero(data)), int(np.count_nonzero(data & (partner >= 0))))


def decide(
    cov: Coverage,
    *,
    differs: str = "",
    npu: DumpGraph | None = None,
    bench: DumpGraph | None = None,
    matchers: Sequence[str] = (),
    fuzzy: bool = True,
    unexplained: str = "",
) -> Outcome:
    """The outcome of one comparison from its coverage and whether it found a difference.

    Parameters
    ----------
    cov : Coverage
        What the comparison covered.
    differs : str
        One line naming the difference found (the first divergence, error verdicts, an overflow), or
        "" when none was found.
    npu, bench : DumpGraph, optional
        The runs: their formats, frameworks and notes of what could not be read (`RunInfo.missing`).
    matchers : sequence of str
        The rules the comparison used (`CompareOptions.matchers`), so hints never repeat them.
    fuzzy : bool
        Whether calls were aligned where counters shifted (``--fuzzy``, the default).
    unexplained : str
        One line saying the measured noise is beyond what the precision can produce ("" when it is not):
        a comparison that found no origin under such noise is inconclusive, never "agree".

    Examples
    --------
    >>> cov = Coverage(SideCoverage(316, 9), SideCoverage(149, 148), 8)
    >>> decide(cov).verdict, decide(cov).exit_code
    ('inconclusive', 1)
    >>> decide(cov).reason
    'inconclusive: only 9 of 316 npu nodes holding data were matched (2.8%)'
    >>> decide(Coverage(SideCoverage(10, 10), SideCoverage(10, 10), 30)).verdict
    'agree'
    >>> decide(cov, differs="first divergence at Functional.linear.2.forward").verdict
    'differ'
    """
    gaps = _gaps(cov, npu, bench) + ([unexplained] if unexplained else [])
    hints = _hints(cov, npu, bench, matchers, fuzzy) if gaps else ()
    if unexplained and not fuzzy:
        hints = (*hints, "calls paired across shifted call counters? leave out --no-fuzzy")
    if differs:
        reason = f"differ: {differs}" + (f" (note: {gaps[0]})" if gaps else "")
        return Outcome(DIFFER, reason, hints, cov)
    if gaps:
        return Outcome(INCONCLUSIVE, "inconclusive: " + "; ".join(gaps), hints, cov)
    return Outcome(AGREE, f"agree: {cov.npu.matched} of {cov.npu.nodes} npu nodes holding data compared "
                          f"({cov.tensor_pairs} tensor pairs), no difference beyond noise", (), cov)


def _gaps(cov: Coverage, npu: DumpGraph | None, bench: DumpGraph | None) -> list[str]:
    """Why the comparison cannot speak for both runs (empty when it can)."""
    sides = (("npu", cov.npu), ("bench", cov.bench))
    gaps = [f"the {name} run holds no node with data" for name, side in sides if not side.nodes]
    if not gaps:
        gaps = [f"only {side.matched} of {side.nodes} {name} nodes holding data were matched "
                f"({100 * side.share:.2g}%)" for name, side in sides if side.share < MIN_MATCHED_SHARE]
        if not cov.tensor_pairs:
            gaps.append("no tensor pair was compared")
    for name, graph in (("npu", npu), ("bench", bench)):
        lost = [note for note in graph.info.missing if not _CONTEXT_ONLY.search(note)] if graph is not None else []
        if lost:
            gaps.append(f"the {name} run is incomplete: {lost[0]}" + (f" (and {len(lost) - 1} more)" if len(lost) > 1
                                                                         else ""))
    return gaps


def _hints(cov: Coverage, npu: DumpGraph | None, bench: DumpGraph | None, matchers: Sequence[str],
           fuzzy: bool) -> tuple[str, ...]:
    """Options that usually match more of two runs, for a comparison that matched too little."""
    if (npu is None or bench is None or not (cov.npu.nodes and cov.bench.nodes)
            or min(cov.npu.share, cov.bench.share) >= MIN_MATCHED_SHARE):
        return ()  # nothing to match on one side: no option helps
    rules = {m.split("=", 1)[0] for m in matchers}
    if npu.info.format != bench.info.format:
        return (f"the runs are of different formats ({npu.info.format} against {bench.info.format}) and their "
                "node names do not correspond: compare two runs of the same format, or pair nodes with "
                "--me-mapping FILE or --matches FILE",)
    if npu.info.framework and bench.info.framework and npu.info.framework != bench.info.framework:
        if {"layer-mapping", "api-mapping"} <= rules:
            return ("different frameworks: check the mapping files (see the rule report above); "
                    "docs/matching.md",)
        return (f"different frameworks ({npu.info.framework} against {bench.info.framework}): add "
                "--layer-mapping --api-mapping (and --fused for ops one framework splits), docs/matching.md",)
    hints = []
    if "layer-mapping" not in rules:
        hints.append("modules renamed between the runs? give a mapping file: --layer-mapping FILE "
                     "(docs/matching.md)")
    if not fuzzy:
        hints.append("call counters shifted by an extra call? leave out --no-fuzzy")
    return tuple(hints)


def report_outcome(report: Reported, *, overflow: bool = False) -> Outcome:
    """The outcome of a comparison report (with `overflow`, an npu overflow is a difference too).

    Examples
    --------
    >>> from graphcmp.core.compare import compare_graphs
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...      "Mean": 0.5, "Norm": 1.0}
    >>> run = parse_msprobe({"data": {"Functional.relu.0.forward": {"input_args": [t], "output": [t]}}})
    >>> report_outcome(compare_graphs(run, run)).verdict
    'agree'
    >>> report_outcome(compare_graphs(run, parse_msprobe({"data": {}}))).reason.split("; ")[0]
    'inconclusive: the bench run holds no node with data'
    """
    cov = coverage(report.npu, report.bench, report.matches, len(report.pairs))
    return decide(cov, differs=_difference(report, overflow), npu=report.npu, bench=report.bench,
                  matchers=report.options.matchers, fuzzy=report.options.fuzzy, unexplained=_unexplained(report))


def _unexplained(report: Reported) -> str:
    """One line when the noise measured before any origin is beyond what the precision can produce, else ""."""
    noise = report.noise
    if noise is None or noise.explains_noise(report.npu.nodes.direction):
        return ""
    level, row = noise.forward_noise(report.npu.nodes.direction)
    where = f" (at {report.npu.nodes.ids[row]})" if row >= 0 else ""
    return (f"the forward noise level {level:.3g}{where} is beyond what {noise.precision.kind} can produce "
            f"(at most {noise.ceiling:.2g}, half the digits of unit roundoff {noise.precision.unit_roundoff:.2g}): "
            "the paired calls are not the same calls, or the runs differ")


def _difference(report: Reported, overflow: bool) -> str:
    """One line naming what differs (the first divergence, error verdicts, an overflow), "" for nothing."""
    first = report.analysis().first
    if first is not None:
        return f"first divergence at {first.node} ({first.cause})"
    errors = int(np.count_nonzero(report.verdicts.status == ERROR))
    if errors:
        return f"{errors} npu node{'s' if errors > 1 else ''} with an error verdict"
    if overflow:
        levels = report.overflow_levels()
        if np.any(levels > 0):
            return f"{int(np.count_nonzero(levels > 0))} npu nodes overflow"
    return ""


def job_outcome(index: Mapping[str, Any]) -> Outcome:
    """The outcome of a job of many runs (a batch or merged index): the worst of its runs'.

    A job differs when it has an origin or a run differs; it is inconclusive when a run is, or when a
    (step, rank) is only on one side (it was not compared); otherwise it agrees. Runs that failed
    (bad input) are the caller's to report.

    Examples
    --------
    >>> run = {"step": 0, "rank": 0, "error": None, "summary": {"outcome": {"verdict": "agree", "reason": "agree: x"}}}
    >>> job_outcome({"runs": [run], "missing": {"npu_only": ["step1_rank0"], "bench_only": []},
    ...              "analysis": {"origin": None}}).reason
    'inconclusive: step1_rank0 is only on the npu side (not compared)'
    """
    origin = (index.get("analysis") or {}).get("origin")
    worst: dict[str, list[str]] = {DIFFER: [], INCONCLUSIVE: []}
    hints: list[str] = []
    for run in index.get("runs", ()):
        if run.get("error") is not None:
            continue
        label = f"step {run.get('step')} " + ("merged" if run.get("merged") else f"rank {run.get('rank')}")
        outcome = Outcome.from_dict((run.get("summary") or {}).get("outcome")) or _legacy(run)
        if outcome.verdict != AGREE:
            worst[outcome.verdict].append(f"{label}: {outcome.reason.split(': ', 1)[-1]}")
            hints.extend(h for h in outcome.hints if h not in hints)
    missing = index.get("missing") or {}
    for side in ("npu", "bench"):
        worst[INCONCLUSIVE].extend(f"{label} is only on the {side} side (not compared)"
                                   for label in missing.get(f"{side}_only", ()))
    if origin:
        where = f"rank {origin.get('rank')}, step {origin.get('step')}"
        return Outcome(DIFFER, f"differ: first divergence on {where}: {origin.get('node')}", tuple(hints))
    for verdict in (DIFFER, INCONCLUSIVE):
        if worst[verdict]:
            more = len(worst[verdict]) - 1
            return Outcome(verdict, f"{verdict}: {worst[verdict][0]}" + (f" (and {more} more)" if more else ""),
                           tuple(hints))
    runs = sum(run.get("error") is None for run in index.get("runs", ()))
    return Outcome(AGREE, f"agree: {runs} run{'s' if runs != 1 else ''} compared, no difference beyond noise")


def _legacy(run: Mapping[str, Any]) -> Outcome:
    """An entry written before outcomes were recorded: differ on an error or a first divergence, else inconclusive."""
    summary = run.get("summary") or {}
    errors = (summary.get("verdicts") or {}).get("error", 0)
    if run.get("first") or errors:
        return Outcome(DIFFER, "differ: error verdicts")
    return Outcome(INCONCLUSIVE, "inconclusive: the entry records no outcome (made by an older graphcmp); "
                                 "compare again")
