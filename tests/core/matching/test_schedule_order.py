"""Calls the two runs make in another order or nest under another parent (a pipeline job against a run without
pipeline): module calls pair by their id wherever they stand, calls between modules by the data they take."""

from __future__ import annotations

from graphcmp.core.matching import default_matchers, match_graphs
from graphcmp.core.readers.msprobe import parse_msprobe


def _t(scale: float, n: int = 8) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [n], "Max": scale, "Min": -scale,
            "Mean": 0.1 * scale, "Norm": scale * 2.0}


def _partner(table, npu, bench, node_id: str) -> str | None:
    b = int(table.npu_to_bench[npu.row(node_id)])
    return bench.nodes.ids[b] if b >= 0 else None


def test_a_backward_call_under_another_parent_pairs_by_its_id():
    # a pipeline stage whose model takes an input needing a gradient nests its layers' backward calls under the
    # model's backward call; a run without pipeline records them at the top level
    model_bwd, head_bwd = "Module.module.GPT.backward.0", "Module.module.head.Linear.backward.0"
    data = {"Functional.linear.0.backward": {"input": [_t(1.0)], "output": [_t(2.0)]},
            head_bwd: {"input": [_t(1.0)], "output": [_t(2.0)]}, model_bwd: {"input": [_t(1.0)], "output": [_t(3.0)]}}
    npu = parse_msprobe({"data": data}, {"Functional.linear.0.backward": head_bwd, head_bwd: model_bwd,
                                         model_bwd: None})
    bench = parse_msprobe({"data": data}, {"Functional.linear.0.backward": head_bwd, head_bwd: None,
                                           model_bwd: None})
    table = match_graphs(npu, bench, default_matchers())
    assert _partner(table, npu, bench, head_bwd) == head_bwd
    assert _partner(table, npu, bench, "Functional.linear.0.backward") == "Functional.linear.0.backward"


def test_gradient_reductions_in_another_order_pair_by_the_gradient_they_reduce():
    # npu (a pipeline job) reduces the last stage's gradient first; bench in parameter order
    grads = {"a": _t(1.0), "b": _t(5.0)}

    def run(order):
        data, construct = {}, {}
        for name in ("a", "b"):
            key = f"Module.{name}.Linear.parameters_grad"
            data[key] = {"weight": grads[name]}
            construct[key] = None
        for k, name in enumerate(order):
            call = f"Distributed.all_reduce.{k}.forward"
            data[call] = {"input_args": [grads[name]], "output": [grads[name]]}
            construct[call] = None
        return parse_msprobe({"data": data}, construct)

    npu, bench = run(["b", "a"]), run(["a", "b"])
    table = match_graphs(npu, bench, default_matchers())
    assert _partner(table, npu, bench, "Distributed.all_reduce.0.forward") == "Distributed.all_reduce.1.forward"
    assert _partner(table, npu, bench, "Distributed.all_reduce.1.forward") == "Distributed.all_reduce.0.forward"
