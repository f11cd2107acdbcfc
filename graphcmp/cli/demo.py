"""`graphcmp demo`: compare the bundled sample pair and print what was found.

Exits as `compare` does: 1, since the sample runs differ (0 agree, 1 differ or inconclusive, 2 bad input).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graphcmp.cli.kernels import build_reader_later
from graphcmp.cli.output import emit
from graphcmp.cli.render import render_analysis, render_outcome, render_summary
from graphcmp.cli.serve import serve  # Dash itself loads only when the viewer is started
from graphcmp.core.errors import DumpFormatError
from graphcmp.samples import sample_pair


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="compare the bundled sample dumps and print the summary",
                            description=__doc__)
    parser.add_argument("-o", "--output", help="where to write the result (default: a temporary folder)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--serve", action="store_true",
                        help="then open the browser viewer on the result (serves until Ctrl+C)")
    parser.add_argument("--port", type=int, default=8050, help="viewer port with --serve (default 8050)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from graphcmp.core.compare import compare_paths
    from graphcmp.core.report import save_report

    npu, bench = sample_pair()
    if not npu.is_dir():
        raise DumpFormatError(f"{npu}: bundled samples not found; reinstall graphcmp")
    import tempfile  # only the demo: 5-8 ms before every other command

    output = Path(args.output) if args.output else Path(tempfile.mkdtemp(prefix="graphcmp-demo-")) / "cmp.npz"
    from graphcmp.core.outcome import report_outcome

    report = compare_paths(npu, bench)
    save_report(report, output)
    analysis = report.analysis()
    outcome = report_outcome(report)
    summary = {**report.summary(), "output": str(output), "analysis": analysis.to_dict(),
               "verdict": outcome.verdict, "outcome": outcome.to_dict()}
    text = "\n".join([
        "graphcmp demo: a 3-layer transformer whose encoder.layers.1.linear1 weight was perturbed on the npu side",
        render_summary(summary),
        render_analysis(analysis),
        render_outcome(summary["outcome"]),
        f"written: {output}",
    ])
    emit(summary, text, args.json)
    build_reader_later([str(npu), str(bench)], "msprobe", quiet=args.json)
    if args.serve or (not args.json and _ask("Open the browser viewer on this result? [y/N] ")):
        serve([output], port=args.port, open_browser=True)
    elif not args.json:
        print(f"view it in a browser: graphcmp serve {output}", file=sys.stderr)
    return outcome.exit_code


def _ask(question: str) -> bool:
    """Ask on a terminal only: no prompt when stdin or stdout is not a TTY (CI, pipes)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        return False
