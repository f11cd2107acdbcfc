"""Options shared by several subcommands, defined once."""

from __future__ import annotations

import argparse

from graphcmp.core.readers.detect import FORMATS

__all__ = ["add_format", "add_json", "add_quiet"]


def add_json(parser: argparse.ArgumentParser, what: str = "the summary") -> None:
    parser.add_argument("--json", action="store_true",
                        help=f"print {what} as one JSON object on stdout (other output goes to stderr)")


def add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=sorted(FORMATS), default=None,
                        help="input format (default: detected from the path)")


def add_quiet(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
