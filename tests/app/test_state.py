"""View state: URL round trip, open/close with the twin following, pages, selection, the size cap."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graphcmp.app import layout
from graphcmp.app import state as state_mod
from graphcmp.app.layout import layout_pane
from graphcmp.app.model import ViewModel
from graphcmp.app.state import ViewState, reveal, select, selected_rows, toggle, turn_page, visible_count
from graphcmp.core.compare import compare_paths

ENC = "Module.encoder.TransformerEncoder.forward.0"
LAYER1 = "Module.encoder.layers.1.TransformerEncoderLayer.forward.0"


@pytest.fixture(scope="module")
def shifted(data_dir, perturb_pair) -> ViewModel:
    """npu has one extra call before the encoder, so twin rows differ from npu rows."""
    return ViewModel(compare_paths(data_dir / "msprobe_extraop" / "npu", perturb_pair[1], fuzzy=True))


def test_query_round_trip_and_bad_values():
    s = ViewState(result="s1r0", micro=1, open={"npu": (4, 29), "bench": (5,)}, pages={"npu": {4: 2}, "bench": {}},
                  selected=("bench", "Module.a<b>&c=1"), sync=False, metric="rel_err", bins="1e-3,1e-2",
                  query=r"linear\.\d", filters=("error", "overflow"), hit=3)
    assert ViewState.from_query(s.to_query()) == s
    junk = ViewState.from_query("?open=1.x.-3.2&pg=a:b.4:1&sel=left:node&f=error,rm -rf&hit=-4&micro=z")
    assert junk.open["npu"] == (1, 2) and junk.pages["npu"] == {4: 1} and junk.selected is None
    assert junk.filters == ("error",) and junk.hit == 0 and junk.micro is None


def test_open_follows_to_the_twin(shifted):
    npu, bench = shifted.graphs["npu"], shifted.graphs["bench"]
    enc_npu, enc_bench = npu.row(ENC), bench.row(ENC)
    assert enc_npu != enc_bench
    s = toggle(ViewState(), shifted, "npu", enc_npu)
    assert s.open == {"npu": (enc_npu,), "bench": (enc_bench,)}
    s = toggle(s, shifted, "npu", npu.row(LAYER1))
    assert s.open["bench"] == (enc_bench, bench.row(LAYER1))
    closed = toggle(s, shifted, "bench", enc_bench)
    assert closed.open == {"npu": (), "bench": ()}


def test_sync_off_opens_one_pane(shifted):
    s = toggle(ViewState(sync=False), shifted, "npu", shifted.graphs["npu"].row(ENC))
    assert s.open["bench"] == () and len(s.open["npu"]) == 1


def test_leaf_does_not_open(sample_model):
    row = sample_model.graphs["npu"].row("Functional.linear.2.forward")
    assert toggle(ViewState(), sample_model, "npu", row) == ViewState()


def test_select_reveals_node_and_twin(shifted, monkeypatch):
    monkeypatch.setattr(layout, "PAGE", 3)
    monkeypatch.setattr(state_mod, "PAGE", 3)
    npu = shifted.graphs["npu"]
    row = npu.row("Functional.linear.2.forward")
    s = select(ViewState(), shifted, "npu", row)
    rows = selected_rows(s, shifted)
    assert rows["bench"] == shifted.twin("npu", row) >= 0
    for side, r in rows.items():
        geo = layout_pane(shifted.trees[side], s.open[side], s.pages[side], s.micro)
        assert geo.visible[r], side


def test_turn_page_moves_the_twin_pane(shifted, monkeypatch):
    monkeypatch.setattr(layout, "PAGE", 3)
    monkeypatch.setattr(state_mod, "PAGE", 3)
    npu = shifted.graphs["npu"]
    layer1 = npu.row(LAYER1)
    s = reveal(ViewState(), shifted, "npu", layer1)
    s = toggle(s, shifted, "npu", layer1)
    s = turn_page(s, shifted, "npu", layer1, 1)
    assert s.pages["npu"][layer1] == 1
    first = int(shifted.trees["npu"].children(layer1)[3])
    twin = shifted.twin("npu", first)
    geo = layout_pane(shifted.trees["bench"], s.open["bench"], s.pages["bench"], None)
    assert geo.visible[twin]


def test_opening_past_the_cap_closes_the_oldest(sample_model, monkeypatch):
    tree = sample_model.trees["npu"]
    modules = [int(r) for r in tree.children(0) if tree.n_children[r]]
    cap = visible_count(sample_model, "npu", tuple(modules[:2]), None)
    monkeypatch.setattr(state_mod, "MAX_VISIBLE", cap)
    s = ViewState(sync=False)
    for row in modules[:3]:
        s = toggle(s, sample_model, "npu", row)
    assert modules[2] in s.open["npu"] and modules[0] not in s.open["npu"]
    assert visible_count(sample_model, "npu", s.open["npu"], None) <= cap


def test_clean_drops_unknown_rows_and_nodes(sample_model):
    s = ViewState(open={"npu": (4, 10**6), "bench": ()}, selected=("npu", "nope"))
    cleaned = s.clean(sample_model)
    assert cleaned.open["npu"] == (4,) and cleaned.selected is None
    assert replace(cleaned, selected=("npu", ENC)).clean(sample_model).selected == ("npu", ENC)
