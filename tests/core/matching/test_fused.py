"""Fused ops: GE ops to the original ops they replace, decomposed ops inside matched modules."""

from __future__ import annotations

from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.matching import match_graphs
from graphcmp.core.matching.fused_ops import FusedOpsMatcher, original_names
from graphcmp.core.readers import read_graph
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.records import Direction, NodeKind, RunInfo
from tests.conftest import DATA
from tests.core.matching.helpers import compare_with, statuses


def _originals_run(npu):
    """The original framework graph's op names, as GE recorded them on the real graph `npu`.

    The ONNX models behind these GE graphs are not available, so the bench run holds one node per
    original op name the real GE file records (what an ONNX reader would give for those ops).
    """
    b = HierarchyBuilder()
    for row in range(len(npu)):
        for k, name in enumerate(original_names(npu, row)):
            if name not in b:
                b.add_node(name, NodeKind.API, name.rsplit("_", 1)[0], Direction.FORWARD, None, row + k / 100)
    return b.build(RunInfo(path="onnx originals"), group_apis=False)


def test_ge_fused_ops_pin_to_their_original_ops():
    npu = read_graph(DATA / "ge_om_json" / "analyze_test.om.json.gz")  # 132 ops, 39 renamed or fused
    bench = _originals_run(npu)
    table = match_graphs(npu, bench, [FusedOpsMatcher()])
    groups = {npu.nodes.ids[g.npu[0]]: [bench.nodes.ids[b] for b in g.bench] for g in table.groups}
    # BatchNorm folded with its constants (and with Transpose_55, which GE also kept as its own op: first wins)
    assert groups["BatchNormalization_60_BNInferenceD"] == ["BatchNormalization_60", "Constant_56", "Constant_57",
                                                            "Constant_58", "Constant_59"]
    assert groups["Div_331Mul_333Add_335Mul_337Add_338"] == ["Div_331", "Mul_333", "Add_335", "Mul_337", "Add_338"]
    transpose = npu.row("PartitionedCall_Transpose_55_Transpose_21")
    assert bench.nodes.ids[table.npu_to_bench[transpose]] == "Transpose_55"
    assert table.count_by_rule() == {"root": 1, "fused-ops": 39}
    assert all(g.via == -1 for g in table.groups)  # compared on their boundary tensors


def test_ge_ops_split_from_one_original_form_a_many_to_one_group():
    npu = read_graph(DATA / "ge_om_json" / "msquickcmp_om_model.json")  # ONNX Gather_1221 became Const + GatherV2
    bench = _originals_run(npu)
    table = match_graphs(npu, bench, [FusedOpsMatcher()])
    (group,) = [g for g in table.groups if len(g.npu) > 1]
    assert [npu.nodes.ids[n] for n in group.npu] == ["PartitionedCall_Gather_1221_const_data_2",
                                                     "PartitionedCall_Gather_1221_gatherv2_3"]
    assert [bench.nodes.ids[b] for b in group.bench] == ["Gather_1221"]
    # ops whose only original is themselves (Concat_1211) are left to the other rules
    assert table.npu_to_bench[npu.row("Concat_1211")] == -1


def test_decomposition_groups_the_leftover_calls_of_matched_modules():
    ms, pt = read_msprobe(DATA / "mindspore_cnn" / "bench"), read_msprobe(DATA / "pytorch_cnn" / "bench")
    report = compare_with(ms, pt, ["layer-mapping", "exact", "fused"])
    groups = {tuple(ms.nodes.ids[n] for n in g.npu): ([pt.nodes.ids[b] for b in g.bench], ms.nodes.ids[g.via])
              for g in report.matches.groups}
    assert groups[("Primitive.shape_op.Shape.0.forward", "Primitive.matmul.MatMul.0.forward",
                   "Primitive.bias_add.BiasAdd.2.forward")] == (["Functional.linear.0.forward"],
                                                                "Cell.fc1.Dense.forward.0")
    # one left on each side: a plain pair
    assert report.verdict("Primitive.max_pool.MaxPool.1.forward").status == "pass"
    by_rule = report.summary()["matched_by_rule"]
    # the frameworks' own layers (Dense: MatMul -> linear, widened to the module's calls) come first; the
    # decomposition groups what they leave (the calls of layers the built-in table does not list)
    assert by_rule["framework-layers"] + by_rule["fused"] == 36 and by_rule["fused"] == 4
    # members are compared through their module: skipped themselves, the module judged
    assert "Primitive.matmul.MatMul.0.forward" in statuses(report, "skip")
    assert report.verdict("Cell.fc1.Dense.forward.0").status == "pass"
