"""msaccucmp's result CSV written from a comparison of an Ascend raw dump with golden data."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from graphcmp.core.compare import compare_graphs
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.export.msaccucmp import HEADER, write_msaccucmp
from graphcmp.core.readers.ascend_golden import read_npu_and_golden
from graphcmp.core.tensorcmp import tensor_metrics_for
from tests.conftest import DATA, shared

MLP = DATA / "ascend_mlp"


def _report(npu_path, golden_path, rule):
    npu, bench = read_npu_and_golden(npu_path, golden_path, rule)
    return compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))


def _rows(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def test_columns_rows_and_number_formats(tmp_path):
    report = _report(MLP / "bug" / "npu_dump", MLP / "bug" / "golden", MLP / "bug" / "fusion_rule" / "mlp.json")
    result = write_msaccucmp(report, tmp_path / "result.csv")
    header, rows = _rows(tmp_path / "result.csv")
    assert tuple(header) == HEADER and result.nodes == 9
    by_tensor = {r[7]: dict(zip(range(len(header)), r)) for r in rows}
    fc2 = by_tensor["mlp/fc2/MatMul:output:0"]
    assert fc2[0] == "7" and fc2[1] == "MatMulV2"  # Index: the op's place in the fusion rule
    assert fc2[5] == "mlp/fc2/MatMul,mlp/fc2/BiasAdd" and fc2[3] == "float16" and fc2[6] == "float32"
    assert fc2[8] == "[4,16]" and fc2[9] == "NO"
    assert fc2[10] == f"{report.pairs.metrics['cosine'][_pair(report, 'mlp/fc2/MatMul', 1)]:.6f}"
    assert fc2[15].count(";") == 2 and fc2[15].startswith("(")
    weight = by_tensor["mlp/fc2/MatMul:input:1"]
    assert weight[10] == "NaN" and "no the ground truth dump file" in weight[20]
    assert by_tensor["trans_Cast_0:output:0"][5] == "*"  # a layout op stands for no original op of its own
    assert by_tensor["mlp/ArgMax:input:1"][3] == "NaN"  # skipped by the writer (device address 0)
    assert by_tensor["mlp/scale/Mul:output:0"][9] == "NaN"  # OverFlow is a float16 check
    assert [int(r[0]) for r in rows] == sorted(int(r[0]) for r in rows)


def _pair(report, node, role):
    t = report.npu.tensors
    for k, row in enumerate(report.pairs.npu.tolist()):
        if report.npu.nodes.ids[t.node[row]] == node and t.role[row] == role:
            return k
    raise AssertionError(node)


def test_overflow_column(tmp_path):
    report = _report(MLP / "overflow" / "npu_dump", MLP / "overflow" / "golden",
                     MLP / "overflow" / "fusion_rule" / "mlp.json")
    write_msaccucmp(report, tmp_path / "result.csv")
    _, rows = _rows(tmp_path / "result.csv")
    flags = {r[7]: r[9] for r in rows}
    assert flags["mlp/fc2/MatMul:output:0"] == "YES" and flags["mlp/fc1/MatMul:output:0"] == "NO"


def test_a_single_run_is_refused(tmp_path):
    from graphcmp.core.readers.ascend_dump import read_ascend_dump

    with pytest.raises(DumpFormatError, match="needs a comparison"):
        write_msaccucmp(read_ascend_dump(MLP / "clean" / "npu_dump"), tmp_path / "x.csv")


@pytest.mark.shared
@pytest.mark.parametrize(("case", "run"), [("A_cnn_bug", "20250305101530"), ("C_cnn_overflow", "20250305103045")])
def test_matches_msaccucmps_own_result(tmp_path, case, run):
    root = shared(f"ascend/{case}")
    report = _report(root / f"npu_dump/{run}/0/cnn_small/1/0", root / "golden", root / "fusion_rule/cnn_small.json")
    write_msaccucmp(report, tmp_path / "result.csv")
    header, rows = _rows(tmp_path / "result.csv")
    theirs_header, theirs = _rows(next(shared(f"ascend/msaccucmp/{case}").glob("result_*.csv")))
    assert header == theirs_header
    mine = {r[7]: r for r in rows}
    compared = 0
    for row in theirs:
        if row[7] == "NaN":
            continue  # Data and Const ops: no dump file, graphcmp writes no row
        ours = mine[row[7]]
        assert ours[:3] == row[:3] and ours[5] == row[5] and ours[9] == row[9], row[7]
        for col in range(10, 20):
            if col == 15 or row[col] in ("NaN", "nan"):
                continue
            if ours[col] == "NaN":  # graphcmp's metrics are NaN where the non-finite values differ (inf vs finite)
                assert not np.isfinite(float(row[col])), (row[7], header[col])
                continue
            assert np.isclose(float(ours[col]), float(row[col]), rtol=1e-4, atol=2e-6), (row[7], header[col])
            compared += 1
    assert compared > 150  # every metric of every row msaccucmp computed (A: 250, C: 162)
