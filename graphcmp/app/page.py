"""The page: header controls, the search/filter sidebar, the two graph panes and the details panel.

Component ids are the contract with `callbacks` (which names every input and output) and the browser
tests. The ``findings`` block in the
sidebar lists the advisor's findings (`graphcmp.core.divergence.analyze`) with go-to-node.
"""

from __future__ import annotations

import dash_cytoscape as cyto
from dash import dcc, html

from graphcmp.app.elements import STYLESHEET
from graphcmp.app.job import TREND_METRICS
from graphcmp.app.state import FILTERS, TABS

__all__ = ["FILTER_LABELS", "PANE_IDS", "TAB_LABELS", "page_layout"]

PANE_IDS = {"npu": "cy-npu", "bench": "cy-bench"}
_PANE_TITLES = {"npu": "NPU (run under test)", "bench": "bench (baseline)"}
FILTER_LABELS = {"only-npu": "only in npu", "only-bench": "only in bench", "renamed": "renamed"}
TAB_LABELS = {"details": "details", "chart": "error chart", "op": "single op", "table": "table"}
assert tuple(TAB_LABELS) == TABS


def page_layout(title: str, job: bool = False, paired: bool = True) -> html.Div:
    """The whole page; every dynamic part is filled by the view callback from the URL.

    With `job` (a batch results folder) the page has the job overview; otherwise it has no plotly
    graph at all, so plotly.js is never loaded. Without `paired` (one run) the bench pane starts
    hidden, so the npu pane has its full width from the first drawing (a pane that widens later
    zooms its graph with it).
    """
    return html.Div([
        dcc.Location(id="url", refresh=False),
        dcc.Store(id="focus"),
        dcc.Store(id="focus-done"),
        dcc.Store(id="manual-done"),  # a manual match's outcome: {search, note, seq}, for the view callback
        dcc.Store(id="sizes"),  # a panel dragged to a new size: {sidebar: px} or {bottom: px} (assets/graphcmp.js)
        dcc.Download(id="download"),
        _header(title),
        html.Div([html.Span(id="banner", className="banner-text"),
                  html.Button("go to it", id="go", className="btn go", style={"display": "none"})],
                 id="banner-bar", className="banner"),
        *([_job()] if job else []),
        html.Div([_sidebar(), html.Div(id="sidebar-grip", className="grip grip-x", title="drag to resize"),
                  _panes(paired)], className="main"),
        html.Div(id="bottom-grip", className="grip grip-y", title="drag to resize"),
        _bottom(),
    ], className="app")


def _bottom() -> html.Div:
    """The bottom panel: one tab at a time (the selected node's details, the error chart, the single-op view of a
    node's tensors, the table of compared tensors); each is filled only while it is shown."""
    return html.Div([
        html.Div([dcc.RadioItems(id="tab", options=[{"label": label, "value": name}
                                                     for name, label in TAB_LABELS.items()],
                                 value="details", inline=True, className="tabs"),
                  html.Span(id="tab-note", className="muted tab-note")], className="tab-bar"),
        html.Div(id="details", className="details tab-box"),
        html.Div(id="chart", className="tab-box chart-box", style={"display": "none"}),
        html.Div(id="op", className="tab-box op-box", style={"display": "none"}),
        html.Div(id="table", className="tab-box table-box", style={"display": "none"}),
    ], id="bottom", className="bottom")


def _header(title: str) -> html.Div:
    def labelled(text: str, control, wrapper_id: str | None = None) -> html.Label:
        extra = {"id": wrapper_id} if wrapper_id else {}
        return html.Label([html.Span(text), control], className="control", **extra)

    return html.Div([
        html.Div([html.Strong("graphcmp"), html.Span(title, id="doc-title", className="doc-title")],
                 className="brand"),
        labelled("step", dcc.Dropdown(id="step", clearable=False, searchable=False, className="dd-small"), "ctl-step"),
        labelled("rank", dcc.Dropdown(id="rank", clearable=False, searchable=False, className="dd-small"), "ctl-rank"),
        labelled("micro-step", dcc.Dropdown(id="micro", clearable=False, searchable=False, className="dd-small"),
                 "ctl-micro"),
        labelled("colour by", dcc.Dropdown(id="metric", clearable=False, searchable=False, className="dd-metric")),
        labelled("bin edges", dcc.Input(id="bins", type="text", debounce=True, className="bins",
                                        placeholder="e.g. 1e-3, 1e-2")),
        dcc.Checklist(id="sync", options=[{"label": " sync panes", "value": "on"}], value=["on"], className="sync"),
        html.Button("collapse all", id="collapse", className="btn"),
        html.Button("☰ sidebar", id="toggle-sidebar", className="btn on", title="show or hide the sidebar"),
        html.Button("▤ bottom panel", id="toggle-bottom", className="btn on",
                    title="show or hide the details / chart / table panel"),
        html.Div([
            html.Span("export", className="muted"),
            html.Button("npu PNG", id="png-npu", className="btn"),
            html.Button("npu SVG", id="svg-npu", className="btn"),
            html.Span([html.Button("bench PNG", id="png-bench", className="btn"),
                       html.Button("bench SVG", id="svg-bench", className="btn")], id="bench-export"),
        ], className="export"),
    ], className="header")


def _job() -> html.Details:
    """The job overview of a results folder (hidden otherwise): origin, spread, the rank x module heat map of the
    step shown and, for a job of several steps, the step x module trend of the rank shown."""
    return html.Details([
        html.Summary([html.Strong("job overview "), html.Span(id="job-origin", className="job-origin")]),
        dcc.Store(id="job-step"),
        html.Div([html.Div(id="job-spread", className="job-spread"),
                  html.Label([html.Span("heat maps by ", className="muted"),
                              dcc.RadioItems(id="heat-by", options=[{"label": f" {label}", "value": name}
                                                                   for name, label in TREND_METRICS.items()],
                                             value="verdict", inline=True, className="heat-by")],
                             className="heat-by-control")], className="job-bar"),
        html.Div([
            html.Div([html.Div("ranks × modules (this step)", className="job-map-title"),
                      dcc.Graph(id="job-heat", config={"displayModeBar": False, "responsive": True},
                                figure={"data": [], "layout": {"height": 40}})], className="job-map"),
            html.Div([html.Div("steps × modules (this rank): click a cell to open that step",
                               className="job-map-title"),
                      dcc.Graph(id="job-trend", config={"displayModeBar": False, "responsive": True},
                                figure={"data": [], "layout": {"height": 40}})],
                     id="job-trend-box", className="job-map", style={"display": "none"}),
        ], className="job-maps"),
    ], id="job", open=True, className="job")


def _sidebar() -> html.Div:
    return html.Div([
        html.H4("Search"),
        dcc.Input(id="query", type="text", debounce=True, placeholder="regex over node names, Enter",
                  className="query"),
        html.H4("Filters"),
        dcc.Checklist(id="filters", options=[{"label": f" {FILTER_LABELS.get(f, f)}", "value": f} for f in FILTERS],
                      value=[], className="filters", inline=True),
        html.Div([
            html.Button("◀ previous", id="prev", className="btn"),
            html.Span(id="hit-info", className="hit-info"),
            html.Button("next ▶", id="next", className="btn"),
        ], className="stepper"),
        dcc.RadioItems(id="hits", options=[], value=None, className="hits"),
        html.H4("Manual match"),
        html.Div(id="match-info", className="match-info"),
        dcc.Checklist(id="match-children", options=[{"label": " their children by order", "value": "on"}], value=[],
                      className="match-children"),
        html.Div([html.Button("match picked", id="match", className="btn", disabled=True),
                  html.Button("unmatch selected", id="unmatch", className="btn", disabled=True)],
                 className="stepper"),
        html.H4("Legend"),
        html.Div(id="legend", className="legend"),
        html.H4("Overview"),
        html.Div(id="overview", className="overview"),
        html.H4("Findings"),
        dcc.RadioItems(id="findings", options=[], value=None, className="findings"),
    ], id="sidebar", className="sidebar")


def _panes(paired: bool) -> html.Div:
    return html.Div([_pane("npu"), _pane("bench", {} if paired else {"display": "none"})], className="panes")


def _pane(side: str, style: dict | None = None) -> html.Div:
    return html.Div([
        html.Div([html.Span(_PANE_TITLES[side], id=f"title-{side}", className="pane-title-text"),
                  html.Button("⤢ fit", className="btn btn-small fit", title="zoom to fit the whole pane",
                              **{"data-side": side}, id=f"fit-{side}")], className="pane-title"),
        cyto.Cytoscape(
            id=PANE_IDS[side], elements=[], stylesheet=STYLESHEET,
            layout={"name": "preset", "fit": False, "animate": False},
            className="cy", style={"position": "absolute", "top": "22px", "bottom": 0, "left": 0, "right": 0},
            minZoom=0.03, maxZoom=3.0, autoRefreshLayout=False, responsive=True,
            boxSelectionEnabled=False, autoungrabify=True,
        ),
        html.Canvas(id=f"minimap-{side}", className="minimap", width=180, height=120,
                    title="overview: click or drag to move the view", **{"data-side": side}),
    ], className=f"pane pane-{side}", id=f"pane-{side}", style=style or {})
