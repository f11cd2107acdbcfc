"""The workspace without a browser: the frame in the state and the URL, its actions, the error chart's series,
the table view's pages, the marks and filters that apply, and the titles of a run of no rank."""

from __future__ import annotations

import numpy as np
import pytest
from dash import no_update

from graphcmp.app import open_results
from graphcmp.app.actions import act, initial, is_fresh
from graphcmp.app.callbacks import CONTROLS, TRIGGERS, view_outputs
from graphcmp.app.chart import error_figure, error_series
from graphcmp.app.job import Heat, short_column
from graphcmp.app.model import ViewModel
from graphcmp.app.results import Entry
from graphcmp.app.state import DETAILS_HEIGHT, SIDEBAR_WIDTH, ViewState
from graphcmp.app.table import _number, parse_filter, table_columns, table_page
from graphcmp.app.viewer import Viewer
from graphcmp.core.noise import NodeRole
from graphcmp.core.readers import read_graph
from graphcmp.core.rules import ERROR
from tests.conftest import DATA


@pytest.fixture(scope="module")
def viewer(perturb_pair) -> Viewer:
    return Viewer(open_results(list(perturb_pair)))


def _act(viewer, search, trigger, **values):
    controls = {"query": "", "filters": [], "metric": "", "bins": "", "sync": ["on"], "step": "-", "rank": "-",
                "micro": "all", "tab": "details"} | {k: v for k, v in values.items() if k in CONTROLS}
    triggers = {name: values.get(name) for name in TRIGGERS if name != "url"} | {"url": search}
    out = view_outputs(viewer, trigger, triggers, controls)
    return ViewState.from_query(out["page"]["url"]), {c: {k: v for k, v in g.items() if v is not no_update}
                                                        for c, g in out.items()}


def test_frame_round_trips_through_the_url_and_is_not_a_view():
    state = ViewState(sidebar=False, sidebar_w=300, bottom=False, bottom_h=420, tab="chart")
    assert ViewState.from_query(state.to_query()) == state
    frame = "&".join(p for p in state.to_query().lstrip("?").split("&") if not p.startswith("sync="))
    assert frame and is_fresh(f"?res=0&{frame}")  # a link naming the frame only still opens at the origin
    assert ViewState.from_query("?sbw=5&dth=99999&tab=bogus") == \
        ViewState(sidebar_w=SIDEBAR_WIDTH[0], bottom_h=DETAILS_HEIGHT[1], tab="details")
    assert ViewState().to_query() == ViewState(tab="details", sidebar=True, bottom=True).to_query()


def test_frame_actions_and_their_outputs(viewer):
    state, out = _act(viewer, initial(viewer, ViewState.from_query("?sync=1")).to_query(), "toggle_sidebar")
    assert not state.sidebar and out["frame"]["sidebar_style"] == {"display": "none"}
    assert "npu_elements" not in out["panes"]  # the panes are not drawn again for a frame change
    state, out = _act(viewer, state.to_query(), "sizes", sizes={"sidebar": 333})
    assert state.sidebar and state.sidebar_w == 333 and out["frame"]["sidebar_style"]["width"] == "333px"
    state, out = _act(viewer, state.to_query(), "sizes", sizes={"bottom": 10})
    assert state.bottom_h == DETAILS_HEIGHT[0]
    state, out = _act(viewer, state.to_query(), "tab", tab="chart")
    assert state.tab == "chart" and out["frame"]["chart_box"] == {} and out["frame"]["details_box"]["display"] == "none"
    assert out["chart"]["chart"].figure["layout"]["yaxis"]["type"] == "log"


@pytest.mark.parametrize(("trigger", "value"), [("sizes", "300"), ("sizes", {"sidebar": "wide"}),
                                                ("sizes", {"bottom": True}), ("tab", "html"), ("tab", ["chart"]),
                                                ("chart_click", {"points": []}), ("table_click", "n1")])
def test_frame_inputs_of_the_wrong_kind_change_nothing(viewer, trigger, value):
    state = initial(viewer, ViewState.from_query("?sync=1"))
    assert act(viewer, state, trigger, {trigger: value}) == state


def test_chart_click_and_table_click_select_the_node(viewer):
    model = viewer.model(viewer.results.start.key)
    row = int(model.report.noise.leaves[5])
    state, _ = _act(viewer, "?sync=1&tab=chart", "chart_click",
                    chart_click=[{"points": [{"x": 5, "y": 1e-3, "customdata": row}]}])
    assert state.selected == ("npu", model.graphs["npu"].nodes.ids[row]) and state.tab == "chart"
    tensor = int(np.flatnonzero(model.graphs["npu"].tensors.node == row)[0])
    state, _ = _act(viewer, "?sync=1&tab=table", "table_click", table_click=[{"row": 3, "row_id": tensor}])
    assert state.selected == ("npu", model.graphs["npu"].nodes.ids[row])


def test_error_series_keeps_every_origin_and_the_worst_of_each_stretch(sample_model):
    noise = sample_model.report.noise
    whole = error_series(sample_model)
    assert whole.total == len(noise.leaves) == len(whole.rows) and not whole.enveloped
    assert (whole.rows == noise.leaves).all()
    small = error_series(sample_model, limit=20)  # drawn by its envelope
    assert small.enveloped and len(small.rows) < small.total
    assert set(noise.origins().tolist()) <= set(small.rows.tolist())
    error = noise.output_error[noise.leaves]
    assert float(np.nanmax(small.error)) == float(np.nanmax(error))  # the largest error is always drawn
    assert (np.diff(small.x) > 0).all() and len(small.band) == len(small.band_x)
    # before the first origin the band is the model's own allowance: every call within noise sits inside it
    before = whole.x < int(np.flatnonzero(noise.leaves == noise.first_origin)[0])
    inside = (whole.role == NodeRole.WITHIN_NOISE) & before & np.isfinite(whole.band)
    assert (whole.error[inside] <= whole.band[inside] * (1 + 1e-9)).all()
    figure = error_figure(sample_model, whole, selected=int(noise.first_origin), title="<b>x</b>")
    assert figure["layout"]["title"]["text"] == "&lt;b&gt;x&lt;/b&gt;"
    assert any(t.get("name") == "selected" for t in figure["data"])


def test_table_pages_sort_and_filter_over_the_whole_table(sample_model):
    cols = table_columns(sample_model)
    n = len(cols.table)
    data, pages, shown = table_page(cols, 0, None, None)
    assert shown == n and pages == -(-n // 50) and len(data) == min(50, n)
    assert [d["id"] for d in data] == cols.table.npu_rows[:50].tolist()  # execution order
    data, _, shown = table_page(cols, 0, [{"column_id": "MaxRelativeErr", "direction": "desc"}], None)
    values = [_number(d["MaxRelativeErr"]) for d in data]
    assert values == sorted(values, reverse=True) and values[0] == np.nanmax(cols.number("MaxRelativeErr"))
    errors = int(np.count_nonzero(cols.table.levels == ERROR))
    data, _, shown = table_page(cols, 0, None, "{Result} = error")
    result = cols.table.column("Result")
    assert shown == sum(1 for r in result if str(r).lower() == "error") and all(d["_hl"] == "red" for d in data)
    assert errors >= shown > 0
    _, _, linear = table_page(cols, 0, None, '{NPU Name} contains "linear" && {MaxRelativeErr} > 1')
    names, rel = cols.table.column("NPU Name"), cols.table.column("MaxRelativeErr")
    assert linear == sum(1 for a, b in zip(names, rel) if "linear" in a.lower() and _number(b) > 1) > 0
    assert parse_filter("{x} ~ 1") == [] and table_page(cols, 10 ** 9, None, "garbage")[2] == n


def test_marks_and_filters_follow_the_document(sample_model):
    assert {"origin", "hot", "flow", "backward"} <= sample_model.marks
    assert "error" in sample_model.filters()
    graph = ViewModel(read_graph(DATA / "ge_tf_gatherv2" / "ge_proto_00056_Build.txt"))
    assert not {"origin", "hot", "unmatched", "renamed"} & graph.marks
    assert not {"error", "warning", "pass", "skip", "unmatched", "only-npu", "only-bench", "renamed"} & graph.filters()


def test_no_rank_is_not_shown_as_rank_dash():
    assert Entry("0", 3, None, "x").title == "step 3" and Entry("0", 3, 1, "x").title == "step 3 · rank 1"
    heat = Heat(step=0, ranks=(None,), columns=("Module.fc.Linear.forward.0",), status=np.zeros((1, 1)),
                severity=np.zeros((1, 1)))
    assert heat.labels() == ["the run"]
    assert short_column("Module.fc.Linear.forward.0") == "fc"


def test_ge_branches_stand_side_by_side():
    """Two ops of a GE graph that neither feeds the other (branches) share a layer, side by side."""
    from graphcmp.app.layout import layout_pane

    model = ViewModel(read_graph(DATA / "ge_tf_gatherv2" / "ge_proto_00056_Build.txt"))
    geo = layout_pane(model.trees["npu"], [], {}, None, model.flows["npu"])
    edges = model.flow_edges["npu"]
    joined = set(zip(edges.src.tolist(), edges.dst.tolist()))
    by_y: dict[float, list[int]] = {}
    for c in geo.cells:
        by_y.setdefault(round(c.y), []).append(c.row)
    rows = [r for r in by_y.values() if len(r) > 1]
    assert rows  # the graph has branches, and they are drawn side by side
    for a, b in (r[:2] for r in rows):
        assert (a, b) not in joined and (b, a) not in joined
    assert len(by_y) < len(geo.cells)  # not one long column
