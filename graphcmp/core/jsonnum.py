"""Exact parsing of JSON number tokens in compiled code (numba), for readers that scan large JSON texts themselves.

`parse_number` turns the bytes of one token into the float64 that Python's ``float()`` gives, bit for bit, or says
that the bytes are no JSON number, or that this fast path cannot decide (the caller then asks ``float()``, for a few
tokens). The decimal significand is read into a uint64 (at most 19 significant digits) and a power of ten:

* Clinger's fast path: a significand up to 2**53 and a power of ten up to 1e22 are both exact doubles, so one IEEE
  product or quotient is the correctly rounded value.
* otherwise the Eisel-Lemire algorithm: the significand, shifted to fill 64 bits, times a 128-bit approximation of
  the power of five (`_POW5_HIGH`, `_POW5_LOW`, made at import from exact Python integers) gives the leading 54 bits
  of the value and whether they are certain. The approximation is the integer part of the exact scaled power, so
  the exact product lies in ``[computed, computed + 2**64)`` at the product's 192-bit scale (exactly the computed
  one for the powers of five that fit in 128 bits); a carry from that gap into the kept bits is reported as
  undecided (after one exact check: for 10**-27 <= 10**q < 1 with 5**-q dividing the significand the value is an
  integer times 2**q), a tie to even is taken only where the product is exact. The 64 x 64 -> 128-bit products are
  LLVM's i128 multiply (one instruction on x86-64), the leading-zero count its ctlz.
* more than 19 significant digits: the value lies strictly between the results for the truncated significand w and
  w + 1; when both round to the same double that double is the answer, else the token is undecided.

Status codes: `NUMBER` (0), `NOT_NUMBER` (1: empty, a leading ``+``, ``NaN``, ``01``, ``1.``, ``.5`` ...) and
`UNDECIDED` (2: a truncated significand that straddles a rounding boundary, a magnitude that rounds to infinity, an
exponent of 100,000,000 or more with a nonzero significand).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from graphcmp.core.simd import bits_float

__all__ = ["NOT_NUMBER", "NUMBER", "UNDECIDED", "load8", "parse_number", "parse_number_at", "parse_numbers",
           "scan_number", "trailing_zeros"]

NUMBER, NOT_NUMBER, UNDECIDED = 0, 1, 2

_MIN_Q, _MAX_Q = -342, 308
"""Powers of ten with a table row: below 1e-342 every 19-digit significand rounds to zero, above 1e308 to inf."""

_DIGITS = 19
"""Significant digits kept: every 19-digit integer fits in a uint64."""

_EXPONENT_CAP = 100_000_000
"""Exponents of this size or more are not accumulated (the token is undecided unless its significand is zero)."""


def _powers_of_five() -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Rows q = _MIN_Q .. _MAX_Q: 10**q ~ (high * 2**64 + low) * 2**exponent with the 128-bit integer in
    [2**127, 2**128), rounded down; and the largest q whose row is exact (5**q fits in 128 bits)."""
    count = _MAX_Q - _MIN_Q + 1
    high, low = np.empty(count, np.uint64), np.empty(count, np.uint64)
    exponent = np.empty(count, np.int64)
    exact_max = 0
    for row, q in enumerate(range(_MIN_Q, _MAX_Q + 1)):
        if q >= 0:  # 10**q = 5**q * 2**q, 5**q's leading 128 bits
            bits = (5 ** q).bit_length()
            scaled = 5 ** q << (128 - bits) if bits <= 128 else 5 ** q >> (bits - 128)
            power = q + bits - 128
            if bits <= 128:
                exact_max = q
        else:  # 10**q = 2**q / 5**-q, floor(2**k / 5**-q) with k making it 128 bits wide
            k = 127 + (5 ** -q).bit_length()
            scaled, power = (1 << k) // 5 ** -q, q - k
        high[row], low[row], exponent[row] = scaled >> 64, scaled & (2 ** 64 - 1), power
    return high, low, exponent, exact_max


_POW5_HIGH, _POW5_LOW, _POW2, _EXACT_MAX = _powers_of_five()
_EXACT_FIRST = max(q for q in range(_EXACT_MAX + 1) if _POW5_LOW[q - _MIN_Q] == 0)
_POW10 = np.array([10.0 ** k for k in range(23)])
"""The powers of ten that are exact doubles (Clinger's fast path)."""
_POW10_INT = np.array([10 ** k for k in range(9)], np.uint64)

_NUMBER_BYTES = np.zeros(256, np.bool_)
_NUMBER_BYTES[np.frombuffer(b"0123456789+-.eE", np.uint8)] = True

_U0, _U1, _NINE, _TEN = np.uint64(0), np.uint64(1), np.uint64(9), np.uint64(10)
_ONES, _LOW9 = np.uint64(2 ** 64 - 1), np.uint64(0x1FF)
_FRACTION = np.uint64(2 ** 52 - 1)
_TWO53 = np.uint64(2 ** 53)
_SIGN = np.int64(-2 ** 63)


@intrinsic
def _multiply(typingctx, a, b):  # pragma: no cover - compiled
    """The 128-bit product of two uint64 as (high, low) uint64 (LLVM's i128 multiply: one instruction on x86-64)."""
    def codegen(context, builder, signature, args):
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        high = builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))
        low = builder.trunc(product, ir.IntType(64))
        return context.make_tuple(builder, signature.return_type, (high, low))
    return types.UniTuple(types.uint64, 2)(types.uint64, types.uint64), codegen


@intrinsic
def _leading_zeros(typingctx, value):  # pragma: no cover - compiled
    """The number of leading zero bits of a nonzero uint64."""
    def codegen(context, builder, signature, args):
        count = builder.ctlz(args[0], ir.Constant(ir.IntType(1), 1))
        return builder.zext(count, ir.IntType(64))
    return types.int64(types.uint64), codegen


@intrinsic
def trailing_zeros(typingctx, value):  # pragma: no cover - compiled
    """The number of trailing zero bits of a uint64 (64 for zero)."""
    def codegen(context, builder, signature, args):
        count = builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))
        return builder.zext(count, ir.IntType(64))
    return types.int64(types.uint64), codegen


@numba.njit(cache=True, nogil=True, inline="always")
def _eisel_lemire(w, q):  # pragma: no cover - compiled
    """The bits of the double nearest w * 10**q (w a nonzero uint64) and whether they are certain and finite."""
    if q < _MIN_Q:
        return np.int64(0), True
    if q > _MAX_Q:
        return np.int64(0), False
    row = q - _MIN_Q
    zeros = _leading_zeros(w)
    w = w << np.uint64(zeros)
    high, middle = _multiply(w, _POW5_HIGH[row])
    low = _U0
    exact = 0 <= q <= _EXACT_FIRST  # the power of five fits in 64 bits: the first product is the exact one
    if high & _LOW9 == _LOW9:  # a carry from the lower product could reach the kept bits: take it
        carry_high, low = _multiply(w, _POW5_LOW[row])
        total = middle + carry_high
        high += _U1 if total < middle else _U0
        middle = total
        exact = 0 <= q <= _EXACT_MAX
        if not exact and high & _LOW9 == _LOW9 and middle == _ONES and low + w < low:
            return np.int64(0), False  # the gap [computed, computed + w) of the exact product crosses a kept bit
    upper = high >> np.uint64(63)
    shift = upper + np.uint64(9)
    top = high >> shift  # 54 bits: the 53 of a double and the rounding bit
    rest_zero = (high & ((_U1 << shift) - _U1) == _U0) & (middle == _U0) & (low == _U0)
    biased = np.int64(upper) - zeros + _POW2[row] + 1213  # the exponent field of top's leading bit
    drop = np.int64(1) if biased >= 1 else 2 - biased  # bits of top below the result (more for a subnormal)
    if drop > 54:
        return np.int64(0), True  # below half the smallest subnormal
    mantissa = top >> np.uint64(drop)
    half = (top >> np.uint64(drop - 1)) & _U1  # the first bit dropped (without a branch: it is a coin toss)
    below = top & ((_U1 << np.uint64(drop - 1)) - _U1)
    tie = exact & rest_zero & (below == _U0)  # exactly halfway: round to the even neighbour
    mantissa += half & ~(np.uint64(tie) & ~mantissa)
    if biased < 1:
        return np.int64(mantissa), True  # a subnormal (or, rounded up, the smallest normal's bits)
    if mantissa == _TWO53:
        mantissa >>= _U1
        biased += 1
    if biased >= 2047:
        return np.int64(0), False
    return (biased << 52) | np.int64(mantissa & _FRACTION), True


@numba.njit(cache=True, nogil=True)
def _exact_half(w, q):  # pragma: no cover - compiled
    """For 10**q = 2**q / 5**-q with 5**-q dividing w (q >= -27): w * 10**q exactly a uint64 times 2**q, so
    the uint64's correctly rounded conversion scaled by 2**q; (0.0, False) when 5**-q does not divide w."""
    if q < -27 or q >= 0:
        return 0.0, False
    five = np.uint64(5) ** np.uint64(-q)
    if w % five != _U0:
        return 0.0, False
    return np.float64(w // five) * 2.0 ** q, True


@numba.njit(cache=True, nogil=True, inline="always")
def _decimal(w, q):  # pragma: no cover - compiled
    """The double nearest w * 10**q (w a nonzero uint64) and whether it is certain and finite."""
    if w <= _TWO53 and -22 <= q <= 22:  # Clinger: both exact doubles, one rounding
        x = np.float64(w)
        return (x * _POW10[q] if q >= 0 else x / _POW10[-q]), True
    bits, certain = _eisel_lemire(w, q)
    if not certain and bits == 0:
        half, found = _exact_half(w, q)
        if found:
            return half, True
    return bits_float(bits), certain


@intrinsic
def load8(typingctx, buf, index):  # pragma: no cover - compiled
    """The 8 bytes ``buf[index:index + 8]`` of a contiguous uint8 array as one little-endian uint64 (unchecked)."""
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.layout == "C"
            and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        wide = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(wide, align=1)
    return types.uint64(buf, index), codegen


_LOW_NIBBLES, _SIXES = np.uint64(0xF0F0F0F0F0F0F0F0), np.uint64(0x0606060606060606)
_THREES, _ZEROS = np.uint64(0x3333333333333333), np.uint64(0x3030303030303030)
_PAIRS = np.uint64(0x000000FF000000FF)
_HUNDRED_MILLION, _TEN_SIXTEEN = np.uint64(10 ** 8), np.uint64(10 ** 16)
_MULTIPLY_LOW, _MULTIPLY_HIGH = np.uint64(100 + (10 ** 6 << 32)), np.uint64(1 + (10 ** 4 << 32))
_U4, _U8, _U16, _U32 = np.uint64(4), np.uint64(8), np.uint64(16), np.uint64(32)


@numba.njit(inline="always")
def _eight_value(chunk):  # pragma: no cover - compiled
    """The integer written by 8 ASCII digits loaded little-endian (first digit in the lowest byte): digits joined
    into pairs, then pairs into fours and eights by two multiplications."""
    chunk = chunk - _ZEROS
    chunk = chunk * _TEN + (chunk >> _U8)
    return ((chunk & _PAIRS) * _MULTIPLY_LOW + ((chunk >> _U16) & _PAIRS) * _MULTIPLY_HIGH) >> _U32


@numba.njit(inline="always")
def _not_digits(chunk):  # pragma: no cover - compiled
    """Nonzero in each byte of a loaded chunk that is not an ASCII digit, and perhaps in bytes after such a byte
    (a carry out of a byte above 0xF9); zero for 8 digits."""
    return ((chunk & _LOW_NIBBLES) | (((chunk + _SIXES) & _LOW_NIBBLES) >> _U4)) ^ _THREES


@numba.njit(inline="always")
def _digit_run(chunk):  # pragma: no cover - compiled
    """How many of a loaded chunk's bytes, from the first, are digits (0 to 8). A carry out of a byte above 0xF9
    only reaches bytes after it, so the first non-digit byte is found exactly."""
    return trailing_zeros(_not_digits(chunk)) >> 3


@numba.njit(inline="always")
def _digits(buf, i, end, w):  # pragma: no cover - compiled
    """Read the run of digits from i (before end) into w (w * 10**run + the run, wrapping): (new i, new w)."""
    while i + 16 <= end:  # 16 digits in two independent halves
        first, second = load8(buf, i), load8(buf, i + 8)
        if _not_digits(first) | _not_digits(second) != _U0:
            break
        w = w * _TEN_SIXTEEN + (_eight_value(first) * _HUNDRED_MILLION + _eight_value(second))
        i += 16
    while i + 8 <= buf.size:  # 8 bytes at a time
        chunk = load8(buf, i)
        run = min(_digit_run(chunk), end - i)
        if run == 8:
            w = w * _HUNDRED_MILLION + _eight_value(chunk)
            i += 8
            continue
        if run > 0:  # the run's bytes moved to the top of the chunk, '0's below them
            shift = np.uint64(8 * (8 - run))
            w = w * _POW10_INT[run] + _eight_value((chunk << shift) | (_ZEROS >> np.uint64(8 * run)))
            i += run
        return i, w
    while i < end and _digit(buf[i]) <= _NINE:
        w = w * _TEN + _digit(buf[i])
        i += 1
    return i, w


@numba.njit(inline="always")
def _digit(byte):  # pragma: no cover - compiled
    """A byte's digit value as a uint64, above 9 for every byte that is not a digit (those below '0' wrap)."""
    return np.uint64(byte) - np.uint64(48)


@numba.njit(cache=True, nogil=True)
def _long_significand(buf, whole, point, fraction, stop):  # pragma: no cover - compiled
    """The first 19 significant digits of the digits ``buf[whole:point]`` and ``buf[fraction:stop]`` as a uint64,
    the power of ten of its last digit (the exponent not counted) and whether a nonzero digit was dropped."""
    w, digits, q, dropped = _U0, 0, np.int64(0), False
    for i in range(whole, point):
        if digits < _DIGITS:
            if w != _U0 or buf[i] != 48:
                w = w * _TEN + _digit(buf[i])
                digits += 1
        else:
            q += 1
            dropped |= buf[i] != 48
    for i in range(fraction, stop):
        if digits < _DIGITS:
            if w != _U0 or buf[i] != 48:  # zeros before the first significant digit only scale
                w = w * _TEN + _digit(buf[i])
                digits += 1
            q -= 1
        else:
            dropped |= buf[i] != 48
    return w, q, dropped


@numba.njit(cache=True, nogil=True, inline="always")
def parse_number(buf, start, end):  # pragma: no cover - compiled
    """The value of the JSON number token ``buf[start:end]`` (buf: a contiguous uint8 array) and a status.

    Returns ``(value, NUMBER)`` with value equal to Python's ``float()`` of the token bit for bit (-0.0 and
    subnormals included); ``(nan, NOT_NUMBER)`` when the span is not exactly one token of the grammar
    ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``; ``(nan, UNDECIDED)`` for a JSON number this path cannot
    round with certainty or whose magnitude rounds to infinity (the caller asks ``float()``).
    """
    value, status, stop = _parse_prefix(buf, start, end)
    if status != NOT_NUMBER and stop != end:
        return np.nan, NOT_NUMBER
    return value, status


@numba.njit(cache=True, nogil=True, inline="always")
def parse_number_at(buf, start, limit):  # pragma: no cover - compiled
    """``(value, status, end)``: `parse_number` of the run of number bytes at start that `scan_number` finds before
    limit, and that run's end, in one pass over the bytes (the token is read until its grammar ends, then the
    next byte must end the run)."""
    value, status, stop = _parse_prefix(buf, start, limit)
    if status == NOT_NUMBER or (stop < limit and _NUMBER_BYTES[buf[stop]]):
        return np.nan, NOT_NUMBER, scan_number(buf, start, limit)
    return value, status, stop


@numba.njit(cache=True, nogil=True, inline="always")
def _parse_prefix(buf, start, end):  # pragma: no cover - compiled
    """`parse_number` of the token that starts at start and ends where its grammar does (at most end): (value,
    status, the position after it); NOT_NUMBER when no token starts there."""
    if start < 0 or end > buf.size:  # a span outside the buffer (never read)
        return np.nan, NOT_NUMBER, start
    i = start
    if i < end and buf[i] == 45:  # '-'
        i += 1
    negative = i > start
    if i >= end or _digit(buf[i]) > _NINE:
        return np.nan, NOT_NUMBER, i
    whole, w = i, _U0  # w: every digit, wrapping past 19 of them (then re-read by _long_significand)
    if buf[i] == 48:  # a leading '0' is the whole integer part
        i += 1
    else:
        i, w = _digits(buf, i, end, w)
    point = fraction = i
    if i < end and buf[i] == 46:  # '.'
        i += 1
        fraction = i
        i, w = _digits(buf, i, end, w)
        if i == fraction:
            return np.nan, NOT_NUMBER, i
    stop = i
    q, huge = np.int64(fraction - stop), False
    if i < end and buf[i] | 32 == 101:  # 'e' or 'E'
        i += 1
        minus = i < end and buf[i] == 45
        if i < end and (buf[i] == 43 or minus):
            i += 1
        first, exponent = i, np.int64(0)
        while i < end and _digit(buf[i]) <= _NINE:
            if exponent < _EXPONENT_CAP:
                exponent = exponent * 10 + np.int64(_digit(buf[i]))
            i += 1
        if i == first:
            return np.nan, NOT_NUMBER, i
        huge = exponent >= _EXPONENT_CAP
        q += -exponent if minus else exponent
    dropped = False
    # perhaps more than 19 significant digits; an integer part "0" holds none (0.0008300870540551841 is read whole)
    if (0 if buf[whole] == 48 else point - whole) + (stop - fraction) > _DIGITS:
        w, scale, dropped = _long_significand(buf, whole, point, fraction, stop)
        q += scale + (stop - fraction)
    if w == _U0:
        return (-0.0 if negative else 0.0), NUMBER, i
    if huge:
        return np.nan, UNDECIDED, i
    value, certain = _decimal(w, q)
    if certain and dropped:  # the exact value lies strictly between w and w + 1 units
        above, certain = _decimal(w + _U1, q)
        certain = certain and above == value
    if not certain:
        return np.nan, UNDECIDED, i
    return (-value if negative else value), NUMBER, i


@numba.njit(cache=True, nogil=True, inline="always")
def scan_number(buf, start, limit):  # pragma: no cover - compiled
    """The end of the longest run of number bytes (``0-9 + - . e E``) of buf from start, at most limit.

    A byte at a time through a 256-entry table: for runs of about 20 bytes this beats classifying 8 bytes at
    once (six byte comparisons per word)."""
    i = start
    while i < limit and _NUMBER_BYTES[buf[i]]:
        i += 1
    return i


@numba.njit(cache=True, nogil=True)
def parse_numbers(buf, starts, ends):  # pragma: no cover - compiled
    """`parse_number` of each span ``buf[starts[k]:ends[k]]``: (values float64, statuses int64)."""
    values = np.empty(starts.size, np.float64)
    statuses = np.empty(starts.size, np.int64)
    for k in range(starts.size):
        values[k], statuses[k] = parse_number(buf, starts[k], ends[k])
    return values, statuses
