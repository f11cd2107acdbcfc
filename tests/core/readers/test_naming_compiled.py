"""The compiled node id parser gives `parse_node_ids`'s columns, element by element, on real, synthetic and odd ids,
and decides the plain ids itself (not by handing everything to Python)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import orjson
import pytest

from graphcmp.core.jsonio import read_json
from graphcmp.core.readers.naming import parse_node_ids
from graphcmp.core.readers.naming_compiled import parse_id_columns, parse_joined
from graphcmp.core.readers.naming_kernels import _parse_spans
from graphcmp.core.records import Direction, NodeKind
from tests.conftest import DATA

ROOT = DATA.parents[1]
DUMPS = sorted(p for folder in (DATA, ROOT / "sample_graphs") for p in folder.rglob("dump.json"))
SYNTHETIC = Path("/tmp/graphcmp_synth/200k/npu/dump.json")

API, MODULE, PARAM_GRAD = int(NodeKind.API), int(NodeKind.MODULE), int(NodeKind.PARAM_GRAD)
FORWARD, BACKWARD, NONE = int(Direction.FORWARD), int(Direction.BACKWARD), int(Direction.NONE)

ODD_IDS = [
    "Módule.a.Linear.forward.0", "Functional.lineár.0.forward", "Functional.linear.0.forwárd",
    "Module..x.forward.0", "Module.a..forward.0", "Functional.linear.03.forward", "Functional..3.forward",
    "1abc.x.3.forward", "_a.b.0.forward", "a-b.c.0.forward", "Module.fc.Linear.parameters_grad",
    "Module.fc.Linear.parameters_grad.2", "Cell.x.Dense.backward.7", "Cell.x.Dense.parameters_grad.0",
    "Primitive.matmul.MatMul.0.forward", "Mint.add.0.backward", "Functional.linear.+3.forward",
    "Module.fc.Linear.forward.+3", "Functional.linear.٣.forward", "Module.fc.Linear.forward.٣",
    "Functional.linear.3.forward ", " Functional.linear.3.forward", "Functional.my op.3.forward",
    "Module.my layer.Linear.forward.0", "Module.fc.Linear.forward. 0", "", ".", "..", "...", "....",
    "a.b.c.d", "Module.", "Module.x", "Module.x.y", "Module.x.y.z", "Module.x.Linear.forward.0",
    "Module.B.forward.0", "Cell..B.forward.0", "Module.a.B.sideways.0", "Module.a.B.forward.x",
    "Module.a.B.forward.0\n", "Functional.a.0.forward\n", "Functional\n.a.0.forward", "Module.a.B.forward.0.1",
    "Functional.linear.999999999999999999.forward", "Module.fc.Linear.forward.999999999999999999",
    "Functional.linear.9223372036854775807.forward", "Module.fc.Linear.backward.1000000000000000000",
    "Functional.linear.000000000000000000000000042.forward", "Module.a.B.forward.", "Functional.linear..forward",
    "Tensor.__add__.3.backward", "Functional.lin.ear.3.forward", "Module.encoder.layers.0.Linear.forward.12",
    "Module.a.b.c.D.backward.12", "Cell.a.B.parameters_grad.٣", "Module.a..parameters_grad.0",
    "Module.a.B.0.forward", "1.2.3.backward", "a.b.c.forward", "A.b.0.forward", "Cell.x.forward.0",
    "Module.a.Linear.Forward.0", "Functional.linear.3.Forward", "Module.a.parameters_grad.forward.0",
    "Module.x.parameters_grad.parameters_grad.1", "Functional.forward.0.forward", "Module.forward.forward.forward.0",
    "Module\u00a0x.a.B.forward.0", "Functional.linear.3.backward\u0000", "Distributed.all_reduce.0.forward",
    "Functional.\ud800.0.forward", "Module.a.\ud800.forward.0",
]
"""Ids on each edge of the fast rule: non-ASCII parts, empty parts, signs and non-ASCII digits in number parts,
spaces, newlines, long counters, every prefix and direction spelling."""


def _check(ids: list[str]) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Assert that both entry points give `parse_node_ids`'s columns for `ids`; return parse_joined's."""
    counters: list[int] = []
    kinds, ops, directions = parse_node_ids(ids, counters=counters)
    got = parse_joined(ids)
    assert got[0].dtype == np.int8 and got[2].dtype == np.int8 and got[3].dtype == np.int64
    assert got[0].tolist() == kinds
    assert got[1] == ops
    assert got[2].tolist() == directions
    assert got[3].tolist() == counters
    assert all(a is b for a, b in zip(got[1], ops))  # both interned: the same objects
    assert len({id(op) for op in got[1]}) == len(set(ops))  # one string per distinct op
    if "\n" not in "".join(ids):  # the buffer alone, no strings given: those left to Python decoded from it
        raw = "\n".join(ids).encode("utf-8", "surrogatepass")
        lengths = np.array([len(s.encode("utf-8", "surrogatepass")) for s in ids], np.int64)
        ends = np.cumsum(lengths + 1) - 1
        alone = parse_id_columns(np.frombuffer(raw, np.uint8), ends - lengths, ends)
        assert alone[0].tolist() == kinds and alone[1] == ops and alone[2].tolist() == directions
        assert alone[3].tolist() == counters
    return got


def _decided(ids: list[str]) -> np.ndarray:
    """Whether the compiled pass decided each id itself."""
    raw = "\n".join(ids).encode("utf-8", "surrogatepass")
    lengths = np.array([len(s.encode("utf-8", "surrogatepass")) for s in ids], np.int64)
    ends = np.cumsum(lengths + 1) - 1
    return _parse_spans(np.frombuffer(raw, np.uint8), ends - lengths, ends)[3] >= 0


def _dump_ids(path: Path) -> list[str]:
    ids = list(read_json(path).value.get("data", {}))
    construct = path.with_name("construct.json")
    if construct.is_file():
        structure = orjson.loads(construct.read_bytes())
        ids.extend(structure)
        ids.extend(parent for parent in structure.values() if isinstance(parent, str))
    return ids


def test_there_are_dumps_to_read():
    assert len(DUMPS) >= 10


@pytest.mark.parametrize("path", DUMPS, ids=[str(p.relative_to(ROOT)) for p in DUMPS])
def test_every_id_of_every_dump(path):
    ids = _dump_ids(path)
    if not ids:
        pytest.skip("no node ids")
    _check(ids)


def test_all_dumps_ids_at_once_mostly_decided_compiled():
    ids = [node_id for path in DUMPS for node_id in _dump_ids(path)]
    _check(ids)
    decided = _decided(ids)
    assert decided.mean() > 0.9  # the real ids are the fast rule's: the compiled pass decides them


def test_synthetic_200k_run():
    if not SYNTHETIC.is_file():
        pytest.skip(f"{SYNTHETIC} absent (bench/make_synthetic.py writes it)")
    ids = list(orjson.loads(SYNTHETIC.read_bytes())["data"])
    _check(ids)
    assert _decided(ids).all()


def test_odd_ids():
    _check(ODD_IDS)
    _check(ODD_IDS[::-1])
    for node_id in ODD_IDS:  # one at a time: the buffer of a single id, the first and the last span
        _check([node_id])


EXPECTED = {
    "Module.encoder.layers.0.Linear.forward.12": (MODULE, "Linear", FORWARD, 12),
    "Cell.x.Dense.backward.7": (MODULE, "Dense", BACKWARD, 7),
    "Module.fc.Linear.parameters_grad.2": (PARAM_GRAD, "Linear", BACKWARD, 2),
    "Cell.x.Dense.parameters_grad.0": (PARAM_GRAD, "Dense", BACKWARD, 0),
    "Functional.linear.03.forward": (API, "linear", FORWARD, 3),
    "Primitive.matmul.MatMul.0.forward": (API, "MatMul", FORWARD, 0),
    "Tensor.__add__.3.backward": (API, "__add__", BACKWARD, 3),
    "_a.b.0.forward": (API, "b", FORWARD, 0),
    "Functional.linear.999999999999999999.forward": (API, "linear", FORWARD, 999999999999999999),
    "Module.fc.Linear.backward.1000000000000000000": (MODULE, "Linear", BACKWARD, 10**18),
    "Functional.forward.0.forward": (API, "forward", FORWARD, 0),
    "Module.fc.Linear.parameters_grad": (PARAM_GRAD, "Linear", BACKWARD, 0),
    "Functional..3.forward": (API, "Functional..3.forward", NONE, -1),
    "1abc.x.3.forward": (API, "1abc.x.3.forward", NONE, -1),
    "Functional.linear.+3.forward": (API, "Functional.linear.+3.forward", NONE, -1),
    "Module.fc.Linear.forward.٣": (MODULE, "Linear", FORWARD, 3),  # the expressions' \d and int() read it
    "": (API, "", NONE, -1),
}
"""What parse_node_ids gives today, written out: a kernel and a Python path that went wrong alike would fail."""


def test_hard_coded_expectations():
    ids = list(EXPECTED)
    kinds, ops, directions, counters = _check(ids)
    assert list(zip(kinds.tolist(), ops, directions.tolist(), counters.tolist())) == list(EXPECTED.values())


def test_compiled_pass_decides_the_fast_rule_and_leaves_the_rest():
    decided = dict(zip(ODD_IDS, _decided(ODD_IDS).tolist()))
    for node_id in ("Functional.linear.03.forward", "Module.fc.Linear.parameters_grad.2", "Cell.x.Dense.backward.7",
                    "Primitive.matmul.MatMul.0.forward", "_a.b.0.forward", "Functional.my op.3.forward",
                    "Module.x.parameters_grad.parameters_grad.1", "Functional.linear.999999999999999999.forward"):
        assert decided[node_id], node_id
    for node_id in ("Módule.a.Linear.forward.0", "Functional.linear.٣.forward", "Module.fc.Linear.parameters_grad",
                    "Module..x.forward.0", "Functional..3.forward", "1abc.x.3.forward", "", "Module.a.B.forward.0\n",
                    "Functional.linear.9223372036854775807.forward", "Functional.\ud800.0.forward"):
        assert not decided[node_id], node_id  # the 19-digit counter too: more than COUNTER_DIGITS


def test_random_ids_built_from_the_rule_s_pieces():
    rng = random.Random(36)
    good = {"head": ["Functional", "Tensor", "_x", "Primitive.matmul", "Module", "Cell", "Mint.a.b"],
            "prefix": ["Module", "Cell"], "path": ["a", "encoder.layers.0", "x.y"], "name": ["linear", "Linear", "é0"],
            "n": ["0", "7", "03", "123456789012345678"], "dir": ["forward", "backward"]}
    bad = ["", "1a", "é", "٣", "+1", " ", "\n", "x y", "a.b", "parameters_grad", "Forward", "1234567890123456789"]

    def pick(slot: str) -> str:
        return rng.choice(bad) if rng.random() < 0.08 else rng.choice(good[slot])

    shapes = ["{head}.{name}.{n}.{dir}", "{prefix}.{path}.{name}.{dir}.{n}", "{prefix}.{path}.{name}.parameters_grad",
              "{prefix}.{path}.{name}.parameters_grad.{n}", "{head}.{name}.{dir}.{n}", "{prefix}.{name}.{dir}.{n}"]
    ids = [rng.choice(shapes).format(**{slot: pick(slot) for slot in good}) for _ in range(20_000)]
    _check(ids)
    plain = [node_id for node_id in ids if "\n" not in node_id]
    assert 0.15 < _decided(plain).mean() < 0.85  # both paths are exercised


def test_many_distinct_ops_grow_the_table():
    ids = [f"Functional.op{k}.{k}.forward" for k in range(5000)] + [f"Module.m.Cls{k % 3000}.backward.{k}"
                                                                  for k in range(5000)]
    _, ops, _, _ = _check(ids)
    assert len(set(ops)) == 8000


def test_spans_anywhere_in_a_buffer():
    buf = np.frombuffer(b"##Module.fc.Linear.forward.3##Functional.relu.1.backward\xc3\xa9", np.uint8)
    starts, ends = np.array([30, 2, 2, 30]), np.array([56, 28, 28, 58])
    kinds, ops, directions, counters = parse_id_columns(buf, starts, ends)
    assert kinds.tolist() == [API, MODULE, MODULE, API]
    assert ops == ["relu", "Linear", "Linear", "Functional.relu.1.backwardé"]
    assert directions.tolist() == [BACKWARD, FORWARD, FORWARD, NONE]
    assert counters.tolist() == [1, 3, 3, -1]


def test_ids_holding_newlines_are_counted_one_by_one():
    ids = ["Functional.a.0.forward\nModule.x.B.forward.0", "Module.x.B.forward.0", "é\n", "Tensor.t.1.backward"]
    _, ops, _, counters = _check(ids)
    assert ops[1:] == ["B", "é\n", "t"] and counters.tolist()[1:] == [0, -1, 1]


def test_no_ids():
    kinds, ops, directions, counters = parse_joined([])
    assert (len(kinds), ops, len(directions), len(counters)) == (0, [], 0, 0)


def test_a_counter_beyond_int64_raises():
    counters: list[int] = []
    parse_node_ids(["Functional.linear.99999999999999999999.forward"], counters=counters)
    assert counters == [99999999999999999999]
    with pytest.raises(OverflowError):
        parse_joined(["Functional.linear.99999999999999999999.forward"])


def test_spans_outside_the_buffer_are_refused():
    buf = np.frombuffer(b"abc", np.uint8)
    with pytest.raises(ValueError, match="outside"):
        parse_id_columns(buf, np.array([0]), np.array([4]))
    with pytest.raises(ValueError, match="outside"):
        parse_id_columns(buf, np.array([2]), np.array([1]))
