"""Writing `.vis` (JSON): round trip, msprobe 8.1.2's answer for the same dumps, the plugin opens it, streaming."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from graphcmp.core.compare import compare_paths, compare_vis
from graphcmp.core.export.vis import VIS_COLORS, write_vis
from graphcmp.core.export.vis_records import BLOCK_NODES
from graphcmp.core.readers import read_graph
from graphcmp.core.readers.vis import read_vis
from graphcmp.core.report import CompareReport
from tests.conftest import DATA, shared
from tests.core.export.test_vis_db import (
    _parents,
    assert_same_report,
    parent_differences,
    plugin_load,
    sample_reports,
)


@pytest.fixture(scope="module")
def report() -> CompareReport:
    return sample_reports()[0]


def test_round_trip(report, tmp_path):
    path = tmp_path / "cmp.vis"
    result = write_vis(report, path)
    assert result.nodes == 2 * 178 and result.paths == (str(path),)
    assert_same_report(compare_vis(read_vis(path)), report)
    doc = json.loads(path.read_text())
    assert list(doc) == ["NPU", "Bench", "ToolTip", "Colors", "MicroSteps", "task", "OverflowCheck"]
    assert doc["Colors"] == VIS_COLORS and doc["task"] == "summary"
    node = doc["NPU"]["node"]["Module.encoder.layers.1.linear1.Linear.forward.0"]
    assert node["data"] == {"precision_index": 0.75}  # graphcmp: error, an origin inside it explains it
    origin = doc["NPU"]["node"][report.npu.nodes.ids[report.noise.first_origin]]
    assert origin["data"] == {"precision_index": 1.0}  # the origin has a colour of its own
    indices = [n["data"].get("precision_index") for n in doc["NPU"]["node"].values()]
    assert indices.count(1.0) == len(report.noise.origins())
    assert node["matched_node_link"][-1] == "Module.encoder.layers.1.linear1.Linear.forward.0"
    out = node["output_data"]["Module.encoder.layers.1.linear1.Linear.forward.0.output.0"]
    assert out["Result"] == "error" and out["MaxRelativeErr"].endswith("%") and float(out["Max diff"]) != 0


def test_export_equals_msprobe_812_for_the_same_dumps(report, tmp_path):
    """msprobe 8.1.2 leaves out the parameters_grad nodes; every node it has, ours has, alike."""
    write_vis(report, tmp_path / "ours.vis")
    ours = compare_vis(read_vis(tmp_path / "ours.vis"))
    msprobe = compare_vis(read_vis(DATA / "vis_tf_small" / "compare_v812.vis.gz"))
    extra = set(ours.npu.nodes.ids) - set(msprobe.npu.nodes.ids)
    assert len(extra) == 18 and all(".parameters_grad." in n for n in extra)
    assert set(msprobe.npu.nodes.ids) <= set(ours.npu.nodes.ids)
    ours_parents, ms_parents = _parents(ours.npu), _parents(msprobe.npu)
    assert {n for n in ms_parents if ours_parents[n] != ms_parents[n]} == set()
    for node_id in msprobe.npu.nodes.ids:
        row = ours.npu.row(node_id)
        assert ours.bench.nodes.ids[ours.matches.npu_to_bench[row]] == msprobe.bench.nodes.ids[
            msprobe.matches.npu_to_bench[msprobe.npu.row(node_id)]]
        a, b = ours.npu.view(node_id).tensors, msprobe.npu.view(node_id).tensors
        assert [(t.role, t.slot) for t in a] == [(t.role, t.slot) for t in b]
        for x, y in zip(a, b):  # 8.1.2 rounds statistics to 6 decimals
            assert x.stats.keys() == y.stats.keys()
            assert all(abs(x.stats[k] - y.stats[k]) <= 5e-7 + 1e-6 * abs(y.stats[k]) for k in x.stats), node_id


def test_single_run_layout(perturb_pair, tmp_path):
    graph = read_graph(perturb_pair[1])
    write_vis(graph, tmp_path / "build.vis")
    doc = json.loads((tmp_path / "build.vis").read_text())
    assert list(doc) == ["root", "dump_data_dir", "node", "MicroSteps", "OverflowCheck"]
    assert len(doc["node"]) == 178 and doc["node"]["DefaultModel"]["upnode"] == "None"
    read = compare_vis(read_vis(tmp_path / "build.vis"))
    assert read.nodes.ids == graph.nodes.ids and parent_differences(read, graph) == set()


def test_msprobe_extras_survive_a_round_trip(tmp_path):
    doc = read_vis(DATA / "vis_cnn_overflow" / "compare_v812.vis.gz")
    write_vis(compare_vis(doc), tmp_path / "again.vis")
    again = read_vis(tmp_path / "again.vis")
    assert again.overflow_level == doc.overflow_level and again.overflow_check
    raw = json.loads((tmp_path / "again.vis").read_text())
    assert raw["NPU"]["node"]["Functional.conv2d.1.forward"]["data"]["overflow_level"] == "critical"


def test_tb_graph_ascend_opens_the_json(report, tmp_path):
    write_vis(report, tmp_path / "logs" / "json_run" / "cmp.vis")
    found = plugin_load(tmp_path / "logs")["json_run"]
    assert found["type"] == "json" and not found["single"] and found["task"] == "summary"
    assert found["graphs"][(0, 0)]["npuNodeList"] == found["graphs"][(0, 0)]["benchNodeList"] == 178


@pytest.mark.shared
@pytest.mark.slow
def test_export_streams(tmp_path):
    """Writing holds one block of nodes at a time: traced memory is a small fraction of the file (tf_huge, 19k
    nodes)."""
    dumps = shared("msprobe/dumps/tf_huge/statistics")
    report = compare_paths(dumps / "perturb" / "step0" / "rank0", dumps / "baseline" / "step0" / "rank0")
    tracemalloc.start()
    result = write_vis(report, tmp_path / "big.vis")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.nodes == 2 * 9709 and result.bytes > 40_000_000
    # 1 MiB write buffer + per-row columns (a few ints per node and per tensor, and each node's escaped id, of
    # both runs: about 200 bytes a row) + the texts of one block of BLOCK_NODES nodes, about three times
    # (tensor leaves, node objects, records); a second copy of the graph as dicts or as text would take more
    # than the file itself
    rows = len(report.npu) + len(report.npu.tensors)
    block = 3 * BLOCK_NODES * result.bytes / result.nodes
    assert peak < 1_100_000 + 200 * rows + block and peak < result.bytes / 3, (peak, result.bytes)
