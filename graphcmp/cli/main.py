"""Entry point: subcommand dispatch, the exit-code contract, and one-line errors for bad input.

Exit codes: 0 all pass; 1 divergence or invalid values found (as ``diff`` does); 2 bad input
(`GraphcmpError`, one line on stderr); anything else is a bug and keeps its traceback.

Command modules import the core's heavier parts (comparison, report, exporters) inside their
handlers: start-up stays short, and `graphcmp compare` loads them while its second process
already reads the bench run.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Sequence

from graphcmp._version import __version__
from graphcmp.cli import build, compare, consistency, demo, diverge, export, info, serve
from graphcmp.core.errors import GraphcmpError

__all__ = ["main", "run"]

COMMANDS = (build, compare, info, diverge, consistency, export, serve, demo)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphcmp",
        description="Find where a model's numerics diverge between an NPU run and its baseline.",
    )
    parser.add_argument("--version", action="version", version=f"graphcmp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand and return its exit code."""
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except GraphcmpError as err:
        print(f"graphcmp: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("graphcmp: interrupted", file=sys.stderr)
        return 130


def run() -> None:
    """Console-script entry point.

    With no other thread left, the process ends without the interpreter's teardown, which frees a
    large comparison object by object (about 0.1 s for 40k nodes) for nothing.
    """
    code = main()
    if threading.active_count() > 1:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe (graphcmp ... | head): nothing left to say
        pass
    os._exit(code)
