"""msprobe's compare result table as CSV and xlsx (graphcmp.core.export.table_files): read back, compared cell by
cell with the table, error rows highlighted."""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import numpy as np
import openpyxl
import pytest

from graphcmp.core.compare import compare_graphs, compare_paths
from graphcmp.core.errors import OutputError
from graphcmp.core.export.table import compare_table
from graphcmp.core.export.table_files import write_csv_table, write_xlsx_table, xlsx_cell
from graphcmp.core.readers.detect import read_graph
from graphcmp.core.readers.msprobe import parse_msprobe
from graphcmp.core.tensorcmp import tensor_metrics_for

DATA = Path(__file__).resolve().parents[2] / "data"


def _tensor_report():
    case = Path(os.path.abspath(DATA / "mindspore_dump_lenet_cast"))
    npu, bench = read_graph(case / "npu"), read_graph(case / "bench")
    return compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))


@pytest.fixture(scope="module", params=["statistics", "md5", "tensor", "overflow"])
def report(request, perturb_pair):
    if request.param == "statistics":
        return compare_paths(*perturb_pair)
    if request.param == "md5":
        return compare_paths(DATA / "msprobe_md5" / "npu", DATA / "msprobe_md5" / "bench")
    if request.param == "overflow":  # inf and NaN statistics
        return compare_paths(DATA / "msprobe_overflow_tokens" / "npu", DATA / "msprobe_overflow_tokens" / "bench")
    return _tensor_report()


def _csv_text(value: object) -> str:
    """What the CSV must hold for a cell (msprobe's spelling through pandas.to_csv)."""
    if isinstance(value, float) and math.isinf(value):
        return " inf" if value > 0 else " -inf"
    return str(value)


def test_csv_rows_equal_the_table(report, tmp_path) -> None:
    table = compare_table(report)
    out = tmp_path / "cmp.csv"
    result = write_csv_table(report, out)
    with open(out, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    assert result.nodes == len(table) == len(report.npu.tensors) and result.bytes == out.stat().st_size
    assert tuple(rows[0]) == table.names
    assert len(rows) - 1 == len(table)
    assert np.count_nonzero(table.pairs >= 0) == len(report.pairs)
    for written, cells in zip(rows[1:], table.rows()):
        assert written == [_csv_text(v) for v in cells]
        for text, value in zip(written, cells):
            if type(value) is float and math.isfinite(value):
                assert float(text) == value  # numbers round-trip exactly


def test_xlsx_read_back_equals_the_table_and_highlights_error_rows(report, tmp_path) -> None:
    table = compare_table(report)
    out = tmp_path / "cmp.xlsx"
    write_xlsx_table(table, out)
    sheet = openpyxl.load_workbook(out).active
    assert sheet.title == "compare_result"
    assert tuple(c.value for c in sheet[1]) == table.names
    assert sheet.max_row == 1 + len(table)
    colours = table.highlights()
    expected_fill = {"red": "FFFF0000", "yellow": "FFFFFF00"}
    for r, (cells, colour) in enumerate(zip(table.rows(), colours.tolist()), 2):
        row = sheet[r]
        assert [c.value for c in row] == [None if v == "" else xlsx_cell(v) for v in cells]
        fills = {(c.fill.fill_type, c.fill.fgColor.rgb) for c in row if c.value is not None}
        assert fills == ({("solid", expected_fill[colour])} if colour else {(None, "00000000")})
        format_ = sheet.row_dimensions[r]  # the row's own format fills its empty cells too
        assert (format_.fill.fgColor.rgb if format_.customFormat else None) == expected_fill.get(colour)
    levels = np.array(table.column("Result"), object)
    assert set(colours[levels == "error"]) <= {"red"} and set(colours[levels == "warning"]) <= {"yellow"}


def test_highlighted_rows_are_the_judged_errors_and_warnings(perturb_pair, tmp_path) -> None:
    report = compare_paths(*perturb_pair)
    out = tmp_path / "cmp.xlsx"
    write_xlsx_table(report, out)
    sheet = openpyxl.load_workbook(out, read_only=False).active
    red = sum(1 for r in range(2, sheet.max_row + 1) if sheet.cell(r, 1).fill.fgColor.rgb == "FFFF0000")
    yellow = sum(1 for r in range(2, sheet.max_row + 1) if sheet.cell(r, 1).fill.fgColor.rgb == "FFFFFF00")
    levels = report.verdicts.pair_level
    assert (red, yellow) == (np.count_nonzero(levels == 2), np.count_nonzero(levels == 1))
    assert red > 0 and yellow > 0


def test_text_is_never_a_formula_and_csv_is_utf8(tmp_path) -> None:
    leaf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
            "Norm": 1.0}
    run = parse_msprobe({"task": "statistics", "data": {"=HYPERLINK(1).relu.0.forward": {"output": [leaf]},
                                                        "Torch.加法.0.forward": {"output": [leaf]}}})
    report = compare_graphs(run, run)
    write_csv_table(report, tmp_path / "t.csv")
    names = [row[0] for row in csv.reader((tmp_path / "t.csv").read_text(encoding="utf-8").splitlines()[1:])]
    assert sorted(names) == ["'=HYPERLINK(1).relu.0.forward.output.0", "Torch.加法.0.forward.output.0"]
    write_xlsx_table(report, tmp_path / "t.xlsx")
    cells = [row[0] for row in openpyxl.load_workbook(tmp_path / "t.xlsx").active.iter_rows(min_row=2)]
    assert sorted((c.value, c.data_type) for c in cells) == [("=HYPERLINK(1).relu.0.forward.output.0", "s"),
                                                               ("Torch.加法.0.forward.output.0", "s")]


def test_a_failed_write_leaves_nothing(perturb_pair, tmp_path) -> None:
    report = compare_paths(*perturb_pair)
    (tmp_path / "taken").mkdir()
    with pytest.raises(OutputError, match="taken"):
        write_xlsx_table(report, tmp_path / "taken")
    with pytest.raises(OutputError, match="taken"):
        write_csv_table(report, tmp_path / "taken")
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]


TABLES = DATA / "msprobe_compare_tables"


def _msprobe_rows(name: str) -> list[list[str]]:
    import gzip

    with gzip.open(TABLES / name, "rt", encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize(("dumps", "name"), [("sample", "statistics_compare_result.csv.gz"),
                                             ("msprobe_md5", "md5_compare_result.csv.gz")])
def test_csv_equals_msprobes_own_table_for_the_same_dumps(dumps, name, perturb_pair, tmp_path) -> None:
    """msprobe 26.2's compare CSV of the same dump pair (tests/data/README.md): the same header, and every row
    graphcmp has holds msprobe's cells, but Result and Err_message, which graphcmp's judge writes."""
    npu, bench = perturb_pair if dumps == "sample" else (DATA / dumps / "npu", DATA / dumps / "bench")
    write_csv_table(compare_paths(npu, bench), tmp_path / "ours.csv")
    with open(tmp_path / "ours.csv", encoding="utf-8", newline="") as f:
        ours = list(csv.reader(f))
    theirs = _msprobe_rows(name)
    header = theirs[0]
    assert ours[0][:len(header)] == header
    mine = {row[0]: row for row in ours[1:]}
    msprobe = {row[0]: row for row in theirs[1:]}
    assert set(mine) <= set(msprobe)
    # msprobe lists a None argument as a row of N/A (dtype, shape, statistics); graphcmp records no tensor for it
    assert {msprobe[n][2] for n in set(msprobe) - set(mine)} == {"N/A"}
    judged = {"Result", "Err_message"}
    md5 = {"NPU MD5", "BENCH MD5"}
    compared = 0
    for n, row in mine.items():
        for c, column in enumerate(header):
            if column in judged or (column in md5 and row[4] == "[]"):  # a scalar's checksum: not read (below)
                continue
            assert row[c] == msprobe[n][c], (n, column)
            compared += 1
    assert compared > 10_000 if "statistics" in name else compared > 4_000
    results = [(row[header.index("Result")], msprobe[n][header.index("Result")]) for n, row in mine.items()]
    if "md5" in name:  # the checksum decides alone: graphcmp's verdicts are msprobe's
        assert all(a == b for a, b in results)
    else:  # graphcmp's judge flags every row msprobe flags
        assert all(a != "pass" for a, b in results if b != "pass")


def test_a_long_table_is_split_into_parts_as_msprobe_does(perturb_pair, tmp_path, monkeypatch) -> None:
    from graphcmp.core.export import table_files

    monkeypatch.setattr(table_files, "SHEET_ROWS", 200)  # msprobe splits at 1,048,500 rows
    table = compare_table(compare_paths(*perturb_pair))
    write_xlsx_table(table, tmp_path / "parts.xlsx")
    book = openpyxl.load_workbook(tmp_path / "parts.xlsx")
    assert book.sheetnames == ["part_0", "part_1", "part_2"]
    rows, fills = [], []
    for sheet in book.worksheets:
        assert tuple(c.value for c in sheet[1]) == table.names
        rows += [tuple(c.value for c in row) for row in sheet.iter_rows(min_row=2)]
        fills += [sheet.cell(r, 1).fill.fgColor.rgb for r in range(2, sheet.max_row + 1)]
    assert [len(s["A"]) - 1 for s in book.worksheets] == [164, 164, 164]
    assert rows == [tuple(None if v == "" else xlsx_cell(v) for v in row) for row in table.rows()]
    expected = {"red": "FFFF0000", "yellow": "FFFFFF00", "": "00000000"}
    assert fills == [expected[c] for c in table.highlights().tolist()]
