"""`graphcmp diverge` in-process."""

from __future__ import annotations

import json

from graphcmp.cli.main import main


def test_diverge_json(perturb_pair, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(out), "-q"])
    capsys.readouterr()
    assert main(["diverge", str(out), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["first"]["node"] == "Functional.linear.2.forward"
    assert doc["first"]["module"] == "Module.encoder.layers.1.linear1.Linear.forward.0"
    assert (doc["first"]["rank"], doc["first"]["step"], doc["first"]["micro_step"]) == (0, 0, 0)
    assert doc["first"]["cause"] == "inputs differ" and doc["first"]["margin"] > 4
    assert doc["candidates"] == []  # everything after it is explained by its output
    assert doc["findings"][0]["kind"] == "first_divergence"
    assert doc["precision"]["kind"] == "exact rerun"


def test_diverge_on_identical_runs_exits_0(perturb_pair, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    main(["compare", str(perturb_pair[1]), str(perturb_pair[1]), "-o", str(out), "-q"])
    assert main(["diverge", str(out)]) == 0
    assert "no divergence" in capsys.readouterr().out


def test_diverge_needs_a_comparison(perturb_pair, tmp_path, capsys):
    out = tmp_path / "run.json"
    main(["build", str(perturb_pair[1]), "-o", str(out), "-q"])
    assert main(["diverge", str(out)]) == 2
    assert "diverge needs a comparison" in capsys.readouterr().err
