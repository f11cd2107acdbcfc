"""MindSpore synchronous dumps: raw .bin files per kernel tensor, names carrying shape, dtype and format."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from graphcmp.core.compare import compare_graphs
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers.detect import detect_format
from graphcmp.core.readers.mindspore_sync import (
    parse_host_shapes,
    read_bin_tensor,
    read_execution_order,
    read_mindspore_sync,
)
from graphcmp.core.records import Role
from graphcmp.core.tensorcmp import tensor_metrics_for
from graphcmp.core.tensorio import read_tensor
from tests.data.mindspore_sync_ir import make_case

OPS = ("Default/fc1-Dense/MatMul-op3", "Default/relu-ReLU/ReLU-op5", "Default/fc2-Dense/MatMul-op7")


def _write(folder, name, role, index, array, dtype="Float32", fmt="DefaultFormat"):
    dims = "_".join(map(str, array.shape))
    path = folder / f"{name.replace('/', '--')}_{role}_{index}_shape_{dims}_{dtype}_{fmt}.bin"
    array.tofile(path)
    return path


def _dump(root, scale: float, dtype: str):
    """A 2-layer MLP run (fc2's weight scaled by `scale`) written as MindSpore 1.1 writes a synchronous dump."""
    folder = root / "net" / "0" / "iteration_0"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(3)
    x, w1, w2 = rng.standard_normal((4, 8)), rng.standard_normal((8, 8)) * 0.3, rng.standard_normal((8, 4)) * 0.3
    cast = np.float16 if dtype == "Float16" else np.float32
    h = (x @ w1).astype(cast)
    r = np.maximum(h, 0)
    y = (r.astype(np.float32) @ (w2 * np.array([scale, 1, 1, 1]))).astype(cast)
    for op, ins, outs in ((OPS[0], [x.astype(cast)], [h]), (OPS[1], [h], [r]), (OPS[2], [r], [y])):
        for k, a in enumerate(ins):
            _write(folder, op, "input", k, a, dtype)
        for k, a in enumerate(outs):
            _write(folder, op, "output", k, a, dtype)
    return folder


def test_a_synchronous_dump_is_read(tmp_path):
    _dump(tmp_path / "npu", 1.0, "Float16")
    assert detect_format(tmp_path / "npu") == "mindspore_sync"
    graph = read_mindspore_sync(tmp_path / "npu")
    assert (graph.info.step, graph.info.rank, graph.info.task) == (0, 0, "tensor")
    assert graph.nodes.parent[graph.row(OPS[0])] == graph.row("Default/fc1-Dense")
    assert graph.nodes.op[graph.row(OPS[1])] == "ReLU"
    t = graph.tensors
    row = next(k for k in range(len(t.slot)) if graph.nodes.ids[t.node[k]] == OPS[1] and t.role[k] == Role.OUTPUT)
    assert t.dtype[row] == "float16" and t.shape[row] == "[4, 8]" and t.stats[row][1] == 0.0


def test_first_divergence_against_a_float32_run(tmp_path):
    npu = read_mindspore_sync(_dump(tmp_path / "npu", 1.5, "Float16").parents[2])
    bench = read_mindspore_sync(_dump(tmp_path / "bench", 1.0, "Float32").parents[2])
    report = compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))
    assert report.analysis().first.node == OPS[2]


def test_device_format_keeps_its_device_shape_and_short_file_is_refused(tmp_path):
    folder = tmp_path / "iteration_3"
    folder.mkdir()
    path = _write(folder, "Default/conv-Conv2d/Conv2D-op2", "output", 0, np.ones((1, 1, 2, 2, 16), np.float16),
                  "Float16", "NC1HWC0")
    graph = read_mindspore_sync(tmp_path)
    assert graph.info.step == 3
    assert dict(graph.nodes.attrs[graph.row("Default/conv-Conv2d/Conv2D-op2")])["layout"].startswith("device format")
    assert read_bin_tensor(path).shape == (1, 1, 2, 2, 16)
    path.write_bytes(path.read_bytes()[:10])
    with pytest.raises(DumpFormatError, match="holds 10 bytes"):
        read_bin_tensor(path)


# --- device formats turned back with the kernel graph IR beside the dump (tests/data/mindspore_sync_ir) -----------

CASE = Path(__file__).resolve().parents[2] / "data" / "mindspore_sync_ir"
CONV = "Default/network-WithLossCell/_backbone-Net/conv1-Conv2d/Conv2D-op12"
RELU = "Default/network-WithLossCell/_backbone-Net/ReLU-op15"


def _rows(graph, op):
    t = graph.tensors
    return {(Role(int(t.role[k])).name.lower(), t.slot[k]): k for k in range(len(t.slot))
            if graph.nodes.ids[t.node[k]] == op}


def _encode_nc1hwc0(x, c0=16):
    """Independent of graphcmp: pad the channels to whole blocks of C0, element by element."""
    n, c, h, w = x.shape
    out = np.zeros((n, -(-c // c0), h, w, c0), x.dtype)
    for index in np.ndindex(x.shape):
        b, ch, i, j = index
        out[b, ch // c0, i, j, ch % c0] = x[index]
    return out


def test_a_device_format_dump_is_read_in_the_host_shape_of_its_ir():
    graph = read_mindspore_sync(CASE / "npu")
    tensors = make_case.tensors()
    t = graph.tensors
    rows = _rows(graph, CONV)
    assert t.shape[rows[("input", "0")]] == "[2, 20, 3, 3]" and t.shape[rows[("input", "1")]] == "[5, 20, 1, 1]"
    assert t.shape[rows[("output", "0")]] == "[2, 5, 3, 3]"
    for (role, slot), key in {("input", "0"): "x", ("input", "1"): "w", ("output", "0"): "y"}.items():
        k = rows[(role, slot)]
        expected = tensors[key].astype(np.float16)
        assert t.file[k].endswith("#host=" + ",".join(map(str, expected.shape)))
        got = read_tensor(graph.info.path + "/" + t.file[k])
        assert got.shape == expected.shape and np.array_equal(got, expected)
        # statistics of the host tensor: the padding of the device blocks left out (zeros would move min and mean)
        np.testing.assert_allclose(t.stats[k][:3], [expected.max(), expected.min(), expected.astype(np.float64).mean()],
                                   rtol=1e-6)
    assert dict(graph.nodes.attrs[graph.row(CONV)])["layout"].startswith("device format turned back")
    assert not graph.info.missing


def test_round_trip_nchw_to_nc1hwc0_bin_and_back(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 35, 2, 5)).astype(np.float16)
    device = _encode_nc1hwc0(x)
    folder = tmp_path / "net" / "device_2" / "iteration_4"
    folder.mkdir(parents=True)
    path = _write(folder, "Default/Add-op3", "output", 0, device, "Float16", "NC1HWC0")
    assert read_bin_tensor(path).shape == (3, 3, 2, 5, 16)
    back = read_bin_tensor(path, x.shape)
    assert back.dtype == np.float16 and np.array_equal(back, x)
    (folder.parent / "graphs").mkdir()
    (folder.parent / "graphs" / "ms_output_trace_code_graph_3.ir").write_text(
        "subgraph @kernel_graph_3.1() {\n  %0(x) = Add(%para1_a, %para2_b)\n"
        "      : (<Tensor[Float16]x[const vector][3, 35, 2, 5]>, <Tensor[Float16]x[const vector][35]>) -> "
        "(<Tensor[Float16]x[const vector][3, 35, 2, 5]>)\n      : (Default/Add-op3)\n}\n")
    graph = read_mindspore_sync(tmp_path)
    assert (graph.info.rank, graph.info.step) == (2, 4)
    k = _rows(graph, "Default/Add-op3")[("output", "0")]
    assert graph.tensors.shape[k] == "[3, 35, 2, 5]"
    assert np.array_equal(read_tensor(f"{folder}/{graph.tensors.file[k]}"), x)


def test_without_the_ir_a_device_format_keeps_its_device_shape_and_the_run_says_which_file(tmp_path):
    shutil.copytree(CASE / "npu", tmp_path / "npu")
    shutil.rmtree(tmp_path / "npu" / "net" / "device_0" / "graphs")
    graph = read_mindspore_sync(tmp_path / "npu")
    rows = _rows(graph, CONV)
    assert graph.tensors.shape[rows[("input", "1")]] == "[2, 1, 16, 16]"
    (note,) = graph.info.missing
    assert note.startswith("5 tensor(s) in a device format keep their device shape, their host shape not found")
    assert "ms_output_trace_code_graph_*.ir" in note
    assert note.endswith("Conv2D-op12_input_0_shape_2_2_3_3_16_Float16_NC1HWC0.bin")
    assert dict(graph.nodes.attrs[graph.row(CONV)])["layout"].startswith("device format kept")


def test_an_ir_whose_device_shape_differs_from_the_file_is_not_used(tmp_path):
    shutil.copytree(CASE / "npu", tmp_path / "npu")
    ir = tmp_path / "npu" / "net" / "device_0" / "graphs" / "ms_output_trace_code_graph_0.ir"
    ir.write_text(ir.read_text().replace("<Float16xFracZ[const vector][2, 1, 16, 16]>",
                                         "<Float16xFracZ[const vector][2, 2, 16, 16]>"))
    graph = read_mindspore_sync(tmp_path / "npu")
    rows = _rows(graph, CONV)
    assert graph.tensors.shape[rows[("input", "1")]] == "[2, 1, 16, 16]"
    assert graph.tensors.shape[rows[("input", "0")]] == "[2, 20, 3, 3]"
    assert graph.info.missing[0].startswith("1 tensor(s)")


def test_a_host_shape_that_does_not_fit_and_a_format_without_inverse_keep_the_device_shape(tmp_path):
    shutil.copytree(CASE / "npu", tmp_path / "npu")
    ir = tmp_path / "npu" / "net" / "device_0" / "graphs" / "ms_output_trace_code_graph_0.ir"
    ir.write_text(ir.read_text().replace("-> (<Tensor[Float16]x[const vector][2, 5, 3, 3]>)\n      : (<Float16xNC1",
                                         "-> (<Tensor[Float16]x[const vector][2, 40, 3, 3]>)\n      : (<Float16xNC1",
                                         1))  # 40 channels do not fit one block of 16
    folder = tmp_path / "npu" / "net" / "device_0" / "iteration_0"
    _write(folder, "Default/lstm-LSTM/DynamicRNN-op30", "input", 0, np.ones((1, 2, 16, 16), np.float16), "Float16",
           "FRACTAL_ZN_LSTM")
    graph = read_mindspore_sync(tmp_path / "npu")
    rows = _rows(graph, CONV)
    assert graph.tensors.shape[rows[("output", "0")]] == "[2, 1, 3, 3, 16]"
    assert graph.tensors.shape[rows[("input", "0")]] == "[2, 20, 3, 3]"
    lost, other = graph.info.missing
    assert lost.startswith("1 tensor(s) in a device format keep their device shape, their host shape not found or "
                           "not fitting") and lost.endswith("Conv2D-op12_output_0_shape_2_1_3_3_16_Float16_NC1HWC0.bin")
    assert other.startswith("1 tensor(s) in a device format graphcmp does not turn back (FRACTAL_ZN_LSTM)")
    assert graph.tensors.shape[_rows(graph, "Default/lstm-LSTM/DynamicRNN-op30")[("input", "0")]] == "[1, 2, 16, 16]"


def test_the_execution_order_csv_orders_the_kernels(tmp_path):
    shutil.copytree(CASE / "npu", tmp_path / "npu")
    csv = tmp_path / "npu" / "net" / "device_0" / "execution_order" / "ms_execution_order_graph_0.csv"
    csv.write_text(f"NodeExecutionOrder-FullNameWithScope\n{RELU}\n{CONV}\n")
    graph = read_mindspore_sync(tmp_path / "npu")
    order = {op: int(dict(graph.nodes.attrs[graph.row(op)])["exec_order"]) for op in (CONV, RELU)}
    assert order[RELU] < order[CONV]
    assert read_execution_order(CASE / "npu" / "net" / "device_0") == {CONV: 0, RELU: 1, make_case.FLAT: 2}


def test_device_format_npu_against_a_host_layout_bench_agrees():
    assert detect_format(CASE / "npu") == "mindspore_sync"
    npu, bench = read_mindspore_sync(CASE / "npu"), read_mindspore_sync(CASE / "bench")
    report = compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))
    assert report.analysis().first is None
    assert report.summary()["outcome"]["verdict"] == "agree" and report.summary()["tensor_pairs"] == 7
    cosine = report.pairs.metrics["cosine"]
    assert len(cosine) == 7 and (cosine > 1 - 1e-6).all()  # fp16 rounding only: the layouts were undone


def test_parse_host_shapes_reads_tuple_outputs_as_unknown_and_the_return_apart():
    text = ("  %3(x) = Split(%2)\n      : (<Tensor[Float32]x[const vector][4, 6]>) -> "
            "(<Tuple[Tensor[Float32]*2]>)\n      : (<Float32xDefaultFormat[const vector][4, 6]>) -> "
            "(<Float32xDefaultFormat[const vector][4, 3]>, <Float32xDefaultFormat[const vector][4, 3]>)\n"
            "      : (Default/Split-op4)\n  Return(%3)\n      : (<Tuple[Tensor[Float32]*2]>)\n"
            "      : (Default/Return-op5)\n")
    found = parse_host_shapes(text)
    assert found.shapes == {("Default/Split-op4", Role.INPUT, 0): (4, 6)}
    assert found.device[("Default/Split-op4", Role.OUTPUT, 1)] == (4, 3)


@pytest.mark.parametrize("index", ["1", "I64(1)"])
def test_a_tuple_output_takes_the_host_shape_of_the_tuple_getitem_reading_it(index):
    text = ("subgraph @kernel_graph_0() {\n"
            "  %3(x) = BNTrainingUpdate(%2)\n      : (<Tensor[Float32]x[const vector][4, 6, 2, 2]>) -> "
            "(<Tuple[Tensor[Float32]*2]>)\n      : (<Float32xNC1HWC0[const vector][4, 1, 2, 2, 16]>) -> "
            "(<Float32xNC1HWC0[const vector][4, 1, 2, 2, 16]>, <Float32xNC1HWC0[const vector][1, 1, 1, 1, 16]>)\n"
            "      : (Default/bn-BatchNorm2d/BNTrainingUpdate-op4)\n"
            f"  %4([CNode]9) = TupleGetItem(%3, {index})\n"
            "      : (<Tuple[Tensor[Float32]*2]>, <Int64>) -> (<Tensor[Float32]x[const vector][6]>)\n"
            "      : (Default/bn-BatchNorm2d/tuple_getitem-op5)\n}\n"
            "subgraph @other_graph() {\n  %3(y) = ReLU(%1)\n      : (Default/ReLU-op8)\n"
            "  %4(z) = TupleGetItem(%3, 0)\n      : (<Tuple[Tensor[Float32]*2]>, <Int64>) -> "
            "(<Tensor[Float32]x[const vector][9]>)\n      : (Default/tuple_getitem-op9)\n}\n")
    found = parse_host_shapes(text)
    bn = "Default/bn-BatchNorm2d/BNTrainingUpdate-op4"
    assert found.shapes[(bn, Role.OUTPUT, 1)] == (6,) and (bn, Role.OUTPUT, 0) not in found.shapes
    assert found.shapes[("Default/ReLU-op8", Role.OUTPUT, 0)] == (9,)  # %3 of its own subgraph, not the BN
