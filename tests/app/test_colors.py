"""Colours: verdict colours, binning at edges (both directions), legend texts."""

from __future__ import annotations

import numpy as np

from graphcmp.app.colors import NAN_COLOR, STATUS_COLORS, Scheme, bin_colors, legend_items, node_colors


def test_bins_follow_the_rule_direction():
    values = np.array([0.0, 1e-3, 5e-3, 1e-2, 0.5])
    lower = node_colors(Scheme("rel_err", (1e-3, 1e-2)), values=values, present=np.ones(5, bool))
    green, amber, red = bin_colors(3)
    assert lower == [green, green, amber, amber, red]  # a value at the limit passes, as Rule.levels says
    cos = node_colors(Scheme("cosine", (0.99, 0.9999), True), values=np.array([1.0, 0.9999, 0.995, 0.9]),
                      present=np.ones(4, bool))
    assert cos == [green, green, amber, red]


def test_nan_and_verdicts():
    assert node_colors(Scheme("rel_err", (1.0,)), values=np.array([np.nan]), present=np.array([True])) == [NAN_COLOR]
    assert node_colors(Scheme("verdict"), status=np.array([-2])) == [STATUS_COLORS[-2]]


def test_legend_texts():
    texts = [t for _, t in legend_items(Scheme("rel_err", (1e-3, 1e-2)))]
    assert texts[:3] == ["≤ 0.001", "0.001 – 0.01", "> 0.01"]
    assert [t for _, t in legend_items(Scheme("verdict"))] == ["error", "warning", "pass", "skip"]
