"""Compiled building blocks of graphcmp's SIMD loops (numba), and the statistics of a large tensor.

LLVM turns a numba loop into SIMD code (8 float64 lanes with AVX-512) only if its float sums may be reordered and
it takes no float maximum (which LLVM vectorises only when NaN may be ignored). The loops built on this module
therefore run with reassociation as their only fast-math flag (`FAST`), take maxima and minima on float64 bit
patterns as integers (`float_bits`; `ordered` maps signed floats onto an integer order), and flag NaN/inf by their
exponent bits (`special_bits`), so that a caller can take a careful path for them. float16 comes in as its uint16
bits and `as_float` decodes it without a branch.

Its kernel of a tensor's statistics (`_stats`) and the tensor metrics' kernels (`graphcmp.core.tensor_fused`) are
called through `graphcmp.core.tensor_kernels`, built ahead of time where they can be: numba loads this module only
to build them, or where they are not built (about half a second once per process; compiled code is cached on disk,
``cache=True``). The compiled dump.json pass builds on it too (`graphcmp.core.jsonnum`).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic, overload

__all__ = ["FAST", "MAGNITUDE", "as_float", "bits_float", "float_bits", "ordered", "special_bits"]

FAST = {"reassoc"}
"""LLVM fast-math flags of the vectorised loops: reassociation only, which lets a loop's sums be split over SIMD
lanes; every product, quotient and difference stays the IEEE one, NaN and inf keep their meaning."""

MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)
_EXPONENT = np.int64(0x7FF0000000000000)
_TWO_112, _TWO_M24 = 2.0 ** 112, 2.0 ** -24


@intrinsic
def float_bits(typingctx, value):  # pragma: no cover - compiled
    """The bit pattern of a float64 as an int64 (no conversion)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))
    return types.int64(types.float64), codegen


@intrinsic
def bits_float(typingctx, value):  # pragma: no cover - compiled
    """The float64 whose bit pattern is an int64."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), codegen


@intrinsic
def _single(typingctx, value):  # pragma: no cover - compiled
    """The float32 whose bit pattern is an int32."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))
    return types.float32(types.int32), codegen


def as_float(value):  # pragma: no cover - replaced by the overload inside compiled code
    """An element as float64: float16 given as its uint16 bits, float32 and float64 as they are (compiled only)."""
    raise NotImplementedError("compiled code only")


@overload(as_float)
def _as_float_impl(value):
    if isinstance(value, types.Integer) and value.bitwidth == 16 and not value.signed:
        def half(value):  # IEEE binary16 bits -> float64, exactly and without a branch
            bits = np.int32(value)
            shifted = (bits & 0x7FFF) << 13  # exponent and fraction in float32's places
            normal = np.float64(_single(shifted)) * _TWO_112  # rebias the exponent
            subnormal = np.float64(bits & 0x3FF) * _TWO_M24  # not through float32 subnormals (flushed under FTZ)
            special = np.float64(_single(shifted | 0x7F800000))  # inf or NaN
            field = bits & 0x7C00
            magnitude = special if field == 0x7C00 else subnormal if field == 0 else normal
            return -magnitude if bits & 0x8000 else magnitude
        return half
    return lambda value: np.float64(value)


@numba.njit(inline="always")
def ordered(bits):  # pragma: no cover - compiled
    """float64 bits -> an int64 whose order is the floats' order (its own inverse)."""
    return bits ^ ((bits >> 63) & MAGNITUDE)


@numba.njit(inline="always")
def special_bits(bits):  # pragma: no cover - compiled
    """Whether float64 bits are a NaN or an inf (1 or 0)."""
    return np.int64((bits & _EXPONENT) == _EXPONENT)


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath=FAST)
def _chunk_stats(values):  # pragma: no cover - compiled
    high, low = -MAGNITUDE - 1, MAGNITUDE
    total = squares = 0.0
    special = 0
    for i in range(values.size):
        x = as_float(values[i])
        bits = float_bits(x)
        special |= special_bits(bits)
        key = ordered(bits)
        high = max(high, key)
        low = min(low, key)
        total += x
        squares += x * x
    return high, low, total, squares, special


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _stats(values, chunk):  # pragma: no cover - compiled
    """(max, min, sum, sum of squares) of a flat contiguous array in float64, chunk by chunk, and whether it holds a
    NaN or an inf (the sums are then left: the caller's numpy path gives those their meaning)."""
    high, low = -MAGNITUDE - 1, MAGNITUDE
    total = squares = 0.0
    for lo in range(0, values.size, chunk):
        chunk_high, chunk_low, chunk_total, chunk_squares, special = _chunk_stats(values[lo:lo + chunk])
        if special:
            return 0.0, 0.0, 0.0, 0.0, True
        high, low = max(high, chunk_high), min(low, chunk_low)
        total += chunk_total
        squares += chunk_squares
    return bits_float(ordered(high)), bits_float(ordered(low)), total, squares, False
