"""What each part of the page shows after an action: one view per concern, each returning its named outputs.

A `Turn` is one pass of the main callback (the state before and after the action, whether the page is
drawn afresh). `VIEWS` maps each concern of `callbacks.OUTPUTS` to the function that fills it; a view
returns only the outputs that changed (all of them when the page is drawn afresh), by the names
`callbacks.OUTPUTS` gives them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from dash import dcc, html

from graphcmp.app.chart import error_figure, error_series
from graphcmp.app.colors import NONE_COLOR, STATUS_COLORS
from graphcmp.app.details import details_panel
from graphcmp.app.elements import node_element_id
from graphcmp.app.job import heat_figure
from graphcmp.app.model import SIDES, ViewModel
from graphcmp.app.page import FILTER_LABELS, TAB_LABELS
from graphcmp.app.single_op import op_panel
from graphcmp.app.state import FILTERS, TABS, ViewState, selected_rows
from graphcmp.app.table import ready_table, table_component
from graphcmp.app.viewer import Rendered, Viewer
from graphcmp.core.judge import STATUS_NAMES

__all__ = ["MARKS", "VIEWS", "Turn", "job_outputs", "show"]

_HIT_LIST = 300  # hits listed at once around the current one; next/previous step through all
_PANE_FIELDS = ("result", "micro", "metric", "bins", "query", "filters")


class Turn:
    """One pass of the main callback: the viewer, the states before and after, and what is shared by views.

    Parameters
    ----------
    first : bool
        The page is drawn afresh (a URL opened, a result recompared): every output is sent.
    controls : Mapping
        The controls' values as the page holds them (a control already showing its value is not resent).
    center : bool
        Centre the focused nodes (a jump: search, hit, finding, step ...).
    fit : bool
        Fit the panes to their nodes (collapse all: the top of the model, not where the pane was scrolled to).
    trigger : str, optional
        The input that fired (a name of `callbacks.TRIGGERS` or `CONTROLS`).
    note : str
        A line for the manual-match block (what the last decision did).
    """

    def __init__(self, viewer: Viewer, before: ViewState, state: ViewState, *, first: bool,
                 controls: Mapping[str, Any], center: bool = False, note: str = "", fit: bool = False,
                 trigger: str | None = None) -> None:
        self.viewer, self.before, self.state, self.first = viewer, before, state, first
        self.controls, self.center, self.note, self.fit, self.trigger = controls, center, note, fit, trigger

    @cached_property
    def model(self) -> ViewModel:
        return self.viewer.model(self.state.result)

    @cached_property
    def rows(self) -> dict[str, int]:
        """The selected row of each side (both when the selection has a twin)."""
        return selected_rows(self.state, self.model)

    @cached_property
    def redraw(self) -> tuple[str, ...]:
        """The panes whose layout or colours changed."""
        return tuple(side for side in self.model.sides if self.first or _pane_changed(self.before, self.state, side))

    @cached_property
    def rendered(self) -> Rendered:
        return self.viewer.render(self.state, self.redraw)

    def changed(self, *fields: str) -> bool:
        """True when the page is drawn afresh or any of these state fields changed."""
        return self.first or any(getattr(self.before, f) != getattr(self.state, f) for f in fields)


def page(turn: Turn) -> dict[str, Any]:
    return {"url": turn.state.to_query()}


def banner(turn: Turn) -> dict[str, Any]:
    """The answer above the panes: where the runs first diverge (op, module, rank, step, cause, margin) and *go*."""
    if not turn.changed("result"):
        return {}
    parts, level = _banner(turn.viewer, turn.model)
    return {"banner": parts, "banner_class": f"banner banner-{level}",
            "go_style": {} if level == "diverged" else {"display": "none"}}


def hit_list(turn: Turn) -> dict[str, Any]:
    options, hit, info = _hit_list(turn.model, turn.state, turn.rendered)
    out: dict[str, Any] = {"hit": hit, "hit_info": info}
    if turn.first or _hits_changed(turn.before, turn.state):
        out["hit_options"] = options
    return out


def match_block(turn: Turn) -> dict[str, Any]:
    """The manual-match block: the picked pair, and which buttons apply."""
    if not turn.changed("picked", "selected"):
        return {}
    able = turn.viewer.can_match(turn.state.result)
    lines = [html.Div([html.Span(f"{side} ", className="muted"), html.Span(node or "— (click a node)")])
             for side, node in zip(SIDES, turn.state.picked)] if able else \
        [html.Div("manual matching needs a result file (serve the output of graphcmp compare -o)", className="muted")]
    if turn.note:
        lines.append(html.Div(turn.note, className="match-note"))
    return {"match_info": lines, "match_disabled": not (able and all(turn.state.picked)),
            "unmatch_disabled": not (able and len(turn.rows) == 2)}


def details(turn: Turn) -> dict[str, Any]:
    if not turn.changed("selected", "result"):
        return {}
    model, rows = turn.model, turn.rows
    npu = model.graphs["npu"].nodes.ids[rows["npu"]] if "npu" in rows and model.paired else ""
    return {"details": details_panel(model, rows, turn.viewer.peers(turn.state.result, npu) if npu else ())}


def panes(turn: Turn) -> dict[str, Any]:
    out: dict[str, Any] = {f"{side}_elements": turn.rendered.elements[side] for side in turn.redraw}
    if "bench" not in turn.model.sides:
        out["bench_elements"] = []
    focus = {side: _focus_id(turn, side, turn.rows.get(side)) for side in SIDES}
    out["focus"] = {**focus, "fit": (turn.first and not turn.rows) or turn.fit, "center": turn.center,
                    "seq": turn.state.to_query()}
    return out


def sidebar(turn: Turn) -> dict[str, Any]:
    options, finding = _findings(turn.model, turn.state)
    out: dict[str, Any] = {"finding": finding}
    if turn.changed("result", "metric"):
        out.update(legend=_legend(turn.viewer.legend(turn.rendered.scheme), turn.model.marks),
                   overview=_overview(turn.model), finding_options=options,
                   filter_options=[{"label": f" {FILTER_LABELS.get(f, f)}", "value": f} for f in FILTERS
                                   if f in turn.model.filters()])
    return out


def controls(turn: Turn) -> dict[str, Any]:
    """Options and visibility of the controls (they depend on the result and the colouring only)."""
    if not turn.changed("result", "metric"):
        return {}
    viewer, model, scheme = turn.viewer, turn.model, turn.rendered.scheme
    steps, ranks, micros = viewer.results.steps(), viewer.results.ranks(), _micro_options(model)
    hidden, paired = {"display": "none"}, model.paired
    entry = viewer.results.entry(turn.state.result)
    return {
        "doc_title": entry.title if len(viewer.results.entries) > 1 else entry.source,
        "metric_options": [{"label": label, "value": name} for name, label in model.metric_names().items()],
        "bins_placeholder": ", ".join(f"{e:g}" for e in scheme.edges) or "—",
        "step_options": _options(steps), "rank_options": _options(ranks), "micro_options": micros,
        "bench_pane_style": {} if paired else hidden,
        "npu_title": "NPU (run under test)" if paired else f"run: {model.graphs['npu'].info.path}",
        "step_style": {} if len(steps) > 1 else hidden, "rank_style": {} if len(ranks) > 1 else hidden,
        "micro_style": {} if len(micros) > 1 else hidden,
        "sync_style": {} if paired else hidden, "bench_export_style": {} if paired else hidden,
    }


def control_values(turn: Turn) -> dict[str, Any]:
    """The controls' values as the state has them (only those the page does not already show)."""
    state = turn.state
    entry = turn.viewer.results.entry(state.result)
    wanted = {"query": state.query, "filters": list(state.filters), "metric": turn.rendered.scheme.metric,
              "bins": state.bins, "sync": ["on"] if state.sync else [], "step": _opt_text(entry.step), "tab": state.tab,
              "rank": _opt_text(entry.rank), "micro": "all" if state.micro is None else str(state.micro)}
    return {name: value for name, value in wanted.items() if turn.first or turn.controls.get(name) != value}


_FRAME_FIELDS = ("sidebar", "sidebar_w", "bottom", "bottom_h", "tab")
_HIDDEN = {"display": "none"}


def frame(turn: Turn) -> dict[str, Any]:
    """The page's frame: the sidebar and the bottom panel (shown, their sizes), and the bottom panel's tabs (those
    that apply to the result and the selected node)."""
    if not turn.changed(*_FRAME_FIELDS, "result", "selected"):
        return {}
    usable = _usable_tabs(turn)
    if not turn.changed(*_FRAME_FIELDS, "result") and usable.keys() == _usable_tabs(turn, before=True).keys():
        return {}  # another node selected, and the same tabs apply: nothing of the frame changes
    s = turn.state
    width = {"width": f"{s.sidebar_w}px", "flex": f"0 0 {s.sidebar_w}px"} if s.sidebar_w else {}
    height = {"height": f"{s.bottom_h}px", "flex": f"0 0 {s.bottom_h}px"} if s.bottom_h else {}
    tab = s.tab if s.tab in usable else "details"
    return {
        "sidebar_style": width if s.sidebar else _HIDDEN, "sidebar_grip": {} if s.sidebar else _HIDDEN,
        "bottom_style": height if s.bottom else _HIDDEN, "bottom_grip": {} if s.bottom else _HIDDEN,
        "sidebar_button": "btn on" if s.sidebar else "btn", "bottom_button": "btn on" if s.bottom else "btn",
        "tab_options": [{"label": label, "value": name, "disabled": name not in usable}
                        for name, label in TAB_LABELS.items()],
        "tab_note": usable.get(tab, ""),
        **{f"{name}_box": {} if name == tab else _HIDDEN for name in TABS},
    }


def _usable_tabs(turn: Turn, before: bool = False) -> dict[str, str]:
    """The tabs that apply (name -> a note on what the tab shows): the chart for a report with compared calls, the
    single-op view for a selected pair of nodes with tensor files (of the state `before` the action, if asked)."""
    model = turn.model
    out = {"details": ""}
    if model.paired and len(model.report.noise.leaves):  # what error_series draws (made when the tab opens)
        out["chart"] = _chart_note(turn)
    if _op_pair(turn, selected_rows(turn.before, model) if before else turn.rows) is not None:
        out["op"] = ""
    if model.paired:
        out["table"] = "msprobe's compare result, one row per npu tensor: sort and filter in the header, click a cell"
    return out


def _chart_note(turn: Turn) -> str:
    entry = turn.viewer.results.entry(turn.state.result)
    return entry.title if len(turn.viewer.results.entries) > 1 else ""


def chart(turn: Turn) -> dict[str, Any]:
    """The error chart (only while its tab is shown; drawn again when the result or the selection changes)."""
    s = turn.state
    if s.tab != "chart" or not s.bottom or not turn.changed("tab", "bottom", "result", "selected"):
        return {"chart": []} if turn.first else {}
    series = error_series(turn.model)
    if series is None:
        return {"chart": html.Div("no compared call: nothing to chart", className="hint")}
    figure = error_figure(turn.model, series, turn.rows.get("npu", -1), _chart_title(turn))
    return {"chart": dcc.Graph(id={"type": "chart", "index": "errors"}, figure=figure, className="error-chart",
                               config={"displayModeBar": False, "responsive": True},
                               style={"height": "100%", "minHeight": "180px"})}


def _chart_title(turn: Turn) -> str:
    entry = turn.viewer.results.entry(turn.state.result)
    where = f"{entry.title}: " if len(turn.viewer.results.entries) > 1 else ""
    return f"{where}each call's output error (log) and the noise its precision allows; click a point to open it"


def _op_pair(turn: Turn, rows: dict[str, int] | None = None) -> tuple[int, int] | None:
    """(npu row, bench row) of the selected node (`rows`, default the turn's) when both runs hold tensor files for
    it, else None."""
    rows = turn.rows if rows is None else rows
    model = turn.model
    if not model.paired or len(rows) != 2:
        return None
    if not model.has_tensor_files("npu", rows["npu"]) or not model.has_tensor_files("bench", rows["bench"]):
        return None
    return rows["npu"], rows["bench"]


def single_op(turn: Turn) -> dict[str, Any]:
    """The single-op view of the selected node (only while its tab is shown)."""
    s = turn.state
    if s.tab != "op" or not s.bottom or not turn.changed("tab", "bottom", "result", "selected"):
        return {"op": []} if turn.first else {}
    pair = _op_pair(turn)
    if pair is None:
        return {"op": html.Div("select a node whose tensors both runs dumped (msprobe task tensor, kernel dumps)",
                               className="hint")}
    return {"op": op_panel(turn.model, *pair)}


def table(turn: Turn) -> dict[str, Any]:
    """The table view (only while its tab is shown; made again when the result changes). A table still being made
    (`ready_table`) shows a line and polls until it is ready."""
    s = turn.state
    polled = turn.trigger == "table_wait"
    if s.tab != "table" or not s.bottom or not (turn.changed("tab", "bottom", "result") or polled):
        return {"table": []} if turn.first else {}
    if not turn.model.paired:
        return {"table": html.Div("a single run has no compared tensors", className="hint")}
    cols = ready_table(turn.model)
    if cols is None:
        if polled:
            return {}
        rows = len(turn.model.report.npu.tensors)
        return {"table": html.Div([
            html.Span(f"making the table of {rows:,} npu tensors (about 20 µs a row) …", className="hint"),
            dcc.Interval(id={"type": "ctable-wait", "index": "rows"}, interval=1000)])}
    return {"table": table_component(cols)}


VIEWS: dict[str, Callable[[Turn], dict[str, Any]]] = {
    "page": page, "banner": banner, "hits": hit_list, "match": match_block, "details": details, "panes": panes,
    "sidebar": sidebar,
    "controls": controls, "values": control_values, "frame": frame, "chart": chart, "op": single_op,
    "table": table,
}
"""Concern -> its view; the concerns and output names are those of `callbacks.OUTPUTS`."""


def show(turn: Turn) -> dict[str, dict[str, Any]]:
    """Every concern's changed outputs after `turn`, by concern and name."""
    return {concern: view(turn) for concern, view in VIEWS.items()}


def job_outputs(viewer: Viewer, step: int | None, rank: int | None = None, metric: str = "verdict") -> dict[str, Any]:
    """The job overview of (`step`, `rank`), drawn from the batch index only (empty when the results have none):
    the rank x module map of the step and, when the job has several steps, the step x module trend of the rank."""
    job = viewer.results.job
    if job is None:
        return {}
    spread = job.spread_text(step)
    origin = job.analysis.get("origin")
    several = len(job.steps()) > 1
    heat = heat_figure(job.heat(step), origin, metric)
    trend = heat_figure(job.trend(rank), origin, metric) if several else {"data": [], "layout": {"height": 40}}
    return {"origin": job.origin_text(),
            "spread": [html.Div(f"step {_opt_text(step)} spread: " + "; ".join(spread))] if spread else [],
            "heat": heat, "heat_size": {"height": f"{heat['layout']['height']}px"},
            "trend": trend, "trend_size": {"height": f"{trend['layout']['height']}px"},
            "trend_style": {} if several else {"display": "none"}}


# ---- helpers ----------------------------------------------------------------------------------------


def _pane_changed(before: ViewState, state: ViewState, side: str) -> bool:
    return any(getattr(before, f) != getattr(state, f) for f in _PANE_FIELDS) \
        or before.open[side] != state.open[side] or before.pages[side] != state.pages[side]


def _hits_changed(before: ViewState, state: ViewState) -> bool:
    return (before.result, before.query, before.filters, before.micro) != \
        (state.result, state.query, state.filters, state.micro) or abs(before.hit - state.hit) > _HIT_LIST // 4


def _focus_id(turn: Turn, side: str, row: int | None) -> str | None:
    """The element of the selected row: itself, or the consumer it is drawn folded into."""
    if row is None:
        return None
    into = turn.model.trees[side].folded_into
    if into is not None and into[row] >= 0:
        row = int(into[row])
    geo = turn.viewer.geometry(turn.state, side)
    if not geo.visible[row]:  # inside a closed module (collapse all): nothing to select or scroll to
        return None
    return node_element_id(row, row in geo.box_rows())


def _hit_list(model: ViewModel, state: ViewState, rendered: Rendered) -> tuple[list, int | None, str]:
    hits = rendered.hits
    if rendered.search_error:
        return [], None, rendered.search_error
    if not hits:
        return [], None, "no matches" if (state.query or state.filters) else ""
    hit = min(state.hit, len(hits) - 1)
    lo = max(0, min(hit - _HIT_LIST // 2, len(hits) - _HIT_LIST))
    options = [{"label": _hit_row(model, side, row), "value": k}
               for k, (side, row) in enumerate(hits[lo: lo + _HIT_LIST], start=lo)]
    return options, hit, f"{hit + 1} of {len(hits):,}"


def _hit_row(model: ViewModel, side: str, row: int) -> html.Span:
    """One search hit: its verdict's colour, its short name (the full id as tooltip) and its module path."""
    tree = model.trees[side]
    status = model.status(side)
    code = int(status[row]) if status is not None else None
    verdict = STATUS_NAMES.get(code, "") if code is not None else ""
    path = " › ".join(tree.label(a) for a in tree.ancestors(row)[1:]) or "top level"
    where = f"{side} · {path}" if model.paired and side == "bench" else path
    return html.Span([
        html.Span(className="swatch hit-verdict", title=verdict,
                  style={"backgroundColor": STATUS_COLORS.get(code, NONE_COLOR) if code is not None else NONE_COLOR}),
        html.Span(tree.label(row), className="hit-name", title=model.graphs[side].nodes.ids[row]),
        html.Span(where, className="hit-path"),
    ], className="hit-row")


MARKS = (  # (the class a pane gives the mark, the legend's swatch, text): every mark a pane draws
    ("origin", "swatch origin", "the origin itself: octagon, heavy red double border, halo"),
    ("unmatched", "swatch unmatched", "only in this run: no twin in the other (dashed, white)"),
    ("renamed", "swatch renamed", "matched under another name (mapping rule, fuzzy match)"),
    ("overflow", "swatch overflow", "overflow (inf/NaN or the dtype's limit)"),
    ("fused", "swatch fused", "fused op (several original ops)"),
    ("module", "swatch module", "module: click to open/close"),
    ("box", "swatch box", "open module: click its border to close"),
    ("nodata", "swatch nodata", "not dumped (structure only)"), ("hit", "swatch hit", "search / filter hit"),
    ("selected", "swatch selected", "selected node and its twin"),
    ("pager", "swatch pager", "▲ ▼ previous / next page of children"),
    ("flow", "mark-edge", "data flow: producer → consumer (bent aside past a column)"),
    ("hot", "mark-edge hot", "contamination path (from the origin)"),
    ("control", "mark-edge control", "control edge (ordering only)"),
    ("backward", "mark-text:◂", "backward call (◂ after the name)"),
    ("ranks", "mark-text:[r0-1]", "ranks a merged node came from"),
    ("folds", "mark-text:[+2]", "inputs folded into the node (constants, weights): shown when selected"),
    ("hover", "mark-text:f16", "an edge under the pointer shows the tensor it carries (dtype, shape)"),
)


def _legend(items: list[tuple[str, str]], marks: frozenset[str]) -> list:
    """The legend: the colours of the scheme, then the marks this document's panes can draw (`ViewModel.marks`)."""
    rows = [html.Div([html.Span(className="swatch", style={"backgroundColor": color}), html.Span(text)],
                     className="legend-row") for color, text in items]
    for mark, swatch, text in MARKS:
        if mark not in marks:
            continue
        mark = (html.Span(swatch.partition(":")[2], className="mark-text") if swatch.startswith("mark-text:")
                else html.Span(className=swatch))
        rows.append(html.Div([mark, html.Span(text)], className="legend-row"))
    return rows


def _banner(viewer: Viewer, model: ViewModel) -> tuple[list, str]:
    """(components, level) of the banner: "diverged", "agree", or "none" (a single run: no banner)."""
    job = viewer.results.job
    origin = (job.analysis.get("origin") or {}) if job is not None else {}
    if origin:
        node = origin.get("node") or "?"
        op = model.graphs["npu"].nodes.op[row] if (row := model.row_of("npu", node)) is not None else ""
        return _divergence_text(node, op, origin.get("module"), origin.get("rank"), origin.get("step"),
                                origin.get("cause"), origin.get("margin"), origin.get("direction"),
                                origin.get("call_site") or "", origin.get("summary") or ""), "diverged"
    if job is not None and job.analysis:
        return [html.Strong("No divergence found in any rank.")], "agree"
    if model.analysis is None:
        return [], "none"
    first = model.analysis.first
    if first is None:
        compared = len(model.report.noise.leaves)
        return [html.Strong("No divergence: "),
                html.Span(f"all {compared:,} compared calls agree within the noise of their precision.")], "agree"
    op = model.graphs["npu"].nodes.op[model.row_of("npu", first.node)]
    return _divergence_text(first.node, op, first.module, first.rank, first.step, first.cause, first.margin,
                            first.direction, first.call_site, first.summary), "diverged"


def _divergence_text(node: str, op: str, module: str | None, rank: int | None, step: int | None,
                     cause: str | None, margin: float | None, direction: str | None, call_site: str = "",
                     summary: str = "") -> list:
    """The banner's line: op and node, module, rank, step, cause, margin, and under it the user's line that made
    the call and the cause in one sentence (all text children, never HTML)."""
    facts = [f"module {module}" if module else "top level"]
    facts += [f"rank {rank}"] if rank is not None else []
    facts += [f"step {step}"] if step is not None else []
    facts += [f"{direction} pass"] if direction else []
    facts += [f"cause: {cause}"] if cause else []
    if isinstance(margin, (int, float)):
        facts.append(f"{margin:.3g}x the noise allowed" if margin == margin and margin != float("inf")
                     else "far beyond the noise")
    why = [html.Div(" — ".join(part for part in (f"at {call_site}" if call_site else "", summary) if part),
                    className="banner-why")] if call_site or summary else []
    return [html.Span("First divergence ", className="banner-label"), html.Strong(op or node, className="banner-op"),
            html.Span(f" {node}", className="banner-node"), html.Span(" · " + " · ".join(facts)), *why]


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

