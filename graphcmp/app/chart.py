"""The error chart: each compared call's output error over execution order, on a log scale, with the noise its
precision allows drawn behind it and the origins marked (MindStudio's precision scatter, with the noise model).

The points are the noise model's compared leaf calls (`NoiseModel.leaves`, in execution order) and their output
error (`output_error`); the band is the error rounding alone allows each call: the model's allowance
``G (in + u sqrt(n) + l)`` (`NoiseModel.allowed`) with its inputs' error ``in`` capped at the run's noise level
(`NoiseModel.noise_level`, the largest error before the first origin), that is, what the call would show if its
inputs carried noise only. Calls within the noise sit in the band; an origin and what it contaminated stand
above it. A run of more than `MAX_POINTS` calls is drawn by its envelope: per bucket of consecutive calls
the one of the largest error, plus every origin and the selected call, so the jump at the first divergence and
every origin survive whatever the size; the band is the largest allowance per bucket. Clicking a point selects
its call (``customdata`` is its npu row).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import numpy as np

from graphcmp.app.model import ViewModel
from graphcmp.core.noise import LIBRARY_ERROR, NodeRole
from graphcmp.core.records import FrozenColumns

__all__ = ["MAX_POINTS", "ErrorSeries", "error_figure", "error_series"]

MAX_POINTS = 4000
"""Most calls drawn as points (about the width of a chart in pixels, twice): larger runs are drawn by envelope."""
_MAX_ORIGINS = 2000
_ROLE_STYLE = {  # role -> (legend name, colour, marker size)
    NodeRole.WITHIN_NOISE: ("within noise", "#66bb6a", 5),
    NodeRole.PROPAGATED: ("propagated", "#fb8c00", 6),
    NodeRole.ORIGIN: ("origin", "#b71c1c", 13),
}


@dataclass(frozen=True, slots=True, eq=False)
class ErrorSeries(FrozenColumns):
    """The calls the chart draws and its noise band.

    Attributes
    ----------
    rows, x, error, role : ndarray
        Per drawn call: its npu row, its position among the compared calls (execution order), its output error
        and its noise-model role.
    band_x, band : ndarray
        The noise allowed, per bucket of calls (one point per call when every call is drawn).
    total : int
        Compared calls in the run.
    floor : float
        Where an error of 0 is drawn (a log axis has no 0): a tenth of the smallest error or allowance above 0.
    """

    rows: np.ndarray
    x: np.ndarray
    error: np.ndarray
    role: np.ndarray
    band_x: np.ndarray
    band: np.ndarray
    total: int
    floor: float

    @property
    def enveloped(self) -> bool:
        return self.total > len(self.rows)


def error_series(model: ViewModel, limit: int = MAX_POINTS) -> ErrorSeries | None:
    """The error chart's data of a report (None for a single run or a report with no compared call), kept with the
    model.

    Examples
    --------
    >>> from graphcmp.core.compare import compare_paths
    >>> from graphcmp.samples import sample_pair
    >>> s = error_series(ViewModel(compare_paths(*sample_pair())))
    >>> s.total == len(s.rows) and bool((np.diff(s.x) > 0).all()) and int(s.role.max()) == NodeRole.ORIGIN
    True
    """
    report = model.report
    if report is None or not len(report.noise.leaves):
        return None
    return model.keep(("error_series", limit), lambda: _series(model, limit))


def _series(model: ViewModel, limit: int) -> ErrorSeries:
    noise = model.report.noise
    leaves = noise.leaves
    error = noise.output_error[leaves].astype(np.float64)
    inputs = np.minimum(noise.input_error[leaves], noise.noise_level)  # inputs that carry noise only
    allowed = noise.growth_limit[leaves] * (inputs + noise.unit[leaves] * np.sqrt(noise.reduction[leaves])
                                            + LIBRARY_ERROR)
    allowed = np.where(np.isfinite(allowed), allowed, np.nan)
    role = noise.role[leaves]
    n = len(leaves)
    positive = np.concatenate([error[error > 0], allowed[allowed > 0]])
    positive = positive[np.isfinite(positive)]
    floor = float(positive.min()) / 10 if len(positive) else 1e-12
    if n <= limit:
        keep, band_x, band = np.arange(n), np.arange(n), allowed
    else:
        size = -(-n // (limit // 2))
        padded = -(-n // size) * size
        grid = np.full(padded, -np.inf)
        grid[:n] = np.nan_to_num(error, nan=np.inf)  # a NaN error (overflow) is the worst of its bucket
        grid = grid.reshape(-1, size)
        worst = np.argmax(grid, axis=1) + np.arange(len(grid)) * size
        origins = np.flatnonzero(role == NodeRole.ORIGIN)[:_MAX_ORIGINS]
        keep = np.union1d(worst[worst < n], origins)
        bands = np.full(padded, -np.inf)
        bands[:n] = np.nan_to_num(allowed, nan=-np.inf)
        band = bands.reshape(-1, size).max(axis=1)
        band = np.where(np.isfinite(band), band, np.nan)
        band_x = np.minimum(np.arange(len(band)) * size + size // 2, n - 1)
    return ErrorSeries(rows=leaves[keep].astype(np.int64), x=keep.astype(np.int64), error=error[keep],
                       role=role[keep].astype(np.int8), band_x=band_x.astype(np.int64),
                       band=np.asarray(band, np.float64), total=n, floor=floor)


def error_figure(model: ViewModel, series: ErrorSeries, selected: int = -1, title: str = "") -> dict:
    """The plotly figure of `series`: the noise band (grey, behind), one marker trace per role, the first origin
    annotated and the selected call (`selected`, an npu row) ringed. Labels are plotly text, never HTML."""
    ids = model.graphs["npu"].nodes.ids
    ops = model.graphs["npu"].nodes.op
    floor = series.floor
    band = np.where(np.isnan(series.band), None, np.maximum(series.band, floor)).tolist()
    data: list[dict] = [
        {"type": "scatter", "x": series.band_x.tolist(), "y": [floor] * len(series.band_x), "mode": "lines",
         "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False},
        {"type": "scatter", "x": series.band_x.tolist(), "y": band, "mode": "lines", "fill": "tonexty",
         "fillcolor": "rgba(120,144,156,0.25)", "line": {"width": 1, "color": "rgba(96,125,139,0.8)"},
         "name": "noise its precision allows", "hoverinfo": "skip", "connectgaps": False},
    ]
    for role, (name, color, size) in _ROLE_STYLE.items():
        at = np.flatnonzero(series.role == role)
        if not len(at):
            continue
        rows = series.rows[at].tolist()
        error = series.error[at]
        data.append({
            "type": "scattergl", "mode": "markers", "name": f"{name} ({len(at):,})" if not series.enveloped
            else name, "x": series.x[at].tolist(), "y": np.maximum(np.nan_to_num(error, nan=floor), floor).tolist(),
            "customdata": rows, "marker": {"color": color, "size": size,
                                           "symbol": "x" if role == NodeRole.ORIGIN else "circle",
                                           "line": {"width": 0}},
            "text": [f"{escape(ops[r])} · {escape(ids[r])}<br>error {e:.3g}"
                     for r, e in zip(rows, error.tolist())],
            "hovertemplate": "%{text}<extra></extra>",
        })
    shapes, notes = [], []
    first = model.report.noise.first_origin
    hit = np.flatnonzero(series.rows == first) if first >= 0 else []
    if len(hit):
        x = int(series.x[hit[0]])
        shapes.append({"type": "line", "x0": x, "x1": x, "yref": "paper", "y0": 0, "y1": 1,
                       "line": {"color": "#b71c1c", "width": 1, "dash": "dot"}})
        notes.append({"x": x, "yref": "paper", "y": 1, "text": f"first origin: {escape(ops[first])}",
                      "showarrow": False,
                      "xanchor": "left", "yanchor": "top", "font": {"color": "#b71c1c", "size": 11}})
    sel = np.flatnonzero(series.rows == selected) if selected >= 0 else []
    if len(sel):
        k = int(sel[0])
        data.append({"type": "scatter", "mode": "markers", "name": "selected", "x": [int(series.x[k])],
                     "y": [max(float(np.nan_to_num(series.error[k], nan=floor)), floor)],
                     "customdata": [int(series.rows[k])], "hoverinfo": "skip",
                     "marker": {"size": 16, "color": "rgba(0,0,0,0)", "line": {"color": "#0d47a1", "width": 3}}})
    drawn = f" ({len(series.rows):,} drawn: the largest error of each stretch and every origin)" \
        if series.enveloped else ""
    return {"data": data, "layout": {
        "title": {"text": escape(title), "font": {"size": 12}, "x": 0.01, "y": 0.98},
        "margin": {"l": 60, "r": 10, "t": 24, "b": 38}, "uirevision": title, "hovermode": "closest",
        "xaxis": {"title": {"text": f"compared call in execution order, of {series.total:,}{drawn}"},
                  "zeroline": False},
        "yaxis": {"title": {"text": "output error"}, "type": "log", "exponentformat": "power"},
        "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.0, "yanchor": "bottom"},
        "shapes": shapes, "annotations": notes, "plot_bgcolor": "#ffffff",
    }}
