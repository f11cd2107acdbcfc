"""PyTorch 1.5 NPU ``.h5`` dumps against a GPU ``.h5``: reading, lazy tensors, the op table, bad files.

The cases in tests/data/pytorch_h5 are written by tests/data/make_h5_cases.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from graphcmp.cli.main import main
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers.detect import detect_format
from graphcmp.core.readers.pytorch_h5 import read_h5_tensor, read_pytorch_h5
from graphcmp.core.records import Direction, Role
from graphcmp.core.tensorcmp import tensor_file
from graphcmp.core.tensorio import read_tensor

CASES = Path(__file__).parents[2] / "data" / "pytorch_h5"


def _compare(capsys, tmp_path, npu, bench, *options):
    out = tmp_path / "cmp.npz"
    code = main(["compare", str(npu), str(bench), *options, "-o", str(out), "-q"])
    capsys.readouterr()
    assert main(["diverge", str(out), "--json"]) == code
    return code, json.loads(capsys.readouterr().out)


def _rows(graph, node, role):
    t = graph.tensors
    return {t.slot[k]: k for k in range(len(t.slot)) if graph.nodes.ids[t.node[k]] == node and t.role[k] == role}


def test_an_npu_dump_is_read():
    assert detect_format(CASES / "npu_bug.h5") == "pytorch_h5"
    graph = read_pytorch_h5(CASES / "npu_bug.h5")
    assert (graph.info.format, graph.info.task, graph.info.missing) == ("pytorch_h5", "tensor", ())
    calls = [i for i in graph.nodes.ids if i != graph.nodes.ids[0]]
    assert calls == ["ConvolutionForward.0", "ReluForward.0", "AddmmForward.0", "AddmmBackward.0",
                     "ReluBackward0.0", "NpuConvolutionBackward.0"]  # in the dump's call order
    row = graph.row("NpuConvolutionBackward.0")
    assert graph.nodes.op[row] == "NpuConvolutionBackward" and graph.nodes.direction[row] == Direction.BACKWARD
    inputs, outputs = _rows(graph, "NpuConvolutionBackward.0", Role.INPUT), _rows(graph, "NpuConvolutionBackward.0",
                                                                                  Role.OUTPUT)
    assert set(inputs) == {"grad", "input", "weight", "stride", "padding"} and set(outputs) == {"result_0"}
    t = graph.tensors
    weight = inputs["weight"]
    assert t.dtype[weight] == "float16" and t.shape[weight] == "[4, 3, 3, 3]"  # DataType 10, stored as float32
    assert t.file[inputs["stride"]] == "" and t.value[inputs["stride"]] == "[1, 1]"  # a list argument: a value
    with h5py.File(CASES / "npu_bug.h5") as f:
        stored = f["/NpuConvolutionBackward/6/input/weight"][()]
    assert t.stats[weight][0] == pytest.approx(stored.max()) and t.stats[weight][1] == pytest.approx(stored.min())


def test_tensors_stay_in_the_file_and_are_read_by_reference():
    graph = read_pytorch_h5(CASES / "npu_bug.h5")
    row = _rows(graph, "NpuConvolutionBackward.0", Role.OUTPUT)["result_0"]
    assert graph.tensors.file[row] == "npu_bug.h5#h5:/NpuConvolutionBackward/6/output/result/result_0"
    path = tensor_file(graph, row)
    array = read_tensor(path)
    assert array.shape == (4, 3, 3, 3) and array.dtype == np.float32
    np.testing.assert_array_equal(array, read_h5_tensor(CASES / "npu_bug.h5",
                                                       "/NpuConvolutionBackward/6/output/result/result_0"))


def test_a_strided_tensor_is_seen_through_its_strides(tmp_path):
    path = tmp_path / "t.h5"
    storage = np.arange(6, dtype=np.float32)  # a 2x3 tensor's transpose: shape (3, 2), strides (1, 3)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("/TBackward/1/output/result", data=storage.reshape(3, 2))
        d.attrs.create("DataType", 1, dtype="<i4")
        d.attrs.create("Type", 0, dtype="<i4")
        d.attrs.create("Stride", np.array([1, 3], np.int64))
    np.testing.assert_array_equal(read_h5_tensor(path, "/TBackward/1/output/result"),
                                  storage.reshape(2, 3).T)


def test_planted_bug_is_the_first_divergence_through_the_op_table(capsys, tmp_path):
    code, doc = _compare(capsys, tmp_path, CASES / "npu_bug.h5", CASES / "gpu.h5")
    assert code == 1 and doc["first"]["node"] == "ReluBackward0.0" and doc["first"]["cause"] == "op"
    assert doc["first"]["margin"] > 10


def test_the_comparison_exports_as_msaccucmp_csv(capsys, tmp_path):
    _compare(capsys, tmp_path, CASES / "npu_bug.h5", CASES / "gpu.h5")
    out = tmp_path / "result.csv"
    assert main(["export", str(tmp_path / "cmp.npz"), "--to", "msaccucmp", "-o", str(out)]) == 0
    rows = out.read_text().splitlines()
    assert any(r.startswith("4,ReluBackward0,ReluBackward0.0,") for r in rows[1:])
    scalar = next(r for r in rows if ":input:alpha," in r)  # a scalar argument: one value, std 0
    assert "(1.000;0.000),(1.000;0.000)" in scalar


def test_clean_npu_run_agrees_with_the_gpu_run(capsys, tmp_path):
    code, doc = _compare(capsys, tmp_path, CASES / "npu_clean.h5", CASES / "gpu.h5")
    assert code == 0 and doc["first"] is None


def test_npu_and_cudnn_convolution_pair_with_their_renamed_input():
    from graphcmp.core.compare import compare_graphs
    from graphcmp.core.tensorcmp import tensor_metrics_for

    npu, bench = read_pytorch_h5(CASES / "npu_clean.h5"), read_pytorch_h5(CASES / "gpu.h5")
    report = compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))
    table = report.matches
    assert table.npu_to_bench[npu.row("NpuConvolutionBackward.0")] == bench.row("CudnnConvolutionBackward.0")
    assert table.rules[table.rule[npu.row("NpuConvolutionBackward.0")]] == "op-map"
    pairs = report.pairs
    paired = {npu.tensors.slot[i]: bench.tensors.slot[j] for i, j in zip(pairs.npu.tolist(), pairs.bench.tolist())
              if npu.nodes.ids[npu.tensors.node[i]] == "NpuConvolutionBackward.0"}
    assert paired["input"] == "self"  # the table's parameter rename (LoadUtils.cpp's IrParamNameMapper)
    assert paired["weight"] == "weight" and paired["result_0"] == "result_0"


def test_a_cpu_run_pairs_its_thnn_convolution(capsys, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_h5_cases", CASES.parent / "make_h5_cases.py")
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    cases.write(tmp_path / "cpu.h5", half=False, cpu=True)
    code, doc = _compare(capsys, tmp_path, CASES / "npu_bug.h5", tmp_path / "cpu.h5")
    assert code == 1 and doc["first"]["node"] == "ReluBackward0.0"
    npu, cpu = read_pytorch_h5(CASES / "npu_bug.h5"), read_pytorch_h5(tmp_path / "cpu.h5")
    from graphcmp.core.compare import compare_graphs

    table = compare_graphs(npu, cpu).matches
    assert table.npu_to_bench[npu.row("NpuConvolutionBackward.0")] == cpu.row("ThnnConv2DBackward.0")


def test_a_bare_op_map_option_names_the_built_in_table(capsys, tmp_path):
    out = tmp_path / "cmp.npz"
    code = main(["compare", str(CASES / "npu_bug.h5"), str(CASES / "gpu.h5"), "--op-map", "-o", str(out)])
    assert code == 1 and "op-map 1" in capsys.readouterr().out


def test_without_the_op_table_the_convolutions_stay_unpaired(capsys, tmp_path):
    from graphcmp.core.compare import compare_graphs
    from graphcmp.core.matching import default_matchers

    npu, bench = read_pytorch_h5(CASES / "npu_bug.h5"), read_pytorch_h5(CASES / "gpu.h5")
    table = compare_graphs(npu, bench, matchers=default_matchers()).matches
    assert table.npu_to_bench[npu.row("NpuConvolutionBackward.0")] == -1


def test_a_file_that_is_not_hdf5_is_a_one_line_error(capsys, tmp_path):
    bad = tmp_path / "npu.h5"
    bad.write_text("not a dump\n")
    with pytest.raises(DumpFormatError, match="not an HDF5 file"):
        read_pytorch_h5(bad)
    assert main(["compare", str(bad), str(CASES / "gpu.h5"), "-o", str(tmp_path / "c.npz"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "npu.h5" in err and "Traceback" not in err


def test_a_truncated_file_is_a_one_line_error(capsys, tmp_path):
    cut = tmp_path / "npu.h5"
    cut.write_bytes((CASES / "npu_bug.h5").read_bytes()[:20000])
    assert main(["compare", str(cut), str(CASES / "gpu.h5"), "-o", str(tmp_path / "c.npz"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "npu.h5" in err and "truncated" in err


def test_a_partial_read_says_what_it_lost(tmp_path):
    path = tmp_path / "npu.h5"
    with h5py.File(path, "w") as f:
        ok = f.create_dataset("/ReluBackward0/1/output/result", data=np.ones(4, np.float32))
        ok.attrs.create("DataType", 1, dtype="<i4")
        lost = f.create_dataset("/ReluBackward0/1/input/grad", shape=(4,), dtype="<f4",
                                external=[("gone.bin", 0, 16)])  # its data live in a file that is not there
        lost.attrs.create("DataType", 1, dtype="<i4")
        f.create_dataset("/notes", data=np.zeros(1))  # not a call
    graph = read_pytorch_h5(path)
    assert len(graph.info.missing) == 2
    assert "1 object(s) outside" in graph.info.missing[0]
    assert "1 tensor(s) unreadable" in graph.info.missing[1] and "/ReluBackward0/1/input/grad" in graph.info.missing[1]
    rows = _rows(graph, "ReluBackward0.0", Role.INPUT)
    assert graph.tensors.file[rows["grad"]] == "" and np.isnan(graph.tensors.stats[rows["grad"]]).all()
    out = _rows(graph, "ReluBackward0.0", Role.OUTPUT)["result"]
    assert graph.tensors.stats[out][0] == 1.0 and graph.tensors.file[out].endswith("#h5:/ReluBackward0/1/output/result")


def test_the_built_in_op_table_is_the_bare_op_map():
    from graphcmp.core.matching.specs import matcher_from_spec

    matcher = matcher_from_spec("op-map")
    assert matcher.name == "op-map" and matcher.table["CudnnConvolutionBackward"][0][0] == "NpuConvolutionBackward"
    assert {t for t, _ in matcher.table["NpuConvolutionBackward"]} == {"CudnnConvolutionBackward", "ThnnConv2DBackward"}


def test_an_hdf5_file_without_calls_is_refused(tmp_path):
    other = tmp_path / "weights.h5"
    with h5py.File(other, "w") as f:
        f.create_dataset("conv1/kernel", data=np.zeros(3))
    with pytest.raises(DumpFormatError, match=r"not a PyTorch 1\.5 dump"):
        read_pytorch_h5(other)


def test_the_case_files_stay_small():
    assert all(p.stat().st_size < 200_000 for p in CASES.glob("*.h5"))
