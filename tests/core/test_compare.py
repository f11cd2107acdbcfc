"""`load_documents` and `file_summary`: every graph of a multi-graph `.vis.db` (as msprobe writes a job), one
graph otherwise."""

from __future__ import annotations

import pytest

from graphcmp.core.compare import compare_vis, file_summary, load_document, load_documents
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.readers.vis import list_vis_graphs, read_vis
from graphcmp.core.records import DumpGraph
from graphcmp.core.report import save_report
from tests.conftest import DATA, shared

TWO_STEPS = DATA / "vis_tf_small_2steps" / "compare_v26.vis.db.gz"  # msprobe 26.2: tf_small, steps 0 and 1


def test_every_graph_of_a_vis_db_is_read():
    documents = list(load_documents(TWO_STEPS))
    assert [(d.npu.info.step, d.npu.info.rank) for d in documents] == [(0, 0), (1, 0)]
    for doc, key in zip(documents, list_vis_graphs(TWO_STEPS)):
        alone = compare_vis(read_vis(TWO_STEPS, key.step, key.rank))
        assert doc.summary() == alone.summary()


def test_summary_of_a_two_step_vis_db():
    summary = file_summary(TWO_STEPS)
    graphs = summary["graphs"]
    assert [(g["step"], g["rank"]) for g in graphs] == [(0, 0), (1, 0)]
    assert [g["matched"] for g in graphs] == [178, 178]
    # the steps differ (step 1 has more warnings): each graph's own counts, not the first graph's twice
    assert [g["verdicts"] for g in graphs] == [
        {"skip": 32, "pass": 31, "warning": 2, "error": 113}, {"skip": 32, "pass": 31, "warning": 6, "error": 109}]
    assert [g["verdict"] for g in graphs] == ["differ", "differ"] and summary["verdict"] == "differ"
    assert summary["outcome"]["reason"].startswith("differ: step 0 rank 0: first divergence at Functional.linear.2")


def test_one_graph_files_keep_their_summary(perturb_pair, tmp_path):
    single = DATA / "vis_tf_small" / "compare_v26.vis.db.gz"
    assert "graphs" not in file_summary(single) and file_summary(single)["matched"] == 178
    build = file_summary(DATA / "vis_tf_small" / "build_v26.vis.db.gz")
    assert "graphs" not in build and build["nodes"] == len(load_document(DATA / "vis_tf_small" / "build_v26.vis.db.gz"))
    from graphcmp.core.compare import compare_paths

    path = tmp_path / "cmp.json"
    save_report(compare_paths(*perturb_pair), path)
    assert [type(d).__name__ for d in load_documents(path)] == ["CompareReport"]


@pytest.mark.shared
def test_dist4_ranks_in_one_vis_db():
    path = shared("msprobe/vis/v26/dist4_compare_ranks/compare_20261122044750.vis.db.gz")
    summary = file_summary(path)
    assert [(g["step"], g["rank"]) for g in summary["graphs"]] == [(0, r) for r in range(4)]
    assert [g["npu"]["nodes"] for g in summary["graphs"]] == [231, 227, 227, 227]
    # rank 2 is the perturbed one: its first divergence is its own embedding, the others' an all_reduce
    assert "Functional.embedding.0.forward" in summary["graphs"][2]["outcome"]["reason"]


@pytest.mark.shared
def test_a_build_db_of_four_ranks_lists_four_runs():
    path = shared("msprobe/vis/v26/dist4_build_parallel_merge_dp4/build_20261122044816.vis.db")
    summary = file_summary(path)
    assert [g["rank"] for g in summary["graphs"]] == [0, 1, 2, 3] and "verdict" not in summary
    assert all(isinstance(d, DumpGraph) for d in load_documents(path))


def test_a_damaged_db_is_one_error(tmp_path):
    bad = tmp_path / "bad.vis.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    with pytest.raises(DumpFormatError, match=r"bad\.vis\.db"):
        file_summary(bad)
