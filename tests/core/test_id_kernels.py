"""The node ids as one buffer, and the compiled forward twins, against the string rule they stand for."""

from __future__ import annotations

import random

import numpy as np
import pytest

from graphcmp.core import dataflow, id_kernels
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.samples import sample_pair


def _twins_by_strings(ids: list[str], rows: list[int]) -> list[int]:
    """The rule: the last ".backward" made ".forward"; of equal ids the later row."""
    index = {node_id: row for row, node_id in enumerate(ids)}
    out = []
    for row in rows:
        head, sep, tail = ids[row].rpartition(".backward")
        out.append(index.get(f"{head}.forward{tail}", -1) if sep else -1)
    return out


@pytest.mark.parametrize("ids", [
    [], ["a"], ["", ""], ["Module.fc.Linear.forward.0", "bé", "x\ny", "z", "\ud800.backward"],
    ["a\n", "\n", "b"], ["ascii.0", "ünï.cödé.1", "日本.forward.2"],
])
def test_joined_ids_spans_each_id_and_pads_the_buffer(ids):
    buf, starts, ends = id_kernels.joined_ids(ids)
    assert buf.dtype == np.uint8 and starts.dtype == ends.dtype == np.int64
    assert [bytes(buf[s:e]).decode("utf-8", "surrogatepass") for s, e in zip(starts, ends)] == ids
    assert bytes(buf[len(buf) - id_kernels.PADDING:]) == bytes(id_kernels.PADDING)
    assert len(buf) == len("\n".join(ids).encode("utf-8", "surrogatepass")) + id_kernels.PADDING


def _random_ids(rng: random.Random, count: int) -> list[str]:
    words = ["Module", "fc", "Linear", "layers", "0", "12", "mlp", "Functional", "linear", "forward", "backward",
             "parameters_grad", "ü", "日本", "backwardx", "forwards", "", "\n"]
    ids = []
    for _ in range(count):
        ids.append(".".join(rng.choice(words) for _ in range(rng.randint(1, 9))))
    # twins of some, and ids that differ from them in one late byte (the hash's last word)
    ids += ["{0}.forward{2}".format(*i.rpartition(".backward")) for i in rng.sample(ids, count // 3)]
    ids += [i[:-1] + chr(ord(i[-1]) + 1) for i in rng.sample(ids, count // 5) if i]
    ids += rng.sample(ids, count // 10)  # repeated ids: the later row is the twin
    rng.shuffle(ids)
    return ids


def test_forward_twin_rows_follow_the_string_rule_on_random_ids():
    rng = random.Random(20261203)
    for count in (0, 1, 7, 300, 3000):
        ids = _random_ids(rng, count)
        rows = [r for r in range(len(ids)) if ".backward" in ids[r]] + rng.sample(range(len(ids)), len(ids) // 4)
        found = id_kernels.forward_twin_rows(ids, np.array(rows, np.int64))
        assert found is not None, "the kernels are built for the tests (tests/conftest.py)"
        assert found.tolist() == _twins_by_strings(ids, rows)
        assert dataflow.twins_by_strings(ids, np.array(rows, np.int64)).tolist() == found.tolist()
        assert count < 300 or (found >= 0).sum() > count // 10  # the case is not empty


def test_forward_twin_rows_takes_the_last_backward_and_the_later_equal_id():
    ids = ["a.backward.b.forward.0", "a.backward.b.backward.0", "a.forward.b.backward.0", "a.backward.b.forward.0",
           "x.backward", "x.forward"]
    assert id_kernels.forward_twin_rows(ids, np.array([1, 2, 4, 5])).tolist() == [3, -1, 5, -1]


def test_forward_twin_rows_refuses_rows_outside_the_ids():
    with pytest.raises(IndexError):
        id_kernels.forward_twin_rows(["a.backward", "a.forward"], np.array([2]))


def test_forward_twin_rows_gives_none_where_the_kernels_are_not_built(monkeypatch):
    monkeypatch.setattr(id_kernels.KERNELS, "built", lambda: False)
    assert id_kernels.forward_twin_rows(["a.backward", "a.forward"], np.array([0])) is None


def test_dataflow_twins_are_the_same_by_bytes_and_by_strings(monkeypatch):
    graph = read_msprobe(sample_pair()[0])
    compiled = dataflow._forward_twins(graph)
    monkeypatch.setattr(id_kernels.KERNELS, "built", lambda: False)
    assert np.array_equal(dataflow._forward_twins(graph), compiled)
    assert (compiled >= 0).sum() > 10


def test_an_index_finds_each_id_as_a_dict_of_them_would():
    rng = random.Random(7)
    for count in (0, 1, 50, 4000):
        ids = _random_ids(rng, count)
        keys = [*rng.sample(ids, len(ids) // 2), "absent", "", "Module", "日本.x"]
        index = id_kernels.IdIndex.of(*id_kernels.joined_ids(ids))
        as_dict = {node_id: row for row, node_id in enumerate(ids)}
        assert index.repeated == len(ids) - len(as_dict)
        assert index.rows_of(keys).tolist() == [as_dict.get(k, -1) for k in keys]
        assert index.rows_of([]).tolist() == []


def test_id_rows_read_as_the_dict_of_the_ids():
    ids = ["a.0", "b.1", "ü.2"]
    rows = id_kernels.IdRows(ids, id_kernels.IdIndex.of(*id_kernels.joined_ids(ids)))
    assert rows._dict is None and list(rows) == ids and len(rows) == 3 and rows._dict is None  # no dict made
    assert dict(rows) == {"a.0": 0, "b.1": 1, "ü.2": 2} and rows.get("x", -1) == -1 and "b.1" in rows
    with pytest.raises(ValueError):
        id_kernels.IdRows(["a", "a"], id_kernels.IdIndex.of(*id_kernels.joined_ids(["a", "a"])))
    with pytest.raises(IndexError):
        id_kernels.IdIndex.of(np.zeros(4, np.uint8), np.array([0]), np.array([2]))  # no padding after the id
