"""The viewer over an Ascend raw dump compared with golden data: op scopes, both runs' tensors, overflow."""

from __future__ import annotations

from graphcmp.app.details import details_panel
from graphcmp.app.model import ViewModel
from graphcmp.core.compare import compare_graphs
from graphcmp.core.readers.ascend_golden import read_npu_and_golden
from graphcmp.core.tensorcmp import tensor_metrics_for
from tests.app.test_details import _texts
from tests.conftest import DATA

CASE = DATA / "ascend_mlp" / "overflow"


def test_details_of_the_overflowing_fused_op():
    npu, bench = read_npu_and_golden(CASE / "npu_dump", CASE / "golden", CASE / "fusion_rule" / "mlp.json")
    report = compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))
    model = ViewModel(report)
    row = report.npu.row("mlp/fc2/MatMul")
    text = "\n".join(_texts(details_panel(model, {"npu": row, "bench": int(report.matches.npu_to_bench[row])})))
    assert "overflow on npu: critical" in text
    assert "MatMulV2.mlp_fc2_MatMul.4.1741200000000120#output.0" in text  # the tensor inside the dump file
    assert "mlp_fc2_BiasAdd.0." in text  # its golden twin: the last original op of the fused MatMul
    assert "cosine" in text and "rmse" in text
