"""The parts of msprobe node ids that rule matchers key on: module paths, call suffixes, API names.

``Module.blocks.0.attn.MultiheadAttention.forward.0`` is a module call: prefix ``Module``, path
``blocks.0.attn``, class ``MultiheadAttention``, call ``forward.0``; its parameter gradients are
``Module.<path>.<Class>.parameters_grad[.N]`` (call ``parameters_grad``). MindSpore writes ``Cell``
for ``Module``. ``Functional.linear.3.forward`` is an API call named ``Functional.linear``.
Ids of other shapes (GE op names ...) have no parts: the rule matchers skip them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np

from graphcmp.core.records import DumpGraph, NodeKind

__all__ = ["ModuleId", "PathIndex", "api_name", "join", "module_id", "relative", "unwrapped_path", "wrapper_rows"]

_MODULE = re.compile(r"^(?P<prefix>Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<call>(?:forward|backward)\.\d+)$")
_PARAM_GRAD = re.compile(r"^(?P<prefix>Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.parameters_grad(?:\.\d+)?$")
_API = re.compile(r"^(?P<api>[A-Za-z_]\w*\..+)\.\d+\.(?:forward|backward)$")


@dataclass(frozen=True, slots=True)
class ModuleId:
    """A module call id taken apart."""

    prefix: str
    path: str
    cls: str
    call: str  # "forward.0", "backward.1" or "parameters_grad"


@cache
def module_id(node_id: str) -> ModuleId | None:
    """The parts of a module call or parameter-gradient id, None for other ids.

    >>> module_id("Cell.layers.0.ln1.LayerNorm.parameters_grad.0")
    ModuleId(prefix='Cell', path='layers.0.ln1', cls='LayerNorm', call='parameters_grad')
    >>> module_id("Functional.linear.0.forward") is None
    True
    """
    m = _MODULE.match(node_id)
    if m:
        return ModuleId(m["prefix"], m["path"], m["cls"], m["call"])
    m = _PARAM_GRAD.match(node_id)
    if m:
        return ModuleId(m["prefix"], m["path"], m["cls"], "parameters_grad")
    return None


@cache
def api_name(node_id: str) -> str:
    """The API of an API call id without call counter and direction, ``""`` for other ids.

    >>> api_name("Functional.linear.3.forward"), api_name("Primitive.matmul.MatMul.10.backward")
    ('Functional.linear', 'Primitive.matmul.MatMul')
    """
    m = _API.match(node_id)
    return m["api"] if m else ""


_WRAPPER_CLASSES = frozenset({"_OutputTo16", "_OutputTo32"})  # MindSpore amp's casts around a cell or the network
_WRAPPED = "_backbone"  # the attribute a MindSpore wrapper (amp, WithLossCell) holds the wrapped cell in


def unwrapped_path(path: str) -> str:
    """A MindSpore module path without the ``_backbone`` steps of the cells that wrap another.

    >>> unwrapped_path("_backbone.layers.0.ln1._backbone"), unwrapped_path("_backbone")
    ('layers.0.ln1', '')
    """
    return ".".join(part for part in path.split(".") if part != _WRAPPED)


def wrapper_rows(graph: DumpGraph) -> frozenset[int]:
    """The module rows of a MindSpore run that only wrap another cell: amp's ``_OutputTo16``/``_OutputTo32``, and a
    cell at the same unwrapped path as the cell it is in (the network itself under amp O2 or ``WithLossCell``,
    ``Cell._backbone.Net.forward.0``). Matching looks through them to the cells they hold.

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> ids = ["Cell._backbone.Net.forward.0", "Cell._backbone.ln._OutputTo16.forward.0",
    ...        "Cell._backbone.ln._backbone.LayerNorm.forward.0"]
    >>> g = parse_msprobe({"framework": "mindspore", "data": {i: {} for i in ids}},
    ...                   {ids[0]: None, ids[1]: ids[0], ids[2]: ids[1]})
    >>> sorted(g.nodes.ids[r] for r in wrapper_rows(g))
    ['Cell._backbone.Net.forward.0', 'Cell._backbone.ln._OutputTo16.forward.0']
    """
    if graph.info.framework != "mindspore":
        return frozenset()
    kinds, ids, parent = graph.nodes.kind, graph.nodes.ids, graph.nodes.parent
    rows = np.flatnonzero((kinds == NodeKind.MODULE) | (kinds == NodeKind.PARAM_GRAD)).tolist()
    if not any(_WRAPPED in ids[r] or "_OutputTo" in ids[r] for r in rows):
        return frozenset()
    path: dict[int, str] = {0: ""}  # rows are in pre-order: a parent before its children
    wrappers: set[int] = set()
    for row in rows:
        parts = module_id(ids[row])
        if parts is None:
            continue
        up = int(parent[row])
        while up in wrappers:
            up = int(parent[up])
        path[row] = unwrapped_path(parts.path)
        if parts.cls in _WRAPPER_CLASSES or path[row] == path.get(up):
            wrappers.add(row)
    return frozenset(wrappers)


class PathIndex:
    """Module and parameter-gradient rows of one run by (path, call), and each row's path (MindSpore's wrappers
    left out and their ``_backbone`` steps taken out of the paths: `wrapper_rows`).

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> g = parse_msprobe({"data": {"Module.fc.Linear.forward.0": {}}})
    >>> index = PathIndex(g)
    >>> index.path(1), index.find("fc", "forward.0")
    ('fc', 1)
    """

    def __init__(self, graph: DumpGraph) -> None:
        self.paths: dict[int, str] = {0: ""}
        self.rows: dict[tuple[str, str], int] = {}
        kinds = graph.nodes.kind
        ids = graph.nodes.ids
        wrappers = wrapper_rows(graph)
        unwrap = unwrapped_path if wrappers else str
        for row in np.flatnonzero((kinds == NodeKind.MODULE) | (kinds == NodeKind.PARAM_GRAD)).tolist():
            parts = module_id(ids[row])
            if parts is not None and row not in wrappers:
                path = self.paths[row] = unwrap(parts.path)
                self.rows.setdefault((path, parts.call), row)

    def path(self, row: int) -> str | None:
        """Module path of `row` (``""`` for the root), None when the row is not a module call."""
        return self.paths.get(row)

    def find(self, path: str, call: str) -> int:
        """Row of the module call at `path` with `call`, -1 if there is none."""
        return self.rows.get((path, call), -1)


def relative(path: str, base: str) -> str | None:
    """`path` relative to `base` (``""`` when equal), None when `path` is not under `base`.

    >>> relative("blocks.0.attn", "blocks.0"), relative("blocks.0", ""), relative("x", "blocks")
    ('attn', 'blocks.0', None)
    """
    if not base:
        return path
    if path == base:
        return ""
    return path[len(base) + 1:] if path.startswith(base + ".") else None


def join(base: str, rest: str) -> str:
    """Module path `rest` under `base`.

    >>> join("", "a.b"), join("layers.0", "ln1"), join("layers.0", "")
    ('a.b', 'layers.0.ln1', 'layers.0')
    """
    return f"{base}.{rest}" if base and rest else base or rest
