"""The view state (result, open modules, pages, selection, search, filters, colours) and its URL form.

The state is a small frozen value. Every user action is a pure function from state to state
(`toggle`, `turn_page`, `select`, `reveal`), so the page is a function of the URL: a link
reproduces the view, and tests drive actions without a browser. Open modules are kept in the order
they were opened; past `MAX_VISIBLE` nodes in a pane the oldest unrelated ones close again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from urllib.parse import parse_qs, urlencode

from graphcmp.app.layout import PAGE, page_of, visible_children
from graphcmp.app.model import SIDES, ViewModel

__all__ = [
    "DETAILS_HEIGHT", "FILTERS", "FRAME_KEYS", "MAX_VISIBLE", "SIDEBAR_WIDTH", "TABS", "ViewState", "as_index",
    "clamp_size", "known_filters", "pick", "reveal", "select", "selected_rows",
    "toggle", "turn_page", "visible_count",
]

MAX_VISIBLE = 1500
"""Most nodes (and pager boxes) one pane shows; opening more closes the oldest unrelated modules."""
FILTERS = ("error", "warning", "pass", "skip", "unmatched", "overflow", "only-npu", "only-bench", "renamed")
"""Filters of the hit list: verdicts, overflow, and the structure diff (nodes only in one run, or renamed)."""
_MAX_QUERY = 300
TABS = ("details", "chart", "op", "table")
"""Tabs of the bottom panel: the selected node's details, the error chart over execution order, the single-op
view of a node's real tensors, and the table of compared tensors."""
SIDEBAR_WIDTH, DETAILS_HEIGHT = (160, 900), (80, 900)
"""Bounds (px) of the sidebar's width and the bottom panel's height the user can drag them to."""
FRAME_KEYS = frozenset({"sb", "sbw", "dt", "dth", "tab"})
"""URL keys of the page's frame (panels shown, their sizes, the tab): they say nothing about the view of the graph."""


@dataclass(frozen=True, slots=True)
class ViewState:
    """Everything that defines what the page shows (rows are rows of the result's runs)."""

    result: str = ""
    micro: int | None = None
    open: dict[str, tuple[int, ...]] = field(default_factory=lambda: {s: () for s in SIDES})
    pages: dict[str, dict[int, int]] = field(default_factory=lambda: {s: {} for s in SIDES})
    selected: tuple[str, str] | None = None  # (side, node id)
    sync: bool = True
    metric: str = ""
    bins: str = ""
    query: str = ""
    filters: tuple[str, ...] = ()
    hit: int = 0
    picked: tuple[str, str] = ("", "")  # the last node selected on each side (npu, bench): a manual match's pair
    sidebar: bool = True  # the sidebar is shown
    sidebar_w: int = 0  # its width in px (0: the page's default)
    bottom: bool = True  # the bottom panel (details, chart, single op, table) is shown
    bottom_h: int = 0  # its height in px (0: the page's default)
    tab: str = "details"  # the bottom panel's tab (`TABS`)

    def to_query(self) -> str:
        """The URL query string (with the leading ``?``) of this state.

        >>> s = ViewState(result="s0r0", open={"npu": (4, 5), "bench": (4,)}, selected=("npu", "a<b>"))
        >>> ViewState.from_query(s.to_query()) == s
        True
        """
        q = {"res": self.result, "micro": "" if self.micro is None else self.micro,
             "open": ".".join(map(str, self.open["npu"])), "openb": ".".join(map(str, self.open["bench"])),
             "pg": _pages_text(self.pages["npu"]), "pgb": _pages_text(self.pages["bench"]),
             "sel": f"{self.selected[0]}:{self.selected[1]}" if self.selected else "",
             "sync": "1" if self.sync else "0", "metric": self.metric, "bins": self.bins, "q": self.query,
             "f": ",".join(self.filters), "hit": self.hit or "", "pn": self.picked[0], "pb": self.picked[1],
             "sb": "" if self.sidebar else "0", "sbw": self.sidebar_w or "", "dt": "" if self.bottom else "0",
             "dth": self.bottom_h or "", "tab": "" if self.tab == "details" else self.tab}
        return "?" + urlencode({k: v for k, v in q.items() if v != ""})

    @classmethod
    def from_query(cls, search: object) -> ViewState:
        """Parse a URL query string; unknown or malformed values (or anything but a string) fall back to the defaults.

        >>> ViewState.from_query(5) == ViewState.from_query(["?q=a"]) == ViewState()
        True
        """
        text = search if isinstance(search, str) else ""
        q = {k: v[-1] for k, v in parse_qs(text.lstrip("?"), keep_blank_values=True).items()}
        sel = q.get("sel", "")
        side, _, node = sel.partition(":")
        return cls(
            result=q.get("res", ""), micro=_int(q.get("micro")),
            open={"npu": _ints(q.get("open")), "bench": _ints(q.get("openb"))},
            pages={"npu": _pages(q.get("pg")), "bench": _pages(q.get("pgb"))},
            selected=(side, node) if side in SIDES and node else None, sync=q.get("sync", "1") != "0",
            metric=q.get("metric", ""), bins=q.get("bins", ""), query=q.get("q", "")[:_MAX_QUERY],
            filters=known_filters(q.get("f", "").split(",")), hit=max(_int(q.get("hit")) or 0, 0),
            picked=(q.get("pn", ""), q.get("pb", "")),
            sidebar=q.get("sb", "1") != "0", sidebar_w=clamp_size(_int(q.get("sbw")), SIDEBAR_WIDTH),
            bottom=q.get("dt", "1") != "0", bottom_h=clamp_size(_int(q.get("dth")), DETAILS_HEIGHT),
            tab=q.get("tab", "details") if q.get("tab") in TABS else "details",
        )

    def with_frame(self, other: ViewState) -> ViewState:
        """This state with the frame of `other` (panels shown, their sizes, the tab): a jump keeps the page's frame."""
        return replace(self, sidebar=other.sidebar, sidebar_w=other.sidebar_w, bottom=other.bottom,
                       bottom_h=other.bottom_h, tab=other.tab)

    def clean(self, model: ViewModel) -> ViewState:
        """Drop rows that the model does not have (a link made for another result)."""
        opened = {s: tuple(r for r in self.open[s] if s in model.trees and 0 < r < len(model.trees[s]))
                  for s in SIDES}
        pages = {s: {r: p for r, p in self.pages[s].items() if r == 0 or r in opened[s]} for s in SIDES}
        selected = self.selected if self.selected and model.row_of(*self.selected) is not None else None
        picked = tuple(p if p and model.row_of(s, p) is not None else "" for s, p in zip(SIDES, self.picked))
        return replace(self, open=opened, pages=pages, selected=selected, picked=picked)


def as_index(text: object) -> int | None:
    """A non-negative number written in ASCII digits (at most 18 of them), else None.

    >>> as_index("12"), as_index("-1"), as_index("１"), as_index("9" * 5000), as_index(3)
    (12, None, None, None, None)
    """
    if isinstance(text, str) and 0 < len(text) <= 18 and text.isascii() and text.isdigit():
        return int(text)
    return None


def clamp_size(value: int | None, bounds: tuple[int, int]) -> int:
    """A panel size in px within `bounds`; 0 (the default size) for none.

    >>> clamp_size(None, (160, 900)), clamp_size(20, (160, 900)), clamp_size(5000, (160, 900)), clamp_size(3, (1, 9))
    (0, 160, 900, 3)
    """
    return 0 if not value or value <= 0 else min(max(value, bounds[0]), bounds[1])


def known_filters(names: list[str]) -> tuple[str, ...]:
    """The names among `names` that are filters (`FILTERS`), each once, in the order given.

    >>> known_filters(["error", "e", "r", "error", "overflow"])
    ('error', 'overflow')
    """
    return tuple(dict.fromkeys(n for n in names if n in FILTERS))


def _pages_text(pages: dict[int, int]) -> str:
    return ".".join(f"{r}:{p}" for r, p in sorted(pages.items()) if p)


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _ints(text: str | None) -> tuple[int, ...]:
    out = []
    for part in (text or "").split("."):
        v = _int(part)
        if v is not None and v > 0 and v not in out:
            out.append(v)
    return tuple(out)


def _pages(text: str | None) -> dict[int, int]:
    out = {}
    for part in (text or "").split("."):
        r, _, p = part.partition(":")
        row, page = _int(r), _int(p)
        if row is not None and page is not None and page > 0:
            out[row] = page
    return out


# ---- actions ------------------------------------------------------------------------------------

def visible_count(model: ViewModel, side: str, open_rows: tuple[int, ...], micro: int | None) -> int:
    """Nodes one pane would draw with `open_rows` open (pages and pager boxes counted, closed branches not)."""
    tree = model.trees[side]
    shown = {0} | set(open_rows)
    total = 0
    for row in shown:
        if all(a in shown for a in tree.ancestors(row)):
            total += min(len(visible_children(tree, row, micro)), PAGE) + 2
    return total


def toggle(state: ViewState, model: ViewModel, side: str, row: int) -> ViewState:
    """Open a closed module or close an open one; with sync on, its twin follows in the other pane."""
    if not model.trees[side].n_children[row]:
        return state
    opening = row not in state.open[side]
    state = _set_open(state, model, side, row, opening)
    twin = model.twin(side, row) if state.sync else -1
    other = model.other(side)
    if twin > 0 and other in model.trees and model.trees[other].n_children[twin]:
        state = _set_open(state, model, other, twin, opening)
    return state


def _set_open(state: ViewState, model: ViewModel, side: str, row: int, opening: bool) -> ViewState:
    tree = model.trees[side]
    current = state.open[side]
    if opening:
        path = [a for a in tree.ancestors(row) if a] + [row]
        rows = tuple(r for r in current if r not in path) + tuple(path)
        rows = _limit(model, side, rows, set(path), state.micro)
    else:
        rows = tuple(r for r in current if r != row and row not in tree.ancestors(r))
    return replace(state, open={**state.open, side: rows})


def _limit(model: ViewModel, side: str, rows: tuple[int, ...], keep: set[int], micro: int | None) -> tuple[int, ...]:
    """Close the oldest modules outside `keep` until the pane shows at most MAX_VISIBLE nodes."""
    rows = list(rows)
    while visible_count(model, side, tuple(rows), micro) > MAX_VISIBLE:
        victim = next((r for r in rows if r not in keep), None)
        if victim is None:
            break
        tree = model.trees[side]
        rows = [r for r in rows if r != victim and victim not in tree.ancestors(r)]
    return tuple(rows)


def turn_page(state: ViewState, model: ViewModel, side: str, row: int, step: int) -> ViewState:
    """Show the previous (-1) or next (+1) page of `row`'s children; with sync on the twin pane follows."""
    tree = model.trees[side]
    n_pages = max(1, -(-len(visible_children(tree, row, state.micro)) // PAGE))
    page = min(max(state.pages[side].get(row, 0) + step, 0), n_pages - 1)
    state = replace(state, pages={**state.pages, side: _with_page(state.pages[side], row, page)})
    kids = visible_children(tree, row, state.micro)
    twin = model.twin(side, int(kids[page * PAGE])) if state.sync and len(kids) else -1
    return reveal(state, model, model.other(side), twin) if twin >= 0 else state


def reveal(state: ViewState, model: ViewModel, side: str, row: int) -> ViewState:
    """Open the ancestors of `row` and turn their pages so that `row` is drawn (a node folded into its consumer:
    so that the consumer is)."""
    if side not in model.trees or row < 0:
        return state
    tree = model.trees[side]
    if tree.folded_into is not None and tree.folded_into[row] >= 0:
        row = int(tree.folded_into[row])
    micro = state.micro
    if micro is not None and int(tree.graph.nodes.micro_step[row]) != micro:
        micro = None
        state = replace(state, micro=None)
    path = [a for a in tree.ancestors(row) if a]
    current = state.open[side]
    rows = _limit(model, side, tuple(r for r in current if r not in path) + tuple(path), set(path), micro)
    pages = state.pages[side]
    for parent, child in zip([0, *path], [*path, row]):
        pages = _with_page(pages, parent, page_of(tree, parent, child, micro))
    return replace(state, open={**state.open, side: rows}, pages={**state.pages, side: pages})


def _with_page(pages: dict[int, int], row: int, page: int) -> dict[int, int]:
    """`pages` with `row` on `page` (page 0 is the default and not stored, so states compare equal)."""
    out = {r: p for r, p in pages.items() if r != row}
    if page:
        out[row] = page
    return out


def pick(state: ViewState, model: ViewModel, side: str, row: int) -> ViewState:
    """Select a node and remember it as the picked node of its side (see `ViewState.picked`)."""
    node = model.graphs[side].nodes.ids[row]
    picked = (node, state.picked[1]) if side == "npu" else (state.picked[0], node)
    return replace(state, selected=(side, node), picked=picked)


def select(state: ViewState, model: ViewModel, side: str, row: int) -> ViewState:
    """Select (and pick) a node, make it visible, and make its twin visible in the other pane."""
    state = pick(state, model, side, row)
    state = reveal(state, model, side, row)
    twin = model.twin(side, row)
    return reveal(state, model, model.other(side), twin) if twin >= 0 else state


def selected_rows(state: ViewState, model: ViewModel) -> dict[str, int]:
    """Row of the selected node per side (its twin on the other side), empty when nothing is selected."""
    if not state.selected:
        return {}
    side, node = state.selected
    row = model.row_of(side, node)
    if row is None:
        return {}
    out = {side: row}
    twin = model.twin(side, row)
    if twin >= 0:
        out[model.other(side)] = twin
    return out

