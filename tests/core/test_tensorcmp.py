"""Finding a pair's tensor files inside their runs' folders, and checking them against the dump (core/tensorcmp.py)."""

from __future__ import annotations

import os
import shutil
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from graphcmp.core import tensor_kernels, tensorcmp
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers import read_graph
from graphcmp.core.tensorcmp import MissingTensorFiles, measure_pairs, recorded_shape, tensor_file
from tests.corpus.cases import OTHER, WEIGHT, tensor_dump


@pytest.fixture
def run(tmp_path):
    return read_graph(tensor_dump(tmp_path / "run", WEIGHT, shape=[8, 3, 3, 3]))


def _named(graph, name: str):
    """`graph` with its weight's recorded file name replaced by `name`."""
    files = list(graph.tensors.file)
    files[files.index("w.pt")] = name
    return replace(graph, tensors=replace(graph.tensors, file=tuple(files))), files.index(name)


def test_the_recorded_file_is_found_in_the_dump_folder(run):
    row = list(run.tensors.file).index("w.pt")
    assert tensor_file(run, row).name == "w.pt"
    graph, row = _named(run, "missing.pt")
    assert tensor_file(graph, row) is None  # no file: the pair is judged on its statistics


@pytest.mark.parametrize("name", ["../../w.pt", "../dump_tensor_data/../../x.pt", "/etc/passwd"])
def test_a_name_leading_out_of_the_folder_is_refused(run, name):
    graph, row = _named(run, name)
    with pytest.raises(DumpFormatError, match="lies outside the dump folder"):
        tensor_file(graph, row)


def test_a_special_file_in_the_folder_is_refused(run):
    folder = os.path.join(run.info.path, "dump_tensor_data")
    os.unlink(os.path.join(folder, "w.pt"))
    os.mkfifo(os.path.join(folder, "w.pt"))
    with pytest.raises(DumpFormatError, match=r"w\.pt: is a FIFO"):
        tensor_file(run, list(run.tensors.file).index("w.pt"))


def test_a_file_of_another_shape_is_refused(run, tmp_path):
    other = read_graph(tensor_dump(tmp_path / "other", WEIGHT, shape=[8, 3, 3, 3]))
    shutil.copy(OTHER, os.path.join(other.info.path, "dump_tensor_data", "w.pt"))
    rows = np.array([list(run.tensors.file).index("w.pt")])
    assert measure_pairs(run, run, rows, rows)["cosine"].tolist() == [1.0]
    with pytest.raises(DumpFormatError, match=r"w\.pt: holds a tensor of shape \[4, 32\], but the dump records "
                                              r"\[8, 3, 3, 3\]"):
        measure_pairs(other, run, rows, rows)


def test_recorded_shapes():
    assert recorded_shape("[8, 3, 3, 3]") == (8, 3, 3, 3)
    assert recorded_shape("scalar") == recorded_shape("[]") == ()
    assert recorded_shape("") is None and recorded_shape("[?, 3]") is None


def test_a_mindspore_kernel_dump_given_as_a_relative_path_is_measured(tmp_path, monkeypatch):
    """The reader records each .npy with the (relative) run folder it was given: the file must still be found."""
    from tests.conftest import DATA

    shutil.copytree(DATA / "mindspore_dump_lenet_cast", tmp_path / "case")
    monkeypatch.chdir(tmp_path)
    npu, bench = read_graph(os.path.join("case", "npu")), read_graph(os.path.join("case", "bench"))
    rows = np.flatnonzero([bool(name) for name in npu.tensors.file])
    assert len(rows) > 10 and not os.path.isabs(npu.tensors.file[rows[0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingTensorFiles)
        metrics = measure_pairs(npu, npu, rows, rows)
    assert np.isfinite(metrics["cosine"]).all() and (metrics["max_abs"] == 0).all()
    assert tensor_file(npu, rows[0]).is_file() and tensor_file(bench, rows[0]) is not None


def test_missing_tensor_files_are_named_in_a_warning(run):
    graph, row = _named(run, "missing.pt")
    rows = np.array([row])
    with pytest.warns(MissingTensorFiles, match=r"1 tensor file\(s\) the dump records .*'missing\.pt'"):
        metrics = measure_pairs(graph, run, rows, rows)
    assert np.isnan(metrics["cosine"]).all()


@pytest.mark.parametrize("fused", [False, True])
def test_pairs_measured_two_at_a_time_keep_their_order(run, tmp_path, monkeypatch, fused):
    from graphcmp.core import tensor_metrics
    from graphcmp.core.tensorio import read_tensor

    if fused:
        monkeypatch.setattr(tensor_kernels, "pays", lambda nbytes: True)
        monkeypatch.setattr(tensor_metrics, "FUSED_MIN_SIZE", 1)
    other = read_graph(tensor_dump(tmp_path / "other", WEIGHT, shape=[8, 3, 3, 3]))
    weights = os.path.join(other.info.path, "dump_tensor_data", "w.pt")
    row = list(run.tensors.file).index("w.pt")
    rows = np.array([row] * 5)
    same = measure_pairs(run, other, rows, rows)
    assert same["cosine"].tolist() == [1.0] * 5
    want = tensor_metrics.compare_tensors(read_tensor(weights), read_tensor(weights) * 2)
    np.save(weights + ".npy", read_tensor(weights) * 2)  # a bench twin scaled by 2
    files = list(other.tensors.file)
    files[row] = "w.pt.npy"
    twice = replace(other, tensors=replace(other.tensors, file=tuple(files)))
    mixed = measure_pairs(run, twice, rows, rows)
    assert np.allclose(mixed["max_abs"], want["max_abs"]) and np.allclose(mixed["cosine"], 1.0)


def test_the_first_bad_pair_by_position_is_named_whichever_fails_first(monkeypatch):
    # pair 2 fails at once on one worker while pair 1 is still measured on the other: pair 1's error is the one
    def measure(pair, fused):
        if pair[0] == 1:
            time.sleep(0.2)
        if pair[0] in (1, 2):
            raise DumpFormatError(f"pair {pair[0]}")
        return {"cosine": 1.0}

    monkeypatch.setattr(tensorcmp, "_measure_pair", measure)
    monkeypatch.setattr(tensorcmp, "_WORKERS", 2)
    pairs = [(k, Path("npu.pt"), Path("bench.pt"), "", "") for k in range(6)]
    with pytest.raises(DumpFormatError, match="pair 1"):
        list(tensorcmp._measured(pairs, False))
    assert sorted(position for position, _ in tensorcmp._measured(pairs[3:], False)) == [3, 4, 5]


def test_a_bad_pair_among_many_stops_the_comparison(run, tmp_path):
    other = read_graph(tensor_dump(tmp_path / "other", WEIGHT, shape=[8, 3, 3, 3]))
    shutil.copy(OTHER, os.path.join(other.info.path, "dump_tensor_data", "w.pt"))
    rows = np.array([list(run.tensors.file).index("w.pt")] * 6)
    with pytest.raises(DumpFormatError, match=r"w\.pt: holds a tensor of shape \[4, 32\]"):
        measure_pairs(run, other, rows, rows)
