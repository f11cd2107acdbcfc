"""The exception family: bad input (``GraphcmpError``) versus graphcmp bugs (``InternalError``).

A ``GraphcmpError`` message is one line that names the file, where in it, what was
expected and, where it helps, what to do. The CLI prints it and exits with code 2.
``InternalError`` is deliberately *not* a ``GraphcmpError``: its traceback is kept.
"""

from __future__ import annotations

__all__ = [
    "DumpFormatError",
    "GraphCycleError",
    "GraphcmpError",
    "InternalError",
    "MappingError",
    "OutputError",
    "RuleError",
    "one_line",
]


class GraphcmpError(Exception):
    """Root of every error caused by bad input (files, options, rules)."""


class DumpFormatError(GraphcmpError):
    """A dump or graph file is missing, unreadable, truncated or not of the expected shape."""


class MappingError(GraphcmpError):
    """A mapping or matching rule names unknown nodes or claims a node twice."""


class RuleError(GraphcmpError):
    """A tolerance or threshold specification cannot be parsed."""


class OutputError(GraphcmpError):
    """An output file or folder cannot be written."""


class GraphCycleError(GraphcmpError):
    """A hierarchy that must be a tree contains a cycle."""


class InternalError(Exception):
    """A graphcmp bug: an invariant that should always hold did not."""


def one_line(text: str) -> str:
    r"""`text` with every character that is not printable (newlines, tabs, terminal controls, lone surrogates)
    written as its escape: a message quoting a damaged file's bytes stays one line.

    >>> one_line("a\nb\x1b[2J\udcff")
    'a\\nb\\x1b[2J\\udcff'
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)
