"""Manual matching in the viewer: pick a node per side, match or unmatch; saved next to the result, re-applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphcmp.app import open_results
from graphcmp.app.actions import manual as _manual
from graphcmp.app.state import ViewState, select
from graphcmp.app.viewer import Viewer
from graphcmp.app.views import Turn, show
from graphcmp.core.compare import compare_paths
from graphcmp.core.matching.manual import load_manual_matches, sidecar_path
from graphcmp.core.report import save_report
from graphcmp.samples import samples_dir
from tests.app.test_details import _texts

DATA = Path(__file__).resolve().parents[1] / "data"
EXTRA_NPU = DATA / "msprobe_extraop" / "npu"
BASE_BENCH = samples_dir() / "msprobe" / "tf_small" / "baseline" / "step0" / "rank0"
NODE = "Functional.linear.3.forward"


@pytest.fixture
def extraop_file(tmp_path) -> Path:
    """The extra-op npu run vs tf_small's baseline, compared with --no-fuzzy: many calls stay unmatched."""
    path = tmp_path / "cmp.json"
    save_report(compare_paths(EXTRA_NPU, BASE_BENCH, fuzzy=False), path)
    return path


def _picked(viewer: Viewer, npu: str, bench: str) -> ViewState:
    model = viewer.model("0")
    state = select(ViewState(result="0"), model, "npu", model.graphs["npu"].row(npu))
    return select(state, model, "bench", model.graphs["bench"].row(bench))


def test_match_is_saved_next_to_the_result_and_reapplied(extraop_file):
    viewer = Viewer(open_results([extraop_file]))
    report = viewer.model("0").report
    assert report.verdict(NODE).status == "unmatched"
    state = _picked(viewer, NODE, NODE)
    assert state.picked == (NODE, NODE) and ViewState.from_query(state.to_query()).picked == (NODE, NODE)
    state, note = _manual(viewer, state, "match", children=False)
    assert note == f"matched {NODE} ↔ {NODE}"
    sidecar = sidecar_path(extraop_file)
    assert sidecar.is_file() and [m.npu for m in load_manual_matches(sidecar).matches] == [(NODE,)]
    assert sorted(p.name for p in extraop_file.parent.iterdir()) == ["cmp.json", "cmp.matches.json"]
    model = viewer.model("0")
    row = model.graphs["npu"].row(NODE)
    assert model.twin("npu", row) == model.graphs["bench"].row(NODE)
    assert model.report.verdict(NODE).status != "unmatched"
    out = show(Turn(viewer, state, state, first=True, controls={}))
    assert "matched (manual)" in _texts(out["details"]["details"])  # same id on both sides

    reloaded = Viewer(open_results([extraop_file])).model("0")  # a new app on the same file
    assert reloaded.twin("npu", row) == model.twin("npu", row)
    rule = reloaded.report.matches.rules[int(reloaded.report.matches.rule[row])]
    assert rule == "manual"


def test_unmatch_selected_pair_and_children_by_order(extraop_file):
    viewer = Viewer(open_results([extraop_file]))
    model = viewer.model("0")
    parent = "Module.encoder.layers.0.TransformerEncoderLayer.forward.0"
    n_row = model.graphs["npu"].row(parent)
    assert model.twin("npu", n_row) > 0
    state = select(ViewState(result="0"), model, "npu", n_row)
    state, note = _manual(viewer, state, "unmatch", children=False)
    assert note.startswith("unmatched ")
    model = viewer.model("0")
    assert model.twin("npu", n_row) == -1
    assert load_manual_matches(sidecar_path(extraop_file)).unmatches[0].npu == parent

    state = _picked(viewer, parent, parent)
    state, _ = _manual(viewer, state, "match", children=True)
    model = viewer.model("0")
    npu_kids = model.trees["npu"].children(n_row).tolist()
    b_row = model.twin("npu", n_row)
    bench_kids = model.trees["bench"].children(b_row).tolist()
    assert b_row == model.graphs["bench"].row(parent)
    rules = model.report.matches.rules
    for n, b in zip(npu_kids, bench_kids):  # k-th child with k-th child
        assert model.twin("npu", n) == b and rules[int(model.report.matches.rule[n])] == "manual"
    assert load_manual_matches(sidecar_path(extraop_file)).unmatches == ()


def test_two_dump_folders_have_no_sidecar(tmp_path):
    viewer = Viewer(open_results([EXTRA_NPU, BASE_BENCH], fuzzy=False))
    state = _picked(viewer, NODE, NODE)
    before = set(EXTRA_NPU.iterdir())
    state2, note = _manual(viewer, state, "match", children=False)
    assert "needs a result file" in note and state2 == state
    assert set(EXTRA_NPU.iterdir()) == before
    assert viewer.model("0").report.verdict(NODE).status == "unmatched"


def test_picks_without_a_bench_node_change_nothing(extraop_file):
    viewer = Viewer(open_results([extraop_file]))
    model = viewer.model("0")
    state = select(ViewState(result="0"), model, "npu", model.graphs["npu"].row(NODE))
    _, note = _manual(viewer, state, "match", children=False)
    assert note == "pick a node in each pane first" and not sidecar_path(extraop_file).exists()


@pytest.fixture
def vis_file(tmp_path) -> Path:
    """A copy of msprobe's own compare .vis of tf_small: the matches are msprobe's (``matched_node_link``)."""
    path = tmp_path / "compare_v812.vis.gz"
    path.write_bytes((DATA / "vis_tf_small" / "compare_v812.vis.gz").read_bytes())
    return path


def test_match_and_unmatch_on_a_vis_file(vis_file):
    """msprobe's matches are a rule the viewer can rebuild: Match/Unmatch on a .vis recompare instead of failing."""
    viewer = Viewer(open_results([vis_file]))
    model = viewer.model("0")
    node = "Module.encoder.layers.0.linear1.Linear.forward.0"
    n_row, b_row = model.graphs["npu"].row(node), model.graphs["bench"].row(node)
    matched = model.report.matches.matched
    assert viewer.can_match("0") and model.twin("npu", n_row) == b_row

    _, note = _manual(viewer, select(ViewState(result="0"), model, "npu", n_row), "unmatch", children=False)
    assert note == f"unmatched {node} ↔ {node}"
    model = viewer.model("0")
    assert model.twin("npu", n_row) == -1 and model.report.matches.matched == matched - 1
    assert load_manual_matches(sidecar_path(vis_file)).unmatches[0].npu == node

    _, note = _manual(viewer, _picked(viewer, node, node), "match", children=False)
    assert note == f"matched {node} ↔ {node}"
    model = viewer.model("0")
    assert model.twin("npu", n_row) == b_row and model.report.matches.matched == matched
    assert model.report.matches.rules[int(model.report.matches.rule[n_row])] == "manual"

    reloaded = Viewer(open_results([vis_file])).model("0")  # the sidecar is re-applied to msprobe's matches
    assert reloaded.twin("npu", n_row) == b_row and reloaded.report.matches.matched == matched
