"""Callback requests: a body the page could not have sent is answered ``400`` with one line, before Dash reads it.

Dash's renderer posts every callback to ``/_dash-update-component`` as a JSON object naming the callback
by its outputs (``output``), with one ``{"id", "property", "value"}`` per input and state in the order
the callback declares them (a list of those for a pattern input such as ``{"type": "peer", "index":
ALL}``), the outputs, and the names of the inputs that changed. Dash itself indexes into that body
without checking it, so a hand-made request (a missing key, a short list, an unknown callback) ended
in ``500`` with a traceback in the log. The shape is checked here (`malformed`); the values are the
callbacks' to check (`actions`, `callbacks`): a value of the wrong kind changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dash import Dash
from flask import Response, request

__all__ = ["MAX_BODY", "guard_callbacks", "malformed"]


MAX_BODY = 1 << 20
"""Largest request body the viewer reads (bytes): the page's callbacks send ids, clicks and a URL, a few KB."""


def guard_callbacks(app: Dash) -> None:
    """Answer ``400`` (one line of text) to a callback request of `app` whose body is malformed, and ``413`` to
    any request with a body over `MAX_BODY`."""
    app.server.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    path = app.config.routes_pathname_prefix + "_dash-update-component"

    def check() -> Response | None:
        if request.path != path or request.method != "POST":
            return None
        why = malformed(app.callback_map, request.get_json(silent=True))
        if not why:
            return None
        return Response(f"graphcmp viewer: malformed callback request: {why}\n", 400, mimetype="text/plain")

    app.server.before_request(check)


def malformed(callbacks: Mapping[str, Mapping[str, Any]], body: Any) -> str:
    """What is wrong with the shape of a callback request `body` ("" when nothing is).

    Parameters
    ----------
    callbacks : Mapping
        Dash's ``callback_map``: per output key, the declared ``inputs``, ``state`` and ``output`` and the server
        function.
    body : Any
        The request's JSON (None when it is not JSON).

    Examples
    --------
    >>> from dash import Output
    >>> spec = {"..a.value..": {"inputs": [{"id": "b", "property": "value"}], "state": [], "callback": print,
    ...                         "output": [Output("a", "value")]}}
    >>> ok = {"output": "..a.value..", "outputs": [{"id": "a", "property": "value"}],
    ...       "inputs": [{"id": "b", "property": "value", "value": [1, "any value"]}], "changedPropIds": ["b.value"]}
    >>> malformed(spec, ok)
    ''
    >>> malformed(spec, {**ok, "inputs": []}), malformed(spec, {**ok, "output": "x.y"})
    ('inputs: 0 given, the callback has 1', 'no callback of this page has the output x.y')
    >>> malformed(spec, [ok]), malformed(spec, {**ok, "outputs": [{"id": "b", "property": "value"}]})
    ('the body is not a JSON object', 'outputs: expected a.value')
    """
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    output = body.get("output")
    spec = callbacks.get(output) if isinstance(output, str) else None
    if spec is None or "callback" not in spec:  # clientside callbacks have no server function
        return f"no callback of this page has the output {str(output)[:80]}"
    for key in ("inputs", "state"):
        why = _dependencies(key, body.get(key, []), spec.get(key, []))
        if why:
            return why
    why = _outputs(spec.get("output"), body.get("outputs"))
    if why:
        return why
    changed = body.get("changedPropIds", [])
    if not (isinstance(changed, list) and all(isinstance(c, str) for c in changed)):
        return "changedPropIds is not a list of names"
    return ""


def _dependencies(key: str, given: Any, declared: list[Mapping[str, Any]]) -> str:
    if not isinstance(given, list):
        return f"{key} is not a list"
    if len(given) != len(declared):
        return f"{key}: {len(given)} given, the callback has {len(declared)}"
    for item, spec in zip(given, declared):
        name = f"{spec['id']}.{spec['property']}"
        if str(spec["id"]).startswith("{"):  # a pattern: one entry per component that matches it
            if not (isinstance(item, list) and all(_component(i, spec["property"], dict) for i in item)):
                return f"{key}: {name} is not a list of components"
        elif not (_component(item, spec["property"], str) and item["id"] == spec["id"]):
            return f"{key}: expected {name}"
    return ""


def _outputs(declared: Any, given: Any) -> str:
    """Dash checks the outputs against the callback's and raises (a 500) when they differ: check first."""
    if given is None:  # Dash reads them from the output key then
        return ""
    multi = isinstance(declared, list)
    declared, given = (declared, given) if multi else ([declared], [given])
    if not isinstance(given, list) or len(given) != len(declared):
        return f"outputs: expected {len(declared)}"
    for item, out in zip(given, declared):
        if isinstance(item, list):  # a pattern output: one per component
            if not all(_component(i, out.component_property, dict, at=True) for i in item):
                return f"outputs: {out} is not a list of components"
        elif not (_component(item, out.component_property, str, at=True) and item["id"] == out.component_id):
            return f"outputs: expected {out.component_id}.{out.component_property}"
    return ""


def _component(item: Any, prop: str, id_type: type, at: bool = False) -> bool:
    """`item` is {"id": <id_type>, "property": `prop`} (with `at`, an output's ``prop@<key>`` counts as `prop`)."""
    if not (isinstance(item, dict) and isinstance(item.get("id"), id_type) and isinstance(item.get("property"), str)):
        return False
    return (item["property"].split("@")[0] if at else item["property"]) == prop
