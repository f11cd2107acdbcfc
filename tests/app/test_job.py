"""The job overview of a results folder: heat from index.json only, origin, linked calls of a communication node."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from graphcmp.app import create_app, open_results
from graphcmp.app.actions import initial as _initial
from graphcmp.app.callbacks import jump_search
from graphcmp.app.job import JobIndex, heat_figure
from graphcmp.app.state import ViewState, selected_rows
from graphcmp.app.viewer import Viewer
from graphcmp.app.views import Turn, job_outputs, show
from graphcmp.core.distributed.batch import load_index, run_batch
from graphcmp.core.distributed.links import CommCall, link_calls
from graphcmp.core.judge import STATUS_NAMES
from tests.app.conftest import TF_SMALL
from tests.app.test_details import _components

DIST4 = "msprobe/dumps/dist4/statistics"
ALL_REDUCE = "Distributed.all_reduce.0.forward"
_REPORT_FILE = re.compile(r"step\d+_rank\d+\.json$")
_OPENED: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], (str, bytes, Path)):
        _OPENED.append(str(args[0]))


sys.addaudithook(_audit)


class _Opens:
    """Records every file opened inside the block (an audit hook: covers open, pathlib and C extensions)."""

    def __enter__(self) -> list[str]:
        global _OPENED
        _OPENED = []
        return _OPENED

    def __exit__(self, *exc) -> None:
        global _OPENED
        _OPENED = None


@pytest.fixture(scope="module")
def tf_results(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("job") / "results"
    run_batch(TF_SMALL / "perturb", TF_SMALL / "baseline", out, workers=1)
    return out


@pytest.fixture(scope="module")
def dist4_results(tmp_path_factory) -> Path:
    from tests.conftest import shared

    root = shared(DIST4)
    out = tmp_path_factory.mktemp("dist4") / "results"
    run_batch(root / "perturb_rank2", root / "baseline", out, workers=1)
    return out


def _check_heat(index: dict, job: JobIndex) -> None:
    for step in job.steps():
        heat = job.heat(step)
        runs = [r for r in index["runs"] if r["step"] == step and r["error"] is None]
        assert sorted(heat.ranks) == sorted(r["rank"] for r in runs) and list(heat.ranks) == sorted(heat.ranks)
        for run in runs:
            i = heat.ranks.index(run["rank"])
            for node, status, severity in run["heat"]:
                j = heat.columns.index(node)
                assert heat.status[i, j] == status
                assert np.isnan(heat.severity[i, j]) if severity is None else heat.severity[i, j] == severity
            assert np.isfinite(heat.status[i]).sum() == len(run["heat"])


def test_overview_reads_only_the_index(tf_results):
    with _Opens() as opened:
        job = JobIndex(load_index(tf_results))
        figures = [heat_figure(job.heat(step), job.analysis.get("origin")) for step in job.steps()]
    assert [Path(p).name for p in opened] == ["index.json"]
    assert job.steps() == [0, 1] and all(len(f["data"][0]["y"]) == 1 for f in figures)
    _check_heat(load_index(tf_results), job)

    results = open_results([tf_results])  # the app: reads step 0's report at start-up, nothing more for the overview
    viewer = Viewer(results)
    with _Opens() as opened:
        out = job_outputs(viewer, 1)
    assert not [p for p in opened if _REPORT_FILE.search(p)]
    assert out["heat"]["data"][0]["y"] == ["rank 0"]
    assert out["origin"] == job.origin_text()


def test_heat_cell_opens_that_rank_at_that_module(tf_results):
    viewer = Viewer(open_results([tf_results]))
    job = viewer.results.job
    heat = job.heat(1)
    j = int(np.nanargmax(heat.status[0]))
    column = heat.columns[j]
    search = jump_search(viewer, ViewState(result="s1r0", query="x"), "job-heat",
                         {"points": [{"x": column, "y": "rank 0"}]})  # the overview shows the current step
    state = _initial(viewer, ViewState.from_query(search))
    model = viewer.model(state.result)
    assert state.result == "s1r0" and state.selected == ("npu", column)
    row = selected_rows(state, model)["npu"]
    assert int(model.report.verdicts.worst[row]) == int(heat.status[0, j])
    assert state.query == "x"  # the search is part of the view: a jump to another rank keeps it
    assert jump_search(viewer, ViewState(result="s1r0"), "job-heat", {"points": [{"x": column, "y": "rank 7"}]}) \
        is None


def test_trend_rows_are_the_steps_of_a_rank_and_a_cell_opens_that_step(tf_results):
    index = load_index(tf_results)
    viewer = Viewer(open_results([tf_results]))
    job = viewer.results.job
    trend = job.trend(0)
    assert trend.steps == (0, 1) and trend.labels() == ["step 0", "step 1"]
    for i, step in enumerate(trend.steps):
        run = next(r for r in index["runs"] if r["step"] == step and r["rank"] == 0)
        for node, status, severity in run["heat"]:
            j = trend.columns.index(node)
            assert trend.status[i, j] == status
            assert (np.isnan(trend.severity[i, j]) and severity is None) or trend.severity[i, j] == severity
    origin = index["analysis"]["origin"]
    figure = heat_figure(trend, origin)
    marked = [t for t in figure["data"] if t["type"] == "scatter"]
    assert not marked or marked[0]["y"] == [f"step {origin['step']}"]
    by_severity = heat_figure(trend, origin, "severity")["data"][0]
    assert by_severity["zmin"] == -8.0 and by_severity["zmax"] == 0.0
    column = trend.columns[int(np.nanargmax(trend.status[1]))]
    search = jump_search(viewer, ViewState(result="s0r0"), "job-trend", {"points": [{"x": column, "y": "step 1"}]})
    state = ViewState.from_query(search)
    assert state.result == "s1r0" and state.selected == ("npu", column)
    out = job_outputs(viewer, 0, 0)
    assert out["trend_style"] == {} and out["trend"]["data"][0]["y"] == ["step 0", "step 1"]


def test_plain_folder_has_no_overview(steps_folder):
    viewer = Viewer(open_results([steps_folder]))
    assert viewer.results.job is None
    assert job_outputs(viewer, 0) == {}
    assert "job-heat" not in str(create_app(viewer.results).layout)  # no plotly graph, so no plotly.js loaded


@pytest.mark.shared
def test_dist4_origin_heat_and_linked_calls(dist4_results):
    index = load_index(dist4_results)
    results = open_results([dist4_results])
    job = results.job
    assert len(results.entries) == 8
    _check_heat(index, job)
    assert job.origin_text().startswith("first divergence: rank 2, step 0: Functional.embedding.0.forward")
    fig = heat_figure(job.heat(0), job.analysis["origin"])
    assert fig["data"][1]["y"] == ["rank 2"] and fig["data"][1]["x"][0] in job.heat(0).columns

    peers = job.peers(0, 2, ALL_REDUCE)
    runs = {r["rank"]: r for r in index["runs"] if r["step"] == 0}
    calls = [CommCall.from_list(rank, c) for rank, r in runs.items() for c in r["comm"]]
    link = next(k for k in link_calls(calls) if (2, ALL_REDUCE) in {(r, n) for r, n, _ in k.members})
    assert {(p.rank, p.node, p.position) for p in peers} == {m for m in link.members if m[0] != 2}
    for p in peers:
        heat = {h[0]: h[1] for h in runs[p.rank]["heat"]}
        assert p.status == STATUS_NAMES[heat[p.node]] and p.complete

    viewer = Viewer(results)
    model = viewer.model("s0r2")
    state = ViewState(result="s0r2", selected=("npu", ALL_REDUCE))
    out = show(Turn(viewer, state, state, first=True, controls={}))
    buttons = [c for c in _components(out["details"]["details"]) if isinstance(getattr(c, "id", None), dict)]
    assert [b.id["index"] for b in buttons] == [f"{p.rank}:{p.position}" for p in peers]
    target = jump_search(viewer, state, {"type": "peer", "index": buttons[0].id["index"]}, None)
    jumped = _initial(viewer, ViewState.from_query(target))
    assert jumped.result == f"s0r{peers[0].rank}" and jumped.selected == ("npu", peers[0].node)
    assert model.row_of("npu", ALL_REDUCE) is not None


def test_heat_labels_are_escaped_and_clicks_map_back(tf_results):
    from graphcmp.app.job import Heat, column_label

    evil = "Functional.<a href=x>.0.forward & more"
    heat = Heat(0, (0,), (evil,), np.array([[2.0]]), np.array([[0.5]]))
    label = heat_figure(heat)["data"][0]["x"][0]
    assert "<" not in label and ">" not in label and label == column_label(evil)
    viewer = Viewer(open_results([tf_results]))
    search = jump_search(viewer, ViewState(result="s0r0"), "job-heat", {"points": [{"x": label, "y": "rank 0"}]})
    assert ViewState.from_query(search).selected == ("npu", evil)
