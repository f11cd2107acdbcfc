"""Callbacks: a click or a control change becomes one state action; the new state is written to the URL.

One server callback owns the state: it reads the current state from the URL, applies the action
of whatever triggered it (`ACTIONS`), and returns the URL, the panes, the details and the lists.
Panes whose layout and colours did not change are not resent. A clientside callback (assets/
graphcmp.js) selects and centres the focused nodes; PNG comes from cytoscape, SVG from `svg`.
"""

from __future__ import annotations

from dataclasses import replace

from dash import Dash, Input, Output, State, ctx, html, no_update

from graphcmp.app.details import details_panel
from graphcmp.app.elements import node_element_id, parse_element_id
from graphcmp.app.model import ViewModel
from graphcmp.app.page import PANE_IDS
from graphcmp.app.state import (
    ViewState,
    reveal,
    select,
    selected_rows,
    toggle,
    turn_page,
)
from graphcmp.app.svg import pane_svg
from graphcmp.app.viewer import Viewer

__all__ = ["register_callbacks"]

_HIT_LIST = 300  # hits listed at once around the current one; next/previous step through all
_CONTROLS = ("query", "filters", "metric", "bins", "sync", "step", "rank", "micro")
_CENTRING = ("query", "filters", "prev", "next", "hits", "findings", "step", "rank")  # jumps: centre the node
OUTPUTS = (("url", "search"), ("hit-info", "children"), ("hits", "options"), ("hits", "value"),
           ("details", "children"), (PANE_IDS["npu"], "elements"), (PANE_IDS["bench"], "elements"), ("focus", "data"),
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
              Input("findings", "value"), Input("collapse", "n_clicks"),
              *(Input(c, "value") for c in _CONTROLS)]

    @app.callback(outputs, inputs, prevent_initial_call=False)
    def update(search, tap_npu, tap_bench, _prev, _next, hit_value, finding, _collapse, *controls):
        before = ViewState.from_query(search)
        trigger = ctx.triggered_id
        values = dict(zip(_CONTROLS, controls))
        if trigger in (None, "url"):
            state, first = _initial(viewer, before), True
        else:
            state, first = _apply(viewer, before, trigger, values, tap_npu, tap_bench, hit_value, finding), False
        changed = _outputs(viewer, before, state, first, values, center=first or trigger in _CENTRING)
        return tuple(changed.get(key, no_update) for key in OUTPUTS)

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
    state = toggle(state, model, side, row)
    return replace(state, selected=(side, model.graphs[side].nodes.ids[row]))


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
             center: bool = False) -> dict:
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
        out[("details", "children")] = details_panel(model, rows)
    options, hit, info = _hit_list(model, state, rendered)
    if first or _hits_changed(before, state):
        out[("hits", "options")] = options
    out[("hits", "value")], out[("hit-info", "children")] = hit, info
    out[("findings", "value")] = _findings(model, state)[1]
    if first or before.result != state.result or before.metric != state.metric:
        out.update(_static_outputs(viewer, model, state, rendered.scheme))
    out.update(_control_values(viewer, state, rendered.scheme, values, first))
    return out


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
