"""graphcmp: find where a model's numerics diverge between an NPU run and its baseline.

The library surface: read runs, compare them, find the first divergence, save and load results.
The command line (`graphcmp ...`) and the web viewer are built on these.
"""

from graphcmp._version import __version__
from graphcmp.core.compare import compare_graphs, compare_paths
from graphcmp.core.distributed.batch import run_batch
from graphcmp.core.divergence import analyze, find_divergence
from graphcmp.core.errors import GraphcmpError
from graphcmp.core.readers import read_graph
from graphcmp.core.report import CompareReport, load_document, load_report, save_report

__all__ = [
    "CompareReport",
    "GraphcmpError",
    "__version__",
    "analyze",
    "compare_graphs",
    "compare_paths",
    "find_divergence",
    "load_document",
    "load_report",
    "read_graph",
    "run_batch",
    "save_report",
]
