"""Layer mapping (msprobe ``-lm``): children pair by module path relative to their matched parents.

A layer-mapping file maps, per npu layer class, the npu side's child names to the bench side's
(``TargetBlock: {self_attention: attn}``; ``TopLayer`` is the root; dotted paths allowed). At every
matched parent pair a child module ``<npu parent path>.<rel>`` pairs with the bench module call
``<bench parent path>.<mapped rel>`` with the same call (``forward.0``, ``parameters_grad`` ...),
whatever its class; children without an entry keep their name, so without a file this is "same
module paths, different class names" (MindSpore ``Cell.fc1.Dense`` vs PyTorch ``Module.fc1.Linear``).
API calls pair by name (the class of a ``Primitive``, the function of ``Functional.linear``,
mapped through the entries of the parent's class), the k-th npu call with the k-th bench call
of that name per direction. A dotted key or value reaches into a sub-module
(``flash_attention_score: core_attention_flash.npu_fusion_attention``).

msprobe files are keyed by the classes of its ``-tp`` (npu) side, and across frameworks msprobe
only accepts a MindSpore ``-tp``: a file is MindSpore -> PyTorch. For a PyTorch npu run against a
MindSpore bench run it is read backwards: an entry then applies where the parent's bench partner
has its class, and maps bench names to npu names.

When such an API pair sits in a module whose npu side holds several API calls and whose bench side
holds one (MindSpore's ``Dense`` = Shape, Reshape, MatMul, BiasAdd, Reshape vs PyTorch's single
``linear``), or the other way round, comparing the named pair alone would compare a matmul without
bias against a full linear: the pair becomes one fused group of all those calls, compared through
the module pair that encloses it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from graphcmp.core.mapping_files import BUILTIN_MS_TO_PT_LAYERS, RuleFile, load_builtin
from graphcmp.core.matching.base import Claim, RuleMatcher, Walk
from graphcmp.core.matching.by_api import (
    alias_renamed_classes,
    framework_class,
    framework_param_renames,
    is_reversed_pair,
)
from graphcmp.core.matching.ids import PathIndex, join, module_id, relative, wrapper_rows
from graphcmp.core.records import DumpGraph, NodeKind

__all__ = ["FRAMEWORK_LAYERS", "TOP_LAYER", "LayerMatcher", "framework_layers"]

TOP_LAYER = "TopLayer"
_MODULE, _PARAM_GRAD, _API, _GROUP = int(NodeKind.MODULE), int(NodeKind.PARAM_GRAD), int(NodeKind.API), int(
    NodeKind.GROUP)


@dataclass(frozen=True, slots=True)
class _Scope:
    cls: str  # npu class whose entries apply ("TopLayer" for the root)
    npu_row: int
    npu_path: str
    bench_row: int
    bench_path: str


class LayerMatcher(RuleMatcher):
    """Pairs children by relative module path and API name, through a layer-mapping file.

    Parameters
    ----------
    rules : RuleFile, optional
        From `load_layer_mapping`. None: no entries (same paths, any class names).
    name : str, optional
        Rule name in reports. Defaults to ``"layer-mapping"``.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> from graphcmp.core.matching import match_graphs
    >>> ms = parse_msprobe({"data": {"Cell.fc1.Dense.forward.0": {}}})
    >>> pt = parse_msprobe({"data": {"Module.fc1.Linear.forward.0": {}}})
    >>> match_graphs(ms, pt, [LayerMatcher()]).count_by_rule()
    {'root': 1, 'layer-mapping': 1}
    """

    def __init__(self, rules: RuleFile | None = None, name: str | None = None) -> None:
        super().__init__(rules)
        self.name = name or "layer-mapping"
        self.by_scope: dict[str, dict[str, tuple[str, int]]] = {}
        self.reverse = False
        self.npu_classes: set[str] = set()
        self.seen: set[int] = set()
        self.missing: dict[int, str] = {}
        self.param_renames: dict[str, dict[str, str]] = {}
        self.npu_wrappers: frozenset[int] = frozenset()

    def prepare(self, npu: DumpGraph, bench: DumpGraph) -> None:
        self.npu_paths, self.bench_paths = PathIndex(npu), PathIndex(bench)
        self.npu_wrappers = wrapper_rows(npu)
        self.bench_ids = bench.nodes.ids
        self.npu_classes = _classes(npu, self.npu_paths)
        self.reverse = is_reversed_pair(npu, bench)
        if self.reverse:
            self.npu_classes = _classes(bench, self.bench_paths)
        self.by_scope = defaultdict(dict)
        for i, entry in enumerate(self.entries):
            key, value = (str(entry.value), entry.key) if self.reverse else (entry.key, str(entry.value))
            self.by_scope[entry.scope].setdefault(key, (value, i))
        alias_renamed_classes(self.by_scope, self.npu_classes)  # a class mixed precision renamed: its original's
        self.npu_classes |= {framework_class(cls) for cls in self.npu_classes}
        self.seen, self.missing = set(), {}
        self.param_renames = framework_param_renames(npu, bench)

    def claim_children(
        self, walk: Walk, npu_parent: int, bench_parent: int, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> Sequence[Claim]:
        scopes = self._scopes(walk, npu_parent)
        if not scopes or scopes[0].bench_row != bench_parent:
            return ()
        claims = self._module_claims(walk, scopes)
        claims.extend(self._api_claims(walk, scopes, npu_rows, bench_rows))
        return claims

    def _scopes(self, walk: Walk, row: int) -> list[_Scope]:
        """The npu parent and its matched module ancestors, nearest first, with their bench partners."""
        npu = walk.npu
        out = []
        while row >= 0:
            if walk.npu_kind[row] != _GROUP and row not in self.npu_wrappers:
                partner = int(walk.npu_to_bench[row])
                npu_path = self.npu_paths.path(row)
                bench_path = self.bench_paths.path(partner) if partner >= 0 else None
                if npu_path is None or bench_path is None:
                    break
                cls = TOP_LAYER if row == 0 else (walk.bench.nodes.op[partner] if self.reverse else npu.nodes.op[row])
                out.append(_Scope(cls, row, npu_path, partner, bench_path))
            row = int(npu.nodes.parent[row])
        return out

    def _lookup(self, scope: _Scope, rel: str) -> tuple[str, int] | None:
        """(mapped rel, entry) for the longest entry key that is a dotted prefix of `rel`."""
        table = self.by_scope.get(scope.cls)
        if not table or not rel:
            return None
        parts = rel.split(".")
        for k in range(len(parts), 0, -1):
            found = table.get(".".join(parts[:k]))
            if found is not None:
                value, entry = found
                self.seen.add(entry)
                return ".".join([value, *parts[k:]]), entry
        return None

    def _module_claims(self, walk: Walk, scopes: list[_Scope]) -> list[Claim]:
        claims = []
        kinds, ids, bench_kinds = walk.npu_kind, walk.npu.nodes.ids, walk.bench_kind
        for n in walk.npu_kids[scopes[0].npu_row]:
            if kinds[n] != _MODULE and kinds[n] != _PARAM_GRAD:
                continue
            parts, path = module_id(ids[n]), self.npu_paths.path(n)
            if parts is None or path is None:
                continue
            target, entry = self._module_target(path, scopes)
            if target is None:
                continue
            b = self.bench_paths.find(target, parts.call)
            if b >= 0 and bench_kinds[b] == kinds[n]:
                claims.append(Claim((n,), (b,), entry))
            elif entry >= 0:
                self.missing.setdefault(entry, f"the bench run has no module call {target}.<class>.{parts.call}")
        return claims

    def _module_target(self, path: str, scopes: list[_Scope]) -> tuple[str | None, int]:
        for scope in scopes:
            rel = relative(path, scope.npu_path)
            if rel is None:
                continue
            found = self._lookup(scope, rel)
            if found is not None:
                return join(scope.bench_path, found[0]), found[1]
        rel = relative(path, scopes[0].npu_path)
        return (join(scopes[0].bench_path, rel), -1) if rel is not None else (None, -1)

    def _api_claims(
        self, walk: Walk, scopes: list[_Scope], npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> list[Claim]:
        npu_ops, bench_ops = walk.npu.nodes.op, walk.bench.nodes.op
        nk, nd, bk, bd = walk.npu_kind, walk.npu_dir, walk.bench_kind, walk.bench_dir
        wanted: dict[tuple[int, int, str], list[tuple[int, int]]] = defaultdict(list)
        for n in npu_rows:
            if nk[n] == _API:
                container, name, entry = self._api_target(npu_ops[n], scopes)
                if container >= 0:
                    wanted[(container, nd[n], name)].append((n, entry))
        claims: list[Claim] = []
        offered: dict[int, dict[tuple[int, str], list[int]]] = {}
        for (container, direction, name), calls in wanted.items():
            if container not in offered:
                rows = bench_rows if container == scopes[0].bench_row else [
                    b for b in walk.bench_kids[container] if walk.bench_to_npu[b] == -1]
                table = offered[container] = defaultdict(list)
                for b in rows:
                    if bk[b] == _API:
                        table[(bd[b], bench_ops[b])].append(b)
            matches = offered[container].get((direction, name), [])
            for (n, entry), b in zip(calls, matches):
                claims.append(Claim((n,), (b,), entry))
            for _, entry in calls[len(matches):]:
                if entry >= 0:
                    self.missing.setdefault(entry, f"no free bench call of {name!r} there")
        return _widen(walk, scopes[0], claims, npu_rows, bench_rows)

    def _api_target(self, op: str, scopes: list[_Scope]) -> tuple[int, str, int]:
        """(bench container row, bench API name, entry) for an npu API child named `op`."""
        here = scopes[0]
        for scope in scopes:
            rel = relative(here.npu_path, scope.npu_path)
            if rel is None:
                continue
            table = self.by_scope.get(scope.cls)
            found = table.get(f"{rel}.{op}" if rel else op) if table else None
            if found is None:
                continue
            value, entry = found
            self.seen.add(entry)
            sub, _, name = value.rpartition(".")
            container = self._container(scope, sub, here)
            if container < 0:
                self.missing.setdefault(entry, f"the bench run has no module {join(scope.bench_path, sub)!r}")
            return container, name, entry
        return here.bench_row, op, -1

    def _container(self, scope: _Scope, sub: str, here: _Scope) -> int:
        path = join(scope.bench_path, sub)
        if path == here.bench_path:
            return here.bench_row
        call = module_id(self.bench_ids[here.bench_row])
        return self.bench_paths.find(path, call.call) if call is not None else -1

    def renames(self) -> Mapping[str, Mapping[str, str]]:
        return self.param_renames

    def problem(self, entry: int) -> str:
        e = self.entries[entry]
        side, key = ("bench", e.key) if self.reverse else ("npu", e.key)
        if e.scope != TOP_LAYER and e.scope not in self.npu_classes:
            return f"class {e.scope!r} does not occur in the {side} run"
        if entry not in self.seen:
            where = "at the top level" if e.scope == TOP_LAYER else f"under any {e.scope}"
            note = " (file read backwards)" if self.reverse else ""
            return f"no child {key!r} {where} in the npu run{note}"
        return self.missing.get(entry, "its bench counterpart was already matched")


def _classes(graph: DumpGraph, paths: PathIndex) -> set[str]:
    kinds, ops = graph.nodes.kind, graph.nodes.op
    return {ops[r] for r in paths.paths if r and kinds[r] == _MODULE}


def _widen(walk: Walk, here: _Scope, claims: list[Claim], npu_rows: Sequence[int],
           bench_rows: Sequence[int]) -> list[Claim]:
    """Turn a pair inside a module whose two sides decompose differently into one fused group."""
    nk, nd, bk, bd = walk.npu_kind, walk.npu_dir, walk.bench_kind, walk.bench_dir
    if nk[here.npu_row] != _MODULE or bk[here.bench_row] != _MODULE or not claims:
        return claims
    out = []
    by_direction: dict[int, list[Claim]] = defaultdict(list)
    for claim in claims:
        by_direction[nd[claim.npu[0]]].append(claim)
    for direction, pairs in by_direction.items():
        npu_calls = tuple(n for n in npu_rows if nk[n] == _API and nd[n] == direction)
        bench_calls = tuple(b for b in bench_rows if bk[b] == _API and bd[b] == direction)
        inside = [c for c in pairs if c.bench[0] in bench_calls]
        if inside and min(len(npu_calls), len(bench_calls)) == 1 < max(len(npu_calls), len(bench_calls)):
            first = inside[0]
            out.append(Claim(npu_calls, bench_calls, first.entry, via=here.npu_row,
                             anchor=(first.npu[0], first.bench[0])))
            out.extend(c for c in pairs if c not in inside)
        else:
            out.extend(pairs)
    return out


FRAMEWORK_LAYERS = "framework-layers"


def framework_layers() -> LayerMatcher:
    """The layer mapping of the frameworks' own layers (built-in ``ms_to_pt_layers.yaml``: a MindSpore ``Dense``'s
    ``MatMul`` is a PyTorch ``Linear``'s ``linear``), applied after the user's rules (`FRAMEWORK_LAYERS` in
    `RULE_ORDER`), so an API mapping file's entry with argument positions wins over it."""
    return LayerMatcher(load_builtin(BUILTIN_MS_TO_PT_LAYERS), FRAMEWORK_LAYERS)
