"""Element types of Ascend raw dump tensors: the ``data_type`` codes of ``dump_data.proto`` decoded from raw bytes.

A raw dump file (``toolkit.dumpdata.DumpData``, docs of the format: ``ASCEND_RAW_DUMP.md``) gives each tensor an
``OutputDataType`` code and its bytes, little-endian. `decode` turns such bytes into a numpy array: a view of the
buffer where numpy has the type (fp16, fp32, the integers ...), otherwise a new array of the nearest numpy type
(bf16 and the 8-bit floats as float32, packed int4 as int8, uint1 as uint8). The tables here are data: the codes
and their names (`DATA_TYPE_NAMES`, `DATA_TYPE_CODES`) and how each code is stored (`ENCODINGS`).

Codes 0-31 are the enum of CANN 8.1.RC1's ``dump_data.proto``; 32-40 are the later additions msprobe's msaccucmp
knows (``DT_COMPLEX32`` ... ``DT_FLOAT4_E1M2``). Sources of the encodings:

* bf16: the high half of a float32 (shifted into place, exact);
* fp8 e4m3fn / e5m2: the OCP 8-bit floating point formats (e4m3fn: bias 7, no infinity, S.1111.111 is NaN,
  largest 448; e5m2: bias 15, IEEE infinities and NaNs); e8m0: the OCP MX scale, 2**(bits - 127), 0xFF NaN;
* hifloat8: "Ascend HiFloat8 Format for Deep Learning" (arXiv 2409.16626): a sign, a prefix-coded "dot" field
  (11, 10, 01, 001, 0001 give 4, 3, 2, 1, 0 exponent bits), the exponent in sign-magnitude with an implicit leading
  one, the rest mantissa; dot 0000 holds denormals 2**(m - 23); 0x00 zero, 0x80 NaN, 0x6F/0xEF +-infinity
  (MindSpore's ``HiFloat8::ToFloat32`` reads the bits the same way);
* int4: two per byte, the low nibble first, sign-extended (msprobe's ``TransInt4ToInt8``); fp4 e2m1 (bias 1, no
  infinity or NaN) and fp4 e1m2 two per byte as well (both are Ascend C's ``fp4x2_*_t``: two elements in a byte),
  CANN asks for an even last dimension; their nibble order is taken from int4. fp4 e1m2 is a sign, one exponent bit
  and two mantissa bits, bias 1, no infinity or NaN: 0, 0.25 ... 0.75 (subnormal), 1, 1.25 ... 1.75, the values of
  Ascend C's ``Fp4e1m2ToBf16`` table (hicann/asc-devkit ``impl/basic_api/kernel_type_conversion_utils.h``);
* uint1: eight per byte, read with ``numpy.unpackbits``, most significant bit first, as msaccucmp reads them;
* quantized integers as the integers they are, a resource as an int64 handle (as msaccucmp reads it).

Codes without numbers (undefined, strings, variants, dual outputs) and those whose packing in a dump file no public
source pins down (int2, uint2, fp6 e3m2 and e2m3: `UNDECODED` says why) raise `DataTypeError`, as an unknown code does.

Speed: `lookup` gathers table values for codes of any shape and strides a cache-sized block at a time, and `cast`
turns float16 into float32 with `half_to_single` (vector integer operations and one scaling, 0.3 ns a value on
this 2-core machine): numpy's own cast of half floats is scalar software in its build (no F16C), 2 ns a value, and a
table lookup 1.2 ns.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np

from graphcmp.core.errors import DumpFormatError

__all__ = [
    "DATA_TYPE_CODES",
    "DATA_TYPE_NAMES",
    "ENCODINGS",
    "UNDECODED",
    "DataTypeError",
    "Encoding",
    "cast",
    "data_type_code",
    "decode",
    "encoding_of",
    "float16_table",
    "half_to_single",
    "itemsize_bits",
    "lookup",
    "nbytes_of",
]


class DataTypeError(DumpFormatError):
    """A tensor's ``data_type`` code is unknown, has no numeric decoding, or its bytes are too few for its count."""


DATA_TYPE_NAMES: Mapping[int, str] = MappingProxyType({
    0: "DT_UNDEFINED", 1: "DT_FLOAT", 2: "DT_FLOAT16", 3: "DT_INT8", 4: "DT_UINT8", 5: "DT_INT16", 6: "DT_UINT16",
    7: "DT_INT32", 8: "DT_INT64", 9: "DT_UINT32", 10: "DT_UINT64", 11: "DT_BOOL", 12: "DT_DOUBLE", 13: "DT_STRING",
    14: "DT_DUAL_SUB_INT8", 15: "DT_DUAL_SUB_UINT8", 16: "DT_COMPLEX64", 17: "DT_COMPLEX128", 18: "DT_QINT8",
    19: "DT_QINT16", 20: "DT_QINT32", 21: "DT_QUINT8", 22: "DT_QUINT16", 23: "DT_RESOURCE", 24: "DT_STRING_REF",
    25: "DT_DUAL", 26: "DT_VARIANT", 27: "DT_BF16", 28: "DT_INT4", 29: "DT_UINT1", 30: "DT_INT2", 31: "DT_UINT2",
    32: "DT_COMPLEX32", 33: "DT_HIFLOAT8", 34: "DT_FLOAT8_E5M2", 35: "DT_FLOAT8_E4M3FN", 36: "DT_FLOAT8_E8M0",
    37: "DT_FLOAT6_E3M2", 38: "DT_FLOAT6_E2M3", 39: "DT_FLOAT4_E2M1", 40: "DT_FLOAT4_E1M2",
})
"""``OutputDataType`` code -> its name in ``dump_data.proto`` (32-40: msprobe's later codes)."""

DATA_TYPE_CODES: Mapping[str, int] = MappingProxyType({name: code for code, name in DATA_TYPE_NAMES.items()})
"""Name (``DT_FLOAT16``) -> ``OutputDataType`` code."""


# --- lookup tables of the 8-bit and 4-bit floats, built once from the definitions ---------------------------------

def _minifloat(code: int, exp_bits: int, man_bits: int, bias: int, special: str) -> float:
    """The value of one `code` of a small float with a sign bit; `special` says what the all-ones exponent means:
    "ieee" (infinity or NaN), "fn" (only all-ones mantissa is NaN) or "none" (a normal number)."""
    sign = -1.0 if code >> (exp_bits + man_bits) & 1 else 1.0
    exponent = code >> man_bits & ((1 << exp_bits) - 1)
    mantissa = code & ((1 << man_bits) - 1)
    top = (1 << exp_bits) - 1
    if special == "ieee" and exponent == top:
        return sign * np.inf if mantissa == 0 else np.nan
    if special == "fn" and exponent == top and mantissa == (1 << man_bits) - 1:
        return np.nan
    if exponent == 0:
        return sign * mantissa / (1 << man_bits) * 2.0 ** (1 - bias)
    return sign * (1 + mantissa / (1 << man_bits)) * 2.0 ** (exponent - bias)


def _hifloat8(code: int) -> float:
    """The value of one HiFloat8 `code` (arXiv 2409.16626, see the module docstring)."""
    if code == 0x80:
        return np.nan
    sign = -1.0 if code & 0x80 else 1.0
    rest = code & 0x7F
    if rest == 0x6F:
        return sign * np.inf
    if rest >> 5:                        # dot 11, 10, 01: 4, 3, 2 exponent bits
        exp_bits, field_bits = {0b11: 4, 0b10: 3, 0b01: 2}[rest >> 5], 5
    elif rest >> 4:                      # dot 001: 1 exponent bit
        exp_bits, field_bits = 1, 4
    elif rest >> 3:                      # dot 0001: exponent 0
        return sign * (1 + (rest & 0x07) / 8)
    else:                                # dot 0000: denormal 2**(m - 23), m = 0 is zero
        return sign * 2.0 ** ((rest & 0x07) - 23) if rest & 0x07 else 0.0 * sign
    field = rest & ((1 << field_bits) - 1)
    man_bits = field_bits - exp_bits
    exp_field = field >> man_bits
    magnitude = (1 << (exp_bits - 1)) + (exp_field & ((1 << (exp_bits - 1)) - 1))
    exponent = -magnitude if exp_field >> (exp_bits - 1) else magnitude
    return sign * (1 + (field & ((1 << man_bits) - 1)) / (1 << man_bits)) * 2.0 ** exponent


def _table(value: Callable[[int], float], size: int) -> np.ndarray:
    table = np.array([value(code) for code in range(size)], np.float32)
    table.flags.writeable = False
    return table


_E4M3FN = _table(partial(_minifloat, exp_bits=4, man_bits=3, bias=7, special="fn"), 256)
_E5M2 = _table(partial(_minifloat, exp_bits=5, man_bits=2, bias=15, special="ieee"), 256)
_E8M0 = _table(lambda code: np.nan if code == 0xFF else 2.0 ** (code - 127), 256)
_HIF8 = _table(_hifloat8, 256)
_E2M1 = _table(partial(_minifloat, exp_bits=2, man_bits=1, bias=1, special="none"), 16)
_E1M2 = _table(partial(_minifloat, exp_bits=1, man_bits=2, bias=1, special="none"), 16)


# --- decoders: (buffer, count) -> array -----------------------------------------------------------------------------

def _view(dtype: str, buffer: Any, count: int) -> np.ndarray:
    return np.frombuffer(buffer, dtype, count=count)


def _bf16(buffer: Any, count: int) -> np.ndarray:
    halves = np.frombuffer(buffer, "<u2", count=count)
    return (halves.astype(np.uint32) << 16).view(np.float32)


_CHUNK = 1 << 16
"""Elements per step of a table lookup: the step's indices and values stay in the processor's cache."""


def lookup(table: np.ndarray, codes: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``table[codes]`` for unsigned integer `codes` of any shape and strides, into `out` (any strides) or a new
    array, about `_CHUNK` elements at a time.

    Each step widens its codes into a reused index buffer, gathers them with ``numpy.take`` into a reused value
    buffer and copies that into place. Indexing with a whole uint8/uint16 array at once converts every index first
    (a pass over eight bytes per element), and a transposed `codes` view is read in cache-sized blocks.

    >>> lookup(np.array([0.5, 2.0], np.float32), np.array([[1, 0]], np.uint8))
    array([[2. , 0.5]], dtype=float32)
    """
    out = np.empty(codes.shape, table.dtype) if out is None else out
    if out.shape != codes.shape:
        raise ValueError(f"lookup: `out` has shape {out.shape}, the codes {codes.shape}")
    if codes.ndim == 0 or codes.size == 0:
        out[...] = table[codes]
        return out
    axis = codes.ndim - 1                   # stepped through in runs of `rows`; the axes after it whole
    while axis > 0 and math.prod(codes.shape[axis:]) <= _CHUNK:
        axis -= 1
    block = codes.shape[axis + 1:]
    rows = max(1, _CHUNK // math.prod(block))
    index = np.empty((min(rows, codes.shape[axis]), *block), np.intp)
    values = np.empty(index.shape, table.dtype)
    for at in itertools.product(*map(range, codes.shape[:axis])):
        for start in range(0, codes.shape[axis], rows):
            step = (*at, slice(start, start + rows))
            count = min(rows, codes.shape[axis] - start)
            np.copyto(index[:count], codes[step], casting="safe")
            np.take(table, index[:count], out=values[:count], mode="wrap")
            np.copyto(out[step], values[:count])
    return out


def _lookup(table: np.ndarray, buffer: Any, count: int) -> np.ndarray:
    return lookup(table, np.frombuffer(buffer, np.uint8, count=count))


_FP16: list[np.ndarray] = []


def float16_table() -> np.ndarray:
    """Every float16 value by its bits, as float32 (numpy's own exact cast, made once: 256 KiB, read-only).

    >>> float16_table()[0x3C00], float16_table()[0xFC00]
    (np.float32(1.0), np.float32(-inf))
    """
    if not _FP16:
        table = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
        table.flags.writeable = False
        _FP16.append(table)
    return _FP16[0]


def cast(array: np.ndarray, dtype: np.dtype | type | str) -> np.ndarray:
    """`array` as `dtype` (a new array, or `array` itself when it has that type already).

    float16 to float32 goes through `half_to_single` a block at a time: numpy converts half floats one element
    at a time in software (its build assumes no F16C), six to eight times slower.

    >>> cast(np.array([1.5, -65504, np.inf], np.float16), np.float32).tolist()
    [1.5, -65504.0, inf]
    """
    dtype = np.dtype(dtype)
    if array.dtype == dtype:
        return array
    if array.dtype == np.float16 and dtype == np.float32:
        codes = np.ascontiguousarray(array).view(np.uint16)
        out = np.empty(array.shape, np.float32)
        flat_codes, flat_out = codes.reshape(-1), out.reshape(-1)
        for start in range(0, flat_codes.size, _HALF_BLOCK):
            half_to_single(flat_codes[start:start + _HALF_BLOCK], flat_out[start:start + _HALF_BLOCK])
        return out
    return array.astype(dtype)


_HALF_BLOCK = 1 << 17
"""Elements per step of `cast` from float16: the step's 32-bit words stay in the processor's cache."""

_HALF_SCALE = np.float32(2.0 ** 112)  # 2**(127 - 15): a half float's exponent bias moved to a float's
_HALF_SIGN_AND_FIELDS = np.int32(-0x70000001)  # 0x8FFFFFFF: the sign and the 28 bits the half's fields fill
_HALF_SPECIAL = float(1 << 16)  # inf and NaN codes (exponent 31) come out of the scaling at 2**16 or more


def half_to_single(codes: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The float16 values whose bits are `codes` (uint16, any shape and strides) as float32 in `out` (C-contiguous,
    of their shape), exactly.

    Integer and float operations over the whole block, each a vector loop: the half's bits moved to the top of a
    32-bit word, shifted right by 3 as a signed word (sign, exponent and mantissa land where a float's go, the sign
    copied into three bits that are then cleared) and scaled by 2**112, which fixes the exponent bias and turns a
    half's subnormals into the floats they are. Infinities and NaNs (exponent 31) come out at 2**16 or more and
    are looked up in `float16_table`. About four times faster than `lookup` in that table.

    >>> half_to_single(np.array([0x3C00, 0x8001, 0x7C00, 0xFE00], np.uint16), np.empty(4, np.float32)).tolist()
    [1.0, -5.960464477539063e-08, inf, nan]
    """
    if codes.dtype != np.uint16 or out.dtype != np.float32 or out.shape != codes.shape or not out.flags.c_contiguous:
        raise ValueError(f"half_to_single: expected uint16 codes and a C-contiguous float32 `out` of their shape, "
                         f"got {codes.dtype} {codes.shape} and {out.dtype} {out.shape}")
    words = out.view(np.uint32)
    np.left_shift(codes, np.uint32(16), out=words, casting="safe")
    signed = words.view(np.int32)
    np.right_shift(signed, 3, out=signed)
    np.bitwise_and(signed, _HALF_SIGN_AND_FIELDS, out=signed)
    np.multiply(out, _HALF_SCALE, out=out)
    if out.size and (np.maximum.reduce(out, axis=None) >= _HALF_SPECIAL
                     or np.minimum.reduce(out, axis=None) <= -_HALF_SPECIAL):
        special = np.abs(out) >= _HALF_SPECIAL
        out[special] = float16_table()[codes[special]]
    return out


def _nibbles(buffer: Any, count: int) -> np.ndarray:
    """The 4-bit fields of `buffer` as uint8, the low nibble of each byte first."""
    packed = np.frombuffer(buffer, np.uint8, count=(count + 1) // 2)
    out = np.empty(2 * packed.size, np.uint8)
    out[0::2] = packed & 0x0F
    out[1::2] = packed >> 4
    return out[:count]


def _int4(buffer: Any, count: int) -> np.ndarray:
    return ((_nibbles(buffer, count) ^ 0x08).view(np.int8) - 8).astype(np.int8, copy=False)


def _fp4(table: np.ndarray, buffer: Any, count: int) -> np.ndarray:
    return table[_nibbles(buffer, count)]


def _uint1(buffer: Any, count: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(buffer, np.uint8, count=(count + 7) // 8), count=count)


def _complex32(buffer: Any, count: int) -> np.ndarray:
    parts = np.frombuffer(buffer, "<f2", count=2 * count).astype(np.float32)
    return parts.view(np.complex64)


@dataclass(frozen=True, slots=True)
class Encoding:
    """How one ``data_type`` is stored: `bits` per element in the file, the numpy type `decode` returns
    (`result`), and the decoder ``(buffer, count) -> array``; `view` when that array is a view of the buffer."""

    bits: int
    result: np.dtype
    decoder: Callable[[Any, int], np.ndarray]
    view: bool


def _plain(dtype: str) -> Encoding:
    numpy_type = np.dtype(dtype)
    return Encoding(numpy_type.itemsize * 8, numpy_type.newbyteorder("="), partial(_view, dtype), True)


ENCODINGS: Mapping[int, Encoding] = MappingProxyType({
    1: _plain("<f4"), 2: _plain("<f2"), 3: _plain("i1"), 4: _plain("u1"), 5: _plain("<i2"), 6: _plain("<u2"),
    7: _plain("<i4"), 8: _plain("<i8"), 9: _plain("<u4"), 10: _plain("<u8"), 11: _plain("?"), 12: _plain("<f8"),
    16: _plain("<c8"), 17: _plain("<c16"),
    # quantized integers are stored as the integers they are; a resource is a 64-bit handle (as msaccucmp reads it)
    18: _plain("i1"), 19: _plain("<i2"), 20: _plain("<i4"), 21: _plain("u1"), 22: _plain("<u2"), 23: _plain("<i8"),
    27: Encoding(16, np.dtype(np.float32), _bf16, False),
    28: Encoding(4, np.dtype(np.int8), _int4, False),
    29: Encoding(1, np.dtype(np.uint8), _uint1, False),
    32: Encoding(32, np.dtype(np.complex64), _complex32, False),
    33: Encoding(8, np.dtype(np.float32), partial(_lookup, _HIF8), False),
    34: Encoding(8, np.dtype(np.float32), partial(_lookup, _E5M2), False),
    35: Encoding(8, np.dtype(np.float32), partial(_lookup, _E4M3FN), False),
    36: Encoding(8, np.dtype(np.float32), partial(_lookup, _E8M0), False),
    39: Encoding(4, np.dtype(np.float32), partial(_fp4, _E2M1), False),
    40: Encoding(4, np.dtype(np.float32), partial(_fp4, _E1M2), False),
})
"""``OutputDataType`` code -> its `Encoding`, for every code graphcmp can decode."""

_NO_NUMBERS = "it holds no numbers"
_NO_PACKING = "no public source says how its elements are packed in a dump file (docs/formats/ascend.md)"

UNDECODED: Mapping[int, str] = MappingProxyType({
    0: _NO_NUMBERS, 13: _NO_NUMBERS, 14: "a dual output's half: " + _NO_NUMBERS + " of its own",
    15: "a dual output's half: " + _NO_NUMBERS + " of its own", 24: _NO_NUMBERS, 25: _NO_NUMBERS, 26: _NO_NUMBERS,
    30: _NO_PACKING, 31: _NO_PACKING, 37: _NO_PACKING, 38: _NO_PACKING,
})
"""``OutputDataType`` code of the schema -> why graphcmp does not decode it (every code not in `ENCODINGS`)."""


def data_type_code(name: str) -> int:
    """The ``OutputDataType`` code of `name`, with or without the ``DT_`` prefix, any case.

    >>> data_type_code("DT_FLOAT16"), data_type_code("bf16")
    (2, 27)
    """
    key = name.strip().upper()
    code = DATA_TYPE_CODES.get(key, DATA_TYPE_CODES.get(f"DT_{key}"))
    if code is None:
        raise DataTypeError(f"unknown data type {name!r}: expected one of {', '.join(DATA_TYPE_CODES)}")
    return code


def _name(data_type: int) -> str:
    return DATA_TYPE_NAMES.get(data_type, f"data_type {data_type}")


def encoding_of(data_type: int) -> Encoding:
    """The `Encoding` of `data_type`.

    Raises
    ------
    DataTypeError
        If the code is unknown or not decoded (strings, int2, fp6 ...: `UNDECODED` says why).

    >>> encoding_of(27).bits, encoding_of(27).result
    (16, dtype('float32'))
    """
    encoding = ENCODINGS.get(int(data_type))
    if encoding is not None:
        return encoding
    if int(data_type) in UNDECODED:
        raise DataTypeError(f"{_name(data_type)} (code {int(data_type)}) is not decoded: {UNDECODED[int(data_type)]}")
    raise DataTypeError(f"unknown data_type {_name(data_type)} (code {int(data_type)}): graphcmp decodes "
                        + ", ".join(DATA_TYPE_NAMES[code] for code in ENCODINGS))


def itemsize_bits(data_type: int) -> int:
    """Bits one element of `data_type` takes in a dump file (4 for int4, 1 for uint1).

    >>> itemsize_bits(2), itemsize_bits(28), itemsize_bits(29)
    (16, 4, 1)
    """
    return encoding_of(data_type).bits


def nbytes_of(data_type: int, count: int) -> int:
    """Bytes `count` elements of `data_type` take (packed types round up to a whole byte).

    >>> nbytes_of(28, 5), nbytes_of(1, 3)
    (3, 12)
    """
    return (itemsize_bits(data_type) * int(count) + 7) // 8


def decode(buffer: Any, data_type: int, count: int) -> np.ndarray:
    """The first `count` elements of `buffer` (little-endian bytes of `data_type`) as a 1-D numpy array.

    Parameters
    ----------
    buffer : bytes, memoryview, mmap or uint8 array
        The tensor's bytes; more than `count` elements need is fine (the rest is ignored).
    data_type : int
        The ``OutputDataType`` code (`DATA_TYPE_NAMES`).
    count : int
        Number of elements (the product of the tensor's device shape).

    Returns
    -------
    numpy.ndarray
        A read-only view of `buffer` when numpy has the type (``Encoding.view``), else a new array: bf16, fp8,
        hifloat8 and both fp4 as float32, int4 as int8, uint1 as uint8 (0 or 1), complex32 as complex64.

    Raises
    ------
    DataTypeError
        If the code cannot be decoded, or `buffer` holds fewer bytes than `count` elements need.

    Examples
    --------
    >>> decode(bytes([0x80, 0x3F]), 27, 1)
    array([1.], dtype=float32)
    >>> decode(bytes([0x7E]), 35, 1), decode(bytes([0x7C]), 34, 1)
    (array([448.], dtype=float32), array([inf], dtype=float32))
    >>> decode(bytes([0x9F]), 28, 2)
    array([-1, -7], dtype=int8)
    """
    encoding = encoding_of(data_type)
    count = int(count)
    if count < 0:
        raise DataTypeError(f"{_name(data_type)}: negative element count {count}")
    available = memoryview(buffer).nbytes
    needed = (encoding.bits * count + 7) // 8
    if available < needed:
        raise DataTypeError(f"{_name(data_type)}: {count} elements need {needed} bytes, the tensor holds {available}")
    return encoding.decoder(buffer, count)
