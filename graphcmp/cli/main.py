"""Entry point: subcommand dispatch, the exit-code contract, and one-line errors for bad input.

Exit codes: 0 all pass; 1 divergence or invalid values found (as ``diff`` does); 2 bad input or usage
(`GraphcmpError`, one line on stderr); anything else is a bug and keeps its traceback.

Command modules import the core's heavier parts (comparison, report, exporters) inside their
handlers: start-up stays short, and `graphcmp compare` loads them while its second process
already reads the npu run.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
from collections.abc import Sequence
from typing import Any, NoReturn

from graphcmp._version import __version__
from graphcmp.cli import build, compare, consistency, demo, diverge, export, info, serve
from graphcmp.core.errors import GraphcmpError, one_line

__all__ = ["EXIT_CODES", "main", "run"]

COMMANDS = (build, compare, info, diverge, consistency, export, serve, demo)

EXIT_CODES = """exit codes:
  0  done; for a comparison: the runs agree
  1  the runs differ, or too little was compared to say (inconclusive)
  2  bad input or usage (one line on stderr naming the file or option)"""
"""The exit-code contract, shown at the end of every command's --help."""

_MARKUP = re.compile(r"``([^`]+)``|`([^`]+)`")


def plain(text: str | None) -> str | None:
    """Help text without the docstrings' reStructuredText markup (````-o````, ```x```): what a terminal shows.

    >>> plain("unless ``-o`` names a `.json` file")
    'unless -o names a .json file'
    """
    return _MARKUP.sub(lambda m: m.group(1) or m.group(2), text) if text else text


class _Parser(argparse.ArgumentParser):
    """argparse with plain help text, the exit codes at the end of every help, and a usage error in one line
    (``graphcmp: error: compare: ...; see graphcmp compare --help``) instead of the whole usage block. Its
    subcommand parsers are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["description"] = plain(kwargs.get("description"))
        kwargs.setdefault("epilog", EXIT_CODES)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)  # the docstrings' paragraphs
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("graphcmp").strip()
        where = f"{command}: " if command else ""
        self.exit(2, f"graphcmp: error: {where}{one_line(message)}; see {self.prog} --help\n")


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
        print(f"graphcmp: error: {one_line(str(err))}", file=sys.stderr)
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
