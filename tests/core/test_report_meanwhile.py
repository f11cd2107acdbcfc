"""Writing a result's runs in a forked process while the runs are compared (`runs_written_meanwhile`)."""

from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest

from graphcmp.core import report as report_module
from graphcmp.core.compare import compare_graphs
from graphcmp.core.dataflow import flow_edges
from graphcmp.core.npzio import read_npz
from graphcmp.core.readers.detect import read_graph
from graphcmp.core.report import load_report, runs_written_meanwhile, save_report


@pytest.fixture(scope="module")
def runs(perturb_pair):
    return read_graph(perturb_pair[0]), read_graph(perturb_pair[1])


def _same_result(a, b) -> None:
    """Equal documents (but the time written) and the same members."""
    assert sorted(zipfile.ZipFile(a).namelist()) == sorted(zipfile.ZipFile(b).namelist())

    def same(x, y, where):
        if isinstance(x, dict):
            assert list(x) == list(y), where
            for k in x.keys() - {"created"}:
                same(x[k], y[k], f"{where}.{k}")
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), where
        else:
            assert x == y, where

    same(read_npz(a), read_npz(b), "")


def _write(runs, path):
    npu, bench = runs
    with runs_written_meanwhile(npu, bench, path) as writing:
        assert writing is not None
        save_report(compare_graphs(npu, bench), path, runs=writing)


def test_the_result_is_the_one_written_in_one_go(runs, tmp_path):
    npu, bench = runs
    save_report(compare_graphs(npu, bench), tmp_path / "whole.npz")
    _write(runs, tmp_path / "meanwhile.npz")
    _same_result(tmp_path / "whole.npz", tmp_path / "meanwhile.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meanwhile.npz", "whole.npz"]  # no part left
    members = zipfile.ZipFile(tmp_path / "meanwhile.npz").namelist()
    assert members[0].startswith("npu.") and members[-1] == "document.json"  # the runs' part begins the file


def test_the_runs_flows_are_recovered_by_the_writer_not_here(perturb_pair, tmp_path):
    npu, bench = read_graph(perturb_pair[0]), read_graph(perturb_pair[1])  # fresh: no flows recovered yet
    _write((npu, bench), tmp_path / "meanwhile.npz")
    assert "flows" not in npu._cache and "flows" not in bench._cache  # the forked writer recovered them
    stored = load_report(tmp_path / "meanwhile.npz").flow_edges()
    for side, path in (("npu", perturb_pair[0]), ("bench", perturb_pair[1])):
        fresh = flow_edges(read_graph(path))
        assert len(fresh.src) and np.array_equal(stored[side].src, fresh.src)
        assert np.array_equal(stored[side].dst, fresh.dst)


def test_a_failed_writer_leaves_the_writing_to_this_process(runs, tmp_path, monkeypatch, capfd):
    def full_disk(path, part):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_module, "begin_npz", full_disk)
    npu, bench = runs
    save_report(compare_graphs(npu, bench), tmp_path / "whole.npz")
    _write(runs, tmp_path / "meanwhile.npz")
    _same_result(tmp_path / "whole.npz", tmp_path / "meanwhile.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meanwhile.npz", "whole.npz"]
    assert zipfile.ZipFile(tmp_path / "meanwhile.npz").namelist() == zipfile.ZipFile(tmp_path / "whole.npz").namelist()
    assert "Traceback" not in capfd.readouterr().err  # the writer's failure is not shown: the result is whole


def test_a_writer_that_dies_leaves_the_writing_to_this_process(runs, tmp_path, monkeypatch):
    def killed(answer, part, npu, bench):
        os._exit(9)

    monkeypatch.setattr(report_module, "_write_runs", killed)
    _write(runs, tmp_path / "meanwhile.npz")
    assert read_npz(tmp_path / "meanwhile.npz")["npu"]["nodes"]["id"] == list(runs[0].nodes.ids)
    assert [p.name for p in tmp_path.iterdir()] == ["meanwhile.npz"]


def test_a_comparison_that_fails_leaves_no_part_and_no_result(runs, tmp_path):
    npu, bench = runs
    with pytest.raises(KeyboardInterrupt), runs_written_meanwhile(npu, bench, tmp_path / "out" / "cmp.npz"):
        raise KeyboardInterrupt
    assert list((tmp_path / "out").iterdir()) == []


def test_a_json_result_is_written_in_one_go(runs, tmp_path):
    npu, bench = runs
    with runs_written_meanwhile(npu, bench, tmp_path / "cmp.json") as writing:
        assert writing is None
