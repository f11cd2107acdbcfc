"""The fusion rule of an Ascend model: which original (framework) tensor each GE op's inputs and outputs stand for.

The rule is the GE graph the model ran (``atc --json`` or ``ge_proto_*.txt``, read by `graphcmp.core.readers.ge`).
An op's output ``k`` stands for the tensor its output desc names in ``_datadump_origin_name`` /
``_datadump_origin_output_index`` (output ``k`` of the op itself when it names none: a ``Data`` op is its own
origin); its input ``k`` stands for what the op producing it stands for, looking through the ``Cast`` and
``TransData`` ops GE inserts (they change dtype or layout, not the tensor). This is how msaccucmp's ``-f``
pairs an NPU dump with the framework's golden tensors (``fusion_rule_parser.py``, ``compare_fusion_op.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.inputs import read_input
from graphcmp.core.readers.ge import GeOp, decode_ge
from graphcmp.core.readers.ge import sniff as ge_sniff

__all__ = ["LAYOUT_OPS", "FusionRule", "find_fusion_rule", "fusion_rule_from_ops", "read_fusion_rule"]

LAYOUT_OPS = frozenset({"Cast", "TransData"})
"""Ops that convert a tensor's dtype or layout: an input is traced through them to the tensor they convert."""

_MAX_RULE_SEARCH = 40


@dataclass(frozen=True, slots=True)
class FusionRule:
    """The ops of a GE graph by name, with what their tensors stand for.

    ``ops`` maps an op name to its `GeOp` (main graph and subgraphs together; a later op of the same name is
    ignored); ``order`` lists the names in the graph's order and ``positions`` each name's place in it (msaccucmp's
    ``Index``).
    """

    source: str
    ops: Mapping[str, GeOp]
    order: tuple[str, ...]
    positions: Mapping[str, int]

    def output_origin(self, op: str, k: int) -> tuple[str, int]:
        """(original tensor's op, its output index) that output `k` of `op` stands for.

        >>> rule = fusion_rule_from_ops([GeOp("x", "Data"),
        ...     GeOp("conv_bn", "Conv2D", ("x:0",), attrs=(("origin_output.0", "bn:0"),))])
        >>> rule.output_origin("conv_bn", 0), rule.output_origin("x", 0)
        (('bn', 0), ('x', 0))
        """
        found = self.ops.get(op)
        if found is not None:
            text = dict(found.attrs).get(f"origin_output.{k}", "")
            if text:
                name, sep, index = text.rpartition(":")
                if sep and index.lstrip("-").isdigit():
                    return name, int(index) if int(index) >= 0 else k
                return text, k
        return op, k

    def input_origin(self, op: str, k: int) -> tuple[str, int] | None:
        """What data input `k` of `op` stands for: the producer's output origin, through Cast and TransData;
        None when the input is unconnected, a control edge, or names an op not in the rule.

        >>> rule = fusion_rule_from_ops([GeOp("x", "Data"), GeOp("cast", "Cast", ("x:0",)),
        ...     GeOp("relu", "Relu", ("cast:0",))])
        >>> rule.input_origin("relu", 0)
        ('x', 0)
        """
        seen = set()
        current = self.ops.get(op)
        index = k
        while current is not None:
            inputs = [i for i in current.inputs if i and not i.endswith(":-1")]
            if index >= len(inputs):
                return None
            src, _, out = inputs[index].rpartition(":")
            producer = self.ops.get(src)
            if producer is None or not out.isdigit():
                return None
            if producer.type in LAYOUT_OPS and src not in seen:
                seen.add(src)
                current, index = producer, 0
                continue
            return self.output_origin(src, int(out))
        return None

    def data_inputs(self, op: str) -> int:
        """How many data inputs `op` has in the rule (0 for an op not in it)."""
        found = self.ops.get(op)
        return sum(1 for i in found.inputs if i and not i.endswith(":-1")) if found else 0

    def outputs(self, op: str) -> int:
        """How many outputs `op` has in the rule (its output descs)."""
        found = self.ops.get(op)
        return len(found.output_desc) if found else 0

    def original_names(self, op: str) -> tuple[str, ...]:
        """The original op names GE recorded on `op` (``_datadump_original_op_names``)."""
        found = self.ops.get(op)
        text = dict(found.attrs).get("original_op_names", "") if found else ""
        return tuple(n for n in text.split(",") if n)


def fusion_rule_from_ops(ops: list[GeOp], source: str = "<memory>") -> FusionRule:
    """A rule over `ops` (as the GE reader decodes them)."""
    by_name: dict[str, GeOp] = {}
    for op in ops:
        by_name.setdefault(op.name, op)
    return FusionRule(source, by_name, tuple(by_name), {name: k for k, name in enumerate(by_name)})


def read_fusion_rule(path: str | os.PathLike[str]) -> FusionRule:
    """Read a GE graph file (``atc --json``, ``ge_proto`` text or binary) as a fusion rule.

    Raises
    ------
    DumpFormatError
        If the file is missing or not a GE graph.
    """
    file = Path(path)
    if not file.is_file():
        raise DumpFormatError(f"{file}: no such file" if not file.exists() else f"{file}: expected a GE graph file")
    try:
        data = read_input(file)
    except OSError as err:
        raise DumpFormatError(f"{file}: cannot read ({err})") from err
    graphs, _ = decode_ge(data, source=str(file))
    ops = [op for graph in graphs for op in graph.ops]
    if not ops:
        raise DumpFormatError(f"{file}: the GE graph has no ops; expected the model's graph as the fusion rule")
    return fusion_rule_from_ops(ops, str(file))


def find_fusion_rule(dump: str | os.PathLike[str]) -> Path | None:
    """A GE graph file beside a dump: in its folder or one of the five above it (``*.json``, ``ge_proto_*.txt``,
    first in name order); None when there is none."""
    folder = Path(dump).resolve()
    looked = 0
    for level in (folder, *list(folder.parents)[:5]):
        try:
            names = sorted(p for p in level.iterdir() if p.is_file() and (
                p.suffix == ".json" or (p.name.startswith("ge_proto") and p.suffix == ".txt")))
        except OSError:
            continue
        for candidate in names:
            looked += 1
            if looked > _MAX_RULE_SEARCH:
                return None
            if ge_sniff(candidate):
                return candidate
    return None
