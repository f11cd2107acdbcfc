"""Readers: one module per input format, each with `sniff`, a pure `parse_*` and a file-reading `read_*`."""

from graphcmp.core.readers.detect import read_graph

__all__ = ["read_graph"]
