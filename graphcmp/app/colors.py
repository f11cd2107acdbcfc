"""Node colours: the one place that maps verdicts, roles, or a metric binned at user-set edges, to colours.

A *colour scheme* is the verdict or the noise model's role (categorical), or a numeric per-node
value binned by edges; `node_colors` returns one CSS colour per requested row and `legend_items` the matching
legend. Values are looked up in the report (`NodeVerdicts`, pair metric columns), never recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from graphcmp.core.judge import SKIP, STATUS_NAMES, UNMATCHED
from graphcmp.core.noise import NodeRole
from graphcmp.core.rules import ERROR, PASS, WARNING

__all__ = [
    "KIND_COLORS",
    "NAN_COLOR",
    "NONE_COLOR",
    "ROLE_COLORS",
    "STATUS_COLORS",
    "Scheme",
    "bin_colors",
    "legend_items",
    "node_colors",
    "parse_edges",
]

STATUS_COLORS = {PASS: "#43a047", WARNING: "#fbc02d", ERROR: "#e53935", SKIP: "#cfd8dc", UNMATCHED: "#ffffff"}
ROLE_COLORS = {NodeRole.ORIGIN: "#b71c1c", NodeRole.PROPAGATED: "#ff8a65", NodeRole.WITHIN_NOISE: "#a5d6a7",
               NodeRole.NOT_COMPARED: "#eceff1"}
ROLE_NAMES = {NodeRole.ORIGIN: "origin of the divergence", NodeRole.PROPAGATED: "propagated from an origin",
              NodeRole.WITHIN_NOISE: "within the noise of its precision", NodeRole.NOT_COMPARED: "not compared"}
KIND_COLORS = {1: "#bbdefb", 2: "#eceff1", 3: "#e1bee7", 4: "#fff9c4"}  # a single run: module, api, grads, group
KIND_NAMES = {1: "module", 2: "API call", 3: "parameter gradients", 4: "group of top-level calls"}
NAN_COLOR = "#8e24aa"  # a metric that is NaN (overflow on one side)
NONE_COLOR = "#eceff1"  # no value: the node has no compared outputs
_RAMP = ((0x43, 0xA0, 0x47), (0xFB, 0xC0, 0x2D), (0xE5, 0x39, 0x35))  # green, amber, red


@dataclass(frozen=True, slots=True)
class Scheme:
    """How nodes are coloured: ``metric`` is "verdict" or "role" ("none": a single run) or a numeric column;
    ``edges`` bin it."""

    metric: str
    edges: tuple[float, ...] = ()
    higher_is_better: bool = False

    @property
    def categorical(self) -> bool:
        return self.metric in ("verdict", "role", "none")


def parse_edges(text: str | None) -> tuple[float, ...] | None:
    """Bin edges typed by the user (commas or spaces), sorted; None when the text is not a list of numbers.

    >>> parse_edges("1e-2, 1e-3")
    (0.001, 0.01)
    >>> parse_edges("a, 1") is None
    True
    """
    parts = [p for p in (text or "").replace(",", " ").split() if p]
    try:
        values = sorted({float(p) for p in parts})
    except ValueError:
        return None
    if not values or len(values) > 8 or not all(np.isfinite(values)):
        return None
    return tuple(values)


def bin_colors(n_bins: int, higher_is_better: bool = False) -> list[str]:
    """`n_bins` colours from green (good) through amber to red (bad).

    >>> bin_colors(3)
    ['#43a047', '#fbc02d', '#e53935']
    """
    out = []
    for k in range(n_bins):
        t = k / (n_bins - 1) if n_bins > 1 else 0.0
        t = 1.0 - t if higher_is_better else t
        seg = min(int(t * 2), 1)
        f = t * 2 - seg
        rgb = [round(a + (b - a) * f) for a, b in zip(_RAMP[seg], _RAMP[seg + 1])]
        out.append("#" + "".join(f"{c:02x}" for c in rgb))
    return out


def node_colors(
    scheme: Scheme, status: np.ndarray | None = None, values: np.ndarray | None = None,
    present: np.ndarray | None = None,
) -> list[str]:
    """CSS colour per node: by verdict or role code (`status`) or by `values` binned at the scheme's edges.

    Examples
    --------
    >>> node_colors(Scheme("verdict"), status=np.array([2, 0]))
    ['#e53935', '#43a047']
    >>> node_colors(Scheme("role"), status=np.array([3, 1]))
    ['#b71c1c', '#a5d6a7']
    >>> node_colors(Scheme("rel_err", (1e-3, 1e-2)), values=np.array([5e-3, np.nan, 0.0]),
    ...             present=np.array([True, True, False]))
    ['#fbc02d', '#8e24aa', '#eceff1']
    """
    if scheme.categorical:
        if status is None:
            return [NONE_COLOR] * (0 if values is None else len(values))
        palette = ROLE_COLORS if scheme.metric == "role" else STATUS_COLORS
        return [palette.get(s, NONE_COLOR) for s in status.tolist()]
    palette = bin_colors(len(scheme.edges) + 1, scheme.higher_is_better)
    side = "right" if scheme.higher_is_better else "left"
    idx = np.clip(np.searchsorted(np.asarray(scheme.edges), values, side=side), 0, len(palette) - 1)
    return [NONE_COLOR if not p else NAN_COLOR if v != v else palette[i]
            for v, p, i in zip(values.tolist(), present.tolist(), idx.tolist())]


def legend_items(scheme: Scheme) -> list[tuple[str, str]]:
    """(colour, text) pairs describing `scheme`."""
    if scheme.metric == "none":
        return [(KIND_COLORS[k], KIND_NAMES[k]) for k in KIND_COLORS]
    if scheme.metric == "role":
        return [(ROLE_COLORS[r], ROLE_NAMES[r]) for r in sorted(NodeRole, reverse=True)]
    if scheme.categorical:
        return [(STATUS_COLORS[c], STATUS_NAMES[c]) for c in (ERROR, WARNING, PASS, SKIP)]
    edges = scheme.edges
    palette = bin_colors(len(edges) + 1, scheme.higher_is_better)
    if scheme.higher_is_better:  # bins are (lo, hi]: a value equal to an edge counts as the worse side
        texts = [f"< {edges[0]:g}"] + [f"{a:g} – {b:g}" for a, b in pairwise(edges)] + [f"≥ {edges[-1]:g}"]
    else:
        texts = [f"≤ {edges[0]:g}"] + [f"{a:g} – {b:g}" for a, b in pairwise(edges)] + [f"> {edges[-1]:g}"]
    return [*zip(palette, texts), (NAN_COLOR, "NaN"), (NONE_COLOR, "no value")]
