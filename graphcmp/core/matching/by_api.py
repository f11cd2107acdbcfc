"""API mapping: API calls pair by a name table (msprobe ``-am``), optionally with argument positions.

Inside a matched parent pair, an npu call of API ``A`` (``Functional.matmul.2.forward`` is API
``Functional.matmul``) pairs with a bench call of the API the table gives for ``A``, the k-th such
npu call with the k-th such bench call, per direction. Without a file the built-in
MindSpore -> PyTorch table is used (read backwards when the npu run is PyTorch and the bench run
MindSpore). An msprobe mapping with ``ms_args: [0, 1]`` / ``pt_args: [1, 0]`` (and ``outputs``,
``parameters``, ``parameters_grad``) also says which tensors pair; tensors of a listed role that
the entry does not name are not compared.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from graphcmp.core.mapping_files import (
    BUILTIN_MS_TO_PT_API,
    BUILTIN_MS_TO_PT_PARAMS,
    RuleEntry,
    RuleFile,
    load_builtin,
)
from graphcmp.core.matching.base import Claim, RuleMatcher, SlotMap, Walk
from graphcmp.core.matching.ids import api_name
from graphcmp.core.records import DumpGraph, NodeKind, Role

__all__ = ["ApiMatcher", "alias_renamed_classes", "framework_class", "framework_param_renames", "is_cross_framework",
           "is_reversed_pair"]

_ROLES = {"args": int(Role.INPUT), "outputs": int(Role.OUTPUT), "parameters": int(Role.PARAM),
          "parameters_grad": int(Role.PARAM_GRAD)}


def is_reversed_pair(npu: DumpGraph, bench: DumpGraph) -> bool:
    """True when the npu run is PyTorch and the bench run MindSpore (MindSpore -> PyTorch tables run backwards)."""
    return npu.info.framework == "pytorch" and bench.info.framework == "mindspore"


def is_cross_framework(npu: DumpGraph, bench: DumpGraph) -> bool:
    """True for a MindSpore run compared with a PyTorch run (either way round)."""
    return {npu.info.framework, bench.info.framework} == {"mindspore", "pytorch"}


@cache
def _builtin(name: str) -> RuleFile:
    return load_builtin(name)


_AMP_RENAMED = re.compile(r"(?P<cls>\w+?)Opt(?:_\d+)?")  # MindSpore's mixed precision rewrites Dense as DenseOpt_3


def framework_class(cls: str) -> str:
    """The class name a MindSpore network had before `amp.auto_mixed_precision` rewrote it (``Opt``, ``Opt_N``).

    >>> framework_class("LayerNormOpt_6"), framework_class("DenseOpt"), framework_class("Optimizer")
    ('LayerNorm', 'Dense', 'Optimizer')
    """
    found = _AMP_RENAMED.fullmatch(cls)
    return found["cls"] if found else cls


def alias_renamed_classes(table: dict[str, Any], classes: Iterable[str]) -> None:
    """Give every class in `classes` that mixed precision renamed (`framework_class`) the entry `table` holds for
    its original class, where it has none of its own.

    >>> table = {"LayerNorm": {"gamma": "weight"}}
    >>> alias_renamed_classes(table, ["LayerNormOpt_6", "Dense"])
    >>> table["LayerNormOpt_6"]
    {'gamma': 'weight'}
    """
    for cls in classes:
        original = framework_class(cls)
        if original != cls and original in table and cls not in table:
            table[cls] = table[original]


def framework_param_renames(npu: DumpGraph, bench: DumpGraph) -> dict[str, dict[str, str]]:
    """Npu class -> {npu parameter name: bench parameter name} for a MindSpore/PyTorch pair, else {}.

    >>> from graphcmp.core.records import RunInfo
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> ms = parse_msprobe({"framework": "mindspore", "data": {}})
    >>> pt = parse_msprobe({"framework": "pytorch", "data": {}})
    >>> framework_param_renames(ms, pt)["LayerNorm"], framework_param_renames(pt, ms)["Embedding"]
    ({'gamma': 'weight', 'beta': 'bias'}, {'weight': 'embedding_table'})
    """
    if not is_cross_framework(npu, bench):
        return {}
    reverse = is_reversed_pair(npu, bench)
    renames: dict[str, dict[str, str]] = {}
    for entry in _builtin(BUILTIN_MS_TO_PT_PARAMS).entries:
        old, new = (str(entry.value), entry.key) if reverse else (entry.key, str(entry.value))
        renames.setdefault(entry.scope, {})[old] = new
    alias_renamed_classes(renames, set((bench if reverse else npu).nodes.op))  # the MindSpore run's classes
    return renames


class ApiMatcher(RuleMatcher):
    """Pairs API calls through a name table; see the module docstring.

    Parameters
    ----------
    rules : RuleFile, optional
        From `load_api_mapping`. Defaults to the built-in MindSpore -> PyTorch table.
    name : str, optional
        Rule name in reports. Defaults to ``"api-mapping"``.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> from graphcmp.core.matching import match_graphs
    >>> ms = parse_msprobe({"framework": "mindspore", "data": {"Functional.matmul.0.forward": {}}})
    >>> pt = parse_msprobe({"framework": "pytorch", "data": {"Torch.matmul.0.forward": {}}})
    >>> match_graphs(ms, pt, [ApiMatcher()]).count_by_rule()
    {'root': 1, 'api-mapping': 1}
    """

    def __init__(self, rules: RuleFile | None = None, name: str | None = None) -> None:
        super().__init__(rules if rules is not None else _builtin(BUILTIN_MS_TO_PT_API))
        self.name = name or "api-mapping"
        self.table: dict[str, list[tuple[str, int]]] = {}
        self.npu_apis: set[str] = set()
        self.reverse = False
        self.param_renames: dict[str, dict[str, str]] = {}

    def prepare(self, npu: DumpGraph, bench: DumpGraph) -> None:
        self.reverse = is_reversed_pair(npu, bench) and self.rules.ms_to_pt
        table: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for i, entry in enumerate(self.entries):
            key, value = (str(entry.value), entry.key) if self.reverse else (entry.key, str(entry.value))
            table[key].append((value, i))
        self.table = dict(table)
        ids, kinds = npu.nodes.ids, npu.nodes.kind
        self.npu_apis = {api_name(ids[r]) for r in range(len(ids)) if kinds[r] == NodeKind.API}
        self.param_renames = framework_param_renames(npu, bench)

    def claim_children(
        self, walk: Walk, npu_parent: int, bench_parent: int, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> Sequence[Claim]:
        npu, bench = walk.npu, walk.bench
        wanted: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
        for n in npu_rows:
            if npu.nodes.kind[n] == NodeKind.API:
                for target, entry in self.table.get(api_name(npu.nodes.ids[n]), ()):
                    wanted[(int(npu.nodes.direction[n]), target)].append((n, entry))
        if not wanted:
            return ()
        offered: dict[tuple[int, str], list[int]] = defaultdict(list)
        for b in bench_rows:
            if bench.nodes.kind[b] == NodeKind.API:
                offered[(int(bench.nodes.direction[b]), api_name(bench.nodes.ids[b]))].append(b)
        claims = []
        for key, calls in wanted.items():
            for (n, entry), b in zip(calls, offered.get(key, ())):
                claims.append(Claim((n,), (b,), entry, self._slot_map(self.entries[entry])))
        return claims

    def _slot_map(self, entry: RuleEntry) -> SlotMap | None:
        if not entry.extra:
            return None
        pairs = []
        for part, npu_slots, bench_slots in entry.extra:
            role = _ROLES[part]
            sides = zip(bench_slots, npu_slots) if self.reverse else zip(npu_slots, bench_slots)
            pairs.extend((role, a, role, b) for a, b in sides)
        return SlotMap(tuple(pairs), tuple(_ROLES[part] for part, _, _ in entry.extra))

    def renames(self) -> Mapping[str, Mapping[str, str]]:
        return self.param_renames

    def problem(self, entry: int) -> str:
        e = self.entries[entry]
        key, value = (str(e.value), e.key) if self.reverse else (e.key, str(e.value))
        if key not in self.npu_apis:
            return f"the npu run has no call of {key!r}"
        return f"no call of {value!r} next to a call of {key!r} in the bench run"
