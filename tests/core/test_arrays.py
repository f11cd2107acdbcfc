from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.arrays import sorted_unique


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint64, bool])
def test_sorted_unique_is_numpys_unique_for_integers(dtype):
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 50, 10_000):
        values = rng.integers(0, 2 if dtype is bool else 100, n).astype(dtype)
        got = sorted_unique(values)
        np.testing.assert_array_equal(got, np.unique(values))
        assert got.dtype == values.dtype


def test_sorted_unique_refuses_floats_whose_nan_is_unequal_to_itself():
    with pytest.raises(TypeError, match="integers"):
        sorted_unique(np.array([np.nan, np.nan]))
