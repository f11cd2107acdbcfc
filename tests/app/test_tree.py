"""NavTree: children in execution order, depths, ancestors, nearest drawn ancestor, labels."""

from __future__ import annotations

import numpy as np

from graphcmp.app.tree import NavTree, short_label


def test_children_match_the_core_tree(sample_report):
    graph = sample_report.npu
    tree = NavTree(graph)
    for row in (0, 4, 29):
        node_id = graph.nodes.ids[row]
        assert [graph.nodes.ids[c] for c in tree.children(row)] == graph.children(node_id)


def test_depth_and_ancestors(sample_report):
    graph = sample_report.npu
    tree = NavTree(graph)
    row = graph.row("Functional.linear.2.forward")
    assert [graph.nodes.ids[a] for a in tree.ancestors(row)] == [
        "DefaultModel", "Module.encoder.TransformerEncoder.forward.0",
        "Module.encoder.layers.1.TransformerEncoderLayer.forward.0", "Module.encoder.layers.1.linear1.Linear.forward.0"]
    assert tree.depth[row] == 4 and tree.depth[0] == 0


def test_nearest_visible(sample_report):
    tree = NavTree(sample_report.npu)
    visible = np.zeros(len(tree), bool)
    visible[tree.children(0)] = True
    rep = tree.nearest_visible(visible)
    row = sample_report.npu.row("Functional.linear.2.forward")
    assert rep[row] == sample_report.npu.row("Module.encoder.TransformerEncoder.forward.0")
    assert rep[0] == -1


def test_labels():
    assert short_label("Cell.fc1.Dense.parameters_grad.0", "Dense", 3, 1) == "fc1: Dense grads"
    assert short_label("Primitive.matmul.MatMul.0.forward", "MatMul", 2, 0) == "MatMul.0"
    assert short_label("x" * 80, "y", 2, 0).endswith("…")


def test_merged_nodes_carry_a_rank_badge(merged_results, sample_report):
    from graphcmp.core.report import load_report

    report = load_report(merged_results / "step0_merged.json")
    tree = NavTree(report.npu)
    assert tree.label(report.npu.row("Functional.layer_norm.2.forward")) == "layer_norm.2 [r0-1]"
    assert tree.label(1).endswith("[r0-1]")  # the model root, stitched from both ranks
    assert "[r" not in NavTree(sample_report.npu).label(1)  # a plain run has no badge
    assert NavTree(report.bench).label(report.bench.row("Functional.layer_norm.2.forward")) == "layer_norm.2 [r0]"
