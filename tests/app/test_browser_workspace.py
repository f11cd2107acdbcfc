"""The viewer as a workspace, in a real headless chromium (playwright) at 1600 x 1000: room for the graph (panels
that hide and resize, kept in the URL; fit; minimap), labels people read, the error chart, the single-op view, and
the fixes of the job overview, the search, the badges, the filters and the legend.

What each test expects is derived from the report or the run it serves (the origin, the op column, the tensors'
dtype and shape, the files' values), never from a constant tuned to the case.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from graphcmp.app.job import short_column
from graphcmp.app.model import ViewModel
from graphcmp.app.results import Entry, ResultSet
from graphcmp.app.table import _number
from graphcmp.core.compare import compare_paths
from graphcmp.core.elementwise import elementwise
from graphcmp.core.noise import NodeRole
from graphcmp.core.readers import read_graph
from graphcmp.core.records import Role
from graphcmp.core.report import save_report
from graphcmp.core.rules import WARNING
from graphcmp.core.tensorcmp import tensor_file
from graphcmp.core.tensorio import read_tensor
from graphcmp.samples import sample_pair
from tests.app.test_browser import Viewer, _server, browser  # noqa: F401 (the browser fixture)
from tests.conftest import DATA, shared

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1600, "height": 1000}
CHART = "document.querySelector('#chart .js-plotly-plot')"


def _query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(url).query).items()}


def _box(v: Viewer, selector: str) -> dict:
    return v.page.evaluate(f"(() => {{ const r = document.querySelector('{selector}').getBoundingClientRect(); "
                           "return {x: r.x, y: r.y, w: r.width, h: r.height}; })()")


@pytest.fixture(scope="module")
def tf_report():
    return compare_paths(*sample_pair())


@pytest.fixture(scope="module")
def tf_url(browser):  # noqa: F811
    server = _server(list(sample_pair()))
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def dist4_results(tmp_path_factory):
    from graphcmp.core.distributed.batch import run_batch

    root = shared("msprobe/dumps/dist4/statistics")
    out = tmp_path_factory.mktemp("dist4") / "results"
    run_batch(root / "perturb_rank2", root / "baseline", out, workers=1)
    return out


def _page(browser, url: str) -> Viewer:  # noqa: F811
    return Viewer(browser.new_page(viewport=VIEWPORT), url)


# ---- 1. layout ------------------------------------------------------------------------------------------------


def test_panels_hide_resize_and_are_kept_in_the_url(browser, tf_url):  # noqa: F811
    v = _page(browser, tf_url)
    pane = _box(v, "#pane-npu")
    assert _box(v, "#cy-npu")["h"] >= VIEWPORT["height"] / 2  # everything open: the graph keeps half the height
    sidebar = _box(v, "#sidebar")
    v.page.click("#toggle-sidebar")
    v.wait("!window.location.search.includes('sync=1') || window.location.search.includes('sb=0')")
    v.wait("document.getElementById('sidebar').offsetWidth === 0")
    assert _query(v.page.url)["sb"] == "0"
    assert _box(v, "#pane-npu")["w"] >= pane["w"] + sidebar["w"] / 2 - 5  # the panes took the room
    v.page.click("#toggle-sidebar")
    v.wait("document.getElementById('sidebar').offsetWidth > 0")
    assert "sb" not in _query(v.page.url)
    # drag the bottom panel's grip up by 150 px: the panel grows, the size is in the URL and survives a reload
    bottom = _box(v, "#bottom")
    grip = _box(v, "#bottom-grip")
    v.page.mouse.move(grip["x"] + 200, grip["y"] + 2)
    v.page.mouse.down()
    v.page.mouse.move(grip["x"] + 200, grip["y"] - 150, steps=5)
    v.page.mouse.up()
    v.wait("window.location.search.includes('dth=')")
    height = int(_query(v.page.url)["dth"])
    assert abs(height - (bottom["h"] + 150)) <= 8
    v.page.click("#toggle-bottom")
    v.wait("window.location.search.includes('dt=0')")
    v.wait("document.getElementById('bottom').offsetHeight === 0")
    url = v.page.url
    v.page.close()
    v = _page(browser, url)  # the shared link: the bottom panel stays hidden, with its size kept for later
    v.wait("document.getElementById('bottom').offsetHeight === 0")
    v.page.click("#toggle-bottom")
    v.wait(f"Math.abs(document.getElementById('bottom').offsetHeight - {height}) <= 2")
    assert not v.errors
    v.page.close()


def test_fit_and_minimap(browser, tf_url):  # noqa: F811
    v = _page(browser, tf_url)
    v.wait("window.graphcmp.inView('npu').total > 20")
    before = v.page.evaluate("window.graphcmp.inView('npu')")
    assert before["inside"] < before["total"]  # the page opens at a readable zoom: not everything fits
    v.page.click("#fit-npu")
    v.wait("(() => { const s = window.graphcmp.inView('npu'); return s.inside === s.total; })()")
    # the minimap draws the pane (pixels on its canvas) and a click on it moves the view there
    v.wait("document.getElementById('minimap-npu').getContext('2d').getImageData(0, 0, 180, 120).data"
           ".some((x, i) => i % 4 === 3 && x > 0)")
    v.page.evaluate("window.graphcmp.cy('npu').zoom(2)")
    pan = v.page.evaluate("window.graphcmp.cy('npu').pan()")
    mini = _box(v, "#minimap-npu")
    v.page.mouse.click(mini["x"] + mini["w"] / 2, mini["y"] + mini["h"] - 8)  # the bottom of the model
    v.wait(f"window.graphcmp.cy('npu').pan().y < {pan['y']} - 50")
    assert not v.errors
    v.page.close()


def test_job_overview_leaves_half_the_height_and_collapses(browser, dist4_results):  # noqa: F811
    server = _server([dist4_results])
    try:
        v = _page(browser, server.url)
        v.page.wait_for_selector("#job-heat .nsewdrag")
        assert v.page.evaluate("document.getElementById('job').open")
        assert _box(v, "#cy-npu")["h"] >= VIEWPORT["height"] / 2  # the graph itself, below its title
        before = _box(v, "#pane-npu")["h"]
        v.page.click("#job summary")
        v.wait(f"document.getElementById('pane-npu').getBoundingClientRect().height > {before} + 50")
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


# ---- 2. labels --------------------------------------------------------------------------------------------------


def test_labels_put_the_op_type_first_and_edges_carry_their_tensor(browser, tf_url, tf_report):  # noqa: F811
    v = _page(browser, tf_url)
    npu = tf_report.npu
    layer = npu.row("Module.encoder.layers.1.TransformerEncoderLayer.forward.0")
    norm = next(r for r in np.flatnonzero(npu.nodes.parent == layer).tolist()
                if npu.nodes.kind[r] == 1 and f"n{r}" in v.ids("npu"))  # a closed module drawn in the open layer
    label = v.page.evaluate(f"window.graphcmp.label('npu', 'n{norm}')")
    first, second = label.split("\n")
    assert first == npu.nodes.op[norm] and second in npu.nodes.ids[norm]
    # legible at the default zoom: 11 px or more on screen
    size = v.page.evaluate(f"parseFloat(window.graphcmp.cy('npu').getElementById('n{norm}').style('font-size'))")
    assert size * v.page.evaluate("window.graphcmp.zoom('npu')") >= 11
    # an edge under the pointer shows the dtype and shape of what its producer hands on
    edges = v.page.evaluate("window.graphcmp.edges('npu')")
    infos = v.page.evaluate("window.graphcmp.edgeInfo('npu')")
    k = next(k for k, (a, b, _) in enumerate(edges) if a.startswith("n") and b.startswith("n") and infos[k])
    producer = int(edges[k][0][1:])
    outs = [t for t in np.flatnonzero(npu.tensors.node == producer).tolist() if npu.tensors.role[t] == Role.OUTPUT]
    assert infos[k] in {f"{npu.tensors.dtype[t]} {npu.tensors.shape[t]}" for t in outs}
    assert v.page.evaluate(f"window.graphcmp.cy('npu').edges()[{k}].style('label')") == ""
    assert v.page.evaluate(f"window.graphcmp.hoverEdge('npu', {k})") == infos[k]
    assert not v.errors
    v.page.close()


@pytest.mark.shared
def test_ge_graph_shows_op_types(browser, tmp_path):  # noqa: F811
    path = shared("formats/ge/samples/oam-tools/complie_path/ge_proto_00000062_Build.txt.gz")
    graph = read_graph(path)
    server = _server((), ResultSet([Entry("0", None, None, str(path))], lambda _e: graph))
    try:
        v = _page(browser, server.url + "?sel=npu:conv1conv1_relu")
        row = graph.row("conv1conv1_relu")
        v.wait(f"window.graphcmp.label('npu', 'n{row}') !== null")
        label = v.page.evaluate(f"window.graphcmp.label('npu', 'n{row}')")
        assert label == f"{graph.nodes.op[row]}\nconv1conv1_relu"
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


# ---- 3. the error chart -----------------------------------------------------------------------------------------


def _chart(v: Viewer) -> dict:
    v.wait(f"{CHART} && {CHART}.data && {CHART}.data.length > 2")
    return v.page.evaluate(f"(() => {{ const g = {CHART}; return {{data: g.data.map(t => ({{name: t.name || '', "
                           "x: Array.from(t.x || []), y: Array.from(t.y || []), fill: t.fill || '', "
                           "customdata: Array.from(t.customdata || [])})), ytype: g.layout.yaxis.type, "
                           "title: g.layout.title.text}; })()")


def test_error_chart_marks_the_origin_and_opens_a_clicked_call(browser, tf_url, tf_report):  # noqa: F811
    v = _page(browser, tf_url + "?tab=chart")
    chart = _chart(v)
    noise = tf_report.noise
    assert chart["ytype"] == "log"
    band = next(k for k, t in enumerate(chart["data"]) if t["fill"] == "tonexty")
    origin = next(t for t in chart["data"] if t["name"].startswith("origin"))
    assert band < chart["data"].index(origin)  # the band is drawn behind the points
    assert set(origin["customdata"]) == set(noise.origins().tolist())
    points = sum(len(t["customdata"]) for t in chart["data"] if t["name"].split(" ")[0] in
                 ("origin", "propagated", "within"))
    assert points == len(noise.leaves)  # every compared call, in execution order
    # the jump at the first divergence: the origin's error is beyond the band where it stands
    x0 = origin["x"][origin["customdata"].index(noise.first_origin)]
    allowed = chart["data"][band]["y"][chart["data"][band]["x"].index(x0)]
    assert origin["y"][origin["customdata"].index(noise.first_origin)] > allowed
    # click a propagated call: it is selected in the panes and the URL, and ringed in the chart
    trace = next(k for k, t in enumerate(chart["data"]) if t["name"].startswith("propagated"))
    k = len(chart["data"][trace]["x"]) // 2
    row = chart["data"][trace]["customdata"][k]
    xy = v.page.evaluate(f"(() => {{ const g = {CHART}, l = g._fullLayout, t = g.data[{trace}]; "
                         f"const r = g.getBoundingClientRect(); return {{x: r.left + l.xaxis._offset + "
                         f"l.xaxis.l2p(t.x[{k}]), "
                         f"y: r.top + l.yaxis._offset + l.yaxis.l2p(Math.log10(t.y[{k}]))}}; }})()")
    v.page.mouse.move(xy["x"], xy["y"])
    v.page.mouse.click(xy["x"], xy["y"])
    v.wait(f"window.graphcmp.selected('npu').includes('n{row}')")
    assert _query(v.page.url)["sel"] == f"npu:{tf_report.npu.nodes.ids[row]}"
    assert _query(v.page.url)["tab"] == "chart"
    v.wait(f"{CHART} && {CHART}.data.some(t => t.name === 'selected' && t.customdata[0] === {row})")
    assert not v.errors
    v.page.close()


def test_error_chart_per_rank_of_a_job(browser, dist4_results):  # noqa: F811
    server = _server([dist4_results])
    try:
        v = _page(browser, server.url + "?tab=chart")
        first = _chart(v)
        assert "rank 2" in first["title"]  # the job opens on the origin's rank
        v.page.click("#rank")
        v.page.get_by_role("option", name="0", exact=True).click()  # the rank selector
        v.wait(f"{CHART} && {CHART}.layout.title.text.includes('rank 0')")
        other = _chart(v)
        origins = [t for t in other["data"] if t["name"].startswith("origin")]
        from graphcmp.core.report import load_saved

        report = load_saved(next(dist4_results.glob("step0_rank0.*")))
        assert sorted(origins[0]["customdata"] if origins else []) == sorted(report.noise.origins().tolist())
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


# ---- 4. the single-op view -------------------------------------------------------------------------------------


@pytest.mark.shared
def test_single_op_view_of_real_tensors(browser, tmp_path):  # noqa: F811
    root = shared("msprobe/dumps/cnn/tensor")
    report = compare_paths(root / "perturb" / "step0" / "rank0", root / "baseline" / "step0" / "rank0")
    save_report(report, tmp_path / "cnn.npz")
    node = report.analysis().first.node
    server = _server([str(tmp_path / "cnn.npz")])
    try:
        v = _page(browser, server.url + f"?sel=npu:{node}&tab=op")
        v.page.wait_for_selector("#op table.worst tbody tr")
        v.wait("document.querySelectorAll('#op .js-plotly-plot').length >= 2")
        # the first block is the node's first output: its worst element is the one the files give
        model = ViewModel(report)
        row = report.npu.row(node)
        from graphcmp.app.single_op import node_pairs

        k = node_pairs(model, row)[0]
        i, j = int(report.pairs.npu[k]), int(report.pairs.bench[k])
        expect = elementwise(np.asarray(read_tensor(tensor_file(report.npu, i))),
                             np.asarray(read_tensor(tensor_file(report.bench, j))))
        cells = v.page.eval_on_selector_all("#op table.worst", "ts => Array.from(ts[0].querySelectorAll('tbody tr'))"
                                            ".map(r => Array.from(r.children).map(c => c.innerText))")
        assert len(cells) == len(expect.worst)
        assert cells[0][0] == str(expect.worst[0].tolist())
        assert float(cells[0][3]) == pytest.approx(float(expect.worst_abs[0]), rel=1e-5)
        histogram = v.page.evaluate("document.querySelectorAll('#op .js-plotly-plot')[0].data[0].y")
        assert sum(histogram) + expect.nonfinite == expect.count - expect.exact
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


# ---- 6. fixes --------------------------------------------------------------------------------------------------


def test_heat_map_axes_are_labelled(browser, dist4_results):  # noqa: F811
    server = _server([dist4_results])
    try:
        v = _page(browser, server.url)
        v.page.wait_for_selector("#job-heat .xtick text")
        shown = v.page.eval_on_selector_all("#job-heat .xtick text", "ts => ts.map(t => t.textContent)")
        columns = v.page.evaluate("document.querySelector('#job-heat .js-plotly-plot').data[0].x")
        names = {short_column(c) for c in columns}
        assert shown and set(shown) <= names
        assert not any(re.search(r"rank -", t) for t in
                       v.page.eval_on_selector_all("#job-heat .ytick text", "ts => ts.map(t => t.textContent)"))
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


def test_collapse_all_shows_the_top_and_the_search_stays_in_the_url(browser, tf_url, tf_report):  # noqa: F811
    v = _page(browser, tf_url)
    v.page.fill("#query", "relu")
    v.page.press("#query", "Enter")
    v.wait("window.location.search.includes('q=relu')")
    v.page.click("#next")
    v.wait("window.location.search.includes('hit=1')")
    v.page.click("#collapse")
    top = [r for r in np.flatnonzero(tf_report.npu.nodes.parent == 0).tolist()]
    v.wait(f"!window.graphcmp.nodeIds('npu').includes('b{top[-1]}') && "
           f"window.graphcmp.nodeIds('npu').includes('n{top[0]}')")
    v.wait(f"window.graphcmp.screenPos('npu', 'n{top[0]}').visible")  # the top of the model, not the bottom
    url = v.page.url
    assert _query(url)["q"] == "relu"
    v.page.reload()
    v.wait("window.graphcmp && window.graphcmp.count('npu') > 0")
    assert v.page.input_value("#query") == "relu"
    v.settle("#hit-info", r"2 of \d")
    assert not v.errors
    v.page.close()


def test_badges_follow_the_roles(browser, tmp_path):  # noqa: F811
    npu, bench = DATA / "noise_clean_fp16" / "npu", DATA / "noise_clean_fp16" / "bench"
    report = compare_paths(npu, bench)
    model = ViewModel(report)
    from graphcmp.app.details import _pair_role

    # a pair a metric's fixed limit flags while the noise model finds it within the noise of fp16
    flagged = [k for k in np.flatnonzero(report.verdicts.pair_level >= WARNING).tolist()
               if _pair_role(model, k) == NodeRole.WITHIN_NOISE]
    assert flagged
    node = report.npu.nodes.ids[int(report.npu.tensors.node[report.pairs.npu[flagged[0]]])]
    server = _server([npu, bench])
    try:
        v = _page(browser, server.url + f"?sel=npu:{node}")
        v.page.wait_for_selector("#details table.tensors tr.metric-row")
        badges = v.page.eval_on_selector_all("#details tr.metric-row .badge", "bs => bs.map(b => b.innerText)")
        assert "within noise" in badges
        role = NodeRole(int(report.noise.role[report.npu.row(node)]))
        if role == NodeRole.WITHIN_NOISE:
            assert not {"warning", "error"} & set(badges)
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


@pytest.mark.shared
def test_a_single_run_offers_only_the_filters_and_legend_that_apply(browser):  # noqa: F811
    path = shared("formats/ge/samples/oam-tools/complie_path/ge_proto_00000062_Build.txt.gz")
    graph = read_graph(path)
    server = _server((), ResultSet([Entry("0", None, None, str(path))], lambda _e: graph))
    try:
        v = _page(browser, server.url)
        v.wait("document.querySelector('#legend') && document.querySelector('#legend').innerText.length > 0")
        filters = v.page.eval_on_selector_all("#filters input", "xs => xs.map(x => x.value)")
        assert not {"error", "warning", "pass", "skip", "unmatched", "only-npu", "only-bench", "renamed"} & set(filters)
        legend = v.text("#legend")
        assert "the origin itself" not in legend and "contamination path" not in legend
        assert "only in this run" not in legend
        assert "fused op" in legend  # ResNet's fused convolutions are drawn
        tabs = v.page.eval_on_selector_all("#tab input", "xs => xs.filter(x => !x.disabled).map(x => x.value)")
        assert tabs == ["details"]  # no chart, no single op and no table without a comparison
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


# ---- 5. the table view ------------------------------------------------------------------------------------------


def test_table_view_sorts_filters_and_opens_a_row(browser, tf_url, tf_report):  # noqa: F811
    from graphcmp.core.export.table import compare_table

    table = compare_table(tf_report)
    v = _page(browser, tf_url + "?tab=table")
    rows = "#table .dash-spreadsheet tbody tr td[data-dash-column='NPU Name']"
    v.page.wait_for_selector(rows)
    names = v.page.eval_on_selector_all(rows, "ts => ts.map(t => t.innerText)")
    assert names == list(table.column("NPU Name")[:50])  # the export's rows, in execution order
    assert v.settle("#tab-note", "rows") == f"{len(table):,} rows"
    # filter: the errors whose name says linear (the DataTable's filter row, typed as a person would)
    v.page.click("#table th.dash-filter[data-dash-column='NPU Name'] input")
    v.page.keyboard.type("linear")
    v.page.keyboard.press("Enter")
    v.page.click("#table th.dash-filter[data-dash-column='Result'] input")
    v.page.keyboard.type("error")
    v.page.keyboard.press("Enter")
    expect = [n for n, r in zip(table.column("NPU Name"), table.column("Result")) if "linear" in n.lower()
              and "error" in str(r).lower()]
    v.settle("#tab-note", f"^{len(expect):,} of")
    assert v.page.eval_on_selector_all(rows, "ts => ts.map(t => t.innerText)") == expect[:50]
    # error rows are highlighted as msprobe's xlsx highlights them
    colour = v.page.eval_on_selector(rows, "t => getComputedStyle(t).backgroundColor")
    assert colour == "rgb(255, 205, 210)"
    # sort by MaxRelativeErr, largest first (click the sort arrow twice: ascending, then descending)
    sort = "#table th.dash-header[data-dash-column='MaxRelativeErr'] .column-header--sort"
    v.page.click(sort)
    v.page.wait_for_timeout(500)
    v.page.click(sort)
    rel = [r for n, r, res in zip(table.column("NPU Name"), table.column("MaxRelativeErr"), table.column("Result"))
           if "linear" in n.lower() and "error" in str(res).lower()]
    top = max(_number(x) for x in rel if _number(x) == _number(x))
    cell = "#table .dash-spreadsheet tbody tr:first-child td[data-dash-column='MaxRelativeErr']"
    v.wait(f"(() => {{ const c = document.querySelector(\"{cell}\"); "
           f"return c && Math.abs(parseFloat(c.innerText) - {top}) <= 1e-6 * Math.abs({top}); }})()")
    # a click on a row's cell opens that tensor's node in the panes
    first = v.page.eval_on_selector(rows, "t => t.innerText")
    v.page.click(rows)
    k = list(table.column("NPU Name")).index(first)
    row = int(tf_report.npu.tensors.node[table.npu_rows[k]])
    v.wait(f"window.graphcmp.selected('npu').some(e => e === 'n{row}' || e === 'b{row}')")
    assert _query(v.page.url)["sel"] == f"npu:{tf_report.npu.nodes.ids[row]}"
    assert not v.errors
    v.page.close()
