"""The single-op view: one node's tensor pairs element by element (MindStudio's single-op comparison).

For the selected node of a comparison whose runs hold tensor files, each paired tensor (outputs first, at most
`MAX_PAIRS`) gets a histogram of its elements' absolute errors, a scatter of npu against bench values (the
worst elements first, a stride through the rest) and the table of the worst elements with their indices. The
numbers come from `graphcmp.core.elementwise`; this module only draws them (text children and escaped plotly
labels: names from user models are never HTML).
"""

from __future__ import annotations

from html import escape

import numpy as np
from dash import dcc, html

from graphcmp.app.model import ViewModel
from graphcmp.core.elementwise import Elementwise, pair_elements
from graphcmp.core.errors import GraphcmpError
from graphcmp.core.records import Role

__all__ = ["MAX_PAIRS", "node_pairs", "op_panel"]

MAX_PAIRS = 4
_OUTPUTS = (Role.OUTPUT, Role.PARAM_GRAD)
_CONFIG = {"displayModeBar": False, "responsive": True}


def node_pairs(model: ViewModel, npu_row: int) -> list[int]:
    """Indices of the tensor pairs of npu node `npu_row` that have files on both sides, outputs first."""
    report = model.report
    pairs, t = report.pairs, report.npu.tensors
    mine = np.flatnonzero(np.isin(pairs.npu, model.tensor_rows("npu", npu_row)))
    files_n, files_b = report.npu.tensors.file, report.bench.tensors.file
    mine = [int(k) for k in mine if files_n[int(pairs.npu[k])] and files_b[int(pairs.bench[k])]]
    return sorted(mine, key=lambda k: (int(t.role[pairs.npu[k]]) not in _OUTPUTS, k))


def op_panel(model: ViewModel, npu_row: int, bench_row: int) -> html.Div:
    """The single-op view of a matched pair of nodes."""
    report = model.report
    node = report.npu.nodes.ids[npu_row]
    pairs = node_pairs(model, npu_row)
    blocks: list = [html.Div([html.Strong(report.npu.nodes.op[npu_row] + " "), html.Span(node, className="node-id")])]
    if not pairs:
        blocks.append(html.Div("no tensor of this node has a file in both runs", className="hint"))
    for k in pairs[:MAX_PAIRS]:
        blocks.append(_pair_block(model, k))
    if len(pairs) > MAX_PAIRS:
        blocks.append(html.Div(f"{len(pairs) - MAX_PAIRS} more tensor pairs not shown", className="hint"))
    return html.Div(blocks, className="single-op")


def _pair_block(model: ViewModel, k: int) -> html.Div:
    report = model.report
    i, j = int(report.pairs.npu[k]), int(report.pairs.bench[k])
    t = report.npu.tensors
    head = f"{Role(int(t.role[i])).name.lower()}.{t.slot[i]} · {t.dtype[i]} {t.shape[i]}"
    try:
        view = model.keep(("elementwise", k), lambda: pair_elements(report.npu, report.bench, i, j))
    except GraphcmpError as err:
        return html.Div([html.H4(head), html.Div(str(err), className="hint")], className="op-pair")
    if view is None:
        return html.Div([html.H4(head), html.Div("a file is missing", className="hint")], className="op-pair")
    summary = (f"{view.count:,} elements · {view.exact:,} equal · {view.count - view.exact:,} differ"
               + (f" · {view.nonfinite:,} inf/NaN on one side only" if view.nonfinite else ""))
    return html.Div([
        html.H4(head), html.Div(summary, className="muted op-summary"),
        html.Div([dcc.Graph(figure=_histogram(view), config=_CONFIG, className="op-graph"),
                  dcc.Graph(figure=_scatter(view, head), config=_CONFIG, className="op-graph"),
                  _worst_table(view)], className="op-row"),
    ], className="op-pair")


def _histogram(view: Elementwise) -> dict:
    centres = np.sqrt(view.edges[:-1] * view.edges[1:]).tolist() if len(view.edges) else []
    widths = np.diff(view.edges).tolist() if len(view.edges) else []
    return {"data": [{"type": "bar", "x": centres, "y": view.counts.tolist(), "width": widths,
                      "marker": {"color": "#ef6c00"}, "name": "elements",
                      "hovertemplate": "|npu - bench| ≈ %{x:.3g}: %{y} elements<extra></extra>"}],
            "layout": {"title": {"text": "error histogram (elements that differ)", "font": {"size": 12}},
                       "margin": {"l": 50, "r": 10, "t": 28, "b": 40}, "height": 230, "bargap": 0,
                       "xaxis": {"type": "log", "title": {"text": "|npu - bench|"}, "exponentformat": "power"},
                       "yaxis": {"title": {"text": "elements"}}}}


def _scatter(view: Elementwise, head: str) -> dict:
    bench, npu = view.sample_bench, view.sample_npu
    finite = np.isfinite(bench) & np.isfinite(npu)
    lo = float(min(bench[finite].min(), npu[finite].min())) if finite.any() else 0.0
    hi = float(max(bench[finite].max(), npu[finite].max())) if finite.any() else 1.0
    k = len(view.worst)
    return {"data": [
        {"type": "scattergl", "mode": "markers", "name": "elements", "x": bench[k:].tolist(), "y": npu[k:].tolist(),
         "marker": {"size": 3, "color": "#546e7a"}, "hovertemplate": "bench %{x:.6g}<br>npu %{y:.6g}<extra></extra>"},
        {"type": "scattergl", "mode": "markers", "name": f"worst {k}", "x": bench[:k].tolist(), "y": npu[:k].tolist(),
         "marker": {"size": 7, "color": "#c62828"}, "hovertemplate": "bench %{x:.6g}<br>npu %{y:.6g}<extra></extra>"},
        {"type": "scatter", "mode": "lines", "name": "npu = bench", "x": [lo, hi], "y": [lo, hi],
         "line": {"color": "#90a4ae", "dash": "dot", "width": 1}, "hoverinfo": "skip"},
    ], "layout": {"title": {"text": escape(f"npu against bench ({len(bench):,} elements)"), "font": {"size": 12}},
                  "margin": {"l": 50, "r": 10, "t": 28, "b": 40}, "height": 230, "showlegend": False,
                  "xaxis": {"title": {"text": "bench"}}, "yaxis": {"title": {"text": "npu"}}}}


def _worst_table(view: Elementwise) -> html.Table:
    head = html.Tr([html.Th(h) for h in ("index", "npu", "bench", "|npu - bench|", "relative")])
    rows = [html.Tr([html.Td(str(list(view.worst[n].tolist())), className="idx"),
                     *(html.Td(f"{v:.6g}", className="num") for v in (view.worst_npu[n], view.worst_bench[n],
                                                                       view.worst_abs[n], view.worst_rel[n]))])
            for n in range(len(view.worst))]
    return html.Table([html.Thead(head), html.Tbody(rows)], className="tensors worst")
