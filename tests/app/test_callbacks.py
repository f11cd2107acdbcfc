"""The main callback without a browser: an action on the URL's state, and what is sent back."""

from __future__ import annotations

import pytest

from graphcmp.app import open_results
from graphcmp.app.callbacks import OUTPUTS, _apply, _initial, _outputs
from graphcmp.app.page import PANE_IDS
from graphcmp.app.state import ViewState
from graphcmp.app.viewer import Viewer

NODE = "Module.encoder.layers.1.linear1.Linear.forward.0"


@pytest.fixture(scope="module")
def viewer(steps_folder) -> Viewer:
    return Viewer(open_results([steps_folder]))


def _act(viewer, search, trigger, **values):
    before = ViewState.from_query(search)
    controls = {"query": "", "filters": [], "metric": "verdict", "bins": "", "sync": ["on"], "step": "0",
                "rank": "0", "micro": "all", **values}
    state = _apply(viewer, before, trigger, controls, values.get("tap_npu"), values.get("tap_bench"),
                   values.get("hit"), values.get("finding"))
    return state, _outputs(viewer, before, state, False, controls)


def test_initial_page_sets_every_output(viewer):
    state = _initial(viewer, ViewState.from_query(""))
    out = _outputs(viewer, state, state, True, {})
    assert set(out) == set(OUTPUTS)
    assert out[("ctl-step", "style")] == {} and out[("ctl-rank", "style")] == {"display": "none"}


def test_tap_opens_both_panes_and_selects(viewer):
    model = viewer.model("s0r0")
    enc = model.graphs["npu"].row("Module.encoder.TransformerEncoder.forward.0")
    state, out = _act(viewer, "?res=s0r0", PANE_IDS["npu"], tap_npu={"id": f"n{enc}"})
    assert state.open["npu"] == state.open["bench"] == (enc,)
    assert out[("focus", "data")]["npu"] == f"b{enc}"
    assert ViewState.from_query(out[("url", "search")]) == state
    assert any(e["data"]["id"] == f"b{enc}" for e in out[(PANE_IDS["bench"], "elements")])


def test_selection_only_does_not_resend_panes(viewer):
    model = viewer.model("s0r0")
    row = model.graphs["npu"].row(NODE)
    search = ViewState(result="s0r0").to_query()
    state, out = _act(viewer, search, "findings", finding=NODE)
    assert state.selected == ("npu", NODE)
    assert (PANE_IDS["npu"], "elements") in out  # revealing the node opened its ancestors
    again, out2 = _act(viewer, state.to_query(), "findings", finding=NODE)
    assert again == state and (PANE_IDS["npu"], "elements") not in out2
    assert out2[("focus", "data")]["npu"] == f"n{row}"


def test_search_selects_the_first_hit_and_steps(viewer):
    state, out = _act(viewer, "?res=s0r0", "query", query=r"linear1\.Linear")
    assert state.selected == ("npu", NODE.replace("layers.1", "layers.0"))
    assert out[("hit-info", "children")].startswith("1 of ")
    total = int(out[("hit-info", "children")].split(" of ")[1])
    nxt, out2 = _act(viewer, state.to_query(), "next", query=state.query)
    assert nxt.hit == 1 and out2[("hit-info", "children")] == f"2 of {total}"
    back, _ = _act(viewer, state.to_query(), "prev", query=state.query)
    assert back.hit == total - 1


def test_bad_regex_is_reported_in_the_page(viewer):
    state, out = _act(viewer, "?res=s0r0", "query", query="linear(")
    assert "not a regular expression" in out[("hit-info", "children")] and state.selected is None


def test_step_switch_keeps_the_selected_node(viewer):
    state, _ = _act(viewer, "?res=s0r0", "findings", finding=NODE)
    switched, out = _act(viewer, state.to_query(), "step", step="1")
    assert switched.result == "s1r0" and switched.selected == ("npu", NODE)
    assert ("overview", "children") in out and out[("step", "value")] if ("step", "value") in out else True
    model = viewer.model("s1r0")
    assert model.graphs["npu"].info.step == 1
