"""msprobe's compare result table of a report (graphcmp.core.export.table): columns, rows, values."""

from __future__ import annotations

import ast
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from graphcmp.core.compare import compare_graphs, compare_paths
from graphcmp.core.export.table import GRAPHCMP_COLUMNS, NA, call_site, compare_table
from graphcmp.core.readers.detect import read_graph
from graphcmp.core.readers.msprobe import parse_msprobe
from graphcmp.core.tensorcmp import tensor_metrics_for

DATA = Path(__file__).resolve().parents[2] / "data"

# msprobe's result columns, as its source states them (facts, not code): Ascend/msprobe,
# python/msprobe/core/common/const.py (commit 8ff00da3), class CompareConst, lines 698-756:
#   BASIC_INFO = [NPU_NAME, BENCH_NAME, NPU_DTYPE, BENCH_DTYPE, NPU_SHAPE, BENCH_SHAPE, NPU_REQ_GRAD, BENCH_REQ_GRAD]
#   SUMMARY_COMPARE_INDEX = [MAX_DIFF, MIN_DIFF, MEAN_DIFF, NORM_DIFF, MAX_RELATIVE_ERR, MIN_RELATIVE_ERR,
#                            MEAN_RELATIVE_ERR, NORM_RELATIVE_ERR]
#   ALL_COMPARE_INDEX = [COSINE, EUC_DIST, MAX_ABS_ERR, MAX_RELATIVE_ERR, ONE_THOUSANDTH_ERR_RATIO,
#                        FIVE_THOUSANDTHS_ERR_RATIO]
#   SUMMARY_INFO = [NPU_MAX, NPU_MIN, NPU_MEAN, NPU_NORM, BENCH_MAX, BENCH_MIN, BENCH_MEAN, BENCH_NORM]
#   EXTRACT_INDEX = [REQ_GRAD_CONSIST, RESULT, ERROR_MESSAGE]
#   SUMMARY / ALL / MD5 header = BASIC_INFO + (SUMMARY_COMPARE_INDEX | ALL_COMPARE_INDEX | [NPU_MD5, BENCH_MD5])
#                                (+ SUMMARY_INFO but for md5) + EXTRACT_INDEX
# with the names of lines 584-627 ("NPU Name", "NPU Tensor Shape", "L2norm diff", "BENCH MD5", "Err_message" ...);
# python/msprobe/core/compare/acc_compare.py, make_result_df (lines 1364-1372): stack mode appends
# "NPU_Stack_Info", the tensor mode then "Data_name".
BASIC = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
         "NPU Requires_grad", "Bench Requires_grad"]
SUMMARY_INFO = ["NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
                "Bench l2norm"]
EXTRACT = ["Requires_grad Consistent", "Result", "Err_message"]
MSPROBE_HEADERS = {
    "statistics": [*BASIC, "Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr",
                   "MeanRelativeErr", "NormRelativeErr", *SUMMARY_INFO, *EXTRACT],
    "tensor": [*BASIC, "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
               "Five Thousandths Err Ratio", *SUMMARY_INFO, *EXTRACT],
    "md5": [*BASIC, "NPU MD5", "BENCH MD5", *EXTRACT],
}


@pytest.fixture(scope="module")
def statistics_report(perturb_pair):
    return compare_paths(*perturb_pair)


@pytest.fixture(scope="module")
def md5_report():
    return compare_paths(DATA / "msprobe_md5" / "npu", DATA / "msprobe_md5" / "bench")


@pytest.fixture(scope="module")
def tensor_report():
    case = Path(os.path.abspath(DATA / "mindspore_dump_lenet_cast"))
    npu, bench = read_graph(case / "npu"), read_graph(case / "bench")
    return compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))


def _report(name: str):
    return {"statistics": "statistics_report", "md5": "md5_report", "tensor": "tensor_report"}[name]


@pytest.mark.parametrize("mode", ["statistics", "tensor", "md5"])
def test_columns_are_msprobes_then_graphcmps(mode, request) -> None:
    report = request.getfixturevalue(_report(mode))
    table = compare_table(report)
    assert table.mode == mode
    stack = ["NPU_Stack_Info"] if any(report.npu.stacks) else []
    data_name = ["Data_name"] if mode == "tensor" else []
    assert list(table.names) == MSPROBE_HEADERS[mode] + stack + data_name + list(GRAPHCMP_COLUMNS)
    assert table.msprobe_columns == len(MSPROBE_HEADERS[mode] + stack + data_name)
    assert all(len(column) == len(table) for column in table.columns)


@pytest.mark.parametrize("mode", ["statistics", "tensor", "md5"])
def test_one_row_per_npu_tensor_with_its_pair(mode, request) -> None:
    report = request.getfixturevalue(_report(mode))
    table = compare_table(report)
    npu, bench, pairs = report.npu, report.bench, report.pairs
    assert sorted(table.npu_rows.tolist()) == list(range(len(npu.tensors)))
    assert np.count_nonzero(table.pairs >= 0) == len(pairs)
    assert sorted(table.pairs[table.pairs >= 0].tolist()) == list(range(len(pairs)))
    npu_names, bench_names = table.column("NPU Name"), table.column("Bench Name")
    for r, (i, k) in enumerate(zip(table.npu_rows.tolist(), table.pairs.tolist())):
        assert npu_names[r].startswith(npu.nodes.ids[npu.tensors.node[i]] + ".")
        assert npu_names[r].endswith("." + npu.tensors.slot[i])
        if k >= 0:
            j = int(pairs.bench[k])
            assert bench_names[r].startswith(bench.nodes.ids[bench.tensors.node[j]] + ".")
            dtype, shape = bench.tensors.dtype[j], bench.tensors.shape[j]
            if shape == "scalar":  # msprobe's record of a number argument
                dtype, shape = f"<class '{dtype}'>", "[]"
            assert table.column("Bench Dtype")[r] == dtype
            assert table.column("Bench Tensor Shape")[r] == shape


def test_rows_follow_execution_order_inputs_first(statistics_report) -> None:
    table = compare_table(statistics_report)
    t = statistics_report.npu.tensors
    node, role = t.node[table.npu_rows], t.role[table.npu_rows]
    assert np.all(np.diff(node) >= 0)
    place = np.array([0, 2, 1, 3])[role]  # inputs, parameters, outputs, parameter gradients
    same = node[1:] == node[:-1]
    assert np.all(np.diff(place)[same] >= 0)


def test_statistics_values_and_differences(statistics_report) -> None:
    report = statistics_report
    table = compare_table(report)
    nt, bt = report.npu.tensors, report.bench.tensors
    checked = 0
    for r, (i, k) in enumerate(zip(table.npu_rows.tolist(), table.pairs.tolist())):
        if k < 0 or not (nt.present[i, 0] and bt.present[report.pairs.bench[k], 0]):
            continue
        j = int(report.pairs.bench[k])
        a, b = float(nt.stats[i, 0]), float(bt.stats[j, 0])
        assert table.column("NPU max")[r] == a and table.column("Bench max")[r] == b
        diff, rel = table.column("Max diff")[r], table.column("MaxRelativeErr")[r]
        if a == b:
            assert (diff, rel) == ("0", "0")
        else:
            assert diff == a - b
            assert rel == ("inf" if b == 0 else f"{abs((a - b) / b * 100)!r}%")
            checked += 1
        assert table.column("Result")[r] == {0: "pass", 1: "warning", 2: "error"}[int(report.verdicts.pair_level[k])]
    assert checked > 100  # the perturbed run differs in most tensors


def test_md5_cells_and_result(md5_report) -> None:
    table = compare_table(md5_report)
    nt, bt = md5_report.npu.tensors, md5_report.bench.tensors
    differs = md5_report.pairs.metrics["md5_diff"]
    for r, (i, k) in enumerate(zip(table.npu_rows.tolist(), table.pairs.tolist())):
        j = int(md5_report.pairs.bench[k])
        assert table.column("NPU MD5")[r] == nt.md5[i] and table.column("BENCH MD5")[r] == bt.md5[j]
        if differs[k] == 1.0:
            assert table.column("Result")[r] == "error" and "md5 differs" in table.column("Err_message")[r]
    assert "Max diff" not in table.names


def test_tensor_metrics_in_msprobes_columns(tensor_report) -> None:
    table = compare_table(tensor_report)
    m = tensor_report.pairs.metrics
    bt = tensor_report.bench.tensors
    measured = 0
    for r, k in enumerate(table.pairs.tolist()):
        if k < 0 or math.isnan(m["cosine"][k]):
            assert table.column("Cosine")[r] == NA
            continue
        measured += 1
        assert table.column("Cosine")[r] == round(float(m["cosine"][k]), 6)
        assert table.column("MaxAbsErr")[r] == round(float(m["max_abs"][k]), 6)
        norm = float(bt.stats[tensor_report.pairs.bench[k], 3])
        assert table.column("EucDist")[r] == pytest.approx(float(m["euc_rel"][k]) * abs(norm))
        names = ast.literal_eval(table.column("Data_name")[r])  # msprobe prints the pair as a Python list
        assert [n.endswith(".npy") for n in names] == [True, True]
    assert measured >= 10


def _leaf(top: float, **extra) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "requires_grad": True,
            "Max": top, "Min": 0.0, "Mean": top / 2, "Norm": top, **extra}


def test_npu_tensor_without_bench_twin_is_listed_na() -> None:
    npu = parse_msprobe({"task": "statistics", "data": {
        "Torch.relu.0.forward": {"input_args": [_leaf(1.0)], "output": [_leaf(1.0)]},
        "Torch.gelu.0.forward": {"input_args": [_leaf(1.0)], "output": [_leaf(2.0)]}}})
    bench = parse_msprobe({"task": "statistics", "data": {
        "Torch.relu.0.forward": {"input_args": [_leaf(1.0)], "output": [_leaf(1.0)]}}})
    table = compare_table(compare_graphs(npu, bench))
    rows = [dict(zip(table.names, row)) for row in table.rows()]
    assert [r["NPU Name"] for r in rows] == ["Torch.relu.0.forward.input.0", "Torch.relu.0.forward.output.0",
                                             "Torch.gelu.0.forward.input.0", "Torch.gelu.0.forward.output.0"]
    lone = rows[3]
    assert lone["Bench Name"] == lone["Bench max"] == lone["Max diff"] == lone["Result"] == NA
    assert lone["Err_message"] == '["No bench data matched."]'
    assert lone["NPU max"] == 2.0 and lone["Verdict"] == "unmatched"
    assert table.pairs.tolist()[2:] == [-1, -1]


def test_special_values_spelled_as_msprobe() -> None:
    inf, nan = float("inf"), float("nan")
    npu = parse_msprobe({"task": "statistics", "data": {"Torch.relu.0.forward": {"output": [
        _leaf(1.0, Max=inf, Min=nan, Mean=2.0, Norm=3.0, requires_grad=False)]}}})
    bench = parse_msprobe({"task": "statistics", "data": {"Torch.relu.0.forward": {"output": [
        _leaf(1.0, Max=1.0, Min=0.0, Mean=0.0, Norm=3.0)]}}})
    row = dict(zip(*(lambda t: (t.names, next(t.rows())))(compare_table(compare_graphs(npu, bench)))))
    assert (row["Max diff"], row["MaxRelativeErr"]) == ("inf", "inf")
    assert (row["Min diff"], row["MinRelativeErr"]) == ("Nan", "Nan")
    assert (row["Mean diff"], row["MeanRelativeErr"]) == (2.0, "inf")  # bench 0: msprobe's relative error is inf
    assert (row["L2norm diff"], row["NormRelativeErr"]) == ("0", "0")
    assert row["NPU max"] == inf and row["NPU min"] == "Nan"
    assert row["Requires_grad Consistent"] is False
    assert json.loads(row["Err_message"])[0] == "Requires_grad inconsistent."


def test_error_and_warning_rows_are_highlighted(statistics_report) -> None:
    table = compare_table(statistics_report)
    colours = table.highlights()
    result = np.array(table.column("Result"), object)
    assert set(colours[result == "error"]) == {"red"} and set(colours[result == "warning"]) == {"yellow"}
    assert set(colours[(result == "pass") | (result == NA)]) <= {""}
    assert np.count_nonzero(colours == "red") > 0


def test_graphcmp_columns_name_the_origin(statistics_report) -> None:
    report = statistics_report
    table = compare_table(report)
    first = report.analysis().first
    rows = [r for r, name in enumerate(table.column("NPU Name")) if name.startswith(first.node + ".")]
    assert rows and all(table.column("Role")[r] == "origin" for r in rows)
    assert all(table.column("Cause")[r] == first.cause for r in rows)
    assert all(table.column("Margin")[r] == pytest.approx(first.margin) for r in rows)
    assert all(table.column("Verdict")[r] == report.verdict(first.node).status for r in rows)


def test_call_site_is_the_users_line() -> None:
    frames = ("File /venv/lib/python3.11/site-packages/torch/nn/modules/module.py, line 1811, in inner, \n"
              " args_kwargs_result = hook(self, args, kwargs)",
              "File /home/me/models.py, line 26, in forward, \n x = self.embedding(tokens) + self.pos")
    assert call_site(frames) == "/home/me/models.py:26 in forward: x = self.embedding(tokens) + self.pos"
    assert call_site(()) == ""


def test_msprobe_tensor_dump_fills_the_tensor_columns() -> None:
    from tests.conftest import shared

    case = shared("msprobe/dumps/cnn/tensor")
    npu, bench = read_graph(case / "perturb" / "step0" / "rank0"), read_graph(case / "baseline" / "step0" / "rank0")
    report = compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))
    table = compare_table(report)
    assert table.mode == "tensor" and len(table) == len(report.pairs)
    cosine = report.pairs.metrics["cosine"]
    cells = table.column("Cosine")
    measured = [r for r, k in enumerate(table.pairs.tolist()) if not math.isnan(cosine[k])]
    assert len(measured) > 100
    assert all(cells[r] == round(float(cosine[table.pairs[r]]), 6) for r in measured)
    names = [ast.literal_eval(table.column("Data_name")[r]) for r in measured]
    assert all(n == [table.column("NPU Name")[r] + ".pt"] * 2 for n, r in zip(names, measured))
    errors = [r for r in measured if table.column("Result")[r] == "error"]
    assert errors and all(json.loads(table.column("Err_message")[r])[-1].startswith("error: ") for r in errors)
    assert min(cells[r] for r in errors) < 0.99  # the perturbed conv2 weight and what it made


def test_records_are_json_safe(overflow_report) -> None:
    table = compare_table(overflow_report)
    records = table.records()
    assert len(records) == len(table) and list(records[0]) == list(table.names)
    text = json.dumps(records, allow_nan=False)  # raises on an inf or NaN cell
    assert '"inf"' in text or '"-inf"' in text or '"Nan"' in text
    assert table.records(5, 7) == records[5:7]
