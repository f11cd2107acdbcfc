"""`graphcmp serve RESULT`: the browser viewer on a result file, a folder of results, or two dump folders."""

from __future__ import annotations

import argparse
import sys

from graphcmp.cli.kernels import build_reader_later
from graphcmp.core.errors import GraphcmpError


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("serve", help="open the browser viewer on a result", description=__doc__)
    parser.add_argument("paths", nargs="+", metavar="RESULT",
                        help="a file written by compare or build, a folder of step<K>_rank<N>.json results "
                             "(or with an index.json), or two dump folders NPU BENCH")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8050, help="port (default 8050; 0 picks a free one)")
    parser.add_argument("--open", action="store_true", help="open the page in a web browser")
    parser.add_argument("--fuzzy", action=argparse.BooleanOptionalAction, default=True,
                        help="with two dump folders: align shifted call counters, as compare (default on)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    options = {"fuzzy": args.fuzzy} if len(args.paths) == 2 else {}
    if not 0 <= args.port <= 65535:
        raise GraphcmpError(f"--port {args.port}: a port is a number from 0 to 65535")
    return serve(args.paths, host=args.host, port=args.port, open_browser=args.open, **options)


def serve(paths, *, host: str = "127.0.0.1", port: int = 8050, open_browser: bool = False, **options) -> int:
    """Load `paths`, start the viewer and serve until interrupted (Dash is imported only here)."""
    from graphcmp.app import create_app, open_results
    from graphcmp.app.server import start_server

    app = create_app(open_results(paths, **options))
    server = start_server(app, host, port)
    print(f"graphcmp viewer: {server.url}  (Ctrl+C to stop)", file=sys.stderr)
    if len(paths) == 2:  # two dump folders, read and compared
        build_reader_later([str(path) for path in paths], None, quiet=False)
    if open_browser:
        import webbrowser  # only here: with shutil, 3-5 ms before every other command

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("graphcmp: viewer stopped", file=sys.stderr)
    return 0
