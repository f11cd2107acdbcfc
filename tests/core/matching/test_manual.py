"""Manual matches: the sidecar file, re-applying it to a report, unmatches, and errors naming the line."""

from __future__ import annotations

import pytest

from graphcmp.core.compare import apply_manual_matches
from graphcmp.core.errors import MappingError
from graphcmp.core.matching.manual import (
    ManualMatches,
    load_manual_matches,
    save_manual_matches,
    sidecar_path,
)
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.report import load_report, save_report
from tests.conftest import DATA
from tests.core.matching.helpers import compare_with, partner

GPT = DATA / "msprobe_gpt_mapping"


def _gpt_report(specs=("exact",)):
    return compare_with(read_msprobe(GPT / "npu"), read_msprobe(GPT / "bench"), list(specs))


def test_sidecar_round_trip_keeps_every_decision(tmp_path):
    manual = (ManualMatches(npu_path="npu", bench_path="bench")
              .with_match("Module.blocks.0.TargetBlock.forward.0", "Module.layers.0.BaselineBlock.forward.0",
                          children=True)
              .with_match(["Tensor.__add__.0.forward", "Tensor.__add__.1.forward"], "Tensor.__add__.1.forward")
              .with_unmatch("Functional.embedding.0.forward", "Functional.embedding.0.forward"))
    path = sidecar_path(tmp_path / "cmp.json")
    assert path.name == "cmp.matches.json"
    save_manual_matches(manual, path)
    loaded = load_manual_matches(path)
    assert [(m.npu, m.bench, m.children) for m in loaded.matches] == [(m.npu, m.bench, m.children)
                                                                      for m in manual.matches]
    assert loaded.unmatches[0].npu == "Functional.embedding.0.forward" and loaded.npu_path == "npu"
    assert loaded.matches[1].where == f"{path}:12"  # lines, for the rule report


def test_a_later_decision_about_a_node_replaces_the_earlier_one():
    manual = ManualMatches().with_match("a", "b").with_match("a", "c").with_unmatch("x", "c")
    assert manual.matches == () and [(u.npu, u.bench) for u in manual.unmatches] == [("x", "c")]


def test_apply_manual_matches_recompares_with_the_matches_first(tmp_path):
    report = _gpt_report()
    assert report.matches.matched == 24
    manual = ManualMatches().with_match("Module.blocks.0.TargetBlock.forward.0",
                                        "Module.layers.0.BaselineBlock.forward.0", children=True)
    again = apply_manual_matches(report, manual)
    # the block and its children by order: input_norm <-> ln1, self_attention <-> attn ...; below them
    # (LayerNorm <-> LayerNorm's layer_norm call ...) the usual rules continue
    assert partner(again, "Module.blocks.0.input_norm.LayerNorm.forward.0") == "Module.layers.0.ln1.LayerNorm.forward.0"
    assert partner(again, "Functional.layer_norm.0.forward") == "Functional.layer_norm.0.forward"
    assert again.summary()["matched_by_rule"]["manual"] == 7  # the block + its 6 children
    assert again.matches.matched > report.matches.matched
    assert again.verdict("Module.blocks.0.self_attention.MultiheadAttention.forward.0").status == "pass"


def test_matches_are_reapplied_after_the_report_is_saved_and_loaded(tmp_path):
    report = _gpt_report([f"layer-mapping={GPT / 'mapping.yaml'}", "exact"])
    save_report(report, tmp_path / "cmp.json")
    loaded = load_report(tmp_path / "cmp.json")
    manual = ManualMatches().with_unmatch("Tensor.__add__.1.forward", "Tensor.__add__.1.forward")
    save_manual_matches(manual, sidecar_path(tmp_path / "cmp.json"))
    again = apply_manual_matches(loaded, load_manual_matches(sidecar_path(tmp_path / "cmp.json")))
    assert again.options.matchers == ("manual", f"layer-mapping={GPT / 'mapping.yaml'}", "exact")
    assert again.verdict("Tensor.__add__.1.forward").status == "unmatched"  # the person said no
    assert again.matches.matched == 113  # the layer mapping still matched everything else
    assert again.matches.rule_report()["unused"] == []


def test_manual_matches_win_over_every_rule_and_name_their_conflicts(tmp_path):
    report = _gpt_report([f"layer-mapping={GPT / 'mapping.yaml'}", "exact"])
    manual = ManualMatches().with_match("Module.blocks.0.input_norm.LayerNorm.forward.0",
                                        "Module.layers.0.ln2.LayerNorm.forward.0")
    path = tmp_path / "cmp.matches.json"
    save_manual_matches(manual, path)
    again = compare_with(report.npu, report.bench, [f"manual={path}", f"layer-mapping={GPT / 'mapping.yaml'}",
                                                    "exact"])
    assert partner(again, "Module.blocks.0.input_norm.LayerNorm.forward.0") == "Module.layers.0.ln2.LayerNorm.forward.0"
    (line,) = [c for c in again.matches.conflicts if "post_attention_norm" in c]
    assert line.startswith(f"{GPT / 'mapping.yaml'}:9: TargetBlock: post_attention_norm -> ln2: wants")
    assert f"by manual={path} ({path}:7); the earlier rule wins" in line


def test_unknown_nodes_in_a_sidecar_are_reported_not_fatal(tmp_path):
    path = tmp_path / "cmp.matches.json"
    save_manual_matches(ManualMatches().with_match("Module.nope.forward.0", "Module.layers.0.ln1.LayerNorm.forward.0"),
                        path)
    report = compare_with(read_msprobe(GPT / "npu"), read_msprobe(GPT / "bench"), [f"manual={path}", "exact"])
    assert report.matches.rule_report()["unused"] == [
        f"{path}:7: match: Module.nope.forward.0 -> Module.layers.0.ln1.LayerNorm.forward.0 "
        "(no such node: npu 'Module.nope.forward.0')"]


def test_malformed_sidecar_names_the_line(tmp_path):
    path = tmp_path / "cmp.matches.json"
    path.write_text('{"format": "graphcmp.matches", "version": 1,\n "unmatches": [\n  {"npu": ["a", "b"]}\n]}\n')
    with pytest.raises(MappingError, match=r"cmp\.matches\.json:3: an unmatch names one npu node"):
        load_manual_matches(path)
