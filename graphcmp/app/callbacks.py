"""Callbacks: a click or a control change becomes one state action; the new state is written to the URL.

One server callback owns the state: it reads the current state from the URL, applies the action
of whatever triggered it (`ACTIONS`), and returns the URL, the panes, the details and the lists.
Panes whose layout and colours did not change are not resent. A clientside callback (assets/
graphcmp.js) selects and centres the focused nodes; PNG comes from cytoscape, SVG from `svg`.
"""

from __future__ import annotations

from dataclasses import replace

from dash import ALL, Dash, Input, Output, State, ctx, html, no_update

from graphcmp.app.details import details_panel
from graphcmp.app.elements import node_element_id, parse_element_id
from graphcmp.app.job import column_node, heat_figure
from graphcmp.app.model import SIDES, ViewModel
from graphcmp.app.page import PANE_IDS
from graphcmp.app.state import (
    ViewState,
    pick,
    reveal,
    select,
    selected_rows,
    toggle,
    turn_page,
)
from graphcmp.app.svg import pane_svg
from graphcmp.app.viewer import Viewer
from graphcmp.core.errors import GraphcmpError

__all__ = ["job_outputs", "jump_search", "register_callbacks"]

_HIT_LIST = 300  # hits listed at once around the current one; next/previous step through all
_CONTROLS = ("query", "filters", "metric", "bins", "sync", "step", "rank", "micro")
_CENTRING = ("query", "filters", "prev", "next", "hits", "findings", "step", "rank")  # jumps: centre the node
OUTPUTS = (("url", "search"), ("hit-info", "children"), ("hits", "options"), ("hits", "value"),
           ("match-info", "children"), ("match", "disabled"), ("unmatch", "disabled"), ("details", "children"),
           (PANE_IDS["npu"], "elements"), (PANE_IDS["bench"], "elements"), ("focus", "data"),
           ("legend", "children"), ("overview", "children"), ("findings", "options"), ("findings", "value"),
           ("metric", "options"), ("bins", "placeholder"), ("step", "options"), ("rank", "options"),
           ("micro", "options"), ("pane-bench", "style"), ("title-npu", "children"), ("ctl-step", "style"),
           ("ctl-rank", "style"), ("ctl-micro", "style"), ("sync", "style"), ("bench-export", "style"),
           *((c, "value") for c in _CONTROLS))
"""Every property the main callback may set; an action returns only those that changed. Text outputs come
first: the page applies them in this order, so the result list shows before the panes redraw."""


def register_callbacks(app: Dash, viewer: Viewer) -> None:
    """Wire the page's components to `viewer`."""
    outputs = [Output(component, prop) for component, prop in OUTPUTS]
    inputs = [Input("url", "search"), Input(PANE_IDS["npu"], "tapNodeData"), Input(PANE_IDS["bench"], "tapNodeData"),
              Input("prev", "n_clicks"), Input("next", "n_clicks"), Input("hits", "value"),
              Input("findings", "value"), Input("collapse", "n_clicks"), Input("match", "n_clicks"),
              Input("unmatch", "n_clicks"), *(Input(c, "value") for c in _CONTROLS), State("match-children", "value")]

    @app.callback(outputs, inputs, prevent_initial_call=False)
    def update(search, tap_npu, tap_bench, _prev, _next, hit_value, finding, _collapse, _match, _unmatch, *rest):
        before = ViewState.from_query(search)
        trigger = ctx.triggered_id
        values = dict(zip(_CONTROLS, rest))
        note = ""
        if trigger in (None, "url"):
            state, first = _initial(viewer, before), True
        elif trigger in ("match", "unmatch"):
            (state, note), first = _manual(viewer, before, trigger, bool(rest[-1])), True
        else:
            state, first = _apply(viewer, before, trigger, values, tap_npu, tap_bench, hit_value, finding), False
        changed = _outputs(viewer, before, state, first, values, center=first or trigger in _CENTRING, note=note)
        return tuple(changed.get(key, no_update) for key in OUTPUTS)

    if viewer.results.job is not None:
        _register_job(app, viewer)

    app.clientside_callback(
        "function(focus) { return window.graphcmpFocus ? window.graphcmpFocus(focus) : null; }",
        Output("focus-done", "data"), Input("focus", "data"))

    @app.callback(Output(PANE_IDS["npu"], "generateImage"), Input("png-npu", "n_clicks"), prevent_initial_call=True)
    def png_npu(_):
        return _png("npu")

    @app.callback(Output(PANE_IDS["bench"], "generateImage"), Input("png-bench", "n_clicks"),
                  prevent_initial_call=True)
    def png_bench(_):
        return _png("bench")

    @app.callback(Output("download", "data"), Input("svg-npu", "n_clicks"), Input("svg-bench", "n_clicks"),
                  State("url", "search"), prevent_initial_call=True)
    def svg(_a, _b, search):
        side = "bench" if ctx.triggered_id == "svg-bench" else "npu"
        state = _checked(viewer, ViewState.from_query(search))
        if side not in viewer.model(state.result).sides:
            return no_update
        ids = viewer.model(state.result).graphs[side].nodes.ids
        geo = viewer.geometry(state, side)
        names = {c.row: ids[c.row] for c in geo.cells if not c.pager}
        text = pane_svg(geo, viewer.colors(state, side), f"graphcmp {side}", names)
        return {"content": text, "filename": f"graphcmp-{side}.svg", "type": "image/svg+xml"}


def jump_search(viewer: Viewer, state: ViewState, trigger, click: dict | None) -> str | None:
    """The URL of a jump from the job overview (a heat cell: that rank at that module) or from a linked call
    (that rank's call); None when the target is not among the results."""
    results, job = viewer.results, viewer.results.job
    step = results.entry(state.result).step
    if job is None:
        return None
    if isinstance(trigger, dict):  # {"type": "peer", "index": "<rank>:<row>"}
        rank, _, position = str(trigger.get("index", "")).partition(":")
        if not (rank.isdigit() and position.isdigit()):
            return None
        node = job.call_node(step, int(rank), int(position))
    else:
        point = ((click or {}).get("points") or [{}])[0]
        rank, node = str(point.get("y", "")).removeprefix("rank ").strip(), point.get("x")
        node = column_node(node) if isinstance(node, str) else None
    entry = results.find(step, int(rank)) if rank.isdigit() else None
    if entry is None or not isinstance(node, str):
        return None
    fresh = replace(ViewState(), result=entry.key, selected=("npu", node), sync=state.sync, metric=state.metric,
                    bins=state.bins)
    return fresh.to_query()


def _register_job(app: Dash, viewer: Viewer) -> None:
    """The job overview's callbacks (only for a batch results folder, whose page has the overview)."""

    @app.callback([Output("job-origin", "children"), Output("job-spread", "children"), Output("job-heat", "figure"),
                   Output("job-step", "data")], Input("url", "search"), State("job-step", "data"))
    def job_view(search, shown):
        step = viewer.results.entry(ViewState.from_query(search).result).step
        if shown is not None and shown.get("step") == step:
            return no_update, no_update, no_update, no_update
        out = job_outputs(viewer, step)
        return out[("job-origin", "children")], out[("job-spread", "children")], out[("job-heat", "figure")], \
            {"step": step}

    @app.callback(Output("url", "search", allow_duplicate=True), Input("job-heat", "clickData"),
                  Input({"type": "peer", "index": ALL}, "n_clicks"), State("url", "search"), prevent_initial_call=True)
    def jump(click, _peers, search):
        trigger = ctx.triggered_id
        if isinstance(trigger, dict) and not (ctx.triggered and ctx.triggered[0].get("value")):
            return no_update  # a peer button drawn, not clicked
        target = jump_search(viewer, ViewState.from_query(search), trigger, click)
        return target if target is not None else no_update


def _png(side: str) -> dict:
    return {"type": "png", "action": "download", "filename": f"graphcmp-{side}",
            "options": {"full": True, "scale": 2, "bg": "#ffffff"}}


def _checked(viewer: Viewer, state: ViewState) -> ViewState:
    """`state` with a known result and only rows and nodes that result has."""
    entry = viewer.results.entry(state.result)
    return replace(state, result=entry.key).clean(viewer.model(entry.key))


def _initial(viewer: Viewer, state: ViewState) -> ViewState:
    """The state of a URL opened afresh: checked, and the selection made visible."""
    state = _checked(viewer, state)
    model = viewer.model(state.result)
    rows = selected_rows(state, model)
    for side, row in rows.items():
        state = reveal(state, model, side, row)
    return state


def _apply(viewer: Viewer, state: ViewState, trigger, values: dict, tap_npu, tap_bench, hit_value,
           finding) -> ViewState:
    state = _checked(viewer, state)
    model = viewer.model(state.result)
    if trigger in (PANE_IDS["npu"], PANE_IDS["bench"]):
        side = "npu" if trigger == PANE_IDS["npu"] else "bench"
        return _tap(state, model, side, tap_npu if side == "npu" else tap_bench)
    if trigger in ("prev", "next"):
        return _step_hit(viewer, state, model, -1 if trigger == "prev" else 1)
    if trigger == "hits" and hit_value is not None:
        return _go_hit(viewer, state, model, int(hit_value))
    if trigger == "findings" and finding:
        row = model.row_of("npu", str(finding))
        return select(state, model, "npu", row) if row is not None else state
    if trigger == "collapse":
        return replace(state, open={s: () for s in state.open}, pages={s: {} for s in state.pages})
    return _control(viewer, state, model, trigger, values)


def _tap(state: ViewState, model: ViewModel, side: str, data: dict | None) -> ViewState:
    parsed = parse_element_id((data or {}).get("id"))
    if parsed is None or parsed[0] >= len(model.trees[side]):
        return state
    row, pager = parsed
    if pager:
        return turn_page(state, model, side, row, pager)
    return pick(toggle(state, model, side, row), model, side, row)


def _manual(viewer: Viewer, state: ViewState, trigger: str, children: bool) -> tuple[ViewState, str]:
    """Match the picked npu and bench nodes, or unmatch the selected pair; saved to the result's sidecar."""
    state = _checked(viewer, state)
    key = state.result
    if not viewer.can_match(key):
        return state, "manual matching needs a result file: graphcmp compare NPU BENCH -o cmp.json, then serve it"
    model = viewer.model(key)
    if trigger == "match":
        npu, bench = state.picked
        if not (npu and bench):
            return state, "pick a node in each pane first"
        manual, note = viewer.manual(key).with_match(npu, bench, children=children), f"matched {npu} ↔ {bench}"
    else:
        rows = selected_rows(state, model)
        if len(rows) != 2:
            return state, "select a matched node to unmatch it and its twin"
        npu, bench = (model.graphs[side].nodes.ids[rows[side]] for side in SIDES)
        manual, note = viewer.manual(key).with_unmatch(npu, bench), f"unmatched {npu} ↔ {bench}"
    try:
        viewer.decide(key, manual)
    except GraphcmpError as err:
        return state, str(err)
    model = viewer.model(key)
    state = select(state, model, "npu", model.graphs["npu"].row(npu))
    return reveal(state, model, "bench", model.graphs["bench"].row(bench)), note


def _step_hit(viewer: Viewer, state: ViewState, model: ViewModel, step: int) -> ViewState:
    hits, _ = viewer.hits(state)
    if not hits:
        return state
    return _go_hit(viewer, state, model, (state.hit + step) % len(hits))


def _go_hit(viewer: Viewer, state: ViewState, model: ViewModel, index: int) -> ViewState:
    hits, _ = viewer.hits(state)
    if not 0 <= index < len(hits):
        return state
    side, row = hits[index]
    return select(replace(state, hit=index), model, side, row)


def _control(viewer: Viewer, state: ViewState, model: ViewModel, trigger: str, values: dict) -> ViewState:
    if trigger in ("query", "filters"):
        state = replace(state, query=(values["query"] or "")[:300], filters=tuple(values["filters"] or ()), hit=0)
        hits, _ = viewer.hits(state)
        return _go_hit(viewer, state, model, 0) if hits else state
    if trigger == "metric":
        return replace(state, metric=values["metric"] or "", bins="")
    if trigger == "bins":
        return replace(state, bins=(values["bins"] or "")[:200])
    if trigger == "sync":
        return replace(state, sync=bool(values["sync"]))
    if trigger == "micro":
        micro = values["micro"]
        return replace(state, micro=None if micro in (None, "all") else int(micro))
    if trigger in ("step", "rank"):
        return _switch_result(viewer, state, values)
    return state


def _switch_result(viewer: Viewer, state: ViewState, values: dict) -> ViewState:
    step, rank = _opt_int(values["step"]), _opt_int(values["rank"])
    results = viewer.results
    entry = results.find(step, rank) or next((e for e in results.entries if e.step == step), results.default)
    if entry.key == state.result:
        return state
    fresh = replace(ViewState(), result=entry.key, selected=state.selected, sync=state.sync, metric=state.metric,
                    bins=state.bins, query=state.query, filters=state.filters)
    return _initial(viewer, fresh)


def _opt_int(value) -> int | None:
    return None if value in (None, "", "-") else int(value)


# ---- outputs ------------------------------------------------------------------------------------

def _outputs(viewer: Viewer, before: ViewState, state: ViewState, first: bool, values: dict,
             center: bool = False, note: str = "") -> dict:
    """The properties to set after an action (all of them when the page is (re)loaded)."""
    model = viewer.model(state.result)
    redraw = tuple(side for side in model.sides if first or _pane_changed(before, state, side))
    rendered = viewer.render(state, redraw)
    out: dict = {("url", "search"): state.to_query()}
    for side in redraw:
        out[(PANE_IDS[side], "elements")] = rendered.elements[side]
    if "bench" not in model.sides:
        out[(PANE_IDS["bench"], "elements")] = []
    rows = selected_rows(state, model)
    focus = {side: _focus_id(viewer, state, side, rows.get(side)) for side in ("npu", "bench")}
    out[("focus", "data")] = {**focus, "fit": first and not rows, "center": center, "seq": state.to_query()}
    if first or before.selected != state.selected or before.result != state.result:
        npu = model.graphs["npu"].nodes.ids[rows["npu"]] if "npu" in rows and model.paired else ""
        out[("details", "children")] = details_panel(model, rows, viewer.peers(state.result, npu) if npu else ())
    if first or before.picked != state.picked or before.selected != state.selected:
        out.update(_match_outputs(viewer, model, state, rows, note))
    options, hit, info = _hit_list(model, state, rendered)
    if first or _hits_changed(before, state):
        out[("hits", "options")] = options
    out[("hits", "value")], out[("hit-info", "children")] = hit, info
    out[("findings", "value")] = _findings(model, state)[1]
    if first or before.result != state.result or before.metric != state.metric:
        out.update(_static_outputs(viewer, model, state, rendered.scheme))
    out.update(_control_values(viewer, state, rendered.scheme, values, first))
    return out


def job_outputs(viewer: Viewer, step: int | None) -> dict:
    """The job overview of `step`, drawn from the batch index only (empty when the results have none)."""
    job = viewer.results.job
    if job is None:
        return {}
    spread = job.spread_text(step)
    return {("job-origin", "children"): job.origin_text(),
            ("job-spread", "children"): [html.Div(f"step {_opt_text(step)} spread: " + "; ".join(spread))] if spread
            else [], ("job-heat", "figure"): heat_figure(job.heat(step), job.analysis.get("origin"))}


def _match_outputs(viewer: Viewer, model: ViewModel, state: ViewState, rows: dict[str, int], note: str) -> dict:
    """The manual-match block: the picked pair, and which buttons apply."""
    able = viewer.can_match(state.result)
    lines = [html.Div([html.Span(f"{side} ", className="muted"), html.Span(node or "— (click a node)")])
             for side, node in zip(SIDES, state.picked)] if able else \
        [html.Div("manual matching needs a result file (serve the output of graphcmp compare -o)", className="muted")]
    if note:
        lines.append(html.Div(note, className="match-note"))
    return {("match-info", "children"): lines, ("match", "disabled"): not (able and all(state.picked)),
            ("unmatch", "disabled"): not (able and len(rows) == 2)}


def _static_outputs(viewer: Viewer, model: ViewModel, state: ViewState, scheme) -> dict:
    steps, ranks, micros = viewer.results.steps(), viewer.results.ranks(), _micro_options(model)
    hidden = {"display": "none"}
    return {
        ("legend", "children"): _legend(viewer.legend(scheme)), ("overview", "children"): _overview(model),
        ("findings", "options"): _findings(model, state)[0],
        ("metric", "options"): [{"label": label, "value": name} for name, label in model.metric_names().items()],
        ("bins", "placeholder"): ", ".join(f"{e:g}" for e in scheme.edges) or "—",
        ("step", "options"): _options(steps), ("rank", "options"): _options(ranks), ("micro", "options"): micros,
        ("pane-bench", "style"): {} if model.paired else hidden,
        ("sync", "style"): {} if model.paired else hidden, ("bench-export", "style"): {} if model.paired else hidden,
        ("title-npu", "children"): "NPU (run under test)" if model.paired else f"run: {model.graphs['npu'].info.path}",
        ("ctl-step", "style"): {} if len(steps) > 1 else hidden,
        ("ctl-rank", "style"): {} if len(ranks) > 1 else hidden,
        ("ctl-micro", "style"): {} if len(micros) > 1 else hidden,
    }


def _control_values(viewer: Viewer, state: ViewState, scheme, values: dict, first: bool) -> dict:
    entry = viewer.results.entry(state.result)
    wanted = {"query": state.query, "filters": list(state.filters), "metric": scheme.metric, "bins": state.bins,
              "sync": ["on"] if state.sync else [], "step": _opt_text(entry.step), "rank": _opt_text(entry.rank),
              "micro": "all" if state.micro is None else str(state.micro)}
    return {(name, "value"): value for name, value in wanted.items() if first or values.get(name) != value}


def _hits_changed(before: ViewState, state: ViewState) -> bool:
    return (before.result, before.query, before.filters, before.micro) != \
        (state.result, state.query, state.filters, state.micro) or abs(before.hit - state.hit) > _HIT_LIST // 4


def _focus_id(viewer: Viewer, state: ViewState, side: str, row: int | None) -> str | None:
    if row is None:
        return None
    return node_element_id(row, row in viewer.geometry(state, side).box_rows())


def _pane_changed(before: ViewState, state: ViewState, side: str) -> bool:
    return any(getattr(before, f) != getattr(state, f) for f in ("result", "micro", "metric", "bins", "query",
                                                                   "filters")) \
        or before.open[side] != state.open[side] or before.pages[side] != state.pages[side]


def _hit_list(model: ViewModel, state: ViewState, rendered) -> tuple[list, int | None, str]:
    hits = rendered.hits
    if rendered.search_error:
        return [], None, rendered.search_error
    if not hits:
        return [], None, "no matches" if (state.query or state.filters) else ""
    hit = min(state.hit, len(hits) - 1)
    lo = max(0, min(hit - _HIT_LIST // 2, len(hits) - _HIT_LIST))
    options = [{"label": f"{side if model.paired else ''} {model.graphs[side].nodes.ids[row]}".strip(),
                "value": k} for k, (side, row) in enumerate(hits[lo: lo + _HIT_LIST], start=lo)]
    return options, hit, f"{hit + 1} of {len(hits):,}"


def _legend(items: list[tuple[str, str]]) -> list:
    rows = [html.Div([html.Span(className="swatch", style={"backgroundColor": color}), html.Span(text)],
                     className="legend-row") for color, text in items]
    marks = [("swatch unmatched", "unmatched (no twin)"), ("swatch overflow", "overflow (inf/NaN)"),
             ("swatch fused", "fused op (several original ops)"),
             ("swatch module", "module: click to open/close"), ("swatch nodata", "not dumped (structure only)"),
             ("swatch hit", "search / filter hit")]
    rows += [html.Div([html.Span(className=cls), html.Span(text)], className="legend-row") for cls, text in marks]
    return rows


def _overview(model: ViewModel) -> list:
    return [html.Div([html.Span(k, className="muted"), html.Span(" " + v)]) for k, v in model.summary_rows]


def _findings(model: ViewModel, state: ViewState) -> tuple[list, str | None]:
    analysis = model.analysis
    if analysis is None:
        return [], None
    options = [{"label": f"[{f.level}] {f.message}", "value": f.node or f"-{k}", "disabled": f.node is None}
               for k, f in enumerate(analysis.findings)]
    selected = state.selected[1] if state.selected and state.selected[0] == "npu" else None
    return options, selected if any(f.node == selected for f in analysis.findings) else None


def _options(values: list[int | None]) -> list[dict]:
    return [{"label": _opt_text(v), "value": _opt_text(v)} for v in values]


def _opt_text(v: int | None) -> str:
    return "-" if v is None else str(v)


def _micro_options(model: ViewModel) -> list[dict]:
    n = int(max(int(g.nodes.micro_step.max(initial=0)) for g in model.graphs.values())) + 1
    return [{"label": "all", "value": "all"}] + [{"label": str(k), "value": str(k)} for k in range(n)] * (n > 1)
