"""Ascend dump element types: known bit patterns of every decodable code, views without copies, errors."""

from __future__ import annotations

import mmap
import struct

import numpy as np
import pytest

from graphcmp.core.ascend_dtypes import (
    DATA_TYPE_CODES,
    DATA_TYPE_NAMES,
    ENCODINGS,
    UNDECODED,
    DataTypeError,
    cast,
    data_type_code,
    decode,
    half_to_single,
    itemsize_bits,
    lookup,
    nbytes_of,
)
from graphcmp.core.errors import DumpFormatError

DT = DATA_TYPE_CODES


def f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@pytest.mark.parametrize(("name", "fmt", "values"), [
    ("DT_FLOAT", "<f", [1.5, -2.0, 3.25]),
    ("DT_DOUBLE", "<d", [1e300, -0.5]),
    ("DT_FLOAT16", "<e", [65504.0, -1.0, 0.0009765625]),
    ("DT_INT8", "<b", [-128, 127, 0]),
    ("DT_UINT8", "<B", [255, 1]),
    ("DT_INT16", "<h", [-32768, 12345]),
    ("DT_UINT16", "<H", [65535, 2]),
    ("DT_INT32", "<i", [-(2**31), 7]),
    ("DT_UINT32", "<I", [2**32 - 1, 3]),
    ("DT_INT64", "<q", [-(2**63), 11]),
    ("DT_UINT64", "<Q", [2**64 - 1, 5]),
    ("DT_BOOL", "<?", [True, False, True]),
    ("DT_QINT8", "<b", [-3, 4]),
    ("DT_QUINT16", "<H", [60000]),
    ("DT_RESOURCE", "<q", [42]),
])
def test_plain_types_are_read_little_endian(name, fmt, values):
    raw = struct.pack(f"<{len(values)}{fmt[1]}", *values)
    got = decode(raw, DT[name], len(values))
    assert got.tolist() == values
    assert itemsize_bits(DT[name]) == struct.calcsize(fmt) * 8


def test_plain_types_are_views_of_the_buffer_without_a_copy(tmp_path):
    path = tmp_path / "t.bin"
    path.write_bytes(b"\x00" * 8 + np.arange(6, dtype="<f2").tobytes() + b"tail")
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        got = decode(memoryview(mapped)[8:], DT["DT_FLOAT16"], 6)
        assert got.tolist() == [0, 1, 2, 3, 4, 5]
        assert not got.flags.writeable and not got.flags.owndata
        del got  # the view must go before the map closes


def test_complex_types():
    raw = np.array([1 + 2j, -3.5j], "<c8").tobytes()
    assert decode(raw, DT["DT_COMPLEX64"], 2).tolist() == [1 + 2j, -3.5j]
    raw = np.array([0.5, -2.0, 1.0, 0.0], "<f2").tobytes()   # complex32: fp16 real, fp16 imaginary
    got = decode(raw, DT["DT_COMPLEX32"], 2)
    assert got.dtype == np.complex64 and got.tolist() == [0.5 - 2j, 1 + 0j]


def test_bf16_is_the_high_half_of_a_float32():
    raw = struct.pack("<4H", 0x3F80, 0xC0A0, 0x7F80, 0x0001)
    got = decode(raw, DT["DT_BF16"], 4)
    assert got.dtype == np.float32
    assert got.tolist() == [1.0, -5.0, np.inf, f32(0x00010000)]
    assert np.isnan(decode(struct.pack("<H", 0x7FC0), DT["DT_BF16"], 1)[0])


def test_fp8_e4m3fn():
    codes = bytes([0x7E, 0xFE, 0x38, 0x01, 0x08, 0x7F, 0xFF, 0x80])
    got = decode(codes, DT["DT_FLOAT8_E4M3FN"], 8)
    # largest 448, 1.0 (exponent 7 = bias), smallest subnormal 2**-9, smallest normal 2**-6, NaN only at S.1111.111
    assert got[:6].tolist()[:5] == [448.0, -448.0, 1.0, 2.0**-9, 2.0**-6]
    assert np.isnan(got[5]) and np.isnan(got[6]) and got[7] == 0 and np.signbit(got[7])
    assert np.isfinite(decode(bytes(range(256)), DT["DT_FLOAT8_E4M3FN"], 256)).sum() == 254


def test_fp8_e5m2():
    got = decode(bytes([0x7B, 0x7C, 0xFC, 0x7D, 0x3C, 0x01]), DT["DT_FLOAT8_E5M2"], 6)
    assert got[0] == 57344.0 and got[1] == np.inf and got[2] == -np.inf and np.isnan(got[3])
    assert got[4] == 1.0 and got[5] == 2.0**-16


def test_fp8_e8m0_scale():
    got = decode(bytes([127, 0, 254, 255]), DT["DT_FLOAT8_E8M0"], 4)
    assert got[:3].tolist() == [1.0, 2.0**-127, 2.0**127] and np.isnan(got[3])


@pytest.mark.parametrize(("code", "value"), [
    (0x00, 0.0), (0x08, 1.0), (0x0F, 1.875), (0x10, 2.0), (0x18, 0.5), (0x14, 3.0),
    (0x20, 4.0), (0x28, 8.0), (0x30, 0.25), (0x40, 16.0), (0x50, 2.0**-4), (0x60, 256.0), (0x6E, 32768.0),
    (0x70, 2.0**-8), (0x7E, 2.0**-15), (0x01, 2.0**-22), (0x07, 2.0**-16), (0x88, -1.0), (0xEE, -32768.0),
    (0xEF, -np.inf), (0x6F, np.inf),
])
def test_hifloat8(code, value):
    # dot 0001: exponent 0, 3 mantissa bits; 001: exponent +-1; 01: +-(2..3); 10: +-(4..7); 11: +-(8..15), 1 bit;
    # 0000: denormals 2**(m-23); 0x6F is infinity, so 2**15 is the largest finite value
    assert decode(bytes([code]), DT["DT_HIFLOAT8"], 1)[0] == value


def test_hifloat8_nan_and_order():
    assert np.isnan(decode(b"\x80", DT["DT_HIFLOAT8"], 1)[0])
    table = decode(bytes(range(0x6F)), DT["DT_HIFLOAT8"], 0x6F)
    assert len(set(table.tolist())) == 0x6F  # every positive code a different value


def test_int4_two_per_byte_low_nibble_first_sign_extended():
    got = decode(bytes([0x9F, 0x70, 0x08]), DT["DT_INT4"], 5)
    assert got.dtype == np.int8 and got.tolist() == [-1, -7, 0, 7, -8]
    assert itemsize_bits(DT["DT_INT4"]) == 4 and nbytes_of(DT["DT_INT4"], 5) == 3


def test_fp4_e2m1_two_per_byte():
    assert decode(bytes([0x21, 0xF7]), DT["DT_FLOAT4_E2M1"], 4).tolist() == [0.5, 1.0, 6.0, -6.0]


def test_uint1_eight_per_byte_most_significant_first():
    got = decode(bytes([0b10000001, 0b01000000]), DT["DT_UINT1"], 10)
    assert got.tolist() == [1, 0, 0, 0, 0, 0, 0, 1, 0, 1]
    assert nbytes_of(DT["DT_UINT1"], 10) == 2


def test_more_bytes_than_needed_are_ignored_fewer_are_an_error():
    assert decode(np.arange(4, dtype="<i4").tobytes(), DT["DT_INT32"], 2).tolist() == [0, 1]
    with pytest.raises(DataTypeError, match="DT_FLOAT16: 3 elements need 6 bytes, the tensor holds 4"):
        decode(b"\x00" * 4, DT["DT_FLOAT16"], 3)
    assert decode(b"", DT["DT_BF16"], 0).shape == (0,)


@pytest.mark.parametrize("code", [0, 13, 14, 15, 24, 25, 26, 30, 31, 37, 38, 41, 99])
def test_codes_without_a_decoding_are_a_dump_format_error(code):
    with pytest.raises(DataTypeError, match=f"code {code}\\)") as raised:
        decode(b"\x00" * 8, code, 1)
    assert isinstance(raised.value, DumpFormatError)


def test_every_schema_code_is_decoded_or_says_why_not():
    assert set(ENCODINGS) | set(UNDECODED) == set(DATA_TYPE_NAMES) and not set(ENCODINGS) & set(UNDECODED)
    for name in ("DT_INT2", "DT_UINT2", "DT_FLOAT6_E3M2", "DT_FLOAT6_E2M3"):
        with pytest.raises(DataTypeError, match=f"^{name} \\(code \\d+\\) is not decoded: no public source says how "
                                                "its elements are packed in a dump file"):
            decode(b"\x00" * 8, DT[name], 4)


def _bit_by_bit(code: int, exp_bits: int, man_bits: int, bias: int) -> float:
    """A small float with no infinity or NaN, read from the string of its bits (independent of graphcmp's tables)."""
    bits = format(code, f"0{1 + exp_bits + man_bits}b")
    sign, exponent, mantissa = bits[0], bits[1:1 + exp_bits], bits[1 + exp_bits:]
    e = sum(int(b) << k for k, b in enumerate(reversed(exponent)))
    fraction = sum(int(b) * 2.0 ** -(k + 1) for k, b in enumerate(mantissa))
    value = fraction * 2.0 ** (1 - bias) if e == 0 else (1 + fraction) * 2.0 ** (e - bias)
    return -value if sign == "1" else value


@pytest.mark.parametrize(("name", "exp_bits", "man_bits"), [("DT_FLOAT4_E1M2", 1, 2), ("DT_FLOAT4_E2M1", 2, 1)])
def test_fp4_every_code_against_a_bit_by_bit_decoder(name, exp_bits, man_bits):
    codes = np.arange(16, dtype=np.uint8)
    packed = (codes[0::2] | codes[1::2] << 4).tobytes()  # two per byte, the first in the low nibble
    got = decode(packed, DT[name], 16)
    assert got.dtype == np.float32
    assert got.tolist() == [_bit_by_bit(int(c), exp_bits, man_bits, bias=1) for c in codes]


def test_fp4_e1m2_values_are_those_of_ascend_cs_table():
    # Fp4e1m2ToBf16 in hicann/asc-devkit impl/basic_api/kernel_type_conversion_utils.h, as bfloat16 bits
    table = [0x0, 0x3E80, 0x3F00, 0x3F40, 0x3F80, 0x3FA0, 0x3FC0, 0x3FE0,
             0x8000, 0xBE80, 0xBF00, 0xBF40, 0xBF80, 0xBFA0, 0xBFC0, 0xBFE0]
    got = decode(bytes(c | c << 4 for c in range(16)), DT["DT_FLOAT4_E1M2"], 32)[0::2]
    assert got.tolist() == [f32(bits << 16) for bits in table]
    assert float(np.abs(got).max()) == 1.75


def test_fp4_e1m2_odd_count_and_random_codes():
    rng = np.random.default_rng(40)
    codes = rng.integers(0, 16, 7, dtype=np.uint8)
    padded = np.append(codes, np.uint8(0))
    packed = (padded[0::2] | padded[1::2] << 4).tobytes()
    got = decode(packed, DT["DT_FLOAT4_E1M2"], 7)
    assert got.tolist() == [_bit_by_bit(int(c), 1, 2, bias=1) for c in codes]
    assert nbytes_of(DT["DT_FLOAT4_E1M2"], 7) == 4


def test_names_and_codes_are_one_table():
    assert {DATA_TYPE_CODES[name] for name in DATA_TYPE_NAMES.values()} == set(DATA_TYPE_NAMES)
    assert set(ENCODINGS) <= set(DATA_TYPE_NAMES)
    assert data_type_code("float16") == data_type_code("DT_FLOAT16") == 2
    with pytest.raises(DataTypeError, match="unknown data type 'DT_FLOAT128'"):
        data_type_code("DT_FLOAT128")


def test_cast_of_every_half_float_is_numpys_own_bit_for_bit():
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    got = cast(every, np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), every.astype(np.float32).view(np.uint32))
    assert cast(every, np.float16) is every
    assert cast(every[:3], np.float64).dtype == np.float64


@pytest.mark.parametrize("shape", [(5,), (3, 70_000), (7, 5, 3), (200_000,), (2, 3, 40_000, 2)])
def test_lookup_of_strided_codes_into_strided_out(shape, monkeypatch):
    import graphcmp.core.ascend_dtypes as module

    monkeypatch.setattr(module, "_CHUNK", 1000)  # many steps, and blocks cut inside an axis
    rng = np.random.default_rng(1)
    table = rng.standard_normal(256).astype(np.float32)
    codes = rng.integers(0, 256, shape[::-1], np.uint8).transpose()   # a transposed view
    out = np.zeros((*shape, 2), np.float32)[..., 0]                   # every other element
    lookup(table, codes, out=out)
    np.testing.assert_array_equal(out, table[codes])
    np.testing.assert_array_equal(lookup(table, codes), table[codes])


def test_half_to_single_of_every_half_float_is_numpys_own_bit_for_bit():
    codes = np.arange(1 << 16, dtype=np.uint16)
    got = half_to_single(codes, np.empty(codes.size, np.float32))
    np.testing.assert_array_equal(got.view(np.uint32), codes.view(np.float16).astype(np.float32).view(np.uint32))


def test_half_to_single_of_a_block_without_infinities_or_nans_and_bad_arguments():
    codes = np.array([0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF], np.uint16)  # zeros, subnormals, ends
    got = half_to_single(codes, np.full(codes.size, np.nan, np.float32))
    np.testing.assert_array_equal(got.view(np.uint32), codes.view(np.float16).astype(np.float32).view(np.uint32))
    with pytest.raises(ValueError, match="uint16 codes and a C-contiguous"):
        half_to_single(codes.astype(np.int16), np.empty(codes.size, np.float32))


def test_half_to_single_gathers_strided_codes_of_any_shape():
    every = np.arange(1 << 16, dtype=np.uint16).reshape(16, 64, 64)
    codes = every[:, ::3, 5:40].transpose(2, 0, 1)  # strided, transposed, NaNs among them
    got = half_to_single(codes, np.empty(codes.shape, np.float32))
    np.testing.assert_array_equal(got.view(np.uint32), codes.view(np.float16).astype(np.float32).view(np.uint32))
    with pytest.raises(ValueError, match="C-contiguous"):
        half_to_single(codes, np.empty(codes.shape[::-1], np.float32).transpose())
