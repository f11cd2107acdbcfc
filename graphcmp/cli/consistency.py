"""`graphcmp consistency RUN_ROOT`: check the ranks of one parallel job against each other, no baseline needed.

Values that must be equal on several ranks (replicated tensors of a tensor-parallel group, collective
outputs, both ends of a send/receive, data-parallel parameters) are compared; a rank holding another
value is reported, first disagreement first. Exit 0 when every rank agrees, 1 when one does not or when
nothing could be checked (inconclusive: a single rank), 2 on bad input (a stated layout the dump contradicts).
"""

from __future__ import annotations

import argparse

from graphcmp.cli.batch import add_batch_options
from graphcmp.cli.options import add_json
from graphcmp.cli.output import emit
from graphcmp.cli.render import render_consistency


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("consistency", help="check the ranks of a parallel job against each other",
                            description=__doc__)
    parser.add_argument("root", help="the job's dump root (a step folder of rank folders, or a folder of steps)")
    parser.add_argument("--layout", metavar="SPEC",
                        help="the job's layout, e.g. tp=2,pp=2 (default: detected from its communication calls)")
    parser.add_argument("--show", type=int, default=20, metavar="N", help="disagreements listed per step (default 20)")
    add_batch_options(parser)
    add_json(parser, "every check and disagreement")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from graphcmp.core.distributed.consistency import check_job
    from graphcmp.core.distributed.topology import parse_layout

    spec = parse_layout(args.layout) if args.layout else None
    result = check_job(args.root, spec=spec, workers=args.workers, scheduler=args.scheduler)
    emit(result, render_consistency({**result, "shown": args.show}), args.json)
    return 0 if result["verdict"] == "agree" else 1
