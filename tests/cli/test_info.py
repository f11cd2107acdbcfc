"""`graphcmp info` on a `.vis.db` holding several graphs prints every graph, then the verdict of them all."""

from __future__ import annotations

import json

from graphcmp.cli.main import main
from tests.conftest import DATA

TWO_STEPS = DATA / "vis_tf_small_2steps" / "compare_v26.vis.db.gz"


def test_info_shows_every_graph_of_a_vis_db(capsys):
    assert main(["info", str(TWO_STEPS)]) == 1  # msprobe compared a perturbed run: they differ
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{TWO_STEPS}: 2 graphs"
    assert [line for line in out if line.startswith("step ")] == ["step 0 rank 0:", "step 1 rank 0:"]
    assert "  verdicts (npu nodes): pass 31, warning 6, error 109, skip 32" in out
    assert out[-1].startswith("verdict: differ: step 0 rank 0: first divergence at Functional.linear.2.forward")


def test_info_json_lists_every_graph(capsys):
    assert main(["info", str(TWO_STEPS), "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert [(g["step"], g["rank"], g["matched"]) for g in summary["graphs"]] == [(0, 0, 178), (1, 0, 178)]
    assert summary["verdict"] == "differ"


def test_info_on_a_damaged_db_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.vis.db"
    bad.write_bytes(b"not sqlite")
    assert main(["info", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.vis.db" in err[0]
