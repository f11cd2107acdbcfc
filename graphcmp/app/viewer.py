"""The server side of the viewer: the result set, a view model per loaded result, cached pane geometry.

`Viewer.render(state)` turns a `ViewState` into everything the page shows (elements of both
panes, details, hit list, legend); callbacks only decide which action a click means.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from graphcmp.app.colors import Scheme, legend_items
from graphcmp.app.elements import PaneStyle, pane_colors, pane_elements
from graphcmp.app.find import SearchError, find_hits
from graphcmp.app.layout import PaneGeometry, layout_pane
from graphcmp.app.model import ViewModel
from graphcmp.app.results import ResultSet
from graphcmp.app.state import ViewState

__all__ = ["Rendered", "Viewer"]

_GEOMETRIES = 64


@dataclass(frozen=True, slots=True)
class Rendered:
    """What one state shows: per-pane elements and the search outcome."""

    elements: dict[str, list[dict]]
    hits: tuple[tuple[str, int], ...]
    search_error: str
    scheme: Scheme


class Viewer:
    """Holds the results being served and answers with views of them; thread-safe."""

    def __init__(self, results: ResultSet) -> None:
        self.results = results
        self._models: OrderedDict[str, ViewModel] = OrderedDict()
        self._geometry: OrderedDict[tuple, PaneGeometry] = OrderedDict()
        self._lock = threading.Lock()

    def model(self, key: str) -> ViewModel:
        """The view model of a result (built on first use; as many kept as the result set keeps documents)."""
        key = self.results.entry(key).key
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key]
        model = ViewModel(self.results.document(key))
        with self._lock:
            self._models[key] = model
            while len(self._models) > 2:
                self._models.popitem(last=False)
        return model

    def prepare(self, key: str) -> None:
        """Build the slow parts of a result's model (findings, summary, indexes) before the first page asks."""
        model = self.model(key)
        _ = model.analysis, model.summary_rows, model.overflow, model.tensor_rows(model.sides[0], 0)

    def geometry(self, state: ViewState, side: str) -> PaneGeometry:
        """Layout of one pane for the state's open modules, pages and micro-step (cached)."""
        key = (state.result, side, state.open[side], tuple(sorted(state.pages[side].items())), state.micro)
        with self._lock:
            if key in self._geometry:
                self._geometry.move_to_end(key)
                return self._geometry[key]
        geo = layout_pane(self.model(state.result).trees[side], state.open[side], state.pages[side], state.micro)
        with self._lock:
            self._geometry[key] = geo
            while len(self._geometry) > _GEOMETRIES:
                self._geometry.popitem(last=False)
        return geo

    def hits(self, state: ViewState) -> tuple[tuple[tuple[str, int], ...], str]:
        """Search/filter hits of the state, and the error text of a bad regex ("" when fine)."""
        try:
            return find_hits(self.model(state.result), state.query, state.filters, state.micro), ""
        except SearchError as err:
            return (), str(err)

    def render(self, state: ViewState, sides: tuple[str, ...] | None = None) -> Rendered:
        """Elements of the panes in `sides` (default: all) for `state`."""
        model = self.model(state.result)
        hits, error = self.hits(state)
        scheme = model.scheme(state.metric, state.bins)
        elements = {}
        for side in sides if sides is not None else model.sides:
            on_side = frozenset(r for s, r in hits if s == side)
            elements[side] = pane_elements(model, side, self.geometry(state, side), PaneStyle(scheme, on_side))
        return Rendered(elements, hits, error, scheme)

    def legend(self, scheme: Scheme) -> list[tuple[str, str]]:
        return legend_items(scheme)

    def colors(self, state: ViewState, side: str) -> dict[int, str]:
        """Fill colour per drawn row of a pane (for the SVG export)."""
        model = self.model(state.result)
        geo = self.geometry(state, side)
        cells = [c for c in geo.cells if not c.pager]
        rows = np.fromiter((c.row for c in cells), np.int64, len(cells))
        boxes = np.fromiter((c.is_box for c in cells), bool, len(cells))
        colors = pane_colors(model, side, rows, boxes, model.scheme(state.metric, state.bins))
        return dict(zip(rows.tolist(), colors))
