"""Per-shard records: exact combination of slice statistics, provenance, rank attribution, JSON round trip."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import orjson
import pytest

from graphcmp.core.distributed.merge import job_steps, merge_runs, read_step
from graphcmp.core.export.graph_json import graph_from_dict, graph_to_dict
from graphcmp.core.jsonio import dumps_strict
from graphcmp.core.records import Role
from graphcmp.core.shards import REPLICATED, SPLIT, attribute_rank, combine_split, dtype_eps, node_provenance
from graphcmp.core.tensorio import read_tensor
from tests.conftest import DATA

FC1 = "Module.module.decoder.layers.0.mlp.linear_fc1.ColumnParallelLinear.forward.0"


def _stats(a: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64)
    return np.array([a.max(), a.min(), a.mean(), np.sqrt((a ** 2).sum())])


@pytest.mark.parametrize("axis, parts", [(0, 2), (1, 4), (-1, 3)])
def test_combined_slices_give_the_statistics_of_the_whole(axis, parts):
    real = DATA / "tensors" / "cnn_conv2_perturbed" / "baseline" / "Functional.conv2d.1.forward.input.0.pt"
    tensor = np.asarray(read_tensor(real), np.float64).reshape(-1, 64)
    if tensor.ndim < 2:
        tensor = tensor.reshape(len(tensor), 1)
    sizes = [s.size for s in np.array_split(tensor, parts, axis=axis)]
    slices = np.array_split(tensor, parts, axis=axis)
    combined, present = combine_split(np.array([_stats(s) for s in slices]), np.ones((parts, 4), bool),
                                      np.array(sizes))
    assert np.allclose(combined, _stats(tensor), rtol=1e-12) and present.all()


def test_a_statistic_is_present_when_every_slice_recorded_it():
    present = np.array([[True, True, False, True], [True, True, True, True]])
    assert combine_split(np.ones((2, 4)), present, np.array([1, 1]))[1].tolist() == [True, True, False, True]


def test_dtype_eps():
    assert dtype_eps("torch.float16") == 2.0 ** -10 and dtype_eps("torch.int64") == 0.0 and dtype_eps("?") == 0.0


@pytest.fixture(scope="module")
def merged():
    graphs = read_step(next(iter(job_steps(DATA / "parallel" / "tp2pp2").values())), workers=1)
    return merge_runs(graphs, path="tp2pp2", step=0).graph


def _weight(graph):
    t = graph.tensors
    return next(k for k in graph.tensor_rows(FC1).tolist() if t.role[k] == Role.PARAM and t.slot[k] == "weight")


def test_provenance_of_merged_and_plain_nodes(merged):
    origin = node_provenance(merged, merged.row(FC1))
    assert (origin.ranks, origin.source_id, origin.rank) == ((0, 1), FC1, None)
    embedding = "Module.module.embedding.word_embeddings.Embedding.forward.0"
    assert node_provenance(merged, merged.row(embedding)).ranks == (0, 1)


def test_a_slice_above_the_whole_names_its_rank(merged):
    k = _weight(merged)
    rows = merged.shards.rows(k)
    bench = replace(merged, shards=None)  # the bench holds the whole: the merged statistics
    assert attribute_rank(merged, bench, np.array([k]), np.array([k]), 1e-6) is None  # both slices inside
    stats = merged.shards.stats.copy()
    stats[rows[1], 0] = merged.tensors.stats[k, 0] * 1.1 + 0.01
    planted = replace(merged, shards=replace(merged.shards, stats=stats))
    assert attribute_rank(planted, bench, np.array([k]), np.array([k]), 1e-6) == 1
    assert attribute_rank(planted, bench, np.array([k]), np.array([k]), 0.5) is None  # within a large noise


def test_the_one_replica_that_departs_from_the_bench(merged):
    t = merged.tensors
    k = next(k for k in range(len(t)) if merged.shards.kind[k] == REPLICATED and t.shape[k] == "[64]"
             and t.present[k].all() and t.stats[k, 0] != 0)
    rows = merged.shards.rows(k)
    stats = merged.shards.stats.copy()
    stats[rows[0]] = stats[rows[0]] * 1.05
    planted = replace(merged, shards=replace(merged.shards, stats=stats))
    assert attribute_rank(planted, replace(merged, shards=None), np.array([k]), np.array([k]), 1e-6) == int(
        merged.shards.rank[rows[0]])


def test_tensor_slice_errors_name_the_one_bad_slice(merged):
    k = _weight(merged)
    rows = merged.shards.rows(k)
    error = np.full(len(merged.shards), np.nan)
    error[rows] = [0.0, 0.2]
    planted = replace(merged, shards=replace(merged.shards, error=error))
    assert merged.shards.kind[k] == SPLIT
    assert attribute_rank(planted, replace(merged, shards=None), np.array([k]), np.array([k]), 1e-6) == 1


def test_shards_round_trip_through_the_graph_document(merged):
    back = graph_from_dict(orjson.loads(dumps_strict(graph_to_dict(merged))))
    a, b = merged.shards, back.shards
    assert np.array_equal(a.tensor, b.tensor) and np.array_equal(a.rank, b.rank) and a.node == b.node
    assert np.array_equal(a.stats, b.stats, equal_nan=True) and np.array_equal(a.kind, b.kind)
    assert back.nodes.attrs == merged.nodes.attrs and b.error is None
