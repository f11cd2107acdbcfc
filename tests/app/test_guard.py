"""Malformed callback requests posted to the real Dash endpoint (``/_dash-update-component``, Flask's test client):
a body the page could not send gets 400 and one line, a value of the wrong kind changes nothing; never a 500, never
a traceback in the log."""

from __future__ import annotations

import logging
from urllib.parse import parse_qs

import pytest

from graphcmp.app import create_app, open_results
from graphcmp.core.distributed.batch import run_batch
from tests.app.conftest import TF_SMALL

NODE = "Module.encoder.layers.1.linear1.Linear.forward.0"


def callback_body(deps: list[dict], output: str, values: dict, changed: list[str] | None = None) -> dict:
    """The body the page posts for the callback whose output key starts with `output` (`deps`: the app's
    /_dash-dependencies), with inputs and state from `values` ("id.property" -> value, missing ones None)."""
    dep = next(d for d in deps if d["output"].startswith(output))
    outputs = [dict(zip(("id", "property"), p.rsplit(".", 1))) for p in dep["output"].strip(".").split("...")]

    def items(specs: list[dict]) -> list:
        return [values.get(f"{s['id']}.{s['property']}", []) if s["id"].startswith("{")
                else {**s, "value": values.get(f"{s['id']}.{s['property']}")} for s in specs]

    return {"output": dep["output"], "outputs": outputs, "inputs": items(dep["inputs"]), "state": items(dep["state"]),
            "changedPropIds": changed if changed is not None else list(values)}


class Page:
    """Posts callbacks as the page's renderer does (bodies built from the app's own /_dash-dependencies)."""

    def __init__(self, app) -> None:
        self.client = app.server.test_client()
        assert self.client.get("/").status_code == 200
        self.deps = self.client.get("/_dash-dependencies").get_json()

    def body(self, output: str, values: dict, changed: list[str] | None = None) -> dict:
        return callback_body(self.deps, output, values, changed)

    def view(self, search: str, trigger: str, value) -> dict:
        """The view callback after `trigger` ("id.property") took `value`, on the page at URL `search`."""
        values = {"url.search": search, trigger: value}
        response = self.client.post("/_dash-update-component", json=self.body("..url.search...", values, [trigger]))
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()["response"]


@pytest.fixture(scope="module")
def page(perturb_pair) -> Page:
    return Page(create_app(open_results(perturb_pair)))


@pytest.fixture(scope="module")
def job_page(tmp_path_factory) -> Page:
    out = tmp_path_factory.mktemp("job") / "results"
    run_batch(TF_SMALL / "perturb", TF_SMALL / "baseline", out, workers=1)
    return Page(create_app(open_results([out])))


@pytest.fixture(autouse=True)
def no_traceback(caplog, capfd):
    """Every test here: nothing logged at ERROR or with an exception, no traceback on stderr."""
    caplog.set_level(logging.WARNING)
    yield
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text
    assert "Traceback" not in capfd.readouterr().err


def _url(response: dict) -> dict[str, str]:
    search = response.get("url", {}).get("search")
    return {k: v[-1] for k, v in parse_qs((search or "").lstrip("?")).items()}


START = "?res=0&sync=1"
WRONG_VALUES = [  # (input, value): none of these is a value the page sends
    ("step.value", [1]), ("step.value", {"step": 1}), ("step.value", -3), ("step.value", "9" * 5000),
    ("step.value", "1e9"), ("rank.value", 1.5), ("rank.value", "x"), ("rank.value", True),
    ("filters.value", "error"), ("filters.value", {"error": 1}), ("filters.value", 7),
    ("query.value", 5), ("query.value", ["linear"]), ("query.value", {"q": "x"}),
    ("cy-npu.tapNodeData", "n1"), ("cy-npu.tapNodeData", [1]), ("cy-npu.tapNodeData", {"id": 5}),
    ("cy-npu.tapNodeData", {"id": "n-1"}), ("cy-npu.tapNodeData", {"id": "b-1"}), ("cy-npu.tapNodeData", {"id": "n１"}),
    ("cy-npu.tapNodeData", {"id": "p-1:1"}), ("cy-npu.tapNodeData", {"id": "p3:2"}),
    ("cy-bench.tapNodeData", {"id": "n99999999999999999999"}), ("cy-bench.tapNodeData", {"id": None}),
    ("hits.value", "3"), ("hits.value", 10**30), ("hits.value", -1), ("hits.value", 2.5),
    ("findings.value", {"x": 1}), ("findings.value", "no such node"), ("manual-done.data", "x"),
    ("manual-done.data", {"search": 5}), ("metric.value", ["x"]), ("bins.value", 5), ("sync.value", {"on": 1}),
    ("sync.value", "on"), ("micro.value", {"a": 1}), ("micro.value", -1), ("prev.n_clicks", "a"),
    ("collapse.n_clicks", {"x": 1}),
]


@pytest.mark.parametrize(("trigger", "value"), WRONG_VALUES)
def test_a_value_of_the_wrong_kind_changes_nothing(page, trigger, value):
    before = _url(page.view(START, "url.search", START))
    after = page.view(START, trigger, value)
    assert _url(after) in ({}, before)  # the URL (the whole view state) unchanged, or not resent


@pytest.mark.parametrize("value", [5, ["?q=a"], {"q": "a"}, None])
def test_a_url_that_is_not_text_opens_the_page_afresh(page, value):
    assert _url(page.view(START, "url.search", value)) == _url(page.view(START, "url.search", ""))


def test_filters_given_as_a_string_are_not_split_into_letters(page):
    assert _url(page.view(START, "filters.value", ["error"]))["f"] == "error"
    assert _url(page.view(START, "filters.value", "error")) in ({}, _url(page.view(START, "url.search", START)))
    assert _url(page.view(START, "filters.value", ["e", "r", "error", "error", "nope"]))["f"] == "error"


def test_tap_n_minus_1_selects_nothing_and_n_k_selects_row_k(page, sample_model):
    ids = sample_model.graphs["npu"].nodes.ids
    assert "sel" not in _url(page.view(START, "cy-npu.tapNodeData", {"id": "n-1"}))
    row = sample_model.graphs["npu"].row("Module.encoder.TransformerEncoder.forward.0")
    assert _url(page.view(START, "cy-npu.tapNodeData", {"id": f"n{row}"}))["sel"] == f"npu:{ids[row]}"
    assert _url(page.view(START, "cy-npu.tapNodeData", {"id": f"n{len(ids)}"})) in ({}, {"res": "0", "sync": "1"})


def test_a_backtracking_query_answers_no_matches(page):
    assert page.view(START, "query.value", "(.|.)*!")["hit-info"]["children"] == "no matches"
    refused = page.view(START, "query.value", r"(linear)\1")["hit-info"]["children"]
    assert "not a regular expression the search can run" in refused


@pytest.mark.parametrize(("output", "values"), [
    ("..manual-done.data..", {"match.n_clicks": "x", "url.search": 5, "match-children.value": {"a": 1}}),
    ("..manual-done.data..", {"unmatch.n_clicks": [1], "url.search": ["?"], "match-children.value": None}),
    ("..download.data..", {"svg-npu.n_clicks": 1, "url.search": {"res": "0"}}),
    ("..download.data..", {"svg-bench.n_clicks": "x", "url.search": "?res=../../etc/passwd"}),
    ("..cy-npu.generateImage..", {"png-npu.n_clicks": {"a": 1}}),
])
def test_other_callbacks_take_wrong_values(page, output, values):
    body = page.body(output, values)
    assert page.client.post("/_dash-update-component", json=body).status_code == 200


@pytest.mark.parametrize("values", [
    {"job-heat.clickData": "x"}, {"job-heat.clickData": {"points": "x"}}, {"job-heat.clickData": {"points": [5]}},
    {"job-heat.clickData": {"points": [{"x": ["a"], "y": {"b": 1}}]}},
    {"job-heat.clickData": {"points": [{"x": NODE, "y": "rank " + "9" * 5000}]}},
    {"job-trend.clickData": {"points": [{"x": NODE, "y": "step -1"}]}},
    {"job-trend.clickData": {"points": [{"x": NODE, "y": "step １"}]}},
    {"job-heat.clickData": {"points": [{"x": NODE, "y": "rank 0"}]}, "url.search": 7},
])
def test_job_jumps_take_wrong_click_data(job_page, values):
    changed = [next(iter(values))]
    body = job_page.body("..url.search@", values, changed)
    response = job_page.client.post("/_dash-update-component", json=body)
    assert response.status_code in (200, 204)
    if response.status_code == 200 and values.get("url.search") is None:
        assert "url" not in response.get_json()["response"]  # no jump


def test_job_jump_with_pattern_inputs_of_the_wrong_kind(job_page):
    values = {'{"index":["ALL"],"type":"peer"}.n_clicks': [{"id": {"type": "peer", "index": "x:-1"},
                                                            "property": "n_clicks", "value": 1}]}
    body = job_page.body("..url.search@", values, ['{"index":"x:-1","type":"peer"}.n_clicks'])
    assert job_page.client.post("/_dash-update-component", json=body).status_code in (200, 204)


def _view_body(page: Page) -> dict:
    return page.body("..url.search...", {"url.search": START}, ["url.search"])


SHAPES = {  # what a hand-made request can get wrong about the body itself -> 400
    "not an object": lambda b: [b],
    "a string": lambda b: "x",
    "no output": lambda b: {k: v for k, v in b.items() if k != "output"},
    "unknown output": lambda b: {**b, "output": "nope.children"},
    "clientside output": lambda b: {**b, "output": "focus-done.data"},
    "output not a string": lambda b: {**b, "output": ["..url.search.."]},
    "inputs not a list": lambda b: {**b, "inputs": 5},
    "inputs short": lambda b: {**b, "inputs": b["inputs"][:3]},
    "input not an object": lambda b: {**b, "inputs": [5] * len(b["inputs"])},
    "input of another component": lambda b: {**b, "inputs": [{**b["inputs"][0], "id": "other"}, *b["inputs"][1:]]},
    "state not a list": lambda b: {**b, "state": {"a": 1}},
    "outputs short": lambda b: {**b, "outputs": b["outputs"][:2]},
    "outputs of another callback": lambda b: {**b, "outputs": list(reversed(b["outputs"]))},
    "output not an object": lambda b: {**b, "outputs": [1] * len(b["outputs"])},
    "changedPropIds a string": lambda b: {**b, "changedPropIds": "url.search"},
    "changedPropIds of numbers": lambda b: {**b, "changedPropIds": [5]},
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_a_malformed_body_gets_400_and_one_line(page, name):
    response = page.client.post("/_dash-update-component", json=SHAPES[name](_view_body(page)))
    text = response.get_data(as_text=True)
    assert response.status_code == 400 and text.startswith("graphcmp viewer: malformed callback request: ")
    assert text.count("\n") == 1


@pytest.mark.parametrize(("data", "content_type"), [("{{{", "application/json"), ("x", "text/plain"),
                                                     ("", "application/json"), ("null", "application/json")])
def test_a_body_that_is_not_json_gets_400(page, data, content_type):
    response = page.client.post("/_dash-update-component", data=data, content_type=content_type)
    assert response.status_code == 400


def test_the_page_s_own_request_passes(page):
    response = page.client.post("/_dash-update-component", json=_view_body(page))
    assert response.status_code == 200 and response.get_json()["response"]["url"]["search"]


def test_shape_check_leaves_other_routes_alone(page):
    assert page.client.get("/_dash-layout").status_code == 200
    assert page.client.post("/_dash-layout", json=[1]).status_code == 405


def test_a_body_over_a_megabyte_is_refused_unread(page):
    body = {**_view_body(page), "changedPropIds": ["url.search"], "padding": "x" * (2 << 20)}
    assert page.client.post("/_dash-update-component", json=body).status_code == 413
