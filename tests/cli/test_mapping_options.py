"""The matching-rule options of `graphcmp compare` in-process: counts by rule source, typos, bad files."""

from __future__ import annotations

import json

from graphcmp.cli.main import main
from tests.conftest import DATA

GPT = DATA / "msprobe_gpt_mapping"


def _json_out(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_layer_mapping_and_info_report_counts_by_rule_source(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    code = main(["compare", str(GPT / "npu"), str(GPT / "bench"), "-o", str(out), "--json", "-q",
                 "--layer-mapping", str(GPT / "mapping.yaml")])
    assert code == 0
    summary = _json_out(capsys)
    rule = f"layer-mapping={GPT / 'mapping.yaml'}"
    assert summary["matched"] == 114 and summary["matched_by_rule"][rule] == 112
    assert summary["rule_report"]["sources"][rule] == {"matched": 112, "entries": 7, "entries_used": 7}
    assert main(["info", str(out), "--json"]) == 0
    info = _json_out(capsys)
    assert info["matched_by_rule"] == summary["matched_by_rule"]
    assert info["rule_report"]["sources"][rule]["matched"] == 112


def test_a_typo_is_printed_not_passed_over(tmp_path, capsys):
    typo = tmp_path / "typo.yaml"
    typo.write_text((GPT / "mapping.yaml").read_text().replace("TargetBlock:", "TargetBlok:"))
    code = main(["compare", str(GPT / "npu"), str(GPT / "bench"), "-o", str(tmp_path / "c.json"), "-q",
                 f"--layer-mapping={typo}"])
    assert code == 1  # the class the typo names never matches: most of the blocks stay unmatched
    text = capsys.readouterr().out
    assert "verdict: inconclusive: only " in text
    assert f"rule matched nothing: {typo}:7: TargetBlok: input_norm -> ln1 (class 'TargetBlok' does not occur " \
           "in the npu run)" in text


def test_bare_options_after_the_runs_and_the_matches_sidecar(tmp_path, capsys):
    ms, pt = DATA / "mindspore_cnn" / "bench", DATA / "pytorch_cnn" / "bench"
    out = tmp_path / "x.json"
    assert main(["compare", str(ms), str(pt), "-o", str(out), "--json", "-q", "--layer-mapping", "--api-mapping",
                 "--fused"]) == 0  # MindSpore vs PyTorch baselines: no error
    summary = _json_out(capsys)
    # the frameworks' own layers (built in, after the user's rules) pair the Primitives of MindSpore's layers
    assert set(summary["matched_by_rule"]) == {"root", "group", "layer-mapping", "framework-layers", "fused"}
    assert summary["verdicts"].get("error", 0) == 0
    sidecar = tmp_path / "x.matches.json"
    sidecar.write_text(json.dumps({"format": "graphcmp.matches", "version": 1, "matches": [],
                                   "unmatches": [{"npu": "Cell.conv1.Conv2d.forward.0"}]}))
    main(["compare", str(ms), str(pt), "-o", str(out), "--json", "-q", "--matches", str(sidecar), "--layer-mapping",
          "--api-mapping", "--fused"])
    again = _json_out(capsys)
    # the unmatch keeps conv1's forward Cell (and so its two calls, only reachable through it) unmatched
    assert again["rule_report"]["sources"][f"manual={sidecar}"] == {"matched": 0, "entries": 1, "entries_used": 1}
    assert again["matched"] == summary["matched"] - 3


def test_bad_rule_files_exit_2_naming_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("TopLayer:\n  blocks: [layers\n")
    code = main(["compare", str(GPT / "npu"), str(GPT / "bench"), "-o", str(tmp_path / "c.json"), "-q",
                 "--layer-mapping", str(bad)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"graphcmp: error: {bad}:3: not valid YAML (did not find expected ',' or ']')"
    code = main(["compare", str(GPT / "npu"), str(GPT / "bench"), "-o", str(tmp_path / "c.json"), "-q",
                 "--data-mapping", str(tmp_path / "missing.yaml")])
    assert code == 2 and "missing.yaml: no such mapping file" in capsys.readouterr().err
