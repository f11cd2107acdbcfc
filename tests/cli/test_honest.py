"""Honest results on the command line: one verdict for `compare`, `diverge` and jobs, exit codes that say it,
outputs that never touch an input, and no traceback or warning on the terminal (issue 14, part A)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import warnings

import pytest

from graphcmp.cli.main import main
from tests.conftest import DATA

GPT = DATA / "msprobe_gpt_mapping"


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _pairs(perturb_pair):
    """(name, npu, bench, options, verdict): cases where compare and diverge must give the same answer."""
    npu, bench = perturb_pair
    return [
        ("perturbed weight", npu, bench, [], "differ"),
        ("identical runs", bench, bench, [], "agree"),
        ("renamed modules, no mapping", GPT / "npu", GPT / "bench", [], "inconclusive"),
        ("renamed modules, mapping", GPT / "npu", GPT / "bench", [f"--layer-mapping={GPT / 'mapping.yaml'}"], "agree"),
        ("extra op, fuzzy", DATA / "msprobe_extraop" / "npu", bench, ["--fuzzy"], "agree"),
        ("MindSpore against PyTorch, no options", DATA / "mindspore_cnn" / "bench", DATA / "pytorch_cnn" / "bench",
         [], "inconclusive"),
        ("kernel dump with a planted Cast", DATA / "mindspore_dump_lenet_cast" / "npu",
         DATA / "mindspore_dump_lenet_cast" / "bench", [], "differ"),
        ("overflow", DATA / "msprobe_overflow_tokens" / "npu", DATA / "msprobe_overflow_tokens" / "bench", [],
         "differ"),
    ]


@pytest.mark.parametrize("case", range(8))
def test_compare_and_diverge_give_one_verdict(case, perturb_pair, tmp_path, capsys):
    name, npu, bench, options, verdict = _pairs(perturb_pair)[case]
    out = tmp_path / "cmp.json"
    code = main(["compare", str(npu), str(bench), "-o", str(out), "-q", "--json", *options])
    summary = _json(capsys)
    assert (summary["verdict"], code) == (verdict, 0 if verdict == "agree" else 1), name
    assert main(["diverge", str(out), "--json"]) == code
    analysis = _json(capsys)
    assert analysis["verdict"] == verdict and analysis["outcome"]["reason"] == summary["outcome"]["reason"]
    first = summary["first_divergence"]
    assert (first and first["node"]) == (analysis["first"] and analysis["first"]["node"])
    assert main(["info", str(out), "--json"]) == code and _json(capsys)["verdict"] == verdict


def test_diverge_does_not_say_no_divergence_when_too_little_was_compared(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert main(["compare", str(GPT / "npu"), str(GPT / "bench"), "-o", str(out), "-q"]) == 1
    text = capsys.readouterr().out
    assert "verdict: inconclusive: only 17 of 91 npu nodes holding data were matched" in text
    assert "hint: modules renamed between the runs? give a mapping file: --layer-mapping FILE" in text
    assert main(["diverge", str(out)]) == 1
    text = capsys.readouterr().out
    assert "no divergence:" not in text and text.startswith("no divergence among the compared outputs, but too little")


def test_the_kernel_dump_pair_names_the_same_first_divergence(tmp_path, capsys):
    case = DATA / "mindspore_dump_lenet_cast"
    out = tmp_path / "cmp.json"
    assert main(["compare", str(case / "npu"), str(case / "bench"), "-o", str(out), "-q"]) == 1
    compare_text = capsys.readouterr().out
    assert main(["diverge", str(out), "--json"]) == 1
    node = _json(capsys)["first"]["node"]
    assert node == "Default/network-WithLossCell/_backbone-LeNet5/relu-ReLU/ReLU-op1"  # the ReLU after the Cast
    assert f"first divergence: {node} " in compare_text


def test_a_job_result_is_a_folder_never_a_file_name(tmp_path, capsys):
    out = tmp_path / "mix.json"
    code = main(["compare", str(DATA / "parallel" / "tp2pp2"), str(DATA / "parallel" / "tp1"), "-o", str(out), "-q"])
    assert code == 2 and not out.exists()
    assert "-o names a results folder" in capsys.readouterr().err
    out.write_text("{}")  # an existing file is refused whatever its name
    code = main(["compare", str(DATA / "parallel" / "tp2pp2"), str(DATA / "parallel" / "tp1"), "-o", str(out), "-q"])
    assert code == 2 and out.read_text() == "{}"


@pytest.mark.parametrize("option", ["--thresholds", "--layer-mapping", "--matches"])
def test_output_naming_an_option_file_is_refused(option, perturb_pair, tmp_path, capsys):
    given = tmp_path / "given.json"
    shutil.copy(GPT / "mapping.yaml", given)
    before = _digest(given)
    code = main(["compare", str(GPT / "npu"), str(GPT / "bench"), f"{option}={given}", "-o", str(given), "-q"])
    assert code == 2 and _digest(given) == before
    assert f"{given}: is the input {given}" in capsys.readouterr().err


def test_a_planted_part_link_is_never_written_through(perturb_pair, tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text("keep me")
    out = tmp_path / "cmp.json"
    os.symlink(victim, tmp_path / "cmp.json.part")
    assert main(["compare", str(perturb_pair[1]), str(perturb_pair[1]), "-o", str(out), "-q"]) == 0
    assert victim.read_text() == "keep me" and (tmp_path / "cmp.json.part").is_symlink()
    assert json.loads(out.read_text())["format"] == "graphcmp.compare"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp.json", "cmp.json.part", "victim.json"]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_output_naming_a_special_file_is_refused(kind, perturb_pair, tmp_path, capsys):
    out = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(out)
    else:
        os.symlink(os.devnull, out)  # resolves to the device; a regression would replace only this link
    code = main(["compare", str(perturb_pair[1]), str(perturb_pair[1]), "-o", str(out), "-q"])
    assert code == 2
    assert ("is a FIFO" if kind == "fifo" else "is a character device") in capsys.readouterr().err
    assert os.path.exists(os.devnull) and not os.path.isfile(os.devnull)


def test_a_closed_pipe_ends_quietly_with_the_commands_exit_code(perturb_pair, tmp_path):
    out = tmp_path / "cmp.json"
    main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(out), "-q"])
    for args in (["diverge", str(out)], ["diverge", str(out), "--json"], ["info", str(out)]):
        process = subprocess.Popen([sys.executable, "-m", "graphcmp", *args], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        process.stdout.close()  # the reader is gone before anything is written (as `| head` once it has its lines)
        err = process.stderr.read().decode()
        assert process.wait(timeout=60) == 1, args  # the runs differ: every command says so
        assert "Traceback" not in err and "BrokenPipe" not in err


def test_no_numpy_warning_reaches_the_terminal(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning (inf / inf ...) would fail the command
        for npu, bench in ((DATA / "msprobe_overflow_tokens" / "npu", DATA / "msprobe_overflow_tokens" / "bench"),
                           (DATA / "parallel" / "tp2pp2", DATA / "parallel" / "tp1")):
            out = tmp_path / npu.parent.name
            assert main(["compare", str(npu), str(bench), "-o", str(out), "-q", "--workers", "1"]
                        if npu.parent.name == "parallel" else
                        ["compare", str(npu), str(bench), "-o", str(out), "-q"]) in (0, 1)
            assert main(["diverge", str(out)]) in (0, 1)
    assert "Warning" not in capsys.readouterr().err
