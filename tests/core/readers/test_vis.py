"""Reading tb-graph-ascend files: every reference file reads back as the file says.

The checks compare graphcmp's records with the file read independently (plain sqlite3/json here):
node count, hierarchy (parent and child order), match links, colours and statistics.
"""

from __future__ import annotations

import collections
import gzip
import json
import math
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from graphcmp.core.compare import compare_vis, load_document
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers import read_graph
from graphcmp.core.readers.vis import (
    ATTR_OVERFLOW,
    ATTR_PRECISION,
    VisDocument,
    VisGraphKey,
    list_vis_graphs,
    parse_vis,
    read_vis,
    read_vis_links,
    sniff,
    vis_source,
)
from graphcmp.core.records import NodeKind
from graphcmp.core.report import CompareReport
from tests.conftest import DATA, SHARED, shared

SMALL = sorted((DATA / "vis_tf_small").glob("*.vis*")) + sorted((DATA / "vis_cnn_overflow").glob("*.vis*"))


# --------------------------------------------------------------------------- the file, read independently


def raw_sides(path: Path, key: VisGraphKey) -> dict:
    """{"NPU"/"Bench"/"graph": {node id: node dict}, "Colors": ...} straight from the file."""
    if ".vis.db" in path.name:
        return _raw_db(path, key)
    data = _gunzip(path) if path.suffix == ".gz" else path.read_bytes()
    doc = json.loads(data)
    out = {side: doc[side]["node"] for side in ("NPU", "Bench") if side in doc}
    if not out:
        out["graph"] = doc["node"]
    out["Colors"] = doc.get("Colors") or {}
    return out


def _gunzip(path: Path) -> bytes:
    with gzip.open(path) as f:
        return f.read()


def _raw_db(path: Path, key: VisGraphKey) -> dict:
    if path.suffix == ".gz":
        plain = Path("/tmp") / f"graphcmp_test_{path.parent.name}_{path.name[:-3]}"
        with gzip.open(path) as src, plain.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        path = plain
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)  # writes nothing beside it
    conn.row_factory = sqlite3.Row
    cfg = dict(conn.execute("SELECT * FROM tb_config").fetchone())
    out: dict = {"Colors": json.loads(cfg["node_colors"] or "null") or {}}
    for side in ("NPU", "Bench"):
        rows = conn.execute("SELECT * FROM tb_nodes WHERE step=? AND rank=? AND data_source=?",
                            (key.step, key.rank, side)).fetchall()
        if rows:
            name = side if cfg["graph_type"] == "compare" else "graph"
            out[name] = {r["node_name"]: {
                "upnode": r["up_node"] or "None", "subnodes": json.loads(r["sub_nodes"] or "[]"),
                "matched_node_link": json.loads(r["matched_node_link"] or "[]"),
                "data": {"precision_index": r["precision_index"], "overflow_level": r["overflow_level"]},
                "input_data": json.loads(r["input_data"] or "{}"), "output_data": json.loads(r["output_data"] or "{}"),
            } for r in rows}
    conn.close()
    return out


def _stat(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def raw_stats(node: dict) -> list[tuple]:
    """(Max, Min, Mean, Norm) of every tensor leaf of a raw node that has a shape (not a scalar), sorted."""
    out = []
    for part in ("input_data", "output_data"):
        for leaf in (node.get(part) or {}).values():
            if "Max" not in leaf or leaf.get("type") in ("int", "float", "bool", "str") or str(
                    leaf.get("dtype", "")).startswith("<"):
                continue
            out.append(tuple(_stat(leaf.get(k)) for k in ("Max", "Min", "Mean", "Norm")))
    return sorted(out, key=repr)


def our_stats(graph, node_id: str) -> list[tuple]:
    t = graph.tensors
    out = []
    for k in graph.tensor_rows(node_id).tolist():
        if t.shape[k] == "scalar" or (not t.shape[k] and not t.present[k].any()):
            continue
        out.append(tuple(float(v) if p else None for v, p in zip(t.stats[k], t.present[k])))
    return sorted(out, key=repr)


def _same_stats(a: list[tuple], b: list[tuple]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        for u, v in zip(x, y):
            if (u is None) != (v is None):
                return False
            if u is not None and not (u == v or (math.isnan(u) and math.isnan(v)) or math.isclose(u, v, rel_tol=1e-9)):
                return False
    return True


def assert_reads_like_the_file(path: Path, key: VisGraphKey | None = None) -> VisDocument:
    """Node count, hierarchy, match links, colours and statistics of every side equal the file's; the document read."""
    key = key or list_vis_graphs(path)[0]
    doc = read_vis(path, key.step, key.rank)
    raw = raw_sides(path, key)
    content = compare_vis(doc)
    if doc.is_compare:
        assert read_vis_links(vis_source(path, key)) == doc.links  # what the msprobe rule rebuilds
    graphs = {"NPU": content.npu, "Bench": content.bench} if isinstance(content, CompareReport) else {
        "graph": content}
    for side, graph in graphs.items():
        nodes = raw[side]
        assert len(graph) == len(nodes)
        for row, node_id in enumerate(graph.nodes.ids):
            node = nodes[node_id]
            parent = int(graph.nodes.parent[row])
            assert (graph.nodes.ids[parent] if parent >= 0 else "None") == node["upnode"]
            assert graph.children(node_id) == list(node["subnodes"])
            assert _same_stats(our_stats(graph, node_id), raw_stats(node)), node_id
        if isinstance(content, CompareReport):
            rows = content.matches.npu_to_bench if side == "NPU" else content.matches.bench_to_npu
            other = content.bench if side == "NPU" else content.npu
            for row, node_id in enumerate(graph.nodes.ids):
                link = nodes[node_id]["matched_node_link"]
                assert (other.nodes.ids[rows[row]] if rows[row] >= 0 else None) == (link[-1] if link else None)
    _assert_colors(doc, raw)
    return doc


def _assert_colors(doc, raw: dict) -> None:
    bands = [(c, v["value"]) for c, v in raw["Colors"].items()]
    nodes = raw.get("NPU") or raw["graph"]
    compare = doc.is_compare
    for node_id, node in nodes.items():
        index = (node.get("data") or {}).get("precision_index")
        if compare and not node["matched_node_link"]:
            expected = next((c for c, v in bands if not v), None)
        elif index is None:
            expected = None
        else:
            expected = next((c for c, v in bands if v and v[0] <= index <= v[1]), None)
        assert doc.color(node_id) == expected, node_id
        attrs = dict(doc.npu.nodes.attrs[doc.npu.row(node_id)]) if doc.npu.nodes.attrs else {}
        assert (float(attrs[ATTR_PRECISION]) if ATTR_PRECISION in attrs else None) == (
            None if index is None else float(index))
        assert attrs.get(ATTR_OVERFLOW) == ((node.get("data") or {}).get("overflow_level") or None)


def _counts(doc) -> dict:
    """The per-graph counts results.json records, computed from what graphcmp read."""
    graph = doc.npu
    attrs = [dict(a) for a in graph.nodes.attrs] if graph.nodes.attrs else [{}] * len(graph)
    hist = collections.Counter("None" if math.isnan(v) else repr(float(v)) for v in doc.precision_index)
    matched = compare_vis(doc).matches.matched if doc.is_compare else 0
    return {"nodes": len(graph), "matched": matched,
            "overflow_marked": sum(1 for a in attrs if ATTR_OVERFLOW in a),
            "matched_distributed": sum(1 for a in attrs if "msprobe.matched_distributed" in a), "hist": hist}


def _expected_hist(hist: dict) -> collections.Counter:
    out: collections.Counter = collections.Counter()
    for k, n in hist.items():
        out["None" if k == "None" else repr(float(k))] += n
    return out


# --------------------------------------------------------------------------- small copies (tests/data)


@pytest.mark.parametrize("path", SMALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_small_reference_files_read_like_the_file(path):
    assert_reads_like_the_file(path)


@pytest.mark.parametrize("path", SMALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_small_reference_files_have_msprobe_counts(path):
    expected = json.loads((path.parent / "expected.json").read_text())[path.name]
    counts = _counts(read_vis(path))
    if "per_graph" in expected:
        npu = next(g for g in expected["per_graph"] if g["side"] == "NPU")
        hist = expected["precision_index_hist_npu"]
    else:
        npu = expected.get("NPU") or expected["build"]
        hist = npu["precision_index_hist"]
    assert counts["nodes"] == npu["nodes"] and counts["matched"] == npu["matched"]
    assert counts["overflow_marked"] == npu["overflow_marked"]
    assert counts["hist"] == _expected_hist(hist)


def test_compare_file_reads_as_report_with_our_verdicts():
    path = DATA / "vis_tf_small" / "compare_v26.vis.db.gz"
    doc = read_vis(path)
    report = compare_vis(doc)
    assert isinstance(report, CompareReport) and doc.key == VisGraphKey(0, 0)
    # msprobe's matches, recorded as a rule that rebuilds them from the file (the viewer's Match/Unmatch)
    assert report.matches.matched == 178 and report.options.matchers == (f"msprobe={path.resolve()}#step=0&rank=0",)
    assert report.npu.root == "DefaultModel" and report.npu.nodes.kind[report.npu.row("Apis_Between_Modules.0")] \
        == NodeKind.GROUP
    # msprobe 26.2 calls 11 nodes warnings (0.5, colour #FFDC7F); graphcmp judges the pairs itself
    assert sum(doc.color(n) == "#FFDC7F" for n in report.npu.nodes.ids) == 11
    assert report.verdict("Module.encoder.layers.1.linear1.Linear.forward.0").status == "error"
    assert report.npu.info.task == "statistics" and doc.task == "summary"


def test_build_file_reads_as_one_run():
    graph = load_document(DATA / "vis_tf_small" / "build_v26.vis.db.gz")
    assert not isinstance(graph, CompareReport)
    assert len(graph) == 178 and graph.info.format == "msprobe-vis"


def test_vis_holds_what_the_dump_holds(perturb_pair):
    """The tensors msprobe wrote into its .vis.db equal graphcmp's reading of the dump they came from."""
    from_vis = read_vis(DATA / "vis_tf_small" / "compare_v26.vis.db.gz").npu
    from_dump = read_graph(perturb_pair[0])
    assert set(from_vis.nodes.ids) == set(from_dump.nodes.ids)

    def columns(g):
        t = g.tensors
        return {(g.nodes.ids[t.node[k]], int(t.role[k]), t.slot[k]): (
            t.dtype[k], t.shape[k], tuple(np.where(t.present[k], t.stats[k], np.nan).tolist()), t.md5[k], t.value[k])
            for k in range(len(t))}

    a, b = columns(from_vis), columns(from_dump)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k][:2] == b[k][:2] and a[k][3:] == b[k][3:], k
        np.testing.assert_allclose(a[k][2], b[k][2], rtol=1e-12)


def test_overflow_marks_and_legend_are_kept():
    doc = read_vis(DATA / "vis_cnn_overflow" / "compare_v812.vis.gz")
    marked = {n: lvl for n, lvl in zip(doc.npu.nodes.ids, doc.overflow_level) if lvl}
    assert marked == {"Functional.conv2d.1.forward": "critical", "Module.conv2.Conv2d.forward.0": "critical",
                      "Functional.batch_norm.1.forward": "medium", "Module.bn2.BatchNorm2d.forward.0": "medium"}
    assert doc.overflow_check and [b.color for b in doc.colors][-1] == "#C7C7C7"
    assert doc.colors[-1].low is None and doc.colors[0].contains(0.2) and not doc.colors[1].contains(0.1)


def test_sniff_and_keys(tmp_path):
    path = DATA / "vis_tf_small" / "compare_v812.vis.gz"
    assert sniff(path) and not sniff(DATA / "vis_tf_small" / "expected.json")
    named = tmp_path / "compare_step3_rank2_20261122.vis"
    named.write_bytes(_gunzip(path))
    assert list_vis_graphs(named) == (VisGraphKey(3, 2),) and read_vis(named).npu.info.rank == 2


def test_errors_name_the_file(tmp_path):
    bad_db = tmp_path / "x.vis.db"
    bad_db.write_bytes(b"not sqlite at all" * 10)
    with pytest.raises(DumpFormatError, match=r"x.vis.db"):
        read_vis(bad_db)
    with pytest.raises(DumpFormatError, match="no such file"):
        read_vis(tmp_path / "missing.vis")
    with pytest.raises(DumpFormatError, match=r"step 5 rank 0.*holds: step 0 rank 0"):
        read_vis(DATA / "vis_tf_small" / "build_v26.vis.db.gz", step=5, rank=0)
    empty = tmp_path / "empty.vis"
    empty.write_text('{"NPU": 1}')
    with pytest.raises(DumpFormatError, match=r"empty.vis: not a msprobe .vis document"):
        read_vis(empty)
    plain = tmp_path / "t.db"
    plain.write_text("x")
    with pytest.raises(DumpFormatError, match=r"t.db: not a tb-graph-ascend file"):
        read_vis(plain)


def test_broken_hierarchy_is_reported():
    root = {"node_type": 0, "subnodes": ["a"], "input_data": {}, "output_data": {}}
    with pytest.raises(DumpFormatError, match="lists sub-node 'a'"):
        parse_vis({"root": "DefaultModel", "node": {"DefaultModel": root}}, source="f.vis")
    loop = {"node_type": 0, "subnodes": ["DefaultModel"]}
    with pytest.raises(DumpFormatError, match=r"f.vis: graph: node 'DefaultModel' is listed under two parents"):
        parse_vis({"root": "DefaultModel", "node": {"DefaultModel": loop}}, source="f.vis")


# --------------------------------------------------------------------------- every reference file (../shared)


def _reference_files() -> list[Path]:
    roots = [SHARED / "msprobe" / "vis", SHARED / "mindspore_msprobe" / "vis"]
    found = [p for root in roots if root.is_dir() for pattern in ("*/*/*.vis*", "*/*.vis*") for p in root.glob(pattern)]
    # msprobe's outputs only: not SQLite's -wal/-shm side files, nor an empty left-over of an unexpanded shell glob
    outputs = (".vis", ".vis.db", ".vis.gz", ".vis.db.gz")
    return sorted(p for p in found if p.name.endswith(outputs) and "*" not in p.name and p.stat().st_size)


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize("path", _reference_files() or [None], ids=lambda p: str(p).split("/vis/")[-1])
def test_every_reference_file_reads_like_the_file(path):
    if path is None:
        shared("msprobe/vis")
    results = _results(path)
    for key in list_vis_graphs(path):
        doc = assert_reads_like_the_file(path, key)
        expected = _expected(results, path, key)
        if expected is not None:
            counts = _counts(doc)
            fields = [f for f in ("nodes", "matched", "overflow_marked", "matched_distributed") if f in expected]
            assert {f: counts[f] for f in fields} == {f: expected[f] for f in fields}


def _results(path: Path) -> dict:
    for parent in path.parents:
        if (parent / "results.json").is_file():
            return json.loads((parent / "results.json").read_text())
    return {}


def _expected(results: dict, path: Path, key: VisGraphKey) -> dict | None:
    """results.json's counts of the NPU graph of (step, rank) in this file, if it has them."""
    job = results.get(f"{path.parent.parent.name}/{path.parent.name}") or results.get(path.parent.name) or {}
    if "db" in job:
        return next((g for g in job["db"]["per_graph"] if g["side"] == "NPU" and (g["step"], g["rank"]) == key), None)
    name = path.name[:-3] if path.suffix == ".gz" else path.name
    entry = (job.get("vis") or {}).get(name)
    return (entry.get("NPU") or entry.get("build")) if entry else None
