"""graphcmp: find where a model's numerics diverge between an NPU run and its baseline.

The library surface: read runs, compare them, find the first divergence, save and load results.
The command line (`graphcmp ...`) and the web viewer are built on these. Names load on first use
(PEP 562), so `graphcmp --help` and each subcommand import only what they need.
"""

from __future__ import annotations

import importlib
from typing import Any

from graphcmp._version import __version__

_SURFACE = {
    "CompareReport": "graphcmp.core.report",
    "GraphcmpError": "graphcmp.core.errors",
    "analyze": "graphcmp.core.divergence",
    "compare_graphs": "graphcmp.core.compare",
    "compare_paths": "graphcmp.core.compare",
    "find_divergence": "graphcmp.core.divergence",
    "load_document": "graphcmp.core.compare",
    "load_report": "graphcmp.core.report",
    "read_graph": "graphcmp.core.readers",
    "run_batch": "graphcmp.core.distributed.batch",
    "save_report": "graphcmp.core.report",
}

__all__ = ["__version__", *sorted(_SURFACE)]


def __getattr__(name: str) -> Any:
    if name in _SURFACE:
        return getattr(importlib.import_module(_SURFACE[name]), name)
    raise AttributeError(f"module 'graphcmp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
