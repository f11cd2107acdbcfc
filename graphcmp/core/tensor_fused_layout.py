"""What the compiled kernels of tensor data (`graphcmp.core.tensor_fused`, `graphcmp.core.simd`) share with the
Python that calls them (`graphcmp.core.tensor_kernels`): chunk sizes, the columns of the first pass's partial sums
and the fixed point of kl's exact sums. Plain numbers: importing it loads nothing."""

from __future__ import annotations

CHUNK = 1 << 14
"""Elements per chunk of the pair metrics: a chunk is summed in order, the chunks' sums exactly (``math.fsum``)."""

STATS_CHUNK = 1 << 14
"""Elements per chunk of a tensor's statistics (`graphcmp.core.simd`): each chunk's sums are added in float64."""

# columns of the per-chunk float64 partials of the first pass
(NPU_SQ, BENCH_SQ, DOT, DIFF_SQ, ABS_SUM, MAX_ABS, MAX_REL, REL_NZ_SUM, REL_NZ_MAX,
 NPU_LOW, NPU_HIGH, BENCH_LOW, BENCH_HIGH) = range(13)
PARTIALS = BENCH_HIGH + 1
# columns of the per-chunk integer partials: counts below 1e-3 and 5e-3, matched non-finite seen, mismatch seen
BELOW_1E3, BELOW_5E3, NONFINITE, MISMATCH = range(4)
COUNTS = MISMATCH + 1

TWO_37, TWO_38, FIXED_ONE = 2.0 ** 37, 2.0 ** 38, 1 << 75
"""kl's scaled values in fixed point (`tensor_fused._fixed`): value * 2**75 = high * 2**38 + low, exactly."""
MAX_FIXED_CHUNK = 1 << 25
"""Longest chunk whose sums of fixed-point parts (each below 2**38) stay below 2**63."""
