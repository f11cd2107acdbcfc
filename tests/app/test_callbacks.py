"""The view callback without a browser: a named trigger acts on the URL's state, and what is sent back by name."""

from __future__ import annotations

import pytest
from dash import no_update

from graphcmp.app import create_app, open_results
from graphcmp.app.actions import ACTIONS, initial
from graphcmp.app.callbacks import CONTROLS, OUTPUTS, TRIGGERS, view_outputs
from graphcmp.app.state import ViewState
from graphcmp.app.viewer import Viewer
from graphcmp.app.views import VIEWS, Turn, show

NODE = "Module.encoder.layers.1.linear1.Linear.forward.0"
_CONTROL_VALUES = {"query": "", "filters": [], "metric": "verdict", "bins": "", "sync": ["on"], "step": "0",
                   "rank": "0", "micro": "all"}


@pytest.fixture(scope="module")
def viewer(steps_folder) -> Viewer:
    return Viewer(open_results([steps_folder]))


def _act(viewer, search, trigger, **values):
    """(the new state, the outputs that changed by concern) after `trigger` with these input values."""
    controls = {**_CONTROL_VALUES, **{k: v for k, v in values.items() if k in CONTROLS}}
    triggers = {name: values.get(name) for name in TRIGGERS if name != "url"} | {"url": search}
    out = view_outputs(viewer, trigger, triggers, controls)
    sent = {concern: {k: v for k, v in group.items() if v is not no_update} for concern, group in out.items()}
    return ViewState.from_query(out["page"]["url"]), sent


def test_every_trigger_and_output_has_a_name_the_page_has(viewer):
    assert set(ACTIONS) <= set(TRIGGERS) | set(CONTROLS) and OUTPUTS.keys() == VIEWS.keys()
    ids = {str(getattr(c, "id", "")) for c in _components(create_app(viewer.results).layout)}
    for dependency in [*TRIGGERS.values(), *CONTROLS.values(), *(o for g in OUTPUTS.values() for o in g.values())]:
        if isinstance(dependency.component_id, dict):  # a pattern input: its components are drawn by a view
            assert dependency.component_id["type"] in ("chart", "ctable", "ctable-wait")
            continue
        assert str(dependency.component_id) in ids, dependency


def test_initial_page_sets_every_output(viewer):
    state = initial(viewer, ViewState.from_query(""))
    out = show(Turn(viewer, state, state, first=True, controls={}))
    assert {concern: set(group) for concern, group in out.items()} == \
        {concern: set(group) for concern, group in OUTPUTS.items()}
    assert out["controls"]["step_style"] == {} and out["controls"]["rank_style"] == {"display": "none"}


def test_tap_opens_both_panes_and_selects(viewer):
    model = viewer.model("s0r0")
    enc = model.graphs["npu"].row("Module.encoder.TransformerEncoder.forward.0")
    state, out = _act(viewer, "?res=s0r0", "tap_npu", tap_npu={"id": f"n{enc}"})
    assert state.open["npu"] == state.open["bench"] == (enc,)
    assert out["panes"]["focus"]["npu"] == f"b{enc}"
    assert any(e["data"]["id"] == f"b{enc}" for e in out["panes"]["bench_elements"])


def test_selection_only_does_not_resend_panes(viewer):
    model = viewer.model("s0r0")
    row = model.graphs["npu"].row(NODE)
    search = ViewState(result="s0r0").to_query()
    state, out = _act(viewer, search, "finding", finding=NODE)
    assert state.selected == ("npu", NODE)
    assert "npu_elements" in out["panes"]  # revealing the node opened its ancestors
    again, out2 = _act(viewer, state.to_query(), "finding", finding=NODE)
    assert again == state and "npu_elements" not in out2["panes"] and out2["details"] == {}
    assert out2["panes"]["focus"]["npu"] == f"n{row}"


def test_search_selects_the_first_hit_and_steps(viewer):
    state, out = _act(viewer, "?res=s0r0", "query", query=r"linear1\.Linear")
    assert state.selected == ("npu", NODE.replace("layers.1", "layers.0"))
    assert out["hits"]["hit_info"].startswith("1 of ")
    total = int(out["hits"]["hit_info"].split(" of ")[1])
    nxt, out2 = _act(viewer, state.to_query(), "next", query=state.query)
    assert nxt.hit == 1 and out2["hits"]["hit_info"] == f"2 of {total}"
    back, _ = _act(viewer, state.to_query(), "prev", query=state.query)
    assert back.hit == total - 1


def test_bad_regex_is_reported_in_the_page(viewer):
    state, out = _act(viewer, "?res=s0r0", "query", query="linear(")
    assert "not a regular expression" in out["hits"]["hit_info"] and state.selected is None


def test_step_switch_keeps_the_selected_node(viewer):
    state, _ = _act(viewer, "?res=s0r0", "finding", finding=NODE)
    switched, out = _act(viewer, state.to_query(), "step", step="1")
    assert switched.result == "s1r0" and switched.selected == ("npu", NODE)
    assert "overview" in out["sidebar"] and out["values"].get("step", "1") == "1"
    model = viewer.model("s1r0")
    assert model.graphs["npu"].info.step == 1


@pytest.mark.parametrize(("trigger", "value"), [("hit", "3"), ("hit", True), ("finding", 7), ("micro", "-1"),
                                                ("tap_npu", "n1"), ("tap_npu", {"id": "n999999"}), ("step", [1])])
def test_inputs_of_the_wrong_kind_change_nothing(viewer, trigger, value):
    search = ViewState(result="s0r0").to_query()
    state, _ = _act(viewer, search, trigger, **{trigger: value})
    assert state == initial(viewer, ViewState.from_query(search))


def _components(component):
    yield component
    children = getattr(component, "children", None)
    for child in children if isinstance(children, (list, tuple)) else [children] if children is not None else []:
        yield from _components(child)
