"""`graphcmp diverge cmp.npz`: the first divergent node, why, further candidates, and the advisor's findings."""

from __future__ import annotations

import argparse

from graphcmp.cli.options import add_json
from graphcmp.cli.output import emit
from graphcmp.cli.render import render_analysis, render_job_analysis, render_outcome
from graphcmp.core.errors import DumpFormatError


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("diverge", help="find the first divergent node of a comparison", description=__doc__)
    parser.add_argument("result", help="a file written by graphcmp compare, or a results folder of a job")
    add_json(parser, "the analysis")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from graphcmp.core.compare import load_document
    from graphcmp.core.distributed.batch import is_batch_result, load_index
    from graphcmp.core.outcome import job_outcome, report_outcome
    from graphcmp.core.report import CompareReport

    if is_batch_result(args.result):
        index = load_index(args.result)
        analysis, outcome = index["analysis"], job_outcome(index)
        emit({**analysis, "verdict": outcome.verdict, "outcome": outcome.to_dict()},
             render_job_analysis(analysis) + "\n" + render_outcome(outcome.to_dict()), args.json)
        return outcome.exit_code
    report = load_document(args.result)
    if not isinstance(report, CompareReport):
        raise DumpFormatError(f"{args.result}: holds one run (graphcmp build); diverge needs a comparison")
    analysis, outcome = report.analysis(), report_outcome(report)
    emit({**analysis.to_dict(), "verdict": outcome.verdict, "outcome": outcome.to_dict()},
         render_analysis(analysis, outcome.to_dict()), args.json)
    return outcome.exit_code
