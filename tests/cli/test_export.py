"""`graphcmp export` in-process: each target, --json, reading back, one-line errors."""

from __future__ import annotations

import json

import pytest

from graphcmp.cli.main import main
from graphcmp.core.compare import compare_vis
from graphcmp.core.readers.vis import list_vis_graphs, read_vis
from tests.conftest import DATA


@pytest.fixture(scope="module")
def cmp_json(perturb_pair, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("cmp") / "cmp.json"
    assert main(["compare", str(perturb_pair[0]), str(perturb_pair[1]), "-o", str(out), "-q"]) == 1
    return str(out)


@pytest.mark.parametrize("target,name", [("vis", "out.vis"), ("vis-db", "out.vis.db"), ("model-explorer", "me")])
def test_export_each_target(cmp_json, target, name, tmp_path, capsys):
    capsys.readouterr()
    out = tmp_path / name
    assert main(["export", cmp_json, "--to", target, "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["to"] == target and summary["nodes"] == 356 and summary["bytes"] > 0
    assert all(p.startswith(str(out)) for p in summary["paths"])
    if target != "model-explorer":
        assert compare_vis(read_vis(out)).matches.matched == 178


def test_several_steps_into_one_db(perturb_pair, tmp_path, capsys):
    files = []
    for step in (0, 1):
        npu = perturb_pair[0].parent.parent / f"step{step}" / "rank0"
        bench = perturb_pair[1].parent.parent / f"step{step}" / "rank0"
        files.append(str(tmp_path / f"cmp{step}.json"))
        main(["compare", str(npu), str(bench), "-o", files[-1], "-q"])
    assert main(["export", *files, "--to", "vis-db", "-o", str(tmp_path / "all.vis.db")]) == 0
    assert [k.step for k in list_vis_graphs(tmp_path / "all.vis.db")] == [0, 1]
    capsys.readouterr()
    assert main(["info", str(tmp_path / "all.vis.db"), "--json"]) == 0
    assert [g["matched"] for g in json.loads(capsys.readouterr().out)["graphs"]] == [178, 178]  # every step


def test_vis_files_convert_and_show_in_info(tmp_path, capsys):
    source = DATA / "vis_cnn_overflow" / "compare_v26.vis.db.gz"
    assert main(["export", str(source), "--to", "vis", "-o", str(tmp_path / "cnn.vis")]) == 0
    capsys.readouterr()
    assert main(["info", str(tmp_path / "cnn.vis"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["npu"]["nodes"] == 54


def test_errors_exit_2_with_one_line(cmp_json, tmp_path, capsys):
    assert main(["export", cmp_json, cmp_json, "--to", "vis", "-o", str(tmp_path / "x.vis")]) == 2
    assert "pass one FILE" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing.json"), "--to", "vis", "-o", str(tmp_path / "x.vis")]) == 2
    err = capsys.readouterr().err
    assert "missing.json" in err and err.count("\n") == 1
    (tmp_path / "file").write_text("x")
    assert main(["export", cmp_json, "--to", "model-explorer", "-o", str(tmp_path / "file")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_a_results_folder_becomes_one_db(perturb_pair, tmp_path, capsys):
    npu_root, bench_root = (p.parent.parent for p in perturb_pair)
    results = tmp_path / "results"
    assert main(["compare", str(npu_root), str(bench_root), "-o", str(results), "-q"]) == 1
    capsys.readouterr()
    assert main(["export", str(results), "--to", "vis-db", "-o", str(tmp_path / "job.vis.db"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"] == 4 * 178  # two steps, both sides
    assert [(k.step, k.rank) for k in list_vis_graphs(tmp_path / "job.vis.db")] == [(0, 0), (1, 0)]
    assert compare_vis(read_vis(tmp_path / "job.vis.db", 1, 0)).matches.matched == 178
    assert main(["export", str(results), "--to", "vis", "-o", str(tmp_path / "job.vis")]) == 2
    assert "results folder" in capsys.readouterr().err
    assert main(["export", str(tmp_path), "--to", "vis-db", "-o", str(tmp_path / "none.vis.db")]) == 2
    assert "no index.json" in capsys.readouterr().err


def _csv_rows(path) -> list[list[str]]:
    import csv

    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("target", ["csv", "xlsx"])
def test_table_targets_write_one_row_per_compared_tensor(cmp_json, target, tmp_path, capsys):
    from graphcmp.core.compare import load_document
    from graphcmp.core.export.table import compare_table

    capsys.readouterr()
    out = tmp_path / f"result.{target}"
    assert main(["export", cmp_json, "--to", target, "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    report = load_document(cmp_json)
    assert summary["to"] == target and summary["rows"] == len(report.npu.tensors) == len(report.pairs) == 492
    table = compare_table(report)
    if target == "csv":
        rows = _csv_rows(out)
    else:
        import openpyxl

        rows = [list(r) for r in openpyxl.load_workbook(out, read_only=True).active.iter_rows(values_only=True)]
    assert tuple(rows[0]) == table.names and len(rows) == 1 + len(table)
    assert [r[0] for r in rows[1:]] == list(table.column("NPU Name"))


def test_table_target_refuses_a_run_and_a_bad_path(perturb_pair, cmp_json, tmp_path, capsys):
    built = tmp_path / "run.json"
    assert main(["build", str(perturb_pair[0]), "-o", str(built), "-q"]) == 0
    capsys.readouterr()
    assert main(["export", str(built), "--to", "csv", "-o", str(tmp_path / "t.csv")]) == 2
    err = capsys.readouterr().err
    assert "run.json" in err and "not a comparison" in err and err.count("\n") == 1
    assert not (tmp_path / "t.csv").exists()
    assert main(["export", cmp_json, "--to", "xlsx", "-o", cmp_json]) == 2
    assert "is the input" in capsys.readouterr().err
    (tmp_path / "dir.xlsx").mkdir()
    assert main(["export", cmp_json, "--to", "xlsx", "-o", str(tmp_path / "dir.xlsx")]) == 2
    assert "dir.xlsx" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.xlsx", "run.json"]  # no part file left behind
