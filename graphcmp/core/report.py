"""The comparison report: a value holding both runs, the matches, pair metrics and verdicts.

`CompareReport.to_dict`/`from_dict` round-trip it through plain data, so the viewer and
`info`/`diverge` never reread dumps; `save_report`/`load_report` write and read the JSON file
(schema: docs/format.md and graphcmp/data/report.schema.json), `save_graph` one run, and
`load_saved` either file (`graphcmp.core.compare.load_document` opens `.vis` files too).
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from graphcmp.core.divergence import Analysis, analyze
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.export.columns import decode_floats, encode_floats
from graphcmp.core.export.graph_json import ENUMS, graph_from_dict, graph_to_dict
from graphcmp.core.jsonio import dumps_strict, read_json, sanitize_floats
from graphcmp.core.judge import STATUS_NAMES, NodeVerdicts, Verdict
from graphcmp.core.matching import MatchTable
from graphcmp.core.matching.base import FusedGroup, RuleNote
from graphcmp.core.noise import NoiseModel, noise_model
from graphcmp.core.outputs import write_atomic
from graphcmp.core.overflow import OVERFLOW_NAMES, OverflowLevel, overflow_levels
from graphcmp.core.pairing import TensorPairs
from graphcmp.core.records import DumpGraph, NodeKind
from graphcmp.core.rules import ERROR, Thresholds

__all__ = [
    "GRAPH_FORMAT",
    "REPORT_FORMAT",
    "SCHEMA_VERSION",
    "CompareOptions",
    "CompareReport",
    "graph_summary",
    "load_report",
    "load_saved",
    "save_graph",
    "save_report",
]

REPORT_FORMAT = "graphcmp.compare"
GRAPH_FORMAT = "graphcmp.graph"
SCHEMA_VERSION = 1
_FLOAT_METRICS = ("rel_err", "rel_errs", "abs_diff", "md5_diff", "cosine", "max_abs", "max_rel", "euc_rel",
                  "one_thousandth", "five_thousandths", "kl", "are")


@dataclass(frozen=True, slots=True)
class CompareOptions:
    """How a comparison was made."""

    fuzzy: bool = False
    matchers: tuple[str, ...] = ("exact",)
    tensor_metrics: bool = False


@dataclass(frozen=True, slots=True)
class CompareReport:
    """Everything one comparison found. ``bool(report)`` is False when any npu node is an error."""

    npu: DumpGraph
    bench: DumpGraph
    matches: MatchTable
    pairs: TensorPairs
    verdicts: NodeVerdicts
    thresholds: Thresholds
    options: CompareOptions
    tool_version: str
    noise: NoiseModel
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __bool__(self) -> bool:
        return not bool(np.any(self.verdicts.status == ERROR))

    def analysis(self) -> Analysis:
        """The divergence analysis with the default rule (computed once)."""
        if "analysis" not in self._cache:
            self._cache["analysis"] = analyze(self)
        return self._cache["analysis"]

    def overflow_levels(self) -> np.ndarray:
        """Overflow level per npu node (see `overflow_levels`; computed once)."""
        if "overflow" not in self._cache:
            self._cache["overflow"] = overflow_levels(self.npu)
        return self._cache["overflow"]

    def verdict(self, node_id: str) -> Verdict:
        """The verdict of one npu node."""
        return self.verdicts.verdict(self.npu, node_id)

    def summary(self) -> dict[str, Any]:
        """Counts a person or a script reads first."""
        m = self.matches
        return {
            "npu": _side_summary(self.npu, int(np.count_nonzero(m.npu_to_bench >= 0))),
            "bench": _side_summary(self.bench, int(np.count_nonzero(m.bench_to_npu >= 0))),
            "matched": m.matched,
            "matched_by_rule": m.count_by_rule(),
            "rule_report": m.rule_report(),
            "verdicts": self.verdicts.histogram(),
            "tensor_pairs": len(self.pairs),
            "micro_steps": int(self.npu.nodes.micro_step.max(initial=0)) + 1,
            "overflow": _overflow_counts(self.overflow_levels()),
            "precision": self.noise.precision.to_dict(),
            "roles": self.noise.role_counts(),
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain data (numpy arrays inside) ready for `orjson` with OPT_SERIALIZE_NUMPY."""
        v = self.verdicts
        return {
            "format": REPORT_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "graphcmp", "version": self.tool_version},
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "inputs": {"npu": self.npu.info.path, "bench": self.bench.info.path},
            "options": asdict(self.options),
            "thresholds": self.thresholds.to_dict(),
            "enums": {**ENUMS, "status": {name: code for code, name in STATUS_NAMES.items()}},
            "summary": self.summary(),
            "analysis": sanitize_floats(self.analysis().to_dict()),
            "noise": _noise_to_dict(self.noise),
            "overflow": self.overflow_levels(),
            "npu": graph_to_dict(self.npu),
            "bench": graph_to_dict(self.bench),
            "matches": _matches_to_dict(self.matches),
            "pairs": {"npu": self.pairs.npu, "bench": self.pairs.bench, "metrics": _metrics_to_dict(self.pairs)},
            "verdicts": {
                "status": v.status, "severity": encode_floats(v.severity),
                "input_severity": encode_floats(v.input_severity), "inputs_identical": v.inputs_identical,
                "reason": v.reason, "worst": v.worst, "worst_severity": encode_floats(v.worst_severity),
                "unmatched_below": v.unmatched_below, "pair_level": v.pair_level,
                "pair_severity": encode_floats(v.pair_severity),
            },
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any], source: str = "<report>") -> CompareReport:
        """Rebuild a report from `to_dict` data (as parsed from JSON)."""
        _check_format(doc, REPORT_FORMAT, source)
        try:
            npu, bench = graph_from_dict(doc["npu"], source), graph_from_dict(doc["bench"], source)
            matches, pairs = _matches_from(doc["matches"], len(bench)), _pairs_from(doc["pairs"])
            thresholds = Thresholds.from_dict(doc["thresholds"], source)
            overflow = overflow_levels(npu)
            return cls(
                npu=npu, bench=bench, matches=matches, pairs=pairs, verdicts=_verdicts_from(doc["verdicts"]),
                thresholds=thresholds,
                options=CompareOptions(**{k: tuple(v) if isinstance(v, list) else v
                                          for k, v in doc["options"].items()}),
                tool_version=str(doc["tool"]["version"]),
                noise=noise_model(npu, bench, matches, pairs, thresholds.noise, overflow),
                _cache={"overflow": overflow},
            )
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
            raise DumpFormatError(f"{source}: report is missing or has a malformed field ({err}); "
                                  "rerun graphcmp compare to rewrite it") from err


def _noise_to_dict(noise: NoiseModel) -> dict[str, Any]:
    """The noise model's findings: summary, and per npu node its role, margin and errors."""
    return {
        **sanitize_floats(noise.summary()),
        "first_origin": noise.first_origin,
        "role": noise.role,
        "dtype_pair": noise.dtype_pair,
        "margin": encode_floats(noise.margin),
        "fresh_margin": encode_floats(noise.fresh_margin),
        "output_error": encode_floats(noise.output_error),
        "input_error": encode_floats(noise.input_error),
        "unit": encode_floats(noise.unit),
    }


def _overflow_counts(levels: np.ndarray) -> dict[str, int]:
    levels = np.bincount(levels, minlength=len(OverflowLevel))
    return {name: int(levels[code]) for code, name in OVERFLOW_NAMES.items() if code and levels[code]}


def _side_summary(graph: DumpGraph, matched: int) -> dict[str, Any]:
    return {**graph_summary(graph), "matched": matched, "unmatched": len(graph) - matched}


def graph_summary(graph: DumpGraph) -> dict[str, Any]:
    """Counts of one run: nodes (by kind), nodes without data, tensors, what was missing."""
    kinds = np.bincount(graph.nodes.kind, minlength=len(NodeKind))
    return {
        "path": graph.info.path,
        "format": graph.info.format,
        "task": graph.info.task,
        "rank": graph.info.rank,
        "step": graph.info.step,
        "nodes": len(graph),
        "micro_steps": int(graph.nodes.micro_step.max(initial=0)) + 1,
        "by_kind": {k.name.lower(): int(kinds[k]) for k in NodeKind if kinds[k]},
        "without_data": int(np.count_nonzero(~graph.nodes.has_data & (graph.nodes.kind != NodeKind.ROOT)
                                             & (graph.nodes.kind != NodeKind.GROUP))),
        "tensors": len(graph.tensors),
        "missing": list(graph.info.missing),
    }


def _metrics_to_dict(pairs: TensorPairs) -> dict[str, Any]:
    return {name: encode_floats(col) if col.dtype.kind == "f" else col for name, col in pairs.metrics.items()}


def _matches_to_dict(m: MatchTable) -> dict[str, Any]:
    return {
        "npu_to_bench": m.npu_to_bench, "bench_to_npu": m.bench_to_npu, "rule": m.rule, "rules": m.rules,
        "groups": [[list(g.npu), list(g.bench), g.rule, g.via] for g in m.groups],
        "notes": [[n.rule, n.where, n.text, n.matched, n.problem] for n in m.notes],
        "conflicts": list(m.conflicts),
    }


def _matches_from(doc: dict[str, Any], bench_len: int) -> MatchTable:
    npu_to_bench = np.asarray(doc["npu_to_bench"], np.int32)
    if "bench_to_npu" in doc:
        bench_to_npu = np.asarray(doc["bench_to_npu"], np.int32)
    else:
        bench_to_npu = np.full(bench_len, -1, np.int32)
        matched = np.flatnonzero(npu_to_bench >= 0)
        bench_to_npu[npu_to_bench[matched]] = matched
    return MatchTable(
        npu_to_bench, bench_to_npu, np.asarray(doc["rule"], np.int8), tuple(doc["rules"]),
        groups=tuple(FusedGroup(tuple(n), tuple(b), int(rule), int(via)) for n, b, rule, via in doc.get("groups", ())),
        notes=tuple(RuleNote(*note) for note in doc.get("notes", ())),
        conflicts=tuple(doc.get("conflicts", ())),
    )


def _pairs_from(doc: dict[str, Any]) -> TensorPairs:
    metrics = {name: decode_floats(col) if isinstance(col, dict) else np.asarray(col, bool)
               for name, col in doc["metrics"].items()}
    n = len(doc["npu"])
    for name in ("rel_errs", "abs_diff"):
        if name in metrics:
            metrics[name] = metrics[name].reshape(n, 4)
    return TensorPairs(np.asarray(doc["npu"], np.int32), np.asarray(doc["bench"], np.int32), metrics)


def _verdicts_from(doc: dict[str, Any]) -> NodeVerdicts:
    return NodeVerdicts(
        status=np.asarray(doc["status"], np.int8), severity=decode_floats(doc["severity"]),
        input_severity=decode_floats(doc["input_severity"]),
        inputs_identical=np.asarray(doc["inputs_identical"], bool), reason=tuple(doc["reason"]),
        worst=np.asarray(doc["worst"], np.int8), worst_severity=decode_floats(doc["worst_severity"]),
        unmatched_below=np.asarray(doc["unmatched_below"], np.int32),
        pair_level=np.asarray(doc["pair_level"], np.int8), pair_severity=decode_floats(doc["pair_severity"]),
    )


def _check_format(doc: Any, expected: str, source: str) -> None:
    if not isinstance(doc, dict) or doc.get("format") != expected:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise DumpFormatError(f"{source}: not a graphcmp {expected.split('.')[1]} file (format is {found!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise DumpFormatError(f"{source}: schema version {doc.get('schema_version')!r} is not supported "
                              f"(this graphcmp reads {SCHEMA_VERSION})")


def save_report(report: CompareReport, path: str | os.PathLike[str]) -> None:
    """Write `report` as JSON to `path` (parent folders are created)."""
    write_atomic(path, dumps_strict(report.to_dict()))


def save_graph(graph: DumpGraph, path: str | os.PathLike[str], tool_version: str) -> None:
    """Write one run as a graphcmp graph JSON document."""
    doc = {"format": GRAPH_FORMAT, "schema_version": SCHEMA_VERSION,
           "tool": {"name": "graphcmp", "version": tool_version}, "enums": ENUMS, "run": graph_to_dict(graph)}
    write_atomic(path, dumps_strict(doc))


def load_saved(path: str | os.PathLike[str]) -> CompareReport | DumpGraph:
    """Read a graphcmp report or graph JSON file (`save_report`, `save_graph`)."""
    doc = read_json(path, salvage=False).value
    if isinstance(doc, dict) and doc.get("format") == GRAPH_FORMAT:
        _check_format(doc, GRAPH_FORMAT, str(path))
        return graph_from_dict(doc["run"], str(path))
    return CompareReport.from_dict(doc, str(path))


def load_report(path: str | os.PathLike[str]) -> CompareReport:
    """Read a comparison report written by `save_report`."""
    return CompareReport.from_dict(read_json(path, salvage=False).value, str(path))
