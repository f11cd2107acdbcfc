"""API mapping on real dumps: msprobe's built-in MindSpore -> PyTorch table both ways, argument positions."""

from __future__ import annotations

import pytest

from graphcmp.core.mapping_files import load_api_mapping
from graphcmp.core.matching import ExactMatcher, match_graphs
from graphcmp.core.matching.by_api import ApiMatcher
from graphcmp.core.matching.by_layer import LayerMatcher
from graphcmp.core.matching.by_mapping import CellMatcher
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.records import Role
from tests.conftest import DATA, shared
from tests.core.matching.helpers import compare_with, partner


def _cnn():
    return read_msprobe(DATA / "mindspore_cnn" / "bench"), read_msprobe(DATA / "pytorch_cnn" / "bench")


@pytest.mark.shared
def test_builtin_table_pairs_mindspore_matmul_with_torch_matmul_both_ways():
    base = "mindspore_msprobe/dumps/{}/tf/statistics_mix/baseline/step0/rank0"
    ms, pt = read_msprobe(shared(base.format("ms"))), read_msprobe(shared(base.format("pt")))
    # Attention/Block pair as Cell.X <-> Module.X; inside them MindSpore's Functional.matmul is PyTorch's
    # Torch.matmul by msprobe's table, read backwards for a PyTorch npu run
    for npu, bench, ids in ((ms, pt, ("Functional.matmul.2.forward", "Torch.matmul.2.forward")),
                            (pt, ms, ("Torch.matmul.2.backward", "Functional.matmul.2.backward"))):
        table = match_graphs(npu, bench, [CellMatcher(), ApiMatcher(), ExactMatcher()])
        row = npu.row(ids[0])
        assert bench.nodes.ids[table.npu_to_bench[row]] == ids[1]
        assert table.rules[table.rule[row]] == "api-mapping"
        by_api = [npu.nodes.ids[r].rsplit(".", 2)[0] for r in range(len(npu))
                  if table.rule[r] >= 0 and table.rules[table.rule[r]] == "api-mapping"]
        # 4 matmul calls forward and backward, cross_entropy, and the Tensor.reshape calls (both frameworks' names)
        assert len(by_api) == 29 and sum(a.endswith("matmul") for a in by_api) == 8


def test_builtin_table_on_the_cnn():
    ms, pt = _cnn()
    table = match_graphs(ms, pt, [ApiMatcher(), ExactMatcher()])
    # Functional.cross_entropy is in the table (to itself): claimed by the API rule, before exact names
    assert table.count_by_rule()["api-mapping"] == 2
    assert table.notes == ()  # a built-in table is not the user's to fix: no per-entry notes


def test_msprobe_api_mapping_with_argument_positions(tmp_path):
    ms, pt = _cnn()
    path = tmp_path / "am.yaml"
    path.write_text("- ms_api: Primitive.conv2d.Conv2D\n  pt_api: Functional.conv2d\n"
                    "  ms_args: [0, 1]\n  pt_args: [0, 1]\n  ms_outputs: []\n  pt_outputs: []\n"
                    "- ms_api: Primitive.max_pool.MaxPool\n  pt_api: Functional.max_pool3d\n")
    report = compare_with(ms, pt, ["layer-mapping", f"api-mapping={path}", "exact"])
    assert partner(report, "Primitive.conv2d.Conv2D.0.forward") == "Functional.conv2d.0.forward"
    rows = report.npu.tensor_rows("Primitive.conv2d.Conv2D.0.forward")
    paired = [(int(report.npu.tensors.role[i]), report.npu.tensors.slot[i], report.bench.tensors.slot[j])
              for i, j in zip(report.pairs.npu.tolist(), report.pairs.bench.tolist()) if i in set(rows.tolist())]
    # x and weight as listed; conv2d's bias (arg 2) and the outputs (Conv2D has no bias added) are left out
    assert paired == [(Role.INPUT, "0", "0"), (Role.INPUT, "1", "1")]
    assert report.verdict("Primitive.conv2d.Conv2D.0.forward").status == "skip"
    (note,) = report.matches.rule_report()["unused"]
    assert note.endswith("Primitive.max_pool.MaxPool -> Functional.max_pool3d "
                         "(no call of 'Functional.max_pool3d' next to a call of 'Primitive.max_pool.MaxPool' "
                         "in the bench run)")


def test_api_mapping_file_orientation(tmp_path):
    path = tmp_path / "names.yaml"
    path.write_text("Primitive.relu.ReLU: Functional.relu\n")
    rules = load_api_mapping(path)
    assert not rules.ms_to_pt  # a plain name table maps npu names to bench names, whatever the frameworks
    ms, pt = _cnn()
    table = match_graphs(ms, pt, [LayerMatcher(), ApiMatcher(rules, name="api"), ExactMatcher()])
    assert pt.nodes.ids[table.npu_to_bench[ms.row("Primitive.relu.ReLU.2.forward")]] == "Functional.relu.2.forward"
