"""Tensor-parallel merge on real TP=2 dumps: which tensors are split, replicated or partial, and their statistics."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.distributed.merge import job_steps, read_step
from graphcmp.core.distributed.topology import LayoutError
from graphcmp.core.distributed.tp_merge import merge_tensor_parallel, parse_shape
from graphcmp.core.records import Role
from graphcmp.core.shards import PARTIAL, REPLICATED, SINGLE, SPLIT
from tests.conftest import DATA, shared

PARALLEL = DATA / "parallel"
FC1 = "Module.module.decoder.layers.0.mlp.linear_fc1.ColumnParallelLinear.forward.0"
FC2 = "Module.module.decoder.layers.0.mlp.linear_fc2.RowParallelLinear.forward.0"
LN = "Module.module.decoder.layers.1.input_layernorm.LayerNorm.forward.0"


def _graphs(root):
    return read_step(next(iter(job_steps(root).values())), workers=1)


@pytest.fixture(scope="module")
def stage0():
    graphs = _graphs(PARALLEL / "tp2pp2")
    return merge_tensor_parallel([(0, graphs[0]), (1, graphs[1])])


@pytest.fixture(scope="module")
def tp1():
    return _graphs(PARALLEL / "tp1")[0]


def _row(graph, node, role, slot):
    t = graph.tensors
    return next(k for k in graph.tensor_rows(node).tolist() if t.role[k] == role and t.slot[k] == slot)


def _same_stats(merged, bench, node, role, slot, rel=1e-5):
    a, b = merged.tensors.stats[_row(merged, node, role, slot)], bench.tensors.stats[_row(bench, node, role, slot)]
    return np.allclose(a, b, rtol=rel, atol=1e-6 * np.abs(b[:2]).max())


@pytest.mark.parametrize("node, role, slot, kind, dim, shape", [
    (FC1, Role.PARAM, "weight", SPLIT, 0, "[256, 64]"),  # column parallel: output features sliced
    (FC1, Role.PARAM, "bias", SPLIT, 0, "[256]"),
    (FC1, Role.INPUT, "0", REPLICATED, -1, "[2, 16, 64]"),
    (FC1, Role.OUTPUT, "0", SPLIT, 2, "[2, 16, 256]"),
    (FC2, Role.PARAM, "weight", SPLIT, 1, "[64, 256]"),  # row parallel: input features sliced
    (FC2, Role.PARAM, "bias", REPLICATED, -1, "[64]"),
    (FC2, Role.INPUT, "0", SPLIT, 2, "[2, 16, 256]"),
    (FC2, Role.OUTPUT, "0", REPLICATED, -1, "[2, 16, 64]"),
    ("Functional.gelu.0.forward", Role.OUTPUT, "0", SPLIT, 2, "[2, 16, 256]"),  # between the two linears
    (LN, Role.PARAM, "weight", REPLICATED, -1, "[64]"),
])
def test_kind_dimension_and_logical_shape(stage0, tp1, node, role, slot, kind, dim, shape):
    k = _row(stage0, node, role, slot)
    assert (int(stage0.shards.kind[k]), int(stage0.shards.split_dim[k]), stage0.tensors.shape[k]) == (kind, dim, shape)
    assert stage0.tensors.shape[k] == tp1.tensors.shape[_row(tp1, node, role, slot)]
    assert _same_stats(stage0, tp1, node, role, slot)
    assert stage0.shards.ranks_of(k) == [0, 1]


def test_row_parallel_matmul_output_is_the_all_reduce_output(stage0, tp1):
    matmul = next(c for c in stage0.children(FC2) if c.startswith("Torch.matmul"))
    reduce = next(c for c in stage0.children(FC2) if c.startswith("Distributed.all_reduce"))
    k = _row(stage0, matmul, Role.OUTPUT, "0")
    assert stage0.shards.kind[k] == PARTIAL
    assert np.array_equal(stage0.tensors.stats[k], stage0.tensors.stats[_row(stage0, reduce, Role.OUTPUT, "0")])
    assert _same_stats(stage0, tp1, matmul, Role.OUTPUT, "0")
    partials = stage0.shards.stats[stage0.shards.rows(k)]
    assert not np.allclose(partials[0], stage0.tensors.stats[k])  # each rank held a partial sum


def test_split_statistics_combine_exactly(stage0):
    k = _row(stage0, FC1, Role.PARAM, "weight")
    shards = stage0.shards.stats[stage0.shards.rows(k)]
    merged = stage0.tensors.stats[k]
    assert merged[0] == shards[:, 0].max() and merged[1] == shards[:, 1].min()
    assert np.isclose(merged[2], shards[:, 2].mean()) and np.isclose(merged[3], np.sqrt((shards[:, 3] ** 2).sum()))


def test_values_and_single_rank_runs_keep_one_shard(stage0, tp1):
    t = stage0.tensors
    values = np.flatnonzero(stage0.shards.kind == SINGLE)
    assert len(values) and all(t.shape[k] in ("", "scalar") for k in values.tolist())
    alone = merge_tensor_parallel([(0, tp1)])
    assert (alone.shards.kind == SINGLE).all() and (alone.shards.rank == 0).all()
    assert np.array_equal(alone.tensors.stats, tp1.tensors.stats)


def test_desynchronised_replica_stays_replicated_and_is_found():
    graphs = _graphs(PARALLEL / "tp2_desync")
    merged = merge_tensor_parallel([(0, graphs[0]), (1, graphs[1])])
    disagreeing = merged.shards.disagreeing().tolist()
    weight = _row(merged, LN, Role.PARAM, "weight")
    assert weight in disagreeing and merged.shards.kind[weight] == REPLICATED
    assert merged.tensors.shape[weight] == "[64]"  # not taken for two halves of a [128] tensor
    assert np.array_equal(merged.tensors.stats[weight], graphs[0].tensors.stats[_row(graphs[0], LN, Role.PARAM,
                                                                                       "weight")])
    first = min(disagreeing, key=lambda k: int(merged.tensors.node[k]))
    assert merged.nodes.ids[merged.tensors.node[first]] == LN


def test_ranks_that_made_other_calls_cannot_be_merged(tp1):
    graphs = _graphs(PARALLEL / "tp2pp2")
    with pytest.raises(LayoutError, match=r"ranks 0 and 2 of the tensor-parallel group \[0, 2\] did not make the "
                                          r"same calls"):
        merge_tensor_parallel([(0, graphs[0]), (2, graphs[2])])


def test_parse_shape():
    assert parse_shape("[4, 8]") == (4, 8) and parse_shape("") is None


@pytest.mark.shared
@pytest.mark.parametrize("job", ["tp2", "tp2_perturb"])
def test_no_replica_disagrees_in_the_shared_tp2_jobs(job):
    graphs = _graphs(shared(f"msprobe/dumps/parallel/{job}"))
    merged = merge_tensor_parallel([(0, graphs[0]), (1, graphs[1])])
    assert len(merged.shards.disagreeing()) == 0
    # 32 all_reduce calls (16 in RowParallelLinear forwards, 16 in ColumnParallelLinear backwards): input and matmul
    assert int(np.count_nonzero(merged.shards.kind == PARTIAL)) == 64
