"""Running the viewer: a threaded WSGI server on a host and port, stoppable from another thread.

The server answers only requests addressed to it. A web page on another site can make a browser send
requests to ``127.0.0.1:8050`` under the site's own name (DNS rebinding: the name is re-pointed at
this machine), and would then read every result the viewer serves. Such a request carries the site's
name in its ``Host`` header, so a request whose ``Host`` is not the address the viewer was bound to
(for a loopback address also ``localhost``, ``127.0.0.1`` and ``[::1]``; for all interfaces, any IP
address and this machine's names), on the port it listens on, gets ``400 Bad Request`` (`HostCheck`).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Iterable

from dash import Dash
from werkzeug.serving import BaseWSGIServer, make_server

from graphcmp.core.errors import GraphcmpError

__all__ = ["HostCheck", "ServeError", "ViewerServer", "start_server"]

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class ServeError(GraphcmpError):
    """The viewer cannot listen on the requested host and port."""


class HostCheck:
    """WSGI middleware: only requests whose ``Host`` header names the bound host and port reach `app`.

    Parameters
    ----------
    app : WSGI application
        The viewer (Dash's Flask server).
    host : str
        The address the server was asked to bind (a name or an IP address; ``0.0.0.0`` or ``::`` for all).
    address : str
        The IP address it is bound to.
    port : int
        The port it listens on.

    Examples
    --------
    >>> check = HostCheck(None, "127.0.0.1", "127.0.0.1", 8050)
    >>> [check.accepts(h) for h in ("127.0.0.1:8050", "localhost:8050", "[::1]:8050", "evil.example:8050",
    ...                             "127.0.0.1:8051", "127.0.0.1", None)]
    [True, True, True, False, False, False, False]
    >>> every = HostCheck(None, "0.0.0.0", "0.0.0.0", 80)
    >>> [every.accepts(h) for h in ("10.1.2.3", "[fe80::1]", "localhost", "rebind.example")]
    [True, True, True, False]
    """

    def __init__(self, app: Callable, host: str, address: str, port: int) -> None:
        self.app, self.port = app, port
        names = {_name(host), _name(address)}
        ip = _ip(address)
        self.any_ip = ip is not None and ip.is_unspecified
        if ip is not None and ip.is_loopback:
            names |= _LOOPBACK_NAMES
        if self.any_ip:
            names |= {"localhost", _name(socket.gethostname())}
        self.names = frozenset(names - {""})

    def accepts(self, header: str | None) -> bool:
        """True if a request with this ``Host`` header is addressed to this server."""
        if not header:
            return False
        name, port = _split_host(header)
        if port != self.port:
            return False
        return name in self.names or (self.any_ip and _ip(name) is not None)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if self.accepts(environ.get("HTTP_HOST")):
            return self.app(environ, start_response)
        body = (b"graphcmp viewer: this request names another host (Host header); open the viewer at the address "
                b"it printed\n")
        start_response("400 Bad Request", [("Content-Type", "text/plain; charset=utf-8"),
                                           ("Content-Length", str(len(body)))])
        return [body]


def _name(host: str) -> str:
    """A host name or IP address as compared: lower case, IPv6 without brackets."""
    return host.strip().lower().removeprefix("[").removesuffix("]")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _split_host(header: str) -> tuple[str, int | None]:
    """(name, port) of a ``Host`` header: ``example:8050``, ``[::1]:8050``, ``example`` (port 80)."""
    header = header.strip()
    if header.startswith("["):
        name, _, rest = header[1:].partition("]")
        port = rest.removeprefix(":") if rest.startswith(":") else ("80" if not rest else "")
    else:
        name, colon, port = header.rpartition(":")
        if not colon:
            name, port = header, "80"
    if not (port.isascii() and port.isdigit()):
        return _name(name), None
    return _name(name), int(port)


class ViewerServer:
    """A viewer listening on (host, port); `url` is where to point a browser."""

    def __init__(self, server: BaseWSGIServer) -> None:
        self._server = server
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def start(self) -> ViewerServer:
        """Serve from a daemon thread (tests, benchmarks)."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def start_server(app: Dash, host: str = "127.0.0.1", port: int = 8050) -> ViewerServer:
    """Bind `app` to (host, port); port 0 picks a free one. Requests naming another host get 400 (`HostCheck`).

    Raises
    ------
    ServeError
        If the address is in use or cannot be bound.
    """
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):  # werkzeug prints its own lines and exits when the port is busy
            server = make_server(host, port, app.server, threaded=True)
    except (OSError, SystemExit) as err:
        why = said.getvalue().strip().splitlines()[0] if said.getvalue().strip() else str(err)
        raise ServeError(f"cannot listen on {host}:{port} ({why}); pick another --port or --host") from err
    address, bound = server.server_address[:2]
    server.app = HostCheck(app.server, host, address, bound)  # the port bound (port 0 picks one)
    return ViewerServer(server)
