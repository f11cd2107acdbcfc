"""Id mappings on real dumps: msprobe cell and data mappings, Model Explorer mappings, conflicts between pins."""

from __future__ import annotations

import json

import numpy as np

from graphcmp.core.readers.msprobe import read_msprobe
from tests.conftest import DATA
from tests.core.matching.helpers import compare_with, partner

FILES = DATA / "mapping_files"


def _cnn(ms: str = "bench"):
    return read_msprobe(DATA / "mindspore_cnn" / ms), read_msprobe(DATA / "pytorch_cnn" / "bench")


def test_msprobe_cell_mapping_pins_every_call_and_reports_the_missing_module():
    ms, pt = _cnn()
    path = FILES / "msprobe_cell_mapping.yaml"  # fc1.Dense: fc1.Linear / conv1.Conv2d: conv3.Conv2d
    report = compare_with(ms, pt, [f"cell-mapping={path}", "exact"])
    assert report.summary()["matched_by_rule"][f"cell-mapping={path}"] == 3
    for call in ("forward.0", "backward.0", "parameters_grad.0"):
        assert partner(report, f"Cell.fc1.Dense.{call}") == f"Module.fc1.Linear.{call}"
    notes = {n.where: (n.matched, n.problem) for n in report.matches.notes}
    assert notes == {f"{path}:1": (3, ""),
                     f"{path}:2": (0, "the bench run has no module 'conv3.Conv2d' with the same calls")}


def test_bare_cell_mapping_renames_cell_to_module_only():
    ms, pt = _cnn()
    report = compare_with(ms, pt, ["cell-mapping", "exact"])
    assert partner(report, "Cell.bn2.BatchNorm2d.backward.0") == "Module.bn2.BatchNorm2d.backward.0"
    assert partner(report, "Cell.fc1.Dense.forward.0") is None  # other class: needs a file or --layer-mapping
    assert report.summary()["matched_by_rule"]["cell-mapping"] == 24


def test_data_mapping_pins_nodes_and_pairs_only_the_named_tensors(tmp_path):
    ms, pt = _cnn()
    path = tmp_path / "dm.yaml"
    path.write_text("Primitive.relu.ReLU.1.forward.input.0: Functional.relu.1.forward.input.0\n"
                    "Primitive.relu.ReLU.1.forward.output.0: Functional.relu.1.forward.output.0\n"
                    "Primitive.relu.ReLU.9.forward.output.0: Functional.relu.9.forward.output.0\n")
    report = compare_with(ms, pt, [f"data-mapping={path}", "exact"])
    assert partner(report, "Primitive.relu.ReLU.1.forward") == "Functional.relu.1.forward"
    rows = report.npu.tensor_rows("Primitive.relu.ReLU.1.forward")
    paired = {report.npu.tensors.slot[i]: report.bench.tensors.slot[j] for i, j in
              zip(report.pairs.npu.tolist(), report.pairs.bench.tolist()) if i in set(rows.tolist())}
    assert paired == {"0": "0"} and np.isin(rows, report.pairs.npu).sum() == 2  # input.0 and output.0
    assert report.verdict("Primitive.relu.ReLU.1.forward").status == "pass"
    assert [(n.matched, n.problem) for n in report.matches.notes] == [
        (1, ""), (1, ""), (0, "the npu run has no node 'Primitive.relu.ReLU.9.forward'")]


def test_model_explorer_mapping_with_a_fused_group_compares_its_boundary(tmp_path):
    # MindSpore's conv2 runs Conv2D then BiasAdd where PyTorch runs conv2d: a many-to-one entry
    path = tmp_path / "me.json"
    path.write_text(json.dumps({"mapping": {"Cell.conv2.Conv2d.forward.0": "Module.conv2.Conv2d.forward.0"},
                                "mappingEntries": [{"leftNodeIds": ["Primitive.conv2d.Conv2D.1.forward",
                                                                    "Primitive.bias_add.BiasAdd.1.forward"],
                                                    "rightNodeIds": ["Functional.conv2d.1.forward"]}]}, indent=1))
    for variant, expected in (("bench", "pass"), ("npu", "error")):
        ms, pt = _cnn(variant)
        report = compare_with(ms, pt, [f"me-mapping={path}", "exact"])
        (group,) = report.matches.groups
        assert group.via == -1 and len(group.npu) == 2
        # boundary: Conv2D's inputs (x, weight) against conv2d's, BiasAdd's output against conv2d's output
        pairs = {(report.npu.nodes.ids[report.npu.tensors.node[i]], report.npu.tensors.slot[i], int(
            report.npu.tensors.role[i])) for i in report.pairs.npu.tolist()}
        assert {("Primitive.conv2d.Conv2D.1.forward", "0", 0), ("Primitive.conv2d.Conv2D.1.forward", "1", 0),
                ("Primitive.bias_add.BiasAdd.1.forward", "0", 1)} <= pairs
        assert report.verdict("Primitive.bias_add.BiasAdd.1.forward").status == expected
        assert report.verdict("Primitive.conv2d.Conv2D.1.forward").status == "skip"  # its output is inside


def test_two_rules_pinning_the_same_node_first_in_the_documented_order_wins(tmp_path):
    ms, pt = _cnn()
    me = tmp_path / "me.json"
    me.write_text('{\n  "Cell.fc1.Dense.forward.0": "Module.fc2.Linear.forward.0"\n}\n')
    cells = FILES / "msprobe_cell_mapping.yaml"
    report = compare_with(ms, pt, [f"cell-mapping={cells}", f"me-mapping={me}", "exact"])  # any order given
    assert partner(report, "Cell.fc1.Dense.forward.0") == "Module.fc2.Linear.forward.0"  # me-mapping goes first
    assert report.matches.conflicts == (
        f"{cells}:1: fc1.Dense -> fc1.Linear: wants 'Cell.fc1.Dense.forward.0' <-> 'Module.fc1.Linear.forward.0', "
        f"but npu 'Cell.fc1.Dense.forward.0' is already matched to 'Module.fc2.Linear.forward.0' by "
        f"me-mapping={me} ({me}:2); the earlier rule wins",)
