"""`graphcmp info FILE`: counts of a comparison result (or of a built run)."""

from __future__ import annotations

import argparse

from graphcmp.cli.options import add_json
from graphcmp.cli.output import emit
from graphcmp.cli.render import render_batch, render_graph_summary, render_outcome, render_summary


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("info", help="print the counts of a result file", description=__doc__)
    parser.add_argument("file", help="a file written by graphcmp compare or graphcmp build, or a results folder")
    add_json(parser, "the counts")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from graphcmp.core.compare import load_document
    from graphcmp.core.distributed.batch import batch_summary, is_batch_result, load_index
    from graphcmp.core.outcome import job_outcome
    from graphcmp.core.report import CompareReport, graph_summary

    if is_batch_result(args.file):
        index = load_index(args.file)
        outcome = job_outcome(index).to_dict()
        summary = {**batch_summary(index), "verdict": outcome["verdict"], "outcome": outcome}
        emit(summary, render_batch(summary) + "\n" + render_outcome(outcome), args.json)
        return 0
    document = load_document(args.file)
    if isinstance(document, CompareReport):
        summary = document.summary()
        summary = {**summary, "verdict": summary["outcome"]["verdict"]}
        emit(summary, render_summary(summary) + "\n" + render_outcome(summary["outcome"]), args.json)
    else:
        summary = graph_summary(document)
        emit(summary, render_graph_summary(summary), args.json)
    return 0
