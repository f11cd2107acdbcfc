"""Device formats back to the original layout: round trips through a forward layout written element by element.

The forward functions below place each host element at its device index with explicit loops (the definitions of
``ASCEND_RAW_DUMP.md`` section 3 and MindSpore's ``ms_device_shape_transfer.cc``); the padding is filled with a
sentinel, so a result that kept any of it fails. `to_original` is whole-array numpy: the two share no code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from graphcmp.core.ascend_dtypes import DATA_TYPE_CODES, decode
from graphcmp.core.device_formats import (
    FORMAT_CODES,
    FORMAT_NAMES,
    DeviceFormatError,
    format_code,
    format_name,
    original_elements,
    to_original,
)
from graphcmp.core.errors import DumpFormatError

PAD = 77  # what the forward layouts put in the padding


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def host(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Distinct values (never PAD) so that a misplaced element shows."""
    return np.random.default_rng(seed).permutation(math.prod(shape)).reshape(shape).astype(np.float32) + 100


def nc1hwc0(x: np.ndarray, c0: int) -> np.ndarray:
    n, c, h, w = x.shape
    dev = np.full((n, ceil_div(c, c0), h, w, c0), PAD, x.dtype)
    for ni, ci, hi, wi in np.ndindex(x.shape):
        dev[ni, ci // c0, hi, wi, ci % c0] = x[ni, ci, hi, wi]
    return dev


def fractal_z(x: np.ndarray, c0: int, n0: int = 16) -> np.ndarray:
    n, c, h, w = x.shape
    dev = np.full((ceil_div(c, c0) * h * w, ceil_div(n, n0), n0, c0), PAD, x.dtype)
    for ni, ci, hi, wi in np.ndindex(x.shape):
        dev[(ci // c0) * h * w + hi * w + wi, ni // n0, ni % n0, ci % c0] = x[ni, ci, hi, wi]
    return dev


def fractal_nz(x: np.ndarray, w0: int, h0: int = 16) -> np.ndarray:
    matrix = x.reshape(1, -1) if x.ndim == 1 else x
    *batch, h, w = matrix.shape
    dev = np.full((*batch, ceil_div(w, w0), ceil_div(h, h0), h0, w0), PAD, x.dtype)
    for index in np.ndindex(matrix.shape):
        *b, hi, wi = index
        dev[(*b, wi // w0, hi // h0, hi % h0, wi % w0)] = matrix[index]
    return dev


def ndc1hwc0(x: np.ndarray, c0: int) -> np.ndarray:
    n, c, d, h, w = x.shape
    dev = np.full((n, d, ceil_div(c, c0), h, w, c0), PAD, x.dtype)
    for ni, ci, di, hi, wi in np.ndindex(x.shape):
        dev[ni, di, ci // c0, hi, wi, ci % c0] = x[ni, ci, di, hi, wi]
    return dev


def fractal_z_3d(x: np.ndarray, c0: int, n0: int = 16) -> np.ndarray:
    n, c, d, h, w = x.shape
    c1 = ceil_div(c, c0)
    dev = np.full((d * c1 * h * w, ceil_div(n, n0), n0, c0), PAD, x.dtype)
    for ni, ci, di, hi, wi in np.ndindex(x.shape):
        dev[di * c1 * h * w + (ci // c0) * h * w + hi * w + wi, ni // n0, ni % n0, ci % c0] = x[ni, ci, di, hi, wi]
    return dev


def c1hwncoc0(x: np.ndarray, c0: int) -> np.ndarray:
    n, c, h, w = x.shape
    dev = np.full((ceil_div(c, c0), h, w, n, c0, c0), PAD, x.dtype)
    for ni, ci, hi, wi in np.ndindex(x.shape):
        dev[ci // c0, hi, wi, ni, ci % c0, ci % c0] = x[ni, ci, hi, wi]
    return dev


def fractal_z_c04(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    reduction = ceil_div(c, 4) * h * w * 4
    dev = np.full((ceil_div(reduction, 16), ceil_div(n, 16), 16, 16), PAD, x.dtype)
    for ni, ci, hi, wi in np.ndindex(x.shape):
        k = (ci // 4) * h * w * 4 + hi * w * 4 + wi * 4 + ci % 4
        dev[k // 16, ni // 16, ni % 16, k % 16] = x[ni, ci, hi, wi]
    return dev


SHAPES_4D = [(1, 3, 2, 2), (2, 16, 3, 5), (17, 33, 3, 3), (5, 7, 1, 1), (16, 64, 2, 1), (3, 1, 5, 7)]
SHAPES_5D = [(1, 3, 2, 2, 2), (17, 20, 3, 1, 3), (2, 16, 1, 4, 5)]
SHAPES_ND = [(5,), (3, 7), (16, 16), (17, 33), (2, 3, 20, 31), (2, 1, 40)]


def check(device: np.ndarray, fmt: str, original: np.ndarray, original_format: str | None = None, **kw) -> None:
    flat = device.reshape(-1)  # as decode hands it over
    got = to_original(flat, fmt, device.shape, original.shape, original_format, **kw)
    assert got.shape == original.shape
    np.testing.assert_array_equal(got, original)
    # the elements the statistics read: every original value once, no padding (PAD is no original value)
    pieces = original_elements(flat, fmt, device.shape, original.shape, original_format, kw.get("sub_format", 0))
    values = np.concatenate([piece.reshape(-1) for piece in pieces])
    np.testing.assert_array_equal(np.sort(values), np.sort(original.reshape(-1)))
    if fmt not in ("FRACTAL_Z_C04",) and kw.get("sub_format", 0) <= 1:
        assert all(np.shares_memory(piece, flat) for piece in pieces if piece.size)  # views: nothing copied


@pytest.mark.parametrize("shape", SHAPES_4D)
@pytest.mark.parametrize("c0", [16, 32, 64])
def test_nc1hwc0_round_trip(shape, c0):
    x = host(shape)
    check(nc1hwc0(x, c0), "NC1HWC0", x)
    check(nc1hwc0(x, c0), FORMAT_CODES["NC1HWC0"], x, "NCHW")


@pytest.mark.parametrize("layout", ["NHWC", "HWCN", "CHWN"])
def test_nc1hwc0_to_the_original_layout(layout):
    x = host((3, 20, 5, 7))
    order = ["NCHW".index(letter) for letter in layout]
    check(nc1hwc0(x, 16), "NC1HWC0", x.transpose(order), layout)


@pytest.mark.parametrize("shape", [(5,), (3, 20), (20, 3, 5)])
def test_nc1hwc0_of_fewer_dimensions_is_padded_as_mindspore_pads_it(shape):
    x = host(shape)
    as_nchw = {1: lambda a: a.reshape(1, -1, 1, 1), 2: lambda a: a.reshape(*a.shape, 1, 1),
               3: lambda a: a.reshape(1, *a.shape)}[len(shape)](x)
    check(nc1hwc0(as_nchw, 16), "NC1HWC0", x)


@pytest.mark.parametrize("shape", SHAPES_4D)
def test_nc1hwc0_c04_round_trip(shape):
    x = host(shape)
    check(nc1hwc0(x, 4), "NC1HWC0_C04", x)


@pytest.mark.parametrize("shape", SHAPES_4D)
@pytest.mark.parametrize("c0", [16, 32])
def test_fractal_z_round_trip(shape, c0):
    x = host(shape)
    check(fractal_z(x, c0), "FRACTAL_Z", x)


def test_fractal_z_to_hwcn():
    x = host((17, 33, 3, 2))
    check(fractal_z(x, 16), "FORMAT_FRACTAL_Z", x.transpose(2, 3, 1, 0), "HWCN")


@pytest.mark.parametrize("shape", SHAPES_ND)
@pytest.mark.parametrize("w0", [16, 32])
def test_fractal_nz_round_trip(shape, w0):
    x = host(shape)
    check(fractal_nz(x, w0), "FRACTAL_NZ", x)


@pytest.mark.parametrize("shape", SHAPES_5D)
def test_ndc1hwc0_round_trip(shape):
    x = host(shape)
    check(ndc1hwc0(x, 16), "NDC1HWC0", x)
    check(ndc1hwc0(x, 16), "NDC1HWC0", x.transpose(0, 2, 3, 4, 1), "NDHWC")


@pytest.mark.parametrize("shape", SHAPES_5D)
def test_fractal_z_3d_round_trip(shape):
    x = host(shape)
    check(fractal_z_3d(x, 16), "FRACTAL_Z_3D", x)
    check(fractal_z_3d(x, 16), "FRACTAL_Z_3D", x.transpose(2, 3, 4, 1, 0), "DHWCN")


@pytest.mark.parametrize("shape", SHAPES_4D)
def test_c1hwncoc0_round_trip(shape):
    x = host(shape)
    check(c1hwncoc0(x, 16), "C1HWNCoC0", x)


@pytest.mark.parametrize("shape", [(1, 3, 2, 2), (17, 4, 3, 3), (40, 3, 7, 7), (2, 1, 1, 1), (3, 6, 2, 2)])
def test_fractal_z_c04_round_trip(shape):
    x = host(shape)
    check(fractal_z_c04(x), "FRACTAL_Z_C04", x)
    check(fractal_z_c04(x), "FRACTAL_Z_C04", x.transpose(0, 2, 3, 1), "NHWC")


def test_the_cast_happens_with_the_copy():
    x = host((2, 20, 3, 3)).astype(np.float16)
    got = to_original(nc1hwc0(x, 16).reshape(-1), "NC1HWC0", nc1hwc0(x, 16).shape, x.shape, dtype=np.float32)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, x.astype(np.float32))


@pytest.mark.parametrize("fmt", ["ND", "NCHW", "NHWC", "NCDHW"])
def test_plain_formats_are_reshaped_to_the_original_shape(fmt):
    x = host((2, 3, 4, 5) if len(fmt) != 5 else (2, 3, 4, 5, 1))
    got = to_original(x.reshape(-1), fmt, x.shape, x.shape)
    np.testing.assert_array_equal(got, x)
    assert np.shares_memory(got, x)  # nothing copied
    assert to_original(x.reshape(-1), fmt, x.shape, None).shape == x.shape


def test_a_plain_device_layout_is_transposed_into_the_original_one():
    x = host((2, 3, 4, 5))                      # NCHW
    device = x.transpose(0, 2, 3, 1)            # stored NHWC
    np.testing.assert_array_equal(to_original(device.reshape(-1), "NHWC", device.shape, x.shape, "NCHW"), x)


def test_a_scalar_stays_a_scalar():
    assert to_original(np.array([3.0]), "ND", (1,), ()).shape == (1,)  # an empty original shape is "not given"
    assert to_original(np.array([3.0]), "ND", (), ()).shape == ()


@pytest.mark.parametrize(("fmt", "name"), [("FRACTAL_ZN_LSTM", "FRACTAL_ZN_LSTM"), ("FRACTAL_Z_G", "FRACTAL_Z_G"),
                                           ("NC1C0HWPAD", "NC1C0HWPAD"), (44, "FRACTAL_ZN_RNN")])
def test_formats_that_cannot_be_converted_say_so(fmt, name):
    with pytest.raises(DeviceFormatError, match=f"cannot convert format {name} back"):
        to_original(np.zeros(16), fmt, (16,), (16,))


def test_shapes_that_do_not_fit_are_an_error_naming_them():
    x = host((2, 20, 3, 3))
    device = nc1hwc0(x, 16)
    with pytest.raises(DeviceFormatError, match=r"NC1HWC0: device shape \[2, 2, 3, 3, 16\] does not hold"):
        to_original(device.reshape(-1), "NC1HWC0", device.shape, (2, 40, 3, 3))
    with pytest.raises(DeviceFormatError, match="elements for device shape"):
        to_original(device.reshape(-1)[:-1], "NC1HWC0", device.shape, x.shape)
    with pytest.raises(DeviceFormatError, match="no original shape"):
        to_original(device.reshape(-1), "NC1HWC0", device.shape, None)
    with pytest.raises(DeviceFormatError, match=r"NDC1HWC0: device shape \[2, 2, 3, 3, 16\] is not 6-D"):
        to_original(device.reshape(-1), "NDC1HWC0", device.shape, x.shape)
    with pytest.raises(DeviceFormatError, match=r"NDC1HWC0: original shape \[2, 16, 3, 3\] is not 5-D"):
        to_original(np.zeros(2 * 3 * 3 * 16), "NDC1HWC0", (2, 1, 1, 3, 3, 16), (2, 16, 3, 3))
    assert issubclass(DeviceFormatError, DumpFormatError)


def test_format_names_and_codes_are_one_table():
    assert {FORMAT_CODES[name.upper()] for name in FORMAT_NAMES.values()} == set(FORMAT_NAMES)
    assert format_code("FORMAT_FRACTAL_NZ") == 29 and format_name(29) == "FRACTAL_NZ"
    assert format_name("c1hwncoc0") == "C1HWNCoC0"
    with pytest.raises(DeviceFormatError, match="unknown format 'NCHW5'"):
        format_code("NCHW5")
    with pytest.raises(DeviceFormatError, match="unknown format code 77"):
        format_name(77)


@pytest.mark.parametrize("fmt", ["NC1HWC0", "FRACTAL_Z", "FRACTAL_NZ"])
def test_every_half_float_bit_pattern_survives_the_conversion_to_float32(fmt):
    bits = np.random.default_rng(2).permutation(1 << 16).astype(np.uint16)
    x = bits[: 17 * 33 * 9 * 9].view(np.float16).reshape(17, 33, 9, 9)   # with infinities and NaNs
    device = {"NC1HWC0": nc1hwc0, "FRACTAL_Z": fractal_z, "FRACTAL_NZ": fractal_nz}[fmt](x, 16)
    got = to_original(device.reshape(-1), fmt, device.shape, x.shape, dtype=np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), x.astype(np.float32).view(np.uint32))


def fractal_z_groups(x: np.ndarray, groups: int, c0: int = 16, n0: int = 16) -> np.ndarray:
    """A group convolution's weight (N = groups * Cout, C = Cin, [D,] H, W) in FRACTAL_Z: `e` groups per block."""
    n, cin, *spatial = x.shape
    depth, h, w = ([1, *spatial] if len(spatial) == 2 else spatial)
    cout = n // groups
    e = min(math.lcm(cin, c0) // cin, math.lcm(cout, n0) // cout, groups)
    cin_block, cout_block = ceil_div(e * cin, c0) * c0, ceil_div(e * cout, n0) * n0
    c1 = cin_block // c0
    dev = np.full((ceil_div(groups, e), depth, c1, h, w, cout_block, c0), PAD, x.dtype)
    flat = x.reshape(n, cin, depth, h, w)
    for g, ci, di, hi, wi, co in np.ndindex(groups, cin, depth, h, w, cout):
        row, col = (g % e) * cin + ci, (g % e) * cout + co
        dev[g // e, di, row // c0, hi, wi, col, row % c0] = flat[g * cout + co, ci, di, hi, wi]
    return dev.reshape(-1, cout_block // n0, n0, c0)


@pytest.mark.parametrize(("shape", "groups"), [
    ((32, 1, 3, 3), 32),      # depthwise: e = 16 groups per block
    ((24, 3, 3, 3), 8),       # Cin 3, Cout 3: e = min(16, 16, 8) = 8
    ((20, 5, 1, 2), 4),       # Cout 5: e = 4, a block of 20 x 20 padded to 32
    ((48, 8, 2, 2), 6),       # Cin 8, Cout 8: e = 2, three blocks
    ((34, 17, 3, 1), 2),      # e = 1: plain FRACTAL_Z per group
])
def test_fractal_z_of_a_group_convolution_round_trip(shape, groups):
    x = host(shape)
    device = fractal_z_groups(x, groups)
    got = to_original(device.reshape(-1), "FRACTAL_Z", device.shape, shape, sub_format=groups)
    np.testing.assert_array_equal(got, x)
    hwcn = to_original(device.reshape(-1), "FRACTAL_Z", device.shape, x.transpose(2, 3, 1, 0).shape, "HWCN",
                       sub_format=groups)
    np.testing.assert_array_equal(hwcn, x.transpose(2, 3, 1, 0))


def test_fractal_z_3d_of_a_group_convolution_round_trip():
    x = host((12, 2, 3, 2, 3))
    device = fractal_z_groups(x, 6)
    got = to_original(device.reshape(-1), "FRACTAL_Z_3D", device.shape, x.shape, sub_format=6)
    np.testing.assert_array_equal(got, x)


def test_group_counts_that_do_not_fit_are_errors():
    x = host((24, 3, 3, 3))
    device = fractal_z_groups(x, 8)
    with pytest.raises(DeviceFormatError, match=r"in 4 groups: expected \[9, 2, 16, 16\]"):
        to_original(device.reshape(-1), "FRACTAL_Z", device.shape, x.shape, sub_format=4)
    with pytest.raises(DeviceFormatError, match="5 groups do not divide the 24 output channels"):
        to_original(device.reshape(-1), "FRACTAL_Z", device.shape, x.shape, sub_format=5)
    with pytest.raises(DeviceFormatError, match="NC1HWC0: sub_format 4 is not understood"):
        to_original(np.zeros(16), "NC1HWC0", (1, 1, 1, 1, 16), (1, 3, 1, 1), sub_format=4)


def pack_nibbles(codes: np.ndarray) -> bytes:
    flat = codes.reshape(-1).astype(np.uint8) & 0x0F
    flat = np.append(flat, np.uint8(0)) if flat.size % 2 else flat
    return (flat[0::2] | flat[1::2] << 4).astype(np.uint8).tobytes()


@pytest.mark.parametrize(("data_type", "fmt", "c0", "bits"), [
    ("DT_INT8", "NC1HWC0", 32, 8),            # C0 = 32 for 8-bit types
    ("DT_UINT8", "FRACTAL_Z", 32, 8),
    ("DT_FLOAT8_E4M3FN", "FRACTAL_NZ", 32, 8),
    ("DT_HIFLOAT8", "NC1HWC0", 32, 8),
    ("DT_INT4", "NC1HWC0", 64, 4),            # C0 = 64 for int4, two per byte
    ("DT_INT4", "FRACTAL_NZ", 64, 4),
    ("DT_BF16", "FRACTAL_Z", 16, 16),
    ("DT_FLOAT16", "FRACTAL_NZ", 16, 16),
])
def test_dump_bytes_of_each_type_back_to_the_original(data_type, fmt, c0, bits):
    """Raw codes laid out on the device, packed to bytes, decoded and converted: the decoded original codes."""
    code = DATA_TYPE_CODES[data_type]
    shape = (3, 70, 5, 3) if fmt != "FRACTAL_NZ" else (2, 19, 135)
    codes = np.random.default_rng(3).integers(0, 1 << bits, shape).astype(np.uint16 if bits == 16 else np.uint8)
    forward = {"NC1HWC0": nc1hwc0, "FRACTAL_Z": fractal_z, "FRACTAL_NZ": fractal_nz}[fmt]
    device = forward(codes, c0)
    raw = pack_nibbles(device) if bits == 4 else device.astype(f"<u{bits // 8}").tobytes()
    flat = decode(raw, code, device.size)
    got = to_original(flat, fmt, device.shape, shape, dtype=np.float32)
    expected = decode(pack_nibbles(codes) if bits == 4 else codes.astype(f"<u{bits // 8}").tobytes(), code,
                      codes.size).reshape(shape).astype(np.float32)
    np.testing.assert_array_equal(got, expected)


def test_a_2d_fractal_z_weight_is_read_as_ge_lays_it_out_or_as_mindspore_pads_it():
    weight = host((40, 24))                                   # GE: a (K, N) = (C, N) matmul weight
    device = fractal_z(weight.T.reshape(24, 40, 1, 1), 16)    # (ceil(40/16), ceil(24/16), 16, 16) = (3, 2, 16, 16)
    np.testing.assert_array_equal(to_original(device.reshape(-1), "FRACTAL_Z", device.shape, (40, 24)), weight)
    np.testing.assert_array_equal(to_original(device.reshape(-1), "FRACTAL_Z", device.shape, (40, 24), "ND"), weight)
    nc = host((24, 40))                                       # MindSpore: (N, C) padded to (N, C, 1, 1)
    device = fractal_z(nc.reshape(24, 40, 1, 1), 16)
    np.testing.assert_array_equal(to_original(device.reshape(-1), "FRACTAL_Z", device.shape, (24, 40)), nc)
    square = host((20, 20))                                   # both readings fit: NCHW names MindSpore's
    device = fractal_z(square.reshape(20, 20, 1, 1), 16)
    np.testing.assert_array_equal(to_original(device.reshape(-1), "FRACTAL_Z", device.shape, (20, 20), "NCHW"),
                                  square)
    np.testing.assert_array_equal(to_original(device.reshape(-1), "FRACTAL_Z", device.shape, (20, 20)), square.T)
    with pytest.raises(DeviceFormatError, match=r"device shape \[3, 2, 16, 16\] does not hold .* C=70"):
        to_original(np.zeros(3 * 2 * 256), "FRACTAL_Z", (3, 2, 16, 16), (70, 24))


def test_empty_tensors():
    got = to_original(np.zeros(0, np.float16), "NC1HWC0", (0, 1, 3, 3, 16), (0, 16, 3, 3), dtype=np.float32)
    assert got.shape == (0, 16, 3, 3) and got.dtype == np.float32
    with pytest.raises(DeviceFormatError, match="holds no elements, original shape"):
        to_original(np.zeros(0), "FRACTAL_NZ", (0, 1, 16, 16), (3, 5))


def test_nonsense_shapes_are_errors_not_allocations():
    with pytest.raises(DeviceFormatError, match="does not hold"):
        to_original(np.zeros(256), "FRACTAL_NZ", (1, 1, 16, 16), (2**40, 16))
    with pytest.raises(DeviceFormatError, match="holds 16 elements, original shape"):
        to_original(np.zeros(16), "ND", (16,), (-1, 4))
