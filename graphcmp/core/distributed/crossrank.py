"""Which rank went wrong first, where, and how it spread — from the batch entries alone.

A rank can be contaminated only through a communication call after another rank diverged. A
rank's first divergence is *explained* when, at or before it, the rank took part in a link with a
rank that had diverged strictly before its own part of that link. Unexplained first divergences
are origins; the earliest step's origins are the answer, and the spread follows the links from the
origin in execution order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from graphcmp.core.distributed.links import CommCall, Link, link_calls

__all__ = ["job_analysis"]


def job_analysis(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Cross-rank links per step, origin rank(s) of divergence, and the path by which it spread.

    Examples
    --------
    >>> job_analysis([{"step": 0, "rank": 0, "error": None, "first": None, "comm": []}])["origin"] is None
    True
    """
    by_step: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        if entry.get("error") is None:
            by_step[entry["step"]].append(entry)
    steps = {}
    origins: list[dict[str, Any]] = []
    for step in sorted(by_step, key=lambda s: -1 if s is None else s):
        result = _step_analysis(by_step[step])
        steps[str(step)] = result
        if not origins and result["origins"]:
            origins = result["origins"]
    return {"origin": origins[0] if origins else None, "origins": origins, "steps": steps}


def _step_analysis(entries: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [CommCall.from_list(e["rank"] if e["rank"] is not None else 0, c) for e in entries for c in e["comm"]]
    links = link_calls(calls)
    first = {(e["rank"] or 0): e["first"] for e in entries if e.get("first")}
    origins = [
        {**first[rank], "rank": rank} for rank in sorted(first) if not _explained(rank, first, links)
    ]
    unlinked = sorted({(r, n) for link in links if not link.complete for r, n, _ in link.members})
    return {
        "links": len(links),
        "linked_calls": sum(len(link.members) for link in links if link.complete),
        "unlinked_calls": [{"rank": r, "node": n} for r, n in unlinked],
        "origins": origins,
        "spread": _spread(origins, first, links) if origins else [],
    }


def _sends_diverged(link: Link, rank: int, position: int, first: dict[int, dict[str, Any]]) -> bool:
    """True when `rank`'s part of `link` already carried divergent data.

    Strictly before its part for symmetric collectives (two ranks diverging at the same all_reduce do
    not explain each other); at or before it for the root of a rooted collective, whose input is what
    it sends.
    """
    if rank not in first:
        return False
    at_root = f"|root={rank}|" in link.key
    return first[rank]["position"] <= position if at_root else first[rank]["position"] < position


def _explained(rank: int, first: dict[int, dict[str, Any]], links: list[Link]) -> bool:
    own = first[rank]["position"]
    for link in links:
        mine = [pos for r, _, pos in link.members if r == rank and pos <= own]
        if mine and any(r != rank and _sends_diverged(link, r, pos, first) for r, _, pos in link.members):
            return True
    return False


def _spread(origins: list[dict[str, Any]], first: dict[int, dict[str, Any]], links: list[Link]) -> list[dict]:
    """Ranks reached from the origins, each with the link that reached it first (by the source's order)."""
    reached = {o["rank"] for o in origins}
    path = []
    ordered = sorted(links, key=lambda link: min(pos for _, _, pos in link.members))
    changed = True
    while changed:
        changed = False
        for link in ordered:
            sources = [(r, n, p) for r, n, p in link.members if r in reached and _sends_diverged(link, r, p, first)]
            if not sources:
                continue
            for r, n, p in link.members:
                if r not in reached and r in first and first[r]["position"] >= p:
                    src = sources[0]
                    reached.add(r)
                    changed = True
                    path.append({"rank": r, "via": n, "from_rank": src[0], "from_node": src[1], "link": link.key,
                                 "first": first[r]["node"]})
    return path
