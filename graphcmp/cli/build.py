"""`graphcmp build DUMP -o run.json`: one run as a hierarchy."""

from __future__ import annotations

import argparse

from graphcmp._version import __version__
from graphcmp.cli.kernels import build_reader_later
from graphcmp.cli.options import add_format, add_json, add_quiet
from graphcmp.cli.output import emit
from graphcmp.cli.progress import stages
from graphcmp.cli.render import render_graph_summary
from graphcmp.core.outputs import checked_output
from graphcmp.core.readers import read_graph


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("build", help="read one run into a hierarchy and write it as JSON",
                            description=__doc__)
    parser.add_argument("dump", help="run folder or graph file (an msprobe rank folder holds dump.json)")
    parser.add_argument("-o", "--output", default="run.json", help="output JSON (default: run.json)")
    add_format(parser)
    add_json(parser)
    add_quiet(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from graphcmp.core.report import graph_summary, save_graph

    checked_output(args.output, [args.dump])
    with stages(2, "build", quiet=args.quiet) as bar:
        bar.set_postfix_str("reading")
        graph = read_graph(args.dump, args.format)
        bar.update()
        bar.set_postfix_str("writing")
        save_graph(graph, args.output, __version__)
        bar.update()
    summary = {**graph_summary(graph), "output": args.output}
    emit(summary, render_graph_summary(summary) + f"\nwritten: {args.output}", args.json)
    build_reader_later([args.dump], args.format, quiet=args.quiet)
    return 0
