"""SVG export of a pane, drawn from the same geometry, colours and edges the browser shows.

Built on the server from the layout (cytoscape.js needs an extra bundle for SVG), with every label
escaped as XML text. Edges are straight lines from the bottom of their source to the top of their
target, red on the contamination path, dashed for control edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from graphcmp.app.elements import DrawnEdge
from graphcmp.app.layout import HEADER, Cell, PaneGeometry

__all__ = ["pane_svg"]

_MARGIN = 20.0


def pane_svg(geo: PaneGeometry, colors: dict[int, str], title: str, names: dict[int, str] | None = None,
             edges: Sequence[DrawnEdge] = ()) -> str:
    """An SVG document of the cells of `geo` and the `edges` between them; `colors` maps rows to fill colours,
    `names` to full node ids (shown as tooltips).

    Examples
    --------
    >>> from graphcmp.app.layout import Cell, PaneGeometry
    >>> import numpy as np
    >>> geo = PaneGeometry((Cell(1, 50, 20, 80, 30, -1, label="<img src=x>"),), np.zeros(2, bool))
    >>> "&lt;img src=x&gt;" in pane_svg(geo, {1: "#fff"}, "npu")
    True
    """
    if geo.cells:
        x0 = min(c.x - c.w / 2 for c in geo.cells) - _MARGIN
        y0 = min(c.y - c.h / 2 for c in geo.cells) - _MARGIN - HEADER
        x1 = max(c.x + c.w / 2 for c in geo.cells) + _MARGIN
        y1 = max(c.y + c.h / 2 for c in geo.cells) + _MARGIN
    else:
        x0, y0, x1, y1 = 0.0, 0.0, 100.0, 100.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="{x0:.1f} {y0:.1f} {x1 - x0:.1f} {y1 - y0:.1f}" '
           f'width="{x1 - x0:.0f}" height="{y1 - y0:.0f}" font-family="sans-serif" font-size="12">',
           f"<title>{escape(title)}</title>",
           f'<rect x="{x0:.1f}" y="{y0:.1f}" width="100%" height="100%" fill="#ffffff"/>']
    names = names or {}
    for c in sorted(geo.cells, key=lambda c: not c.is_box):
        out.append(_cell(c, colors.get(c.row, "#eceff1"), "" if c.pager else names.get(c.row, "")))
    if edges:
        out.append('<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
                   'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
                   'fill="context-stroke"/></marker></defs>')
        drawn = {c.row: c for c in geo.cells if not c.pager}
        out.extend(_edge(drawn[e.src], drawn[e.dst], e) for e in edges if e.src in drawn and e.dst in drawn)
    out.append("</svg>")
    return "\n".join(out)


def _edge(a: Cell, b: Cell, edge: DrawnEdge) -> str:
    down = b.y >= a.y
    y0 = a.y + (a.h / 2 if down else -a.h / 2)
    y1 = b.y - (b.h / 2 if down else -b.h / 2)
    stroke = "#c62828" if edge.hot else "#78909c" if edge.data else "#b0bec5"
    dash = "" if edge.data or edge.hot else ' stroke-dasharray="4 3"'
    return (f'<line x1="{a.x:.1f}" y1="{y0:.1f}" x2="{b.x:.1f}" y2="{y1:.1f}" stroke="{stroke}" '
            f'stroke-width="{3 if edge.hot else 1.5}"{dash} marker-end="url(#arrow)"/>')


def _cell(c, color: str, name: str) -> str:
    left, top = c.x - c.w / 2, c.y - c.h / 2
    label = escape(c.label)
    tip = f"<title>{escape(name)}</title>" if name else ""
    if c.is_box:
        return (f'<g>{tip}<rect x="{left:.1f}" y="{top + HEADER:.1f}" width="{c.w:.1f}" '
                f'height="{c.h - HEADER:.1f}" rx="6" '
                f'fill={quoteattr(color)} fill-opacity="0.08" stroke={quoteattr(color)} stroke-width="3"/>'
                f'<text x="{c.x:.1f}" y="{top + HEADER - 6:.1f}" text-anchor="middle" font-weight="bold">{label}</text>'
                "</g>")
    fill = "#e3f2fd" if c.pager else color
    lines = c.label.split("\n")
    first = c.y + 4 - 8 * (len(lines) - 1)
    text = "".join(f'<tspan x="{c.x:.1f}" y="{first + 16 * k:.1f}">{escape(line)}</tspan>'
                   for k, line in enumerate(lines))
    return (f'<g>{tip}<rect x="{left:.1f}" y="{top:.1f}" width="{c.w:.1f}" height="{c.h:.1f}" rx="6" '
            f'fill={quoteattr(fill)} stroke="#546e7a"/>'
            f'<text x="{c.x:.1f}" y="{c.y + 4:.1f}" text-anchor="middle">{text}</text></g>')
