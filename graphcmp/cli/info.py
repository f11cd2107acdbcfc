"""`graphcmp info FILE`: counts of a comparison result (or of a built run; of every graph of a `.vis.db`).

Exits as `compare` did on the result: 0 the runs agree, 1 they differ or the comparison is inconclusive, 2 bad
input; a file holding runs only (graphcmp build) exits 0.
"""

from __future__ import annotations

import argparse

from graphcmp.cli.options import add_json
from graphcmp.cli.output import emit
from graphcmp.cli.render import render_batch, render_graph_summary, render_graphs, render_outcome, render_summary


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("info", help="print the counts of a result file", description=__doc__)
    parser.add_argument("file", help="a file written by graphcmp compare or graphcmp build, or a results folder")
    add_json(parser, "the counts")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from graphcmp.core.compare import file_summary
    from graphcmp.core.distributed.batch import batch_summary, is_batch_result, load_index
    from graphcmp.core.outcome import Outcome, job_outcome

    if is_batch_result(args.file):
        index = load_index(args.file)
        job = job_outcome(index)
        outcome = job.to_dict()
        summary = {**batch_summary(index), "verdict": outcome["verdict"], "outcome": outcome}
        emit(summary, render_batch(summary) + "\n" + render_outcome(outcome), args.json)
        return job.exit_code
    summary = file_summary(args.file)
    if "graphs" in summary:
        text = render_graphs(summary)
    elif "outcome" in summary:
        text = render_summary(summary) + "\n" + render_outcome(summary["outcome"])
    else:
        text = render_graph_summary(summary)
    emit(summary, text, args.json)
    recorded = Outcome.from_dict(summary.get("outcome"))
    return recorded.exit_code if recorded is not None else 0  # a built run is no comparison: nothing to answer
