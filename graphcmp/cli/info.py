"""`graphcmp info FILE`: counts of a comparison result (or of a built run)."""

from __future__ import annotations

import argparse

from graphcmp.cli.options import add_json
from graphcmp.cli.output import emit
from graphcmp.cli.render import render_graph_summary, render_summary
from graphcmp.core.report import CompareReport, graph_summary, load_document


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("info", help="print the counts of a result file", description=__doc__)
    parser.add_argument("file", help="a file written by graphcmp compare or graphcmp build")
    add_json(parser, "the counts")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    document = load_document(args.file)
    if isinstance(document, CompareReport):
        summary = document.summary()
        emit(summary, render_summary(summary), args.json)
    else:
        summary = graph_summary(document)
        emit(summary, render_graph_summary(summary), args.json)
    return 0
