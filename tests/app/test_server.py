"""The real viewer server: requests naming another host are refused (DNS rebinding); a backtracking search
does not stop it from serving."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from urllib.parse import urlencode

import pytest

from graphcmp.app import create_app, open_results
from graphcmp.app.server import HostCheck, ServeError, start_server
from tests.app.test_guard import callback_body


@pytest.fixture(scope="module")
def app(perturb_pair):
    return create_app(open_results(perturb_pair))


@pytest.fixture(scope="module")
def server(app):
    running = start_server(app, "127.0.0.1", 0).start()
    yield running
    running.stop()


def _port(server) -> int:
    return int(server.url.rstrip("/").rsplit(":", 1)[1])


def _request(port: int, host: str | None, method: str = "GET", path: str = "/", body: dict | None = None,
             address: str = "127.0.0.1") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(address, port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        data = json.dumps(body).encode() if body is not None else b""
        if body is not None:
            conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}", "[::1]:{port}"])
def test_the_bound_host_and_its_loopback_names_are_served(server, host):
    port = _port(server)
    status, body = _request(port, host.format(port=port))
    assert status == 200 and b"graphcmp" in body


@pytest.mark.parametrize("host", ["evil.example:{port}", "localhost.evil.example:{port}", "127.0.0.1.nip.io:{port}",
                                  "127.0.0.1:{other}", "127.0.0.1", "localhost", "10.0.0.1:{port}", "",
                                  "127.0.0.1:{port}@evil.example", "[::1]", None])
@pytest.mark.parametrize("path", ["/", "/_dash-layout", "/_dash-dependencies"])
def test_a_foreign_host_is_refused(server, host, path):
    port = _port(server)
    status, body = _request(port, None if host is None else host.format(port=port, other=port + 1), path=path)
    assert status == 400 and b"names another host" in body


def test_a_callback_with_a_foreign_host_is_refused(server):
    port = _port(server)
    body = _view_request(server, "?q=linear")
    assert _request(port, f"rebind.example:{port}", "POST", "/_dash-update-component", body)[0] == 400
    status, answer = _request(port, f"127.0.0.1:{port}", "POST", "/_dash-update-component", body)
    assert status == 200 and json.loads(answer)["response"]["hit-info"]["children"].startswith("1 of ")


def test_all_interfaces_accept_ip_addresses_and_this_machines_names():
    check = HostCheck(None, "0.0.0.0", "0.0.0.0", 8050)
    assert check.accepts("192.168.1.20:8050") and check.accepts(f"{socket.gethostname()}:8050")
    assert not check.accepts("rebind.example:8050") and not check.accepts("192.168.1.20:8051")
    named = HostCheck(None, "viewer.lab", "10.0.0.5", 8050)
    assert named.accepts("viewer.lab:8050") and named.accepts("10.0.0.5:8050") and not named.accepts("localhost:8050")


def test_ipv6_loopback(app):
    try:
        running = start_server(app, "::1", 0).start()
    except ServeError as err:  # no IPv6 on this machine
        pytest.skip(f"cannot bind ::1: {err}")
    try:
        port = _port(running)
        assert running.url == f"http://[::1]:{port}/"
        assert _request(port, f"[::1]:{port}", address="::1")[0] == 200
        assert _request(port, f"localhost:{port}", address="::1")[0] == 200
        assert _request(port, f"evil.example:{port}", address="::1")[0] == 400
    finally:
        running.stop()


def test_a_backtracking_search_answers_and_the_server_keeps_serving(server):
    """(.|.)*! made Python's re try 2**50 ways on each id: the server froze. Now it answers "no matches", and
    another client is served meanwhile (each answer waited for at most 30 s: a hang guard, not a timing)."""
    port, answers, others = _port(server), [], []
    body = _view_request(server, "?" + urlencode({"q": "(.|.)*!"}))
    search = threading.Thread(target=lambda: answers.append(
        _request(port, f"127.0.0.1:{port}", "POST", "/_dash-update-component", body)), daemon=True)
    search.start()
    for _ in range(5):
        others.append(_request(port, f"127.0.0.1:{port}", path="/_dash-layout")[0])
        time.sleep(0.01)
    search.join(30)
    assert others == [200] * 5
    assert answers and answers[0][0] == 200
    assert json.loads(answers[0][1])["response"]["hit-info"]["children"] == "no matches"


def _view_request(server, search: str) -> dict:
    """The body a page posts for the view callback when its URL is `search` (every other input empty)."""
    port = _port(server)
    deps = json.loads(_request(port, f"127.0.0.1:{port}", path="/_dash-dependencies")[1])
    return callback_body(deps, "..url.search...", {"url.search": search})
