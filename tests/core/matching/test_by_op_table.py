"""Op tables (get_op_map style): op types and parameter names between backends, prefix swaps."""

from __future__ import annotations

from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.mapping_files import load_op_table
from graphcmp.core.matching import ExactMatcher, match_graphs
from graphcmp.core.matching.by_op_table import OpTableMatcher
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.records import Direction, NodeKind, RunInfo
from tests.conftest import DATA
from tests.core.matching.helpers import compare_with, partner


def test_op_table_pairs_module_classes_and_renames_their_parameters(tmp_path):
    # MindSpore's cnn against PyTorch's: module classes as op types, BatchNorm2d's gamma/beta as weight/bias
    ms, pt = read_msprobe(DATA / "mindspore_cnn" / "bench"), read_msprobe(DATA / "pytorch_cnn" / "bench")
    path = tmp_path / "ops.csv"
    path.write_text("npu,bench,op\nDense,Linear\nBatchNorm2d,BatchNorm2d\ngamma,weight,BatchNorm2d\n"
                    "beta,bias,BatchNorm2d\nepsilon,eps,LayerNorm\nConv3d,Conv3d\n")
    report = compare_with(ms, pt, [f"op-map={path}", "exact"])
    assert partner(report, "Cell.fc2.Dense.backward.0") == "Module.fc2.Linear.backward.0"
    assert partner(report, "Cell.bn1.BatchNorm2d.parameters_grad.0") == "Module.bn1.BatchNorm2d.parameters_grad.0"
    rows = set(report.npu.tensor_rows("Cell.bn1.BatchNorm2d.parameters_grad.0").tolist())
    names = {report.npu.tensors.slot[i]: report.bench.tensors.slot[j]
             for i, j in zip(report.pairs.npu.tolist(), report.pairs.bench.tolist()) if i in rows}
    assert names == {"gamma": "weight", "beta": "bias"}
    assert report.verdict("Cell.bn1.BatchNorm2d.parameters_grad.0").status == "pass"
    notes = {n.where.rsplit(":", 1)[1]: (n.matched, n.problem) for n in report.matches.notes}
    # 2 Dense cells x (forward, backward, parameters_grad); gamma on 2 BatchNorm2d forward calls and their 2 grads
    assert notes["2"][0] == 6 and notes["4"] == (4, "")
    assert notes["6"] == (0, "the npu run has no 'LayerNorm' node")
    assert notes["7"] == (0, "the npu run has no op 'Conv3d' (nor 'Conv3d')")


def _run(path: str, *ops: str):
    """A run of backward kernels named as PyTorch 1.5's get_op_map documents them (no such real dump exists)."""
    b = HierarchyBuilder()
    for k, op in enumerate(ops):
        b.add_node(f"{op}.{k}", NodeKind.API, op, Direction.BACKWARD, None, k)
    return b.build(RunInfo(path=path), group_apis=False)


def test_get_op_map_pairs_read_both_ways_and_prefix_swaps(tmp_path):
    path = tmp_path / "ops.json"
    path.write_text('[{"CudnnBatchNormBackward": "NativeBatchNormBackward"}, '
                    '{"CudnnBatchNormBackward": {"epsilon": "eps"}}]')
    npu = _run("npu", "NativeBatchNormBackward", "NpuConvolutionBackward", "AddmmBackward")
    bench = _run("gpu", "CudnnBatchNormBackward", "CudnnConvolutionBackward", "AddmmBackward")
    table = match_graphs(npu, bench, [OpTableMatcher(*load_op_table(path)), ExactMatcher()])
    pairs = {npu.nodes.ids[n]: bench.nodes.ids[b] for n, b in zip(*table.pairs()) if n}
    assert pairs == {"NativeBatchNormBackward.0": "CudnnBatchNormBackward.0",  # the table, read backwards
                     "NpuConvolutionBackward.1": "CudnnConvolutionBackward.1",  # Npu <-> Cudnn prefix swap
                     "AddmmBackward.2": "AddmmBackward.2"}
    assert table.count_by_rule() == {"root": 1, "op-map": 2, "exact": 1}
