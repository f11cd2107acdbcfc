"""Text columns' helpers (`core/texts.py`)."""

from __future__ import annotations

import numpy as np

from graphcmp.core.texts import formatted


def test_formatted_gives_what_format_gives_each_float():
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.standard_normal(20_000) * 10.0 ** rng.integers(-320, 308, 20_000),
                             rng.integers(0, 2**63, 20_000).view(np.float64),  # every bit pattern: NaNs, denormals
                             [np.inf, -np.inf, np.nan, 0.0, -0.0, 5e-324, 999.5, 9995.0, 0.0005]]).tolist()
    assert formatted(values, "%.3g") == [format(v, ".3g") for v in values]
    assert formatted(values[:50], "%.6f") == [format(v, ".6f") for v in values[:50]]
    assert formatted([], "%.3g") == []
