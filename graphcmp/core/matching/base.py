"""The match table and the top-down walk that fills it from child matchers and rule matchers.

Plain strategies (`ChildMatcher`: exact names, fuzzy names) pair children of a matched parent
pair. Rule strategies (`RuleMatcher`: mapping files, op tables, manual matches) may also pin
pairs anywhere before the walk (an id -> id table), claim one-to-many / many-to-one (fused)
groups, say how the tensors of a pair correspond (`SlotMap`), and report per entry what it
matched. The walk applies everything in the order given; the first claim on a node wins and a
later rule that wanted it differently is listed in `MatchTable.conflicts`.
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from graphcmp.core.dataflow import run_fingerprints
from graphcmp.core.hierarchy import execution_keys
from graphcmp.core.matching.ids import api_name, wrapper_rows
from graphcmp.core.records import DumpGraph, FrozenColumns, NodeKind, Role, string_column

if TYPE_CHECKING:
    from graphcmp.core.mapping_files import RuleEntry, RuleFile

__all__ = [
    "ChildMatcher",
    "Claim",
    "FusedGroup",
    "MatchTable",
    "RuleCode",
    "RuleMatcher",
    "RuleNote",
    "SlotMap",
    "TreeMatcher",
    "Walk",
    "children_rows",
    "flat_parents",
    "match_graphs",
    "non_crossing",
]

ROOT_RULE = "root"
GROUP_RULE = "group"


class RuleCode(enum.IntEnum):
    """Codes of `MatchTable.rule`: how an npu row got its partner.

    The matchers given to `match_graphs` follow in order: the k-th (from 0) has code ``FIRST_MATCHER + k``,
    so ``MatchTable.rules[code]`` is always the rule's name.
    """

    UNMATCHED = -1
    ROOT = 0  # the two roots, always paired
    GROUP = 1  # a group of top-level API calls, paired with the group holding most of its members' partners
    FIRST_MATCHER = 2


class ChildMatcher(Protocol):
    """A matching strategy: pairs children of one matched parent pair.

    A matcher with a true ``ordered`` attribute pairs children in execution order (fuzzy names): the walk
    asks it once per gap between the sibling pairs already made, so its pairs never cross them.
    """

    name: str

    def match_children(
        self, npu: DumpGraph, bench: DumpGraph, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> list[tuple[int, int]]:
        """Return (npu row, bench row) pairs among the given unmatched children, each row at most once."""
        ...


@runtime_checkable
class TreeMatcher(Protocol):
    """A child matcher that can also pair the whole tree at once when it comes first (`ExactMatcher`).

    `match_tree` must give the same pairs the walk would get from `match_children` alone.
    """

    name: str

    def match_children(
        self, npu: DumpGraph, bench: DumpGraph, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> list[tuple[int, int]]: ...

    def match_tree(self, walk: Walk, code: int, *, more: bool) -> list[tuple[int, int]]:
        """Fill `walk` (partners and rule codes, the roots included) for the whole tree; return the matched
        pairs whose children the matchers after it (`more`) still have to look at."""
        ...


@dataclass(frozen=True, slots=True)
class SlotMap:
    """How the tensors of one matched pair correspond when their slots differ.

    Attributes
    ----------
    pairs : tuple of (int, str, int, str)
        (npu role, npu slot, bench role, bench slot) of tensors that pair.
    only : tuple of int
        Roles whose tensors pair only through `pairs`; other roles pair by equal slot.
    """

    pairs: tuple[tuple[int, str, int, str], ...] = ()
    only: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FusedGroup:
    """A one-to-many, many-to-one or many-to-many match (a fused or decomposed op).

    Attributes
    ----------
    npu, bench : tuple of int
        Member rows of each side, in execution order.
    rule : int
        Index into `MatchTable.rules`.
    via : int
        Npu row of the enclosing matched module whose own tensors are the group's boundary (the
        members are then not compared one by one), or -1 when the group is compared on its boundary
        tensors: the first members' inputs and the last members' outputs.
    """

    npu: tuple[int, ...]
    bench: tuple[int, ...]
    rule: int
    via: int = -1


@dataclass(frozen=True, slots=True)
class Claim:
    """What a rule matcher asks for: rows of each side (one each for a plain pair).

    `entry` is the index of the rule entry responsible (-1: none, e.g. a same-name default);
    `anchor` the (npu, bench) rows a group's members point to (default: each side's last row).
    """

    npu: tuple[int, ...]
    bench: tuple[int, ...]
    entry: int = -1
    slots: SlotMap | None = None
    via: int = -1
    anchor: tuple[int, int] = (-1, -1)


@dataclass(frozen=True, slots=True)
class RuleNote:
    """What one rule entry did: how many npu nodes it matched and, if none, why."""

    rule: str
    where: str
    text: str
    matched: int
    problem: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class MatchTable(FrozenColumns):
    """npu row <-> bench row pairs, and the rule that made each.

    Attributes
    ----------
    npu_to_bench : ndarray of int32
        Bench row per npu row, -1 when unmatched (a fused group's members point to its anchor).
    bench_to_npu : ndarray of int32
        Npu row per bench row, -1 when unmatched.
    rule : ndarray of int8
        Index into `rules` per npu row, -1 when unmatched.
    rules : tuple of str
        Names of the rules, e.g. ``("root", "group", "exact", "fuzzy")``.
    groups : tuple of FusedGroup
        One-to-many / many-to-one matches (empty unless a rule made some).
    slot_maps : Mapping of int to SlotMap
        Npu row -> how that pair's tensors correspond (API and data mappings).
    slot_renames : Mapping of str to Mapping of str to str
        Npu op -> {npu slot: bench slot} for every pair whose npu node has that op (parameter names).
    notes : tuple of RuleNote
        One per rule entry: what it matched.
    conflicts : tuple of str
        Rules that lost a node to an earlier rule, one line each naming the file and line.
    """

    npu_to_bench: np.ndarray
    bench_to_npu: np.ndarray
    rule: np.ndarray
    rules: tuple[str, ...]
    groups: tuple[FusedGroup, ...] = ()
    slot_maps: Mapping[int, SlotMap] = field(default_factory=dict)
    slot_renames: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    notes: tuple[RuleNote, ...] = ()
    conflicts: tuple[str, ...] = ()

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(npu rows, bench rows) of every match, in npu execution order."""
        npu_rows = np.flatnonzero(self.npu_to_bench >= 0)
        return npu_rows, self.npu_to_bench[npu_rows]

    def count_by_rule(self) -> dict[str, int]:
        """Number of matched npu nodes per rule name."""
        counts = np.bincount(self.rule[self.rule >= 0], minlength=len(self.rules))
        return {name: int(n) for name, n in zip(self.rules, counts) if n}

    @property
    def matched(self) -> int:
        return int(np.count_nonzero(self.npu_to_bench >= 0))

    def unused_rules(self) -> tuple[RuleNote, ...]:
        """Rule entries that matched no node (typos, names of another model ...)."""
        return tuple(note for note in self.notes if not note.matched)

    def rule_report(self) -> dict[str, Any]:
        """Per rule source: nodes matched (and entries used); every entry that matched nothing; conflicts.

        Sources are the rules after ``root``/``group``; their entry counts are known only in the
        comparison that made the table (a table read back from a report has its counts only).

        Examples
        --------
        >>> note = RuleNote("layer-mapping=m.yaml", "m.yaml:3", "Blk: attn -> attention", 0, "no child")
        >>> t = MatchTable(np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int8),
        ...                ("root", "group", "layer-mapping=m.yaml", "exact"), notes=(note,))
        >>> t.rule_report()["sources"]["layer-mapping=m.yaml"]
        {'matched': 0, 'entries': 1, 'entries_used': 0}
        >>> t.rule_report()["unused"]
        ['m.yaml:3: Blk: attn -> attention (no child)']
        """
        counts = self.count_by_rule()
        sources: dict[str, dict[str, int]] = {name: {"matched": counts.get(name, 0)}
                                              for name in self.rules if name not in (ROOT_RULE, GROUP_RULE)}
        for note in self.notes:
            source = sources.setdefault(note.rule, {"matched": counts.get(note.rule, 0)})
            source["entries"] = source.get("entries", 0) + 1
            source["entries_used"] = source.get("entries_used", 0) + bool(note.matched)
        unused = [f"{n.where}: {n.text}" + (f" ({n.problem})" if n.problem else "") for n in self.unused_rules()]
        return {"sources": sources, "unused": unused, "conflicts": list(self.conflicts),
                "fused_groups": len(self.groups)}


class RuleMatcher:
    """Base of the rule strategies: entries from a rule file, pins, child claims, per-entry notes.

    Subclasses override what they need: `prepare` (per comparison), `pins` (pairs anywhere,
    claimed before the walk), `blocks` (npu/bench rows that must stay unmatched),
    `claim_children` (at each matched parent pair), `renames` (slot names) and `problem` (why an
    entry matched nothing).
    """

    name = "rule"

    def __init__(self, rules: RuleFile | None = None) -> None:
        self.rules = rules

    @property
    def entries(self) -> tuple[RuleEntry, ...]:
        return self.rules.entries if self.rules is not None else ()

    def prepare(self, npu: DumpGraph, bench: DumpGraph) -> None:
        """Called once per comparison, before anything else."""

    def pins(self, npu: DumpGraph, bench: DumpGraph) -> Sequence[Claim]:
        """Claims made before the walk, anywhere in the trees."""
        return ()

    def blocks(self, npu: DumpGraph, bench: DumpGraph) -> Sequence[tuple[int, int]]:
        """(npu row or -1, bench row or -1) that no strategy may match."""
        return ()

    def claim_children(
        self, walk: Walk, npu_parent: int, bench_parent: int, npu_rows: Sequence[int], bench_rows: Sequence[int]
    ) -> Sequence[Claim]:
        """Claims among the unmatched children `npu_rows`/`bench_rows` of a matched parent pair."""
        return ()

    def renames(self) -> Mapping[str, Mapping[str, str]]:
        """Npu op -> {npu slot: bench slot} for tensor pairing."""
        return {}

    def problem(self, entry: int) -> str:
        """Why entry `entry` matched nothing (called only for those)."""
        return "matched no node"

    def notes(self, matched: Mapping[int, int]) -> list[RuleNote]:
        """One note per entry (none for built-in tables, which are not the user's to fix)."""
        if self.rules is None or self.rules.builtin:
            return []
        return [RuleNote(self.name, e.where, e.text, matched.get(i, 0), "" if matched.get(i) else self.problem(i))
                for i, e in enumerate(self.entries)]


class ChildLists:
    """Children rows per row, in execution order (rows are pre-order, so ascending): ``kids[row]`` is a list made
    when asked (a walk visits few of a large run's rows; a list per row up front cost 0.15 s per 200k rows), and
    ``kids[row] = rows`` replaces one row's list."""

    __slots__ = ("_ends", "_flat", "_replaced")

    def __init__(self, parent: np.ndarray) -> None:
        by_parent = np.argsort(parent, kind="stable")
        self._flat = by_parent[parent[by_parent] >= 0]
        self._ends = np.searchsorted(parent[self._flat], np.arange(len(parent) + 1))
        self._replaced: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return len(self._ends) - 1

    def __getitem__(self, row: int) -> list[int]:
        replaced = self._replaced.get(row)
        if replaced is not None:
            return replaced
        return self._flat[self._ends[row]:self._ends[row + 1]].tolist()

    def __setitem__(self, row: int, rows: list[int]) -> None:
        self._replaced[row] = rows


def children_rows(graph: DumpGraph) -> ChildLists:
    """Children rows per row, in execution order (`ChildLists`).

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> g = parse_msprobe({"data": {"Module.a.A.forward.0": {}, "Torch.relu.0.forward": {}}},
    ...                   {"Module.a.A.forward.0": None, "Torch.relu.0.forward": "Module.a.A.forward.0"})
    >>> kids = children_rows(g)
    >>> [g.nodes.ids[r] for r in kids[0]], [g.nodes.ids[r] for r in kids[1]], kids[2]
    (['Module.a.A.forward.0'], ['Torch.relu.0.forward'], [])
    """
    return ChildLists(graph.nodes.parent)


class Walk:
    """The state of one `match_graphs` run, as rule matchers see it.

    Attributes
    ----------
    npu, bench : DumpGraph
    npu_to_bench, bench_to_npu : list of int
        Current partners (-1 free; any other value means taken); lists, as the walk reads them one
        row at a time (arrays when a `TreeMatcher` paired the whole tree and no matcher comes after it).
    npu_kids, bench_kids : list of list of int
        Children per row with group nodes replaced by their members.
    npu_kind, npu_dir, bench_kind, bench_dir : list of int
        Node kind and direction codes per row as Python lists (built on first use, for per-node loops).
    """

    def __init__(self, npu: DumpGraph, bench: DumpGraph, matchers: Sequence[ChildMatcher | RuleMatcher]) -> None:
        self.npu, self.bench, self.matchers = npu, bench, matchers
        self.npu_to_bench = [-1] * len(npu)
        self.bench_to_npu = [-1] * len(bench)
        self.rule = [-1] * len(npu)
        self.groups: list[FusedGroup] = []
        self.slot_maps: dict[int, SlotMap] = {}
        self.credit: dict[int, Counter[int]] = {}
        self.owner_npu: dict[int, tuple[int, int]] = {}  # row -> (matcher code, entry)
        self.owner_bench: dict[int, tuple[int, int]] = {}
        self.conflicts: dict[tuple[str, str], list] = {}  # (entry where, owner) -> [first message, count]
        self.blocked = False

    @cached_property
    def npu_kids(self) -> ChildLists:
        return _flat_children(self.npu)

    @cached_property
    def bench_kids(self) -> ChildLists:
        return _flat_children(self.bench)

    @cached_property
    def npu_kind(self) -> list[int]:
        return self.npu.nodes.kind.tolist()

    @cached_property
    def npu_dir(self) -> list[int]:
        return self.npu.nodes.direction.tolist()

    @cached_property
    def bench_kind(self) -> list[int]:
        return self.bench.nodes.kind.tolist()

    @cached_property
    def bench_dir(self) -> list[int]:
        return self.bench.nodes.direction.tolist()

    def claim(self, n: int, b: int, code: int) -> None:
        self.npu_to_bench[n], self.bench_to_npu[b], self.rule[n] = b, n, code

    def apply(self, claim: Claim, code: int) -> bool:
        """Record `claim` for the matcher at `code`; True when it made a new one-to-one pair."""
        n_rows, b_rows = claim.npu, claim.bench
        if not n_rows or not b_rows:
            return False
        taken_n = [n for n in n_rows if self.npu_to_bench[n] != -1]
        taken_b = [b for b in b_rows if self.bench_to_npu[b] != -1]
        if taken_n or taken_b:
            if len(n_rows) == len(b_rows) == 1 and self.npu_to_bench[n_rows[0]] == b_rows[0]:
                self._credit(code, claim.entry, 1)  # agrees with an earlier rule
            elif claim.entry >= 0:
                self._conflict(claim, code, taken_n, taken_b)
            return False
        self._credit(code, claim.entry, len(n_rows))
        for n in n_rows:
            self.owner_npu[n] = (code, claim.entry)
        for b in b_rows:
            self.owner_bench[b] = (code, claim.entry)
        if len(n_rows) == len(b_rows) == 1:
            self.claim(n_rows[0], b_rows[0], code)
            if claim.slots is not None:
                self.slot_maps[n_rows[0]] = claim.slots
            return True
        n_anchor = claim.anchor[0] if claim.anchor[0] >= 0 else n_rows[-1]
        b_anchor = claim.anchor[1] if claim.anchor[1] >= 0 else b_rows[-1]
        for n in n_rows:
            self.npu_to_bench[n], self.rule[n] = b_anchor, code
        for b in b_rows:
            self.bench_to_npu[b] = n_anchor
        self.groups.append(FusedGroup(tuple(n_rows), tuple(b_rows), code, claim.via))
        return False

    def block(self, n: int, b: int, code: int) -> None:
        """Keep npu row `n` and bench row `b` (either may be -1) out of every later match (the matcher at `code`)."""
        if n >= 0 and self.npu_to_bench[n] == -1:
            self.npu_to_bench[n] = _BLOCKED
            self.owner_npu[n] = (code, -1)
            self.blocked = True
        if b >= 0 and self.bench_to_npu[b] == -1:
            self.bench_to_npu[b] = _BLOCKED
            self.owner_bench[b] = (code, -1)
            self.blocked = True

    def _credit(self, code: int, entry: int, n: int) -> None:
        if entry >= 0:
            self.credit.setdefault(code, Counter())[entry] += n

    def _conflict(self, claim: Claim, code: int, taken_n: list[int], taken_b: list[int]) -> None:
        matcher = self._rule_matcher(code)
        if matcher.rules is None or matcher.rules.builtin:
            return
        entry = matcher.entries[claim.entry]
        npu_ids, bench_ids = self.npu.nodes.ids, self.bench.nodes.ids
        want = f"{_ids(npu_ids, claim.npu)} <-> {_ids(bench_ids, claim.bench)}"
        if taken_n:
            n = taken_n[0]
            partner = self.npu_to_bench[n]
            held = f"npu {npu_ids[n]!r} " + ("is kept unmatched" if partner == _BLOCKED else
                                             f"is already matched to {bench_ids[partner]!r}")
            owner = self.owner_npu.get(n)
        else:
            b = taken_b[0]
            partner = self.bench_to_npu[b]
            held = f"bench {bench_ids[b]!r} " + ("is kept unmatched" if partner == _BLOCKED else
                                                 f"is already matched to {npu_ids[partner]!r}")
            owner = self.owner_bench.get(b)
        by = self._describe(owner)
        seen = self.conflicts.setdefault((entry.where, by), [f"{entry.where}: {entry.text}: wants {want}, but {held} "
                                                             f"by {by}; the earlier rule wins", 0])
        seen[1] += 1

    def _rule_matcher(self, code: int) -> RuleMatcher:
        matcher = self.matchers[code - RuleCode.FIRST_MATCHER]
        assert isinstance(matcher, RuleMatcher), "only rule matchers make claims"
        return matcher

    def conflict_lines(self) -> list[str]:
        """One line per (rule entry, earlier rule), with how many more nodes the same conflict hit."""
        return [text + (f" (and {n - 1} more node{'s' if n > 2 else ''} alike)" if n > 1 else "")
                for text, n in self.conflicts.values()]

    def _describe(self, owner: tuple[int, int] | None) -> str:
        if owner is None:
            return "an earlier rule"
        code, entry = owner
        matcher = self.matchers[code - RuleCode.FIRST_MATCHER]
        if entry >= 0 and isinstance(matcher, RuleMatcher) and matcher.entries:
            return f"{matcher.name} ({matcher.entries[entry].where})"
        return matcher.name


_BLOCKED = np.iinfo(np.int32).max


def _ids(ids: tuple[str, ...], rows: tuple[int, ...]) -> str:
    text = ", ".join(repr(ids[r]) for r in rows[:3]) + (", ..." if len(rows) > 3 else "")
    return text if len(rows) == 1 else f"[{text}]"


def match_graphs(npu: DumpGraph, bench: DumpGraph, matchers: Sequence[ChildMatcher | RuleMatcher]) -> MatchTable:
    """Match two runs top-down, asking `matchers` in order at every matched parent pair.

    Rule matchers' pins and blocks are claimed first, matcher by matcher (a matcher's pins, then its
    blocks, so a later rule cannot pin what an earlier one keeps unmatched); the walk then descends
    from the roots and from every pinned pair. Without rule matchers, a first matcher that
    can pair the whole tree at once (`TreeMatcher`) does so, and the walk only visits the pairs it
    leaves with unpaired children on both sides. Group nodes (runs of top-level API calls) are
    transparent: their members are matched as children of the root, and a group is then paired with
    the group holding most of its members' matches.
    """
    rules = (ROOT_RULE, GROUP_RULE, *(m.name for m in matchers))
    walk = Walk(npu, bench, matchers)
    rich = [isinstance(m, RuleMatcher) for m in matchers]
    steps = list(zip(range(RuleCode.FIRST_MATCHER, len(matchers) + RuleCode.FIRST_MATCHER), matchers, rich))
    walk.claim(0, 0, RuleCode.ROOT)
    todo = [(0, 0)]
    if any(rich):
        todo.extend(_pin(walk, matchers, rich))
    elif matchers and isinstance(matchers[0], TreeMatcher):
        todo = matchers[0].match_tree(walk, RuleCode.FIRST_MATCHER, more=len(matchers) > 1)
    _descend(walk, steps, todo)
    exact = next((code for code, matcher, _ in steps if matcher.name == "exact"), None)
    if exact is not None:
        _descend(walk, steps, _moved_modules(walk, exact))
        _between_modules_by_data(walk, exact)
    n2b, b2n = np.array(walk.npu_to_bench, np.int32), np.array(walk.bench_to_npu, np.int32)
    rule = np.array(walk.rule, np.int8)
    if walk.blocked:
        n2b[n2b == _BLOCKED] = -1
        b2n[b2n == _BLOCKED] = -1
    _match_groups(npu, bench, n2b, b2n, rule)
    return _table(walk, matchers, rich, rules, MatchTable(n2b, b2n, rule, rules))


def _descend(walk: Walk, steps: list[tuple[int, ChildMatcher | RuleMatcher, bool]],
             todo: list[tuple[int, int]]) -> None:
    """Match the children of every pair in `todo`, and of every pair that makes, asking the matchers in order."""
    if not todo:
        return
    n2b, b2n = walk.npu_to_bench, walk.bench_to_npu
    npu_kids, bench_kids = walk.npu_kids, walk.bench_kids
    while todo:
        n_parent, b_parent = todo.pop()
        n_free = [r for r in npu_kids[n_parent] if n2b[r] == -1]
        b_free = [r for r in bench_kids[b_parent] if b2n[r] == -1]
        for code, matcher, is_rule in steps:
            if not n_free or not b_free:
                break
            if is_rule:
                claims = matcher.claim_children(walk, n_parent, b_parent, n_free, b_free)
                todo.extend((c.npu[0], c.bench[0]) for c in sorted(claims, key=_entry_order)
                            if walk.apply(c, code))
            else:
                for n, b in _child_pairs(walk, matcher, n_parent, b_parent, n_free, b_free):
                    if n2b[n] == -1 and b2n[b] == -1:
                        n2b[n], b2n[b], walk.rule[n] = b, n, code
                        todo.append((n, b))
            n_free = [r for r in n_free if n2b[r] == -1]
            b_free = [r for r in b_free if b2n[r] == -1]


def _moved_modules(walk: Walk, code: int) -> list[tuple[int, int]]:
    """Module calls and parameter gradients left unmatched on both sides with the same id, paired (`code`: the
    exact matcher's): msprobe nests a backward call under the module whose backward hook fired before it, which
    differs between runs (a pipeline stage after the first takes an input that needs a gradient, the first stage
    and a run without pipeline do not), so the same call can stand under another parent."""
    npu, bench = walk.npu, walk.bench
    kinds = (int(NodeKind.MODULE), int(NodeKind.PARAM_GRAD))
    n2b, b2n = walk.npu_to_bench, walk.bench_to_npu
    npu_free = np.flatnonzero(np.isin(npu.nodes.kind, kinds) & (np.asarray(n2b) == -1))
    bench_free = np.flatnonzero(np.isin(bench.nodes.kind, kinds) & (np.asarray(b2n) == -1))
    if not len(npu_free) or not len(bench_free):
        return []
    free = {bench.nodes.ids[b]: b for b in bench_free.tolist()}
    pairs = []
    for n in npu_free.tolist():
        b = free.get(npu.nodes.ids[n], -1)
        if b >= 0 and b2n[b] == -1 and bench.nodes.kind[b] == npu.nodes.kind[n]:
            n2b[n], b2n[b], walk.rule[n] = b, n, code
            pairs.append((n, b))
    return pairs


def _between_modules_by_data(walk: Walk, code: int) -> None:
    """Pair the API calls between modules by the data they take: a call whose first input is a matched call's
    output or parameter gradient pairs with the bench call of the same API whose input is that call's partner's.
    Their order is the schedule's, not the model's (a pipeline job reduces its last stage's gradients first, a run
    without pipeline in parameter order, each reduction followed by its division); order alone pairs them with
    other parameters' calls. Rounds follow the data (a division pairs once its all_reduce has); calls whose maker
    is unmatched or not unique keep the pairs the walk gave them. Ops named without an API (a GE graph's op names)
    keep their pairs too: their names are unique, and taken for one API, a transpose whose statistics equal its
    input's would lend its maker to the ops after it."""
    npu_calls, bench_calls = _calls_between_modules(walk.npu), _calls_between_modules(walk.bench)
    if not len(npu_calls) or not len(bench_calls):
        return
    npu_inputs, bench_inputs = _InputHolders(walk.npu, npu_calls), _InputHolders(walk.bench, bench_calls)
    for _ in range(4):
        if not _pair_by_makers(walk, code, npu_inputs, bench_inputs):
            return


def _calls_between_modules(graph: DumpGraph) -> np.ndarray:
    parent, kind = graph.nodes.parent, graph.nodes.kind
    top = (parent == 0) | ((parent > 0) & (kind[np.maximum(parent, 0)] == NodeKind.GROUP))
    calls = np.flatnonzero((kind == NodeKind.API) & top)
    return calls[[bool(api_name(graph.nodes.ids[row])) for row in calls.tolist()]].astype(np.int64)


class _InputHolders:
    """For calls of one run: the calls holding each one's first input as an output or a parameter gradient (by
    `fingerprints`), earlier in execution order."""

    def __init__(self, graph: DumpGraph, calls: np.ndarray) -> None:
        t = graph.tensors
        fingerprint = run_fingerprints(graph)
        keys = execution_keys(graph)
        is_call = np.zeros(len(graph), bool)
        is_call[calls] = True
        inputs = np.flatnonzero(is_call[t.node] & (t.role == Role.INPUT))
        shape = string_column(t.shape, inputs)
        inputs = inputs[(string_column(t.slot, inputs) == "0") & (shape != "") & (shape != "scalar")]  # a tensor
        first = dict(zip(t.node[inputs].tolist(), fingerprint[inputs].tolist()))
        wanted = np.fromiter(first.values(), np.int64, len(first))
        held = np.flatnonzero(np.isin(fingerprint, wanted) & ((t.role == Role.OUTPUT) | (t.role == Role.PARAM_GRAD)))
        holder_nodes = t.node[held]
        by_print: dict[int, list[tuple[float, int]]] = {}
        for fp, key, node in zip(fingerprint[held].tolist(), keys[holder_nodes].astype(np.float64).tolist(),
                                 holder_nodes.tolist()):
            by_print.setdefault(fp, []).append((key, node))
        call_keys = keys[np.fromiter(first, np.int64, len(first))].astype(np.float64).tolist()
        self.holders = {call: sorted(h for h in by_print.get(fp, ()) if h[0] < limit and h[1] != call)
                        for (call, fp), limit in zip(first.items(), call_keys)}

    def makers(self, partner: list[int]) -> dict[int, int]:
        """Per call, its earliest holder that has a partner."""
        out = {}
        for call, holders in self.holders.items():
            maker = next((node for _, node in holders if partner[node] >= 0), -1)
            if maker >= 0:
                out[call] = maker
        return out


def _pair_by_makers(walk: Walk, code: int, npu_inputs: _InputHolders, bench_inputs: _InputHolders) -> bool:
    """One round of `_between_modules_by_data`; True when it changed a pair."""
    npu, bench = walk.npu, walk.bench
    n2b, b2n = walk.npu_to_bench, walk.bench_to_npu
    offered: dict[tuple[str, int, int], list[int]] = {}
    for b, maker in bench_inputs.makers(b2n).items():
        offered.setdefault((api_name(bench.nodes.ids[b]), int(bench.nodes.direction[b]), maker), []).append(b)
    wanted = {}
    for n, maker in npu_inputs.makers(n2b).items():
        found = offered.get((api_name(npu.nodes.ids[n]), int(npu.nodes.direction[n]), n2b[maker]), [])
        if len(found) == 1 and n2b[n] != found[0]:
            wanted[n] = found[0]
    if not wanted or len(set(wanted.values())) != len(wanted):
        return False
    for n, b in wanted.items():  # release both sides' old partners, then pair
        if n2b[n] >= 0:
            b2n[n2b[n]] = -1
        if b2n[b] >= 0:
            n2b[b2n[b]] = -1
            walk.rule[b2n[b]] = RuleCode.UNMATCHED
    for n, b in wanted.items():
        n2b[n], b2n[b], walk.rule[n] = b, n, code
    return True


def non_crossing(positions: Sequence[tuple[int, int]]) -> list[int]:
    """Indices of the most pairs that keep execution order on both sides (none crosses another).

    `positions` are (npu position, bench position) pairs sorted by npu position; the answer is one of the
    longest subsequences whose bench positions increase, found in O(n log n).
    Two calls run in the same order in both runs, so of two pairs that cross, one is wrong.

    Examples
    --------
    >>> non_crossing([(0, 0), (1, 5), (2, 1), (3, 2), (4, 6)])
    [0, 2, 3, 4]
    """
    tails: list[int] = []  # tails[k]: the pair ending the increasing run of length k + 1 with the lowest end
    ends: list[int] = []  # the bench position of each tail
    before = [-1] * len(positions)
    for i, (_, b) in enumerate(positions):
        k = bisect_left(ends, b)
        before[i] = tails[k - 1] if k else -1
        if k == len(tails):
            tails.append(i)
            ends.append(b)
        else:
            tails[k], ends[k] = i, b
    out, i = [], tails[-1] if tails else -1
    while i >= 0:
        out.append(i)
        i = before[i]
    return out[::-1]


def flat_parents(graph: DumpGraph) -> np.ndarray:
    """Parent row of every row with group nodes skipped (a group's members count as the root's children)."""
    parent = graph.nodes.parent.astype(np.int64)
    in_group = (parent >= 0) & (graph.nodes.kind[np.maximum(parent, 0)] == NodeKind.GROUP)
    parent[in_group] = parent[parent[in_group]]
    return parent


def _child_pairs(walk: Walk, matcher: ChildMatcher, n_parent: int, b_parent: int, n_free: list[int],
                 b_free: list[int]) -> list[tuple[int, int]]:
    """What `matcher` pairs among the free children; an ordered matcher is asked gap by gap (see `ChildMatcher`)."""
    if not getattr(matcher, "ordered", False):
        return matcher.match_children(walk.npu, walk.bench, n_free, b_free)
    pairs = []
    for n_rows, b_rows in _gaps(walk, walk.npu_kids[n_parent], walk.bench_kids[b_parent], set(n_free), set(b_free)):
        if n_rows and b_rows:
            pairs.extend(matcher.match_children(walk.npu, walk.bench, n_rows, b_rows))
    return pairs


def _gaps(walk: Walk, npu_kids: list[int], bench_kids: list[int], n_free: set[int],
          b_free: set[int]) -> list[tuple[list[int], list[int]]]:
    """The free children between consecutive sibling pairs (those of them that do not cross), per side."""
    where = {b: j for j, b in enumerate(bench_kids)}
    n2b = walk.npu_to_bench
    anchors = [(i, where[n2b[n]]) for i, n in enumerate(npu_kids) if n2b[n] in where]
    kept = [anchors[k] for k in non_crossing(anchors)] + [(len(npu_kids), len(bench_kids))]
    gaps, n_from, b_from = [], 0, 0
    for i, j in kept:
        gaps.append(([n for n in npu_kids[n_from:i] if n in n_free], [b for b in bench_kids[b_from:j] if b in b_free]))
        n_from, b_from = i + 1, j + 1
    return gaps


def _entry_order(claim: Claim) -> int:
    return claim.entry if claim.entry >= 0 else 1 << 30


def _rule_matchers(matchers: Sequence[ChildMatcher | RuleMatcher]) -> list[tuple[int, RuleMatcher]]:
    """(code, matcher) of the rule matchers, in order."""
    return [(code, m) for code, m in enumerate(matchers, start=RuleCode.FIRST_MATCHER) if isinstance(m, RuleMatcher)]


def _pin(walk: Walk, matchers: Sequence[ChildMatcher | RuleMatcher], rich: list[bool]) -> list[tuple[int, int]]:
    pinned = []
    for code, matcher in _rule_matchers(matchers):
        matcher.prepare(walk.npu, walk.bench)
        pinned.extend((c.npu[0], c.bench[0]) for c in matcher.pins(walk.npu, walk.bench) if walk.apply(c, code))
        for n, b in matcher.blocks(walk.npu, walk.bench):  # before the next rule's pins: a manual unmatch holds
            walk.block(n, b, code)
    return pinned


def _table(
    walk: Walk, matchers: Sequence[ChildMatcher | RuleMatcher], rich: list[bool], rules: tuple[str, ...],
    plain: MatchTable,
) -> MatchTable:
    """`plain` (the pairs) with what the rule matchers report."""
    if not any(rich):
        return plain
    notes: list[RuleNote] = []
    renames: dict[str, dict[str, str]] = {}
    conflicts = walk.conflict_lines()
    for code, matcher in _rule_matchers(matchers):
        notes.extend(matcher.notes(walk.credit.get(code, {})))
        if matcher.rules is not None:
            conflicts.extend(matcher.rules.conflicts)
        for op, table in matcher.renames().items():
            merged = renames.setdefault(op, {})
            for old, new in table.items():
                merged.setdefault(old, new)
    return replace(plain, groups=tuple(walk.groups),
                   slot_maps=walk.slot_maps, slot_renames=renames, notes=tuple(notes), conflicts=tuple(conflicts))


def _flat_children(graph: DumpGraph) -> ChildLists:
    """Children per row, with group nodes replaced by their members and MindSpore's wrapper cells by what they
    hold (`wrapper_rows`)."""
    kids = children_rows(graph)
    hidden = set(np.flatnonzero(graph.nodes.kind == NodeKind.GROUP).tolist()) | wrapper_rows(graph)

    def through(rows: list[int]) -> list[int]:
        return [m for k in rows for m in (through(kids[k]) if k in hidden else [k])]

    for parent in {int(graph.nodes.parent[g]) for g in hidden} - hidden:
        kids[parent] = through(kids[parent])
    return kids


def _match_groups(
    npu: DumpGraph, bench: DumpGraph, npu_to_bench: np.ndarray, bench_to_npu: np.ndarray, rule: np.ndarray
) -> None:
    bench_parent = bench.nodes.parent
    for group in np.flatnonzero(npu.nodes.kind == NodeKind.GROUP).tolist():
        if npu_to_bench[group] >= 0:
            continue
        members = np.flatnonzero(npu.nodes.parent == group)
        partners = npu_to_bench[members]
        votes = Counter(int(bench_parent[b]) for b in partners[partners >= 0])
        for candidate, _ in votes.most_common():
            if bench.nodes.kind[candidate] == NodeKind.GROUP and bench_to_npu[candidate] < 0:
                npu_to_bench[group], bench_to_npu[candidate], rule[group] = candidate, group, RuleCode.GROUP
                break
