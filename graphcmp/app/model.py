"""What the viewer derives from one document, once: navigation trees, data flow, twins, verdict codes,
overflow, findings, the structure diff.

A `ViewModel` wraps a `CompareReport` (two sides) or a built `DumpGraph` (one side). Everything here is
a lookup into the core's records; per-node numeric columns for colouring come from the report's
verdicts and pair metrics (`metric_values`), aggregated per node with numpy. The data-flow edges of
each side (`flows`) are the graph's own or, for a dump, recovered from its statistics
(`graphcmp.core.dataflow.flow_edges`); nodes of no input are folded into their consumer when drawn,
never the origin of a divergence.
"""

from __future__ import annotations

import threading
from functools import cached_property

import numpy as np

from graphcmp.app.colors import Scheme, parse_edges
from graphcmp.app.flow import FlowIndex
from graphcmp.app.tree import NavTree
from graphcmp.core.dataflow import flow_edges, folded_sources
from graphcmp.core.divergence import Analysis
from graphcmp.core.hierarchy import depths, levels
from graphcmp.core.judge import SKIP, STATUS_NAMES, UNMATCHED
from graphcmp.core.matching.fused_ops import original_names
from graphcmp.core.noise import NodeRole
from graphcmp.core.overflow import overflow_levels
from graphcmp.core.records import (
    STAT_NAMES,
    Direction,
    DumpGraph,
    EdgeTable,
    NodeKind,
    NodeView,
    Role,
    TensorView,
    string_column,
)
from graphcmp.core.report import CompareReport
from graphcmp.core.rules import PASS

__all__ = ["SIDES", "ViewModel"]

SIDES = ("npu", "bench")
_VERDICT_METRICS = {"severity": "output severity", "worst_severity": "subtree severity",
                    "input_severity": "input severity"}
_OUTPUT_ROLES = (Role.OUTPUT, Role.PARAM_GRAD)


class ViewModel:
    """Derived, read-only data of one document for the viewer."""

    def __init__(self, doc: CompareReport | DumpGraph) -> None:
        self.report = doc if isinstance(doc, CompareReport) else None
        graphs = (doc.npu, doc.bench) if self.report is not None else (doc,)
        self.graphs: dict[str, DumpGraph] = dict(zip(SIDES, graphs))
        self.trees = {side: NavTree(g, self._folded(side)) for side, g in self.graphs.items()}
        self._lock = threading.Lock()
        self._metric_cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._memo: dict[tuple, object] = {}
        self._kept: dict[tuple, object] = {}

    @property
    def sides(self) -> tuple[str, ...]:
        return tuple(self.graphs)

    def _folded(self, side: str) -> np.ndarray | None:
        """Per row, the consumer a drawing folds it into (only graphs with their own edges; never an origin)."""
        graph = self.graphs[side]
        if not len(graph.edges):
            return None
        into = folded_sources(graph, self.flow_edges[side])
        role = self.role(side)
        if role is not None:
            into[role == NodeRole.ORIGIN] = -1
        return into

    @cached_property
    def flow_edges(self) -> dict[str, EdgeTable]:
        """The data-flow edges of each side: a report's (stored in a result file), else recovered from the run."""
        if self.report is not None:
            return self.report.flow_edges()
        return {side: flow_edges(g) for side, g in self.graphs.items()}

    @cached_property
    def flows(self) -> dict[str, FlowIndex]:
        """The data-flow edges of each side, filed by the module they cross (built once, on first use)."""
        return {side: FlowIndex(self.trees[side], self.flow_edges[side]) for side in self.graphs}

    def renamed(self, side: str) -> np.ndarray:
        """Per row, True where the node's twin has another id (renamed by a mapping rule, a fuzzy match ...)."""
        return self._renamed[side]

    @cached_property
    def _renamed(self) -> dict[str, np.ndarray]:
        out = {side: np.zeros(len(g), bool) for side, g in self.graphs.items()}
        if self.report is None:
            return out
        n2b = self.report.matches.npu_to_bench
        rows = np.flatnonzero(n2b >= 0)
        differ = (string_column(self.report.npu.nodes.ids, rows)
                  != string_column(self.report.bench.nodes.ids, n2b[rows])).astype(bool)
        out["npu"][rows[differ]] = True
        out["bench"][n2b[rows[differ]]] = True
        return out

    def structure(self) -> dict[str, int]:
        """Counts of the structure diff: nodes only in npu, only in bench, and matched under another id."""
        if self.report is None:
            return {}
        m = self.report.matches
        return {"only in npu": int(np.count_nonzero(m.npu_to_bench[1:] < 0)),
                "only in bench": int(np.count_nonzero(m.bench_to_npu[1:] < 0)),
                "renamed": int(np.count_nonzero(self.renamed("npu")))}

    @property
    def paired(self) -> bool:
        return self.report is not None

    def twin(self, side: str, row: int) -> int:
        """Row of the matched node on the other side, -1 when unmatched or single-sided."""
        if self.report is None:
            return -1
        m = self.report.matches
        return int((m.npu_to_bench if side == "npu" else m.bench_to_npu)[row])

    def other(self, side: str) -> str:
        return "bench" if side == "npu" else "npu"

    def row_of(self, side: str, node_id: str) -> int | None:
        graph = self.graphs.get(side)
        return graph.row(node_id) if graph is not None and node_id in graph else None

    def tensor_rows(self, side: str, row: int) -> np.ndarray:
        """Tensor rows of one node (CSR index built once per side, no scan of the tensor table)."""
        order, start = self._tensor_index[side]
        return order[start[row]: start[row + 1]]

    @cached_property
    def _tensor_index(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        out = {}
        for side, g in self.graphs.items():
            order = np.argsort(g.tensors.node, kind="stable")
            out[side] = order, np.searchsorted(g.tensors.node[order], np.arange(len(g) + 1))
        return out

    def tensor_text(self, side: str, producer: int, consumer: int) -> str:
        """The tensor an edge carries, as ``dtype [shape]``: the producer's output whose dtype and shape one of the
        consumer's inputs has (else its first output); "" when the producer has no output recorded (a graph
        without tensor records, a control edge's op of no output)."""
        t = self.graphs[side].tensors
        outs = [k for k in self.tensor_rows(side, producer).tolist() if t.role[k] in _OUTPUT_ROLES]
        if not outs:
            return ""
        ins = {(t.dtype[k], t.shape[k]) for k in self.tensor_rows(side, consumer).tolist()
               if t.role[k] == Role.INPUT}
        k = next((k for k in outs if (t.dtype[k], t.shape[k]) in ins), outs[0])
        return f"{t.dtype[k]} {t.shape[k]}".strip()

    @cached_property
    def marks(self) -> frozenset[str]:
        """The marks a pane of this document can draw (the legend lists only those): each is a class of
        `elements.STYLESHEET` that some node or edge of a side would carry."""
        out = {"hit", "selected", "pager"}
        paired = self.report is not None
        if paired and len(self.report.noise.origins()):
            out |= {"origin", "hot"}
        if paired and self.structure().get("only in npu", 0) + self.structure().get("only in bench", 0):
            out.add("unmatched")
        if paired and self.structure().get("renamed", 0):
            out.add("renamed")
        for side, graph in self.graphs.items():
            tree = self.trees[side]
            nodes = graph.nodes
            if (self.overflow[side] > 0).any():
                out.add("overflow")
            if self.fused[side].any():
                out.add("fused")
            if (tree.n_children[1:] > 0).any():
                out |= {"module", "box"}
            if (~nodes.has_data[1:] & (tree.n_children[1:] == 0)).any():
                out.add("nodata")
            if (nodes.direction == Direction.BACKWARD).any():
                out.add("backward")
            if tree.folded_into is not None:
                out.add("folds")
            if getattr(graph, "shards", None) is not None:
                out.add("ranks")
            edges = self.flow_edges[side]
            if len(edges):
                out |= {"flow", "hover"}
                if edges.control.any():
                    out.add("control")
        return frozenset(out)

    def filters(self) -> frozenset[str]:
        """The hit-list filters that can select something here: verdicts and the structure diff only for a
        comparison, overflow only where a side overflows."""
        paired = {"error", "warning", "pass", "skip", "unmatched", "only-npu", "only-bench", "renamed"}
        return frozenset((paired if self.paired else set()) | ({"overflow"} & self.marks))

    def has_tensor_files(self, side: str, row: int) -> bool:
        """True when the run recorded a tensor file for an input or output of `row` (tensor mode, kernel dumps)."""
        files = self.graphs[side].tensors.file
        return any(files[k] for k in self.tensor_rows(side, row).tolist())

    def node_view(self, side: str, row: int) -> NodeView:
        """The core's `NodeView` of one node, built from the viewer's indexes (no networkx tree needed)."""
        g = self.graphs[side]
        nodes, t = g.nodes, g.tensors
        parent, stack = int(nodes.parent[row]), int(nodes.stack[row])
        tensors = []
        for k in self.tensor_rows(side, row).tolist():
            stats = {name: float(t.stats[k, j]) for j, name in enumerate(STAT_NAMES) if t.present[k, j]}
            tensors.append(TensorView(Role(int(t.role[k])), t.slot[k], t.dtype[k], t.shape[k], stats,
                                      t.md5[k], t.file[k], t.value[k]))
        return NodeView(
            id=nodes.ids[row], kind=NodeKind(int(nodes.kind[row])), op=nodes.op[row],
            parent=nodes.ids[parent] if parent >= 0 else None, direction=Direction(int(nodes.direction[row])),
            micro_step=int(nodes.micro_step[row]),
            children=tuple(nodes.ids[c] for c in self.trees[side].children(row).tolist()),
            tensors=tuple(tensors), stack=g.stacks[stack] if stack >= 0 else (),
        )

    @cached_property
    def overflow(self) -> dict[str, np.ndarray]:
        """Overflow level per row and side (0 none … 3 critical, see `graphcmp.core.overflow`); the npu side's
        are the report's own (stored in a result file, not computed again)."""
        return {side: self.report.overflow_levels() if self.report is not None and side == "npu" else
                overflow_levels(g) for side, g in self.graphs.items()}

    @cached_property
    def fused(self) -> dict[str, np.ndarray]:
        """Per side, True for fused ops: rows whose ``original_op_names`` attribute names more than one op."""
        out = {}
        for side, g in self.graphs.items():
            mask = np.zeros(len(g), bool)
            if g.nodes.attrs:
                rows = [r for r, a in enumerate(g.nodes.attrs) if a and len(original_names(g, r)) > 1]
                mask[rows] = True
            out[side] = mask
        return out

    def attrs(self, side: str, row: int) -> tuple[tuple[str, str], ...]:
        """The (key, value) attributes of one node (GE/MindSpore graphs, kernel dumps); empty when none."""
        attrs = self.graphs[side].nodes.attrs
        return attrs[row] if attrs else ()

    @cached_property
    def analysis(self) -> Analysis | None:
        """The advisor's findings (first divergence, overflow …) of a report; None for a single run."""
        return self.report.analysis() if self.report is not None else None

    def status(self, side: str) -> np.ndarray | None:
        """Verdict code per row of `side` (bench rows take their npu twin's; unmatched bench rows UNMATCHED)."""
        if self.report is None:
            return None
        v = self.report.verdicts
        if side == "npu":
            return v.status
        return self._bench_status

    def role(self, side: str) -> np.ndarray | None:
        """Noise-model role code per row of `side` (`NodeRole`; bench rows take their npu twin's)."""
        if self.report is None:
            return None
        role = self.report.noise.role
        return role if side == "npu" else _through_twin(role, self.report.matches.bench_to_npu, 0)

    def worst_role(self, side: str) -> np.ndarray | None:
        """Highest role in the subtree of each row (a closed module holding the origin shows it)."""
        if self.report is None:
            return None
        return self._worst_roles[side]

    @cached_property
    def _worst_roles(self) -> dict[str, np.ndarray]:
        out = {}
        for side in self.sides:
            worst = self.role(side).astype(np.int8).copy()
            parent = self.graphs[side].nodes.parent
            for rows in reversed(levels(depths(parent))[1:]):
                np.maximum.at(worst, parent[rows], worst[rows])
            out[side] = worst
        return out

    def worst(self, side: str) -> np.ndarray | None:
        """Worst verdict in the subtree of each row (bench rows take their twin's)."""
        if self.report is None:
            return None
        w = self.report.verdicts.worst
        return w if side == "npu" else _through_twin(w, self.report.matches.bench_to_npu, SKIP)

    @cached_property
    def _bench_status(self) -> np.ndarray:
        return _through_twin(self.report.verdicts.status, self.report.matches.bench_to_npu, UNMATCHED)

    # ---- colour metrics -------------------------------------------------------------------------

    def metric_names(self) -> dict[str, str]:
        """Colour schemes on offer: name -> label ("verdict" first)."""
        if self.report is None:
            return {"none": "node kind"}
        role = {"role": "role (origin, propagated, within noise)"}
        # a comparison with an origin opens on the roles: the origin stands out from what it contaminated
        names = (role | {"verdict": "verdict"} if len(self.report.noise.origins()) else {"verdict": "verdict"} | role)
        names |= _VERDICT_METRICS
        for name in self.report.pairs.float_metrics():
            if name != "rel_errs":
                names[name] = f"{name} (worst output)"
        return names

    def scheme(self, metric: str | None, edges_text: str | None) -> Scheme:
        """The colour scheme for `metric` with edges typed by the user (defaults when absent or invalid)."""
        names = self.metric_names()
        metric = metric if metric in names else next(iter(names))
        if metric in ("verdict", "role", "none"):
            return Scheme(metric)
        higher = self.higher_is_better(metric)
        edges = parse_edges(edges_text) or self.default_edges(metric)
        return Scheme(metric, edges=edges, higher_is_better=higher)

    def higher_is_better(self, metric: str) -> bool:
        rules = self.report.thresholds.rules if self.report is not None else {}
        return any(r.metric == metric and r.higher_is_better for task in rules.values() for r in task)

    def default_edges(self, metric: str) -> tuple[float, ...]:
        """Warn/error limits of the report's rule for `metric`, else the 50th and 90th percentile of its values."""
        rules = self.report.thresholds.rules
        key = "rel_err" if metric in _VERDICT_METRICS else metric
        task = "tensor" if self.report.options.tensor_metrics and key == "rel_err" else None
        for task_name, task_rules in rules.items():
            for r in task_rules:
                if (r.metric == key and task is None) or (task == task_name and not r.higher_is_better):
                    return tuple(sorted({r.warn, r.error}))
        values, present = self.metric_values(metric)
        finite = values[present & np.isfinite(values)]
        if not len(finite):
            return (0.0,)
        return tuple(sorted({float(np.quantile(finite, 0.5)), float(np.quantile(finite, 0.9))}))

    def keep(self, key: tuple, compute):
        """The value of `compute()` kept under `key` for the life of the model (indexes built on first use)."""
        with self._lock:
            if key in self._kept:
                return self._kept[key]
        value = compute()
        with self._lock:
            return self._kept.setdefault(key, value)

    def memo(self, key: tuple, compute):
        """The value of `compute()` kept under `key` with this model (search results; at most 64 kept)."""
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        value = compute()
        with self._lock:
            if len(self._memo) >= 64:
                self._memo.clear()
            self._memo[key] = value
        return value

    def metric_values(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """(value, present) per npu row of `metric`: a verdict column, or a pair metric over the node's outputs.

        NaN in a present value is a real NaN (an overflow); absent rows have no compared outputs.
        """
        with self._lock:
            if metric not in self._metric_cache:
                self._metric_cache[metric] = self._compute_metric(metric)
            return self._metric_cache[metric]

    def _compute_metric(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        report = self.report
        v = report.verdicts
        if metric in _VERDICT_METRICS:
            values = getattr(v, metric).astype(np.float64)
            present = v.status >= PASS if metric != "worst_severity" else v.worst >= PASS
            return np.where(np.isinf(values), np.nan, values), present
        pairs = report.pairs
        col = pairs.metrics[metric]
        col = np.abs(col).max(axis=1) if col.ndim == 2 else col.astype(np.float64)
        t = report.npu.tensors
        is_out = np.isin(t.role[pairs.npu], _OUTPUT_ROLES)
        node, col = t.node[pairs.npu][is_out], col[is_out]
        n = len(report.npu)
        higher = self.higher_is_better(metric)
        fill = np.inf if higher else -np.inf
        out = np.full(n, fill)
        (np.minimum if higher else np.maximum).at(out, node, np.where(np.isnan(col), fill, col))
        is_nan = np.bincount(node[np.isnan(col)], minlength=n) > 0
        present = np.bincount(node, minlength=n) > 0
        return np.where(is_nan | ~present, np.nan, out), present

    def side_metric(self, side: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """(value, present) of `metric` per row of `side` (bench rows take their twin's)."""
        values, present = self.metric_values(metric)
        if side == "npu":
            return values, present
        b2n = self.report.matches.bench_to_npu
        return _through_twin(values, b2n, np.nan), _through_twin(present, b2n, False)

    @cached_property
    def summary_rows(self) -> list[tuple[str, str]]:
        """(label, value) lines for the overview panel."""
        if self.report is None:
            g = self.graphs["npu"]
            return [("nodes", f"{len(g):,}"), ("tensors", f"{len(g.tensors):,}"), ("source", g.info.path)]
        s = self.report.summary()
        hist = s["verdicts"]
        return [
            ("npu nodes", f"{s['npu']['nodes']:,} ({s['npu']['unmatched']:,} unmatched)"),
            ("bench nodes", f"{s['bench']['nodes']:,} ({s['bench']['unmatched']:,} unmatched)"),
            ("verdicts", ", ".join(f"{name} {hist[name]:,}" for name in STATUS_NAMES.values() if name in hist)),
            ("tensor pairs", f"{s['tensor_pairs']:,}"),
            ("structure", ", ".join(f"{n:,} {what}" for what, n in self.structure().items())),
        ]


def _through_twin(values: np.ndarray, bench_to_npu: np.ndarray, missing) -> np.ndarray:
    out = np.full(len(bench_to_npu), missing, dtype=values.dtype)
    matched = bench_to_npu >= 0
    out[matched] = values[bench_to_npu[matched]]
    return out
