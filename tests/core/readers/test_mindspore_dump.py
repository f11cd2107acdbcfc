"""MindSpore kernel dumps: .npy files joined to execution-order kernels, compared on real tensors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from graphcmp.cli.main import main
from graphcmp.core.compare import compare_graphs
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers import mindspore_dump
from graphcmp.core.readers.detect import detect_format, read_graph
from graphcmp.core.records import NodeKind
from graphcmp.core.report import load_report
from graphcmp.core.rules import Rule, Thresholds
from graphcmp.core.tensorcmp import tensor_file, tensor_metrics_for
from tests.conftest import DATA, shared

CASE = DATA / "mindspore_dump_lenet_cast"
NET = "Default/network-WithLossCell/_backbone-LeNet5"
CAST = f"{NET}/Cast-op2"  # the inserted fp32 -> fp16 cast
RELU = f"{NET}/relu-ReLU/ReLU-op1"  # the op reading the fp16 round trip
FILTER = "Gradients/" + NET + "/conv2-Conv2d/Grad_Conv2D/Conv2DBackpropFilter-op1"  # its files say -op0
# fp16 rounding (relative 2^-11) is below the default tensor tolerance (euc_rel 1e-3); a user looking for
# it tightens the Euclidean relative distance to 1e-5, well above float32 noise (1e-7).
STRICT = {"rules": {"tensor": [{"metric": "euc_rel", "warn": 1e-5, "error": 1e-2}]}}


def first_in_execution_order(report, statuses):
    """Id of the earliest kernel (by execution order) whose verdict is in `statuses`, or None."""
    npu = report.npu
    kernels = [(int(dict(a)["exec_order"]), row) for row, a in enumerate(npu.nodes.attrs) if "exec_order" in dict(a)]
    for _, row in sorted(kernels):
        if report.verdict(npu.nodes.ids[row]).status in statuses:
            return npu.nodes.ids[row]
    return None


def compare(npu_path, bench_path, thresholds=None):
    npu, bench = read_graph(npu_path), read_graph(bench_path)
    return compare_graphs(npu, bench, thresholds=thresholds, tensor_metrics=tensor_metrics_for(npu, bench))


def test_trimmed_pair_is_detected_joined_and_measured():
    for path in (CASE / "npu", CASE / "npu" / "rank_0"):
        assert detect_format(path) == "mindspore_dump"
    npu = read_graph(CASE / "npu")
    assert npu.info.task == "tensor" and npu.info.rank == 0
    assert npu.info.missing == ("ms_output_trace_code_graph_0.ir: not found; kernels have no types, stacks or edges",)
    kernels = [i for i, a in zip(npu.nodes.ids, npu.nodes.attrs) if "exec_order" in dict(a)]
    assert len(kernels) == 8 and kernels[1] == CAST
    # the CSV says Cast-op2/op3 and Conv2DBackpropFilter-op1, the files -op0/-op1 and -op0: joined on type and scope
    cast = npu.view(CAST)
    shape = "[2, 16, 10, 10]"
    assert [(t.dtype, t.shape) for t in cast.tensors] == [("Float32", shape), ("Float16", shape)]
    assert "Cast-op0" in cast.tensors[1].file and len(npu.view(FILTER).tensors) == 3


def test_statistics_are_computed_from_the_arrays():
    npu = read_graph(CASE / "npu")
    for row in range(len(npu.tensors)):
        array = np.load(tensor_file(npu, row)).astype(np.float64)
        expected = [array.max(), array.min(), array.mean(), np.linalg.norm(array.ravel())]
        assert np.allclose(npu.tensors.stats[row], expected, rtol=1e-12)
    assert npu.tensors.present.all()


def test_first_divergence_of_the_trimmed_pair_is_the_cast_then_the_op_after_it():
    report = compare(CASE / "npu", CASE / "bench", Thresholds.from_dict(STRICT))
    assert first_in_execution_order(report, {"unmatched", "warning", "error"}) == CAST
    assert first_in_execution_order(report, {"warning", "error"}) == RELU
    relu_in = report.pairs.npu.tolist().index(int(report.npu.tensor_rows(RELU)[0]))
    assert 1e-4 < report.pairs.metrics["euc_rel"][relu_in] < 1e-3  # fp16 rounding, measured on the arrays
    assert report.verdict(f"{NET}/conv2-Conv2d/Conv2D-op0").status == "pass"


def test_files_that_join_no_kernel_and_kernels_without_files_are_reported(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(CASE / "npu", run)
    order = run / "rank_0" / "execution_order" / "ms_execution_order_graph_0.csv"
    lines = order.read_text().splitlines()
    order.write_text("\n".join([*lines[:2], f"{NET}/fc9-Dense/MatMul-op0", *lines[3:]]) + "\n")  # Cast-op2 -> fc9
    g = read_graph(run)
    assert any("fc9-Dense/MatMul-op0" in note and "no dump files" in note for note in g.info.missing)
    assert any("match no kernel" in note and "Cast" in note for note in g.info.missing)
    assert not g.view(f"{NET}/fc9-Dense/MatMul-op0").tensors


def test_corrupt_npy_is_a_one_line_error(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(CASE / "bench", run)
    victim = next((run / "rank_0" / "lenet" / "0" / "0").glob("ReLU*.npy"))
    victim.write_bytes(b"not an array")
    with pytest.raises(DumpFormatError, match=victim.name) as err:
        read_graph(run)
    assert "\n" not in str(err.value)


def test_empty_folder_is_not_a_dump(tmp_path):
    assert not mindspore_dump.sniff(tmp_path)
    with pytest.raises(DumpFormatError, match="not a MindSpore dump"):
        read_graph(tmp_path, "mindspore_dump")


@pytest.mark.shared
def test_compare_lenet_baseline_and_perturbed_through_the_cli(tmp_path):
    root = shared("formats/mindspore/dump")
    npu, bench = root / "lenet_perturbed", root / "lenet_baseline"
    rules = tmp_path / "strict.json"
    rules.write_text(json.dumps(STRICT))
    out = tmp_path / "cmp.json"
    code = main(["compare", str(npu), str(bench), "-o", str(out), "--thresholds", str(rules), "-q", "--json"])
    assert code == 1  # the inserted fp16 round trip is the origin of a divergence in this float32 run
    report = load_report(out)
    for graph, kernels, tensors in ((report.npu, 49, 203), (report.bench, 45, 195)):
        assert not graph.info.missing and len(graph.tensors) == tensors
        assert sum("exec_order" in dict(a) for a in graph.nodes.attrs) == kernels
        assert int(graph.nodes.has_data[graph.nodes.kind == NodeKind.API].sum()) == kernels + 21  # + parameters
    unmatched = {report.npu.nodes.ids[r] for r in np.flatnonzero(report.matches.npu_to_bench < 0)}
    assert {i.rsplit("/", 1)[1] for i in unmatched if "exec_order" in dict(report.npu.nodes.attrs[report.npu.row(i)])} \
        == {"Cast-op2", "Cast-op3"}  # the 4 inserted casts (forward and Grad_Cast), all else matched
    assert len(report.pairs) == 195 and np.isfinite(report.pairs.metrics["cosine"]).all()
    assert first_in_execution_order(report, {"unmatched", "warning", "error"}) == CAST
    assert first_in_execution_order(report, {"warning", "error"}) == RELU
    assert len(report.npu.edges) == 59 and len(report.bench.edges) == 55


@pytest.mark.shared
def test_the_fp16_round_trip_is_the_origin_for_verdicts_and_divergence_alike():
    # both runs compute in float32; the npu run alone rounds conv2's output through float16 (an inserted Cast)
    root = shared("formats/mindspore/dump")
    report = compare(root / "lenet_perturbed", root / "lenet_baseline")
    assert report.verdict(CAST).status == "unmatched"
    assert first_in_execution_order(report, {"warning", "error"}) == RELU
    assert report.verdict(RELU).status == "error" and not report
    first = report.analysis().first
    assert first.node == RELU and first.cause == "inputs differ" and "Cast-op" in first.evidence[-1]


@pytest.mark.shared
@pytest.mark.parametrize("level", ["", "dump", "dump/rank_0"])
def test_run_dump_and_rank_folders_are_all_detected(level):
    path = shared("formats/mindspore/dump/lenet_baseline") / level
    assert detect_format(path) == "mindspore_dump"


def test_rule_record_used_by_strict_thresholds():
    assert Thresholds.from_dict(STRICT).rules["tensor"] == (Rule("euc_rel", warn=1e-5, error=1e-2),)
