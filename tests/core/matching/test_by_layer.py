"""Layer mapping on real dumps: the renamed GPT block, typos and conflicts, cross-framework module paths."""

from __future__ import annotations

import json

import numpy as np

from graphcmp.core.mapping_files import load_layer_mapping
from graphcmp.core.matching import default_matchers, match_graphs
from graphcmp.core.matching.by_layer import LayerMatcher
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.records import NodeKind, Role
from tests.conftest import DATA
from tests.core.matching.helpers import compare_with, partner, statuses

GPT = DATA / "msprobe_gpt_mapping"


def _gpt():
    return read_msprobe(GPT / "npu"), read_msprobe(GPT / "bench")


def test_gpt_mapping_matches_every_node_including_parameter_gradients():
    npu, bench = _gpt()
    report = compare_with(npu, bench, [f"layer-mapping={GPT / 'mapping.yaml'}", "exact"])
    table = report.matches
    assert len(npu) == len(bench) == 114
    assert table.matched == 114  # msprobe 26.2.0 -lm: 104 of 114 (its 10 parameters_grad nodes stay unmatched)
    grads = np.flatnonzero(npu.nodes.kind == NodeKind.PARAM_GRAD)
    assert len(grads) == 13 and (table.npu_to_bench[grads] >= 0).all()
    assert partner(report, "Module.blocks.1.feed_forward.dense_h_to_4h.Linear.parameters_grad.0") == \
        "Module.layers.1.mlp.fc1.Linear.parameters_grad.0"
    assert partner(report, "Module.blocks.0.TargetBlock.backward.0") == "Module.layers.0.BaselineBlock.backward.0"
    # every parameter and parameter gradient tensor is paired and compared
    t = npu.tensors
    params = np.flatnonzero(np.isin(t.role, (Role.PARAM, Role.PARAM_GRAD)))
    assert len(params) > 0 and np.isin(params, report.pairs.npu).all()
    # the two models hold the same weights and inputs: nothing differs
    assert statuses(report, "error") == statuses(report, "warning") == set()
    rules = report.summary()["rule_report"]
    assert rules["unused"] == [] and rules["conflicts"] == []
    assert rules["sources"][f"layer-mapping={GPT / 'mapping.yaml'}"] == {"matched": 112, "entries": 7,
                                                                          "entries_used": 7}


def test_gpt_without_mapping_matches_only_the_same_names():
    npu, bench = _gpt()
    table = match_graphs(npu, bench, default_matchers())
    assert table.matched == 24  # msprobe 26.2.0 without -lm: 24 of 114 too
    bare = match_graphs(npu, bench, [LayerMatcher(), *default_matchers()])
    assert bare.matched == 24  # same paths are needed without a file, and blocks != layers


def test_typos_and_conflicts_are_reported_with_file_and_line(tmp_path):
    npu, bench = _gpt()
    path = tmp_path / "typo.yaml"
    path.write_text("TopLayer:\n  blocks: layers\nTargetBlok:\n  input_norm: ln1\nTargetBlock:\n"
                    "  self_atention: attn\n  feed_forward: mlp\n  post_attention_norm: mlp\n")
    table = match_graphs(npu, bench, [LayerMatcher(load_layer_mapping(path)), *default_matchers()])
    assert [u.split(": ", 1)[1] for u in table.rule_report()["unused"]] == [
        "TargetBlok: input_norm -> ln1 (class 'TargetBlok' does not occur in the npu run)",
        "TargetBlock: self_atention -> attn (no child 'self_atention' under any TargetBlock in the npu run)",
        "TargetBlock: post_attention_norm -> mlp (its bench counterpart was already matched)",
    ]
    assert [u.split(": ", 1)[0] for u in table.rule_report()["unused"]] == [f"{path}:4", f"{path}:6", f"{path}:8"]
    # line 8 claims the bench MLP that line 7 took first: listed once per (entry, earlier rule), first wins
    conflicts = table.conflicts
    assert len(conflicts) == 1 and conflicts[0].startswith(f"{path}:8: TargetBlock: post_attention_norm -> mlp:")
    assert f"({path}:7); the earlier rule wins (and 3 more nodes alike)" in conflicts[0]
    mlp = bench.row("Module.layers.0.mlp.BaselineMLP.forward.0")
    assert npu.nodes.ids[table.bench_to_npu[mlp]] == "Module.blocks.0.feed_forward.FeedForward.forward.0"


def test_cross_framework_module_paths_match_the_ground_truth_cell_map():
    ms, pt = read_msprobe(DATA / "mindspore_cnn" / "bench"), read_msprobe(DATA / "pytorch_cnn" / "bench")
    truth = json.loads((DATA / "mapping_files" / "cell_map_cnn_ms_to_pt.json").read_text())["map"]
    for specs in (["layer-mapping", "exact"], [f"layer-mapping={DATA / 'mapping_files' / 'cnn_ms_to_pt.yaml'}"]):
        report = compare_with(ms, pt, specs)
        assert {k: partner(report, k) for k in truth} == truth  # all 30 Cells, forward/backward/parameters_grad


def test_a_ms_to_pt_file_is_read_backwards_for_a_pytorch_npu_run():
    ms, pt = read_msprobe(DATA / "mindspore_cnn" / "bench"), read_msprobe(DATA / "pytorch_cnn" / "bench")
    path = DATA / "mapping_files" / "cnn_ms_to_pt.yaml"
    report = compare_with(pt, ms, [f"layer-mapping={path}", "exact"])
    assert report.matches.rule_report()["unused"] == []  # every entry found its classes on the bench side
    assert partner(report, "Functional.relu.1.forward") == "Primitive.relu.ReLU.1.forward"
    # PyTorch's conv2d is MindSpore's Conv2D + BiasAdd: one group compared through the Conv2d module pair
    group = next(g for g in report.matches.groups if npu_ids(report, g.npu) == ["Functional.conv2d.1.forward"])
    assert [report.bench.nodes.ids[b] for b in group.bench] == ["Primitive.conv2d.Conv2D.1.forward",
                                                               "Primitive.bias_add.BiasAdd.1.forward"]
    assert report.npu.nodes.ids[group.via] == "Module.conv2.Conv2d.forward.0"


def npu_ids(report, rows):
    return [report.npu.nodes.ids[r] for r in rows]
