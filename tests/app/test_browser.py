"""The viewer in a real headless chromium (playwright): open, twin, details, search, filter, sync, step, URL, export,
a backtracking search, a page reached through another host name.

Skipped when /usr/bin/chromium or the playwright package is missing (`pip install -e ".[test]"` and
`apt-get install chromium` provide both; .ci/run does).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphcmp.app import create_app, open_results
from graphcmp.app.server import start_server
from graphcmp.core.judge import WARNING
from graphcmp.core.report import load_report
from tests.app.conftest import EVIL_ID

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
ENC = "Module.encoder.TransformerEncoder.forward.0"
WAIT_MS = 60_000
"""How long a test waits for the page to get where it expects (ms; every page's default, `Viewer`): a working page
gets there within a second or two; the margin is for a slow or shared machine, where CI may run, not for a page that
works slowly."""


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield b
        b.close()


def _server(paths, results=None):
    return start_server(create_app(results or open_results(paths)), "127.0.0.1", 0).start()


@pytest.fixture(scope="module")
def sample_url(perturb_pair, browser):
    server = _server(perturb_pair)
    yield server.url
    server.stop()


class Viewer:
    """A page of the viewer with helpers that return plain values."""

    def __init__(self, page, url: str) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.set_default_timeout(WAIT_MS)
        page.goto(url)
        self.wait("window.graphcmp && window.graphcmp.count('npu') > 0")

    def wait(self, js: str) -> None:
        self.page.wait_for_function(js)

    def ids(self, side: str) -> list[str]:
        return self.page.evaluate(f"window.graphcmp.nodeIds('{side}')")

    def click(self, side: str, element: str) -> None:
        self.wait(f"window.graphcmp.screenPos('{side}', '{element}') !== null")
        self.page.evaluate(f"window.graphcmp.show('{side}', '{element}')")  # scroll it into view, as a person would
        pos = self.page.evaluate(f"window.graphcmp.screenPos('{side}', '{element}')")
        assert pos["visible"], f"{element} is off screen in {side}"
        self.page.mouse.click(pos["x"], pos["y"])

    def has(self, side: str, element: str) -> None:
        self.wait(f"window.graphcmp.nodeIds('{side}').includes('{element}')")

    def selected(self, side: str) -> list[str]:
        return self.page.evaluate(f"window.graphcmp.selected('{side}')")

    def text(self, selector: str) -> str:
        return self.page.inner_text(selector)

    def settle(self, selector: str, pattern: str) -> str:
        """Wait until the element's text matches `pattern`, and return it."""
        self.page.wait_for_function(
            "([s, p]) => { const e = document.querySelector(s); return e && new RegExp(p).test(e.innerText); }",
            arg=[selector, pattern])
        return self.text(selector)


@pytest.fixture
def viewer(browser, sample_url):
    """A page on the collapsed view (a URL that names the view: a fresh page opens at the origin instead)."""
    page = browser.new_page(viewport={"width": 1500, "height": 950})
    v = Viewer(page, sample_url + "?sync=1")
    yield v
    assert not v.errors
    page.close()


def test_open_twin_select_details_and_close(viewer, sample_report, tmp_path):
    enc = sample_report.npu.row(ENC)
    assert f"n{enc}" in viewer.ids("npu") and f"n{enc}" in viewer.ids("bench")
    viewer.click("npu", f"n{enc}")
    viewer.has("npu", f"b{enc}")
    viewer.has("bench", f"b{enc}")  # the twin opened in the other pane
    layer1 = sample_report.npu.row("Module.encoder.layers.1.TransformerEncoderLayer.forward.0")
    viewer.click("npu", f"n{layer1}")
    viewer.has("bench", f"b{layer1}")
    leaf = "Tensor.__add__.3.forward"
    row = sample_report.npu.row(leaf)
    viewer.click("npu", f"n{row}")
    details = viewer.settle("#details", re.escape(leaf))
    verdict = sample_report.verdict(leaf)
    assert verdict.reason in details and verdict.status in details
    viewer.wait(f"window.graphcmp.selected('bench').includes('n{row}')")  # the matched pair is highlighted together
    assert viewer.selected("npu") == [f"n{row}"]
    shot = tmp_path / "open.png"
    viewer.page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000
    viewer.click("npu", f"b{enc}")
    viewer.wait(f"window.graphcmp.nodeIds('bench').includes('n{enc}') && "
                f"!window.graphcmp.nodeIds('bench').includes('n{layer1}')")


def test_search_steps_through_hits(viewer, sample_report):
    ids = sample_report.npu.nodes.ids
    expected = [i for i in ids[1:] if re.search("linear1", i, re.I)]
    viewer.page.fill("#query", "linear1")
    viewer.page.press("#query", "Enter")
    assert viewer.settle("#hit-info", "1 of") == f"1 of {len(expected)}"
    first = sample_report.npu.row(expected[0])
    viewer.wait("window.graphcmp.selected('npu').length === 1")
    pos = viewer.page.evaluate("window.graphcmp.screenPos('npu', window.graphcmp.selected('npu')[0])")
    assert pos["visible"] and viewer.selected("npu")[0][1:] == str(first)
    box = viewer.page.locator("#cy-npu").bounding_box()
    viewer.wait(f"Math.abs(window.graphcmp.screenPos('npu', 'n{first}').x - {box['x'] + box['width'] / 2}) < 3")
    centre = viewer.page.evaluate(f"window.graphcmp.screenPos('npu', 'n{first}')")
    assert abs(centre["y"] - (box["y"] + box["height"] / 2)) < 3  # a search hit is centred
    viewer.page.click("#next")
    assert viewer.settle("#hit-info", "^2 of") == f"2 of {len(expected)}"
    assert expected[1] in viewer.settle("#details", re.escape(expected[1]))


def test_filter_lists_warnings(viewer, sample_report):
    rows = (sample_report.verdicts.status == WARNING).nonzero()[0]
    viewer.page.check("#filters input[value=warning]")
    assert viewer.settle("#hit-info", "of") == f"1 of {len(rows)}"
    first = sample_report.npu.nodes.ids[rows[0]]
    assert first in viewer.settle("#details", re.escape(first))
    assert viewer.page.locator("#hits label").count() == len(rows)


def test_sync_off_opens_one_pane(viewer, sample_report):
    viewer.page.uncheck("#sync input")
    viewer.wait("window.location.search.includes('sync=0')")
    enc = sample_report.npu.row(ENC)
    viewer.click("npu", f"n{enc}")
    viewer.has("npu", f"b{enc}")
    assert f"n{enc}" in viewer.ids("bench") and f"b{enc}" not in viewer.ids("bench")


def test_shared_url_reproduces_the_view(viewer, browser, sample_report):
    node = "Module.encoder.layers.2.linear2.Linear.forward.0"
    viewer.page.fill("#query", re.escape(node))
    viewer.page.press("#query", "Enter")
    viewer.settle("#hit-info", "1 of 1")
    row = sample_report.npu.row(node)
    viewer.wait(f"window.graphcmp.selected('npu').includes('n{row}')")
    url = viewer.page.url
    other = Viewer(browser.new_page(viewport={"width": 1500, "height": 950}), url)
    other.wait(f"window.graphcmp.selected('npu').includes('n{row}') && "
               f"window.graphcmp.selected('bench').includes('n{row}')")
    assert node in other.settle("#details", re.escape(node))
    assert sorted(other.ids("npu")) == sorted(viewer.ids("npu"))
    assert other.page.input_value("#query") == re.escape(node)
    other.page.close()


def test_export_png_and_svg(viewer):
    with viewer.page.expect_download() as png:
        viewer.page.click("#png-npu")
    assert Path(png.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with viewer.page.expect_download() as svg:
        viewer.page.click("#svg-bench")
    text = Path(svg.value.path()).read_text()
    assert text.startswith("<svg") and ">Embedding</tspan><tspan" in text and ">embedding</tspan>" in text


def test_step_selector_switches_result(browser, steps_folder):
    server = _server([steps_folder])
    try:
        v = Viewer(browser.new_page(viewport={"width": 1500, "height": 950}), server.url)
        node = "Module.encoder.layers.1.linear1.Linear.forward.0"
        v.page.fill("#query", re.escape(node))
        v.page.press("#query", "Enter")
        v.settle("#details", re.escape(node))
        v.page.click("#step")
        v.page.get_by_role("option", name="1", exact=True).click()
        v.wait("window.location.search.includes('res=s1r0')")
        step1 = load_report(steps_folder / "step1_rank0.json")
        out = next(t for t in step1.npu.view(node).tensors if t.role == 1)
        assert f"{out.stats['max']:.6g}" in v.settle("#details", re.escape(f"{out.stats['max']:.6g}"))
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


def test_hostile_names_are_shown_as_text(browser, evil_report_file):
    server = _server([evil_report_file])
    try:
        v = Viewer(browser.new_page(viewport={"width": 1500, "height": 950}), server.url)
        v.page.fill("#query", "onerror")
        v.page.press("#query", "Enter")
        assert EVIL_ID in v.settle("#details", "onerror")
        assert v.page.get_attribute("#hits .hit-name", "title") == EVIL_ID  # the full id, as a tooltip
        assert v.page.evaluate("window.__xss === undefined && document.querySelectorAll('img').length === 0")
        v.page.close()
    finally:
        server.stop()


@pytest.mark.shared
def test_micro_step_selector(browser):
    from tests.conftest import shared

    root = shared("msprobe/dumps/tf_huge/statistics")
    results = open_results([root / "perturb" / "step0" / "rank0", root / "baseline" / "step0" / "rank0"])
    server = _server((), results)
    try:
        v = Viewer(browser.new_page(viewport={"width": 1500, "height": 950}), server.url)
        assert v.page.is_visible("#ctl-micro")
        v.page.click("#micro")
        v.page.get_by_role("option", name="2", exact=True).click()
        v.wait("window.location.search.includes('micro=2')")
        report = results.document(results.default.key)
        top = [r for r in range(len(report.npu)) if report.npu.nodes.parent[r] == 0]
        expected = sorted(f"n{r}" for r in top if report.npu.nodes.micro_step[r] == 2)
        v.wait(f"window.graphcmp.nodeIds('npu').length === {len(expected)}")
        assert sorted(v.ids("npu")) == expected
        v.page.close()
    finally:
        server.stop()



def test_manual_match_persists_over_reload(browser, tmp_path):
    from graphcmp.core.compare import compare_paths
    from graphcmp.core.matching.manual import sidecar_path
    from graphcmp.core.report import save_report
    from tests.app.test_manual import BASE_BENCH, EXTRA_NPU, NODE

    result = tmp_path / "cmp.json"
    report = compare_paths(EXTRA_NPU, BASE_BENCH, fuzzy=False)  # --no-fuzzy: the extra op's neighbours stay unmatched
    save_report(report, result)
    assert report.verdict(NODE).status == "unmatched"
    server = _server([result])
    try:
        v = Viewer(browser.new_page(viewport={"width": 1500, "height": 950}), server.url)
        v.page.fill("#query", "^" + re.escape(NODE) + "$")
        v.page.press("#query", "Enter")
        v.settle("#hit-info", "1 of 2")
        v.page.click("#next")  # the npu hit, then the bench hit: one picked per side
        v.settle("#hit-info", "2 of 2")
        info = v.settle("#match-info", f"npu {re.escape(NODE)}[\\s\\S]*bench {re.escape(NODE)}")
        assert info.count(NODE) == 2
        v.page.click("#match")
        v.settle("#match-info", "matched ")
        assert "matched (manual)" in v.settle("#details", re.escape("matched (manual)"))
        assert sidecar_path(result).is_file()
        v.page.reload()
        v.wait("window.graphcmp && window.graphcmp.count('npu') > 0")
        assert "matched (manual)" in v.settle("#details", re.escape("matched (manual)"))
        assert not v.errors
        url = v.page.url
        v.page.close()
    finally:
        server.stop()
    server = _server([result])  # a new app on the same file re-applies the sidecar
    try:
        v = Viewer(browser.new_page(viewport={"width": 1500, "height": 950}), server.url + "?" + url.split("?", 1)[1])
        assert "matched (manual)" in v.settle("#details", re.escape("matched (manual)"))
        row = report.npu.row(NODE)
        v.wait(f"window.graphcmp.selected('bench').length === 1 && window.graphcmp.selected('npu').includes('n{row}')")
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


def test_job_overview_cell_opens_the_rank(browser, tmp_path):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    from graphcmp.core.distributed.batch import run_batch
    from tests.app.conftest import TF_SMALL

    out = tmp_path / "results"
    index = run_batch(TF_SMALL / "perturb", TF_SMALL / "baseline", out, workers=1)
    server = _server([out])
    try:
        v = Viewer(browser.new_page(viewport={"width": 1500, "height": 950}), server.url)
        assert v.page.is_visible("#job")
        v.page.wait_for_selector("#job-heat .nsewdrag")
        origin = index["analysis"]["origin"]
        assert origin["node"] in v.text("#job-origin")
        v.wait("window.location.search.includes('sel=npu')")  # opened at the origin
        before = v.page.evaluate("window.location.search")
        v.wait("(() => { const g = document.querySelector('#job-heat .js-plotly-plot');"
               " return !!(g && g._fullLayout && g._fullData && g._fullData.length); })()")  # the map is drawn
        opened = "(b) => window.location.search !== b && window.location.search.includes('sel=npu')"
        for attempt in range(5):  # a click before plotly has wired the map is lost (in loaded full runs)
            box = v.page.locator("#job-heat .nsewdrag").bounding_box()
            v.page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
            try:
                v.page.wait_for_function(opened, arg=before, timeout=20000)  # else the click was lost: again
                break
            except PlaywrightTimeout:
                if attempt == 4:
                    raise
        heat = [h[0] for h in next(r for r in index["runs"] if r["step"] == 0)["heat"]]
        from urllib.parse import parse_qs, urlparse
        node = parse_qs(urlparse(v.page.url).query)["sel"][0].split(":", 1)[1]
        assert node in heat
        assert node in v.settle("#details", re.escape(node))
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


@pytest.mark.shared
def test_linked_call_jumps_to_the_peer_rank(browser, tmp_path):
    from graphcmp.core.distributed.batch import run_batch
    from tests.conftest import shared

    root = shared("msprobe/dumps/dist4/statistics")
    out = tmp_path / "results"
    run_batch(root / "perturb_rank2", root / "baseline", out, workers=1)
    server = _server([out])
    try:
        node = "Distributed.all_reduce.0.forward"
        v = Viewer(browser.new_page(viewport={"width": 1500, "height": 950}), server.url + f"?res=s0r2&sel=npu:{node}")
        assert "rank 2, step 0" in v.settle("#job-origin", "rank 2")
        v.settle("#details", "linked calls on other ranks \\(3\\)")
        buttons = v.page.locator("#details button.peer")
        assert buttons.count() == 3 and "rank 0: " + node in buttons.nth(0).inner_text()
        buttons.nth(0).click()
        v.wait("window.location.search.includes('res=s0r0')")
        v.settle("#details", "rank 2: " + re.escape(node))  # rank 0's all_reduce lists rank 2 among its peers
        assert v.page.is_visible("#job-heat .nsewdrag")
        assert not v.errors
        v.page.close()
    finally:
        server.stop()


def test_a_backtracking_search_answers_and_the_page_goes_on(viewer, browser, sample_url, sample_report):
    """(.|.)*! typed or in a shared link: "no matches" (Python's re froze the server on it), and the next search
    answers as usual; a pattern that needs backtracking (a back-reference) gets its message under the box."""
    viewer.page.fill("#query", "(.|.)*!")
    viewer.page.press("#query", "Enter")
    assert viewer.settle("#hit-info", "no matches") == "no matches"
    viewer.page.fill("#query", "linear1")
    viewer.page.press("#query", "Enter")
    expected = sum(1 for i in sample_report.npu.nodes.ids[1:] if re.search("linear1", i, re.I))
    assert viewer.settle("#hit-info", "1 of") == f"1 of {expected}"
    viewer.page.fill("#query", r"(linear)\1")
    viewer.page.press("#query", "Enter")
    assert "back-references are not supported" in viewer.settle("#hit-info", "not a regular expression")
    shared_link = Viewer(browser.new_page(viewport={"width": 1500, "height": 950}), sample_url + "?sync=1&q=(.|.)*!")
    assert shared_link.settle("#hit-info", "no matches") == "no matches"
    assert shared_link.page.input_value("#query") == "(.|.)*!"
    shared_link.page.close()


def test_a_page_reached_through_another_name_is_refused(browser, sample_url):
    """DNS rebinding: rebind.example resolves to 127.0.0.1 (as an attacker's DNS would make it); the viewer
    refuses the page's requests, while localhost reaches it."""
    port = sample_url.rstrip("/").rsplit(":", 1)[1]
    rebinding = browser.browser_type.launch(executable_path=str(CHROMIUM),
                                            args=[*FLAGS, "--host-resolver-rules=MAP rebind.example 127.0.0.1"])
    try:
        page = rebinding.new_page()
        response = page.goto(f"http://rebind.example:{port}/")
        assert response.status == 400 and "names another host" in page.inner_text("body")
        status = page.evaluate(f"fetch('http://rebind.example:{port}/_dash-layout').then(r => r.status)")
        assert status == 400
        ok = Viewer(rebinding.new_page(viewport={"width": 1500, "height": 950}), f"http://localhost:{port}/?sync=1")
        assert ok.ids("npu") and not ok.errors
    finally:
        rebinding.close()
