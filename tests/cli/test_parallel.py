"""`graphcmp compare` on jobs of different layouts, `info`/`diverge` on its results, and `graphcmp consistency`."""

from __future__ import annotations

import json
import shutil

import pytest

from graphcmp.cli.main import main
from tests.conftest import DATA, shared

PARALLEL = DATA / "parallel"


def _json(capsys):
    return json.loads(capsys.readouterr().out)


def test_compare_merges_different_layouts_and_prints_them(tmp_path, capsys):
    out = tmp_path / "r"
    code = main(["compare", str(PARALLEL / "tp2pp2"), str(PARALLEL / "tp1"), "-o", str(out), "-q"])
    text = capsys.readouterr().out
    assert code == 0
    assert "npu layout:   tp=2 pp=2 vpp=1 dp=1 (4 ranks; TP groups [0,1] [2,3]; PP groups [0,2] [1,3]" in text
    assert "bench layout: tp=1 pp=1" in text and "step 0 merged:" in text and "job: no divergence" in text
    assert main(["info", str(out), "--json"]) == 0
    info = _json(capsys)
    assert info["runs"][0]["merged"] and info["runs"][0]["verdicts"].get("error", 0) == 0
    assert main(["diverge", str(out), "--json"]) == 0 and _json(capsys)["origin"] is None


def test_desync_origin_names_rank_and_own_id(tmp_path, capsys):
    out = tmp_path / "r"
    code = main(["compare", str(PARALLEL / "tp2_desync"), str(PARALLEL / "tp1"), "-o", str(out), "-q", "--json"])
    summary = _json(capsys)
    assert code == 1 and summary["layouts"]["npu"]["tp_groups"] == [[0, 1]]
    assert main(["diverge", str(out), "--json"]) == 1
    origin = _json(capsys)["origin"]
    assert (origin["node"], origin["rank"], origin["ranks"]) == ("Functional.layer_norm.2.forward", 1, [0, 1])
    assert main(["diverge", str(out)]) == 1
    assert "origin: rank 1, step 0" in capsys.readouterr().out


def test_stated_layout_merges_even_the_same_layouts(tmp_path, capsys):
    code = main(["compare", str(PARALLEL / "tp1"), str(PARALLEL / "tp1"), "-o", str(tmp_path / "r"), "-q",
                 "--npu-layout", "tp=1", "--json"])
    summary = _json(capsys)
    assert code == 0 and summary["merged_because"] == "a layout was stated"
    assert summary["layouts"]["npu"]["source"] == "stated"


def test_bad_layout_statement_is_a_one_line_error(tmp_path, capsys):
    code = main(["compare", str(PARALLEL / "tp1"), str(PARALLEL / "tp1"), "-o", str(tmp_path / "r"),
                 "--npu-layout", "tp=two"])
    assert code == 2 and "tp must be a positive integer" in capsys.readouterr().err


@pytest.mark.parametrize("layout, message", [
    ("tp=3", "layout tp=3 pp=1 dp=1 needs ranks 0..2, the job has 2 rank(s) (0, 1)"),
    ("tp=1", "gives the TP groups [0] [1], but the ranks' all_reduce calls inside modules use [0,1]"),
])
def test_a_stated_layout_the_dump_contradicts_is_exit_2_naming_the_input(tmp_path, capsys, layout, message):
    out = tmp_path / "r"
    code = main(["compare", str(PARALLEL / "tp2_desync"), str(PARALLEL / "tp1"), "-o", str(out), "-q",
                 "--npu-layout", layout])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and captured.out == ""
    assert lines[0].startswith(f"graphcmp: error: {PARALLEL / 'tp2_desync'}: --npu-layout contradicts the dump: ")
    assert message in lines[0] and "cannot merge the ranks" not in captured.err
    assert not out.exists()  # nothing written


def test_consistency_takes_the_layout_and_refuses_one_the_dump_contradicts(capsys):
    assert main(["consistency", str(PARALLEL / "tp2_desync"), "--layout", "tp=2"]) == 1
    capsys.readouterr()
    assert main(["consistency", str(PARALLEL / "tp2_desync"), "--layout", "tp=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"graphcmp: error: {PARALLEL / 'tp2_desync'}: --layout contradicts the dump: ")


def test_consistency_that_checked_nothing_is_inconclusive(capsys):
    assert main(["consistency", str(PARALLEL / "tp1")]) == 1
    assert "verdict: inconclusive: nothing to check" in capsys.readouterr().out
    assert main(["consistency", str(PARALLEL / "tp1"), "--json"]) == 1
    assert _json(capsys)["verdict"] == "inconclusive"


def test_a_job_that_cannot_be_merged_is_compared_rank_by_rank(tmp_path, capsys):
    job = tmp_path / "three"
    for rank in (0, 1, 2):
        shutil.copytree(PARALLEL / "tp2pp2" / "step0" / f"rank{rank}", job / "step0" / f"rank{rank}")
    code = main(["compare", str(job), str(PARALLEL / "tp1"), "-o", str(tmp_path / "r"), "-q", "--json"])
    captured = capsys.readouterr()
    assert "cannot merge the ranks: rank 3 has no dump, but rank 1's Distributed." in captured.err
    summary = json.loads(captured.out)
    assert code == 1 and [run["rank"] for run in summary["runs"]] == [0]  # rank 0 with rank 0


def test_consistency_names_the_desynchronised_rank(capsys):
    assert main(["consistency", str(PARALLEL / "tp2_desync"), "--show", "1"]) == 1
    text = capsys.readouterr().out
    assert "rank 1 differs from rank 0 (replicated): Module.module.decoder.layers.1.input_layernorm.LayerNorm" \
           ".forward.0 param.weight" in text
    assert "(parameter module.decoder.layers.1.input_layernorm.weight)" in text
    assert main(["consistency", str(PARALLEL / "tp2pp2"), "--json"]) == 0
    result = _json(capsys)
    assert result["bad_ranks"] == [] and result["layout"]["pp_groups"] == [[0, 2], [1, 3]]


@pytest.mark.shared
def test_scoreboard_commands_on_the_shared_pp2_perturb(tmp_path, capsys):
    root = shared("msprobe/dumps/parallel")
    out = tmp_path / "r"
    assert main(["compare", str(root / "pp2_perturb"), str(root / "tp1"), "-o", str(out), "-q"]) == 1
    capsys.readouterr()
    assert main(["diverge", str(out), "--json"]) == 1
    origin = _json(capsys)["origin"]
    assert origin["module"] == "Module.module.decoder.layers.3.mlp.linear_fc1.ColumnParallelLinear.forward.0"
    assert (origin["rank"], origin["source_id"]) == (1, "Tensor.t.6.forward")


@pytest.mark.shared
@pytest.mark.parametrize("npu", ["tp2", "tp2_perturb"])
def test_tp2_against_tp1_prints_no_numpy_warning(tmp_path, npu):
    """Issue 14: a numpy RuntimeWarning leaked to the terminal on a TP2 vs TP1 run; warnings as errors prove none
    is raised (compare, then diverge and info on its results)."""
    import subprocess
    import sys

    root = shared("msprobe/dumps/parallel")
    out = tmp_path / "r"
    runs = [["compare", str(root / npu), str(root / "tp1"), "-o", str(out), "-q"], ["diverge", str(out)],
            ["info", str(out)]]
    for argv in runs:
        done = subprocess.run([sys.executable, "-W", "error", "-m", "graphcmp", *argv], capture_output=True, text=True,
                              check=False)
        assert done.returncode == (0 if npu == "tp2" else 1), done.stderr[-2000:]  # info answers as compare did
        assert done.stderr == "", done.stderr[-2000:]


def test_merging_jobs_starts_the_reader_build_when_it_is_missing(tmp_path, monkeypatch):
    """Merged jobs read every rank by the chunked read until the compiled reader is built: the command starts
    its build as it ends, as a comparison of two runs does."""
    from graphcmp.core.readers import msprobe_scan

    started = []
    monkeypatch.setattr(msprobe_scan, "build_detached", lambda entry: started.append(entry) or True)
    monkeypatch.setattr(msprobe_scan._KERNELS, "buildable", lambda: True)
    assert main(["compare", str(PARALLEL / "tp2pp2"), str(PARALLEL / "tp1"), "-o", str(tmp_path / "r"), "-q"]) == 0
    assert started == ["graphcmp.core.readers.msprobe_scan:build_kernels"]
