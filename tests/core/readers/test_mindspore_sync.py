"""MindSpore synchronous dumps: raw .bin files per kernel tensor, names carrying shape, dtype and format."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.compare import compare_graphs
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers.detect import detect_format
from graphcmp.core.readers.mindspore_sync import read_bin_tensor, read_mindspore_sync
from graphcmp.core.records import Role
from graphcmp.core.tensorcmp import tensor_metrics_for

OPS = ("Default/fc1-Dense/MatMul-op3", "Default/relu-ReLU/ReLU-op5", "Default/fc2-Dense/MatMul-op7")


def _write(folder, name, role, index, array, dtype="Float32", fmt="DefaultFormat"):
    dims = "_".join(map(str, array.shape))
    path = folder / f"{name.replace('/', '--')}_{role}_{index}_shape_{dims}_{dtype}_{fmt}.bin"
    array.tofile(path)
    return path


def _dump(root, scale: float, dtype: str):
    """A 2-layer MLP run (fc2's weight scaled by `scale`) written as MindSpore 1.1 writes a synchronous dump."""
    folder = root / "net" / "0" / "iteration_0"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(3)
    x, w1, w2 = rng.standard_normal((4, 8)), rng.standard_normal((8, 8)) * 0.3, rng.standard_normal((8, 4)) * 0.3
    cast = np.float16 if dtype == "Float16" else np.float32
    h = (x @ w1).astype(cast)
    r = np.maximum(h, 0)
    y = (r.astype(np.float32) @ (w2 * np.array([scale, 1, 1, 1]))).astype(cast)
    for op, ins, outs in ((OPS[0], [x.astype(cast)], [h]), (OPS[1], [h], [r]), (OPS[2], [r], [y])):
        for k, a in enumerate(ins):
            _write(folder, op, "input", k, a, dtype)
        for k, a in enumerate(outs):
            _write(folder, op, "output", k, a, dtype)
    return folder


def test_a_synchronous_dump_is_read(tmp_path):
    _dump(tmp_path / "npu", 1.0, "Float16")
    assert detect_format(tmp_path / "npu") == "mindspore_sync"
    graph = read_mindspore_sync(tmp_path / "npu")
    assert (graph.info.step, graph.info.rank, graph.info.task) == (0, 0, "tensor")
    assert graph.nodes.parent[graph.row(OPS[0])] == graph.row("Default/fc1-Dense")
    assert graph.nodes.op[graph.row(OPS[1])] == "ReLU"
    t = graph.tensors
    row = next(k for k in range(len(t.slot)) if graph.nodes.ids[t.node[k]] == OPS[1] and t.role[k] == Role.OUTPUT)
    assert t.dtype[row] == "float16" and t.shape[row] == "[4, 8]" and t.stats[row][1] == 0.0


def test_first_divergence_against_a_float32_run(tmp_path):
    npu = read_mindspore_sync(_dump(tmp_path / "npu", 1.5, "Float16").parents[2])
    bench = read_mindspore_sync(_dump(tmp_path / "bench", 1.0, "Float32").parents[2])
    report = compare_graphs(npu, bench, tensor_metrics=tensor_metrics_for(npu, bench))
    assert report.analysis().first.node == OPS[2]


def test_device_format_keeps_its_device_shape_and_short_file_is_refused(tmp_path):
    folder = tmp_path / "iteration_3"
    folder.mkdir()
    path = _write(folder, "Default/conv-Conv2d/Conv2D-op2", "output", 0, np.ones((1, 1, 2, 2, 16), np.float16),
                  "Float16", "NC1HWC0")
    graph = read_mindspore_sync(tmp_path)
    assert graph.info.step == 3
    assert dict(graph.nodes.attrs[graph.row("Default/conv-Conv2d/Conv2D-op2")])["layout"].startswith("device format")
    assert read_bin_tensor(path).shape == (1, 1, 2, 2, 16)
    path.write_bytes(path.read_bytes()[:10])
    with pytest.raises(DumpFormatError, match="holds 10 bytes"):
        read_bin_tensor(path)
