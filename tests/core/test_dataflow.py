"""Data flow of one run: producer links recovered from statistics, a graph's own edges, nodes folded when drawn."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from graphcmp.core import dataflow
from graphcmp.core.dataflow import flow_edges, folded_sources, latest_producers
from graphcmp.core.hierarchy import execution_keys
from graphcmp.core.readers import read_graph
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.records import Direction, Role
from graphcmp.samples import sample_pair
from tests.conftest import DATA, shared

RESNET = "formats/ge/samples/oam-tools/complie_path/ge_proto_00000062_Build.txt.gz"


def _pairs(graph, edges) -> set[tuple[str, str]]:
    ids = graph.nodes.ids
    return {(ids[a], ids[b]) for a, b in zip(edges.src.tolist(), edges.dst.tolist())}


def test_dump_edges_follow_the_transformer_layer():
    graph = read_msprobe(sample_pair()[0])
    pairs = _pairs(graph, flow_edges(graph))
    chain = ["Functional.layer_norm.2.forward", "Functional.linear.2.forward", "Torch.relu.1.forward",
             "Functional.dropout.4.forward", "Functional.linear.3.forward", "Functional.dropout.5.forward",
             "Tensor.__add__.4.forward"]
    assert all(link in pairs for link in itertools.pairwise(chain))
    assert ("Functional.layer_norm.2.forward", "Tensor.__add__.4.forward") in pairs  # the residual connection
    assert ("Torch.relu.1.backward", "Functional.linear.2.backward") in pairs  # gradients flow backwards
    ids = graph.nodes.ids
    parent = graph.nodes.parent
    leaves = set(np.flatnonzero(np.bincount(parent[parent >= 0], minlength=len(graph)) == 0).tolist())
    assert {graph.row(a) for a, _ in pairs} <= leaves and {graph.row(b) for _, b in pairs} <= leaves
    assert not any(ids[0] in p for p in pairs)


def test_the_producer_is_the_latest_call_that_handed_the_tensor_on():
    graph = read_msprobe(sample_pair()[0])
    t = graph.tensors
    leaf = np.bincount(graph.nodes.parent[graph.nodes.parent >= 0], minlength=len(graph)) == 0
    producer = latest_producers(graph, execution_keys(graph), leaf)
    add = graph.row("Tensor.__add__.1.forward")
    inputs = [k for k in graph.tensor_rows("Tensor.__add__.1.forward").tolist() if t.role[k] == Role.INPUT]
    makers = {graph.nodes.ids[int(producer[k])] for k in inputs if producer[k] >= 0}
    # the attention output reaches the add through dropout (p=0: same statistics); the dropout handed it on
    assert makers == {"Functional.dropout.0.forward", "Tensor.__add__.0.forward"}
    keys = execution_keys(graph)
    found = producer >= 0
    assert (keys[producer[found]] < keys[t.node[found]]).all()
    assert graph.nodes.direction[add] == Direction.FORWARD


def test_a_graph_keeps_its_own_edges_and_folds_its_constants():
    graph = read_graph(DATA / "ge_tf_init" / "ge_proto_00000000_Build.txt")
    edges = flow_edges(graph)
    assert edges is graph.edges and edges.control.any()
    into = folded_sources(graph, edges)
    ids = graph.nodes.ids
    assert {ids[r]: ids[c] for r, c in enumerate(into.tolist()) if c >= 0} == {
        "Variable/initial_value": "Variable/Assign"}


def test_a_dump_folds_nothing():
    graph = read_msprobe(sample_pair()[0])
    assert (folded_sources(graph, flow_edges(graph)) < 0).all()


@pytest.mark.shared
def test_resnet50_folds_constants_and_keeps_the_conv_chain():
    graph = read_graph(shared(RESNET))
    into = folded_sources(graph, flow_edges(graph))
    ops = np.array(graph.nodes.op, dtype=object)
    folded = into >= 0
    assert set(ops[folded]) == {"Const", "Data"} and folded[ops == "Const"].all()
    assert (ops[into[folded]] != "Const").all()
    conv1 = graph.row("conv1conv1_relu")
    assert into[conv1] < 0 and np.count_nonzero(into == conv1) == 2  # its weight and bias
    assert np.count_nonzero(~folded[1:]) == 170 - 108 - 1


def test_a_tensor_of_one_value_links_nothing():
    from graphcmp.core.readers.msprobe import parse_msprobe

    def t(mx, mn):
        return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [4], "Max": mx, "Min": mn,
                "Mean": (mx + mn) / 2, "Norm": 1.0}

    graph = parse_msprobe({"data": {
        "Torch.zeros.0.forward": {"output": [t(0.0, 0.0)]},
        "Torch.ones.0.forward": {"input_args": [t(0.0, 0.0)], "output": [t(1.0, -1.0)]},
        "Torch.relu.0.forward": {"input_args": [t(1.0, -1.0)], "output": [t(1.0, 0.0)]}}})
    assert _pairs(graph, flow_edges(graph)) == {("Torch.ones.0.forward", "Torch.relu.0.forward")}


@pytest.mark.shared
def test_zero_biases_do_not_chain_the_broadcasts():
    graph = read_msprobe(shared("msprobe/dumps/dist4/statistics/perturb_rank2/step0/rank2"))
    pairs = _pairs(graph, flow_edges(graph))
    broadcast = "Distributed.broadcast"
    assert not [p for p in pairs if p[0].startswith(broadcast) and p[1].startswith(broadcast)]
    assert ("Functional.embedding.0.forward", "Tensor.__add__.0.forward") in pairs


@pytest.mark.parametrize("n", [0, 1, 2, 7, 5000, 70000])
def test_dense_codes_are_the_ranks_numpy_unique_gives(n):
    rng = np.random.default_rng(n)
    wide = rng.integers(0, 2**63, n, dtype=np.int64).view(np.uint64) * np.uint64(2) + np.uint64(1)
    near = (rng.integers(0, 40, n).astype(np.uint64) << np.uint64(50)) | rng.integers(0, 8, n).astype(np.uint64)
    for values in (wide[rng.integers(0, max(n, 1), n)], near, rng.integers(0, 3, n).astype(np.uint64)):
        # `near`: values that share their high bits and differ in the bits that carry the index while sorting
        assert np.array_equal(dataflow.dense_codes(values), np.unique(values, return_inverse=True)[1].reshape(-1))


@pytest.mark.parametrize("top", [3, 2**40, 2**62])
def test_stable_order_is_numpys_stable_argsort(top):
    keys = np.random.default_rng(top % 1000).integers(0, top, 30000)
    assert np.array_equal(dataflow._stable_order(keys), np.argsort(keys, kind="stable"))  # 2**62: no room, argsort


def test_trained_parameters_are_those_with_a_gradient_of_their_module_and_name():
    from graphcmp.core.readers.msprobe import parse_msprobe

    t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
         "Norm": 1.0}
    data = {
        "Module.fc.Linear.forward.0": {"input_args": [t], "output": [t], "parameters": {"weight": t, "bias": t}},
        "Module.bn.BatchNorm2d.forward.0": {"input_args": [t], "output": [t],
                                            "parameters": {"weight": t, "running_mean": t}},
        "Module.fc.Linear.parameters_grad": {"weight": t, "bias": t},
        "Module.bn.BatchNorm2d.parameters_grad": {"weight": t},
    }
    graph = parse_msprobe({"data": data})
    t_ = graph.tensors
    trained = dataflow.trained_parameters(graph)
    named = {(graph.nodes.ids[t_.node[k]], t_.slot[k]) for k in np.flatnonzero(trained).tolist()}
    assert named == {("Module.fc.Linear.forward.0", "weight"), ("Module.fc.Linear.forward.0", "bias"),
                     ("Module.bn.BatchNorm2d.forward.0", "weight")}  # a moving mean has no gradient
    assert dataflow.trained_parameters(graph) is trained and not trained.flags.writeable  # once per run
    del data["Module.fc.Linear.parameters_grad"], data["Module.bn.BatchNorm2d.parameters_grad"]
    without = parse_msprobe({"data": data})
    assert np.array_equal(dataflow.trained_parameters(without), without.tensors.role == Role.PARAM)
