"""The comparison report: a value holding both runs, the matches, pair metrics and verdicts.

`CompareReport.to_dict`/`from_dict` round-trip it through plain data, so the viewer and
`info`/`diverge` never reread dumps; `save_report`/`load_report` write and read the JSON file
(schema: docs/format.md and graphcmp/data/report.schema.json), `save_graph` one run, and
`load_saved` either file (`graphcmp.core.compare.load_document` opens `.vis` files too).
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from graphcmp.core.dataflow import flow_edges, keep_flow_edges
from graphcmp.core.divergence import Analysis, analyze
from graphcmp.core.errors import DumpFormatError, GraphcmpError, InternalError
from graphcmp.core.export.columns import encode_floats
from graphcmp.core.export.graph_json import ENUMS, graph_from_dict, graph_to_dict
from graphcmp.core.fields import Fields
from graphcmp.core.forking import Forked, Sender, can_fork_aside
from graphcmp.core.jsonio import dumps_strict, read_json, sanitize_floats
from graphcmp.core.judge import STATUS_NAMES, NodeVerdicts, Verdict
from graphcmp.core.matching import MatchTable
from graphcmp.core.matching.base import FusedGroup, RuleNote
from graphcmp.core.noise import Calibration, NodeRole, NoiseModel, Precision, noise_model
from graphcmp.core.npzio import begin_npz, is_npz, read_npz, write_npz
from graphcmp.core.outcome import report_outcome
from graphcmp.core.outputs import sibling_part, write_atomic
from graphcmp.core.overflow import OVERFLOW_NAMES, OverflowLevel, overflow_levels
from graphcmp.core.pairing import STAT_COLUMNS, PairMetrics, TensorPairs
from graphcmp.core.records import DumpGraph, EdgeTable, NodeKind, string_codes
from graphcmp.core.rules import ERROR, NoiseRule, Status, Thresholds
from graphcmp.core.texts import CodedTexts, TextCodes, UniqueTexts, code_dtype

__all__ = [
    "GRAPH_FORMAT",
    "REPORT_FORMAT",
    "SCHEMA_VERSION",
    "CompareOptions",
    "CompareReport",
    "RunsWriting",
    "graph_summary",
    "is_json_path",
    "load_report",
    "load_saved",
    "read_document",
    "runs_written_meanwhile",
    "save_graph",
    "save_report",
]

REPORT_FORMAT = "graphcmp.compare"
GRAPH_FORMAT = "graphcmp.graph"
SCHEMA_VERSION = 1
_FLOAT_METRICS = ("rel_err", "rel_errs", "abs_diff", "md5_diff", "cosine", "max_abs", "max_rel", "euc_rel",
                  "one_thousandth", "five_thousandths", "kl", "are", "mean_abs", "rmse", "max_rel_nz",
                  "mean_rel")


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

    def flow_edges(self) -> dict[str, EdgeTable]:
        """Per side (``npu``, ``bench``), the data-flow edges a drawing shows (`dataflow.flow_edges`: kept with
        each run, read from a result file or recovered once)."""
        return {"npu": flow_edges(self.npu), "bench": flow_edges(self.bench)}

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
            "outcome": report_outcome(self).to_dict(),
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain data (numpy arrays inside) ready for `orjson` with OPT_SERIALIZE_NUMPY."""
        return self._document(encode_floats)

    def _document(self, floats: Callable[[np.ndarray], dict[str, Any]],
                  runs: Callable[[DumpGraph], Any] = graph_to_dict, *, stat_columns: bool = True,
                  flows: Callable[[DumpGraph, DumpGraph], Any] | None = None) -> dict[str, Any]:
        """`to_dict` with the report's own float columns written by `floats` (`encode_floats`, or
        `_npz_floats` for the npz container, which holds inf and NaN itself), each run by `runs` and their
        recovered data-flow edges by `flows` (default `_flows_of`); without the pair metrics that loading computes
        again (`STAT_COLUMNS`) unless `stat_columns`."""
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
            "noise": _noise_to_dict(self.noise, floats),
            "overflow": self.overflow_levels(),
            "flows": (flows or _flows_of)(self.npu, self.bench),
            "npu": runs(self.npu),
            "bench": runs(self.bench),
            "matches": _matches_to_dict(self.matches),
            "pairs": {"npu": self.pairs.npu, "bench": self.pairs.bench,
                      "metrics": _metrics_to_dict(self.pairs, floats, stat_columns)},
            "verdicts": {
                "status": v.status, "severity": floats(v.severity),
                "input_severity": floats(v.input_severity), "inputs_identical": v.inputs_identical,
                "reason": v.reason, "worst": v.worst, "worst_severity": floats(v.worst_severity),
                "unmatched_below": v.unmatched_below, "pair_level": v.pair_level,
                "pair_severity": floats(v.pair_severity),
            },
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any], source: str = "<report>") -> CompareReport:
        """Rebuild a report from `to_dict` data (as parsed from JSON).

        Raises
        ------
        DumpFormatError
            If the document is not a graphcmp report, or a field is missing, of the wrong type or
            length (the message names the field): the file is damaged or not ours.
        InternalError
            If a document that passed those checks still does not rebuild: a graphcmp bug.
        """
        _check_format(doc, REPORT_FORMAT, source)
        f = Fields(doc, source)
        try:  # every read below goes through `Fields`, which raises DumpFormatError for bad input
            npu = graph_from_dict(f.value("npu"), source, "npu")
            bench = graph_from_dict(f.value("bench"), source, "bench")
            _keep_stored_flows(f, npu, bench)
            matches = _matches_from(f.child("matches"), len(npu), len(bench))
            thresholds = _thresholds_from(f.child("thresholds"))
            pairs = _pairs_from(f.child("pairs"), npu, bench, thresholds)
            overflow = (f.codes("overflow", len(npu), map(int, OverflowLevel)) if f.has("overflow")
                        else overflow_levels(npu))
            noise = _noise_from(f.child("noise"), len(npu), len(pairs))
            if noise is None:  # a file written before the whole model was stored: compute it again
                noise = noise_model(npu, bench, matches, pairs, thresholds.noise, overflow)
            return cls(npu=npu, bench=bench, matches=matches, pairs=pairs,
                       verdicts=_verdicts_from(f.child("verdicts"), len(npu), len(pairs)), thresholds=thresholds,
                       options=_options_from(f.child("options")), tool_version=f.child("tool").value("version", str),
                       noise=noise, _cache={"overflow": overflow})
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
            raise InternalError(f"{source}: a report that passed graphcmp's checks could not be rebuilt ({err!r}); "
                                "this is a graphcmp bug: please report it with the traceback above") from err


def _flows_of(npu: DumpGraph, bench: DumpGraph) -> dict[str, Any]:
    """The recovered data-flow edges of each side without edges of its own (a graph's own are in the graph)."""
    flows = {}
    for side, graph in (("npu", npu), ("bench", bench)):
        if not len(graph.edges):
            edges = flow_edges(graph)
            flows[side] = {"src": edges.src, "dst": edges.dst}
    return flows


def _keep_stored_flows(f: Fields, npu: DumpGraph, bench: DumpGraph) -> None:
    """The recovered data-flow edges a result holds become its runs' (`dataflow.keep_flow_edges`); a file written
    before they were stored has none, and `dataflow.flow_edges` recovers them on first use."""
    if not f.has("flows"):
        return
    for side, graph in (("npu", npu), ("bench", bench)):
        if not len(graph.edges) and f.child("flows").has(side):
            g = f.child("flows").child(side)
            src = g.rows("src", None, len(graph), none=False)
            keep_flow_edges(graph, EdgeTable(src=src, dst=g.rows("dst", len(src), len(graph), none=False),
                                             control=np.zeros(len(src), bool)))


_NOISE_NODE_FLOATS = ("margin", "fresh_margin", "output_error", "input_error", "unit", "fresh_error",
                      "argument_error", "reduction", "growth_limit")


def _noise_to_dict(noise: NoiseModel, floats: Callable[[np.ndarray], dict[str, Any]]) -> dict[str, Any]:
    """The noise model: summary, per npu node its role, margins and errors, per pair its error (so loading
    a report needs no recomputation)."""
    return {
        **sanitize_floats(noise.summary()),
        "first_origin": noise.first_origin,
        "role": noise.role,
        "dtype_pair": noise.dtype_pair,
        **{name: floats(getattr(noise, name)) for name in _NOISE_NODE_FLOATS},
        "shape_changed": noise.shape_changed,
        "leaves": noise.leaves,
        "origins": noise.origin_rows,
        "pair_error": floats(noise.pair_error),
        "fresh_pair": noise.fresh_pair,
        "producer": noise.producer,
        **({"measured": noise.measured} if noise.reference else {}),  # with "reference" (the summary's)
    }


def _noise_from(f: Fields, n: int, pairs: int) -> NoiseModel | None:
    """The stored noise model; None for a file that holds only its summary and node findings."""
    if not all(f.has(k) for k in ("pair_error", "fresh_pair", "producer", "leaves", "origins", "shape_changed",
                                   *_NOISE_NODE_FLOATS)):
        return None
    precision = f.child("precision")
    dtype_pairs = []
    for item in precision.items("dtype_pairs"):
        pair = Fields(item, f.source, f"{f.path}.precision.dtype_pairs")
        dtype_pairs.append((pair.value("npu", str), pair.value("bench", str), pair.value("nodes", int)))
    calibration = []
    for item in f.items("calibration"):
        c = Fields(item, f.source, f"{f.path}.calibration")
        calibration.append(Calibration(c.value("direction", str), c.value("kind", str), c.value("calls", int),
                                       _number(c, "growth_limit")))
    rule = f.child("rule")
    return NoiseModel(
        pair_error=f.floats("pair_error", pairs), fresh_pair=f.bools("fresh_pair", pairs),
        producer=f.rows("producer", pairs, n, dtype=np.int64),
        **{name: f.floats(name, n) for name in _NOISE_NODE_FLOATS},
        shape_changed=f.bools("shape_changed", n), role=f.codes("role", n, map(int, NodeRole)),
        leaves=f.rows("leaves", None, n, none=False, dtype=np.int64),
        origin_rows=f.rows("origins", None, n, none=False, dtype=np.int64),
        first_origin=_row(f, "first_origin", n), noise_level=_number(f, "noise_level"),
        fresh_limit=_number(f, "fresh_limit"), calibration=tuple(calibration),
        precision=Precision(precision.value("kind", str), tuple(dtype_pairs), _number(precision, "unit_roundoff")),
        dtype_pair=f.rows("dtype_pair", n, len(dtype_pairs), dtype=np.int16),
        rule=NoiseRule(_number(rule, "origin_margin"), _number(rule, "quantile"), rule.value("min_samples", int),
                       # a result written before the tensor margin judged every call at its origin margin
                       _number(rule, "tensor_origin_margin" if rule.has("tensor_origin_margin") else "origin_margin")),
        **_reference_from(f, n),
    )


def _reference_from(f: Fields, n: int) -> dict[str, Any]:
    """The reference run's path and the nodes whose noise it measured, when the comparison had one."""
    if not f.has("reference"):
        return {}
    return {"reference": f.child("reference").value("path", str), "measured": f.bools("measured", n)}


def _row(f: Fields, key: str, size: int) -> int:
    """A single row number of a table of `size` rows, or -1 for none."""
    row = f.value(key, int)
    if not -1 <= row < size:
        raise f.error(key, f"is {row}, outside the {size} rows it indexes (or -1: none)")
    return row


_NUMBER_TEXT = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def _number(f: Fields, key: str) -> float:
    """A number written by `sanitize_floats` (non-finite values as text)."""
    value = f.value(key, int, float, str)
    if isinstance(value, str):
        if value not in _NUMBER_TEXT:
            raise f.error(key, f"is {value!r}, expected a number, \"inf\", \"-inf\" or \"nan\"")
        return _NUMBER_TEXT[value]
    return float(value)


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


def _metrics_to_dict(pairs: TensorPairs, floats: Callable[[np.ndarray], dict[str, Any]],
                     stat_columns: bool) -> dict[str, Any]:
    """The pair metric columns (`STAT_COLUMNS` only when `stat_columns`: a reader of the npz container computes
    them from the runs' statistics, `PairMetrics`)."""
    m = pairs.metrics
    names = [name for name in m if stat_columns or name not in STAT_COLUMNS]
    return {name: floats(m[name]) if m[name].dtype.kind == "f" else m[name] for name in names}


def _npz_floats(values: np.ndarray) -> dict[str, Any]:
    """A float column for the npz container: `encode_floats`'s shape with the values themselves in float64 (inf
    and NaN included, every NaN the one `decode_floats` restores), so no special indices are listed and undone."""
    values = np.asarray(values, np.float64)
    nan = np.isnan(values)
    return {"values": np.where(nan, np.nan, values) if nan.any() else values, "special": {}}


def _matches_to_dict(m: MatchTable) -> dict[str, Any]:
    return {
        "npu_to_bench": m.npu_to_bench, "bench_to_npu": m.bench_to_npu, "rule": m.rule, "rules": m.rules,
        "groups": [[list(g.npu), list(g.bench), g.rule, g.via] for g in m.groups],
        "notes": [[n.rule, n.where, n.text, n.matched, n.problem] for n in m.notes],
        "conflicts": list(m.conflicts),
    }


def _matches_from(f: Fields, npu_len: int, bench_len: int) -> MatchTable:
    npu_to_bench = f.rows("npu_to_bench", npu_len, bench_len)
    if f.has("bench_to_npu"):
        bench_to_npu = f.rows("bench_to_npu", bench_len, npu_len)
    else:
        bench_to_npu = np.full(bench_len, -1, np.int32)
        matched = np.flatnonzero(npu_to_bench >= 0)
        bench_to_npu[npu_to_bench[matched]] = matched
    groups = []
    for item in f.items("groups", default=[]):
        if not (isinstance(item, list) and len(item) == 4 and _int_lists(item[:2]) and _ints(item[2:])):
            raise f.error("groups", "holds an item that is not [npu rows, bench rows, rule, via]")
        npu, bench, rule, via = item
        groups.append(FusedGroup(tuple(npu), tuple(bench), rule, via))
    notes = []
    for item in f.items("notes", default=[]):
        if not (isinstance(item, list) and len(item) == 5 and all(isinstance(x, str) for x in (*item[:3], item[4]))
                and _ints(item[3:4])):
            raise f.error("notes", "holds an item that is not [rule, where, text, matched, problem]")
        notes.append(RuleNote(*item))
    rules = f.strings("rules")
    return MatchTable(npu_to_bench, bench_to_npu, f.rows("rule", npu_len, len(rules), dtype=np.int8), rules,
                      groups=tuple(groups), notes=tuple(notes), conflicts=f.strings("conflicts") if f.has(
                          "conflicts") else ())


def _ints(values: list[Any]) -> bool:
    return all(type(v) is int for v in values)


def _int_lists(values: list[Any]) -> bool:
    return all(isinstance(v, list) and _ints(v) for v in values)


def _pairs_from(f: Fields, npu: DumpGraph, bench: DumpGraph, thresholds: Thresholds) -> TensorPairs:
    """The pairs and their metric columns; the `STAT_COLUMNS` a file leaves out (the npz container) are computed
    from the runs' statistics when first read (`PairMetrics`), those it holds (JSON, older npz files) are read."""
    npu_rows = f.rows("npu", None, len(npu.tensors), none=False)
    n = len(npu_rows)
    bench_rows = f.rows("bench", n, len(bench.tensors), none=False)
    metrics_f = f.child("metrics")
    metrics = {}
    for name, column in metrics_f.doc.items():
        width = 4 if name in STAT_COLUMNS else None
        metrics[name] = metrics_f.floats(name, n, width) if isinstance(column, dict) else metrics_f.bools(name, n)
    return TensorPairs(npu_rows, bench_rows,
                       PairMetrics(metrics, npu.tensors, bench.tensors, npu_rows, bench_rows, thresholds))


def _verdicts_from(f: Fields, n: int, pairs: int) -> NodeVerdicts:
    return NodeVerdicts(
        status=f.codes("status", n, map(int, Status)), severity=f.floats("severity", n),
        input_severity=f.floats("input_severity", n), inputs_identical=f.bools("inputs_identical", n),
        reason=f.strings("reason", n), worst=f.codes("worst", n, map(int, Status)),
        worst_severity=f.floats("worst_severity", n), unmatched_below=f.ints("unmatched_below", n),
        pair_level=f.codes("pair_level", pairs, map(int, Status)),
        pair_severity=f.floats("pair_severity", pairs),
    )


def _thresholds_from(f: Fields) -> Thresholds:
    """The report's thresholds; their own checks (`Thresholds.from_dict`) name a bad value."""
    rules = f.child("rules") if f.has("rules") else None
    for task in rules.doc if rules is not None else ():
        if not all(isinstance(rule, dict) for rule in rules.items(task)):
            raise rules.error(task, "holds something other than rule objects")
    return Thresholds.from_dict(f.doc, f"{f.source}: thresholds")


def _options_from(f: Fields) -> CompareOptions:
    known = {fld.name for fld in fields(CompareOptions)}
    if unknown := sorted(set(f.doc) - known):
        raise f.error(unknown[0], "is not a comparison option")
    values: dict[str, Any] = {}
    for name in ("fuzzy", "tensor_metrics"):
        if f.has(name):
            values[name] = f.value(name, bool)
    if f.has("matchers"):
        values["matchers"] = f.strings("matchers")
    return CompareOptions(**values)


def _check_format(doc: Any, expected: str, source: str) -> None:
    if not isinstance(doc, dict) or doc.get("format") != expected:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise DumpFormatError(f"{source}: not a graphcmp {expected.split('.')[1]} file (format is {found!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise DumpFormatError(f"{source}: schema version {doc.get('schema_version')!r} is not supported "
                              f"(this graphcmp reads {SCHEMA_VERSION})")


def is_json_path(path: str | os.PathLike[str]) -> bool:
    """True when `path` names a JSON document (``.json``): results are written as JSON there, else as npz.

    >>> is_json_path("out/cmp.json"), is_json_path("cmp.npz")
    (True, False)
    """
    return os.fspath(path).lower().endswith(".json")


def _write_document(path: str | os.PathLike[str], doc: dict[str, Any], format: str | None) -> None:
    if format not in (None, "json", "npz"):
        raise ValueError(f"format {format!r}: expected 'json' or 'npz'")
    if format == "json" or (format is None and is_json_path(path)):
        write_atomic(path, dumps_strict(doc))
    else:
        write_npz(path, doc)


def save_report(report: CompareReport, path: str | os.PathLike[str], *, format: str | None = None,
                runs: RunsWriting | None = None) -> None:
    """Write `report` to `path` (parent folders are created).

    `format` ``"json"`` writes the annotated JSON document, ``"npz"`` the columnar container
    (docs/format.md); by default a ``.json`` name gets JSON and any other name npz. `runs`: the runs'
    columns being written meanwhile (`runs_written_meanwhile`), which the file then starts with.
    """
    npz = format == "npz" or (format is None and not is_json_path(path))
    if not npz:
        _write_document(path, report.to_dict(), format)
        return
    document = _npz_document(report)
    if runs is not None and (begun := runs.wait()) is not None:
        write_npz(path, document, begun=begun)
    else:
        write_npz(path, {**document, **_runs_document(report.npu, report.bench)})


def _npz_document(report: CompareReport) -> dict[str, Any]:
    """The report's document for the npz container, but its runs (`_runs_document`): without the metrics loading
    computes again, and the noise model's row numbers in the smallest integer type that holds them (`code_dtype`;
    read back as the model's int64)."""
    document = report._document(_npz_floats, runs=_written_apart, stat_columns=False, flows=_written_apart)
    rows = code_dtype(len(report.npu) - 1)
    for key in ("producer", "leaves", "origins"):
        document["noise"][key] = document["noise"][key].astype(rows, copy=False)
    return document


def _written_apart(*_: DumpGraph) -> None:
    """The place of a run, or of the runs' flows, in a result document whose runs `_runs_document` makes."""
    return None


def _runs_document(npu: DumpGraph, bench: DumpGraph) -> dict[str, Any]:
    """The runs of a result as the npz container holds them: the node ids as strings (`UniqueTexts`), the tensors'
    texts by their codes (a reader's `CodedTexts` have them; the comparison makes those of dtype and shape too:
    `string_codes` keeps them), the bit masks of recorded statistics in the smallest integer type that holds them
    (`code_dtype`), and the runs' recovered data-flow edges (`_flows_of`: recovered here if the runs do not have them
    yet, which costs the comparison nothing when a forked process writes this part: `runs_written_meanwhile`)."""
    doc = {"npu": graph_to_dict(npu), "bench": graph_to_dict(bench), "flows": _flows_of(npu, bench)}
    for side, graph in (("npu", npu), ("bench", bench)):
        doc[side]["nodes"]["id"] = UniqueTexts(graph.nodes.ids)  # a run's ids differ: stored without counting them
        tensors = doc[side]["tensors"]
        for column, texts in tensors.items():
            if type(texts) is CodedTexts:  # its narrow codes, which the container stores as they are
                tensors[column] = TextCodes(texts.codes, texts.names)
            elif column in ("dtype", "shape"):
                tensors[column] = TextCodes(*string_codes(texts))
        tensors["present"] = tensors["present"].astype(code_dtype((1 << graph.tensors.present.shape[1]) - 1))
    return doc


class RunsWriting:
    """The two runs' columns of a result being written by a forked process (`runs_written_meanwhile`)."""

    def __init__(self, path: str | os.PathLike[str], npu: DumpGraph, bench: DumpGraph) -> None:
        self.part = sibling_part(path)
        self._writer = Forked(_write_runs, self.part, npu, bench)

    def wait(self) -> tuple[Path, dict[str, Any]] | None:
        """(the container holding the runs' columns, their references); None when the process failed (the caller
        then writes the runs itself)."""
        tree = self._writer.receive()
        if tree is None or self._writer.join() != 0:
            self.discard()
            return None
        return self.part, tree

    def discard(self) -> None:
        self._writer.stop()
        self.part.unlink(missing_ok=True)


def _write_runs(answer: Sender, part: Path, npu: DumpGraph, bench: DumpGraph) -> None:
    """Send the runs' references once written to `part`, None if that failed (the parent then writes them)."""
    try:
        tree = begin_npz(part, _runs_document(npu, bench))
    except Exception:  # whatever it was, the parent writes the runs itself and reports it then
        tree = None
    answer.send(tree)


@contextmanager
def runs_written_meanwhile(npu: DumpGraph, bench: DumpGraph, path: str | os.PathLike[str], *,
                           format: str | None = None) -> Iterator[RunsWriting | None]:
    """Start writing the runs' columns of the result `path` (npz) in a forked process, for `save_report` to finish
    the file while this process compares them (on a multi-core machine, about two thirds of the writing happen
    meanwhile); None when the result is JSON or there is no second core or no fork. The part written is removed
    if the block does not finish the file."""
    npz = format == "npz" or (format is None and not is_json_path(path))
    if not npz or not can_fork_aside():
        yield None
        return
    try:
        runs = RunsWriting(path, npu, bench)
    except (OSError, GraphcmpError):  # no part here: what is wrong with the place is said when the result is written
        yield None
        return
    try:
        yield runs
    finally:
        runs.discard()


def save_graph(graph: DumpGraph, path: str | os.PathLike[str], tool_version: str, *,
               format: str | None = None) -> None:
    """Write one run as a graphcmp graph document (`format` as for `save_report`)."""
    doc = {"format": GRAPH_FORMAT, "schema_version": SCHEMA_VERSION,
           "tool": {"name": "graphcmp", "version": tool_version}, "enums": ENUMS, "run": graph_to_dict(graph)}
    _write_document(path, doc, format)


def read_document(path: str | os.PathLike[str]) -> Any:
    """The parsed document of a result file, JSON or npz (columns as arrays)."""
    return read_npz(path) if is_npz(path) else read_json(path, salvage=False).value


def load_saved(path: str | os.PathLike[str]) -> CompareReport | DumpGraph:
    """Read a graphcmp report or graph file (`save_report`, `save_graph`), JSON or npz."""
    doc = read_document(path)
    if isinstance(doc, dict) and doc.get("format") == GRAPH_FORMAT:
        _check_format(doc, GRAPH_FORMAT, str(path))
        return graph_from_dict(Fields(doc, str(path)).value("run", dict), str(path))
    return CompareReport.from_dict(doc, str(path))


def load_report(path: str | os.PathLike[str]) -> CompareReport:
    """Read a comparison report written by `save_report`."""
    return CompareReport.from_dict(read_document(path), str(path))
