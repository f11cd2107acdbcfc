"""What a click or a control does to the view state: one action per trigger, named as the callbacks name it.

An action is a function ``(viewer, state, inputs) -> state``: `inputs` holds the current value of
every named input of the main callback (``tap_npu``, ``hit``, ``query`` ...), and each action reads
and checks only those it needs. `ACTIONS` maps trigger names to actions; a new control adds one entry
here, one input in `callbacks`, and nothing shifts. Manual matching (`manual`) changes the result
itself, so it runs in a callback of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs

from graphcmp.app.elements import parse_element_id
from graphcmp.app.model import SIDES, ViewModel
from graphcmp.app.state import (
    DETAILS_HEIGHT,
    FRAME_KEYS,
    SIDEBAR_WIDTH,
    TABS,
    ViewState,
    as_index,
    clamp_size,
    known_filters,
    pick,
    reveal,
    select,
    selected_rows,
    toggle,
    turn_page,
)
from graphcmp.app.viewer import Viewer
from graphcmp.core.errors import GraphcmpError

__all__ = ["ACTIONS", "Action", "MalformedInput", "act", "checked", "initial", "is_fresh", "manual", "origin_row"]

Action = Callable[[Viewer, ViewState, Mapping[str, Any]], ViewState]

_MAX_QUERY, _MAX_BINS = 300, 200


def checked(viewer: Viewer, state: ViewState) -> ViewState:
    """`state` with a known result and only rows and nodes that result has."""
    entry = viewer.results.entry(state.result)
    return replace(state, result=entry.key).clean(viewer.model(entry.key))


def initial(viewer: Viewer, state: ViewState, at_origin: bool = False) -> ViewState:
    """The state of a URL opened afresh: checked, and the selection made visible.

    With `at_origin` and nothing selected, the origin of the divergence is selected (the path to it
    opened in both panes): the page opens at the answer.
    """
    state = checked(viewer, state)
    model = viewer.model(state.result)
    row = origin_row(model) if at_origin and state.selected is None else None
    if row is not None:
        state = select(state, model, "npu", row)
    for side, row in selected_rows(state, model).items():
        state = reveal(state, model, side, row)
    return state


def origin_row(model: ViewModel) -> int | None:
    """The npu row of the first divergence of a model's report (None: no report, or the runs agree)."""
    first = model.analysis.first if model.analysis is not None else None
    return model.row_of("npu", first.node) if first is not None else None


def is_fresh(search: object) -> bool:
    """True for a URL that says nothing about the view but which result (a page opened afresh).

    >>> is_fresh(""), is_fresh("?res=s0r2"), is_fresh("?res=0&sync=1"), is_fresh("?sb=0&tab=chart")
    (True, True, False, True)
    """
    text = search if isinstance(search, str) else ""
    return set(parse_qs(text.lstrip("?"), keep_blank_values=True)) <= {"res"} | FRAME_KEYS


def act(viewer: Viewer, state: ViewState, trigger: str, inputs: Mapping[str, Any]) -> ViewState:
    """The state after the action of `trigger` (unchanged for a trigger without one, or for an input value of a
    kind the page never sends: a hand-made request)."""
    action = ACTIONS.get(trigger)
    state = checked(viewer, state)
    if action is None:
        return state
    try:
        return action(viewer, state, inputs)
    except MalformedInput:
        return state


class MalformedInput(ValueError):
    """A callback input holds a value of a kind its control never sends."""


def _text(inputs: Mapping[str, Any], name: str, limit: int) -> str:
    """A text box's value (nothing: ""), cut to `limit` characters."""
    value = inputs.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedInput(name)
    return value[:limit]


def _choice(inputs: Mapping[str, Any], name: str, none: str) -> int | None:
    """A number picked in a dropdown (3 or "3"); None for the option `none` ("all", "-") or nothing.

    >>> _choice({"step": "3"}, "step", "-"), _choice({"micro": "all"}, "micro", "all"), _choice({}, "rank", "-")
    (3, None, None)
    >>> _choice({"step": -1}, "step", "-")
    Traceback (most recent call last):
    ...
    graphcmp.app.actions.MalformedInput: step
    """
    value = inputs.get(name)
    if value is None or value == none:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    number = as_index(value)
    if number is None:
        raise MalformedInput(name)
    return number


# ---- the panes --------------------------------------------------------------------------------------


def _tap(side: str) -> Action:
    def tap(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
        model = viewer.model(state.result)
        data = inputs.get(f"tap_{side}")
        parsed = parse_element_id(data.get("id") if isinstance(data, dict) else None)
        if parsed is None or parsed[0] >= len(model.trees[side]):
            return state
        row, pager = parsed
        if pager:
            return turn_page(state, model, side, row, pager)
        return pick(toggle(state, model, side, row), model, side, row)

    return tap


def _collapse(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    return replace(state, open={s: () for s in state.open}, pages={s: {} for s in state.pages})


# ---- the hit list and the findings ------------------------------------------------------------------


def _step_hit(step: int) -> Action:
    def step_hit(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
        hits, _ = viewer.hits(state)
        return _go_hit(viewer, state, (state.hit + step) % len(hits)) if hits else state

    return step_hit


def _pick_hit(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    value = inputs.get("hit")
    return _go_hit(viewer, state, value) if isinstance(value, int) and not isinstance(value, bool) else state


def _go_hit(viewer: Viewer, state: ViewState, index: int) -> ViewState:
    hits, _ = viewer.hits(state)
    if not 0 <= index < len(hits):
        return state
    side, row = hits[index]
    return select(replace(state, hit=index), viewer.model(state.result), side, row)


def _go(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    """The banner's *go*: to the origin of the divergence (in a batch job, on the origin's step and rank)."""
    results = viewer.results
    start = results.start
    if results.job is not None and start.key != state.result:
        node = (results.job.analysis.get("origin") or {}).get("node")
        fresh = replace(ViewState(), result=start.key, sync=state.sync, metric=state.metric, bins=state.bins,
                        query=state.query, filters=state.filters,
                        selected=("npu", node) if isinstance(node, str) else None).with_frame(state)
        return initial(viewer, fresh, at_origin=True)
    model = viewer.model(state.result)
    row = origin_row(model)
    return select(state, model, "npu", row) if row is not None else state


def _finding(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    node = inputs.get("finding")
    if not isinstance(node, str) or not node:
        return state
    model = viewer.model(state.result)
    row = model.row_of("npu", node)
    return select(state, model, "npu", row) if row is not None else state


# ---- the controls -----------------------------------------------------------------------------------


def _search(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    filters = inputs.get("filters")
    if not isinstance(filters, list | None):  # a checklist sends a list: never split "error" into letters
        raise MalformedInput("filters")
    state = replace(state, query=_text(inputs, "query", _MAX_QUERY), filters=known_filters(filters or []), hit=0)
    hits, _ = viewer.hits(state)
    return _go_hit(viewer, state, 0) if hits else state


def _metric(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    return replace(state, metric=_text(inputs, "metric", _MAX_QUERY), bins="")


def _bins(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    return replace(state, bins=_text(inputs, "bins", _MAX_BINS))


def _sync(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    ticked = inputs.get("sync")
    if not isinstance(ticked, list | None):
        raise MalformedInput("sync")
    return replace(state, sync="on" in (ticked or []))


def _micro(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    return replace(state, micro=_choice(inputs, "micro", "all"))


def _switch_result(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    step, rank = _choice(inputs, "step", "-"), _choice(inputs, "rank", "-")
    results = viewer.results
    entry = results.find(step, rank) or next((e for e in results.entries if e.step == step), results.default)
    if entry.key == state.result:
        return state
    fresh = replace(ViewState(), result=entry.key, selected=state.selected, sync=state.sync, metric=state.metric,
                    bins=state.bins, query=state.query, filters=state.filters).with_frame(state)
    return initial(viewer, fresh, at_origin=True)


# ---- the frame: panels, their sizes, the bottom panel's tab, the error chart -----------------------------


def _toggle_sidebar(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    return replace(state, sidebar=not state.sidebar)


def _toggle_bottom(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    return replace(state, bottom=not state.bottom)


def _sizes(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    """A panel dragged to a new size (the page sends ``{"sidebar": px}`` or ``{"bottom": px}``)."""
    sizes = inputs.get("sizes")
    if not isinstance(sizes, dict):
        raise MalformedInput("sizes")
    width, height = sizes.get("sidebar"), sizes.get("bottom")
    for value in (width, height):
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or value != value):
            raise MalformedInput("sizes")
    if width is not None:
        state = replace(state, sidebar_w=clamp_size(int(width), SIDEBAR_WIDTH), sidebar=True)
    if height is not None:
        state = replace(state, bottom_h=clamp_size(int(height), DETAILS_HEIGHT), bottom=True)
    return state


def _tab(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    tab = inputs.get("tab")
    if tab not in TABS:
        raise MalformedInput("tab")
    return replace(state, tab=tab, bottom=True)


def _chart_click(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    """A point of the error chart clicked: select its call (the point's ``customdata`` is its npu row)."""
    clicks = inputs.get("chart_click")
    if not isinstance(clicks, list):
        raise MalformedInput("chart_click")
    for click in clicks:
        points = click.get("points") if isinstance(click, dict) else None
        point = points[0] if isinstance(points, list) and points and isinstance(points[0], dict) else {}
        row = point.get("customdata")
        row = row[0] if isinstance(row, list) and row else row
        model = viewer.model(state.result)
        if isinstance(row, int) and not isinstance(row, bool) and 0 < row < len(model.trees["npu"]):
            return select(state, model, "npu", row)
    return state


def _table_click(viewer: Viewer, state: ViewState, inputs: Mapping[str, Any]) -> ViewState:
    """A cell of the table view clicked: select the node of that row's npu tensor (the row's ``row_id``)."""
    cells = inputs.get("table_click")
    if not isinstance(cells, list):
        raise MalformedInput("table_click")
    model = viewer.model(state.result)
    tensors = model.graphs["npu"].tensors
    for cell in cells:
        tensor = cell.get("row_id") if isinstance(cell, dict) else None
        if isinstance(tensor, int) and not isinstance(tensor, bool) and 0 <= tensor < len(tensors):
            return select(state, model, "npu", int(tensors.node[tensor]))
    return state


ACTIONS: dict[str, Action] = {
    "tap_npu": _tap("npu"), "tap_bench": _tap("bench"), "collapse": _collapse,
    "prev": _step_hit(-1), "next": _step_hit(1), "hit": _pick_hit, "finding": _finding, "go": _go,
    "query": _search, "filters": _search, "metric": _metric, "bins": _bins, "sync": _sync, "micro": _micro,
    "step": _switch_result, "rank": _switch_result,
    "toggle_sidebar": _toggle_sidebar, "toggle_bottom": _toggle_bottom, "sizes": _sizes, "tab": _tab,
    "chart_click": _chart_click, "table_click": _table_click,
}
"""Trigger name -> action; the names are those of the main callback's inputs (`callbacks.TRIGGERS`, `CONTROLS`)."""


# ---- manual matching --------------------------------------------------------------------------------


def manual(viewer: Viewer, state: ViewState, trigger: str, children: bool) -> tuple[ViewState, str]:
    """Match the picked npu and bench nodes (``"match"``), or unmatch the selected pair (``"unmatch"``).

    The decision is saved to the result's sidecar and the result recompared; returns the new state
    and a line for the page (what was done, or why nothing was).
    """
    state = checked(viewer, state)
    key = state.result
    if not viewer.can_match(key):
        return state, "manual matching needs a result file: graphcmp compare NPU BENCH -o cmp.npz, then serve it"
    model = viewer.model(key)
    if trigger == "match":
        npu, bench = state.picked
        if not (npu and bench):
            return state, "pick a node in each pane first"
        decision, note = viewer.manual(key).with_match(npu, bench, children=children), f"matched {npu} ↔ {bench}"
    elif trigger == "unmatch":
        rows = selected_rows(state, model)
        if len(rows) != 2:
            return state, "select a matched node to unmatch it and its twin"
        npu, bench = (model.graphs[side].nodes.ids[rows[side]] for side in SIDES)
        decision, note = viewer.manual(key).with_unmatch(npu, bench), f"unmatched {npu} ↔ {bench}"
    else:
        return state, ""
    try:
        viewer.decide(key, decision)
    except GraphcmpError as err:
        return state, str(err)
    model = viewer.model(key)
    state = select(state, model, "npu", model.graphs["npu"].row(npu))
    return reveal(state, model, "bench", model.graphs["bench"].row(bench)), note

