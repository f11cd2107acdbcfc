"""Writing a comparison (or one run) as msprobe's JSON `.vis`, the file tb-graph-ascend 1.x-8.1.x opens.

The node records are made as text a block of nodes at a time from the columns
(`graphcmp.core.export.vis_records`), so a large graph never exists as text in memory;
`graphcmp.core.export.vis_db` writes the same records as SQLite rows. A node's
``precision_index`` is graphcmp's verdict (pass 0, warning 0.5, error 0.75, an origin 1) and `VIS_COLORS` is the
legend that tells the viewer so; the per-tensor ``Max diff`` ... ``NormRelativeErr`` fields carry
graphcmp's metrics (see docs/interop.md for how they differ from msprobe's).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from graphcmp.core.export.vis_records import PRECISION_INDEX, VisBlock, VisSide, VisTexts, vis_sides, vis_task
from graphcmp.core.outputs import atomic_output
from graphcmp.core.readers.vis import ATTR_OVERFLOW
from graphcmp.core.records import DumpGraph
from graphcmp.core.report import CompareReport

__all__ = [
    "PRECISION_INDEX",
    "VIS_COLORS",
    "VIS_TOOL_TIP",
    "ExportResult",
    "VisSide",
    "iter_vis_nodes",
    "vis_sides",
    "vis_task",
    "write_vis",
]

VIS_COLORS: dict[str, dict[str, Any]] = {
    "#FFFCF3": {"value": [0, 0.3], "description": "graphcmp verdict: pass", "accuracy_level": "pass"},
    "#FFDC7F": {"value": [0.3, 0.6], "description": "graphcmp verdict: warning", "accuracy_level": "warning"},
    "#FF704D": {"value": [0.6, 0.9], "description": "graphcmp verdict: error (an origin before it explains it)",
                "accuracy_level": "error"},
    "#B0171F": {"value": [0.9, 1], "description": "origin of divergence: beyond the noise its precision and inputs "
                "allow (graphcmp diverge says why)", "accuracy_level": "origin"},
    "#C7C7C7": {"value": [], "description": "no counterpart in the other run", "accuracy_level": "unmatched node"},
}
"""Colour legend written into every file: msprobe 26.x's colours for graphcmp's verdicts."""

VIS_TOOL_TIP = {
    "Max diff": "npu Max - bench Max", "Min diff": "npu Min - bench Min", "Mean diff": "npu Mean - bench Mean",
    "L2norm diff": "npu Norm - bench Norm",
    "MaxRelativeErr": "graphcmp relative error of Max: |npu - bench| / max(|bench|, 1e-3 x the tensor's largest "
                      "magnitude), differences under 1e-7 count as zero",
    "Result": "graphcmp verdict of this tensor pair",
}
"""Tool tips of the per-tensor comparison fields."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What an export wrote."""

    paths: tuple[str, ...]
    nodes: int  # node records written (both sides, every graph)
    bytes: int
    seconds: float


_RECORD = (b',"%s":{"id":"%s","node_type":%s,"output_data":%s,"input_data":%s,"upnode":"%s","subnodes":%s,'
           b'"matched_node_link":%s,"suggestions":{},"stack_info":%s,"micro_step_id":%s,"data":%s%s}')


def vis_records(texts: VisTexts, block: VisBlock) -> list[bytes]:
    """``,"<id>":{...}`` of every node of `block`: its record as `write_vis` writes it, after a comma."""
    lo, hi = block.start, block.stop
    ids = texts.escaped_ids[lo:hi]
    return [_RECORD % fields for fields in zip(
        ids, ids, texts.node_types[lo:hi], block.outputs, block.inputs, texts.upnodes[lo:hi], block.subnodes,
        block.links, texts.stacks[lo:hi], texts.micro_steps[lo:hi], texts.data[lo:hi], _distributed(texts, lo, hi))]


def _distributed(texts: VisTexts, lo: int, hi: int) -> list[bytes]:
    """msprobe's ``matched_distributed`` field, last in a record, of the nodes read from a file that has it."""
    if texts.distributed is None:
        return [b""] * (hi - lo)
    return [b"" if value is None else b',"matched_distributed":' + orjson.dumps(orjson.loads(value))
            for value in texts.distributed[lo:hi]]


def iter_vis_nodes(side: VisSide) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row, node record) of every node of one side, in execution order, one at a time.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...      "Mean": 0.5, "Norm": 1.0}
    >>> g = parse_msprobe({"data": {"Functional.relu.0.forward": {"input_args": [t], "output": [t]}}})
    >>> [(row, node["id"], node["upnode"]) for row, node in iter_vis_nodes(vis_sides(g)[0])]
    [(0, 'DefaultModel', 'None'), (1, 'Functional.relu.0.forward', 'DefaultModel')]
    """
    texts = VisTexts(side)
    for block in texts.blocks():
        for row, record in enumerate(vis_records(texts, block), block.start):
            yield row, orjson.loads(b"{" + record[1:] + b"}").popitem()[1]


def write_vis(document: CompareReport | DumpGraph, path: str | os.PathLike[str]) -> ExportResult:
    """Write a comparison (NPU and Bench graphs) or one run as a tb-graph-ascend `.vis` JSON file.

    Nodes are made and written a block at a time.

    Raises
    ------
    OutputError
        If the file cannot be written.
    """
    start = time.perf_counter()
    sides = vis_sides(document)
    count = 0
    with atomic_output(path) as f:
        f.write(b"{")
        for i, side in enumerate(sides):
            if len(sides) > 1:
                f.write(b"," if i else b"")
                f.write(orjson.dumps(side.name) + b":{")
            count += _write_side(f, side)
            f.write(b"}" if len(sides) > 1 else b"")
        f.write(b"," + orjson.dumps(_tail(document, sides[0].graph))[1:])
    size = Path(path).stat().st_size
    return ExportResult((str(path),), count, size, time.perf_counter() - start)


def _write_side(f: BinaryIO, side: VisSide) -> int:
    f.write(b'"root":' + orjson.dumps(side.graph.root) + b',"dump_data_dir":null,"node":{')
    texts = VisTexts(side)
    for block in texts.blocks():
        records = vis_records(texts, block)
        if not block.start:
            records[0] = records[0][1:]  # the first record: no comma
        f.writelines(records)
    f.write(b"}")
    return len(side.graph)


def _tail(document: CompareReport | DumpGraph, npu: DumpGraph) -> dict[str, Any]:
    """The top-level fields after the graphs (as msprobe orders them)."""
    micro_steps = int(npu.nodes.micro_step.max(initial=0)) + 1
    overflow = bool(npu.nodes.attrs) and any(dict(a).get(ATTR_OVERFLOW) for a in npu.nodes.attrs)
    if not isinstance(document, CompareReport):
        return {"MicroSteps": micro_steps, "OverflowCheck": overflow}
    return {"ToolTip": orjson.dumps(VIS_TOOL_TIP).decode(), "Colors": VIS_COLORS, "MicroSteps": micro_steps,
            "task": vis_task(npu), "OverflowCheck": overflow}

