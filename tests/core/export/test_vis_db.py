"""Writing `.vis.db`: round trip, msprobe's schema, msprobe's answer for the same dumps, the plugin opens it."""

from __future__ import annotations

import collections
import gzip
import json
import shutil
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from graphcmp.core.compare import compare_paths, compare_vis
from graphcmp.core.errors import OutputError
from graphcmp.core.export import vis_db, vis_records
from graphcmp.core.export.vis_db import write_vis_db
from graphcmp.core.forking import can_fork_aside
from graphcmp.core.readers import read_graph
from graphcmp.core.readers.vis import VisGraphKey, list_vis_graphs, read_vis
from graphcmp.core.report import CompareReport
from graphcmp.samples import samples_dir
from tests.conftest import DATA, shared


def sample_reports() -> list[CompareReport]:
    """The demo pair, steps 0 and 1."""
    base = samples_dir() / "msprobe" / "tf_small"
    return [compare_paths(base / "perturb" / f"step{s}" / "rank0", base / "baseline" / f"step{s}" / "rank0")
            for s in (0, 1)]


@pytest.fixture(scope="module")
def reports() -> list[CompareReport]:
    return sample_reports()


def assert_same_report(read: CompareReport, ours: CompareReport) -> None:
    """Ids, hierarchy, matches, verdicts and every tensor column survive the file."""
    for a, b in ((read.npu, ours.npu), (read.bench, ours.bench)):
        assert a.nodes.ids == b.nodes.ids
        np.testing.assert_array_equal(a.nodes.parent, b.nodes.parent)
        np.testing.assert_array_equal(a.nodes.kind, b.nodes.kind)
        np.testing.assert_array_equal(a.nodes.micro_step, b.nodes.micro_step)
        np.testing.assert_array_equal(a.tensors.node, b.tensors.node)
        np.testing.assert_array_equal(a.tensors.stats[a.tensors.present], b.tensors.stats[b.tensors.present])
        assert a.tensors.slot == b.tensors.slot and a.tensors.value == b.tensors.value
        assert a.tensors.dtype == b.tensors.dtype and a.tensors.shape == b.tensors.shape
    np.testing.assert_array_equal(read.matches.npu_to_bench, ours.matches.npu_to_bench)
    np.testing.assert_array_equal(read.verdicts.status, ours.verdicts.status)


def test_round_trip_holds_every_step(reports, tmp_path):
    path = tmp_path / "cmp.vis.db"
    result = write_vis_db(reports, path)
    assert result.nodes == 4 * 178 and result.bytes == path.stat().st_size
    assert list_vis_graphs(path) == (VisGraphKey(0, 0), VisGraphKey(1, 0))
    for step, ours in enumerate(reports):
        assert_same_report(compare_vis(read_vis(path, step=step)), ours)


def table_rows(path: Path) -> dict[str, list[tuple]]:
    """Every row of each table, sorted, and the tables and indexes in the order they were made."""
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)
    rows = {name: sorted(conn.execute(f"SELECT * FROM {name}"), key=repr)
            for name in ("tb_nodes", "tb_stack", "tb_config")}
    rows["schema"] = list(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid"))
    conn.close()
    return rows


def overflow_report(tmp_path: Path) -> CompareReport:
    """msprobe's cnn comparison with overflow levels (attributes every node has)."""
    path = tmp_path / "overflow.vis.db"
    with gzip.open(DATA / "vis_cnn_overflow" / "compare_v26.vis.db.gz") as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return compare_vis(read_vis(path))


@pytest.mark.skipif(not can_fork_aside(), reason="needs fork and a second core")
@pytest.mark.parametrize("case", ["two_steps", "overflow"])
def test_texts_made_by_a_forked_process_give_the_same_rows(case, reports, tmp_path, monkeypatch):
    documents = reports if case == "two_steps" else [overflow_report(tmp_path)]
    started = []

    class Counted(vis_db._ForkedTexts):
        def __init__(self, sides):
            started.append(len(sides))
            super().__init__(sides)

    monkeypatch.setattr(vis_db, "_ForkedTexts", Counted)
    assert_forked_rows_are_these(documents, tmp_path, monkeypatch)
    assert started == [2] * len(documents)


def assert_forked_rows_are_these(documents, tmp_path: Path, monkeypatch) -> None:
    """The rows written with texts made here (small documents) equal those written with texts made by a forked
    process, several blocks a side."""
    here = tmp_path / "here.vis.db"
    write_vis_db(documents, here)
    monkeypatch.setattr(vis_db, "FORK_NODES", 0)
    monkeypatch.setattr(vis_records, "BLOCK_NODES", 40)
    forked = tmp_path / "forked.vis.db"
    write_vis_db(documents, forked)
    assert table_rows(forked) == table_rows(here)


@pytest.fixture
def fork_alone(monkeypatch) -> list[int]:
    """This process makes no block unless the forked one failed: each comes from the forked process. Gives the
    first row of each block this process takes from the forked one, in order."""
    monkeypatch.setattr(vis_db._Claims, "take", lambda self, k: False)
    monkeypatch.setattr(vis_db._ForkedTexts, "_make_ahead", lambda self: False)
    taken = []
    take = vis_db._Slots.take

    def counted(self, slot, sizes, texts):
        taken.append(texts.start)
        return take(self, slot, sizes, texts)

    monkeypatch.setattr(vis_db._Slots, "take", counted)
    return taken


@pytest.mark.skipif(not can_fork_aside(), reason="needs fork and a second core")
def test_every_block_can_come_from_the_forked_process(reports, tmp_path, monkeypatch, fork_alone):
    assert_forked_rows_are_these(reports, tmp_path, monkeypatch)
    assert fork_alone == [lo for _ in reports for _side in range(2) for lo in range(0, 178, 40)]


@pytest.mark.skipif(not can_fork_aside(), reason="needs fork and a second core")
def test_this_process_makes_blocks_while_the_forked_one_is_slow(reports, tmp_path, monkeypatch):
    made = []
    make = vis_db._Makers.make

    def slow_sender(answer, makers, claims, slots):
        while (k := claims.next()) is not None:
            time.sleep(0.5)  # a block here takes milliseconds: this one is slower even when the machine is loaded
            answer.send((k, *slots.put(makers.make(k))))

    def counted(self, k):
        made.append(k)  # in this process only: the forked process appends to its copy
        return make(self, k)

    monkeypatch.setattr(vis_db, "_send_texts", slow_sender)
    monkeypatch.setattr(vis_db._Makers, "make", counted)
    assert_forked_rows_are_these(reports[:1], tmp_path, monkeypatch)
    # of the npu side's 5 blocks (this process makes no other side's): those made ahead while it waits, at least
    assert len(made) == len(set(made)) >= vis_db.AHEAD_BLOCKS and all(k < 5 for k in made)


@pytest.mark.skipif(not can_fork_aside(), reason="needs fork and a second core")
def test_a_failed_text_process_leaves_the_rest_to_this_one(reports, tmp_path, monkeypatch, fork_alone):
    def first_block_then_fail(answer, makers, claims, slots):
        k = claims.next()
        answer.send((k, *slots.put(makers.make(k))))
        answer.send(None)

    monkeypatch.setattr(vis_db, "_send_texts", first_block_then_fail)
    assert_forked_rows_are_these(reports, tmp_path, monkeypatch)
    assert fork_alone == [0, 0]  # one block from each document's process


@pytest.mark.skipif(not can_fork_aside(), reason="needs fork and a second core")
def test_a_block_that_cannot_be_read_back_is_made_here(reports, tmp_path, monkeypatch, fork_alone):
    take = vis_db._Slots.take

    def second_unreadable(self, slot, sizes, texts):
        return None if len(fork_alone) == 2 else take(self, slot, sizes, texts)

    monkeypatch.setattr(vis_db._Slots, "take", second_unreadable)
    assert_forked_rows_are_these(reports, tmp_path, monkeypatch)
    assert fork_alone[:2] == [0, 40]


@pytest.mark.skipif(not can_fork_aside(), reason="needs fork and a second core")
def test_a_counter_lock_never_given_back_leaves_the_blocks_to_this_one(reports, tmp_path, monkeypatch):
    done = threading.Event()
    init = vis_db._Claims.__init__

    def held_for_good(self, count):  # as if its holder died holding it
        init(self, count)
        held = threading.Event()
        lock = self._next.get_lock()
        threading.Thread(target=lambda: (lock.acquire(), held.set(), done.wait()), daemon=True).start()
        held.wait()

    monkeypatch.setattr(vis_db._Claims, "__init__", held_for_good)
    monkeypatch.setattr(vis_db, "LOCK_WAIT", 0.05)
    try:
        assert_forked_rows_are_these(reports, tmp_path, monkeypatch)
    finally:
        done.set()


def test_schema_is_msprobes(reports, tmp_path):
    path = tmp_path / "cmp.vis.db"
    write_vis_db(reports[0], path)
    reference = tmp_path / "ref.vis.db"
    with gzip.open(DATA / "vis_tf_small" / "compare_v26.vis.db.gz") as src, reference.open("wb") as dst:
        shutil.copyfileobj(src, dst)

    def schema(p: Path) -> dict:
        conn = sqlite3.connect(f"{p.as_uri()}?mode=ro&immutable=1", uri=True)
        tables = {name: [c[1:3] for c in conn.execute(f"PRAGMA table_info({name})")]
                  for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL")}
        conn.close()
        return {"tables": tables, "indexes": indexes}

    assert schema(path) == schema(reference)


def _parents(graph) -> dict:
    return {n: graph.nodes.ids[p] if p >= 0 else None for n, p in zip(graph.nodes.ids, graph.nodes.parent.tolist())}


def _stats(graph) -> dict:
    t = graph.tensors
    return {(graph.nodes.ids[t.node[k]], int(t.role[k]), t.slot[k]): np.where(t.present[k], t.stats[k], np.nan)
            for k in range(len(t))}


def _matches(report) -> dict:
    return {report.npu.nodes.ids[i]: report.bench.nodes.ids[j]
            for i, j in enumerate(report.matches.npu_to_bench.tolist()) if j >= 0}


def parent_differences(ours, msprobe) -> set[str]:
    """Nodes whose parent differs, after removing the one known, explained kind (see docs/interop.md)."""
    a, b = _parents(ours), _parents(msprobe)
    diff = {n for n in a if a[n] != b[n]}
    explained = set()
    for n in diff:
        if ".parameters_grad." in n and a[n].rsplit(".", 1)[0] == b[n].rsplit(".", 1)[0]:
            explained.add(n)  # parameters_grad.N: graphcmp hangs it under backward.N, msprobe under the last one
    return diff - explained


def assert_same_as_msprobe(ours: CompareReport, msprobe: CompareReport, *, rtol: float = 1e-12) -> None:
    """Node ids, parents, matches and per-node statistics of our export equal msprobe's file."""
    assert set(ours.npu.nodes.ids) == set(msprobe.npu.nodes.ids)
    assert set(ours.bench.nodes.ids) == set(msprobe.bench.nodes.ids)
    assert ours.npu.root == msprobe.npu.root == "DefaultModel"
    assert parent_differences(ours.npu, msprobe.npu) == set()
    assert _matches(ours) == _matches(msprobe)
    a, b = _stats(ours.npu), _stats(msprobe.npu)
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=rtol, atol=0, err_msg=str(key))


def verdict_table(ours: CompareReport, doc) -> collections.Counter:
    """(msprobe precision_index, graphcmp verdict) -> node count."""
    names = {0: "pass", 1: "warning", 2: "error", -1: "skip", -2: "unmatched"}
    index = dict(zip(doc.npu.nodes.ids, doc.precision_index.tolist()))
    return collections.Counter((None if np.isnan(index[n]) else index[n], names[s])
                               for n, s in zip(ours.npu.nodes.ids, ours.verdicts.status.tolist()))


def test_export_equals_msprobes_file_for_the_same_dumps(reports, tmp_path):
    path = tmp_path / "ours.vis.db"
    write_vis_db(reports[0], path)
    ours = compare_vis(read_vis(path))
    msprobe_doc = read_vis(DATA / "vis_tf_small" / "compare_v26.vis.db.gz")
    assert_same_as_msprobe(ours, compare_vis(msprobe_doc))
    assert {n for n in ours.npu.nodes.ids if _parents(ours.npu)[n] != _parents(msprobe_doc.npu)[n]} == set()
    table = verdict_table(ours, msprobe_doc)
    # msprobe 26.2 passes most nodes downstream of the perturbed weight; graphcmp's statistics rules flag them
    assert table[(0.0, "error")] == 102 and table[(0.5, "error")] == 11 and table[(0.0, "pass")] == 31


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize("job,ref,nodes", [
    ("tf_big", "v26/tf_big_stats_perturb/compare_20261122044653.vis.db.gz", 1228),
    ("tf_huge", "v26/tf_huge_stats_perturb/compare_20261122044715.vis.db.gz", 9709),
])
def test_export_equals_msprobe_on_larger_models(job, ref, nodes, tmp_path):
    dumps = shared(f"msprobe/dumps/{job}/statistics")
    report = compare_paths(dumps / "perturb" / "step0" / "rank0", dumps / "baseline" / "step0" / "rank0")
    write_vis_db(report, tmp_path / "ours.vis.db")
    ours = compare_vis(read_vis(tmp_path / "ours.vis.db"))
    msprobe = compare_vis(read_vis(shared(f"msprobe/vis/{ref}")))
    assert len(ours.npu) == len(msprobe.npu) == nodes
    assert_same_as_msprobe(ours, msprobe)


def test_single_runs_and_errors(perturb_pair, reports, tmp_path):
    graph = read_graph(perturb_pair[1])
    path = tmp_path / "build.vis.db"
    write_vis_db(graph, path)
    read = compare_vis(read_vis(path))
    assert not isinstance(read, CompareReport) and read.nodes.ids == graph.nodes.ids
    with pytest.raises(OutputError, match="two documents are step 0 rank 0"):
        write_vis_db([reports[0], reports[0]], tmp_path / "twice.vis.db")
    with pytest.raises(OutputError, match="cannot mix"):
        write_vis_db([reports[0], read_graph(perturb_pair[1].parent.parent / "step1" / "rank0")],
                     tmp_path / "mixed.vis.db")
    assert not (tmp_path / "twice.vis.db").exists() and not list(tmp_path.glob("*.part"))


# --------------------------------------------------------------------------- tb-graph-ascend's own loader


def plugin_load(logdir: Path) -> dict:
    """Load every run under `logdir` through tb-graph-ascend's services; what the plugin found, per run."""
    state = pytest.importorskip("server.app.utils.global_state")
    base = pytest.importorskip("server.app.service.graph_service_base")
    db_service = pytest.importorskip("server.app.service.graph_service_db")
    json_service = pytest.importorskip("server.app.service.graph_service_vis")
    state.GraphState.reset_global_state()
    state.GraphState.set_global_value("logdir", str(logdir))
    meta = base.GraphServiceStrategy.load_meta_dir()
    assert not meta["error"], meta["error"]
    found = {}
    for run, info in meta["data"].items():
        tag = info["tags"][0]
        if info["type"] == "db":
            service = db_service.DbGraphService(run, tag)
            assert service.load_graph_data()["success"]
        else:
            service = json_service.JsonGraphService(run, tag)
            events = list(service.load_graph_data())
            assert '"done": true' in events[-1]
        config = service.load_graph_config_info()
        assert config["success"]
        cfg = config["data"]
        graphs = {}
        for step in cfg.get("steps") or [0]:
            for rank in cfg.get("ranks") or [0]:
                meta_data = {"rank": rank, "step": step, "microStep": -1, "run": run, "tag": tag, "type": info["type"]}
                nodes = service.load_graph_all_node_list(meta_data)
                assert nodes["success"]
                graphs[(step, rank)] = {k: len(v) for k, v in nodes["data"].items()}
                expanded = service.change_node_expand_state({"nodeType": "NPU", "nodeName": "root"}, meta_data)
                assert expanded["success"] and expanded["data"]
                first = nodes["data"]["npuNodeList"][1]
                node_info = service.get_node_info({"nodeType": "NPU", "nodeName": first}, meta_data)
                assert node_info["success"] and node_info["data"]["npu"]["node_name" if info["type"] == "db" else "id"]
        found[run] = {"type": info["type"], "single": cfg["isSingleGraph"], "steps": cfg.get("steps"),
                      "ranks": cfg.get("ranks"), "task": cfg["task"], "graphs": graphs}
    return found


def test_tb_graph_ascend_opens_the_file(reports, perturb_pair, tmp_path):
    write_vis_db(reports, tmp_path / "logs" / "compare" / "cmp.vis.db")
    write_vis_db(read_graph(perturb_pair[0]), tmp_path / "logs" / "build" / "run.vis.db")
    found = plugin_load(tmp_path / "logs")
    assert found["compare"]["type"] == "db" and not found["compare"]["single"]
    assert found["compare"]["steps"] == [0, 1] and found["compare"]["ranks"] == [0]
    assert found["compare"]["task"] == "summary"
    for step in (0, 1):
        assert found["compare"]["graphs"][(step, 0)] == {
            "npuMatchNodes": 178, "benchMatchNodes": 178, "npuUnMatchNodes": 0, "benchUnMatchNodes": 0,
            "npuNodeList": 178, "benchNodeList": 178}
    assert found["build"]["single"] and found["build"]["graphs"][(0, 0)] == {"npuNodeList": 178}


def _leaves(path: Path, source: str = "NPU") -> dict[str, dict]:
    """Every input/output leaf of one side of step 0 in a ``.vis.db``, by its name."""
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)
    found: dict[str, dict] = {}
    for inputs, outputs in conn.execute(
            "SELECT input_data, output_data FROM tb_nodes WHERE step = 0 AND data_source = ?", (source,)):
        for text in (inputs, outputs):
            found.update(json.loads(text or "{}"))
    conn.close()
    return found


def test_requires_grad_and_err_message_columns_are_msprobes(reports, tmp_path):
    """msprobe 26.2's columns for the same dumps: requires_grad per leaf, Requires_grad Consistent per pair, and an
    Err_message that is ``[]`` on a pass and graphcmp's reason otherwise."""
    write_vis_db(reports[0], tmp_path / "ours.vis.db")
    reference = tmp_path / "ref.vis.db"
    with gzip.open(DATA / "vis_tf_small" / "compare_v26.vis.db.gz") as src, reference.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    ours, theirs = _leaves(tmp_path / "ours.vis.db"), _leaves(reference)
    assert len(ours) == 492 and ours.keys() <= theirs.keys()
    grads = collections.Counter(leaf.get("requires_grad") for leaf in ours.values())
    assert grads == {"True": 231, "False": 184, None: 77}  # the dump's 231 true and 184 false; 77 scalars
    for name, leaf in ours.items():
        if "requires_grad" in leaf:
            assert leaf["requires_grad"] == theirs[name]["requires_grad"], name
        assert leaf["Requires_grad Consistent"] == theirs[name]["Requires_grad Consistent"], name
        messages = json.loads(leaf["Err_message"])
        if leaf["Result"] == "pass":
            assert messages == [], name
        else:
            assert len(messages) == 1 and messages[0].startswith(f"{leaf['Result']}: "), name
    weight = ours["Module.encoder.layers.1.linear1.Linear.forward.0.parameters.weight"]
    assert weight["Err_message"] == '["error: param.weight: Mean rel err 4.57"]'
    assert all("Err_message" not in leaf for leaf in _leaves(tmp_path / "ours.vis.db", "Bench").values())


def test_tb_graph_ascend_shows_the_pair_columns(reports, tmp_path):
    write_vis_db(reports[0], tmp_path / "logs" / "compare" / "cmp.vis.db")
    assert plugin_load(tmp_path / "logs")["compare"]["type"] == "db"  # leaves the plugin's state on this logdir
    from server.app.service.graph_service_db import DbGraphService

    service = DbGraphService("compare", "cmp")
    assert service.load_graph_data()["success"]
    meta = {"rank": 0, "step": 0, "microStep": -1, "run": "compare", "tag": "cmp", "type": "db"}
    node = "Module.encoder.layers.1.linear1.Linear.forward.0"
    shown = service.get_node_info({"nodeType": "NPU", "nodeName": node}, meta)["data"]["npu"]["input_data"]
    weight = shown[f"{node}.parameters.weight"]
    assert (weight["requires_grad"], weight["Requires_grad Consistent"], weight["Result"]) == ("True", "True", "error")
    assert json.loads(weight["Err_message"]) == ["error: param.weight: Mean rel err 4.57"]
