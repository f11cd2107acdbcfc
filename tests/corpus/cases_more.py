"""The hostile-input corpus, second part (issue 30): the classes the first part did not cover.

Each class is a row of the issue: deep nesting inside dump.json values, numbers beyond float64 in statistics,
`.ir` scopes nested thousands deep, `.vis`/`.vis.db` fields of the wrong type, result ids of the wrong type,
bytes that are not UTF-8 beside newlines, a large file of an unknown format, duplicate keys, inputs that lose or
invent something (empty data, parents named nowhere, GE ops named twice, an `.ir` cut short, `.vis` files that
hold nothing usable), and the command line's messages. Cases are generated from the real copies in tests/data
as in `cases.py`, whose `CASES` they join.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from tests.conftest import DATA
from tests.corpus.cases import (
    BASELINE,
    CASES,
    GE_TEXT,
    GPT,
    IR,
    PERTURB,
    VIS_DB,
    Case,
    Spec,
    _good_result,
    case,
    compare,
    copy,
    damaged_dump,
    npz_result,
)

VIS = DATA / "vis_tf_small" / "compare_v812.vis.gz"
EMBEDDING = "Functional.embedding.0.forward"
FIRST_MAX = '"Max": 3.902043104171753'


def _vis(root: Path, change: Callable[[dict], None]) -> Path:
    doc = json.loads(gzip.decompress(VIS.read_bytes()))
    change(doc)
    path = root / "bad.vis"
    path.write_text(json.dumps(doc))
    return path


def _vis_db(root: Path, sql: str, params: tuple = ()) -> Path:
    path = root / "bad.vis.db"
    path.write_bytes(gzip.decompress(VIS_DB.read_bytes()))
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(sql, params)
    return path


def _dump(root: Path, change: Callable[[str], str | bytes], says: str, expect: str = "error",
          compact: bool = False) -> Spec:
    run = damaged_dump(root, change, compact=compact)
    return Spec(compare(BASELINE, run, root / "cmp.npz"), expect, says, [run])


def _register(kind: str, cases: dict[str, Callable[[Path], Spec]]) -> None:
    for name, make in cases.items():
        CASES.append(Case(kind, name, make))


# --- nesting inside dump.json values: a bounded read, one line -----------------------------------------

def _nested_record(depth: int) -> Callable[[str], str]:
    return lambda t: t.replace(FIRST_MAX, '"Max": ' + "[" * depth + "1" + "]" * depth, 1)


def _nested_case(depth: int) -> Callable[[Path], Spec]:
    return lambda root: _dump(root, _nested_record(depth), "nested too deeply")


_register("dump_nesting", {f"tensor_record_nested_{d}_deep": _nested_case(d) for d in (2000, 50_000, 100_000)})
_register("dump_nesting", {
    "tensor_record_nested_100000_deep_compact": lambda root: _dump(root, _nested_record(100_000), "nested too deeply",
                                                                   compact=True),
    "stack_json_nested_50000_deep": lambda root: _stack(root, "[" * 50_000 + "]" * 50_000, "nested too deeply"),
})


def _stack(root: Path, text: str | bytes, says: str) -> Spec:
    run = copy(BASELINE, root / "bench")
    (run / "stack.json").write_bytes(text if isinstance(text, bytes) else text.encode())
    return Spec(compare(BASELINE, run, root / "cmp.npz"), "error", says, [run])


def _module_chain(depth: int) -> Callable[[dict], None]:
    """construct.json with the embedding call under a chain of `depth` modules, each the parent of the next."""
    def change(parents: dict) -> None:
        chain = [f"Module.m{k}.M.forward.0" for k in range(depth)]
        parents.update(zip(chain, [None, *chain[:-1]]))
        parents[EMBEDDING] = chain[-1]
    return change


@case("dump_nesting")
def case_modules_nested_20000_deep(root: Path) -> Spec:
    run = damaged_dump(root, construct=_module_chain(20_000))
    return Spec(compare(BASELINE, run, root / "cmp.npz"), "error",
                "levels deep; no run's calls nest deeper than 1024", [run])


@case("dump_nesting")
def case_modules_nested_1000_deep_are_read(root: Path) -> Spec:  # within MAX_DEPTH: read and compared
    run = damaged_dump(root, construct=_module_chain(1000))
    return Spec(compare(run, run, root / "cmp.npz"), "ok", "verdict: agree", [run])


@case("dump_nesting")
def case_vis_subnodes_nested_3000_deep(root: Path) -> Spec:
    def chain(doc: dict) -> None:
        nodes = doc["NPU"]["node"]
        names = [f"Module.m{k}.M.forward.0" for k in range(3000)]
        top = nodes["DefaultModel"]
        for k, name in enumerate(names):
            nodes[name] = {"node_type": 0, "subnodes": [names[k + 1]] if k + 1 < len(names) else top["subnodes"],
                           "matched_node_link": []}
        top["subnodes"] = [names[0]]
    path = _vis(root, chain)
    return Spec(["info", str(path)], "error", "NPU: node 'Module.m1024.M.forward.0' lies 1025 levels deep", [path])


# --- numbers beyond float64 in statistics ---------------------------------------------------------------

def _number(value: str, says: str, compact: bool = False) -> Callable[[Path], Spec]:
    return lambda root: _dump(root, lambda t: t.replace(FIRST_MAX, f'"Max": {value}', 1), says, compact=compact)


_register("huge_numbers", {
    "max_1e400": _number("1e400", "line 29: 1e400 is beyond float64"),
    "max_minus_1e400": _number("-1e400", "line 29: -1e400 is beyond float64"),
    "max_1e400_compact": _number("1e400", "beyond float64", compact=True),
    "max_400_digit_integer": _number("9" * 400, "line 29: an integer of 400 digits is beyond float64"),
    "max_5000_digit_integer": _number("9" * 5000, "an integer of 5000 digits is beyond float64"),
})


# --- an .ir whose scopes nest thousands deep ------------------------------------------------------------

def _deep_scopes(depth: int) -> Callable[[Path], Spec]:
    def make(root: Path) -> Spec:
        source = IR / "13_optimize_0566.ir"
        path = root / source.name
        scope = "/".join(f"s{k}-Cell" for k in range(depth))
        path.write_text(source.read_text().replace("(Default/conv1-Conv2d/", f"(Default/{scope}/conv1-Conv2d/"))
        return Spec(compare(path, source, root / "cmp.npz"), "error", "scopes nested deeper than", [path])
    return make


_register("ir_nesting", {f"ir_scopes_{d}_deep": _deep_scopes(d) for d in (3000, 30_000)})


@case("ir_nesting")
def case_ir_scopes_999_deep_are_read(root: Path) -> Spec:  # within MAX_SCOPE_DEPTH: read, compared to itself
    source = IR / "13_optimize_0566.ir"
    path = root / source.name
    scope = "/".join(f"s{k}-Cell" for k in range(998))
    path.write_text(source.read_text().replace("(Default/", f"(Default/{scope}/"))
    return Spec(compare(path, path, root / "cmp.npz"), "ok", "verdict: agree", [path])


# --- .vis / .vis.db fields of the wrong type --------------------------------------------------------------

def _npu_node(doc: dict, node: str = "Tensor.__add__.0.forward") -> dict:
    return doc["NPU"]["node"][node]


_VIS_TYPES = {
    "vis_subnodes_an_object": (lambda d: _npu_node(d, "DefaultModel").update(subnodes={"a": 1}),
                               "NPU: node 'DefaultModel': subnodes is an object, expected a list of node names"),
    "vis_link_an_object": (lambda d: _npu_node(d).update(matched_node_link={"a": 1}),
                           "node 'Tensor.__add__.0.forward': matched_node_link is an object"),
    "vis_micro_steps_text": (lambda d: d.update(MicroSteps="many"),
                             "bad.vis: MicroSteps holds 'many', expected a whole number"),
    "vis_node_type_text": (lambda d: _npu_node(d).update(node_type="api"), "node_type is text, expected a whole"),
    "vis_stack_info_a_number": (lambda d: _npu_node(d).update(stack_info=5), "stack_info is a number (5)"),
}


def _vis_case(change: Callable[[dict], None], says: str) -> Callable[[Path], Spec]:
    return lambda root: Spec(["info", str(_vis(root, change))], "error", says, [root / "bad.vis"])


_register("vis_types", {name: _vis_case(*what) for name, what in _VIS_TYPES.items()})

_NODE = "NPU_0_0_Functional.embedding.0.forward"
_VIS_DB_TYPES = {
    "vis_db_micro_steps_text": ("UPDATE tb_config SET micro_steps = 'many'", (),
                                "tb_config column micro_steps holds 'many', expected a whole number"),
    "vis_db_link_an_object": ("UPDATE tb_nodes SET matched_node_link = '{\"a\": 1}' WHERE id = ?", (_NODE,),
                              "matched_node_link"),
    "vis_db_sub_nodes_of_objects": ("UPDATE tb_nodes SET sub_nodes = '[{\"a\": 1}]' WHERE id = ?",
                                    ("NPU_0_0_Module.embedding.Embedding.forward.0",),
                                    "node 'Module.embedding.Embedding.forward.0': subnodes holds an object"),
    "vis_db_link_of_objects": ("UPDATE tb_nodes SET matched_node_link = '[{\"a\": 1}]' WHERE id = ?", (_NODE,),
                               "matched_node_link holds an object, expected a list of node names"),
}


def _vis_db_case(sql: str, params: tuple, says: str) -> Callable[[Path], Spec]:
    return lambda root: Spec(["info", str(_vis_db(root, sql, params))], "error", says, [root / "bad.vis.db"])


_register("vis_types", {name: _vis_db_case(*what) for name, what in _VIS_DB_TYPES.items()})


# --- result ids of the wrong type; a result with an id twice -----------------------------------------------

def _result_json(root: Path, change: Callable[[dict], None]) -> Path:
    doc = json.loads(_good_result("json").read_text())
    change(doc)
    path = root / "bad.json"
    path.write_text(json.dumps(doc))
    return path


def _set_id(doc: dict, side: str, row: int, value: object) -> None:
    doc[side]["nodes"]["id"][row] = value


def _result_case(change: Callable[[dict], None], command: str, says: str) -> Callable[[Path], Spec]:
    def make(root: Path) -> Spec:
        bad = _result_json(root, change)
        argv = {"vis-db": ["export", str(bad), "--to", "vis-db", "-o", str(root / "out.vis.db")],
                "vis": ["export", str(bad), "--to", "vis", "-o", str(root / "out.vis")]}.get(command,
                                                                                             [command, str(bad)])
        return Spec(argv, "error", says, [bad])
    return make


def _all_ids_numbers(doc: dict) -> None:
    doc["npu"]["nodes"]["id"] = list(range(len(doc["npu"]["nodes"]["id"])))


_register("result_ids", {
    "node_ids_numbers_export_vis_db": _result_case(_all_ids_numbers, "vis-db",
                                                   "field npu.nodes.id holds an integer, expected strings"),
    "node_ids_numbers_info": _result_case(_all_ids_numbers, "info", "field npu.nodes.id holds an integer"),
    "node_id_a_number_diverge": _result_case(lambda d: _set_id(d, "bench", 3, 176), "diverge",
                                             "field bench.nodes.id holds 176 (row 3), expected strings"),
    "node_id_null_export_vis": _result_case(lambda d: _set_id(d, "npu", 2, None), "vis",
                                            "field npu.nodes.id holds None (row 2)"),
})


# --- bytes that are not UTF-8, beside newlines: one line still -----------------------------------------------

def _not_utf8(text: str) -> bytes:
    """A name with bytes that are not UTF-8, and the string around it broken by raw newlines."""
    return text.encode().replace(EMBEDDING.encode(), b"Functional.emb\n\xff\xfe\n\r\n.0.forward", 1)


_register("quoted_bytes", {
    "dump_json_not_utf8_beside_newlines": lambda root: _dump(root, _not_utf8, "bytes that are not UTF-8"),
    "stack_json_not_utf8_beside_newlines": lambda root: _stack(
        root, b'{"0": [["Module.a.A.forward.0"], ["File x.py, line 1\n\xff\n in f"]]}', "bytes that are not UTF-8"),
    "dump_json_control_bytes_in_a_name": lambda root: _dump(
        root, lambda t: t.encode().replace(EMBEDDING.encode(), b"Functional.emb\x1b[2J\xff\x0b\x0c\x85.0.forward", 1),
        "bytes that are not UTF-8"),
})


# --- a large file of an unknown format: sniffed from its first bytes -------------------------------------

@case("unknown_big")
def case_gigabyte_of_zeros_named_ge_model_pb(root: Path) -> Spec:
    path = root / "ge_model.pb"
    with path.open("wb") as f:  # a sparse file: 1 GiB that takes no disk
        f.truncate(1 << 30)
    return Spec(compare(path, GE_TEXT, root / "cmp.npz"), "error", "ge_model.pb: unknown input format", [path])


@case("unknown_big")
def case_gigabyte_of_zeros_named_dump_json(root: Path) -> Spec:
    run = root / "npu"
    run.mkdir()
    with (run / "dump.json").open("wb") as f:
        f.truncate(1 << 30)
    return Spec(compare(run, BASELINE, root / "cmp.npz"), "error", "dump.json: not JSON", [run])


def _zeros_info(name: str, says: str) -> Callable[[Path], Spec]:
    def make(root: Path) -> Spec:
        path = root / name
        with path.open("wb") as f:
            f.truncate(1 << 30)
        return Spec(["info", str(path)], "error", says, [path])
    return make


_register("unknown_big", {
    "gigabyte_of_zeros_named_compare_vis": _zeros_info("compare.vis", "compare.vis: not JSON"),
    "gigabyte_of_zeros_named_cmp_json": _zeros_info("cmp.json", "cmp.json: not JSON"),
    "gigabyte_of_zeros_named_cmp_npz": _zeros_info("cmp.npz", "cmp.npz"),
})


# --- duplicate keys ---------------------------------------------------------------------------------------------

def _data_twice(text: str) -> str:
    return text.replace('"data": {', '"data": {"Tensor.__add__.0.forward": {}},\n "data": {', 1)


@case("duplicate_keys")
def case_dump_json_data_twice(root: Path) -> Spec:
    return _dump(root, _data_twice, "dump.json: 'data' is a key twice at the top level")


@case("duplicate_keys")
def case_dump_json_task_twice(root: Path) -> Spec:
    return _dump(root, lambda t: t.replace('"task": "statistics",', '"task": "statistics",\n "task": "tensor",', 1),
                 "dump.json: 'task' is a key twice at the top level", compact=False)


@case("duplicate_keys")
def case_mapping_yaml_key_twice(root: Path) -> Spec:
    path = copy(GPT / "mapping.yaml", root / "mapping.yaml")
    first = next(line for line in path.read_text().splitlines() if line and not line.startswith("#"))
    path.write_text(path.read_text() + first + "\n  x: y\n")
    lines = path.read_text().splitlines()
    return Spec(compare(GPT / "npu", GPT / "bench", root / "cmp.npz", f"--layer-mapping={path}"), "error",
                f"mapping.yaml:{len(lines) - 1}: {first.rstrip(':')!r} is a key twice in one mapping", [path])


@case("duplicate_keys")
def case_result_json_node_id_twice(root: Path) -> Spec:
    def twice(doc: dict) -> None:
        doc["npu"]["nodes"]["id"][4] = doc["npu"]["nodes"]["id"][3]
    bad = _result_json(root, twice)
    return Spec(["diverge", str(bad)], "error", "field npu.nodes.id holds 'Tensor.__add__.0.forward' "
                                              "twice (rows 3 and 4)", [bad])


@case("duplicate_keys")
def case_npz_result_node_id_twice(root: Path) -> Spec:
    import numpy as np

    from graphcmp.core.npzio import read_npz, write_npz

    doc = read_npz(npz_result(root))
    ids = [str(v) for v in np.asarray(doc["bench"]["nodes"]["id"]).tolist()]
    ids[6] = ids[5]
    doc["bench"]["nodes"]["id"] = ids
    bad = root / "bad.npz"
    write_npz(bad, doc)
    return Spec(["info", str(bad)], "error", "field bench.nodes.id holds", [bad])  # twice (rows 5 and 6)


# --- inputs that lose or invent something: said in the notes, inconclusive ----------------------------------

@case("empty_data")
def case_build_a_dump_with_empty_data(root: Path) -> Spec:
    run = root / "npu"
    run.mkdir()
    (run / "dump.json").write_text('{"task": "statistics", "level": "L1", "data": {}}')
    return Spec(["build", str(run), "-o", str(root / "run.json")], "ok", "missing: dump.json: \"data\" holds no call",
                [run])


@case("empty_data")
def case_compare_a_dump_with_empty_data(root: Path) -> Spec:
    run = root / "npu"
    run.mkdir()
    (run / "dump.json").write_text('{"task": "statistics", "level": "L1", "data": {}}')
    return Spec(compare(run, BASELINE, root / "cmp.npz"), "inconclusive",
                "missing (npu): dump.json: \"data\" holds no call",
                [run])


@case("invented_parents")
def case_parent_named_nowhere(root: Path) -> Spec:
    def nowhere(parents: dict) -> None:
        parents[EMBEDDING] = "Module.nowhere.Foo.forward.0"
    run = damaged_dump(root, construct=nowhere)
    return Spec(compare(BASELINE, run, root / "cmp.npz"), "inconclusive",
                "verdict: inconclusive: the bench run is incomplete: construct.json: parent "
                "'Module.nowhere.Foo.forward.0' named but not listed; added at top level, without data", [run])


@case("invented_parents")
def case_parent_named_nowhere_in_build(root: Path) -> Spec:
    def nowhere(parents: dict) -> None:
        parents[EMBEDDING] = "Module.nowhere.Foo.forward.0"
    run = damaged_dump(root, construct=nowhere)
    return Spec(["build", str(run), "-o", str(root / "run.json")], "ok",
                "missing: construct.json: parent 'Module.nowhere.Foo.forward.0' named but not listed; added at top "
                "level, without data", [run])


def _ge_ops_twice(root: Path, times: int = 2) -> Path:
    """The GE graph with its op blocks repeated (the graph's attributes and the model's after them)."""
    text = GE_TEXT.read_text()
    first = text.index("\n  op {\n") + 1
    end = text.index("\n  attr {\n", text.rindex("\n  op {\n")) + 1  # the graph's own attributes follow its ops
    path = root / "ge_proto_00056_Build.txt"
    path.write_text(text[:first] + text[first:end] * times + text[end:])
    return path


@case("ge_duplicates")
def case_ge_graph_twice(root: Path) -> Spec:
    text = GE_TEXT.read_text()
    graph = text[: text.index("\n}\n") + 3]  # the first graph block (the model's attributes follow it)
    path = root / "ge_proto_00056_Build.txt"
    path.write_text(graph + text)
    return Spec(compare(path, GE_TEXT, root / "cmp.npz"), "error",
                "graph name 'ge_default_20200909152235_1' is used 2 times", [path])


@case("ge_duplicates")
def case_ge_every_op_named_twice(root: Path) -> Spec:
    path = _ge_ops_twice(root)
    return Spec(compare(path, GE_TEXT, root / "cmp.npz"), "error",
                "graph 'ge_default_20200909152235_1': op name '_arg_Placeholder_0_0_0_arg' is used 2 times (and 4 "
                "other name(s))", [path])


@case("ge_duplicates")
def case_ge_every_op_named_twice_json(root: Path) -> Spec:
    from tests.corpus.cases import ATC_JSON
    doc = json.loads(ATC_JSON.read_text())
    doc["graph"][0]["op"] = doc["graph"][0]["op"] * 2
    path = root / "model.json"
    path.write_text(json.dumps(doc))
    return Spec(compare(path, ATC_JSON, root / "cmp.npz"), "error", "is used 2 times", [path])


def _ir_cut(fraction: float, kind: str) -> Callable[[Path], Spec]:
    def make(root: Path) -> Spec:
        source = next(p for p in sorted(IR.glob("*.ir")) if (p.read_bytes().startswith(b"%") == (kind == "actor")))
        data = source.read_bytes()
        cut = root / source.name
        cut.write_bytes(data[: int(len(data) * fraction)])
        whole = copy(source, root / "whole" / source.name)
        if kind == "actor" and fraction < 0.2:  # the cut comes before the first actor: nothing to keep
            return Spec(compare(cut, whole, root / "cmp.npz"), "error", "no graph nodes found", [cut, whole])
        return Spec(compare(cut, whole, root / "cmp.npz"), "inconclusive", "the file is cut short; the nodes before "
                    "the cut are kept", [cut, whole])
    return make


_register("ir_cut", {f"ir_{kind}_cut_at_{int(f * 100)}_percent": _ir_cut(f, kind)
                     for kind in ("text", "actor") for f in (0.1, 0.5, 0.9)})


@case("vis_silent")
def case_vis_db_without_nodes(root: Path) -> Spec:
    path = _vis_db(root, "DELETE FROM tb_nodes")
    return Spec(["info", str(path)], "error", "bad.vis.db: tb_nodes holds no node", [path])


@case("vis_silent")
def case_vis_node_data_a_list(root: Path) -> Spec:
    def listed(doc: dict) -> None:
        for node in doc["NPU"]["node"].values():
            node["input_data"] = list(node.get("input_data", {}).values())
    path = _vis(root, listed)
    return Spec(["info", str(path)], "error", "input_data is a list, expected an object of tensor records", [path])


@case("vis_silent")
def case_vis_garbage_match_links(root: Path) -> Spec:
    def garbage(doc: dict) -> None:
        for k, node in enumerate(doc["NPU"]["node"].values()):
            node["matched_node_link"] = [f"nowhere.{k}"]
    path = _vis(root, garbage)
    return Spec(["diverge", str(path)], "inconclusive",
                "the npu run is incomplete: matched_node_link of 160 npu node(s) links to a bench node the file does "
                "not hold (first: 'DefaultModel' -> 'nowhere.0')", [path])


@case("vis_silent")
def case_vis_db_garbage_match_links(root: Path) -> Spec:
    path = _vis_db(root, "UPDATE tb_nodes SET matched_node_link = '[\"nowhere\"]' WHERE data_source = 'NPU'")
    return Spec(["diverge", str(path)], "inconclusive", "links to a bench node the file does not hold", [path])


# --- the command line's messages --------------------------------------------------------------------------------

def _cli(argv: Callable[[Path], list[str]], expect: str, says: str) -> Callable[[Path], Spec]:
    return lambda root: Spec(argv(root), expect, says)


_register("cli", {
    "diverge_on_a_dump_folder": _cli(lambda r: ["diverge", str(BASELINE)], "error",
                                     "rank0: is a dump folder (msprobe); this command takes a result file "
                                     "or a results folder, which graphcmp compare NPU BENCH -o cmp.npz writes"),
    "info_on_a_dump_folder": _cli(lambda r: ["info", str(BASELINE)], "error", "is a dump folder"),
    "compare_given_a_result_file": _cli(lambda r: ["compare", str(npz_result(r)), str(BASELINE), "-o",
                                                   str(r / "x.npz")], "error",
                                        "cmp.npz: is a graphcmp result file (npz), not a run; open it with graphcmp "
                                        "info, diverge or serve"),
    "compare_on_a_folder_with_no_dump": _cli(lambda r: (r / "empty").mkdir() or ["compare", str(r / "empty"),
                                                                                  str(BASELINE), "-o",
                                                                                  str(r / "empty" / "cmp.npz")],
                                             "error", "empty: holds no dump (no dump.json"),
    "compare_output_txt": _cli(lambda r: compare(PERTURB, BASELINE, r / "out.txt"), "error",
                               "out.txt: -o names a result file ending in .npz or .json"),
    "missing_argument": _cli(lambda r: ["compare", str(BASELINE)], "error",
                             "the following arguments are required: bench; see graphcmp compare --help"),
    "unknown_option": _cli(lambda r: ["diverge", "--nope", "x"], "error",
                          "unrecognized arguments: --nope; see graphcmp --help"),
    "help_has_exit_codes": _cli(lambda r: ["compare", "--help"], "ok", "exit codes:\n  0  done"),
    "top_help_has_exit_codes": _cli(lambda r: ["--help"], "ok", "2  bad input or usage"),
})

