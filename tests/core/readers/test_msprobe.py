"""The msprobe reader on real dumps: structure, order, stacks, partial and bad input."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import re
import shutil
import sys

import numpy as np
import pytest

from graphcmp.core.errors import DumpFormatError, GraphCycleError
from graphcmp.core.hierarchy import GROUP_PREFIX, ROOT_ID
from graphcmp.core.jsonio import MemberChunks, read_json
from graphcmp.core.readers.msprobe import CHUNK_BYTES, parse_msprobe, read_msprobe, sniff
from graphcmp.core.readers.msprobe_leaves import typed_records
from graphcmp.core.records import Direction, NodeKind, Role
from tests.conftest import DATA, shared


def test_node_count_matches_msprobe_own_graph(perturb_pair):
    # msprobe 26.2.0 graph_visualize builds 178 nodes per side for this dump (vis/results.json)
    graph = read_msprobe(perturb_pair[1])
    assert len(graph) == 178
    assert graph.info.framework == "pytorch" and graph.info.task == "statistics"
    assert (graph.info.step, graph.info.rank) == (0, 0)


def test_modules_contain_their_calls_in_execution_order(perturb_pair):
    graph = read_msprobe(perturb_pair[1])
    layer = "Module.encoder.layers.1.TransformerEncoderLayer.forward.0"
    kids = graph.children(layer)
    assert kids[0] == "Module.encoder.layers.1.self_attn.MultiheadAttention.forward.0"
    assert "Module.encoder.layers.1.linear1.Linear.forward.0" in kids
    assert graph.children("Module.encoder.layers.1.linear1.Linear.forward.0") == ["Functional.linear.2.forward"]
    order = [graph.row(k) for k in kids]
    assert order == sorted(order)
    # forward before backward
    assert graph.row("Module.head.Linear.forward.0") < graph.row("Module.head.Linear.backward.0")


def test_parameters_and_their_gradients_are_attached(perturb_pair):
    graph = read_msprobe(perturb_pair[1])
    linear = graph.view("Module.encoder.layers.1.linear1.Linear.forward.0")
    params = {t.slot for t in linear.tensors if t.role == Role.PARAM}
    assert params == {"weight", "bias"}
    grad = graph.view("Module.encoder.layers.1.linear1.Linear.parameters_grad.0")
    assert grad.kind == NodeKind.PARAM_GRAD
    assert grad.parent == "Module.encoder.layers.1.linear1.Linear.backward.0"
    assert {t.slot for t in grad.tensors} == {"weight", "bias"}
    assert all(t.role == Role.PARAM_GRAD and t.shape for t in grad.tensors)


def test_top_level_api_runs_are_grouped(perturb_pair):
    graph = read_msprobe(perturb_pair[1])
    top = graph.children(ROOT_ID)
    groups = [n for n in top if n.startswith(GROUP_PREFIX)]
    assert groups == [f"{GROUP_PREFIX}.0"]
    members = graph.children(groups[0])
    assert "Functional.cross_entropy.0.forward" in members and len(members) == 6
    assert "Tensor.__add__.0.forward" in top  # a lone top-level call stays where it is


def test_stack_new_layout(perturb_pair):
    graph = read_msprobe(perturb_pair[1])
    frames = graph.view("Module.embedding.Embedding.forward.0").stack
    assert any("models.py" in f for f in frames)


def test_stack_old_layout_and_unnumbered_rank_folder():
    graph = read_msprobe(DATA / "msprobe122_old_stack" / "rank")
    assert graph.info.rank == 0
    assert any("wrap_functional" in f for f in graph.view("Functional.embedding.0.forward").stack)
    # 1.2.2 names parameter gradients without a call counter
    grad = "Module.embedding.Embedding.parameters_grad"
    assert graph.view(grad).kind == NodeKind.PARAM_GRAD


def test_micro_steps_from_gradient_accumulation():
    graph = read_msprobe(shared("msprobe/dumps/tf_huge/statistics/baseline/step0/rank0"))
    assert len(graph) == 9709  # msprobe 26.2.0 builds the same count
    steps = graph.nodes.micro_step
    assert set(np.unique(steps).tolist()) == {0, 1, 2, 3}
    assert steps[graph.row("Module.embedding.Embedding.forward.0")] == 0
    assert steps[graph.row("Module.embedding.Embedding.forward.1")] == 1


def test_bare_infinity_and_nan_tokens_are_read():
    graph = read_msprobe(DATA / "msprobe_overflow_tokens" / "npu")
    conv2 = graph.view("Functional.conv2d.1.forward")
    out = next(t for t in conv2.tensors if t.role == Role.OUTPUT)
    assert out.stats["norm"] == math.inf and out.stats["mean"] == -math.inf
    assert math.isfinite(out.stats["max"])


def test_mindspore_naming():
    graph = read_msprobe(DATA / "mindspore_cnn" / "npu")
    assert graph.info.framework == "mindspore"
    view = graph.view("Primitive.conv2d.Conv2D.1.forward")
    assert view.kind == NodeKind.API and view.op == "Conv2D" and view.direction == Direction.FORWARD
    assert view.parent == "Cell.conv2.Conv2d.forward.0"
    assert graph.view("Cell.conv2.Conv2d.parameters_grad.0").parent == "Cell.conv2.Conv2d.backward.0"


def test_md5_task_is_detected():
    graph = read_msprobe(DATA / "msprobe_md5" / "npu")
    assert graph.info.task == "md5"
    assert all(len(m) == 8 for m, s in zip(graph.tensors.md5, graph.tensors.shape) if s and s != "scalar")


def test_scalar_arguments_and_missing_stats():
    t = {"type": "torch.Tensor", "dtype": "torch.int64", "shape": [2], "Max": 3, "Min": 0, "Mean": None,
         "Norm": None}
    graph = parse_msprobe({"data": {"Functional.embedding.0.forward": {
        "input_args": [t, None, {"type": "float", "value": 2.0}, {"type": "bool", "value": False}],
        "output": [t]}}})
    tensors = graph.view("Functional.embedding.0.forward").tensors
    by_slot = {(t.role, t.slot): t for t in tensors}
    assert by_slot[(Role.INPUT, "0")].stats == {"max": 3.0, "min": 0.0}
    assert by_slot[(Role.INPUT, "2")].shape == "scalar" and by_slot[(Role.INPUT, "2")].stats["max"] == 2.0
    assert by_slot[(Role.INPUT, "3")].value == "false"
    assert (Role.INPUT, "1") not in by_slot  # a None argument is not a tensor


def test_requires_grad_is_read_by_both_routes():
    """The typed route (files) and the plain-dict route (documents) record the dump's requires_grad per tensor."""
    folder = DATA / "pytorch_cnn" / "npu"
    text = (folder / "dump.json").read_text()
    for graph in (read_msprobe(folder), parse_msprobe(json.loads(text))):
        column = graph.tensors.requires_grad
        assert column.dtype == np.int8 and len(column) == len(graph.tensors)
        assert (column == 1).sum() == text.count('"requires_grad": true') == 70
        assert (column == 0).sum() == text.count('"requires_grad": false') == 81
        conv = {(t.role, t.slot): k for k, t in zip(np.flatnonzero(graph.tensors.node == graph.row(
            "Functional.conv2d.0.forward")), graph.view("Functional.conv2d.0.forward").tensors)}
        assert column[[conv[(Role.INPUT, "0")], conv[(Role.INPUT, "1")]]].tolist() == [0, 1]
        scalars = np.array([s == "scalar" for s in graph.tensors.shape])
        assert (column[scalars] == -1).all()  # msprobe records no requires_grad for a scalar argument


def test_truncated_dump_loads_what_is_there(tmp_path, perturb_pair):
    run = tmp_path / "run"
    shutil.copytree(perturb_pair[0], run)
    dump = run / "dump.json"
    text = dump.read_text()
    dump.write_text(text[: int(len(text) * 0.6)])
    graph = read_msprobe(run)
    full = read_msprobe(perturb_pair[0])
    assert 0 < int(graph.nodes.has_data.sum()) < int(full.nodes.has_data.sum())
    assert any("dump.json" in m and "ends early" in m for m in graph.info.missing)
    assert dump.read_text() == text[: int(len(text) * 0.6)]  # input untouched


def test_missing_construct_and_stack_are_reported(tmp_path, perturb_pair):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(perturb_pair[0] / "dump.json", run / "dump.json")
    graph = read_msprobe(run)
    assert {m.split(":")[0] for m in graph.info.missing} == {"construct.json", "stack.json"}
    assert len(graph) > 100


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: None, "no dump.json"),
        (lambda d: (d / "dump.json").write_text(""), "file is empty"),
        (lambda d: (d / "dump.json").write_text("[1, 2]"), "expected a JSON object"),
        (lambda d: (d / "dump.json").write_text('{"task": "x"}'), 'no "data" object'),
        (lambda d: (d / "dump.json").write_text("not json"), "not valid JSON"),
        (lambda d: (d / "dump.json").write_text('{"data": {"Functional.a.0.forward": 3}}'), "record is a int"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(DumpFormatError, match=message) as info:
        read_msprobe(tmp_path)
    assert str(tmp_path) in str(info.value) and "\n" not in str(info.value)


def test_dump_entry_missing_from_construct_is_reported(tmp_path, perturb_pair):
    run = tmp_path / "run"
    shutil.copytree(perturb_pair[0], run)
    construct = json.loads((run / "construct.json").read_text())
    del construct["Functional.linear.2.forward"]
    (run / "construct.json").write_text(json.dumps(construct))
    graph = read_msprobe(run)
    assert graph.view("Functional.linear.2.forward").parent == ROOT_ID
    assert any("not in it" in m for m in graph.info.missing)


def test_sniff(perturb_pair, tmp_path):
    assert sniff(perturb_pair[0]) and not sniff(tmp_path)


# --------------------------------------------------------------------------- chunked reading


def _same_graph(a, b) -> None:
    """Equal info, stacks and every node, tensor and edge column."""
    assert a.info == b.info and a.stacks == b.stacks
    for table in ("nodes", "tensors", "edges"):
        x, y = getattr(a, table), getattr(b, table)
        for f in dataclasses.fields(x):
            u, v = getattr(x, f.name), getattr(y, f.name)
            if isinstance(u, np.ndarray):
                assert u.dtype == v.dtype and np.array_equal(u, v, equal_nan=u.dtype.kind == "f"), (table, f.name)
            else:
                assert u == v, (table, f.name)


_REAL_DUMPS = [
    "../../sample_graphs/msprobe/tf_small/perturb/step0/rank0",
    "../../sample_graphs/msprobe/tf_small/baseline/step1/rank0",
    "msprobe_overflow_tokens/npu",  # bare Infinity/NaN: those chunks go through the stdlib parser
    "msprobe_md5/npu",
    "mindspore_cnn/npu",
    "msprobe122_old_stack/rank",
    "msprobe_gpt_mapping/bench",
]


@pytest.mark.parametrize("case", _REAL_DUMPS)
def test_chunked_and_whole_file_reads_give_the_same_graph(case):
    folder = (DATA / case).resolve()
    text = (folder / "dump.json").read_bytes()
    assert text.startswith(b'{\n "task"') and b'\n "data": {\n  "' in text  # msprobe's indent=1 layout
    assert sum(1 for _ in MemberChunks(folder / "dump.json", "data", chunk_bytes=4096)) > 1
    whole = read_msprobe(folder, chunk_bytes=None)
    for chunk_bytes in (64, 4096, CHUNK_BYTES):
        _same_graph(read_msprobe(folder, chunk_bytes=chunk_bytes), whole)


@pytest.mark.parametrize("case", _REAL_DUMPS)
def test_real_dumps_take_the_typed_path(case):
    # the chunked read above decodes these chunks with msgspec; bare NaN/Infinity chunks cannot be typed
    texts = list(MemberChunks(DATA / case / "dump.json", "data", chunk_bytes=4096).texts())
    typed = [typed_records(text) is not None for text in texts]
    assert sum(typed) >= (1 if "overflow" in case else len(texts))
    assert all(typed) != ("overflow" in case)


_ODD_LEAVES = {  # leaves the typed decoder reads differently or not at all: read as plain dicts
    "Functional.a.0.forward": {"input_args": [{"type": "torch.Size", "value": [2, 3]}, {"type": "int", "value": 3},
                                              {"type": "float", "value": 0.5}, {"type": "bool", "value": True},
                                              {"type": "str", "value": "mean"}, {"type": "NoneType"}],
                               "input_kwargs": {"dim": {"type": "int", "value": -1}},
                               "output": [{"type": "torch.Tensor", "dtype": "torch.bool", "shape": [2],
                                           "Max": True, "Min": False, "Mean": None, "Norm": None,
                                           "data_name": "-1"}]},
    "Functional.b.0.forward": {"input_args": [{"type": "torch.Tensor", "dtype": "torch.int64", "shape": [],
                                               "Max": 3, "Min": 3}],  # absent Mean/Norm, int stats
                               "output": [[{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1],
                                            "Max": 1.0, "Min": 1.0, "Mean": 1.0, "Norm": 1.0}, None]]},
    "Functional.c.0.forward": {"input_args": [{"type": "weird", "shape": [1], "Min": 2.0}]},  # not a tensor
    "Functional.d.0.forward": {"input_kwargs": {"type": {"type": "torch.Tensor", "dtype": "torch.float16",
                                                         "shape": [1], "Max": 1.0, "Min": 1.0, "Mean": 1.0,
                                                         "Norm": 1.0}}},  # a keyword named "type"
    "Functional.e.0.forward": {"output": [{"type": "torch.Tensor", "Max": None}]},  # no dtype: still a tensor
    "Functional.f.0.forward": {"input_args": [[[{"k": 1}]]], "output": {"type": "torch.Tensor", "dtype": "x",
                                                                       "Max": 1.0}},
}


@pytest.mark.parametrize("node_id", list(_ODD_LEAVES))
def test_odd_leaves_read_the_same_typed_or_plain(tmp_path, node_id):
    run = tmp_path / "run"
    run.mkdir()
    records = {"Functional.z.0.forward": {"output": [{"type": "torch.Tensor", "dtype": "torch.float32",
                                                      "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
                                                      "Norm": 1.0}]},
               node_id: _ODD_LEAVES[node_id]}
    (run / "dump.json").write_text(json.dumps({"task": "statistics", "data": records}, indent=1))
    chunked, whole = read_msprobe(run, chunk_bytes=64), read_msprobe(run, chunk_bytes=None)
    _same_graph(chunked, whole)
    assert len(whole.tensor_rows(node_id)) > 0


def _make_synthetic():
    spec = importlib.util.spec_from_file_location("make_synthetic", DATA.parents[1] / "bench" / "make_synthetic.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_indented_synthetic_dump_reads_the_same_chunked(tmp_path, perturb_pair):
    synth = _make_synthetic()
    synth.make_synthetic(perturb_pair[1], tmp_path, 800, indent=1)
    dump = tmp_path / "npu" / "dump.json"
    layout = [len(line) - len(line.lstrip(" ")) for line in dump.read_text().splitlines()]
    expected = json.dumps(json.loads(dump.read_text()), indent=1).splitlines()
    assert layout == [len(line) - len(line.lstrip(" ")) for line in expected]  # json.dump(..., indent=1)
    assert sum(1 for _ in MemberChunks(dump, "data", chunk_bytes=16384)) > 10
    whole = read_msprobe(tmp_path / "npu", chunk_bytes=None)
    assert len(whole) > 800
    _same_graph(read_msprobe(tmp_path / "npu", chunk_bytes=16384), whole)
    compact = tmp_path / "compact"  # the same records written compact: read whole, same columns
    synth.make_synthetic(perturb_pair[1], compact, 800)
    from_compact = read_msprobe(compact / "npu")
    _same_graph(dataclasses.replace(from_compact, info=whole.info), whole)


def test_truncated_indented_dump_is_salvaged_as_before(tmp_path, perturb_pair):
    run = tmp_path / "run"
    shutil.copytree(perturb_pair[0], run)
    text = (run / "dump.json").read_bytes()
    for cut in (0.3, 0.77, 0.999):
        (run / "dump.json").write_bytes(text[: int(len(text) * cut)])
        graph = read_msprobe(run, chunk_bytes=256)
        assert any("ends early" in m for m in graph.info.missing)
        _same_graph(graph, read_msprobe(run, chunk_bytes=None))


def test_records_with_bare_infinity_are_read_apart_from_their_chunk(tmp_path, monkeypatch):
    """A real TP2 x PP2 rank whose attention masks are filled with -inf (a bare -Infinity argument per layer),
    written as msprobe writes (indent=1): only the records holding it take the plain-dict route, the rest of their
    chunk is decoded typed, and the graph is the whole-file read's."""
    from graphcmp.core.jsonio import read_json
    from graphcmp.core.readers import msprobe

    run = tmp_path / "rank0"
    shutil.copytree(DATA / "parallel/tp2pp2/step0/rank0", run)
    dump = read_json(run / "dump.json", salvage=False).value
    (run / "dump.json").write_text(json.dumps(dump, indent=1))  # bare -Infinity, as msprobe's json.dump writes it
    non_finite = {k for k, record in dump["data"].items() if "Infinity" in json.dumps(record)}
    assert 0 < len(non_finite) < len(dump["data"]) / 10
    plain: list[str] = []
    add_records = msprobe._add_records
    monkeypatch.setattr(msprobe, "_add_records", lambda b, records, source: (plain.extend(records),
                                                                             add_records(b, records, source)))
    chunked = read_msprobe(run, chunk_bytes=8192)
    assert set(plain) == non_finite
    _same_graph(chunked, read_msprobe(run, chunk_bytes=None))


def test_node_id_repeated_in_two_chunks_is_an_error(tmp_path, perturb_pair):
    run = tmp_path / "run"
    shutil.copytree(perturb_pair[0], run)
    dump = json.loads((run / "dump.json").read_text())
    first = next(iter(dump["data"]))
    text = json.dumps(dump, indent=1)
    repeated = json.dumps({first: {"output": [{"type": "torch.Tensor", "dtype": "torch.float16", "shape": [1],
                                               "Max": 7.0, "Min": 7.0, "Mean": 7.0, "Norm": 7.0}]}}, indent=1)
    inner = "\n".join(" " + line for line in repeated.splitlines()[1:-1])
    (run / "dump.json").write_text(text[: text.rindex("\n }")] + ",\n" + inner + text[text.rindex("\n }"):])
    for chunk_bytes in (512, CHUNK_BYTES):  # in two chunks, and in one
        with pytest.raises(DumpFormatError, match=rf"dump.json: '{re.escape(first)}' is recorded twice"):
            read_msprobe(run, chunk_bytes=chunk_bytes)


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": ")])
def test_node_id_repeated_in_compact_json_is_an_error(tmp_path, perturb_pair, separators):
    run = tmp_path / "run"
    shutil.copytree(perturb_pair[0], run)
    dump = json.loads((run / "dump.json").read_text())
    (run / "dump.json").write_text(json.dumps(dump, separators=separators))
    for chunk_bytes in (512, CHUNK_BYTES):  # every id once: reads as msprobe's own layout does
        _same_graph(read_msprobe(run, chunk_bytes=chunk_bytes), read_msprobe(run, chunk_bytes=None))
    records = list(dump["data"].items())
    first = records[0][0]
    for where in (1, len(records) // 2, len(records)):  # next to it, in the middle, last
        text = json.dumps({**dump, "data": {}}, separators=separators)[:-2]
        members = [json.dumps({k: v}, separators=separators)[1:-1] for k, v in records]
        members.insert(where, json.dumps({first: records[-1][1]}, separators=separators)[1:-1])
        (run / "dump.json").write_text(text + separators[0].join(members) + "}}")
        for chunk_bytes in (512, CHUNK_BYTES):
            with pytest.raises(DumpFormatError, match=rf"dump.json: '{re.escape(first)}' is recorded twice"):
                read_msprobe(run, chunk_bytes=chunk_bytes)


# --- issue 14: dump content that must not read as something it is not ---------------------------------

def _copy_with(tmp_path, perturb_pair, change, *, indent=1):
    run = tmp_path / "run"
    shutil.copytree(perturb_pair[0], run)
    text = json.dumps(json.loads((run / "dump.json").read_text()), indent=indent)
    changed = change(text)
    (run / "dump.json").write_bytes(changed if isinstance(changed, bytes) else changed.encode("utf-8", "surrogatepass"))
    return run


@pytest.mark.parametrize("indent", [1, None])
@pytest.mark.parametrize(("new", "says"), [
    (b"Functional.emb\xff.0.forward", r"line \d+: bytes that are not UTF-8 \(ff\) in \"Functional\.emb\\xff\.0"),
    ("Functional.emb\\ud800.0.forward", r"line \d+: a lone UTF-16 surrogate \(\\ud800: no character\)"),
])
def test_names_that_are_not_unicode_are_an_error_naming_the_line(tmp_path, perturb_pair, new, says, indent):
    first = "Functional.embedding.0.forward"
    change = ((lambda t: t.encode().replace(first.encode(), new)) if isinstance(new, bytes)
              else (lambda t: t.replace(first, new)))
    run = _copy_with(tmp_path, perturb_pair, change, indent=indent)
    for chunk_bytes in (512, CHUNK_BYTES, None):
        with pytest.raises(DumpFormatError, match=r"run/dump\.json: " + says):
            read_msprobe(run, chunk_bytes=chunk_bytes)


@pytest.mark.parametrize(("value", "shown"), [('"abc"', '"abc"'), ("[1, 2]", r"\[1,2\]"), ("true", "true"),
                                              ('{"v": 1}', r'\{"v":1\}')])
def test_a_statistic_that_is_no_number_names_node_argument_and_field(tmp_path, perturb_pair, value, shown):
    dump = json.loads((perturb_pair[0] / "dump.json").read_text())
    node, record = next((k, r) for k, r in dump["data"].items() if r.get("output"))
    run = _copy_with(tmp_path, perturb_pair, lambda t: t)
    record["output"][0]["Max"] = json.loads(value)
    (run / "dump.json").write_text(json.dumps(dump, indent=1))
    says = rf"dump\.json: '{re.escape(node)}' output 0: Max is {shown}, expected a number"
    for chunk_bytes in (512, None):  # typed chunks, and plain dicts
        with pytest.raises(DumpFormatError, match=says):
            read_msprobe(run, chunk_bytes=chunk_bytes)
    with pytest.raises(DumpFormatError, match=says):
        parse_msprobe(dump, source=str(run))


def test_text_that_is_a_number_and_bool_tensor_statistics_still_read():
    leaf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": "inf", "Min": "-1.5",
            "Mean": None, "Norm": None}
    mask = {"type": "torch.Tensor", "dtype": "torch.bool", "shape": [2], "Max": True, "Min": False,
            "Mean": None, "Norm": None}
    graph = parse_msprobe({"data": {"Functional.relu.0.forward": {"input_args": [leaf, mask]}}})
    stats = graph.view("Functional.relu.0.forward").tensors
    assert (stats[0].stats["max"], stats[0].stats["min"]) == (math.inf, -1.5)
    assert (stats[1].stats["max"], stats[1].stats["min"]) == (1.0, 0.0)


def test_a_parent_construct_json_never_lists_is_added_with_a_note(tmp_path, perturb_pair):
    run = tmp_path / "run"
    shutil.copytree(perturb_pair[0], run)
    construct = json.loads((run / "construct.json").read_text())
    construct["Functional.embedding.0.forward"] = "Module.nowhere.Foo.forward.0"
    (run / "construct.json").write_text(json.dumps(construct))
    graph = read_msprobe(run)
    assert graph.view("Functional.embedding.0.forward").parent == "Module.nowhere.Foo.forward.0"
    assert graph.info.missing == ("construct.json: parent 'Module.nowhere.Foo.forward.0' named but not listed; "
                                  "added at top level, without data",)


def test_a_node_id_twice_in_construct_json_is_an_error(tmp_path, perturb_pair):
    run = tmp_path / "run"
    shutil.copytree(perturb_pair[0], run)
    text = (run / "construct.json").read_text()
    (run / "construct.json").write_text(text.replace("{", '{"Tensor.__add__.0.forward": null, ', 1))
    with pytest.raises(DumpFormatError, match=r"construct\.json: 'Tensor\.__add__\.0\.forward' is a key twice"):
        read_msprobe(run)


def test_a_parent_cycle_names_construct_json(tmp_path, perturb_pair):
    run = tmp_path / "run"
    shutil.copytree(perturb_pair[0], run)
    construct = json.loads((run / "construct.json").read_text())
    construct["Module.embedding.Embedding.forward.0"] = "Functional.embedding.0.forward"
    (run / "construct.json").write_text(json.dumps(construct))
    with pytest.raises(GraphCycleError, match=r"run/construct\.json: parent links form a cycle"):
        read_msprobe(run)


def _node_columns(graph):
    nodes = graph.nodes
    return (nodes.ids, nodes.parent.tolist(), nodes.kind.tolist(), nodes.op, nodes.direction.tolist(),
            nodes.micro_step.tolist(), nodes.stack.tolist(), nodes.has_data.tolist(), graph.info.missing)


def test_reused_structure_reads_the_same_graphs(perturb_pair, tmp_path, monkeypatch):
    # the npu and bench runs of the sample share construct.json and their dump ids; a copy of the bench run with
    # one parent changed in construct.json does not: its columns are derived again, and show the change
    from graphcmp.core.readers import msprobe

    npu, bench = perturb_pair
    edited = tmp_path / "step0" / "rank0"
    shutil.copytree(bench, edited)
    construct = json.loads((edited / "construct.json").read_text())
    moved = "Functional.linear.2.forward"
    construct[moved] = "Module.encoder.layers.1.linear2.Linear.forward.0"
    (edited / "construct.json").write_text(json.dumps(construct))
    alone = [read_msprobe(path) for path in (npu, bench, edited)]
    derived = []
    parse = msprobe._parsed_ids
    monkeypatch.setattr(msprobe, "_parsed_ids", lambda ids, compiled: derived.append(len(ids)) or parse(ids, compiled))
    with msprobe.reusing_structure():
        reused = [read_msprobe(path) for path in (npu, bench, edited, edited)]
    assert len(derived) == 2  # bench reused npu's; the second read of `edited` its first
    for graph, again in zip([*alone, alone[2]], reused):
        assert _node_columns(again) == _node_columns(graph)
    assert alone[0].info.missing == ()  # every dump-only node of this run is a parameter gradient with an owner
    assert reused[2].view(moved).parent == construct[moved] != reused[1].view(moved).parent
    read_msprobe(npu)
    assert len(derived) == 3  # outside the block nothing is kept
    parsed = []
    monkeypatch.setattr(msprobe, "read_json", lambda *args, **kw: parsed.append(args[0].name) or read_json(*args, **kw))
    with msprobe.reusing_structure():
        for path in (npu, bench, edited, npu):
            read_msprobe(path)
    assert parsed.count("construct.json") == 3  # bench's text is npu's: not parsed again


def test_reused_structure_keeps_the_notes_on_construct(perturb_pair, tmp_path):
    # a dump-only node construct.json lacks is noted on every read that reuses the structure too
    from graphcmp.core.readers import msprobe

    run = tmp_path / "step0" / "rank0"
    shutil.copytree(perturb_pair[1], run)
    construct = json.loads((run / "construct.json").read_text())
    del construct["Functional.linear.2.forward"]
    (run / "construct.json").write_text(json.dumps(construct))
    alone = read_msprobe(run)
    assert any("not in it; shown at top level" in note for note in alone.info.missing)
    with msprobe.reusing_structure():
        first, second = read_msprobe(run), read_msprobe(run)
    assert first.info.missing == second.info.missing == alone.info.missing
    assert _node_columns(second) == _node_columns(alone)


def test_reused_node_tables_are_shared_only_by_runs_of_the_same_nodes(perturb_pair, tmp_path):
    # the bench run has the npu run's nodes and stacks: its graph takes the npu run's node table; a copy with one
    # stack frame changed does not, nor one with another structure; every graph is the one read alone
    from graphcmp.core.readers import msprobe

    npu, bench = perturb_pair
    restacked, moved = tmp_path / "step0" / "rank1", tmp_path / "step0" / "rank2"
    shutil.copytree(bench, restacked)
    shutil.copytree(bench, moved)
    stack = json.loads((restacked / "stack.json").read_text())
    first = next(iter(stack))
    stack[first][1][-1] += " (edited)"
    (restacked / "stack.json").write_text(json.dumps(stack))
    construct = json.loads((moved / "construct.json").read_text())
    construct["Functional.linear.2.forward"] = "Module.encoder.layers.1.linear2.Linear.forward.0"
    (moved / "construct.json").write_text(json.dumps(construct))
    paths = (npu, bench, restacked, bench, moved)
    alone = [read_msprobe(path) for path in paths]
    with msprobe.reusing_structure():
        reused = [read_msprobe(path) for path in paths]
    assert reused[1].nodes is reused[0].nodes
    assert all(reused[k].nodes is not reused[k - 1].nodes for k in (2, 3, 4))
    assert reused[2].stacks != reused[1].stacks and reused[4].nodes.parent.tolist() != reused[3].nodes.parent.tolist()
    for graph, again in zip(alone, reused):
        assert again.nodes == graph.nodes and again.tensors == graph.tensors and again.stacks == graph.stacks
        assert again.info == graph.info
