"""One schema for msprobe leaves: every decode route gives the rows `leaf_row` defines.

Routes (see `graphcmp.core.readers.msprobe_schema`): typed (msgspec structs), plain dicts, per leaf
(`leaf_row`, the reference) and tb-graph-ascend's text copy of the leaves. Each is run here on every
leaf of the real dumps of the tests and on leaves made to be odd.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from graphcmp.core.jsonio import read_json
from graphcmp.core.readers import msprobe_leaves, vis
from graphcmp.core.readers.msprobe_leaves import Leaves, Misfit, collect_records, collect_typed, typed_records
from graphcmp.core.readers.msprobe_schema import COLUMNS, STAT_KEYS, Leaf, leaf_row
from graphcmp.core.texts import TextCodes
from tests.conftest import DATA
from tests.core.readers.test_msprobe import _ODD_LEAVES, _REAL_DUMPS


def _records(case: str) -> dict:
    return read_json(DATA / case / "dump.json", salvage=False).value["data"]


def _plain_leaves(records: dict) -> Leaves:
    return collect_records(records, "test")


def _stat(value) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _reference(leaf) -> tuple:
    """`leaf_row` with its statistics as the float columns hold them (None: absent)."""
    row = leaf_row(leaf)
    return (*row[:5], *(_stat(v) for v in row[5:]))


def _rows(columns: tuple) -> list[tuple]:
    """Rows of a route's columns (dtype, shape, md5, file, value, stats, present), in `COLUMNS` order."""
    dtype, shape, md5, file, value = (c.texts() if isinstance(c, TextCodes) else c for c in columns[:5])
    stats, present = columns[5:7]
    return [(dtype[i], shape[i], md5[i], file[i], value[i],
             *(float(stats[i, k]) if present[i, k] else None for k in range(4))) for i in range(len(dtype))]


def _same(a: list[tuple], b: list[tuple]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) == len(COLUMNS) and all(u == v or (isinstance(u, float) and isinstance(v, float)
                                                            and math.isnan(u) and math.isnan(v)) for u, v in zip(x, y))
        for x, y in zip(a, b))


def test_the_schema_names_the_fields_the_struct_decodes():
    assert COLUMNS[5:] == STAT_KEYS and set(STAT_KEYS) <= set(Leaf.__struct_fields__)


@pytest.mark.parametrize("case", [*_REAL_DUMPS, "odd"])
def test_plain_dict_route_gives_the_schema_rows(case):
    leaves = _plain_leaves(_ODD_LEAVES if case == "odd" else _records(case))
    assert len(leaves.leaf) > 5
    assert _same(_rows(msprobe_leaves._dict_columns(leaves.leaf)), [_reference(leaf) for leaf in leaves.leaf])


@pytest.mark.parametrize("case", [c for c in _REAL_DUMPS if "overflow" not in c])  # bare NaN: never typed
def test_typed_route_gives_the_schema_rows(case):
    records = _records(case)
    plain = _plain_leaves(records)
    expected = dict(zip(zip(plain.node_ids(), plain.role, plain.slot), (_reference(leaf) for leaf in plain.leaf)))
    text = (DATA / case / "dump.json").read_bytes()
    opens = re.search(rb'"data": ?\{', text).end() - 1  # msprobe's indent=1 layout, or compact
    typed = typed_records(text[opens: text.rindex(b"}", 0, text.rindex(b"}"))] + b"}")
    assert typed is not None and typed.keys() == records.keys()
    leaves = collect_typed(typed, "test")
    rows = _rows(msprobe_leaves._struct_columns(leaves.leaf))
    got = dict(zip(zip(leaves.node_ids(), leaves.role, leaves.slot), rows))
    assert got.keys() == expected.keys()
    assert _same([got[k] for k in expected], list(expected.values()))


@pytest.mark.shared
@pytest.mark.parametrize("rank", [0, 3])
def test_mixed_route_gives_the_schema_rows(rank):
    """A point-to-point call's ``P2POp`` argument (a dict of fields, a tensor among them) is no `Leaf`: its record is
    read as a plain dict and the others typed (route 3), with the rows of the reference, and the graph of a
    whole-file read."""
    from graphcmp.core.readers.msprobe import read_msprobe
    from graphcmp.core.readers.msprobe_leaves import mixed_records
    from tests.conftest import shared

    folder = shared(f"msprobe/dumps/dist4/statistics/baseline/step0/rank{rank}")  # a real 4-rank gloo job
    records = read_json(folder / "dump.json", salvage=False).value["data"]
    plain = _plain_leaves(records)
    expected = dict(zip(zip(plain.node_ids(), plain.role, plain.slot), (_reference(leaf) for leaf in plain.leaf)))
    text = (folder / "dump.json").read_bytes()
    chunk = text[text.index(b'"data": {') + 8: text.rindex(b"}", 0, text.rindex(b"}"))] + b"}"
    assert typed_records(chunk) is None
    mixed, odd = mixed_records(chunk)
    assert mixed.keys() == records.keys() and odd and all(node_id.startswith("Distributed.") for node_id in odd)
    leaves = collect_typed(mixed, "test", odd)
    rows = _rows(msprobe_leaves._struct_columns(leaves.leaf))
    got = dict(zip(zip(leaves.node_ids(), leaves.role, leaves.slot), rows))
    assert got.keys() == expected.keys() and _same([got[k] for k in expected], list(expected.values()))
    chunked, whole = read_msprobe(folder, chunk_bytes=4096), read_msprobe(folder, chunk_bytes=None)
    assert chunked.nodes == whole.nodes and chunked.tensors == whole.tensors


def test_a_true_false_statistic_of_a_record_read_apart_is_refused_as_on_plain_dicts():
    """A record the typed schema declines (a ``P2POp`` list) is read as a plain dict among typed ones: true as a
    statistic of a float tensor is refused there too, as `_dict_columns` refuses it (no measurement)."""
    import orjson

    from graphcmp.core.readers.msprobe_leaves import mixed_records

    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": True, "Min": 0.0,
              "Mean": 0.5, "Norm": 1.0}
    records = {"Distributed.batch_isend_irecv.0.forward": {"input_args": [[{"class_type": "P2POp", "tensor": tensor}]]},
               "Functional.relu.0.forward": {"output": [{**tensor, "Max": 1.0}]}}
    mixed, odd = mixed_records(orjson.dumps(records))
    assert odd == {"Distributed.batch_isend_irecv.0.forward"}
    leaves = collect_typed(mixed, "test", odd)
    with pytest.raises(msprobe_leaves._BadStatistic):
        msprobe_leaves._struct_columns(leaves.leaf)
    with pytest.raises(msprobe_leaves._BadStatistic):
        msprobe_leaves._dict_columns(_plain_leaves(records).leaf)


def test_communication_calls_decode_typed_with_the_schema_rows():
    """Every collective of a real TP2 x PP2 rank has a process-group argument (``group_ranks``, ``group_id``): such
    records decode typed (not record by record) and give the rows of the reference, the group as its text."""
    import orjson

    records = {k: v for k, v in _records("parallel/tp2pp2/step0/rank0").items() if k.startswith("Distributed.")}
    records = {k: v for k, v in records.items() if math.inf not in _numbers(v)}  # bare -Infinity is never typed
    assert len(records) > 5
    typed = typed_records(orjson.dumps(records))
    assert typed is not None
    leaves = collect_typed(typed, "test")
    rows = _rows(msprobe_leaves._struct_columns(leaves.leaf))
    plain = _plain_leaves(records)
    expected = dict(zip(zip(plain.node_ids(), plain.role, plain.slot), (_reference(leaf) for leaf in plain.leaf)))
    got = dict(zip(zip(leaves.node_ids(), leaves.role, leaves.slot), rows))
    assert got.keys() == expected.keys() and _same([got[k] for k in expected], list(expected.values()))
    groups = [row for row in got.values() if row[0] == "torch.ProcessGroup"]
    assert groups and all(row[4].startswith('{"group_ranks":[') for row in groups)


def _numbers(value) -> set[float]:
    if isinstance(value, dict):
        return set().union(*map(_numbers, value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*map(_numbers, value)) if value else set()
    return {abs(value)} if isinstance(value, float) else set()


@pytest.mark.parametrize("node_id", list(_ODD_LEAVES))
def test_typed_route_reads_odd_leaves_as_the_schema_or_declines(node_id):
    import orjson

    typed = typed_records(orjson.dumps({node_id: _ODD_LEAVES[node_id]}))
    plain = _plain_leaves({node_id: _ODD_LEAVES[node_id]})
    if typed is None:
        return  # the chunk takes the plain route, checked above
    leaves = collect_typed(typed, "test")
    try:
        rows = _rows(msprobe_leaves._struct_columns(leaves.leaf))
    except Misfit:
        return  # declined: the chunk takes the plain route
    expected = dict(zip(zip(plain.node_ids(), plain.role, plain.slot), (_reference(leaf) for leaf in plain.leaf)))
    got = dict(zip(zip(leaves.node_ids(), leaves.role, leaves.slot), rows))
    assert got.keys() == expected.keys() and _same([got[k] for k in expected], list(expected.values()))


def _as_vis(leaf: dict) -> dict:
    """A leaf as msprobe copies it into a .vis: statistics, shapes and names as text."""
    out = {k: ("null" if v is None else str(v)) for k, v in leaf.items()}
    if isinstance(leaf.get("value"), bool):
        out["value"] = str(leaf["value"])
    return out


@pytest.mark.parametrize("case", ["../../sample_graphs/msprobe/tf_small/perturb/step0/rank0", "msprobe_md5/npu",
                                  "mindspore_cnn/npu"])
def test_vis_route_gives_the_schema_rows_of_tensors_and_scalars(case):
    leaves = _plain_leaves(_records(case))
    simple = [leaf for leaf in leaves.leaf if isinstance(leaf, dict) and (
        ("dtype" in leaf and all(isinstance(leaf.get(k), (int, float, type(None))) for k in STAT_KEYS))
        or (leaf.get("type") in ("int", "float") and isinstance(leaf.get("value"), (int, float))))]
    assert len(simple) > 20
    got = [vis._leaf_fields(_as_vis(leaf)) for leaf in simple]
    expected = [_reference(leaf) for leaf in simple]
    for g, e in zip(got, expected):  # the text copy keeps ~17 digits: values equal to the last bit or two
        assert g[:5] == e[:5] and np.allclose([np.nan if v is None else v for v in g[5:]],
                                              [np.nan if v is None else v for v in e[5:]], rtol=1e-15, equal_nan=True)
        assert [v is None for v in g[5:]] == [v is None for v in e[5:]]
