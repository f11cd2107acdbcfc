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
