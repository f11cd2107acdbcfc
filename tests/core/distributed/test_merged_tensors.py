"""Tensor task: split slices joined from their files, each slice compared with its part of the bench tensor.

No parallel job was dumped in the tensor task, so this job is written here: a column-parallel linear on two ranks
(its all_reduce in backward, as Megatron's) whose weight and output slices are real values (a conv activation from
tests/data/tensors), against the same linear on one rank holding the whole tensors.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from graphcmp.core.distributed.merge import job_steps, merge_runs, read_step
from graphcmp.core.distributed.merged import compare_merged
from graphcmp.core.records import Role
from graphcmp.core.tensorio import read_tensor
from tests.conftest import DATA

MODULE = "Module.fc.ColumnParallelLinear"
REAL = DATA / "tensors" / "cnn_conv2_perturbed" / "baseline" / "Functional.conv2d.1.forward.input.0.pt"


def _leaf(array: np.ndarray, name: str) -> dict:
    flat = array.astype(np.float64).ravel().tolist()  # exactly rounded sums: the same for any order of the values
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": list(array.shape), "Max": max(flat),
            "Min": min(flat), "Mean": math.fsum(flat) / len(flat), "Norm": math.sqrt(math.fsum(x * x for x in flat)),
            "data_name": name}


def _rank(folder: Path, weight: np.ndarray, out: np.ndarray, group: list[int] | None) -> None:
    data_dir = folder / "dump_tensor_data"
    data_dir.mkdir(parents=True)
    forward, backward = f"{MODULE}.forward.0", f"{MODULE}.backward.0"
    np.save(data_dir / "w.npy", weight)
    np.save(data_dir / "y.npy", out)
    data = {forward: {"input_args": [], "output": [_leaf(out, "y.npy")],
                      "parameters": {"weight": _leaf(weight, "w.npy")}}}
    construct = {forward: None}
    if group:
        grad = np.ones((2, weight.shape[1]), np.float32)
        np.save(data_dir / "g.npy", grad)
        reduce = "Distributed.all_reduce.0.forward"
        data[backward] = {"input": [_leaf(np.ones_like(out), "y.npy")], "output": [_leaf(grad, "g.npy")]}
        data[reduce] = {"input_args": [_leaf(grad, "g.npy")], "output": [_leaf(grad, "g.npy")],
                        "input_kwargs": {"group": {"type": "torch.ProcessGroup", "group_ranks": group}}}
        construct.update({backward: None, reduce: backward})
    (folder / "dump.json").write_text(json.dumps({"task": "tensor", "level": "mix", "data": data}))
    (folder / "construct.json").write_text(json.dumps(construct))


def _job(tmp: Path, shuffle_rank1: bool) -> tuple[Path, Path]:
    values = np.asarray(read_tensor(REAL), np.float32).reshape(-1)
    weight, out = values[:64].reshape(8, 8), values[64:80].reshape(2, 8)
    parts = [(weight[:4], out[:, :4]), (weight[4:].copy(), out[:, 4:].copy())]
    if shuffle_rank1:  # rows swapped: every statistic of the slice stays the same, its values do not
        parts[1] = (parts[1][0][::-1].copy(), parts[1][1][:, ::-1].copy())
    for rank, (w, y) in enumerate(parts):
        _rank(tmp / "npu" / "step0" / f"rank{rank}", w, y, [0, 1])
    _rank(tmp / "bench" / "step0" / "rank0", weight, out, None)
    return tmp / "npu", tmp / "bench"


def _merged(root: Path):
    return merge_runs(read_step(next(iter(job_steps(root).values())), workers=1), step=0).graph


def test_split_slices_join_and_compare_whole(tmp_path):
    npu, bench = _job(tmp_path, shuffle_rank1=False)
    report = compare_merged(_merged(npu), _merged(bench))
    t = report.npu.tensors
    weight = next(k for k in range(len(t)) if t.role[k] == Role.PARAM)
    assert report.npu.shards.split_dim[weight] == 0 and t.shape[weight] == "[8, 8]"
    k = int(np.flatnonzero(report.pairs.npu == weight)[0])
    assert np.isclose(report.pairs.metrics["cosine"][k], 1.0)
    assert np.allclose(report.npu.shards.error[report.npu.shards.rows(weight)], 0.0)
    assert report.analysis().first is None


def test_a_shuffled_slice_is_found_and_named_by_its_tensor(tmp_path):
    npu, bench = _job(tmp_path, shuffle_rank1=True)
    report = compare_merged(_merged(npu), _merged(bench))
    t = report.npu.tensors
    weight = next(k for k in range(len(t)) if t.role[k] == Role.PARAM)
    k = int(np.flatnonzero(report.pairs.npu == weight)[0])
    assert report.pairs.metrics["identical"][k]  # the statistics cannot tell
    assert report.pairs.metrics["cosine"][k] < 0.99
    errors = report.npu.shards.error[report.npu.shards.rows(weight)]
    assert errors[0] == 0.0 and errors[1] > 0.1
    first = report.analysis().first
    assert (first.node, first.rank, first.ranks) == (f"{MODULE}.forward.0", 1, (0, 1))
