"""The job overview of a results folder, read from its ``index.json`` alone: rank x module heat, step x module
trend, origin, peers.

`graphcmp compare NPU_ROOT BENCH_ROOT -o results/` writes per run the ``heat`` rows (module rows at
depth 1-2: node id, worst status, worst severity), the communication calls (``comm``) and the job's
``analysis`` (origin, spread). `JobIndex` turns them into a heat matrix per step (ranks down), a trend
matrix per rank (steps down) and, through the core's `link_calls`, into the peers of each
communication call; no per-rank report is read. `heat_figure` is the plotly figure of either (a
dict: one heatmap trace, so the element count does not grow with rows x modules).
"""

from __future__ import annotations

import html
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphcmp.app.colors import STATUS_COLORS
from graphcmp.core.distributed.links import CommCall, Link, link_calls
from graphcmp.core.judge import SKIP, STATUS_NAMES, UNMATCHED
from graphcmp.core.records import FrozenColumns
from graphcmp.core.rules import ERROR, PASS, WARNING

__all__ = ["NO_RANK", "TREND_METRICS", "Heat", "JobIndex", "Peer", "column_label", "column_node", "heat_figure"]

_MAX_TICKS, _LABELS_H = 48, 66  # module names along a map's axis, and the room they take (px)
NO_RANK = "the run"
"""The heat map's row of a job whose runs name no rank (one process: ``step3.json``)."""
TREND_METRICS = {"verdict": "worst verdict", "severity": "worst severity"}
"""What a heat map's cells show: the worst verdict below the module, or its worst severity."""

_CODES = (UNMATCHED, SKIP, PASS, WARNING, ERROR)  # heat z values, in colour-scale order


@dataclass(frozen=True, slots=True, eq=False)
class Heat(FrozenColumns):
    """A run x module matrix: worst status (NaN: the run has no such row) and worst severity.

    The rank x module map of one step has ``by="rank"`` (`ranks` are its rows, `step` fixed); the
    step x module trend of one rank has ``by="step"`` (`steps` are its rows, `rank` fixed).
    """

    step: int | None
    ranks: tuple[int | None, ...]
    columns: tuple[str, ...]
    status: np.ndarray  # float64 (rows, columns), NaN where absent
    severity: np.ndarray  # float64 (rows, columns), NaN where absent
    by: str = "rank"
    rank: int | None = None
    steps: tuple[int | None, ...] = ()

    def labels(self) -> list[str]:
        """The row labels: ``rank 3`` or ``step 1`` (`NO_RANK` for a job whose runs name no rank)."""
        rows = self.ranks if self.by == "rank" else self.steps
        return [f"{self.by} {r}" if r is not None else NO_RANK if self.by == "rank" else "step -" for r in rows]


@dataclass(frozen=True, slots=True)
class Peer:
    """A call on another rank linked with the selected one: where it is and its verdict there."""

    rank: int
    node: str
    position: int
    status: str  # verdict name from the index's heat rows, "" when the index does not hold it
    complete: bool  # the link reached every rank it should


class JobIndex:
    """A batch index (`graphcmp.core.distributed.batch.load_index`) as the viewer uses it.

    Parameters
    ----------
    index : mapping
        The ``index.json`` document of a ``graphcmp compare ... -o`` results folder.

    Examples
    --------
    >>> job = JobIndex({"runs": [{"step": 0, "rank": 0, "error": None, "heat": [["M.a", 2, 0.5]], "comm": []},
    ...                          {"step": 0, "rank": 1, "error": None, "heat": [["M.a", 0, 0.0]], "comm": []}],
    ...                 "analysis": {"origin": None}})
    >>> h = job.heat(0)
    >>> h.ranks, h.columns, h.status.tolist()
    ((0, 1), ('M.a',), [[2.0], [0.0]])
    """

    def __init__(self, index: Mapping[str, Any]) -> None:
        self.runs = [r for r in index.get("runs", ()) if isinstance(r, dict) and r.get("error") is None]
        self.analysis: dict[str, Any] = index.get("analysis") or {}
        self._by_run = {(r.get("step"), r["rank"] or 0): r for r in self.runs}
        self._links: dict[int | None, dict[tuple[int, str], list[Link]]] = {}
        self._status: dict[tuple[int | None, int | None], dict[str, int]] = {}
        self._lock = threading.Lock()

    def steps(self) -> list[int | None]:
        return sorted({r.get("step") for r in self.runs}, key=lambda s: -1 if s is None else s)

    def heat(self, step: int | None) -> Heat:
        """The heat matrix of `step`: rows are its ranks in order, columns the union of their heat rows."""
        runs = sorted((r for r in self.runs if r.get("step") == step), key=lambda r: -1 if r["rank"] is None
                      else r["rank"])
        columns, status, severity = _matrix(runs)
        return Heat(step, tuple(r["rank"] for r in runs), columns, status, severity)

    def trend(self, rank: int | None) -> Heat:
        """The trend of `rank`: rows are its steps in order, columns the union of their heat rows.

        >>> job = JobIndex({"runs": [{"step": s, "rank": 0, "error": None, "heat": [["M.a", 2 * s, 0.5]], "comm": []}
        ...                          for s in (1, 0)], "analysis": {}})
        >>> t = job.trend(0)
        >>> t.labels(), t.status.tolist()
        (['step 0', 'step 1'], [[0.0], [2.0]])
        """
        rank = rank or 0
        runs = sorted((r for r in self.runs if (r["rank"] or 0) == rank),
                      key=lambda r: -1 if r.get("step") is None else r["step"])
        columns, status, severity = _matrix(runs)
        return Heat(None, (), columns, status, severity, by="step", rank=rank,
                    steps=tuple(r.get("step") for r in runs))

    def origin_text(self) -> str:
        """One line: where the job diverged first (rank, step, node, cause), or that no rank diverged."""
        origin = self.analysis.get("origin")
        if not origin:
            return "no divergence found in any rank"
        module = f" in {origin['module']}" if origin.get("module") else ""
        return (f"first divergence: rank {origin.get('rank')}, step {origin.get('step')}: {origin.get('node')}"
                f"{module} ({origin.get('cause', '')})")

    def spread_text(self, step: int | None, limit: int = 8) -> list[str]:
        """How the divergence reached other ranks in `step` (at most `limit` lines)."""
        spread = (self.analysis.get("steps") or {}).get(str(step), {}).get("spread", [])
        lines = [f"rank {s['rank']} via {s['via']} from rank {s['from_rank']}" for s in spread[:limit]]
        return lines + ([f"… {len(spread) - limit} more"] if len(spread) > limit else [])

    def peers(self, step: int | None, rank: int | None, node: str) -> list[Peer]:
        """Calls on other ranks linked with `node` of (step, rank), with their verdicts; empty for other nodes."""
        rank = 0 if rank is None else rank
        links = self._step_links(step).get((rank, node), [])
        out = []
        for link in links:
            complete = link.complete
            for other, peer_node, position in link.members:
                if other != rank:
                    code = self._run_status(step, other).get(peer_node)
                    out.append(Peer(other, peer_node, position, STATUS_NAMES.get(code, "") if code is not None
                                    else "", complete))
        return sorted(set(out), key=lambda p: (p.rank, p.position))

    def call_node(self, step: int | None, rank: int, position: int) -> str | None:
        """Node id of the communication call at `position` (row) of (step, rank), from the index."""
        run = self._by_run.get((step, rank), {})
        return next((c[0] for c in run.get("comm", ()) if int(c[1]) == position), None)

    def _step_links(self, step: int | None) -> dict[tuple[int, str], list[Link]]:
        with self._lock:
            if step in self._links:
                return self._links[step]
        calls = [CommCall.from_list(0 if r["rank"] is None else r["rank"], c) for r in self.runs
                 if r.get("step") == step for c in r.get("comm", ())]
        by_call: dict[tuple[int, str], list[Link]] = {}
        for link in link_calls(calls):
            for member_rank, member_node, _ in link.members:
                by_call.setdefault((member_rank, member_node), []).append(link)
        with self._lock:
            self._links[step] = by_call
        return by_call

    def _run_status(self, step: int | None, rank: int) -> dict[str, int]:
        key = (step, rank)
        with self._lock:
            if key in self._status:
                return self._status[key]
        run = self._by_run.get((step, rank), {})
        status = {h[0]: int(h[1]) for h in run.get("heat", ())}
        with self._lock:
            self._status[key] = status
        return status


def heat_figure(heat: Heat, origin: Mapping[str, Any] | None = None, metric: str = "verdict") -> dict:
    """A plotly figure of `heat`: runs down (ranks of a step, or steps of a rank), module rows across, coloured by
    worst verdict (or worst severity, `metric`); the origin marked.

    One heatmap trace holds the whole matrix (severity in the hover text comes from ``customdata``).
    """
    sev = np.round(heat.severity, 4)
    rows = heat.labels()
    data = [{
        "type": "heatmap", "x": [column_label(c) for c in heat.columns], "y": rows, "customdata": _nan_none(sev),
        "showscale": False, "xgap": 1, "ygap": 1, "hoverongaps": False,
        "hovertemplate": "%{y}<br>%{x}<br>severity %{customdata}<extra></extra>",
        **(_severity_trace(heat) if metric == "severity" else _verdict_trace(heat)),
    }]
    at = _origin_row(heat, origin)
    column = next((c for c in (origin.get("module"), origin.get("node")) if c in heat.columns), None) \
        if at is not None and origin else None
    if column is not None:
        data.append({"type": "scatter", "mode": "markers", "x": [column_label(column)], "y": [at],
                     "marker": {"symbol": "x-thin-open", "size": 14, "color": "#000000", "line": {"width": 3}},
                     "hovertemplate": "origin of the divergence<extra></extra>", "showlegend": False})
    height = int(min(16 + 14 * len(rows), 250)) + _LABELS_H
    ticks = [column_label(c) for c in heat.columns]
    every = max(1, -(-len(ticks) // _MAX_TICKS))  # at most _MAX_TICKS labels: each stays readable
    layout = {"height": height, "margin": {"l": 70, "r": 10, "t": 6, "b": _LABELS_H},
              "xaxis": {"type": "category", "tickangle": -60, "tickfont": {"size": 8}, "tickvals": ticks[::every],
                        "ticktext": [column_label(short_column(c)) for c in heat.columns[::every]]},
              "yaxis": {"autorange": "reversed", "type": "category"},
              "plot_bgcolor": "#fafafa", "clickmode": "event",
              "uirevision": f"{heat.by}{heat.step if heat.by == 'rank' else heat.rank}{metric}"}
    return {"data": data, "layout": layout}


def _verdict_trace(heat: Heat) -> dict:
    n = len(_CODES)
    scale = []
    for k, code in enumerate(_CODES):
        scale += [[k / n, STATUS_COLORS[code]], [(k + 1) / n, STATUS_COLORS[code]]]
    return {"z": _nan_none(heat.status), "zmin": _CODES[0] - 0.5, "zmax": _CODES[-1] + 0.5, "colorscale": scale}


def _severity_trace(heat: Heat) -> dict:
    """Worst severity on a log scale from green (1e-8 and below) through amber to red (1 and above)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log10(np.clip(heat.severity, 1e-8, 1.0))
    ramp = [[0.0, STATUS_COLORS[PASS]], [0.5, STATUS_COLORS[WARNING]], [1.0, STATUS_COLORS[ERROR]]]
    return {"z": _nan_none(np.round(z, 3)), "zmin": -8.0, "zmax": 0.0, "colorscale": ramp}


def _origin_row(heat: Heat, origin: Mapping[str, Any] | None) -> str | None:
    """The row label holding the origin, None when this matrix does not show it."""
    if not origin:
        return None
    if heat.by == "rank" and origin.get("step") == heat.step and origin.get("rank") in heat.ranks:
        return f"rank {origin['rank']}"
    if heat.by == "step" and (origin.get("rank") or 0) == (heat.rank or 0) and origin.get("step") in heat.steps:
        return f"step {origin['step']}"
    return None


def _matrix(runs: list[dict]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """(columns, status, severity) of `runs` in order: the union of their heat rows, NaN where a run has none."""
    columns: dict[str, int] = {}
    for run in runs:
        for node, _, _ in run.get("heat", ()):
            columns.setdefault(node, len(columns))
    status = np.full((len(runs), len(columns)), np.nan)
    severity = np.full((len(runs), len(columns)), np.nan)
    for i, run in enumerate(runs):
        heat = run.get("heat", ())
        if not heat:
            continue
        cols = np.fromiter((columns[h[0]] for h in heat), np.int64, len(heat))
        status[i, cols] = [h[1] for h in heat]
        severity[i, cols] = [np.nan if h[2] is None else h[2] for h in heat]
    return tuple(columns), status, severity


def short_column(node: str) -> str:
    """A heat map column's name as its axis shows it: a module's attribute path, an API call without its pass.

    >>> short_column("Module.encoder.layers.0.TransformerEncoderLayer.forward.0")
    'encoder.layers.0'
    >>> short_column("Module.fc.Linear.backward.1"), short_column("Distributed.all_reduce.0.forward")
    ('fc ◂', 'Distributed.all_reduce.0')
    """
    parts = node.split(".")
    backward = "backward" in parts[-3:]
    if parts[0] == "Module" and len(parts) >= 5:
        name = ".".join(parts[1:-3])
    else:
        name = ".".join(p for p in parts if p not in ("forward", "backward"))
    name = name if len(name) <= 28 else "…" + name[-27:]
    return f"{name} ◂" if backward else name


def column_label(node: str) -> str:
    """A node id as plotly text: plotly reads a few HTML tags in labels, so ``<``, ``>``, ``&`` are escaped.

    >>> column_label("Functional.<b>.0.forward")
    'Functional.&lt;b&gt;.0.forward'
    """
    return html.escape(node, quote=False)


def column_node(label: str) -> str:
    """Inverse of `column_label` (a clicked cell's x back to the node id)."""
    return html.unescape(label)


def _nan_none(a: np.ndarray) -> list:
    """Rows as lists with None for NaN (JSON has no NaN)."""
    return [[None if v != v else v for v in row] for row in a.tolist()]
