"""HierarchyBuilder.build's columns: the tensor table placed part by part, the tensor order a reader expects, stacks
and parents looked up once (core/hierarchy.py)."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.records import Direction, NodeKind, RunInfo
from graphcmp.core.texts import CodedTexts, TextCodes

CALLS = [f"Functional.op{k}.0.forward" for k in range(7)]
MODULE = "Module.block.Block.forward.0"


def _coded(texts: list[str]) -> TextCodes:
    names = list(dict.fromkeys(texts))
    return TextCodes(np.array([names.index(t) for t in texts], np.int32), names)


def _builder(order: list[str], rows: list[int] | None, *, coded: bool = True) -> HierarchyBuilder:
    """The module and its calls, added in reverse; tensors in two parts naming the calls in order (the module's
    output last, as a dump records it after its calls), two tensors per call."""
    b = HierarchyBuilder()
    b.add_nodes([MODULE, *reversed(CALLS)], [int(NodeKind.MODULE), *[int(NodeKind.API)] * len(CALLS)],
                ["Block", *["op"] * len(CALLS)], [int(Direction.FORWARD)] * (len(CALLS) + 1),
                [None, *[MODULE] * len(CALLS)], [float(len(CALLS)), *map(float, range(len(CALLS) - 1, -1, -1))],
                [True] * (len(CALLS) + 1))
    if rows is not None:
        b.expect_tensor_order(order, np.array(rows))
    first = 0.0
    for part in (CALLS[:4], [*CALLS[4:], MODULE]):
        nodes = [n for n in part for _ in range(2)]
        slots = ["0", "1"] * len(part)
        column = (lambda texts: _coded(texts)) if coded else list
        b.add_tensors(column(nodes), [0, 1] * len(part), column(slots), dtype=column(["torch.float32"] * len(nodes)),
                      shape=column(["[2]"] * len(nodes)), stats=np.arange(first, first + 4 * len(nodes)).reshape(-1, 4),
                      present=np.ones((len(nodes), 4), bool), md5=column([""] * len(nodes)),
                      file=column([""] * len(nodes)), value=column([""] * len(nodes)))
        first += 4 * len(nodes)
    return b


def _rows(order: list[str]) -> list[int]:
    added = [MODULE, *reversed(CALLS)]
    return [added.index(n) for n in order]


ORDER = [*CALLS, MODULE]


@pytest.mark.parametrize("order, rows", [
    (ORDER, _rows(ORDER)),  # the order the tensors follow
    (ORDER, [*_rows(ORDER)[1:], 0]),  # wrong rows: checked, looked up
    ([CALLS[0], "Functional.nodata.0.forward", *CALLS[1:], MODULE], [_rows(ORDER)[0], 0, *_rows(ORDER)[1:]]),
    (list(reversed(ORDER)), _rows(list(reversed(ORDER)))),  # another order: looked up
    (ORDER[:3], _rows(ORDER[:3])),  # too short for the first part
])
def test_an_expected_tensor_order_builds_the_same_run_as_looking_each_node_up(order, rows):
    expected = _builder(ORDER, None).build(RunInfo(path="mem"))
    graph = _builder(order, rows).build(RunInfo(path="mem"))
    assert graph == expected
    assert graph.tensors.node.tolist() == expected.tensors.node.tolist()


def test_tensors_are_ordered_by_node_each_nodes_own_in_the_order_added():
    graph = _builder(ORDER, _rows(ORDER)).build(RunInfo(path="mem"))
    t = graph.tensors
    assert [graph.nodes.ids[n] for n in t.node.tolist()] == [n for n in [MODULE, *CALLS] for _ in range(2)]
    assert t.slot == ("0", "1") * (len(CALLS) + 1)
    assert isinstance(t.slot, CodedTexts) and t.slot.names == ("0", "1")
    stats = np.arange(4.0 * 2 * (len(CALLS) + 1)).reshape(-1, 4)  # the module's two tensors were added last
    assert t.stats.tolist() == np.concatenate([stats[-2:], stats[:-2]]).tolist()
    plain = _builder(ORDER, None, coded=False).build(RunInfo(path="mem"))
    assert plain == graph and not isinstance(plain.tensors.slot, CodedTexts)


def test_the_last_stack_set_on_a_node_stays_and_the_root_has_none():
    b = HierarchyBuilder()
    b.add_node("DefaultModel", NodeKind.MODULE, "", Direction.NONE, None, 0)
    b.add_node(CALLS[0], NodeKind.API, "op", Direction.FORWARD, None, 1)
    b.add_node(CALLS[1], NodeKind.API, "op", Direction.FORWARD, None, 2)
    first, second = b.add_stack(["File a.py, line 1"]), b.add_stack(["File b.py, line 2"])
    assert b.set_stacks([CALLS[0], CALLS[1], "DefaultModel", "Functional.gone.0.forward"], first) == 1
    assert b.set_stacks(iter([CALLS[1]]), second) == 0
    graph = b.build(RunInfo(path="mem"), group_apis=False)
    stack = dict(zip(graph.nodes.ids, graph.nodes.stack.tolist()))
    assert stack == {"DefaultModel": -1, CALLS[0]: first, CALLS[1]: second}


def test_a_parent_missing_then_added_is_found():
    b = HierarchyBuilder()
    b.add_node(CALLS[0], NodeKind.API, "op", Direction.FORWARD, MODULE, 1)
    assert b.missing_parents() == {MODULE: 1.0}
    b.add_node(CALLS[1], NodeKind.API, "op", Direction.FORWARD, MODULE, 2)
    b.add_node(MODULE, NodeKind.MODULE, "Block", Direction.FORWARD, None, 0)
    assert b.missing_parents() == {}
    graph = b.build(RunInfo(path="mem"))
    parent = {graph.nodes.ids[r]: graph.nodes.ids[p] for r, p in enumerate(graph.nodes.parent.tolist()) if p >= 0}
    assert parent[CALLS[0]] == parent[CALLS[1]] == MODULE


_FC, _ACT = "Module.fc.Linear.forward.0", "Module.act.ReLU.forward.0"


def _run(stats: float, parent_of_relu: str = _FC) -> HierarchyBuilder:
    b = HierarchyBuilder()
    b.add_node(_FC, NodeKind.MODULE, "Linear", Direction.FORWARD, None, 0)
    b.add_node(_ACT, NodeKind.MODULE, "ReLU", Direction.FORWARD, None, 2)
    b.add_node("Functional.linear.0.forward", NodeKind.API, "linear", Direction.FORWARD, _FC, 1)
    b.add_node("Functional.relu.0.forward", NodeKind.API, "relu", Direction.FORWARD, parent_of_relu, 3)
    b.add_node("Functional.relu.0.backward", NodeKind.API, "relu", Direction.BACKWARD, None, 4)
    b.add_tensors(["Functional.relu.0.forward", "Functional.linear.0.forward"], [2, 2], ["0", "0"],
                  dtype=["torch.float32"] * 2, shape=["[2]"] * 2, stats=np.array([[stats, 0, 0, 0], [1, 0, 0, 0]]),
                  present=np.ones((2, 4), bool), md5=["", ""], file=["", ""], value=["", ""])
    return b


def test_runs_of_the_same_nodes_share_their_node_table_and_what_is_derived_from_it(monkeypatch):
    from graphcmp.core import dataflow
    from graphcmp.core.hierarchy import reusing_node_tables

    made = []
    twins = dataflow._forward_twins
    monkeypatch.setattr(dataflow, "_forward_twins", lambda graph: made.append(graph) or twins(graph))
    info = RunInfo(path="mem")
    runs = ((5.0, _FC), (7.0, _FC), (7.0, _ACT))
    alone = [_run(*run).build(info) for run in runs]
    with reusing_node_tables():
        first, second, moved = (_run(*run).build(info) for run in runs)
    assert second.nodes is first.nodes and moved.nodes is not second.nodes  # another parent: built again
    for graph, again in zip(alone, (first, second, moved)):
        assert again.nodes == graph.nodes and again.tensors == graph.tensors
    assert second.tensors.stats[:, 0].tolist() != first.tensors.stats[:, 0].tolist()  # each its own tensors
    made.clear()
    assert dataflow.forward_twins(second) is dataflow.forward_twins(first)  # derived from the shared table once
    assert len(made) == 1 and dataflow.forward_twins(moved).tolist() == dataflow.forward_twins(alone[2]).tolist()
    backward = moved.row("Functional.relu.0.backward")
    assert len(made) == 3 and moved.nodes.ids[dataflow.forward_twins(moved)[backward]] == "Functional.relu.0.forward"
