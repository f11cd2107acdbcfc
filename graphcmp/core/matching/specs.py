"""Rule sources by name: ``"layer-mapping=/abs/mapping.yaml"`` <-> a matcher, in the documented order.

A spec is ``SOURCE`` or ``SOURCE=FILE``. It is also the matcher's name, so a report's
``options.matchers`` (and ``summary()["matched_by_rule"]``) say which rules and files made the
matches, and `matchers_from_specs` can rebuild them (to re-apply manual matches, for instance).
``msprobe=FILE`` is msprobe's own matches in a compare `.vis`/`.vis.db` (`vis_source` names the graph).
`RULE_ORDER` is the order in which sources apply; the first claim on a node wins (docs/matching.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from graphcmp.core.errors import MappingError
from graphcmp.core.mapping_files import (
    load_api_mapping,
    load_builtin_op_table,
    load_cell_mapping,
    load_data_mapping,
    load_layer_mapping,
    load_me_mapping,
    load_op_table,
)
from graphcmp.core.matching.base import ChildMatcher, RuleMatcher
from graphcmp.core.matching.by_api import ApiMatcher, is_cross_framework
from graphcmp.core.matching.by_layer import FRAMEWORK_LAYERS, LayerMatcher, framework_layers
from graphcmp.core.matching.by_mapping import CellMatcher, DataMatcher, ModelExplorerMatcher
from graphcmp.core.matching.by_name import ExactMatcher
from graphcmp.core.matching.by_op_table import OpTableMatcher
from graphcmp.core.matching.decomposition import DecompositionMatcher
from graphcmp.core.matching.fused_ops import FusedOpsMatcher
from graphcmp.core.matching.fuzzy import FuzzyMatcher
from graphcmp.core.matching.given import GivenMatcher, GivenMatches
from graphcmp.core.matching.manual import ManualMatcher, load_manual_matches
from graphcmp.core.readers.vis import read_vis_links
from graphcmp.core.records import DumpGraph

__all__ = ["FILE_REQUIRED", "RULE_ORDER", "matcher_from_spec", "matchers_from_specs", "spec", "with_framework_layers"]

RULE_ORDER = ("manual", "msprobe", "data-mapping", "me-mapping", "cell-mapping", "fused-ops",
              "layer-mapping", "api-mapping", "op-map", FRAMEWORK_LAYERS, "exact", "fuzzy", "fused")
"""Rule sources in the order they apply (pins of the first six, then per matched parent pair)."""

FILE_REQUIRED = ("manual", "msprobe", "data-mapping", "me-mapping")
"""Sources that need a file (the others have a default: no entries or a built-in table)."""

_NO_FILE = ("exact", "fuzzy", "fused", "fused-ops", FRAMEWORK_LAYERS)


def spec(source: str, path: str | os.PathLike[str] | None = None) -> str:
    """The spec of `source` with `path` made absolute.

    >>> spec("exact"), spec("layer-mapping", "/data/m.yaml")
    ('exact', 'layer-mapping=/data/m.yaml')
    """
    return f"{source}={Path(path).resolve()}" if path else source


def _file_matcher(source: str, path: str, name: str) -> ChildMatcher | RuleMatcher:
    if source == "layer-mapping":
        return LayerMatcher(load_layer_mapping(path), name)
    if source == "cell-mapping":
        return CellMatcher(load_cell_mapping(path), name)
    if source == "api-mapping":
        return ApiMatcher(load_api_mapping(path), name)
    if source == "data-mapping":
        return DataMatcher(load_data_mapping(path), name)
    if source == "me-mapping":
        return ModelExplorerMatcher(load_me_mapping(path), name)
    if source == "op-map":
        return OpTableMatcher(*load_op_table(path), name)
    if source == "msprobe":
        return GivenMatcher(GivenMatches(read_vis_links(path), name))
    return ManualMatcher(load_manual_matches(path), name, source=path)


_DEFAULTS: dict[str, Callable[[], ChildMatcher | RuleMatcher]] = {
    "layer-mapping": LayerMatcher, "cell-mapping": CellMatcher, "api-mapping": ApiMatcher,
    "op-map": lambda: OpTableMatcher(*load_builtin_op_table()),
    "exact": ExactMatcher, "fuzzy": FuzzyMatcher, "fused": DecompositionMatcher, "fused-ops": FusedOpsMatcher,
    FRAMEWORK_LAYERS: framework_layers,
}


def matcher_from_spec(text: str) -> ChildMatcher | RuleMatcher:
    """The matcher a spec names, its file read.

    Raises
    ------
    MappingError
        If the source is unknown, needs a file it was not given (or takes none), or the file is bad.

    Examples
    --------
    >>> matcher_from_spec("api-mapping").name
    'api-mapping'
    >>> matcher_from_spec("typo-mapping")
    Traceback (most recent call last):
    ...
    graphcmp.core.errors.MappingError: unknown rule source 'typo-mapping' (known: manual, msprobe, \
data-mapping, me-mapping, cell-mapping, fused-ops, layer-mapping, api-mapping, op-map, framework-layers, exact, fuzzy, \
fused)
    """
    source, _, path = text.partition("=")
    if source not in RULE_ORDER:
        raise MappingError(f"unknown rule source {source!r} (known: {', '.join(RULE_ORDER)})")
    if path and source in _NO_FILE:
        raise MappingError(f"rule source {source!r} takes no file (got {path!r})")
    if not path and source in FILE_REQUIRED:
        raise MappingError(f"rule source {source!r} needs a file: {source}=FILE")
    if path:
        return _file_matcher(source, path, text)
    return _DEFAULTS[source]()


def matchers_from_specs(specs: Sequence[str]) -> list[ChildMatcher | RuleMatcher]:
    """Matchers for `specs`, sorted into `RULE_ORDER` (specs of one source keep their order).

    >>> [m.name for m in matchers_from_specs(["fuzzy", "exact", "layer-mapping"])]
    ['layer-mapping', 'exact', 'fuzzy']
    """
    ordered = sorted(specs, key=lambda s: RULE_ORDER.index(s.partition("=")[0]) if s.partition("=")[0]
                     in RULE_ORDER else -1)
    fuzzy = "fuzzy" in ordered  # with fuzzy names, exact names keep execution order too (see ExactMatcher)
    return [ExactMatcher(ordered=True) if s == "exact" and fuzzy else matcher_from_spec(s) for s in ordered]


_CROSS_FRAMEWORK_RULES = ("layer-mapping", "api-mapping")  # cell-mapping keeps its own meaning: class names kept


def with_framework_layers(matchers: Sequence[ChildMatcher | RuleMatcher], npu: DumpGraph,
                          bench: DumpGraph) -> list[ChildMatcher | RuleMatcher]:
    """`matchers` with the frameworks' own layers (`framework_layers`) in their `RULE_ORDER` place, for a MindSpore
    run against a PyTorch run compared with a cross-framework rule; else `matchers` as they are.

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> ms = parse_msprobe({"framework": "mindspore", "data": {}})
    >>> pt = parse_msprobe({"framework": "pytorch", "data": {}})
    >>> [m.name for m in with_framework_layers(matchers_from_specs(["layer-mapping", "exact"]), ms, pt)]
    ['layer-mapping', 'framework-layers', 'exact']
    """
    names = [m.name.partition("=")[0] for m in matchers]
    if not is_cross_framework(npu, bench) or FRAMEWORK_LAYERS in names or not set(names) & set(_CROSS_FRAMEWORK_RULES):
        return list(matchers)
    place = RULE_ORDER.index(FRAMEWORK_LAYERS)
    at = next((k for k, name in enumerate(names) if name in RULE_ORDER and RULE_ORDER.index(name) > place),
              len(names))
    return [*matchers[:at], framework_layers(), *matchers[at:]]
