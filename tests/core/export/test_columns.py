"""Float texts for whole columns: the same text as ``repr`` for every float64 (msprobe writes floats that way)."""

from __future__ import annotations

import numpy as np

from graphcmp.core.export.columns import float_reprs, pack_bits, unpack_bits


def test_float_reprs_equal_repr_everywhere():
    rng = np.random.default_rng(0)
    edges = [10.0 ** k * m for k in range(-30, 31) for m in (1.0, 1.5, -1.0)]
    values = np.concatenate([
        10.0 ** rng.uniform(-323, 308, 50_000) * rng.choice([-1, 1], 50_000),  # every exponent
        rng.integers(-2**62, 2**62, 5_000).astype(float),  # large integers: positional up to 1e16
        rng.standard_normal(20_000).astype(np.float32).astype(float),  # float32 statistics widened
        np.array([1e16, 9.999999999999998e15, 1e-4, 9.99e-5, 1e-5, 9.999999999999999e-06, 0.0, -0.0, 5e-324,
                  2.2250738585072014e-308, 1.7976931348623157e308, np.nan, np.inf, -np.inf, *edges]),
    ])
    assert float_reprs(values) == [repr(v).encode() for v in values.tolist()]
    assert float_reprs(values.reshape(-1, 1)[:12]) == [repr(v).encode() for v in values[:12].tolist()]
    assert float_reprs(np.zeros(0)) == []


def test_pack_bits_sets_bit_j_for_column_j_at_every_width():
    """Up to eight columns are packed by numpy's packbits, more by a weighted sum: both give bit j for column j
    (little-endian), and `unpack_bits` gives the mask back."""
    rng = np.random.default_rng(7)
    for width in (1, 4, 8, 9, 12):
        mask = rng.random((500, width)) < 0.5
        packed = pack_bits(mask)
        assert packed.dtype == np.int64
        assert packed.tolist() == [sum(1 << j for j in range(width) if row[j]) for row in mask.tolist()]
        assert (unpack_bits(packed, width) == mask).all()
