"""graphcmp: find where a model's numerics diverge between an NPU run and its baseline."""

from graphcmp._version import __version__
from graphcmp.core.errors import GraphcmpError
from graphcmp.core.readers import read_graph

__all__ = ["GraphcmpError", "__version__", "read_graph"]
