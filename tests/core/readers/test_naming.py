"""Node ids: the string-split fast path gives what the regular expressions give, on real and odd ids."""

from __future__ import annotations

import orjson
import pytest

from graphcmp.core.jsonio import read_json
from graphcmp.core.readers import naming
from graphcmp.core.readers.naming import _parse_by_expressions, parse_node_id, parse_node_ids
from graphcmp.core.records import Direction, NodeKind
from tests.conftest import DATA

_ODD_IDS = [
    "Module..Linear.forward.0", "Module.B.forward.0", "Cell..B.forward.0", "Cell.x.forward.0",
    "Module.a.B.sideways.0", "Module.a.B.forward.x", "Module.a.B.forward.0\n", "Module.a.B.forward.٣",
    "Mödule.a.B.forward.0", "Module.a.B.parameters_grad", "Module.a.B.parameters_grad.3",
    "Functional..0.forward", "Functional.a.0.forward\n", "Functional.linear.x.forward", "1a.b.0.forward",
    "_a.b.0.forward", "X.forward", "forward", ".forward", "a..forward", "Tensor.__add__.3.backward",
    "Primitive.matmul.MatMul.10.forward", "Distributed.all_reduce.0.forward", "Module.a.b.c.D.backward.12",
    "Module.B.parameters_grad.0", "Module.a..B.forward.0", "Module.a.B.0.forward", "Cell.a.B.parameters_grad.٣",
    "Module.a..parameters_grad.0", "Module.a.B.forward.0.1", "a.b.c.forward", "1.2.3.backward",
]


def _real_ids() -> list[str]:
    ids: list[str] = []
    for construct in sorted(DATA.rglob("construct.json")):
        ids.extend(orjson.loads(construct.read_bytes()))
        dump = construct.with_name("dump.json")
        if dump.is_file():  # parameter-gradient ids are in dump.json only
            ids.extend(read_json(dump).value.get("data", {}))
    return ids


@pytest.mark.parametrize("node_id", _ODD_IDS)
def test_fast_path_agrees_with_the_expressions_on_odd_ids(node_id):
    assert parse_node_id(node_id) == _parse_by_expressions(node_id)


def test_fast_path_agrees_with_the_expressions_on_real_ids(monkeypatch):
    ids = _real_ids()
    assert len(ids) > 1000
    decided = []
    monkeypatch.setattr(naming, "_parse_by_expressions", lambda i: decided.append(i) or _parse_by_expressions(i))
    parse_node_ids(ids)
    assert len(decided) < 0.2 * len(ids)  # the fast path is the common one
    monkeypatch.undo()
    assert [parse_node_id(i) for i in ids] == [_parse_by_expressions(i) for i in ids]


def test_kinds_of_common_ids():
    assert parse_node_id("Module.layers.0.mlp.MLP.backward.3") == (NodeKind.MODULE, "MLP", Direction.BACKWARD, 3)
    assert parse_node_id("Tensor.__add__.3.backward") == (NodeKind.API, "__add__", Direction.BACKWARD, 3)
    assert parse_node_id("Module.a.B.parameters_grad.2") == (NodeKind.PARAM_GRAD, "B", Direction.BACKWARD, 2)
    assert parse_node_id("Module..Linear.forward.0") == (NodeKind.API, "Module..Linear.forward.0", Direction.NONE, -1)


def _columns(node_ids: list[str]) -> tuple[list[int], list[str], list[int]]:
    parsed = [parse_node_id(i) for i in node_ids]
    return [int(p[0]) for p in parsed], [p[1] for p in parsed], [int(p[2]) for p in parsed]


@pytest.mark.parametrize("node_id", _ODD_IDS)
def test_columns_agree_with_parse_node_id_on_odd_ids(node_id):
    assert parse_node_ids([node_id]) == _columns([node_id])


def test_columns_agree_with_parse_node_id_on_real_ids():
    ids = _real_ids() + _ODD_IDS
    assert sum("parameters_grad" in i for i in ids) > 10
    assert parse_node_ids(ids) == _columns(ids)
