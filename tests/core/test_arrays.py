from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.arrays import search_sorted, sorted_unique


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


@pytest.mark.parametrize("side", ["left", "right"])
def test_search_sorted_is_numpys_searchsorted_whatever_the_needles_order(side):
    rng = np.random.default_rng(3)
    haystack = np.sort(rng.integers(0, 1000, 5000))  # repeated keys: left and right differ
    for needles in (rng.integers(-5, 1005, 20_000), np.sort(rng.integers(-5, 1005, 300)), np.array([7]),
                    np.zeros(0, np.int64), rng.integers(0, 1000, 10_000)[::-1]):
        np.testing.assert_array_equal(search_sorted(haystack, needles, side), np.searchsorted(haystack, needles, side))
