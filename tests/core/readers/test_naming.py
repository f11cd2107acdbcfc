"""Node ids: the string-split fast path gives what the regular expressions give, on real and odd ids."""

from __future__ import annotations

import orjson
import pytest

from graphcmp.core.readers.naming import _parse_by_expressions, _split_common, parse_node_id
from graphcmp.core.records import Direction, NodeKind
from tests.conftest import DATA

_ODD_IDS = [
    "Module..Linear.forward.0", "Module.B.forward.0", "Cell..B.forward.0", "Cell.x.forward.0",
    "Module.a.B.sideways.0", "Module.a.B.forward.x", "Module.a.B.forward.0\n", "Module.a.B.forward.٣",
    "Mödule.a.B.forward.0", "Module.a.B.parameters_grad", "Module.a.B.parameters_grad.3",
    "Functional..0.forward", "Functional.a.0.forward\n", "Functional.linear.x.forward", "1a.b.0.forward",
    "_a.b.0.forward", "X.forward", "forward", ".forward", "a..forward", "Tensor.__add__.3.backward",
    "Primitive.matmul.MatMul.10.forward", "Distributed.all_reduce.0.forward", "Module.a.b.c.D.backward.12",
]


def _real_ids() -> list[str]:
    ids: list[str] = []
    for construct in sorted(DATA.rglob("construct.json")):
        ids.extend(orjson.loads(construct.read_bytes()))
    return ids


@pytest.mark.parametrize("node_id", _ODD_IDS)
def test_fast_path_agrees_with_the_expressions_on_odd_ids(node_id):
    assert parse_node_id(node_id) == _parse_by_expressions(node_id)


def test_fast_path_agrees_with_the_expressions_on_real_ids():
    ids = _real_ids()
    assert len(ids) > 1000
    assert sum(_split_common(i) is not None for i in ids) > 0.8 * len(ids)  # the fast path is the common one
    assert [parse_node_id(i) for i in ids] == [_parse_by_expressions(i) for i in ids]


def test_kinds_of_common_ids():
    assert parse_node_id("Module.layers.0.mlp.MLP.backward.3") == (NodeKind.MODULE, "MLP", Direction.BACKWARD, 3)
    assert parse_node_id("Tensor.__add__.3.backward") == (NodeKind.API, "__add__", Direction.BACKWARD, 3)
    assert parse_node_id("Module.a.B.parameters_grad.2") == (NodeKind.PARAM_GRAD, "B", Direction.BACKWARD, 2)
    assert parse_node_id("Module..Linear.forward.0") == (NodeKind.API, "Module..Linear.forward.0", Direction.NONE, -1)
