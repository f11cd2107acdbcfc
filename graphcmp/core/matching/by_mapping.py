"""Id mappings: pairs pinned anywhere in the trees by tables of node (or data) names.

Three msprobe/Model Explorer formats name nodes directly, so their pairs are claimed before the
top-down walk, which then descends into each pinned pair:

* cell mapping (msprobe ``-cm``): ``fc1.Dense: fc1.Linear`` pins every call of the npu module
  ``fc1`` of class ``Dense`` (forward, backward, parameter gradients) to the bench call of
  ``fc1.Linear`` with the same call suffix; without a file, every ``Cell.X`` pins to ``Module.X``
  (and the other way round).
* data mapping (msprobe ``-dm``): ``npu full data name: bench full data name``, e.g.
  ``NPU.npu_fusion_attention.4.forward.input.0: Function.attention.4.forward.input.0``, pins the two
  nodes and pairs exactly those tensors (their other tensors pair by equal slot).
* Model Explorer navigation mapping: ``{left id: right id}`` or ``mappingEntries`` with id lists; an
  entry with several ids on a side is a fused group compared on its boundary tensors.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from graphcmp.core.mapping_files import RuleFile
from graphcmp.core.matching.base import Claim, RuleMatcher, SlotMap
from graphcmp.core.matching.by_api import framework_param_renames
from graphcmp.core.matching.ids import PathIndex, module_id
from graphcmp.core.records import DumpGraph, Role

__all__ = ["CellMatcher", "DataMatcher", "ModelExplorerMatcher", "parse_data_name"]

class CellMatcher(RuleMatcher):
    """Pins module calls by ``path.Class`` renames (msprobe cell mapping); see the module docstring.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> from graphcmp.core.matching import match_graphs
    >>> ms = parse_msprobe({"data": {"Cell.fc1.Linear.forward.0": {}}})
    >>> pt = parse_msprobe({"data": {"Module.fc1.Linear.forward.0": {}}})
    >>> match_graphs(ms, pt, [CellMatcher()]).count_by_rule()
    {'root': 1, 'cell-mapping': 1}
    """

    def __init__(self, rules: RuleFile | None = None, name: str | None = None) -> None:
        super().__init__(rules)
        self.name = name or "cell-mapping"
        self.found_npu: set[int] = set()

    def prepare(self, npu: DumpGraph, bench: DumpGraph) -> None:
        self.param_renames = framework_param_renames(npu, bench)

    def pins(self, npu: DumpGraph, bench: DumpGraph) -> Sequence[Claim]:
        bench_paths = PathIndex(bench)
        by_name: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for row in PathIndex(npu).paths:
            parts = module_id(npu.nodes.ids[row]) if row else None
            if parts is not None:
                by_name[f"{parts.path}.{parts.cls}"].append((row, parts.call))
        if self.rules is None:
            targets = [(name, name, -1) for name in by_name]
        else:
            targets = [(e.key, str(e.value), i) for i, e in enumerate(self.entries)]
        claims = []
        for key, value, entry in targets:
            path, _, cls = value.rpartition(".")
            if key in by_name and entry >= 0:
                self.found_npu.add(entry)
            for n, call in by_name.get(key, ()):
                b = bench_paths.find(path, call)
                if b >= 0 and bench.nodes.op[b] == cls and bench.nodes.kind[b] == npu.nodes.kind[n]:
                    claims.append(Claim((n,), (b,), entry))
        return claims

    def renames(self) -> dict[str, dict[str, str]]:
        return self.param_renames

    def problem(self, entry: int) -> str:
        e = self.entries[entry]
        if entry not in self.found_npu:
            return f"the npu run has no module {e.key!r}"
        return f"the bench run has no module {e.value!r} with the same calls"


_DATA = re.compile(r"^(?P<node>.+\.(?:forward|backward)(?:\.\d+)?)\.(?P<role>input|output|parameters)\.(?P<slot>.+)$")
_GRAD = re.compile(r"^(?P<node>.+\.parameters_grad(?:\.\d+)?)\.(?P<slot>[^.]+)$")
_ROLES = {"input": int(Role.INPUT), "output": int(Role.OUTPUT), "parameters": int(Role.PARAM)}


def parse_data_name(name: str) -> tuple[str, int, str] | None:
    """(node id, role, slot) of an msprobe full data name, None when it has no recognisable shape.

    >>> parse_data_name("NPU.npu_fusion_attention.4.forward.input.0")
    ('NPU.npu_fusion_attention.4.forward', 0, '0')
    >>> parse_data_name("Module.fc1.Linear.parameters_grad.weight")
    ('Module.fc1.Linear.parameters_grad', 3, 'weight')
    """
    m = _DATA.match(name)
    if m:
        return m["node"], _ROLES[m["role"]], m["slot"]
    m = _GRAD.match(name)
    if m:
        return m["node"], int(Role.PARAM_GRAD), m["slot"]
    return None


def _node_row(graph: DumpGraph, node_id: str) -> int:
    for candidate in (node_id, f"{node_id}.0"):
        if candidate in graph:
            return graph.row(candidate)
    return -1


class DataMatcher(RuleMatcher):
    """Pins nodes and pairs tensors by full data names (msprobe data mapping).

    Examples
    --------
    >>> from graphcmp.core.mapping_files import RuleEntry, RuleFile
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> from graphcmp.core.matching import match_graphs
    >>> rules = RuleFile("dm.yaml", (RuleEntry("dm.yaml:1", "Functional.relu.0.forward.input.0",
    ...                                        "Torch.relu.0.forward.input.0"),))
    >>> npu = parse_msprobe({"data": {"Functional.relu.0.forward": {}}})
    >>> bench = parse_msprobe({"data": {"Torch.relu.0.forward": {}}})
    >>> match_graphs(npu, bench, [DataMatcher(rules)]).count_by_rule()
    {'root': 1, 'data-mapping': 1}
    """

    def __init__(self, rules: RuleFile, name: str | None = None) -> None:
        super().__init__(rules)
        self.name = name or "data-mapping"
        self.problems: dict[int, str] = {}

    def pins(self, npu: DumpGraph, bench: DumpGraph) -> Sequence[Claim]:
        pairs: dict[tuple[int, int], list[tuple[int, tuple[int, str, int, str]]]] = defaultdict(list)
        self.problems = {}
        for i, entry in enumerate(self.entries):
            found = self._resolve(i, npu, entry.key, "npu"), self._resolve(i, bench, str(entry.value), "bench")
            if found[0] is None or found[1] is None:
                continue
            (n, n_role, n_slot), (b, b_role, b_slot) = found
            pairs[(n, b)].append((i, (n_role, n_slot, b_role, b_slot)))
        claims = []
        for (n, b), items in pairs.items():
            slots = SlotMap(tuple(p for _, p in items))
            claims.extend(Claim((n,), (b,), i, slots) for i, _ in items)
        return claims

    def _resolve(self, entry: int, graph: DumpGraph, name: str, side: str) -> tuple[int, int, str] | None:
        parsed = parse_data_name(name)
        if parsed is None:
            self.problems.setdefault(entry, f"{name!r} is not a full data name "
                                            "('<node id>.input.<i>', '.output.<i>', '.parameters_grad.<name>' ...)")
            return None
        node_id, role, slot = parsed
        row = _node_row(graph, node_id)
        if row < 0:
            self.problems.setdefault(entry, f"the {side} run has no node {node_id!r}")
            return None
        return row, role, slot

    def problem(self, entry: int) -> str:
        return self.problems.get(entry, "its nodes were already matched otherwise")


class ModelExplorerMatcher(RuleMatcher):
    """Pins nodes by Model Explorer's navigation-sync mapping (left = npu, right = bench).

    Examples
    --------
    >>> from graphcmp.core.mapping_files import RuleEntry, RuleFile
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> from graphcmp.core.matching import match_graphs
    >>> rules = RuleFile("me.json", (RuleEntry("me.json:2", "Functional.relu.0.forward",
    ...                                        ("Torch.relu.0.forward", "Torch.abs.0.forward")),))
    >>> npu = parse_msprobe({"data": {"Functional.relu.0.forward": {}}})
    >>> bench = parse_msprobe({"data": {"Torch.relu.0.forward": {}, "Torch.abs.0.forward": {}}})
    >>> table = match_graphs(npu, bench, [ModelExplorerMatcher(rules)])
    >>> len(table.groups), table.count_by_rule()
    (1, {'root': 1, 'me-mapping': 1})
    """

    def __init__(self, rules: RuleFile, name: str | None = None) -> None:
        super().__init__(rules)
        self.name = name or "me-mapping"
        self.problems: dict[int, str] = {}

    def pins(self, npu: DumpGraph, bench: DumpGraph) -> Sequence[Claim]:
        claims, self.problems = [], {}
        for i, entry in enumerate(self.entries):
            npu_ids = tuple(entry.key.split("\n"))
            bench_ids = (entry.value,) if isinstance(entry.value, str) else entry.value
            missing = [f"npu {x!r}" for x in npu_ids if x not in npu] + [
                f"bench {x!r}" for x in bench_ids if x not in bench]
            if missing:
                self.problems[i] = "no such node: " + ", ".join(missing)
                continue
            n_rows = tuple(sorted(npu.row(x) for x in npu_ids))
            b_rows = tuple(sorted(bench.row(x) for x in bench_ids))
            claims.append(Claim(n_rows, b_rows, i))
        return claims

    def problem(self, entry: int) -> str:
        return self.problems.get(entry, "its nodes were already matched otherwise")
