"""graphcmp.core.jsonnum: compiled JSON number parsing, bit for bit against Python's float()."""

from __future__ import annotations

import math
import re
import struct
from decimal import Decimal
from fractions import Fraction

import numba
import numpy as np
import pytest

from graphcmp.core.jsonnum import (
    NOT_NUMBER,
    NUMBER,
    UNDECIDED,
    parse_number,
    parse_number_at,
    parse_numbers,
    scan_number,
)

GRAMMAR = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _spans(tokens: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tokens as one buffer, separated by a space, with their starts and ends."""
    text = " ".join(tokens).encode("ascii")
    lengths = np.fromiter(map(len, tokens), np.int64, len(tokens))
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    return np.frombuffer(text, np.uint8), starts, starts + lengths


def _significant_digits(token: str) -> int:
    mantissa = re.split("[eE]", token)[0].lstrip("-").replace(".", "")
    return len(mantissa.lstrip("0"))


def _check(tokens: list[str]) -> np.ndarray:
    """Parse the tokens (all JSON numbers); every decided value must equal float()'s bits; returns the statuses.
    An undecided token must have more than 19 significant digits or round to infinity."""
    buf, starts, ends = _spans(tokens)
    values, statuses = parse_numbers(buf, starts, ends)
    expected = np.array([float(token) for token in tokens])
    assert not (statuses == NOT_NUMBER).any(), [tokens[k] for k in np.flatnonzero(statuses == NOT_NUMBER)[:5]]
    decided = statuses == NUMBER
    wrong = np.flatnonzero(decided & (values.view(np.uint64) != expected.view(np.uint64)))
    assert wrong.size == 0, [(tokens[k], values[k], expected[k]) for k in wrong[:5]]
    for k in np.flatnonzero(~decided):
        assert statuses[k] == UNDECIDED
        assert _significant_digits(tokens[k]) > 19 or math.isinf(expected[k]), tokens[k]
    return statuses


def _random_doubles(rng: np.random.Generator, count: int) -> np.ndarray:
    """Finite doubles of every exponent and sign (uniform bit patterns)."""
    values = rng.integers(0, 2 ** 64, count, dtype=np.uint64, endpoint=False).view(np.float64)
    return values[np.isfinite(values)]


def test_known_bit_patterns():
    cases = {"0.1": 0x3FB999999999999A, "-0.0": 0x8000000000000000, "0": 0, "1": 0x3FF0000000000000,
             "5e-324": 1, "2.2250738585072014e-308": 0x0010000000000000,
             "1.7976931348623157e308": 0x7FEFFFFFFFFFFFFF, "9007199254740993": 0x4340000000000000,
             "0.30000000000000004": 0x3FD3333333333334, "-2.5E-3": 0xBF647AE147AE147B}
    for token, bits in cases.items():
        buf = np.frombuffer(token.encode(), np.uint8)
        value, status = parse_number(buf, 0, buf.size)
        assert status == NUMBER, token
        assert struct.unpack("<Q", struct.pack("<d", value))[0] == bits, token


def test_small_tokens():
    tokens = ["0", "-0", "0e5", "-0.0e-7", "1E+2", "1e-2", "1e2", "0.5", "-1", "123", "1.5e300", "0.000001",
              "2.4703282292062328e-324", "2.4703282292062327e-324", "4.9406564584124654e-324", "1e-400", "-1e-400",
              "9007199254740993.0", "90071992547409930e-1", "1.00000000000000011102230246251565404236316680908203125",
              "123456789012345678901234567890", "0.000000000000000000000000000001"]
    statuses = _check(tokens)
    long = [k for k, token in enumerate(tokens) if token.startswith(("1.0000", "1234"))]
    assert statuses[long].tolist() == [UNDECIDED, NUMBER]  # the first exactly halfway between 1 and its successor
    assert (np.delete(statuses, long) == NUMBER).all()


def test_repr_random_doubles_never_undecided():
    rng = np.random.default_rng(1)
    doubles = _random_doubles(rng, 1_000_000)
    statuses = _check(list(map(repr, doubles.tolist())))
    assert (statuses == NUMBER).all()


def test_float32_widened_repr():
    rng = np.random.default_rng(2)
    singles = rng.integers(0, 2 ** 32, 500_000, dtype=np.uint32).view(np.float32)
    singles = singles[np.isfinite(singles)].astype(np.float64)
    normal = rng.standard_normal(200_000).astype(np.float32).astype(np.float64)
    statuses = _check(list(map(repr, np.concatenate((singles, normal)).tolist())))
    assert (statuses == NUMBER).all()


def test_general_format_every_precision():
    rng = np.random.default_rng(3)
    doubles = _random_doubles(rng, 25 * 20_000)
    tokens = []
    for k in range(1, 26):
        chunk = doubles[(k - 1) * 20_000:k * 20_000].tolist()
        tokens += [f"{x:.{k}g}" for x in chunk]
    statuses = _check(tokens)
    few = [s for t, s in zip(tokens, statuses) if _significant_digits(t) <= 19 and not math.isinf(float(t))]
    assert len(few) > 19 * 20_000 and all(s == NUMBER for s in few)


def test_random_digits_every_exponent():
    """Digit strings of 1..30 digits with a random point and exponent, over the whole range of doubles and beyond
    (overflow, underflow, subnormals)."""
    rng = np.random.default_rng(4)
    count = 400_000
    lengths = rng.integers(1, 31, count)
    exponents = rng.integers(-360, 330, count)
    points = rng.integers(0, 31, count)
    digits = rng.integers(0, 10, (count, 30)).astype(np.uint8) + 48
    digits[:, 0] = rng.integers(1, 10, count) + 48
    rows = [bytes(row).decode() for row in digits]
    tokens = []
    for row, length, exponent, point in zip(rows, lengths.tolist(), exponents.tolist(), points.tolist()):
        text = row[:length]
        if 0 < point < length:
            text = text[:point] + "." + text[point:]
        tokens.append(f"{text}e{exponent - min(point, length)}")
    statuses = _check(tokens)
    finite = np.isfinite([float(token) for token in tokens])
    assert 0.9 < finite.mean() < 1 and (statuses[finite] == UNDECIDED).mean() < 0.001


def test_near_subnormal_and_largest():
    rng = np.random.default_rng(5)
    tokens = []
    for exponent in range(-345, -300):
        for length in (1, 5, 16, 17, 19, 21):
            digits = rng.integers(0, 10, (200, length)) + 48
            digits[:, 0] = rng.integers(1, 10, 200) + 48
            tokens += [f"{bytes(row.astype(np.uint8)).decode()}e{exponent}" for row in digits]
    tokens += [repr(x) for x in (5e-324 * rng.integers(1, 2 ** 52, 50_000)).tolist()]  # every subnormal width
    top = np.nextafter(np.float64(np.finfo(np.float64).max), 0.0)
    tokens += [repr(x) for x in (top - rng.integers(0, 2 ** 52, 50_000) * 2.0 ** 970).tolist()]
    edge = 2 ** 1024 - 2 ** 970  # halfway between the largest double and 2**1024: rounds to infinity
    tokens += ["1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "-1.8e308",
               str(edge), str(edge - 1), str(edge - 1) + ".99999", str(edge + 1)]
    _check(tokens)


def test_integers_of_every_length():
    rng = np.random.default_rng(6)
    tokens = []
    for length in range(1, 26):
        digits = rng.integers(0, 10, (8_000, length)) + 48
        digits[:, 0] = rng.integers(1, 10, 8_000) + 48
        tokens += [bytes(row.astype(np.uint8)).decode() for row in digits]
    tokens += [str(2 ** k + d) for k in range(50, 84) for d in (-1, 0, 1, 2, 3)]
    statuses = _check(tokens)
    short = np.array([len(t) <= 19 for t in tokens])
    assert (statuses[short] == NUMBER).all()


def _halfway(x: float) -> Fraction:
    """The exact midpoint between a positive double and its successor."""
    return (Fraction(x) + Fraction(float(np.nextafter(x, np.inf)))) / 2


def _plain(value: Fraction) -> str:
    """A dyadic rational's exact decimal expansion."""
    return format(Decimal(value.numerator) / Decimal(value.denominator), "f")


def test_halfway_cases():
    """Exact midpoints between adjacent doubles round to the even one; those of at most 19 significant digits
    (doubles in [2**50, 1e19]) must be decided, also written with a negative exponent; the long ones and their
    neighbours one unit of the last digit away are decided correctly or left undecided."""
    from decimal import localcontext
    rng = np.random.default_rng(7)
    tokens = []
    with localcontext() as context:
        context.prec = 1200
        short = np.ldexp(rng.random(20_000) + 1.0, rng.integers(50, 63, 20_000))
        for x in short.tolist():
            text = _plain(_halfway(x))
            tokens += [text, text.replace(".", "") + "0e-" + str(len(text.split(".")[1]) + 1) if "." in text
                       else text + ".0"]
        wide = _random_doubles(rng, 6_000)
        for x in np.abs(wide).tolist():
            middle = Decimal(_plain(_halfway(x)))
            tiny = Decimal((0, (1,), middle.as_tuple().exponent - 2))
            tokens += [format(middle, "f"), format(middle + tiny, "f"), format(middle - tiny, "f")]
    statuses = _check(tokens)
    assert (statuses[:40_000] == NUMBER).all()
    assert (statuses[40_000:] == NUMBER).any()


def test_negatives():
    rng = np.random.default_rng(8)
    doubles = -np.abs(_random_doubles(rng, 100_000))
    assert (_check([*map(repr, doubles.tolist()), "-0", "-0.0", "-0e10", "-5e-324"]) == NUMBER).all()


INVALID = ["", "-", "+1", "+0", "NaN", "nan", "Infinity", "-Infinity", "inf", "01", "-01", "00", "1.", "-1.", ".5",
           "-.5", "1e", "1e+", "1e-", "1E", "e5", "1.e5", "1.5e", "1.5e+-3", "--1", "1-", "1+1", "0x10", "1_000",
           " 1", "1 ", "1,", "١", "1.5.5", "1e5.5", "1e5e5", "0.0.", "1ee5", "-e5", "\x00", "true"]


@pytest.mark.parametrize("token", INVALID)
def test_not_a_number(token: str):
    buf = np.frombuffer(token.encode("utf-8"), np.uint8)
    value, status = parse_number(buf, 0, buf.size)
    assert status == NOT_NUMBER and math.isnan(value)


def test_grammar_on_random_strings():
    """Strings over the number bytes: exactly those that match the JSON grammar parse, with float()'s value."""
    rng = np.random.default_rng(9)
    alphabet = np.frombuffer(b"0123456789+-.eE0-1.", np.uint8)
    tokens = []
    for length in range(0, 9):
        rows = alphabet[rng.integers(0, alphabet.size, (30_000, length))]
        tokens += sorted({bytes(row).decode() for row in rows})
    buf, starts, ends = _spans(tokens)
    statuses = parse_numbers(buf, starts, ends)[1]
    valid = np.array([GRAMMAR.fullmatch(t) is not None for t in tokens])
    assert valid.any() and not valid.all()
    assert ((statuses == NOT_NUMBER) == ~valid).all()
    _check([t for t, ok in zip(tokens, valid) if ok])


def test_undecided():
    halfway = "1.00000000000000011102230246251565404236316680908203125"  # 1 + 2**-53, 55 digits
    for token in ("1e309", "-1e400", "1.8e308", "1e100000000000", halfway):
        buf = np.frombuffer(token.encode(), np.uint8)
        assert parse_number(buf, 0, buf.size)[1] == UNDECIDED, token
    buf = np.frombuffer(b"0e100000000000 1e-100000000000", np.uint8)
    values, statuses = parse_numbers(buf, np.array([0, 15]), np.array([14, 30]))
    assert statuses.tolist() == [NUMBER, UNDECIDED] and values[0] == 0.0


def test_scan_number():
    buf = np.frombuffer(b'[1.5e-3, -2,"x":7E+1}0', np.uint8)
    assert scan_number(buf, 1, buf.size) == 7
    assert scan_number(buf, 9, buf.size) == 11
    assert scan_number(buf, 16, buf.size) == 20
    assert scan_number(buf, 0, buf.size) == 0
    assert scan_number(buf, 21, buf.size) == 22
    assert scan_number(buf, 1, 4) == 4


def test_scan_number_on_random_bytes():
    """The run found is the longest run of number bytes, for every start and limit."""
    rng = np.random.default_rng(10)
    alphabet = np.frombuffer(b"0123456789+-.eE,:] \x00\xff/:@^ dE", np.uint8)
    buf = alphabet[rng.integers(0, alphabet.size, 20_000)]
    buf[rng.integers(0, buf.size, 2_000)] = rng.integers(0, 256, 2_000)  # any byte too
    run = re.compile(rb"[0-9+\-.eE]*")
    text = buf.tobytes()
    buf = np.frombuffer(text, np.uint8)  # read-only, as every other caller's: one compiled specialisation, not two
    for start in range(0, buf.size, 7):
        limit = min(buf.size, start + int(rng.integers(0, 40)))
        assert scan_number(buf, start, limit) == start + len(run.match(text, start, limit).group()), start


@numba.njit(cache=True)
def _at_each(buf, starts, limits):  # pragma: no cover - compiled
    values, statuses, ends = np.empty(starts.size), np.empty(starts.size, np.int64), np.empty(starts.size, np.int64)
    for k in range(starts.size):
        values[k], statuses[k], ends[k] = parse_number_at(buf, starts[k], limits[k])
    return values, statuses, ends


@pytest.mark.parametrize("seed", [11, 12])
def test_parse_number_at_is_scan_then_parse(seed):
    """One pass gives what `scan_number` then `parse_number` of its run give: the run's end, the status and the
    value bit for bit, for every start and limit over text of numbers, near-numbers and other bytes."""
    rng = np.random.default_rng(seed)
    doubles = _random_doubles(rng, 300)
    words = [repr(float(v)) for v in doubles] + [f"{v:.25e}" for v in doubles[:50]] + [
        "0", "-0", "01", "1.", ".5", "-", "1e", "1e+", "1.5e-3e4", "1.2.3", "--1", "0.0008300870540551841",
        "12345678901234567890123", "1" * 40, "0." + "0" * 30 + "1", "1e999", "-1e-999", "7E+1", "2-3", "1+"]
    separators = [",", " ", "}", "]", ":", "", "x", "\n"]
    text = "".join(words[k] + separators[k % len(separators)] for k in rng.permutation(len(words))).encode()
    buf = np.frombuffer(text, np.uint8)
    starts = np.arange(buf.size, dtype=np.int64)
    limits = np.minimum(buf.size, starts + rng.integers(0, 45, buf.size)).astype(np.int64)
    limits[::3] = buf.size
    values, statuses, ends = _at_each(buf, starts, limits)
    for k in range(buf.size):
        end = scan_number(buf, starts[k], limits[k])
        value, status = parse_number(buf, starts[k], end)
        assert (ends[k], statuses[k]) == (end, status), (text[starts[k]:limits[k]], ends[k], statuses[k])
        if status == NUMBER:
            assert np.float64(value).view(np.uint64) == values[k].view(np.uint64), text[starts[k]:end]
    assert (statuses == NUMBER).sum() > 300 and (statuses == NOT_NUMBER).sum() > 300
