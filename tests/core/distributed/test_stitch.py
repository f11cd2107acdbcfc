"""Pipeline stitching of a real TP2 x PP2 job: logical ids, execution order, joined containers, provenance."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.distributed.merge import job_steps, merge_runs, read_step
from graphcmp.core.records import NodeKind, Role
from graphcmp.core.shards import node_provenance
from tests.conftest import DATA, shared

PARALLEL = DATA / "parallel"
L3_FC1 = "Module.module.decoder.layers.3.mlp.linear_fc1.ColumnParallelLinear.forward.0"


def _graphs(root):
    return read_step(next(iter(job_steps(root).values())), workers=1)


@pytest.fixture(scope="module")
def merged():
    return merge_runs(_graphs(PARALLEL / "tp2pp2"), path="tp2pp2", step=0).graph


@pytest.fixture(scope="module")
def tp1():
    return merge_runs(_graphs(PARALLEL / "tp1"), path="tp1", step=0).graph


def _real(ids):
    return {i for i in ids if not i.startswith("Apis_Between_Modules")}


def test_logical_ids_are_those_of_a_single_device_run(merged, tp1):
    extra = _real(merged.nodes.ids) - _real(tp1.nodes.ids)
    assert extra and all(i.startswith("Distributed.") for i in extra)
    assert _real(tp1.nodes.ids) <= set(merged.nodes.ids)


def test_a_later_stage_layer_gets_its_global_index_and_keeps_its_own_id(merged):
    origin = node_provenance(merged, merged.row(L3_FC1))
    assert origin.ranks == (2, 3) and origin.rank is None
    assert origin.source_id == "Module.module.decoder.layers.1.mlp.linear_fc1.ColumnParallelLinear.forward.0"


def test_api_counters_are_renumbered_in_execution_order(merged, tp1):
    t = merged.tensors
    for api in [c for c in merged.children(L3_FC1) if not c.startswith("Distributed.")]:
        origin = node_provenance(merged, merged.row(api))
        assert origin.source_id != api  # stage 1 counts its own calls from 0
        for k in merged.tensor_rows(api).tolist():
            b = next(j for j in tp1.tensor_rows(api).tolist()
                     if tp1.tensors.role[j] == t.role[k] and tp1.tensors.slot[j] == t.slot[k])
            assert np.allclose(t.stats[k], tp1.tensors.stats[b], rtol=1e-5, atol=1e-6)


def test_the_model_root_joins_every_stage(merged, tp1):
    root = "Module.module.GPTModel.forward.0"
    assert node_provenance(merged, merged.row(root)).ranks == (0, 1, 2, 3)
    shapes = {(int(merged.tensors.role[k]), merged.tensors.slot[k]): merged.tensors.shape[k]
              for k in merged.tensor_rows(root).tolist()}
    assert shapes[(Role.OUTPUT, "0")] == "[2, 16, 128]"  # the last stage's logits, not stage 0's hidden state
    assert shapes == {(int(tp1.tensors.role[k]), tp1.tensors.slot[k]): tp1.tensors.shape[k]
                      for k in tp1.tensor_rows(root).tolist()}


def test_structure_and_order_match_the_single_device_run(merged, tp1):
    def parent(graph, node_id):
        up = graph.nodes.ids[graph.nodes.parent[graph.row(node_id)]]
        return "root" if up.startswith("Apis_Between_Modules") or up == graph.root else up

    common = [i for i in merged.nodes.ids[1:] if i in tp1 and not i.startswith("Apis_Between_Modules")]
    assert all(parent(merged, i) == parent(tp1, i) for i in common)
    rows = [tp1.row(i) for i in common]
    assert rows == sorted(rows)
    back = "Module.module.decoder.layers.3.TransformerLayer.backward.0"
    assert parent(merged, back) == "Module.module.decoder.TransformerBlock.backward.0"


def test_shards_name_the_rank_and_own_id_of_every_tensor(merged):
    s = merged.shards
    assert np.array_equal(np.unique(s.tensor), np.arange(len(merged.tensors)))
    for k in merged.tensor_rows(L3_FC1).tolist():
        assert s.ranks_of(k) == [2, 3]
        assert {s.node[r] for r in s.rows(k).tolist()} == {node_provenance(merged, merged.row(L3_FC1)).source_id}


def test_kinds_survive_the_stitch(merged):
    t = merged.tensors
    weight = next(k for k in merged.tensor_rows(L3_FC1).tolist() if t.role[k] == Role.PARAM and t.slot[k] == "weight")
    kind, dim = int(merged.shards.kind[weight]), int(merged.shards.split_dim[weight])
    assert (kind, dim, t.shape[weight]) == (2, 0, "[256, 64]")
    assert int(np.count_nonzero(merged.nodes.kind == NodeKind.MODULE)) > 0


@pytest.mark.shared
@pytest.mark.parametrize("job", ["pp2", "tp2pp2", "tp2"])
def test_shared_jobs_stitch_to_the_tp1_ids_and_statistics(job):
    merged = merge_runs(_graphs(shared(f"msprobe/dumps/parallel/{job}")), step=0).graph
    tp1 = merge_runs(_graphs(shared("msprobe/dumps/parallel/tp1")), step=0).graph
    assert _real(tp1.nodes.ids) <= set(merged.nodes.ids)
    t, b = merged.tensors, tp1.tensors
    worst = 0.0
    for k in range(len(t)):
        node = merged.nodes.ids[t.node[k]]
        if node not in tp1 or not t.present[k].all():
            continue
        j = next((j for j in tp1.tensor_rows(node).tolist() if b.role[j] == t.role[k] and b.slot[j] == t.slot[k]), None)
        scale = np.abs(b.stats[j, :2]).max()
        if j is not None and np.isfinite(scale) and scale > 0:
            worst = max(worst, float(np.nanmax(np.abs(t.stats[k] - b.stats[j]) / scale)))
    assert worst < 1e-4  # README: merged statistics agree with tp1 to float rounding
