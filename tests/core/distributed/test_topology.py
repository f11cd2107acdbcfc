"""Layout detection from the communication calls of real TP/PP dumps, stated layouts, what cannot be merged."""

from __future__ import annotations

import pytest

from graphcmp.core.distributed.merge import job_steps, read_step
from graphcmp.core.distributed.topology import (
    LayoutContradiction,
    LayoutError,
    LayoutSpec,
    comm_records,
    detect_layout,
    model_chunk,
    parse_layout,
)
from graphcmp.core.readers.msprobe import parse_msprobe
from tests.conftest import DATA, shared

PARALLEL = DATA / "parallel"


def _graphs(root):
    return read_step(next(iter(job_steps(root).values())), workers=1)


@pytest.fixture(scope="module")
def tp2pp2():
    return _graphs(PARALLEL / "tp2pp2")


def test_tp_and_pp_groups_come_from_the_recorded_calls(tp2pp2):
    layout = detect_layout(tp2pp2)
    assert layout.tp_groups == ((0, 1), (2, 3))
    assert layout.pp_groups == ((0, 2), (1, 3))  # stage order: rank 0 sends first, rank 2 receives first
    assert (layout.tp, layout.pp, layout.dp, layout.vpp) == (2, 2, 1, 1)
    assert layout.replicas() == [[(0, 1), (2, 3)]]
    assert [layout.stage(r) for r in range(4)] == [0, 0, 1, 1]


def test_comm_records_name_group_peer_and_enclosing_module(tp2pp2):
    calls = comm_records(tp2pp2[2])
    recv = calls[0]
    assert (recv.node, recv.op, recv.group, recv.peers, recv.module_row) == (
        "Distributed.irecv.0.forward", "irecv", (0, 2), (("recv", 0),), -1)
    reduce = next(c for c in calls if c.op == "all_reduce")
    assert reduce.group == (2, 3) and not reduce.in_backward
    assert tp2pp2[2].nodes.ids[reduce.module_row].endswith("RowParallelLinear.forward.0")
    assert any(c.op == "all_reduce" and c.in_backward and
               tp2pp2[2].nodes.ids[c.module_row].endswith("ColumnParallelLinear.backward.0") for c in calls)


def test_a_single_rank_is_its_own_group():
    graphs = _graphs(PARALLEL / "tp1")
    layout = detect_layout(graphs)
    assert (layout.tp_groups, layout.pp_groups, layout.dp) == (((0,),), (), 1)


def test_stated_layout_gives_megatron_groups(tp2pp2):
    stated = detect_layout(tp2pp2, parse_layout("tp=2,pp=2"))
    assert stated.source == "stated" and stated.tp_groups == ((0, 1), (2, 3))
    assert set(map(frozenset, stated.pp_groups)) == {frozenset({0, 2}), frozenset({1, 3})}


@pytest.mark.parametrize("text, message", [
    ("tp=2,pp=2,order=pp-tp-cp-ep-dp", r"TP groups \[0,2\] \[1,3\], but the ranks' all_reduce calls inside "
                                       r"modules use \[0,1\] \[2,3\]"),
    ("tp=1,pp=2", r"TP groups \[0\] \[1\] \[2\] \[3\], but"),
    ("tp=2,pp=1", r"PP groups none, but the ranks that send to each other are \[0,2\] \[1,3\]"),
    ("tp=3", r"needs ranks 0\.\.5, the job has 4"),
])
def test_a_stated_layout_the_recorded_groups_contradict(tp2pp2, text, message):
    with pytest.raises(LayoutContradiction, match=message):
        detect_layout(tp2pp2, parse_layout(text))


@pytest.mark.parametrize("text, message", [
    ("tp=0", "positive integer"), ("tq=2", "not one of"), ("order=tp-pp", "once each"),
])
def test_bad_layout_statement(text, message):
    with pytest.raises(LayoutError, match=message):
        parse_layout(text)


def test_parse_layout_reads_every_size():
    assert parse_layout("tp=4, pp=2, vpp=2, dp=2") == LayoutSpec(tp=4, pp=2, vpp=2, dp=2)


def test_stated_sizes_must_cover_the_ranks(tp2pp2):
    with pytest.raises(LayoutError, match=r"needs ranks 0\.\.7"):
        detect_layout(tp2pp2, parse_layout("tp=4,pp=2"))


def test_missing_rank_is_named_with_the_call_that_needs_it(tp2pp2):
    three = {r: g for r, g in tp2pp2.items() if r != 3}
    with pytest.raises(LayoutError, match=r"rank 3 has no dump, but rank 1's Distributed\.\w+\.\d+\.forward"):
        detect_layout(three)


def _record(op, group, module=None):
    t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
         "Norm": 1.0}
    data = {f"Distributed.{op}.0.forward": {"input_args": [t], "input_kwargs": {
        "group": {"type": "torch.ProcessGroup", "group_ranks": list(group), "group_id": "g"}}, "output": [t]}}
    construct = {}
    if module:
        data[module] = {"input_args": [t], "output": [t]}
        construct = {module: None, f"Distributed.{op}.0.forward": module}
    return parse_msprobe({"data": data}, construct, source=f"job/step0/rank{group[0]}")


def test_all_to_all_is_expert_or_context_parallelism():
    graphs = {0: _record("all_to_all", (0, 1)), 1: _record("all_to_all", (0, 1))}
    with pytest.raises(LayoutError, match=r"rank 0: Distributed\.all_to_all\.0\.forward .*expert or context"):
        detect_layout(graphs)


def test_a_sharded_collective_inside_a_module_is_not_merged():
    module = "Module.mlp.linear_fc2.RowParallelLinear.forward.0"
    graphs = {0: _record("reduce_scatter", (0, 1), module), 1: _record("reduce_scatter", (0, 1), module)}
    with pytest.raises(LayoutError, match="sequence-parallel or unknown parallel linear"):
        detect_layout(graphs)


def test_model_chunk_of_a_model_list():
    assert model_chunk("Module.1.module.decoder.layers.0.TransformerLayer.forward.0") == 1
    assert model_chunk("Module.module.decoder.layers.0.TransformerLayer.forward.0") is None


@pytest.mark.shared
@pytest.mark.parametrize("job, tp, pp, tp_groups, pp_groups", [
    ("tp1", 1, 1, ((0,),), ()),
    ("tp2", 2, 1, ((0, 1),), ()),
    ("pp2", 1, 2, ((0,), (1,)), ((0, 1),)),
    ("tp2pp2", 2, 2, ((0, 1), (2, 3)), ((0, 2), (1, 3))),
    ("tp2_perturb", 2, 1, ((0, 1),), ()),
    ("pp2_perturb", 1, 2, ((0,), (1,)), ((0, 1),)),
    ("tp2_desync", 2, 1, ((0, 1),), ()),
])
def test_layouts_of_the_shared_jobs(job, tp, pp, tp_groups, pp_groups):
    layout = detect_layout(_graphs(shared(f"msprobe/dumps/parallel/{job}")))
    assert (layout.tp, layout.pp, layout.tp_groups, layout.pp_groups) == (tp, pp, tp_groups, pp_groups)
