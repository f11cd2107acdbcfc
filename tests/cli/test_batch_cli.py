"""`graphcmp compare` on step/rank layouts, then `info` and `diverge` on the results folder."""

from __future__ import annotations

import json

from graphcmp.cli.main import main
from graphcmp.samples import samples_dir

SAMPLE = samples_dir() / "msprobe" / "tf_small"


def test_batch_compare_info_diverge(tmp_path, capsys):
    out = tmp_path / "results"
    code = main(["compare", str(SAMPLE / "perturb"), str(SAMPLE / "baseline"), "-o", str(out), "-q", "--json",
                 "--workers", "2"])
    assert code == 1
    summary = json.loads(capsys.readouterr().out)
    assert [(r["step"], r["rank"]) for r in summary["runs"]] == [(0, 0), (1, 0)]
    assert main(["info", str(out), "--json"]) == 1  # as compare: the runs differ
    info = json.loads(capsys.readouterr().out)
    assert info["runs"][0]["nodes"] == {"npu": 178, "bench": 178} and info["runs"][0]["comm"]["nodes"] == 0
    assert main(["diverge", str(out), "--json"]) == 1
    analysis = json.loads(capsys.readouterr().out)
    assert analysis["origin"]["node"] == "Functional.linear.2.forward" and analysis["origin"]["step"] == 0
    assert main(["diverge", str(out / "step1_rank0.npz")]) == 1  # one run's result still works alone


def test_unreachable_scheduler_is_a_clear_error(tmp_path, capsys):
    code = main(["compare", str(SAMPLE / "perturb"), str(SAMPLE / "baseline"), "-o", str(tmp_path / "r"), "-q",
                 "--scheduler", "tcp://127.0.0.1:1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "cannot reach the Dask scheduler" in err[0]


def test_bad_scheduler_and_empty_layouts_are_clear_errors(tmp_path, capsys):
    code = main(["compare", str(SAMPLE / "perturb"), str(SAMPLE / "baseline"), "-o", str(tmp_path / "r"), "-q",
                 "--scheduler", "garbage"])
    assert code == 2 and "cannot reach the Dask scheduler" in capsys.readouterr().err
    (tmp_path / "empty" / "step0").mkdir(parents=True)
    code = main(["compare", str(tmp_path / "empty"), str(SAMPLE / "baseline"), "-o", str(tmp_path / "r2"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "no (step, rank) run is on both sides" in err
    code = main(["compare", str(SAMPLE / "perturb"), str(SAMPLE / "baseline"), "-o", "/proc/x", "-q"])
    assert code == 2 and "cannot create the results folder" in capsys.readouterr().err
