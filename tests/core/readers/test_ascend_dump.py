"""Ascend raw dump files and folders, Opdebug overflow files, golden folders and the fusion rule."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers.ascend_dump import find_iterations, read_ascend_dump, sniff
from graphcmp.core.readers.ascend_file import decode_header, parse_dump_name, read_dump_tensor, read_header
from graphcmp.core.readers.ascend_fusion import read_fusion_rule
from graphcmp.core.readers.ascend_golden import read_golden, read_golden_for, read_npu_and_golden
from graphcmp.core.readers.detect import detect_format
from graphcmp.core.readers.opdebug import decode_opdebug, read_opdebug
from graphcmp.core.readers.proto_gen import dump_data_pb2
from graphcmp.core.records import Role
from tests.conftest import DATA, shared
from tests.data.ascend_mlp.make_ascend_cases import bf16_value, golden, npu_ops, opdebug_new, weights

MLP = DATA / "ascend_mlp"
GE_RUN = "npu_dump/20250306101500/0/mlp/1/0"
MS_RUN = "npu_dump/0/mlp_graph_0/0/0"


def _file(case: str, run: str, prefix: str):
    return next((MLP / case / run).glob(prefix + "*"))


def _tensor(graph, node, role, slot):
    t = graph.tensors
    rows = [k for k in range(len(t.slot)) if graph.nodes.ids[t.node[k]] == node and t.role[k] == role
            and t.slot[k] == slot]
    assert len(rows) == 1
    return rows[0]


# --- one file -------------------------------------------------------------------------------------------

def test_names_of_both_dump_layouts():
    ge = parse_dump_name("MatMulV2.mlp_fc2_MatMul.4.0.1741200000000120")
    ms = parse_dump_name("MatMulV2.mlp_fc2_MatMul.4.1741200000000120")
    assert (ge.task_id, ge.stream_id, ge.timestamp) == (4, 0, 1741200000000120)
    assert (ms.task_id, ms.stream_id) == (4, -1)
    assert parse_dump_name("mlp_fc2_MatMul.0.1741199999990040.npy") is None


def test_header_offsets_and_bytes_of_the_binary_layout():
    path = _file("clean", GE_RUN, "MatMulV2.mlp_fc2")
    header = read_header(path)
    assert header.layout == "binary" and header.op_name == "mlp/fc2/MatMul"
    assert header.payload == header.declared == sum(t.size for t in header.tensors)
    _, outputs = npu_ops("clean")[0][2][2:4]
    fc2 = outputs[0]
    assert [t.origin_name for t in header.tensors if t.role == "output"] == ["mlp/fc2/BiasAdd"]
    # the output is FRACTAL_NZ on the device: read back in its (4, 16) host layout, padding cut
    array = read_dump_tensor(path, "output", 0)
    assert array.shape == (4, 16) and array.dtype == np.float16
    assert fc2["shape"] == [1, 1, 16, 16]
    after_transdata = read_dump_tensor(_file("clean", GE_RUN, "TransData"), "output", 0)
    assert np.array_equal(array, after_transdata)


def test_whole_protobuf_layout_is_read():
    path = _file("clean", GE_RUN, "Cast.trans_Cast_0")
    header = read_header(path)
    assert header.layout == "protobuf"
    x = weights("clean")[0]
    assert np.array_equal(read_dump_tensor(path, "input", 0), x)
    assert np.array_equal(read_dump_tensor(path, "output", 0), x.astype(np.float16))


def test_tensor_with_device_address_0_is_noted_not_misread():
    path = _file("clean", GE_RUN, "ArgMaxV2")
    header = read_header(path)
    axis = header.tensors[1]
    assert axis.offset == -1 and "address 0" in axis.skipped
    assert header.declared == header.payload + axis.size
    with pytest.raises(DumpFormatError, match="input 1 holds no data"):
        read_dump_tensor(path, "input", 1)
    graph = read_ascend_dump(MLP / "clean" / GE_RUN)
    expected = golden(*weights("clean"))["mlp/ArgMax"]
    assert np.array_equal(read_dump_tensor(path, "output", 0), expected)  # the bytes after the gap: not shifted
    row = graph.row("mlp/ArgMax")
    assert "input 1 (device address 0" in dict(graph.nodes.attrs[row])["skipped"]
    assert graph.tensors.file[_tensor(graph, "mlp/ArgMax", Role.INPUT, "1")] == ""


def test_bfloat16_and_int32_tensors():
    path = _file("clean", GE_RUN, "Mul.mlp_scale")
    out = read_dump_tensor(path, "output", 0)
    assert out.dtype == np.float32 and out.shape == (4, 16)
    gold = golden(*weights("clean"))["mlp/scale/Mul"]
    assert np.array_equal(out, bf16_value(out))  # exactly representable in bf16: decoded, not rounded again
    assert np.max(np.abs(out - gold)) < 2.5 * 2 ** -8 * 2  # bf16 rounding of a value below 2.5 (two roundings)


def test_garbage_named_like_a_dump_is_refused(tmp_path):
    bad = tmp_path / "Conv2D.conv.3.0.1741200000000000"
    bad.write_bytes(struct.pack("<Q", 10**9) + b"\x01\x02\x03")
    with pytest.raises(DumpFormatError, match=r"Conv2D\.conv\.3\.0\.1741200000000000: not an Ascend dump file"):
        read_header(bad)


def test_header_length_past_the_end_falls_back_to_whole_message():
    message = dump_data_pb2.DumpData(version="2.0", op_name="relu")
    out = message.output.add(data_type=1, format=2, data=np.arange(3, dtype=np.float32).tobytes())
    out.shape.dim.extend([3])
    header = decode_header(message.SerializeToString())
    assert header.layout == "protobuf" and header.tensors[0].shape == (3,)


# --- folders --------------------------------------------------------------------------------------------

def test_ge_folder_steps_ranks_and_scopes():
    assert sniff(MLP / "clean" / "npu_dump") and detect_format(MLP / "clean" / "npu_dump") == "ascend_dump"
    graph = read_ascend_dump(MLP / "clean" / "npu_dump")  # found four levels down
    assert (graph.info.step, graph.info.rank, graph.info.task) == (0, 0, "tensor")
    assert graph.info.path.endswith(GE_RUN)
    leaves = [i for i in graph.nodes.ids if graph.nodes.has_data[graph.row(i)]]
    tasks = [int(dict(graph.nodes.attrs[graph.row(i)])["task_id"]) for i in leaves]
    assert sorted(zip(tasks, leaves))[:4] == [(2, "trans_Cast_0"), (3, "mlp/fc1/MatMul"), (4, "mlp/fc2/MatMul"),
                                              (5, "trans_TransData_1")]
    assert graph.nodes.parent[graph.row("mlp/fc2/MatMul")] == graph.row("mlp/fc2")
    assert graph.nodes.parent[graph.row("mlp/fc2")] == graph.row("mlp")
    # statistics are of the host layout: the padding of FRACTAL_NZ does not count
    fc2 = graph.tensors.stats[_tensor(graph, "mlp/fc2/MatMul", Role.OUTPUT, "0")]
    host = read_dump_tensor(_file("clean", GE_RUN, "MatMulV2.mlp_fc2"), "output", 0).astype(np.float64)
    assert np.allclose(fc2, [host.max(), host.min(), host.mean(), np.linalg.norm(host)])


def test_later_iterations_are_noted(tmp_path):
    import shutil

    root = tmp_path / "dump" / "20250306101500" / "0" / "mlp" / "1"
    shutil.copytree(MLP / "clean" / GE_RUN, root / "0")
    shutil.copytree(MLP / "bug" / GE_RUN, root / "1")
    assert [p.name for p in find_iterations(tmp_path / "dump")] == ["0", "1"]
    graph = read_ascend_dump(tmp_path / "dump")
    assert graph.info.step == 0 and any("1 later iteration(s) not read" in n for n in graph.info.missing)


def test_statistics_mode_csv():
    graph = read_ascend_dump(MLP / "stats" / GE_RUN)
    assert graph.info.task == "statistics"
    row = _tensor(graph, "mlp_fc1_MatMul", Role.OUTPUT, "0")
    fc1 = npu_ops("clean")[0][1][4][1][0].astype(np.float64)
    assert np.allclose(graph.tensors.stats[row][:3], [fc1.max(), fc1.min(), fc1.mean()])
    assert not graph.tensors.present[row][3]  # no norm in a statistics dump
    assert graph.tensors.shape[row] == "[4, 24]"


# --- overflow -------------------------------------------------------------------------------------------

def test_opdebug_new_layout_tied_by_task_id_in_a_mindspore_folder():
    records = read_opdebug(_file("overflow", MS_RUN, "Opdebug"))
    assert [(r.block, r.task_id, r.stream_id, r.status) for r in records] == [("AIC", 4, 0, 0x20)]
    graph = read_ascend_dump(MLP / "overflow" / "npu_dump")
    assert (graph.info.step, graph.info.rank) == (0, 0)
    attrs = dict(graph.nodes.attrs[graph.row("mlp/fc2/MatMul")])
    assert attrs["overflow"] == "AIC status 0x20 (float overflow)"
    assert "Opdebug" not in " ".join(graph.nodes.ids)


def test_opdebug_zero_status_and_short_data():
    assert decode_opdebug(bytes(2048)) == []
    assert decode_opdebug(opdebug_new(7, 1, 0)) == []
    with pytest.raises(DumpFormatError, match="expected 2048"):
        decode_opdebug(bytes(100), source="x")


@pytest.mark.shared
def test_shared_opdebug_old_layout_names_the_conv():
    run = shared("ascend/C_cnn_overflow/npu_dump/20250305103045/0/cnn_small/1/0")
    records = read_opdebug(next(run.glob("Opdebug.*")))
    assert [(r.block, r.task_id, r.stream_id, r.status) for r in records] == [("AI Core", 10, 0, 0x20)]
    graph = read_ascend_dump(run)
    assert "0x20 (float overflow)" in dict(graph.nodes.attrs[graph.row("/conv4/Conv/relu4/Relu")])["overflow"]


@pytest.mark.shared
def test_writer_layout_equals_the_shared_files_byte_for_byte():
    """Our writer's layout (length, header, inputs then outputs) rebuilds every shared dump file exactly."""
    run = shared("ascend/A_cnn_bug/npu_dump/20250305101530/0/cnn_small/1/0")
    for path in sorted(run.iterdir()):
        data = path.read_bytes()
        (length,) = struct.unpack_from("<Q", data)
        message = dump_data_pb2.DumpData.FromString(data[8:8 + length])
        header = read_header(path)
        raw = b"".join(data[t.offset:t.offset + t.size] for t in header.tensors)
        body = message.SerializeToString()
        assert struct.pack("<Q", len(body)) + body + raw == data, path.name


@pytest.mark.shared
def test_shared_tensors_in_host_layout_match_their_golden_shapes():
    case = shared("ascend/A_cnn_bug")
    npu, bench = read_npu_and_golden(case / "npu_dump/20250305101530/0/cnn_small/1/0", case / "golden",
                                     case / "fusion_rule/cnn_small.json")
    row = _tensor(npu, "/layer1/conv2/Conv", Role.OUTPUT, "0")
    assert npu.tensors.shape[row] == "[1, 16, 16, 16]" and npu.tensors.dtype[row] == "float16"
    golden_row = _tensor(bench, "/layer1/conv2/Conv", Role.OUTPUT, "0")
    assert bench.tensors.file[golden_row].startswith("_layer1_bn2_BatchNormalization.0.")
    # the fc input is the global average pool's golden output (the Flatten ATC removed), read as [1, 32]
    fc_in = _tensor(bench, "/fc/Gemm", Role.INPUT, "0")
    assert bench.tensors.file[fc_in].endswith("#shape=1,32") and bench.tensors.shape[fc_in] == "[1, 32]"


# --- golden data and the fusion rule --------------------------------------------------------------------

def test_fusion_rule_traces_inputs_through_cast_and_transdata():
    rule = read_fusion_rule(MLP / "clean" / "fusion_rule" / "mlp.json")
    assert rule.output_origin("mlp/fc1/MatMul", 0) == ("mlp/fc1/Relu", 0)
    assert rule.input_origin("mlp/fc1/MatMul", 0) == ("x", 0)  # through trans_Cast_0
    assert rule.input_origin("mlp/Softmax", 0) == ("mlp/fc2/BiasAdd", 0)  # through trans_TransData_1
    assert rule.input_origin("mlp/fc2/MatMul", 1) == ("mlp/fc2/w", 0)  # a weight: its own name, no golden file
    assert rule.input_origin("mlp/fc2/MatMul", 3) is None  # the control edge is not an input
    assert rule.original_names("mlp/fc2/MatMul") == ("mlp/fc2/MatMul", "mlp/fc2/BiasAdd")


def test_golden_laid_out_as_the_npu_ran():
    npu = read_ascend_dump(MLP / "clean" / GE_RUN)
    rule = read_fusion_rule(MLP / "clean" / "fusion_rule" / "mlp.json")
    bench = read_golden_for(MLP / "clean" / "golden", npu, rule)
    assert set(bench.nodes.ids) <= set(npu.nodes.ids)
    files = {(bench.nodes.ids[n], r, s): f for n, r, s, f in zip(bench.tensors.node, bench.tensors.role,
                                                                  bench.tensors.slot, bench.tensors.file)}
    assert files[("mlp/fc2/MatMul", Role.OUTPUT, "0")].startswith("mlp_fc2_BiasAdd.0.")  # one-to-many: the last
    assert files[("mlp/fc2/MatMul", Role.INPUT, "0")].startswith("mlp_fc1_Relu.0.")
    assert files[("trans_TransData_1", Role.OUTPUT, "0")].startswith("mlp_fc2_BiasAdd.0.")  # many-to-one
    assert ("mlp/fc2/MatMul", Role.INPUT, "1") not in files  # the weight has no golden tensor
    row = bench.row("mlp/fc2/MatMul")
    assert dict(bench.nodes.attrs[row])["original_op_names"] == "mlp/fc2/MatMul,mlp/fc2/BiasAdd"


def test_golden_without_rule_uses_the_dump_headers_origins():
    npu = read_ascend_dump(MLP / "clean" / GE_RUN)
    bench = read_golden_for(MLP / "clean" / "golden", npu)
    assert not (bench.tensors.role == Role.INPUT).any()
    assert _tensor(bench, "mlp/fc1/MatMul", Role.OUTPUT, "0") >= 0


def test_golden_folder_alone():
    assert detect_format(MLP / "clean" / "golden") == "ascend_golden"
    graph = read_golden(MLP / "clean" / "golden")
    assert graph.nodes.ids[1:4] == ("x", "mlp_fc1_MatMul", "mlp_fc1_BiasAdd")  # in timestamp order


def test_golden_that_fits_no_op_is_an_error(tmp_path):
    np.save(tmp_path / "other.0.1741199999990000.npy", np.zeros(3, np.float32))
    npu = read_ascend_dump(MLP / "clean" / GE_RUN)
    with pytest.raises(DumpFormatError, match="no golden file stands for an output"):
        read_golden_for(tmp_path, npu)


@pytest.mark.shared
def test_nhwc_golden_is_read_in_the_npus_nchw(tmp_path):
    """A TensorFlow-style golden tensor (NHWC) against the NPU's NCHW: permuted, not reshaped (msaccucmp's swap)."""
    import shutil

    from graphcmp.core.compare import compare_graphs
    from graphcmp.core.tensorcmp import tensor_metrics_for

    case = shared("ascend/A_cnn_bug")
    golden = tmp_path / "golden"
    shutil.copytree(case / "golden", golden)
    relu4 = next(golden.glob("_relu4_Relu.0.*.npy"))
    np.save(relu4, np.load(relu4).transpose(0, 2, 3, 1))  # [1, 32, 8, 8] -> [1, 8, 8, 32]
    npu, bench = read_npu_and_golden(case / "npu_dump/20250305101530/0/cnn_small/1/0", golden,
                                     case / "fusion_rule/cnn_small.json")
    row = _tensor(bench, "/conv4/Conv/relu4/Relu", Role.OUTPUT, "0")
    assert bench.tensors.file[row].endswith("#perm=0,3,1,2") and bench.tensors.shape[row] == "[1, 32, 8, 8]"
    report = compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))
    k = list(report.pairs.bench).index(row)
    assert round(float(report.pairs.metrics["cosine"][k]), 6) == 0.995305  # msaccucmp's value, as in NCHW


def test_hashed_file_names_through_mapping_csv(tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(MLP / "clean" / GE_RUN, run)
    long = _file("clean", GE_RUN, "SoftmaxV2").name
    (run / long).rename(run / "7219834650")
    (run / "mapping.csv").write_text(f"7219834650,{long}\n")
    graph = read_ascend_dump(run)
    assert "mlp/Softmax" in graph and dict(graph.nodes.attrs[graph.row("mlp/Softmax")])["dump_file"] == "7219834650"
    row = _tensor(graph, "mlp/Softmax", Role.OUTPUT, "0")
    assert graph.tensors.file[row] == "7219834650#output.0"


def test_a_file_cut_short_makes_the_run_incomplete(tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(MLP / "clean" / GE_RUN, run)
    path = run / _file("clean", GE_RUN, "SoftmaxV2").name
    path.write_bytes(path.read_bytes()[:-10])
    graph = read_ascend_dump(run)
    assert any(note.startswith(f"{path.name}: cut short, output 0 not read") for note in graph.info.missing)
    assert graph.tensors.file[_tensor(graph, "mlp/Softmax", Role.OUTPUT, "0")] == ""
    assert graph.tensors.file[_tensor(graph, "mlp/Softmax", Role.INPUT, "0")].endswith("#input.0")


def test_an_op_dumped_twice_keeps_its_last_file_and_its_overflow(tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(MLP / "overflow" / MS_RUN, run)
    fc2 = _file("overflow", MS_RUN, "MatMulV2.mlp_fc2")
    shutil.copy(fc2, run / "MatMulV2.mlp_fc2_MatMul.11.1741200000000400")  # the same op again, later, task 11
    graph = read_ascend_dump(run)
    attrs = dict(graph.nodes.attrs[graph.row("mlp/fc2/MatMul")])
    assert attrs["dump_file"].endswith(".11.1741200000000400") and attrs["dump_files"].startswith("2 files")
    assert "0x20" in attrs["overflow"]  # the Opdebug record names task 4, the earlier file of the same op
    assert not graph.info.missing


# --- statistics and threads -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int16, np.int64, np.bool_, np.complex64])
def test_tensor_stats_of_several_blocks_match_float64_numpy(dtype, monkeypatch):
    import graphcmp.core.readers.ascend_dump as module

    monkeypatch.setattr(module, "STATS_BLOCK", 1000)  # many blocks, the last one short
    rng = np.random.default_rng(3)
    values = (rng.standard_normal(10_500) * 50).astype(dtype)
    stats, present = module.tensor_stats(values.reshape(21, 500))
    exact = np.real(values).astype(np.float64)
    expected = [exact.max(), exact.min(), exact.mean(), np.sqrt((exact * exact).sum())]
    np.testing.assert_allclose(stats, expected, rtol=1e-6, atol=1e-6)
    assert present.all()


def test_tensor_stats_nan_and_inf_as_numpy_and_empty(monkeypatch):
    import graphcmp.core.readers.ascend_dump as module

    monkeypatch.setattr(module, "STATS_BLOCK", 4)
    values = np.array([1, 2, 3, 4, 5, -np.inf, 7, 8, 9], np.float16)
    assert module.tensor_stats(values)[0].tolist() == [9.0, -np.inf, -np.inf, np.inf]
    values[8] = np.nan
    assert np.isnan(module.tensor_stats(values)[0]).all()
    stats, present = module.tensor_stats(np.zeros((0, 3), np.float16))
    assert np.isnan(stats).all() and not present.any()


def test_threads_read_the_ops_as_one_thread_does(tmp_path, monkeypatch):
    import graphcmp.core.readers.ascend_dump as module

    run = MLP / "clean" / GE_RUN
    monkeypatch.setattr(module, "read_workers", lambda: 1)
    one = read_ascend_dump(run)
    monkeypatch.setattr(module, "read_workers", lambda: 3)
    three = read_ascend_dump(run)
    assert one.nodes.ids == three.nodes.ids and one.tensors.file == three.tensors.file
    np.testing.assert_array_equal(one.tensors.stats, three.tensors.stats)
    assert one.info.missing == three.info.missing


@pytest.mark.parametrize("folder", ["A_cnn_bug", "C_cnn_overflow", "mlp"])
def test_statistics_of_the_device_bytes_are_those_of_the_host_tensor(folder):
    from graphcmp.core.readers.ascend_dump import elements_stats, tensor_stats
    from graphcmp.core.readers.ascend_file import read_dump_elements

    root = MLP if folder == "mlp" else shared(f"ascend/{folder}/npu_dump")
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and parse_dump_name(p.name)
             and not p.name.startswith("Opdebug")]
    formats = set()
    for path in files:
        for t in read_header(path).tensors:
            if t.offset < 0:
                continue
            host = read_dump_tensor(path, t.role, t.index)
            pieces, shape = read_dump_elements(path, t.role, t.index)
            assert shape == host.shape
            np.testing.assert_allclose(elements_stats(pieces)[0], tensor_stats(host)[0], rtol=1e-6)
            formats.add(t.format)
    assert len(formats) >= (1 if folder == "mlp" else 3)  # the shared cases hold NC1HWC0, FRACTAL_Z, FRACTAL_NZ ...


# --- FFTS+ ops: a dump file per thread ------------------------------------------------------------------

def _ffts_op(folder, mode: str, threads: int = 2, files: int = 2, cut=(2, 1, 1, 1)):
    """An FFTS+ Conv2D whose (4, 3, 2, 5) fp16 output is cut along N between `files` thread files."""
    import json

    from tests.data.ascend_mlp.make_ascend_cases import tensor, write_dump

    full = np.random.default_rng(5).standard_normal((4, 3, 2, 5)).astype(np.float16)
    parts = np.array_split(full, files, axis=0)
    slices = [[[{"lower": 0, "higher": len(p)}, {"lower": 0, "higher": 3}, {"lower": 0, "higher": 2},
                {"lower": 0, "higher": 5}]] for p in parts]
    attr = json.dumps({"slice_instance_num": threads, "threadMode": mode == "auto", "outputCutList": [list(cut)],
                       "output_tensor_slice": slices})
    x = np.ones((2, 2), np.float16)
    for k, part in enumerate(parts):
        op = f"conv_lxslice{k}" if mode == "manual" else "conv"
        out = tensor(part.reshape(-1) if mode == "auto" else part, "float16", "NCHW", original_shape=part.shape)
        name = f"Conv2D.{op}.7.0.{1741200000000100 + 10 * (files - k)}.4.330.{k if mode == 'auto' else 0}.0"
        write_dump(folder / name, op, 1741200000000100, [tensor(x, "float16")], [out], attr=attr)
    return full


@pytest.mark.parametrize("mode", ["manual", "auto"])
def test_ffts_thread_files_are_one_op_whose_outputs_are_joined(tmp_path, mode):
    full = _ffts_op(tmp_path, mode)
    graph = read_ascend_dump(tmp_path)
    assert [n for n in graph.nodes.ids[1:]] == ["conv"] and not graph.info.missing
    assert dict(graph.nodes.attrs[graph.row("conv")])["ffts_threads"].startswith("outputs joined from 2")
    row = _tensor(graph, "conv", Role.OUTPUT, "0")
    assert graph.tensors.shape[row] == "[4, 3, 2, 5]"
    exact = full.astype(np.float64)
    np.testing.assert_allclose(graph.tensors.stats[row], [exact.max(), exact.min(), exact.mean(),
                                                          np.sqrt((exact * exact).sum())], rtol=1e-6)
    first = tmp_path / graph.tensors.file[row].partition("#")[0]
    np.testing.assert_array_equal(read_dump_tensor(first, "output", 0), full)
    assert read_dump_tensor(first, "input", 0).shape == (2, 2)  # inputs: the first thread's


def test_ffts_files_fewer_than_threads_are_noted_and_an_uncut_op_keeps_its_latest_file(tmp_path):
    (tmp_path / "a").mkdir()
    _ffts_op(tmp_path / "a", "manual", threads=3)
    graph = read_ascend_dump(tmp_path / "a")
    assert any("FFTS+ op of 3 threads, 2 thread files found" in note for note in graph.info.missing)
    (tmp_path / "b").mkdir()
    _ffts_op(tmp_path / "b", "manual", cut=(1, 1, 1, 1))  # no cut axis: msaccucmp compares the latest file alone
    graph = read_ascend_dump(tmp_path / "b")
    row = _tensor(graph, "conv", Role.OUTPUT, "0")
    assert graph.tensors.shape[row] == "[2, 3, 2, 5]" and "lxslice0" in graph.tensors.file[row]


def test_elements_stats_of_strided_pieces_as_of_their_values(monkeypatch):
    import graphcmp.core.readers.ascend_dump as module

    monkeypatch.setattr(module, "STATS_BLOCK", 50)  # blocks cut inside an axis and across rows
    rng = np.random.default_rng(7)
    device = (rng.standard_normal((3, 2, 7, 9, 16)) * 10).astype(np.float16)
    pieces = [device[:, :1], device[:, 1:, :, :, :5], device[0, 0, 0, ::2, :]]  # whole blocks, a partial one, 1-D
    values = np.concatenate([p.reshape(-1) for p in pieces]).astype(np.float64)
    stats, present = module.elements_stats(pieces)
    np.testing.assert_allclose(stats, [values.max(), values.min(), values.mean(), np.sqrt((values ** 2).sum())],
                               rtol=1e-6)
    assert present.all()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_compiled_stats_equal_the_values_stats(dtype):
    import graphcmp.core.readers.ascend_dump as module

    pytest.importorskip("numba")
    rng = np.random.default_rng(8)
    whole = (rng.standard_normal(40_000) * 30).astype(dtype)
    pieces = [whole[:25_000], whole[25_000:].reshape(50, 300)]  # contiguous pieces of any shape
    values = whole.astype(np.float64)
    want = [values.max(), values.min(), values.mean(), np.sqrt((values ** 2).sum())]
    stats, present = module.elements_stats(pieces, compiled=True)
    np.testing.assert_allclose(stats, want, rtol=1e-12)  # summed in float64
    assert present.all()
    whole[123] = np.inf  # numpy's meaning for NaN/inf: the numpy path
    assert module.elements_stats(pieces, compiled=True)[0][0] == np.inf
    whole[77] = np.nan
    assert np.isnan(module.elements_stats(pieces, compiled=True)[0]).all()


def test_compiled_stats_only_for_readings_that_repay_loading_them(tmp_path, monkeypatch):
    import graphcmp.core.readers.ascend_dump as module
    from graphcmp.core import tensor_kernels

    files = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for file in files:
        file.write_bytes(bytes(1000))
    asked = []
    monkeypatch.setattr(tensor_kernels, "pays", lambda nbytes: asked.append(nbytes) or nbytes >= 2000)
    assert module.compiled_stats_pay(files) and asked == [2000]  # the files' sizes, not read
    assert not module.compiled_stats_pay(files[:1])


# --- buffers and workspaces: raw bytes after the outputs ----------------------------------------------------

def _op_with_scratch(folder, *, inline: bool = False):
    """A MatMul whose second input the writer skipped (address 0), FRACTAL_NZ output, one L1 buffer of 96 bytes and
    one workspace of 40 bytes; returns (path, output, buffer, workspace)."""
    from tests.data.ascend_mlp.make_ascend_cases import tensor, write_dump

    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 8)).astype(np.float16)
    y = rng.standard_normal((4, 20)).astype(np.float16)
    buffer, workspace = rng.integers(0, 256, 96, np.uint8).tobytes(), rng.integers(0, 256, 40, np.uint8).tobytes()
    path = folder / "MatMulV2.net_fc_MatMul.5.0.1741200000000300"
    write_dump(path, "net/fc/MatMul", 1741200000000300,
               [tensor(x, "float16"), tensor(np.zeros((8, 20), np.float16), "float16", address=0)],
               [tensor(y, "float16", "FRACTAL_NZ")], inline=inline, buffers=[buffer], workspaces=[workspace])
    return path, y, buffer, workspace


def test_buffers_and_workspace_after_the_outputs_are_located_and_the_tensors_not_misread(tmp_path):
    from graphcmp.core.readers.ascend_file import read_dump_extra

    path, y, buffer, workspace = _op_with_scratch(tmp_path)
    header = read_header(path)
    skipped = header.tensors[1]
    assert skipped.offset == -1 and header.declared == header.payload + skipped.size
    out = header.tensors[2]
    (buf, space) = header.extras
    assert (buf.kind, buf.type, buf.size, buf.offset) == ("buffer", "L1", 96, out.offset + out.size)
    assert (space.kind, space.type, space.size, space.offset) == ("workspace", "LOG", 40, buf.offset + 96)
    assert space.offset + space.size == path.stat().st_size
    assert np.array_equal(read_dump_tensor(path, "output", 0), y)
    assert read_dump_extra(path, "buffer", 0).tobytes() == buffer
    assert read_dump_extra(path, "workspace", 0).tobytes() == workspace
    with pytest.raises(DumpFormatError, match="has no workspace 1"):
        read_dump_extra(path, "workspace", 1)


def test_buffers_and_workspace_are_listed_on_the_op_not_compared(tmp_path):
    _op_with_scratch(tmp_path)
    graph = read_ascend_dump(tmp_path)
    attrs = dict(graph.nodes.attrs[graph.row("net/fc/MatMul")])
    assert attrs["buffer.0"] == "L1, 96 bytes; raw bytes, not compared"
    assert attrs["workspace.0"] == "LOG, 40 bytes; raw bytes, not compared"
    assert len(graph.tensors.slot) == 3  # two inputs and the output: buffers are no tensors
    row = _tensor(graph, "net/fc/MatMul", Role.OUTPUT, "0")
    assert graph.tensors.shape[row] == "[4, 20]"


def test_buffers_of_the_whole_protobuf_layout(tmp_path):
    from graphcmp.core.readers.ascend_file import read_dump_extra

    path, y, buffer, workspace = _op_with_scratch(tmp_path, inline=True)
    header = read_header(path)
    assert header.layout == "protobuf" and [e.size for e in header.extras] == [96, 40]
    assert read_dump_extra(path, "buffer", 0).tobytes() == buffer
    assert read_dump_extra(path, "workspace", 0).tobytes() == workspace
    assert np.array_equal(read_dump_tensor(path, "output", 0), y)


def test_a_workspace_cut_short_is_noted_on_its_op_and_the_tensors_stay_read(tmp_path):
    path, y, _, _ = _op_with_scratch(tmp_path)
    path.write_bytes(path.read_bytes()[:-5])
    header = read_header(path)
    assert header.extras[0].offset > 0 and header.extras[1].offset == -1
    graph = read_ascend_dump(tmp_path)
    assert not graph.info.missing  # raw bytes, never compared: the comparison loses nothing
    assert "truncated" in dict(graph.nodes.attrs[graph.row("net/fc/MatMul")])["workspace.0"]
    assert np.array_equal(read_dump_tensor(path, "output", 0), y)


# --- dtypes: fp4 e1m2 read from a file, the types without a known packing refused by name ---------------------

def _tensor_of_code(code: int, raw: bytes, shape):
    from tests.data.ascend_mlp.make_ascend_cases import tensor

    t = tensor(np.frombuffer(raw, np.uint8), "uint8")
    return {**t, "dtype": code, "shape": list(shape), "original_shape": list(shape)}


def test_an_fp4_e1m2_output_is_read_from_its_file(tmp_path):
    from tests.data.ascend_mlp.make_ascend_cases import tensor, write_dump

    codes = np.array([1, 7, 8, 15, 4, 0], np.uint8)  # 0.25, 1.75, -0, -1.75, 1, 0
    raw = (codes[0::2] | codes[1::2] << 4).tobytes()
    path = tmp_path / "Quant.net_quant.3.0.1741200000000300"
    write_dump(path, "net/quant", 1741200000000300, [tensor(np.ones(6, np.float16), "float16")],
               [_tensor_of_code(40, raw, (2, 3))])
    got = read_dump_tensor(path, "output", 0)
    assert got.shape == (2, 3) and got.ravel().tolist() == [0.25, 1.75, -0.0, -1.75, 1.0, 0.0]
    graph = read_ascend_dump(tmp_path)
    assert graph.tensors.stats[_tensor(graph, "net/quant", Role.OUTPUT, "0")][:2].tolist() == [1.75, -1.75]


@pytest.mark.parametrize(("code", "name"), [(30, "DT_INT2"), (31, "DT_UINT2"), (37, "DT_FLOAT6_E3M2"),
                                            (38, "DT_FLOAT6_E2M3")])
def test_a_dtype_without_a_known_packing_is_refused_naming_the_file_and_the_dtype(tmp_path, code, name):
    from tests.data.ascend_mlp.make_ascend_cases import tensor, write_dump

    path = tmp_path / "Quant.net_quant.3.0.1741200000000300"
    write_dump(path, "net/quant", 1741200000000300, [tensor(np.ones(4, np.float16), "float16")],
               [_tensor_of_code(code, b"\x00" * 3, (4,))])
    with pytest.raises(DumpFormatError) as raised:
        read_ascend_dump(tmp_path)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{path}: output 0: {name} (code {code}) is not decoded")


def test_extras_after_a_tensor_cut_short_are_not_located_in_its_place(tmp_path):
    path, *_ = _op_with_scratch(tmp_path)
    header = read_header(path)
    out = header.tensors[2]
    path.write_bytes(path.read_bytes()[:out.offset + out.size - 1])  # the output cut by one byte
    header = read_header(path)
    assert header.tensors[2].offset == -1
    assert [e.offset for e in header.extras] == [-1, -1]  # the 96-byte buffer would fit where the output begins
    assert all(e.skipped.endswith("(truncated)") for e in header.extras)


def test_statistics_dump_ops_are_named_as_the_fusion_rule_names_them():
    """A .csv dump writes op names as file names do (mlp/fc1/MatMul -> mlp_fc1_MatMul); with the rule, the run uses
    the ops' own names (and so their scopes), both sides alike; without it, the file-name form stays."""
    case = MLP / "stats"
    npu, bench = read_npu_and_golden(case / "npu_dump", case / "golden", case / "fusion_rule" / "mlp.json")
    assert npu.info.task == "statistics"
    assert {"mlp/fc1/MatMul", "mlp/fc1", "mlp/Softmax", "trans_Cast_0"} <= set(npu.nodes.ids)
    assert "mlp_fc1_MatMul" not in npu.nodes.ids and set(bench.nodes.ids) <= set(npu.nodes.ids)
    assert "mlp_fc1_MatMul" in read_ascend_dump(case / "npu_dump").nodes.ids
