"""Opening at the answer without a browser: the origin selected on a fresh URL, a named view kept, go, the
banner, a job's origin rank, the header title."""

from __future__ import annotations

import pytest

from graphcmp.app import open_results
from graphcmp.app.actions import ACTIONS, initial, is_fresh, origin_row
from graphcmp.app.callbacks import view_outputs
from graphcmp.app.state import ViewState, selected_rows
from graphcmp.app.viewer import Viewer
from graphcmp.app.views import Turn, show


@pytest.fixture(scope="module")
def viewer(report_file) -> Viewer:
    return Viewer(open_results([report_file]))


def _texts(component) -> str:
    if isinstance(component, str):
        return component
    if isinstance(component, list):
        return "".join(_texts(c) for c in component)
    children = getattr(component, "children", None)
    return _texts(children) if children is not None else ""


def test_a_fresh_url_selects_the_origin_and_opens_its_path(viewer, sample_report):
    state = initial(viewer, ViewState.from_query(""), at_origin=True)
    first = sample_report.analysis().first
    row = sample_report.npu.row(first.node)
    assert state.selected == ("npu", first.node)
    assert set(selected_rows(state, viewer.model(state.result))) == {"npu", "bench"}
    path = [a for a in viewer.model(state.result).trees["npu"].ancestors(row) if a]
    assert set(path) <= set(state.open["npu"])


def test_a_url_that_names_the_view_is_kept(viewer):
    assert not is_fresh("?res=0&sync=1") and is_fresh("?res=0") and is_fresh(None)
    out = view_outputs(viewer, None, {"url": "?res=0&sync=1"}, {})
    assert ViewState.from_query(out["page"]["url"]).selected is None
    node = "Module.embedding.Embedding.forward.0"
    out = view_outputs(viewer, None, {"url": f"?sel=npu:{node}"}, {})
    assert ViewState.from_query(out["page"]["url"]).selected == ("npu", node)


def test_go_returns_to_the_origin(viewer, sample_report):
    state = ACTIONS["go"](viewer, ViewState(result="0"), {})
    assert state.selected == ("npu", sample_report.analysis().first.node)


def test_banner_names_op_module_cause_and_margin(viewer, sample_report):
    state = initial(viewer, ViewState(), at_origin=True)
    out = show(Turn(viewer, state, state, first=True, controls={}))
    first = sample_report.analysis().first
    text = _texts(out["banner"]["banner"])
    assert first.node in text and first.module in text and first.cause in text
    assert f"{first.margin:.3g}x the noise allowed" in text
    assert f"at {first.call_site}" in text and first.summary in text  # where in the user's code, and why
    assert out["banner"]["go_style"] == {} and out["banner"]["banner_class"].endswith("diverged")


def test_agreeing_runs_say_so(tmp_path, perturb_pair):
    from graphcmp.core.compare import compare_paths
    from graphcmp.core.report import save_report

    path = tmp_path / "same.json"
    save_report(compare_paths(perturb_pair[1], perturb_pair[1]), path)
    viewer = Viewer(open_results([path]))
    assert origin_row(viewer.model("0")) is None
    state = initial(viewer, ViewState(), at_origin=True)
    assert state.selected is None
    out = show(Turn(viewer, state, state, first=True, controls={}))
    assert "No divergence" in _texts(out["banner"]["banner"])
    assert out["banner"]["go_style"] == {"display": "none"}


def test_a_job_opens_on_its_origin_rank_and_the_title_follows(tmp_path):
    from graphcmp.core.distributed.batch import run_batch
    from tests.app.conftest import TF_SMALL

    out = tmp_path / "results"
    index = run_batch(TF_SMALL / "perturb", TF_SMALL / "baseline", out, workers=1)
    origin = index["analysis"]["origin"]
    viewer = Viewer(open_results([out]))
    start = viewer.results.start
    assert (start.step, start.rank) == (origin["step"], origin["rank"])
    first = view_outputs(viewer, None, {"url": ""}, {})
    state = ViewState.from_query(first["page"]["url"])
    assert state.result == start.key and state.selected == ("npu", origin["node"])
    assert first["controls"]["doc_title"] == start.title
    other = next(e for e in viewer.results.entries if e.key != start.key)
    switched = view_outputs(viewer, "step", {"url": first["page"]["url"]},
                            {"step": str(other.step), "rank": str(other.rank)})
    assert ViewState.from_query(switched["page"]["url"]).result == other.key
    assert switched["controls"]["doc_title"] == other.title
