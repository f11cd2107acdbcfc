"""The viewer as an investigation tool, in a real headless chromium (playwright): it opens at the answer, draws
data flow, reads like a graph, follows rank switches, shows the structure diff and the step trend.

Each test derives what it expects from the report or the graph it serves (the origin, the producer of an
input, the folded constants), never from a constant tuned to the case.
"""

from __future__ import annotations

import itertools
import re
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from graphcmp.app.colors import STATUS_COLORS
from graphcmp.app.results import Entry, ResultSet
from graphcmp.core.compare import compare_paths
from graphcmp.core.dataflow import flow_edges
from graphcmp.core.readers import read_graph
from graphcmp.samples import sample_pair
from tests.app.test_browser import Viewer, _server, browser  # noqa: F401 (the browser fixture)
from tests.conftest import DATA, shared

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1500, "height": 950}
RESNET = "formats/ge/samples/oam-tools/complie_path/ge_proto_00000062_Build.txt.gz"


def _query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(url).query).items()}


def _opens_at_origin(v: Viewer, report) -> int:
    """Assert the fresh page selected the report's first divergence in both panes; return its npu row."""
    first = report.analysis().first
    assert first is not None
    row = report.npu.row(first.node)
    twin = int(report.matches.npu_to_bench[row])
    v.wait(f"window.graphcmp.selected('npu').includes('n{row}') && "
           f"window.graphcmp.selected('bench').includes('n{twin}')")
    assert "origin" in v.page.evaluate(f"window.graphcmp.classes('npu', 'n{row}')")
    assert _query(v.page.url)["sel"] == f"npu:{first.node}"
    banner = v.settle("#banner", re.escape(first.node))
    assert first.cause in banner and (first.module or "top level") in banner
    assert v.page.is_visible("#go")
    pos = v.page.evaluate(f"window.graphcmp.screenPos('npu', 'n{row}')")
    assert pos["visible"]  # in view, at a readable zoom
    assert v.page.evaluate("window.graphcmp.zoom('npu')") >= 0.75
    return row


def test_tf_small_opens_at_the_origin_with_its_contamination_path(browser):  # noqa: F811
    npu, bench = sample_pair()
    report = compare_paths(npu, bench)
    server = _server([npu, bench])
    try:
        v = Viewer(browser.new_page(viewport=VIEWPORT), server.url)
        row = _opens_at_origin(v, report)
        assert report.npu.nodes.ids[row] == "Functional.linear.2.forward"  # the call using the perturbed weight
        relu = report.npu.row("Torch.relu.1.forward")
        edges = {(a, b): cls for a, b, cls in v.page.evaluate("window.graphcmp.edges('npu')")}
        assert (f"n{row}", f"n{relu}") in edges  # the producer -> consumer edge the statistics give
        assert "hot" in edges[(f"n{row}", f"n{relu}")]  # on the contamination path: origin -> propagated
        bench_edges = {(a, b) for a, b, _ in v.page.evaluate("window.graphcmp.edges('bench')")}
        assert (f"n{int(report.matches.npu_to_bench[row])}", f"n{int(report.matches.npu_to_bench[relu])}") \
            in bench_edges
        # siblings of the opened modules stay drawn: every child of the open layer and of the encoder
        layer1 = report.npu.row("Module.encoder.layers.1.TransformerEncoderLayer.forward.0")
        enc = report.npu.row("Module.encoder.TransformerEncoder.forward.0")
        ids = set(v.ids("npu"))
        for parent in (enc, layer1):
            for child in np.flatnonzero(report.npu.nodes.parent == parent).tolist():
                assert f"n{child}" in ids or f"b{child}" in ids
        v.page.click("#collapse")  # go: back to the origin from anywhere
        v.wait(f"!window.graphcmp.nodeIds('npu').includes('n{row}')")
        v.page.click("#go")
        v.wait(f"window.graphcmp.selected('npu').includes('n{row}')")
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


def test_a_url_that_names_the_view_wins_over_the_origin(browser):  # noqa: F811
    npu, bench = sample_pair()
    server = _server([npu, bench])
    try:
        node = "Module.embedding.Embedding.forward.0"
        v = Viewer(browser.new_page(viewport=VIEWPORT), server.url + f"?sel=npu:{node}")
        report = compare_paths(npu, bench)
        v.wait(f"window.graphcmp.selected('npu').includes('n{report.npu.row(node)}')")
        assert _query(v.page.url)["sel"] == f"npu:{node}"
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


@pytest.mark.shared
def test_cnn_opens_at_the_origin(browser):  # noqa: F811
    root = shared("msprobe/dumps/cnn/statistics")
    npu, bench = root / "perturb" / "step0" / "rank0", root / "baseline" / "step0" / "rank0"
    report = compare_paths(npu, bench)
    server = _server([npu, bench])
    try:
        v = Viewer(browser.new_page(viewport=VIEWPORT), server.url)
        row = _opens_at_origin(v, report)
        # the perturbed weight is conv2's (the dump's README): the origin is the call inside Module.conv2
        assert report.npu.nodes.ids[report.npu.nodes.parent[row]] == "Module.conv2.Conv2d.forward.0"
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def dist4_results(tmp_path_factory):
    from graphcmp.core.distributed.batch import run_batch

    root = shared("msprobe/dumps/dist4/statistics")
    out = tmp_path_factory.mktemp("dist4") / "results"
    index = run_batch(root / "perturb_rank2", root / "baseline", out, workers=1)
    return out, index


@pytest.mark.shared
def test_dist4_opens_on_the_origin_rank(browser, dist4_results):  # noqa: F811
    from graphcmp.core.report import load_report

    out, index = dist4_results
    origin = index["analysis"]["origin"]
    entry = next(e for e in index["runs"] if (e["step"], e["rank"]) == (origin["step"], origin["rank"]))
    report = load_report(out / entry["file"])
    server = _server([out])
    try:
        v = Viewer(browser.new_page(viewport=VIEWPORT), server.url)
        v.wait(f"window.location.search.includes('res=s{origin['step']}r{origin['rank']}')")
        assert v.text("#doc-title") == f"step {origin['step']} · rank {origin['rank']}"
        row = _opens_at_origin(v, report)
        assert report.npu.nodes.ids[row] == origin["node"]
        assert f"rank {origin['rank']}" in v.text("#banner")
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


@pytest.mark.shared
def test_header_follows_the_url_after_a_rank_switch(browser, dist4_results):  # noqa: F811
    out, _ = dist4_results
    server = _server([out])
    try:
        v = Viewer(browser.new_page(viewport=VIEWPORT), server.url + "?res=s1r3")
        assert v.settle("#doc-title", "rank 3") == "step 1 · rank 3"  # a res= URL
        v.page.click("#rank")
        v.page.get_by_role("option", name="0", exact=True).click()  # the rank selector
        v.wait("window.location.search.includes('res=s1r0')")
        assert v.settle("#doc-title", "rank 0") == "step 1 · rank 0"
        v.page.wait_for_selector("#job-heat .nsewdrag")
        box = v.page.locator("#job-heat .nsewdrag").bounding_box()  # a heat-map cell: rank 2's row (4 ranks)
        v.page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 5 / 8)
        v.wait("window.location.search.includes('res=s1r2')")
        assert v.settle("#doc-title", "rank 2") == "step 1 · rank 2"
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


@pytest.mark.shared
def test_resnet50_first_page_is_the_conv_chain(browser):  # noqa: F811
    path = shared(RESNET)
    graph = read_graph(path)
    results = ResultSet([Entry("0", None, None, str(path))], lambda _e: graph)
    server = _server((), results)
    try:
        v = Viewer(browser.new_page(viewport=VIEWPORT), server.url)
        ids = graph.nodes.ids
        ops = graph.nodes.op
        drawn = {int(i[1:]) for i in v.ids("npu") if i[0] in "nb"}  # pagers are p<row>:<step>
        assert not any(ops[r] == "Const" for r in drawn)  # constants folded into their consumer
        convs = [r for r in drawn if ops[r] == "Conv2D"]
        assert len(convs) >= 30
        edges = {(int(a[1:]), int(b[1:])) for a, b, _ in v.page.evaluate("window.graphcmp.edges('npu')")}
        e = flow_edges(graph)
        between = {(a, b) for a, b in zip(e.src.tolist(), e.dst.tolist()) if a in drawn and b in drawn}
        assert between and between <= edges
        chain = [graph.row(n) for n in ("conv1conv1_relu", "pool1", "res2a_branch2ares2a_branch2a_relu",
                                        "res2a_branch2bres2a_branch2b_relu", "res2a_branch2c")]
        assert all(link in edges for link in itertools.pairwise(chain))  # the conv chain, edge by edge
        ys = [v.page.evaluate(f"window.graphcmp.cy('npu').getElementById('n{r}').position('y')") for r in chain]
        assert ys == sorted(ys)  # top down by data flow
        badges = [label for label in v.page.evaluate("window.graphcmp.shownLabels('npu')") if "folded" in label]
        assert len(badges) <= 3
        conv1 = graph.row("conv1conv1_relu")
        v.click("npu", f"n{conv1}")
        folded = int(np.count_nonzero(graph.edges.dst[np.isin(graph.edges.src, np.flatnonzero(
            np.array(ops, dtype=object) == "Const"))] == conv1))
        v.wait(f"(window.graphcmp.shownLabel('npu', 'n{conv1}') || '').includes('+{folded} folded')")
        assert ids[conv1] in v.settle("#details", re.escape(ids[conv1]))
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


def test_structure_diff_is_marked_and_filtered(browser, perturb_pair):  # noqa: F811
    npu = DATA / "msprobe_extraop" / "npu"
    report = compare_paths(npu, perturb_pair[1], fuzzy=True)
    renamed = [r for r in np.flatnonzero(report.matches.npu_to_bench >= 0).tolist()
               if report.npu.nodes.ids[r] != report.bench.nodes.ids[report.matches.npu_to_bench[r]]]
    only = np.flatnonzero(report.matches.npu_to_bench[1:] < 0) + 1
    results = ResultSet([Entry("0", None, None, "extraop")], lambda _e: report)
    server = _server((), results)
    try:
        v = Viewer(browser.new_page(viewport=VIEWPORT), server.url + "?sync=1")
        v.page.check("#filters input[value=renamed]")
        assert v.settle("#hit-info", "of") == f"1 of {len(renamed)}"
        first = report.npu.nodes.ids[renamed[0]]
        assert first in v.settle("#details", re.escape(first))
        v.wait(f"(window.graphcmp.classes('npu', 'n{renamed[0]}') || []).includes('renamed')")
        v.page.uncheck("#filters input[value=renamed]")
        v.page.check("#filters input[value=only-npu]")
        assert v.settle("#hit-info", "of") == f"1 of {len(only)}"
        row = int(only[0])
        v.wait(f"(window.graphcmp.classes('npu', 'n{row}') || []).includes('unmatched')")
        assert f"{len(only)} only in npu" in v.text("#overview")
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


def test_search_hits_are_rows_with_verdict_and_module_path(browser, perturb_pair):  # noqa: F811
    report = compare_paths(*perturb_pair)
    server = _server(perturb_pair)
    try:
        v = Viewer(browser.new_page(viewport=VIEWPORT), server.url + "?sync=1")
        v.page.fill("#query", r"linear\.2\.forward")
        v.page.press("#query", "Enter")
        v.settle("#hit-info", "1 of 1")
        row = report.npu.row("Functional.linear.2.forward")
        text = v.text("#hits .hit-row")
        path = "encoder: TransformerEncoder › layers.1: TransformerEncoderLayer › linear1: Linear"
        assert "linear.2" in text and path in text
        colour = v.page.evaluate("getComputedStyle(document.querySelector('#hits .hit-verdict')).backgroundColor")
        hex_ = STATUS_COLORS[int(report.verdicts.status[row])].lstrip("#")
        assert colour == "rgb({}, {}, {})".format(*(int(hex_[i:i + 2], 16) for i in (0, 2, 4)))
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


def test_trend_cell_opens_that_step(browser, tmp_path):  # noqa: F811
    from graphcmp.core.distributed.batch import run_batch
    from tests.app.conftest import TF_SMALL

    out = tmp_path / "results"
    index = run_batch(TF_SMALL / "perturb", TF_SMALL / "baseline", out, workers=1)
    steps = sorted({r["step"] for r in index["runs"]})
    assert len(steps) == 2
    server = _server([out])
    try:
        v = Viewer(browser.new_page(viewport=VIEWPORT), server.url)
        v.page.wait_for_selector("#job-trend .nsewdrag")
        assert v.page.is_visible("#job-trend-box")
        box = v.page.locator("#job-trend .nsewdrag").bounding_box()
        v.page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.75)  # the second step's row
        v.wait(f"window.location.search.includes('res=s{steps[1]}r0')")
        assert v.settle("#doc-title", f"step {steps[1]}") == f"step {steps[1]} · rank 0"
        node = _query(v.page.url)["sel"].split(":", 1)[1]
        assert node in [h[0] for h in next(r for r in index["runs"] if r["step"] == steps[1])["heat"]]
        v.page.check("#heat-by input[value=severity]")  # the maps by worst severity
        v.page.wait_for_function("document.querySelector('#job-trend .hm') !== null || "
                                 "document.querySelector('#job-trend .heatmaplayer') !== null")
        assert not v.errors
        v.page.close()
    finally:
        server.stop()
