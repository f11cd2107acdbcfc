"""Manual matches: pairs a person picked in the viewer, kept in a sidecar file and re-applied.

The sidecar (``cmp.matches.json`` next to ``cmp.json``; format in docs/matching.md) lists
matches (npu id(s) <-> bench id(s), optionally "their children by order") and unmatches (a pair
that must not be made). `ManualMatcher` turns them into pins and blocks that go before every
other rule; the orchestrator's `graphcmp.core.compare.apply_manual_matches` recompares a report's
two runs with them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from graphcmp.core.mapping_files import MANUAL_FORMAT, MANUAL_VERSION, RuleEntry, RuleFile, load_manual_file
from graphcmp.core.matching.base import Claim, RuleMatcher, RuleNote, children_rows
from graphcmp.core.outputs import write_atomic
from graphcmp.core.records import DumpGraph

__all__ = [
    "SIDECAR_SUFFIX",
    "ManualMatch",
    "ManualMatcher",
    "ManualMatches",
    "ManualUnmatch",
    "load_manual_matches",
    "save_manual_matches",
    "sidecar_path",
]

SIDECAR_SUFFIX = ".matches.json"


@dataclass(frozen=True, slots=True)
class ManualMatch:
    """Npu node(s) <-> bench node(s) a person matched; several ids on a side make a fused group."""

    npu: tuple[str, ...]
    bench: tuple[str, ...]
    children: bool = False  # also match their children, k-th with k-th
    where: str = ""  # "file:line" when read from a sidecar


@dataclass(frozen=True, slots=True)
class ManualUnmatch:
    """A pair that must not be made: both nodes stay unmatched ("" on a side: that node alone)."""

    npu: str = ""
    bench: str = ""
    where: str = ""


@dataclass(frozen=True, slots=True)
class ManualMatches:
    """Everything a person decided, in order (a later decision about a node replaces an earlier one).

    Examples
    --------
    >>> m = ManualMatches().with_match("Cell.fc1.Dense.forward.0", "Module.fc1.Linear.forward.0", children=True)
    >>> m = m.with_unmatch("Functional.relu.0.forward", "Functional.relu.0.forward")
    >>> [x.npu for x in m.matches], [x.npu for x in m.unmatches]
    ([('Cell.fc1.Dense.forward.0',)], ['Functional.relu.0.forward'])
    >>> ManualMatches.from_dict(m.to_dict()) == m
    True
    """

    matches: tuple[ManualMatch, ...] = ()
    unmatches: tuple[ManualUnmatch, ...] = ()
    npu_path: str = ""
    bench_path: str = ""

    def with_match(self, npu: str | Sequence[str], bench: str | Sequence[str], *,
                   children: bool = False) -> ManualMatches:
        """A copy with one more match; earlier decisions about the same nodes are dropped."""
        match = ManualMatch(_tuple(npu), _tuple(bench), children)
        ids = set(match.npu) | set(match.bench)
        return replace(self, matches=(*(m for m in self.matches if not ids & (set(m.npu) | set(m.bench))), match),
                       unmatches=tuple(u for u in self.unmatches if not ids & {u.npu, u.bench}))

    def with_unmatch(self, npu: str = "", bench: str = "") -> ManualMatches:
        """A copy in which `npu` and `bench` must stay unmatched; matches naming them are dropped."""
        ids = {npu, bench} - {""}
        return replace(self, matches=tuple(m for m in self.matches if not ids & (set(m.npu) | set(m.bench))),
                       unmatches=(*(u for u in self.unmatches if not ids & {u.npu, u.bench}),
                                  ManualUnmatch(npu, bench)))

    def to_dict(self) -> dict[str, Any]:
        """The sidecar document."""
        return {
            "format": MANUAL_FORMAT, "version": MANUAL_VERSION, "npu": self.npu_path, "bench": self.bench_path,
            "matches": [{"npu": _one(m.npu), "bench": _one(m.bench), "children": "order" if m.children else "none"}
                        for m in self.matches],
            "unmatches": [{k: v for k, v in (("npu", u.npu), ("bench", u.bench)) if v} for u in self.unmatches],
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ManualMatches:
        """Inverse of `to_dict` (no validation: use `load_manual_matches` for files)."""
        return cls(
            matches=tuple(ManualMatch(_tuple(m["npu"]), _tuple(m["bench"]), m.get("children") in ("order", True))
                          for m in doc.get("matches", ())),
            unmatches=tuple(ManualUnmatch(u.get("npu", ""), u.get("bench", "")) for u in doc.get("unmatches", ())),
            npu_path=doc.get("npu", ""), bench_path=doc.get("bench", ""),
        )

    def rule_file(self, source: str = "manual") -> RuleFile:
        """The decisions as rule entries (scope ``match``, ``match+children`` or ``unmatch``)."""
        entries = [RuleEntry(m.where or f"{source}: match {k + 1}", "\n".join(m.npu), _one(m.bench),
                             "match+children" if m.children else "match") for k, m in enumerate(self.matches)]
        entries.extend(RuleEntry(u.where or f"{source}: unmatch {k + 1}", u.npu, u.bench, "unmatch")
                       for k, u in enumerate(self.unmatches))
        return RuleFile(source, tuple(entries))


def _tuple(ids: str | Sequence[str]) -> tuple[str, ...]:
    return (ids,) if isinstance(ids, str) else tuple(ids)


def _one(ids: tuple[str, ...]) -> str | list[str]:
    return ids[0] if len(ids) == 1 else list(ids)


def sidecar_path(report_path: str | os.PathLike[str]) -> Path:
    """Where the manual matches of a report live: ``cmp.json`` or ``cmp.npz`` -> ``cmp.matches.json``.

    >>> sidecar_path("out/cmp.json").as_posix(), sidecar_path("cmp.npz").as_posix()
    ('out/cmp.matches.json', 'cmp.matches.json')
    """
    path = Path(report_path)
    stem = next((path.name[: -len(s)] for s in (".json", ".npz") if path.name.endswith(s)), path.name)
    return path.with_name(stem + SIDECAR_SUFFIX)


def load_manual_matches(path: str | os.PathLike[str]) -> ManualMatches:
    """Read a sidecar file.

    Raises
    ------
    MappingError
        If the file is missing, does not parse, or an item is malformed (the message names the line).
    """
    rules, header = load_manual_file(path)
    matches, unmatches = [], []
    for e in rules.entries:
        if e.scope == "unmatch":
            unmatches.append(ManualUnmatch(e.key, str(e.value), e.where))
        else:
            matches.append(ManualMatch(tuple(e.key.split("\n")), _tuple(e.value), e.scope == "match+children", e.where))
    return ManualMatches(tuple(matches), tuple(unmatches), header.get("npu", ""), header.get("bench", ""))


def save_manual_matches(manual: ManualMatches, path: str | os.PathLike[str]) -> None:
    """Write `manual` as a sidecar file (via a temporary file, so a failed write leaves no half file).

    Raises
    ------
    OutputError
        If the file cannot be written.
    """
    write_atomic(path, orjson.dumps(manual.to_dict(), option=orjson.OPT_INDENT_2))


class ManualMatcher(RuleMatcher):
    """Pins a person's matches and blocks their unmatches, before every other rule.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> from graphcmp.core.matching import match_graphs, default_matchers
    >>> g = parse_msprobe({"data": {"Functional.relu.0.forward": {}, "Functional.gelu.0.forward": {}}})
    >>> manual = ManualMatches().with_unmatch("Functional.relu.0.forward", "Functional.relu.0.forward")
    >>> table = match_graphs(g, g, [ManualMatcher(manual), *default_matchers()])
    >>> table.npu_to_bench[g.row("Functional.relu.0.forward")], table.count_by_rule()["exact"]
    (np.int32(-1), 1)
    """

    def __init__(self, manual: ManualMatches, name: str | None = None, source: str = "manual") -> None:
        super().__init__(manual.rule_file(source))
        self.name = name or "manual"
        self.problems: dict[int, str] = {}
        self.kept: dict[int, int] = {}  # unmatch entry -> nodes it kept unmatched

    def pins(self, npu: DumpGraph, bench: DumpGraph) -> Sequence[Claim]:
        claims: list[Claim] = []
        npu_kids = bench_kids = None
        self.problems = {}
        for i, e in enumerate(self.entries):
            if e.scope == "unmatch":
                continue
            npu_ids, bench_ids = e.key.split("\n"), _tuple(e.value)
            missing = [f"npu {x!r}" for x in npu_ids if x not in npu] + [
                f"bench {x!r}" for x in bench_ids if x not in bench]
            if missing:
                self.problems[i] = "no such node: " + ", ".join(missing)
                continue
            n_rows, b_rows = tuple(npu.row(x) for x in npu_ids), tuple(bench.row(x) for x in bench_ids)
            claims.append(Claim(n_rows, b_rows, i))
            if e.scope == "match+children" and len(n_rows) == len(b_rows) == 1:
                npu_kids = npu_kids or children_rows(npu)
                bench_kids = bench_kids or children_rows(bench)
                claims.extend(Claim((n,), (b,), i) for n, b in zip(npu_kids[n_rows[0]], bench_kids[b_rows[0]]))
        return claims

    def blocks(self, npu: DumpGraph, bench: DumpGraph) -> Sequence[tuple[int, int]]:
        out = []
        self.kept = {}
        for i, e in enumerate(self.entries):
            if e.scope == "unmatch":
                n = npu.row(e.key) if e.key in npu else -1
                b = bench.row(str(e.value)) if str(e.value) in bench else -1
                if n < 0 and b < 0:
                    self.problems[i] = "no such node"
                self.kept[i] = (n >= 0) + (b >= 0)
                out.append((n, b))
        return out

    def notes(self, matched: Mapping[int, int]) -> list[RuleNote]:
        # an unmatch "matches" the nodes it keeps unmatched
        return super().notes({**matched, **{i: n for i, n in self.kept.items() if n}})

    def problem(self, entry: int) -> str:
        if self.entries[entry].scope == "unmatch":
            return self.problems.get(entry, "")
        return self.problems.get(entry, "its nodes were already matched otherwise")

