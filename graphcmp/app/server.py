"""Running the viewer: a threaded WSGI server on a host and port, stoppable from another thread."""

from __future__ import annotations

import contextlib
import io
import logging
import threading

from dash import Dash
from werkzeug.serving import BaseWSGIServer, make_server

from graphcmp.core.errors import GraphcmpError

__all__ = ["ServeError", "ViewerServer", "start_server"]


class ServeError(GraphcmpError):
    """The viewer cannot listen on the requested host and port."""


class ViewerServer:
    """A viewer listening on (host, port); `url` is where to point a browser."""

    def __init__(self, server: BaseWSGIServer) -> None:
        self._server = server
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/"

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
    """Bind `app` to (host, port); port 0 picks a free one.

    Raises
    ------
    ServeError
        If the address is in use or cannot be bound.
    """
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):  # werkzeug prints its own lines and exits when the port is busy
            return ViewerServer(make_server(host, port, app.server, threaded=True))
    except (OSError, SystemExit) as err:
        why = said.getvalue().strip().splitlines()[0] if said.getvalue().strip() else str(err)
        raise ServeError(f"cannot listen on {host}:{port} ({why}); pick another --port or --host") from err
