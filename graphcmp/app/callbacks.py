"""Callbacks: named inputs and outputs, one callback per concern; the view state lives in the URL.

Every input and output has a name (Dash's dict signatures), so adding a control adds a name and
shifts nothing. The concerns:

* **view** (`update`): a URL opened, a tap, a hit, a finding, a control. It reads the state from
  the URL, applies the action of the trigger (`actions.ACTIONS`, by input name), and fills each
  concern of `OUTPUTS` with its view (`views.VIEWS`); panes whose layout and colours did not change
  are not resent. One request per click.
* **manual matching** (`decide`): the Match / Unmatch buttons recompare the result and hand the new
  state and a note to the view through the ``manual-done`` store.
* **export** (PNG from cytoscape, SVG from `svg`) and the **job overview** of a batch folder.

A clientside callback (assets/graphcmp.js) selects and centres the focused nodes. Each action checks
the inputs it reads (`actions`); the callbacks here only route them.
"""

from __future__ import annotations

from typing import Any

from dash import ALL, Dash, Input, Output, State, ctx, no_update

from graphcmp.app.actions import act, checked, initial, is_fresh, manual
from graphcmp.app.elements import pane_edges
from graphcmp.app.job import NO_RANK, TREND_METRICS, column_node
from graphcmp.app.page import PANE_IDS
from graphcmp.app.state import TABS, ViewState, as_index
from graphcmp.app.svg import pane_svg
from graphcmp.app.table import table_columns, table_page
from graphcmp.app.viewer import Viewer
from graphcmp.app.views import VIEWS, Turn, job_outputs, show

__all__ = ["CONTROLS", "OUTPUTS", "TRIGGERS", "jump_search", "register_callbacks", "view_outputs"]

TRIGGERS = {
    "url": Input("url", "search"), "tap_npu": Input(PANE_IDS["npu"], "tapNodeData"),
    "tap_bench": Input(PANE_IDS["bench"], "tapNodeData"), "prev": Input("prev", "n_clicks"),
    "next": Input("next", "n_clicks"), "hit": Input("hits", "value"), "finding": Input("findings", "value"),
    "collapse": Input("collapse", "n_clicks"), "manual": Input("manual-done", "data"), "go": Input("go", "n_clicks"),
    "toggle_sidebar": Input("toggle-sidebar", "n_clicks"), "toggle_bottom": Input("toggle-bottom", "n_clicks"),
    "sizes": Input("sizes", "data"), "chart_click": Input({"type": "chart", "index": ALL}, "clickData"),
    "table_click": Input({"type": "ctable", "index": ALL}, "active_cell"),
    "table_wait": Input({"type": "ctable-wait", "index": ALL}, "n_intervals"),
}
"""Inputs of the view callback that act once (a click, a pick); names are the keys of `actions.ACTIONS`."""

CONTROLS = {name: Input(name, "value") for name in ("query", "filters", "metric", "bins", "sync", "step", "rank",
                                                    "micro", "tab")}
"""Inputs of the view callback that hold a setting; the view also writes them back (`OUTPUTS["values"]`)."""

OUTPUTS = {  # text first: the page applies outputs in this order, so the hit list shows before the panes redraw
    "page": {"url": Output("url", "search")},
    "banner": {"banner": Output("banner", "children"), "banner_class": Output("banner-bar", "className"),
               "go_style": Output("go", "style")},
    "hits": {"hit_info": Output("hit-info", "children"), "hit_options": Output("hits", "options"),
             "hit": Output("hits", "value")},
    "match": {"match_info": Output("match-info", "children"), "match_disabled": Output("match", "disabled"),
              "unmatch_disabled": Output("unmatch", "disabled")},
    "details": {"details": Output("details", "children")},
    "panes": {"npu_elements": Output(PANE_IDS["npu"], "elements"),
              "bench_elements": Output(PANE_IDS["bench"], "elements"), "focus": Output("focus", "data")},
    "sidebar": {"legend": Output("legend", "children"), "overview": Output("overview", "children"),
                "finding_options": Output("findings", "options"), "finding": Output("findings", "value"),
                "filter_options": Output("filters", "options")},
    "controls": {"metric_options": Output("metric", "options"), "bins_placeholder": Output("bins", "placeholder"),
                 "step_options": Output("step", "options"), "rank_options": Output("rank", "options"),
                 "micro_options": Output("micro", "options"), "bench_pane_style": Output("pane-bench", "style"),
                 "npu_title": Output("title-npu", "children"), "step_style": Output("ctl-step", "style"),
                 "rank_style": Output("ctl-rank", "style"), "micro_style": Output("ctl-micro", "style"),
                 "sync_style": Output("sync", "style"), "bench_export_style": Output("bench-export", "style"),
                 "doc_title": Output("doc-title", "children")},
    "values": {name: Output(name, "value") for name in CONTROLS},
    "frame": {"sidebar_style": Output("sidebar", "style"), "sidebar_grip": Output("sidebar-grip", "style"),
              "bottom_style": Output("bottom", "style"), "bottom_grip": Output("bottom-grip", "style"),
              "sidebar_button": Output("toggle-sidebar", "className"),
              "bottom_button": Output("toggle-bottom", "className"), "tab_options": Output("tab", "options"),
              "tab_note": Output("tab-note", "children"),
              **{f"{tab}_box": Output(tab, "style") for tab in TABS}},
    "chart": {"chart": Output("chart", "children")},
    "op": {"op": Output("op", "children")},
    "table": {"table": Output("table", "children")},
}
assert OUTPUTS.keys() == VIEWS.keys()
"""Every property the view callback may set, by concern (`views.VIEWS` fills each) and name."""

# jumps: centre the node
_CENTRING = {"query", "filters", "prev", "next", "hit", "finding", "step", "rank", "go", "chart_click"}


def register_callbacks(app: Dash, viewer: Viewer) -> None:
    """Wire the page's components to `viewer`."""

    @app.callback(output=OUTPUTS, inputs={"triggers": TRIGGERS, "controls": CONTROLS}, prevent_initial_call=False)
    def update(triggers: dict[str, Any], controls: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return view_outputs(viewer, _triggered("triggers", "controls"), triggers, controls)

    @app.callback(output={"done": Output("manual-done", "data")},
                  inputs={"clicks": {"match": Input("match", "n_clicks"), "unmatch": Input("unmatch", "n_clicks")}},
                  state={"search": State("url", "search"), "children": State("match-children", "value")},
                  prevent_initial_call=True)
    def decide(clicks: dict[str, Any], search: str | None, children: Any) -> dict[str, Any]:
        trigger = _triggered("clicks")
        if trigger is None:
            return {"done": no_update}
        state, note = manual(viewer, ViewState.from_query(search), trigger, bool(children))
        seq = sum(n for n in clicks.values() if isinstance(n, int))  # a repeated outcome still reaches the view
        return {"done": {"search": state.to_query(), "note": note, "seq": seq}}

    if viewer.results.job is not None:
        _register_job(app, viewer)
    _register_exports(app, viewer)
    _register_table(app, viewer)
    app.clientside_callback(
        "function(focus) { return window.graphcmpFocus ? window.graphcmpFocus(focus) : null; }",
        Output("focus-done", "data"), Input("focus", "data"))


def view_outputs(viewer: Viewer, trigger: str | None, triggers: dict[str, Any],
                 controls: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What the view callback sends after `trigger` (an input name; None on the page's first load)."""
    before = ViewState.from_query(triggers.get("url"))
    done = triggers.get("manual")
    note = ""
    if trigger == "manual" and isinstance(done, dict) and isinstance(done.get("search"), str):
        state, first, note = initial(viewer, ViewState.from_query(done["search"])), True, str(done.get("note", ""))
    elif trigger in (None, "url", "manual"):
        state, first = initial(viewer, before, at_origin=is_fresh(triggers.get("url"))), True
    else:
        state, first = act(viewer, before, trigger, {**triggers, **controls}), False
    turn = Turn(viewer, before, state, first=first, controls=controls, center=first or trigger in _CENTRING,
                note=note, fit=trigger == "collapse", trigger=trigger)
    shown = show(turn)
    return {concern: {name: shown[concern].get(name, no_update) for name in names}
            for concern, names in OUTPUTS.items()}


def _triggered(*groups: str) -> str | None:
    """The name of the input (in these groups of the callback's inputs) that fired, None on the first load."""
    for group in groups:
        for name, item in ctx.args_grouping.get(group, {}).items():
            items = item if isinstance(item, list) else [item]  # a pattern input (ALL): one per component
            if any(isinstance(one, dict) and one.get("triggered") for one in items):
                return name
    return None


def jump_search(viewer: Viewer, state: ViewState, trigger: Any, click: dict | None) -> str | None:
    """The URL of a jump from the job overview (a heat cell: that rank at that module; a trend cell: that step
    at that module) or from a linked call (that rank's call); None when the target is not among the results."""
    results, job = viewer.results, viewer.results.job
    here = results.entry(state.result)
    step = here.step
    if job is None:
        return None
    if isinstance(trigger, dict):  # {"type": "peer", "index": "<rank>:<row>"}
        rank_text, _, position_text = str(trigger.get("index", "")).partition(":")
        rank, position = as_index(rank_text), as_index(position_text)
        if rank is None or position is None:
            return None
        node = job.call_node(step, rank, position)
    else:
        point = _first_point(click)
        row, node = str(point.get("y", "")), point.get("x")
        node = column_node(node) if isinstance(node, str) else None
        if row.startswith("step "):  # the trend: another step of this rank
            step = as_index(row.removeprefix("step ").strip())
            rank = here.rank if step is not None else -1
        else:
            rank = None if row == NO_RANK else as_index(row.removeprefix("rank ").strip())
            rank = -1 if rank is None and row != NO_RANK else rank
    entry = results.find(step, rank) if rank != -1 else None
    if entry is None or not isinstance(node, str):
        return None
    fresh = ViewState(result=entry.key, selected=("npu", node), sync=state.sync, metric=state.metric,
                      bins=state.bins, query=state.query, filters=state.filters).with_frame(state)
    return fresh.to_query()


def _first_point(click: Any) -> dict[str, Any]:
    """The first point of a plotly ``clickData`` (``{"points": [{"x": .., "y": ..}]}``); {} for anything else."""
    points = click.get("points") if isinstance(click, dict) else None
    point = points[0] if isinstance(points, list) and points else None
    return point if isinstance(point, dict) else {}


def _register_job(app: Dash, viewer: Viewer) -> None:
    """The job overview's callbacks (only for a batch results folder, whose page has the overview)."""
    job = {"origin": Output("job-origin", "children"), "spread": Output("job-spread", "children"),
           "heat": Output("job-heat", "figure"), "trend": Output("job-trend", "figure"),
           "heat_size": Output("job-heat", "style"), "trend_size": Output("job-trend", "style"),
           "trend_style": Output("job-trend-box", "style"), "shown": Output("job-step", "data")}

    @app.callback(output=job, inputs={"search": Input("url", "search"), "metric": Input("heat-by", "value")},
                  state={"shown": State("job-step", "data")})
    def job_view(search: str | None, metric: Any, shown: Any) -> dict[str, Any]:
        entry = viewer.results.entry(ViewState.from_query(search).result)
        metric = metric if metric in TREND_METRICS else "verdict"
        now = {"step": entry.step, "rank": entry.rank, "metric": metric}
        if shown == now:
            return dict.fromkeys(job, no_update)
        return {**job_outputs(viewer, entry.step, entry.rank, metric), "shown": now}

    @app.callback(output={"url": Output("url", "search", allow_duplicate=True)},
                  inputs={"heat": Input("job-heat", "clickData"), "trend": Input("job-trend", "clickData"),
                          "peers": Input({"type": "peer", "index": ALL}, "n_clicks")},
                  state={"search": State("url", "search")}, prevent_initial_call=True)
    def jump(heat: Any, trend: Any, peers: Any, search: str | None) -> dict[str, Any]:
        trigger = ctx.triggered_id
        if isinstance(trigger, dict) and not (ctx.triggered and ctx.triggered[0].get("value")):
            return {"url": no_update}  # a peer button drawn, not clicked
        click = trend if trigger == "job-trend" else heat
        target = jump_search(viewer, ViewState.from_query(search), trigger, click)
        return {"url": target if target is not None else no_update}


def _register_table(app: Dash, viewer: Viewer) -> None:
    """The table view's pages: sorted and filtered on the server over the whole table (`app.table`)."""
    table = {"type": "ctable", "index": ALL}

    @app.callback(output={"data": Output(table, "data"), "pages": Output(table, "page_count"),
                          "note": Output("tab-note", "children", allow_duplicate=True)},
                  inputs={"page": Input(table, "page_current"), "sort": Input(table, "sort_by"),
                          "query": Input(table, "filter_query")},
                  state={"search": State("url", "search")}, prevent_initial_call=True)
    def table_view(page: Any, sort: Any, query: Any, search: str | None) -> dict[str, Any]:
        state = checked(viewer, ViewState.from_query(search))
        model = viewer.model(state.result)
        n = len(page) if isinstance(page, list) else 0
        if not model.paired or not n:
            return {"data": [no_update] * n, "pages": [no_update] * n, "note": no_update}
        cols = table_columns(model, timeout=60.0)
        data, pages, shown = table_page(cols, _first(page), _first(sort), _first(query))
        note = f"{shown:,} of {len(cols.table):,} rows" if shown != len(cols.table) else f"{shown:,} rows"
        return {"data": [data] * n, "pages": [pages] * n, "note": note}


def _first(values: Any) -> Any:
    """The value of the one component of a pattern input (ALL), None when there is none."""
    return values[0] if isinstance(values, list) and values else None


def _register_exports(app: Dash, viewer: Viewer) -> None:
    """PNG (cytoscape draws it in the page) and SVG (drawn here) of each pane."""
    for side in PANE_IDS:
        app.callback(output={"image": Output(PANE_IDS[side], "generateImage")},
                     inputs={"clicks": Input(f"png-{side}", "n_clicks")}, prevent_initial_call=True)(_png(side))

    @app.callback(output={"file": Output("download", "data")},
                  inputs={"clicks": {side: Input(f"svg-{side}", "n_clicks") for side in PANE_IDS}},
                  state={"search": State("url", "search")}, prevent_initial_call=True)
    def svg(clicks: dict[str, Any], search: str | None) -> dict[str, Any]:
        side = _triggered("clicks") or "npu"
        state = checked(viewer, ViewState.from_query(search))
        model = viewer.model(state.result)
        if side not in model.sides:
            return {"file": no_update}
        ids = model.graphs[side].nodes.ids
        geo = viewer.geometry(state, side)
        names = {c.row: ids[c.row] for c in geo.cells if not c.pager}
        text = pane_svg(geo, viewer.colors(state, side), f"graphcmp {side}", names, pane_edges(model, side, geo))
        return {"file": {"content": text, "filename": f"graphcmp-{side}.svg", "type": "image/svg+xml"}}


def _png(side: str):
    def png(clicks: Any) -> dict[str, Any]:
        return {"image": {"type": "png", "action": "download", "filename": f"graphcmp-{side}",
                          "options": {"full": True, "scale": 2, "bg": "#ffffff"}}}

    return png
