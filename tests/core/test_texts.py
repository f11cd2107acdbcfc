"""Text columns' helpers (`core/texts.py`)."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.texts import CodedTexts, formatted


def test_formatted_gives_what_format_gives_each_float():
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.standard_normal(20_000) * 10.0 ** rng.integers(-320, 308, 20_000),
                             rng.integers(0, 2**63, 20_000).view(np.float64),  # every bit pattern: NaNs, denormals
                             [np.inf, -np.inf, np.nan, 0.0, -0.0, 5e-324, 999.5, 9995.0, 0.0005]]).tolist()
    assert formatted(values, "%.3g") == [format(v, ".3g") for v in values]
    assert formatted(values[:50], "%.6f") == [format(v, ".6f") for v in values[:50]]
    assert formatted([], "%.3g") == []


@pytest.mark.parametrize("seed", range(6))
def test_coded_texts_number_their_names_in_order_of_first_appearance(seed):
    rng = np.random.default_rng(seed)
    names = [f"name{k}" for k in range(int(rng.integers(1, 400)))]
    size = int(rng.choice([1, 50, 1024, 1025, 20_000]))
    codes = rng.integers(0, len(names), size) % int(rng.integers(1, len(names) + 1))  # some names unused
    late = rng.integers(0, len(names), int(rng.integers(0, 5)))  # names that appear only at the end
    codes = np.concatenate([codes, late]) if seed % 2 else codes
    column = CodedTexts.of(codes, names)
    texts = [names[k] for k in codes.tolist()]
    assert column.names == tuple(dict.fromkeys(texts)) and list(column) == texts
