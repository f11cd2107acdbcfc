"""The server side of the viewer: the result set, a view model per loaded result, cached pane geometry.

`Viewer.render(state)` turns a `ViewState` into everything the page shows (elements of both
panes, details, hit list, legend); callbacks only decide which action a click means.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from graphcmp.app.colors import Scheme, legend_items
from graphcmp.app.elements import PaneStyle, pane_colors, pane_elements
from graphcmp.app.find import SearchError, find_hits, id_text
from graphcmp.app.job import Peer
from graphcmp.app.layout import PaneGeometry, layout_pane
from graphcmp.app.model import ViewModel
from graphcmp.app.results import ResultSet
from graphcmp.app.state import ViewState, selected_rows
from graphcmp.core.compare import apply_manual_matches
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.matching.manual import ManualMatches, load_manual_matches, save_manual_matches
from graphcmp.core.report import CompareReport

__all__ = ["Rendered", "Viewer"]

_GEOMETRIES = 64
COMM_PREFIX = "Distributed."  # msprobe's communication calls


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

    def can_match(self, key: str) -> bool:
        """True when manual matches of the result can be saved: a report read from a file."""
        return bool(self.results.entry(key).sidecar) and self.model(key).paired

    def manual(self, key: str) -> ManualMatches:
        """The manual matches saved for a result (empty when it has no sidecar yet)."""
        entry = self.results.entry(key)
        if entry.sidecar and Path(entry.sidecar).is_file():
            return load_manual_matches(entry.sidecar)
        report = self.model(key).report
        return ManualMatches(npu_path=report.npu.info.path, bench_path=report.bench.info.path)

    def decide(self, key: str, manual: ManualMatches) -> None:
        """Save `manual` to the result's sidecar (the only file the viewer writes) and recompare with it.

        Raises
        ------
        GraphcmpError
            The result has no sidecar (two dump folders) or the sidecar cannot be written.
        """
        entry = self.results.entry(key)
        if not self.can_match(entry.key):
            raise DumpFormatError(f"{entry.source}: manual matches need a result file (graphcmp compare -o)")
        report = self.model(entry.key).report
        assert isinstance(report, CompareReport)
        updated = apply_manual_matches(report, manual)
        save_manual_matches(manual, entry.sidecar)
        self.results.replace(entry.key, updated)
        with self._lock:
            self._models.pop(entry.key, None)
        self.prepare(entry.key)

    def peers(self, key: str, node: str) -> list[Peer]:
        """Linked calls on other ranks of communication call `node` of a result (from the batch index)."""
        job, entry = self.results.job, self.results.entry(key)
        if job is None or not node.startswith(COMM_PREFIX):
            return []
        return job.peers(entry.step, entry.rank, node)

    def prepare(self, key: str) -> None:
        """Build the slow parts of a result's model (findings, summary, indexes) before the first page asks."""
        model = self.model(key)
        _ = model.analysis, model.summary_rows, model.overflow, model.tensor_rows(model.sides[0], 0), model.flows
        for side in model.sides:
            id_text(model, side).prepare()

    def geometry(self, state: ViewState, side: str) -> PaneGeometry:
        """Layout of one pane for the state's open modules, pages and micro-step (cached)."""
        key = (state.result, side, state.open[side], tuple(sorted(state.pages[side].items())), state.micro)
        with self._lock:
            if key in self._geometry:
                self._geometry.move_to_end(key)
                return self._geometry[key]
        model = self.model(state.result)
        geo = layout_pane(model.trees[side], state.open[side], state.pages[side], state.micro, model.flows[side])
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
        selected = selected_rows(state, model)
        elements = {}
        for side in sides if sides is not None else model.sides:
            on_side = frozenset(r for s, r in hits if s == side)
            style = PaneStyle(scheme, on_side, _drawn(model, side, selected.get(side, -1)))
            elements[side] = pane_elements(model, side, self.geometry(state, side), style)
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


def _drawn(model: ViewModel, side: str, row: int) -> int:
    """The row drawn for `row`: itself, or the consumer it is folded into."""
    into = model.trees[side].folded_into
    return int(into[row]) if row >= 0 and into is not None and into[row] >= 0 else row
