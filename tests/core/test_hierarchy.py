"""Micro-steps (gradient accumulation passes) of a built hierarchy (core/hierarchy.py)."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.readers.msprobe import parse_msprobe, read_msprobe
from tests.conftest import DATA, shared

T = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5, "Norm": 1.0}


def _run(calls: list[str], parents: dict[str, str | None] | None = None):
    data = {name: {"input_args": [T], "output": [T]} for name in calls}
    return parse_msprobe({"data": data}, parents or {})


def _steps(graph) -> dict[str, int]:
    return {graph.nodes.ids[r]: int(graph.nodes.micro_step[r]) for r in range(1, len(graph))}


def test_each_forward_after_a_backward_starts_a_micro_step():
    graph = _run(["Functional.linear.0.forward", "Functional.linear.0.backward",
                  "Functional.linear.1.forward", "Functional.linear.1.backward"])
    steps = _steps(graph)
    assert steps["Functional.linear.0.backward"] == 0 and steps["Functional.linear.1.forward"] == 1
    assert int(graph.nodes.micro_step.max()) + 1 == 2


def test_communication_after_the_last_backward_closes_the_step():
    # dist4: forward, backward, then the gradients' all_reduce and other collectives, all "forward" calls
    graph = _run(["Functional.linear.0.forward", "Functional.linear.0.backward",
                  "Distributed.all_reduce.0.forward", "Distributed.broadcast.0.forward"])
    assert int(graph.nodes.micro_step.max()) == 0


def test_a_forward_call_inside_a_backward_module_belongs_to_that_backward():
    # a tensor-parallel layer's backward all_reduces its input gradient: a "forward" call inside a backward module
    module = "Module.fc.ColumnParallelLinear"
    calls = [f"{module}.forward.0", "Functional.linear.0.forward", f"{module}.backward.0", "Tensor.matmul.0.forward",
             "Distributed.all_reduce.0.forward", "Functional.linear.0.backward",
             f"{module}.forward.1", "Functional.linear.1.forward", f"{module}.backward.1", "Tensor.matmul.1.forward",
             "Functional.linear.1.backward"]
    parents = {"Functional.linear.0.forward": f"{module}.forward.0", "Tensor.matmul.0.forward": f"{module}.backward.0",
               "Distributed.all_reduce.0.forward": f"{module}.backward.0",
               "Functional.linear.1.forward": f"{module}.forward.1", "Tensor.matmul.1.forward": f"{module}.backward.1"}
    steps = _steps(_run(calls, {**{c: None for c in calls}, **parents}))
    assert steps["Tensor.matmul.0.forward"] == steps["Distributed.all_reduce.0.forward"] == 0
    assert steps[f"{module}.forward.1"] == steps["Tensor.matmul.1.forward"] == 1
    assert max(steps.values()) == 1


def test_a_run_cut_to_one_micro_batch_has_one():
    graph = read_msprobe(DATA / "parallel" / "tp1" / "step0" / "rank0")
    assert set(np.unique(graph.nodes.micro_step).tolist()) == {0}


@pytest.mark.shared
@pytest.mark.parametrize("run, expected", [
    ("msprobe/dumps/dist4/statistics/baseline/step0/rank0", 1),  # one forward/backward, then collectives
    ("msprobe/dumps/dist4/statistics/perturb_rank2/step1/rank3", 1),
    ("msprobe/dumps/parallel/tp1/step0/rank0", 2),  # two micro-batches per step (its README)
    ("msprobe/dumps/parallel/tp2/step0/rank1", 2),  # ... with all_reduce calls inside backward modules
    ("msprobe/dumps/parallel/tp2pp2/step0/rank3", 2),
    ("msprobe/dumps/tf_huge/statistics/baseline/step0/rank0", 4),  # --micro 4
])
def test_micro_steps_of_real_jobs(run, expected):
    graph = read_msprobe(shared(run))
    assert int(graph.nodes.micro_step.max()) + 1 == expected


def test_a_parent_never_added_is_a_bug_named_by_build():
    from graphcmp.core.errors import InternalError
    from graphcmp.core.hierarchy import HierarchyBuilder
    from graphcmp.core.records import Direction, NodeKind, RunInfo

    b = HierarchyBuilder()
    b.add_node("Functional.relu.0.forward", NodeKind.API, "relu", Direction.FORWARD, "Module.act.ReLU.forward.0", 0)
    with pytest.raises(InternalError, match=r"named parent 'Module\.act\.ReLU\.forward\.0' without adding it"):
        b.build(RunInfo(path="mem"))


def test_forward_calls_in_the_middle_of_the_backward_pass_start_no_micro_step():
    """A checkpointed block is recomputed, and a custom autograd Function's backward runs ops, during the backward
    pass: forward calls after backward calls that are not the run starting again from its first call."""
    graph = _run(["Functional.embedding.0.forward", "Functional.linear.0.forward", "Functional.linear.1.forward",
                  "Functional.linear.1.backward", "Functional.linear.3.forward",  # recomputed: a new counter
                  "Tensor.__mul__.0.forward", "Functional.linear.0.backward", "Functional.embedding.0.backward",
                  "Functional.embedding.1.forward", "Functional.linear.2.forward", "Functional.linear.2.backward"])
    steps = _steps(graph)
    assert steps["Functional.linear.3.forward"] == steps["Tensor.__mul__.0.forward"] == 0
    assert steps["Functional.linear.0.backward"] == 0
    assert steps["Functional.embedding.1.forward"] == 1 and steps["Functional.linear.2.backward"] == 1


def test_a_checkpointed_modules_parameter_gradients_stand_under_its_backward_call():
    """A module under torch.utils.checkpoint has forward.0 and forward.1 (the recomputation) and only backward.1:
    its parameters_grad.0 belongs to backward.1, in the backward pass, not to the forward call."""
    module = "Module.block.Linear"
    calls = [f"{module}.forward.0", f"{module}.forward.1", f"{module}.backward.1", f"{module}.parameters_grad.0"]
    data = {name: {"input_args": [T], "output": [T]} for name in calls[:3]}
    data[calls[3]] = {"weight": T}
    graph = parse_msprobe({"data": data}, {name: None for name in calls[:3]})
    parent = graph.nodes.parent[graph.row(calls[3])]
    assert graph.nodes.ids[parent] == f"{module}.backward.1"
