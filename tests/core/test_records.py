"""Frozen records are truly read-only (arrays, mappings, also after pickling) and compare by value; text columns
read from a dump carry their codes."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import orjson
import pytest

from graphcmp.core.compare import compare_graphs
from graphcmp.core.export.columns import json_escaped
from graphcmp.core.hierarchy import HierarchyBuilder
from graphcmp.core.jsonio import dumps_strict
from graphcmp.core.readers import read_graph
from graphcmp.core.records import Direction, NodeKind, Role, RunInfo, string_codes, string_column
from graphcmp.core.texts import CodedTexts, TextCodes


@pytest.fixture(scope="module")
def runs(perturb_pair):
    return read_graph(perturb_pair[0]), read_graph(perturb_pair[1])


def test_report_columns_cannot_be_written(runs):
    report = compare_graphs(*runs)
    columns = [report.verdicts.status, report.verdicts.severity, report.matches.npu_to_bench, report.pairs.npu,
               report.pairs.metrics["rel_err"], report.npu.nodes.parent, report.npu.tensors.stats,
               report.bench.edges.src]
    for column in columns:
        with pytest.raises(ValueError, match="read-only"):
            column[0] = 2
    with pytest.raises(TypeError):
        report.pairs.metrics["rel_err"] = np.zeros(len(report.pairs))  # type: ignore[index]


def test_equal_records_compare_equal(runs):
    npu, bench = runs
    one, two = compare_graphs(npu, bench), compare_graphs(npu, bench)
    assert one.verdicts == two.verdicts and one.matches == two.matches and one.pairs == two.pairs
    assert one == two  # NaN severities and metrics count as equal
    assert np.isnan(one.pairs.metrics["md5_diff"]).any()
    other = compare_graphs(bench, npu)
    assert one.verdicts != other.verdicts and one.npu.nodes == other.bench.nodes


def test_a_run_read_in_another_process_stays_frozen(runs):
    npu = pickle.loads(pickle.dumps(runs[0]))  # what read_pair's child process sends back
    assert npu == runs[0]
    assert not npu.tensors.stats.flags.writeable and not npu.nodes.kind.flags.writeable


def _plain(column: tuple) -> tuple:
    return tuple(column)


def test_a_read_run_holds_its_text_columns_with_their_codes(runs):
    tensors = runs[0].tensors
    for name in ("slot", "dtype", "shape", "md5", "file", "value"):
        column = getattr(tensors, name)
        assert type(column) is CodedTexts, name
        codes, names = string_codes(column)
        plain_codes, plain_names = string_codes(_plain(column))  # coded from the texts themselves
        assert names == plain_names and codes.tolist() == plain_codes.tolist(), name
        rows = np.arange(0, len(column), 3)
        assert string_column(column, rows).tolist() == string_column(_plain(column), rows).tolist()


def test_coded_texts_are_numbered_in_order_of_first_appearance():
    column = CodedTexts.of(np.array([3, 1, 3, 0, 1]), ["w", "x", "unused", "z"])
    assert column == ("z", "x", "z", "w", "x") and type(column[1:]) is tuple
    assert column.names == ("z", "x", "w") and column.codes.tolist() == [0, 1, 0, 2, 1]
    assert column.codes.dtype == np.int8 and not column.codes.flags.writeable
    many = CodedTexts.of(np.arange(300)[::-1], [str(k) for k in range(300)])
    assert many.codes.dtype == np.int16 and many.names[0] == "299" and many == tuple(map(str, range(299, -1, -1)))
    assert CodedTexts.of(np.zeros(0, np.int8), ["a"]) == () and CodedTexts.of(np.zeros(0, np.int8), ["a"]).names == ()


def test_coded_texts_read_as_their_tuple_without_holding_a_reference_per_text():
    texts = ("b", "a", "b", "b", "c")
    column = CodedTexts.of(np.array([1, 0, 1, 1, 2]), ["a", "b", "c"])
    assert column == texts and texts == column and column != texts[:-1] and column != list(texts)
    assert tuple(column) == texts and list(column) == list(texts) and len(column) == 5
    assert column[0] == "b" and column[-1] == "c" and column[1:4] == texts[1:4] and column[::-1] == texts[::-1]
    assert column.count("b") == 3 and column.count("z") == 0 and "c" in column and "z" not in column
    assert column.index("c") == 4 and hash(column) == hash(texts)
    assert column + ("d",) == (*texts, "d") and ("d",) + column == ("d", *texts)  # noqa: RUF005 - the operator itself
    assert np.asarray(column).tolist() == list(texts) and np.asarray(column).dtype == object
    assert repr(column) == repr(texts) and sorted(column) == sorted(texts)
    assert column == CodedTexts.of(np.array([0, 2, 0, 0, 1]), ["b", "c", "a"])  # the same texts, coded otherwise
    assert column != CodedTexts.of(np.array([0, 2, 0, 1, 1]), ["b", "c", "a"])
    with pytest.raises(IndexError):
        column[5]
    many = CodedTexts.of(np.zeros(100_000, np.int8), ["one"])
    assert sys.getsizeof(many) + many.codes.nbytes < 8 * len(many) // 4  # a tuple holds 8 bytes per text


def test_coded_texts_travel_as_codes_and_come_back_coded(runs):
    column = runs[0].tensors.dtype
    sent = pickle.dumps(column, pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(sent)
    assert type(back) is CodedTexts and back == column and back.names == column.names
    assert len(sent) < len(pickle.dumps(_plain(column), pickle.HIGHEST_PROTOCOL))
    assert orjson.loads(dumps_strict({"dtype": column})) == {"dtype": list(column)}
    assert json_escaped(column) == json_escaped(list(column))


def test_a_column_of_coded_and_listed_parts_is_coded_once():
    builder = HierarchyBuilder()
    builder.add_node("Module.a.A.forward.0", NodeKind.MODULE, "A", Direction.FORWARD, None, 0)
    builder.add_node("Torch.b.0.forward", NodeKind.API, "b", Direction.FORWARD, "Module.a.A.forward.0", 1)
    stats, present = np.zeros((2, 4)), np.ones((2, 4), bool)
    for node, dtypes in (("Torch.b.0.forward", TextCodes(np.array([1, 0]), ["fp32", "bf16"])),
                         ("Module.a.A.forward.0", ["int64", "bf16"])):
        builder.add_tensors([node] * 2, [int(Role.INPUT)] * 2, ["0", "1"], dtype=dtypes, shape=["[2]", "[2]"],
                            stats=stats, present=present, md5=["", ""], file=["", ""], value=["", ""])
    tensors = builder.build(RunInfo(path="mem")).tensors
    assert type(tensors.dtype) is CodedTexts and type(tensors.shape) is tuple  # only a coded part codes a column
    assert tensors.dtype == ("int64", "bf16", "bf16", "fp32") and tensors.dtype.names == ("int64", "bf16", "fp32")


def test_tensor_node_ids_may_come_coded():
    """A reader may give each tensor's node as a code into the ids of its records (each id looked up once): the
    table is the one plain ids give, each node's tensors in the order added."""
    def built(coded: bool) -> tuple:
        builder = HierarchyBuilder()
        builder.add_node("Module.a.A.forward.0", NodeKind.MODULE, "A", Direction.FORWARD, None, 0)
        builder.add_node("Torch.b.0.forward", NodeKind.API, "b", Direction.FORWARD, "Module.a.A.forward.0", 1)
        ids = ["Torch.b.0.forward", "Module.a.A.forward.0", "Torch.b.0.forward"]
        node = TextCodes(np.array([0, 1, 0]), ["Torch.b.0.forward", "Module.a.A.forward.0"]) if coded else ids
        builder.add_tensors(node, [int(Role.INPUT), int(Role.INPUT), int(Role.OUTPUT)], ["0", "0", "0"],
                            dtype=["a", "b", "c"], shape=["[1]"] * 3, stats=np.arange(12.0).reshape(3, 4),
                            present=np.ones((3, 4), bool), md5=[""] * 3, file=[""] * 3, value=[""] * 3)
        return builder.build(RunInfo(path="mem")).tensors

    coded, plain = built(True), built(False)
    assert coded == plain
    assert coded.node.tolist() == [1, 2, 2] and coded.dtype == ("b", "a", "c")
