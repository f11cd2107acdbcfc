"""Matching-rule options (``--layer-mapping`` ... ``--matches``), defined once, and their text report."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphcmp.core.matching import ChildMatcher, RuleMatcher

__all__ = ["add_mapping_options", "input_files", "matchers_from_args", "render_rule_report", "rule_specs"]

_OPTIONS = (  # (option dest, rule source)
    ("matches", "manual"),
    ("data_mapping", "data-mapping"),
    ("me_mapping", "me-mapping"),
    ("cell_mapping", "cell-mapping"),
    ("layer_mapping", "layer-mapping"),
    ("api_mapping", "api-mapping"),
    ("op_map", "op-map"),
)


def add_mapping_options(parser: argparse.ArgumentParser) -> None:
    """Add the rule-source options; they apply in the order of docs/matching.md, the first claim wins."""
    group = parser.add_argument_group(
        "matching rules", "for runs whose code differs (renamed modules, other framework, fused ops); "
        "they apply in this order and the first rule to claim a node wins (docs/matching.md). "
        "Put a bare [FILE] option after the two runs, or write it as --layer-mapping=")
    group.add_argument("--matches", metavar="FILE", help="manual matches (a .matches.json sidecar from the viewer)")
    group.add_argument("--data-mapping", metavar="FILE",
                       help="msprobe data mapping: full data name -> full data name (YAML/JSON)")
    group.add_argument("--me-mapping", metavar="FILE",
                       help="Model Explorer mapping JSON: npu node id -> bench node id (or lists: fused ops)")
    group.add_argument("--cell-mapping", nargs="?", const="", metavar="FILE",
                       help="msprobe cell mapping 'fc1.Dense: fc1.Linear'; bare: Cell.X <-> Module.X")
    group.add_argument("--fused", action="store_true",
                       help="fused ops: GE ops to their _datadump_original_op_names, and the leftover API calls of "
                       "matched modules (MindSpore Dense = MatMul + BiasAdd ... vs PyTorch linear)")
    group.add_argument("--layer-mapping", nargs="?", const="", metavar="FILE",
                       help="msprobe layer mapping {NpuClass: {npu_child: bench_child}}; bare: same module paths, "
                       "any class names (cross-framework)")
    group.add_argument("--api-mapping", nargs="?", const="", metavar="FILE",
                       help="API name table or msprobe ms_api/pt_api list with argument positions; "
                       "bare: the built-in MindSpore -> PyTorch table")
    group.add_argument("--op-map", nargs="?", const="", metavar="FILE",
                       help="op-type table between backends (get_op_map style, JSON/YAML/CSV) with parameter "
                       "renames; bare: the built-in PyTorch 1.5 NPU table (Npu* <-> Cudnn*/Thnn*), the default "
                       "for .h5 dumps")


def input_files(args: argparse.Namespace) -> list[str]:
    """Every file a comparison reads besides the runs: thresholds and rule files (what ``-o`` must not name).

    >>> ns = argparse.Namespace(thresholds="t.toml", layer_mapping="", api_mapping="api.yaml", matches=None)
    >>> input_files(ns)
    ['t.toml', 'api.yaml']
    """
    names = [getattr(args, "thresholds", None), *(getattr(args, dest, None) for dest, _ in _OPTIONS)]
    return [name for name in names if name]


def rule_specs(args: argparse.Namespace) -> list[str]:
    """Specs of the rule options given (files made absolute), empty when none is.

    >>> ns = argparse.Namespace(layer_mapping="", api_mapping=None, matches=None, data_mapping=None,
    ...                         me_mapping=None, cell_mapping=None, op_map=None, fused=True)
    >>> rule_specs(ns)
    ['layer-mapping', 'fused-ops', 'fused']
    """
    given = [(source, value) for dest, source in _OPTIONS if (value := getattr(args, dest, None)) is not None]
    specs = []
    if given:
        from graphcmp.core.matching.specs import spec  # lazy: the rule matchers load only when a rule is given

        specs = [spec(source, value or None) for source, value in given]
    if getattr(args, "fused", False):
        specs.extend(("fused-ops", "fused"))
    return specs


def matchers_from_args(args: argparse.Namespace) -> list[ChildMatcher | RuleMatcher] | None:
    """The matchers the options ask for (rules, exact names, ``--fuzzy``), or None when no rule option is given.

    Raises
    ------
    MappingError
        If a rule file is missing or malformed (the message names the file and line).
    """
    specs = rule_specs(args)
    if not specs:
        return None
    specs.append("exact")
    if getattr(args, "fuzzy", True):
        specs.append("fuzzy")
    from graphcmp.core.matching.specs import matchers_from_specs

    return matchers_from_specs(specs)


def render_rule_report(summary: dict[str, Any]) -> str:
    """Text of ``summary["rule_report"]``: rule entries that matched nothing and conflicts ("" if none)."""
    report = summary.get("rule_report") or {}
    lines = [f"rule matched nothing: {line}" for line in report.get("unused", ())]
    lines.extend(f"rule conflict: {line}" for line in report.get("conflicts", ()))
    return "\n".join(lines)
