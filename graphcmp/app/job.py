"""The job overview of a results folder, read from its ``index.json`` alone: rank x module heat, origin, peers.

`graphcmp compare NPU_ROOT BENCH_ROOT -o results/` writes per run the ``heat`` rows (module rows at
depth 1-2: node id, worst status, worst severity), the communication calls (``comm``) and the job's
``analysis`` (origin, spread). `JobIndex` turns them into a heat matrix per step and, through the
core's `link_calls`, into the peers of each communication call; no per-rank report is read.
`heat_figure` is the plotly figure (a dict: one heatmap trace, so the element count does not grow
with ranks x modules).
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

__all__ = ["Heat", "JobIndex", "Peer", "column_label", "column_node", "heat_figure"]

_CODES = (UNMATCHED, SKIP, PASS, WARNING, ERROR)  # heat z values, in colour-scale order


@dataclass(frozen=True, slots=True, eq=False)
class Heat(FrozenColumns):
    """The rank x module matrix of one step: worst status (NaN: the rank has no such row) and severity."""

    step: int | None
    ranks: tuple[int | None, ...]
    columns: tuple[str, ...]
    status: np.ndarray  # float64 (ranks, columns), NaN where absent
    severity: np.ndarray  # float64 (ranks, columns), NaN where absent


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
        return Heat(step, tuple(r["rank"] for r in runs), tuple(columns), status, severity)

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


def heat_figure(heat: Heat, origin: Mapping[str, Any] | None = None) -> dict:
    """A plotly figure of `heat`: ranks down, module rows across, coloured by worst verdict; origin marked.

    One heatmap trace holds the whole matrix (severity in the hover text comes from ``customdata``).
    """
    n = len(_CODES)
    scale = []
    for k, code in enumerate(_CODES):
        scale += [[k / n, STATUS_COLORS[code]], [(k + 1) / n, STATUS_COLORS[code]]]
    z = np.where(np.isnan(heat.status), np.nan, heat.status)
    sev = np.round(heat.severity, 4)
    ranks = [f"rank {r}" if r is not None else "rank -" for r in heat.ranks]
    data = [{
        "type": "heatmap", "z": _nan_none(z), "x": [column_label(c) for c in heat.columns], "y": ranks,
        "customdata": _nan_none(sev),
        "zmin": _CODES[0] - 0.5, "zmax": _CODES[-1] + 0.5, "colorscale": scale, "showscale": False, "xgap": 1,
        "ygap": 1, "hovertemplate": "%{y}<br>%{x}<br>severity %{customdata}<extra></extra>", "hoverongaps": False,
    }]
    if origin and origin.get("step") == heat.step and origin.get("rank") in heat.ranks:
        column = next((c for c in (origin.get("module"), origin.get("node")) if c in heat.columns), None)
        if column is not None:
            data.append({"type": "scatter", "mode": "markers", "x": [column_label(column)],
                         "y": [f"rank {origin['rank']}"],
                         "marker": {"symbol": "x-thin-open", "size": 14, "color": "#000000", "line": {"width": 3}},
                         "hovertemplate": "origin of the divergence<extra></extra>", "showlegend": False})
    height = int(min(90 + 16 * len(ranks), 330))
    layout = {"height": height, "margin": {"l": 70, "r": 10, "t": 6, "b": 6}, "xaxis": {"showticklabels": False,
              "type": "category"}, "yaxis": {"autorange": "reversed", "type": "category"},
              "plot_bgcolor": "#fafafa", "clickmode": "event", "uirevision": str(heat.step)}
    return {"data": data, "layout": layout}


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
