"""The viewer on a merged comparison of a parallel job (playwright, chromium): rank badges, shards in details."""

from __future__ import annotations

import re

import pytest

from tests.app.test_browser import Viewer, _server, browser  # noqa: F401 (the browser fixture)

pytestmark = pytest.mark.browser


def test_merged_nodes_show_their_ranks_and_shards(browser, merged_results):  # noqa: F811
    from graphcmp.core.report import load_report

    report = load_report(merged_results / "step0_merged.json")
    node = "Functional.layer_norm.2.forward"
    server = _server([merged_results])
    try:
        v = Viewer(browser.new_page(viewport={"width": 1500, "height": 1100}), server.url + f"?res=s0r&sel=npu:{node}")
        assert "first divergence: rank 1, step 0: " + node in v.settle("#job-origin", "rank 1")
        details = v.settle("#details", "shards \\(npu\\)")
        assert "merged from ranks 0, 1" in details and "replicas disagree" in details
        row = report.npu.row(node)
        v.has("npu", f"n{row}")
        assert v.page.evaluate(f"window.graphcmp.label('npu', 'n{row}')") == "layer_norm.2 [r0-1]"
        root = report.npu.row("Module.module.GPTModel.forward.0")
        assert v.page.evaluate(f"window.graphcmp.label('npu', 'b{root}')").endswith("[r0-1]")
        assert v.page.locator("#details table.shards tr.disagree").count() == 4  # weight and output, two replicas
        shot = v.page.locator(".shards-panel").first
        assert re.search(r"rank 1\s+\[64\]\s+1\.26999", shot.inner_text())
        assert not v.errors
        v.page.close()
    finally:
        server.stop()
