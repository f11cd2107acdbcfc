"""Ascend device formats (NC1HWC0, FRACTAL_Z, FRACTAL_NZ ...) turned back into the tensor's original layout.

An NPU keeps a tensor in a tiled "device format": channels split into blocks of C0 (NC1HWC0), a conv weight cut
into 16 x C0 fractals (FRACTAL_Z), a matrix into C0-wide column strips of 16-row tiles (FRACTAL_NZ), each padded with
zeros up to whole blocks. A raw dump holds the device bytes with the device shape, and the ``original_shape`` and
format of the tensor the framework sees. `to_original` undoes the tiling and cuts the padding off; the format codes
and names are data (`FORMAT_NAMES`, `FORMAT_CODES`).

How each device layout maps to the host one (``ASCEND_RAW_DUMP.md`` section 3; MindSpore's
``ms_device_shape_transfer.cc``, msaccucmp's ``builtin_format_convert``), C0 always read from the device shape:

====================  ======================================  ======================================
device format         device shape                            host layout
====================  ======================================  ======================================
NC1HWC0, ..._C04      (N, C1, H, W, C0)                       NCHW (or NHWC, HWCN, CHWN)
NDC1HWC0              (N, D, C1, H, W, C0)                    NCDHW (or NDHWC, DHWCN, DHWNC)
FRACTAL_Z             (C1*H*W, N1, N0, C0)                    NCHW (or NHWC, HWCN, CHWN)
FRACTAL_Z_3D          (D*C1*H*W, N1, N0, C0)                  NCDHW (or NDHWC, DHWCN, DHWNC)
FRACTAL_NZ            (batch..., W1, H1, H0, W0)              ND (batch..., H, W)
C1HWNCoC0             (C1, H, W, N, C0, C0), on the diagonal  NCHW (or NHWC, HWCN, CHWN)
FRACTAL_Z_C04         (ceil(C1*H*W*4 / 16), N1, 16, 16)       NCHW (or NHWC, HWCN, CHWN)
====================  ======================================  ======================================

A FRACTAL_Z weight of a group convolution (``sub_format`` = the group count) packs several groups into one block
along its diagonal (`to_original`'s `sub_format`). Originals of fewer dimensions are padded as MindSpore pads them
(4-D: ``C`` -> (1, C, 1, 1), ``NC`` -> (N, C, 1, 1), ``CHW`` -> (1, C, H, W); FRACTAL_NZ: a vector is one row),
and the result has the original shape; a 2-D FRACTAL_Z weight is read as GE lays out a (K, N) matmul weight
(C = K, N, as HWCN with H = W = 1) unless only MindSpore's (N, C) reading fits its device shape or the original
format says NCHW.

The conversion is whole-array numpy: the device array is reshaped into one axis per block (C1 and C0 ...), and
each of at most four pieces (whole blocks, the last partial block, per padded axis) is copied once into the result
through a transposed view, with the cast to `dtype` in the same pass (float16 is copied as it is, then widened by
`graphcmp.core.ascend_dtypes.cast` in cache-sized blocks).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from graphcmp.core.ascend_dtypes import cast
from graphcmp.core.errors import DumpFormatError, InternalError

__all__ = [
    "FORMAT_CODES",
    "FORMAT_NAMES",
    "PLAIN_FORMATS",
    "TILED_FORMATS",
    "DeviceFormatError",
    "format_code",
    "format_name",
    "original_elements",
    "to_original",
]


class DeviceFormatError(DumpFormatError):
    """A tensor's device format cannot be turned back into its original layout, or its shapes do not fit it."""


FORMAT_NAMES: Mapping[int, str] = MappingProxyType({
    0: "NCHW", 1: "NHWC", 2: "ND", 3: "NC1HWC0", 4: "FRACTAL_Z", 5: "NC1C0HWPAD", 6: "NHWC1C0", 7: "FSR_NCHW",
    8: "FRACTAL_DECONV", 9: "C1HWNC0", 10: "FRACTAL_DECONV_TRANSPOSE", 11: "FRACTAL_DECONV_SP_STRIDE_TRANS",
    12: "NC1HWC0_C04", 13: "FRACTAL_Z_C04", 14: "CHWN", 15: "FRACTAL_DECONV_SP_STRIDE8_TRANS", 16: "HWCN",
    17: "NC1KHKWHWC0", 18: "BN_WEIGHT", 19: "FILTER_HWCK", 20: "HASHTABLE_LOOKUP_LOOKUPS",
    21: "HASHTABLE_LOOKUP_KEYS", 22: "HASHTABLE_LOOKUP_VALUE", 23: "HASHTABLE_LOOKUP_OUTPUT",
    24: "HASHTABLE_LOOKUP_HITS", 25: "C1HWNCoC0", 26: "MD", 27: "NDHWC", 28: "FRACTAL_ZZ", 29: "FRACTAL_NZ",
    30: "NCDHW", 31: "DHWCN", 32: "NDC1HWC0", 33: "FRACTAL_Z_3D", 34: "CN", 35: "NC", 36: "DHWNC",
    37: "FRACTAL_Z_3D_TRANSPOSE", 38: "FRACTAL_ZN_LSTM", 39: "FRACTAL_Z_G", 40: "RESERVED", 41: "ALL", 42: "NULL",
    43: "ND_RNN_BIAS", 44: "FRACTAL_ZN_RNN", 45: "YUV", 46: "YUV_A", 47: "NCL", 48: "FRACTAL_Z_WINO",
    49: "C1HWC0", 255: "MAX",
})
"""``OutputFormat`` code of ``dump_data.proto`` -> format name without the ``FORMAT_`` prefix."""

FORMAT_CODES: Mapping[str, int] = MappingProxyType({name.upper(): code for code, name in FORMAT_NAMES.items()})
"""Upper-case format name -> ``OutputFormat`` code."""

PLAIN_FORMATS = frozenset({"NCHW", "NHWC", "ND", "CHWN", "HWCN", "NDHWC", "NCDHW", "DHWCN", "CN", "NC", "DHWNC",
                           "NCL", "MD", "RESERVED"})
"""Formats that store the elements in the order of their shape (nothing to undo but a transpose of named axes)."""

_LAYOUTS_4D = ("NCHW", "NHWC", "HWCN", "CHWN")
_LAYOUTS_5D = ("NCDHW", "NDHWC", "DHWCN", "DHWNC")


@dataclass(frozen=True, slots=True)
class _Tiling:
    """A device layout as groups of block axes: each device dimension is a product of the axes of one group.

    An axis is a host letter (``H``), or the outer (``C1``) or inner (``C0``) block of one; an inner block that
    is a device dimension of its own gives that block's size. `host` is the default host layout, `layouts` those a
    tensor of this format can come from. `diagonal` names two axes whose diagonal holds the data (C1HWNCoC0).
    `regroup` is an order the axes are first copied into, runs of C0 elements at a time, when the direct copy would
    read one element per cache line: a FRACTAL_Z weight becomes an NC1HWC0 array (N padded), whose conversion reads
    its source in order (measured: 0.2 GB/s direct, see bench/bench_device_formats.py for the two steps)."""

    groups: tuple[tuple[str, ...], ...]
    host: str
    layouts: tuple[str, ...]
    diagonal: tuple[str, str] | None = None
    regroup: tuple[str, ...] | None = None


_TILINGS: Mapping[str, _Tiling] = MappingProxyType({
    "NC1HWC0": _Tiling((("N",), ("C1",), ("H",), ("W",), ("C0",)), "NCHW", _LAYOUTS_4D),
    "NC1HWC0_C04": _Tiling((("N",), ("C1",), ("H",), ("W",), ("C0",)), "NCHW", _LAYOUTS_4D),
    "NDC1HWC0": _Tiling((("N",), ("D",), ("C1",), ("H",), ("W",), ("C0",)), "NCDHW", _LAYOUTS_5D),
    "FRACTAL_Z": _Tiling((("C1", "H", "W"), ("N1",), ("N0",), ("C0",)), "NCHW", _LAYOUTS_4D,
                         regroup=("N1", "N0", "C1", "H", "W", "C0")),
    "FRACTAL_Z_3D": _Tiling((("D", "C1", "H", "W"), ("N1",), ("N0",), ("C0",)), "NCDHW", _LAYOUTS_5D,
                            regroup=("N1", "N0", "C1", "D", "H", "W", "C0")),
    "FRACTAL_NZ": _Tiling((("B",), ("W1",), ("H1",), ("H0",), ("W0",)), "BHW", ("BHW",)),
    "C1HWNCoC0": _Tiling((("C1",), ("H",), ("W",), ("N",), ("Co",), ("C0",)), "NCHW", _LAYOUTS_4D, ("Co", "C0")),
})

TILED_FORMATS = frozenset({*_TILINGS, "FRACTAL_Z_C04"})
"""Device formats `to_original` converts back."""


def format_code(name: str) -> int:
    """The ``OutputFormat`` code of `name`, with or without the ``FORMAT_`` prefix, any case.

    >>> format_code("FORMAT_NC1HWC0"), format_code("fractal_nz")
    (3, 29)
    """
    key = name.strip().upper().removeprefix("FORMAT_")
    if key not in FORMAT_CODES:
        raise DeviceFormatError(f"unknown format {name!r}: expected one of {', '.join(FORMAT_NAMES.values())}")
    return FORMAT_CODES[key]


def format_name(device_format: int | str) -> str:
    """The name of a format given by code or by name (``3`` and ``"FORMAT_NC1HWC0"`` are ``"NC1HWC0"``).

    >>> format_name(29), format_name("format_fractal_z")
    ('FRACTAL_NZ', 'FRACTAL_Z')
    """
    if isinstance(device_format, str):
        return FORMAT_NAMES[format_code(device_format)]
    if int(device_format) not in FORMAT_NAMES:
        raise DeviceFormatError(f"unknown format code {int(device_format)}")
    return FORMAT_NAMES[int(device_format)]


# --- host shapes: the size of each host letter ----------------------------------------------------------------------

def _padded_4d(shape: tuple[int, ...]) -> tuple[int, ...]:
    """MindSpore's default padding of a shape of fewer than 4 dimensions to NCHW."""
    padding = {0: lambda s: (1, 1, 1, 1), 1: lambda s: (1, s[0], 1, 1), 2: lambda s: (s[0], s[1], 1, 1),
               3: lambda s: (1, *s), 4: lambda s: s}
    return padding[len(shape)](shape)


def _host_layout(tiling: _Tiling, original_shape: tuple[int, ...], original_format: str | None,
                 name: str) -> tuple[str, dict[str, int]]:
    """(layout of the result, size of each of its letters) for a tensor of `original_shape`."""
    if tiling.host == "BHW":
        if not original_shape:
            raise DeviceFormatError(f"{name}: the original shape is empty; it is needed to cut the padding")
        rows, cols = (1, original_shape[0]) if len(original_shape) == 1 else original_shape[-2:]
        return "BHW", {"B": math.prod(original_shape[:-2]), "H": rows, "W": cols}
    rank = len(tiling.host)
    if rank == 4 and len(original_shape) < 4:
        return tiling.host, dict(zip(tiling.host, _padded_4d(original_shape)))
    if len(original_shape) != rank:
        raise DeviceFormatError(f"{name}: original shape {list(original_shape)} is not {rank}-D ({tiling.host})")
    layout = original_format if original_format in tiling.layouts else tiling.host
    return layout, dict(zip(layout, original_shape))


# --- the conversion ----------------------------------------------------------------------------------------------

def _axis_sizes(tiling: _Tiling, device_shape: tuple[int, ...], sizes: Mapping[str, int],
                name: str) -> dict[str, int]:
    """The size of every block axis, the inner blocks read from the device shape; checked against it."""
    blocks = {group[0][:-1]: device_shape[k] for k, group in enumerate(tiling.groups)
              if len(group) == 1 and group[0].endswith("0")}
    axes: dict[str, int] = {}
    for group in tiling.groups:
        for axis in group:
            letter = axis[:-1]
            if axis == "Co":
                axes[axis] = blocks["C"]
            elif axis.endswith("0") and letter in sizes:
                axes[axis] = blocks[letter]
            elif axis.endswith("1") and letter in sizes:
                axes[axis] = -(-sizes[letter] // blocks[letter]) if blocks[letter] else 0
            else:
                axes[axis] = sizes[axis]
    expected = tuple(math.prod(axes[axis] for axis in group) for group in tiling.groups)
    if expected != tuple(device_shape):
        host = ", ".join(f"{letter}={size}" for letter, size in sizes.items())
        raise DeviceFormatError(f"{name}: device shape {list(device_shape)} does not hold the original tensor "
                                f"({host}): expected {list(expected)}")
    return axes


def _pieces(size: int, block: int) -> list[tuple[slice, slice, slice, int, int]]:
    """(outer slice of the device axis, inner slice, slice of the host axis, outer count, inner count) of the whole
    blocks and of the last partial block of a host axis of `size` cut into blocks of `block`."""
    whole, tail = divmod(size, block)
    pieces = []
    if whole:
        pieces.append((slice(0, whole), slice(0, block), slice(0, whole * block), whole, block))
    if tail:
        pieces.append((slice(whole, whole + 1), slice(0, tail), slice(whole * block, size), 1, tail))
    return pieces


def _piece_views(src: np.ndarray, labels: Sequence[str], layout: str, sizes: Mapping[str, int]):
    """(host index, split shape, axis order, view of `src`) of each piece of a tiled tensor: the whole blocks and
    the last partial block of each blocked letter of `layout` (at most two pieces per letter). The view (padding
    left out, axes in `labels` order) transposed into `order` fills ``out[host index].reshape(split shape)``."""
    blocked = [letter for letter in layout if f"{letter}1" in labels]
    for choice in itertools.product(*(_pieces(sizes[letter], src.shape[labels.index(f"{letter}0")])
                                      for letter in blocked)):
        piece = dict(zip(blocked, choice))
        host_index, split_shape, order, src_index = [], [], [], {}
        for letter in layout:
            if letter in piece:
                outer, inner, host, n_outer, n_inner = piece[letter]
                host_index.append(host)
                split_shape += [n_outer, n_inner]
                order += [f"{letter}1", f"{letter}0"]
                src_index[f"{letter}1"], src_index[f"{letter}0"] = outer, inner
            else:
                host_index.append(slice(None))
                split_shape.append(sizes[letter])
                order.append(letter)
        yield tuple(host_index), split_shape, order, src[tuple(src_index.get(label, slice(None)) for label in labels)]


def _unblock(src: np.ndarray, labels: Sequence[str], layout: str, sizes: Mapping[str, int],
             dtype: np.dtype) -> np.ndarray:
    """Copy `src` (one axis per label in `labels`) into a new array of `layout`, blocked letters joined, as `dtype`.

    A float16 `src` is rearranged as float16 first (a copy of 2-byte values), then cast by
    `graphcmp.core.ascend_dtypes.cast` a block at a time: numpy's own cast of half floats is the slow part of a
    fused copy, and widening in a strided copy reads each cache line several times."""
    if src.dtype == np.float16 and dtype != np.float16:
        return cast(_unblock(src, labels, layout, sizes, src.dtype), dtype)
    out = np.empty([sizes[letter] for letter in layout], dtype)
    if out.size == 0:
        return out
    for host_index, split_shape, order, view in _piece_views(src, labels, layout, sizes):
        target = out[host_index].reshape(split_shape)
        if not np.may_share_memory(target, out):
            raise InternalError(f"splitting {layout} into {order} copied the result")
        np.copyto(target, view.transpose([labels.index(axis) for axis in order]), casting="same_kind")
    return out


def _matrix_weight(original_shape: tuple[int, ...], original_format: str | None) -> list[tuple[str, dict[str, int]]]:
    """The two readings of a 2-D FRACTAL_Z weight, the likelier first: GE's (C, N), a (K, N) matmul weight laid out
    as HWCN with H = W = 1 (``TransShapeNdToFz``), and MindSpore's (N, C) padded to (N, C, 1, 1)."""
    ge = ("HWCN", {"H": 1, "W": 1, "C": original_shape[0], "N": original_shape[1]})
    mindspore = ("NCHW", {"N": original_shape[0], "C": original_shape[1], "H": 1, "W": 1})
    return [mindspore, ge] if original_format in ("NCHW", "NC") else [ge, mindspore]


def _first_fit(tiling: _Tiling, device_shape: tuple[int, ...], readings: Sequence[tuple[str, dict[str, int]]],
               name: str) -> tuple[str, dict[str, int], dict[str, int]]:
    """(layout, host sizes, axis sizes) of the first reading of the original shape the device shape holds; the
    error of the first reading if none does."""
    errors = []
    for layout, sizes in readings:
        try:
            return layout, sizes, _axis_sizes(tiling, device_shape, sizes, name)
        except DeviceFormatError as error:
            errors.append(error)
    raise errors[0]


def _source(tiling: _Tiling, data: np.ndarray, device_shape: tuple[int, ...], original_shape: tuple[int, ...],
            original_format: str | None, name: str, *, regroup: bool = True):
    """(device array with one axis per block axis, its labels, host layout, host sizes), the shapes checked; the
    diagonal of a C1HWNCoC0 tensor taken, a FRACTAL_Z weight regrouped (copied) when `regroup`."""
    if tiling.host == "BHW":
        if len(device_shape) < 4:
            raise DeviceFormatError(f"{name}: device shape {list(device_shape)} has fewer than 4 dimensions")
        device_shape = (math.prod(device_shape[:-4]), *device_shape[-4:])
    if len(device_shape) != len(tiling.groups):
        raise DeviceFormatError(f"{name}: device shape {list(device_shape)} is not {len(tiling.groups)}-D")
    if name == "FRACTAL_Z" and len(original_shape) == 2:
        readings = _matrix_weight(original_shape, original_format)
    else:
        readings = [_host_layout(tiling, original_shape, original_format, name)]
    layout, sizes, axes = _first_fit(tiling, device_shape, readings, name)
    labels = [axis for group in tiling.groups for axis in group]
    src = data.reshape([axes[axis] for axis in labels])
    if tiling.diagonal is not None:
        first, second = (labels.index(axis) for axis in tiling.diagonal)
        src = np.diagonal(src, axis1=first, axis2=second)      # the diagonal axis comes last: it is C0
        labels = [axis for axis in labels if axis not in tiling.diagonal] + ["C0"]
    if regroup and tiling.regroup is not None:
        src = np.ascontiguousarray(src.transpose([labels.index(axis) for axis in tiling.regroup]))
        labels = list(tiling.regroup)
    return src, labels, layout, sizes


def _tiled(tiling: _Tiling, data: np.ndarray, device_shape: tuple[int, ...], original_shape: tuple[int, ...],
           original_format: str | None, dtype: np.dtype, name: str) -> np.ndarray:
    src, labels, layout, sizes = _source(tiling, data, device_shape, original_shape, original_format, name)
    return _unblock(src, labels, layout, sizes, dtype).reshape(original_shape)


def _fractal_z_c04(data: np.ndarray, device_shape: tuple[int, ...], original_shape: tuple[int, ...],
                   original_format: str | None, dtype: np.dtype) -> np.ndarray:
    """FRACTAL_Z_C04: the (C1, H, W, C0=4) reduction axis flattened and padded to 16, then cut into 16 x 16
    fractals (K1, N1, N0, K0); C1 is 1 whenever C <= 4, the case C04 is made for."""
    name = "FRACTAL_Z_C04"
    layout, sizes = _host_layout(_TILINGS["NC1HWC0"], original_shape, original_format, name)
    n, c, h, w = (sizes[letter] for letter in "NCHW")
    if len(device_shape) != 4:
        raise DeviceFormatError(f"{name}: device shape {list(device_shape)} is not 4-D")
    k1, n1, n0, k0 = device_shape
    c1, c0 = -(-c // 4), 4
    reduction = c1 * h * w * c0
    if k1 * k0 < reduction or n1 * n0 < n or k1 != -(-reduction // k0) or n1 != -(-n // n0):
        raise DeviceFormatError(f"{name}: device shape {list(device_shape)} does not hold the original tensor "
                                f"(N={n}, C={c}, H={h}, W={w})")
    matrix = data.reshape(k1, n1, n0, k0).transpose(0, 3, 1, 2).reshape(k1 * k0, n1 * n0)
    blocks = matrix[:reduction, :n].reshape(c1, h, w, c0, n)
    nchw = blocks.transpose(4, 0, 3, 1, 2).reshape(n, c1 * c0, h, w)[:, :c]
    out = cast(np.ascontiguousarray(nchw.transpose(["NCHW".index(letter) for letter in layout])), dtype)
    return out.reshape(original_shape)


def _fractal_z_groups(data: np.ndarray, name: str, device_shape: tuple[int, ...], original_shape: tuple[int, ...],
                      original_format: str | None, groups: int, dtype: np.dtype) -> np.ndarray:
    """FRACTAL_Z (FRACTAL_Z_3D) of a group convolution (the tensor's ``sub_format`` is its group count).

    The weight (N = groups x Cout, C = Cin of one group) is stored as in GE and MindSpore
    (``NchwFracZTransWithGroups``): `e` consecutive groups share one fractal block, their Cin x Cout matrices
    placed along its diagonal, with ``e = min(lcm(Cin, C0) / Cin, lcm(Cout, N0) / Cout, groups)``; each block
    holds ``Cin' = ceil(e*Cin / C0) * C0`` input by ``Cout' = ceil(e*Cout / N0) * N0`` output channels, laid out
    (block, [D,] Cin'/C0, H, W, Cout', C0). A small loop over the `e` diagonal positions copies whole slices."""
    tiling = _TILINGS[name]
    layout, sizes = _host_layout(tiling, original_shape, original_format, name)
    spatial = tiling.host[2:]                                     # HW or DHW
    n, cin = sizes["N"], sizes["C"]
    if len(device_shape) != 4 or n % groups:
        raise DeviceFormatError(f"{name}: {groups} groups do not divide the {n} output channels of original shape "
                                f"{list(original_shape)}, or device shape {list(device_shape)} is not 4-D")
    n0, c0 = device_shape[2], device_shape[3]
    cout = n // groups
    e = min(math.lcm(cin, c0) // cin, math.lcm(cout, n0) // cout, groups)
    cin_block, cout_block = -(-e * cin // c0) * c0, -(-e * cout // n0) * n0
    blocks = -(-groups // e)
    dims = [sizes[letter] for letter in spatial]
    depth = dims[0] if len(dims) == 3 else 1
    expected = (blocks * depth * (cin_block // c0) * math.prod(dims[-2:]), cout_block // n0, n0, c0)
    if device_shape != expected:
        raise DeviceFormatError(f"{name}: device shape {list(device_shape)} does not hold the original tensor "
                                f"({', '.join(f'{k}={v}' for k, v in sizes.items())}) in {groups} groups: "
                                f"expected {list(expected)}")
    # (block, [D,] C1, H, W, Cout', C0) -> (block, Cin', [D,] H, W, Cout')
    src = data.reshape(blocks, depth, cin_block // c0, *dims[-2:], cout_block, c0)
    src = src.transpose(0, 2, 6, 1, 3, 4, 5).reshape(blocks, cin_block, depth, *dims[-2:], cout_block)
    out = np.empty((groups, cout, cin, depth, *dims[-2:]), dtype)
    for position in range(e):
        block = src[:, position * cin:(position + 1) * cin, ..., position * cout:(position + 1) * cout]
        members = out[position::e]                                 # groups block * e + position
        np.copyto(members, cast(block[:len(members)].transpose(0, 5, 1, 2, 3, 4), dtype), casting="same_kind")
    nc_spatial = out.reshape(n, cin, *dims)
    return np.ascontiguousarray(nc_spatial.transpose([tiling.host.index(letter) for letter in layout]))\
        .reshape(original_shape)


def _plain(data: np.ndarray, device_name: str, device_shape: tuple[int, ...], original_shape: tuple[int, ...] | None,
           original_format: str | None, dtype: np.dtype) -> np.ndarray:
    """A format without tiles: the device shape as it is, or transposed when the original names the same axes in
    another order (NHWC on the device, NCHW originally)."""
    array = data.reshape(device_shape)
    if (original_format and original_format != device_name and len(device_shape) == len(device_name)
            and sorted(original_format) == sorted(device_name) and len(set(device_name)) == len(device_name)):
        array = array.transpose([device_name.index(letter) for letter in original_format])
    if original_shape is not None and tuple(array.shape) != tuple(original_shape):
        if math.prod(original_shape) != array.size:
            raise DeviceFormatError(f"{device_name}: device shape {list(device_shape)} holds {array.size} elements, "
                                    f"original shape {list(original_shape)} {math.prod(original_shape)}")
        array = array.reshape(original_shape)
    return cast(array, dtype)


def _empty(name: str, device_shape: tuple[int, ...], original_shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if math.prod(original_shape):
        raise DeviceFormatError(f"{name}: device shape {list(device_shape)} holds no elements, original shape "
                                f"{list(original_shape)} {math.prod(original_shape)}")
    return np.empty(original_shape, dtype)


def to_original(data: np.ndarray, device_format: int | str, device_shape: Sequence[int],
                original_shape: Sequence[int] | None, original_format: int | str | None = None,
                dtype: np.dtype | type | str | None = None, sub_format: int = 0) -> np.ndarray:
    """The tensor in `data` (device layout) in its original layout and shape, padding cut off.

    Parameters
    ----------
    data : numpy.ndarray
        The device elements in device order, of any shape holding ``prod(device_shape)`` elements (as
        `graphcmp.core.ascend_dtypes.decode` returns them).
    device_format : int or str
        The tensor's ``format`` (code or name, e.g. ``3`` or ``"NC1HWC0"``).
    device_shape : sequence of int
        The tensor's ``shape``: the device shape, C0 (the block of channels) its last dimension.
    original_shape : sequence of int or None
        The tensor's ``original_shape``, in the order of `original_format`; needed to cut the padding of a
        tiled format. None (or empty for a plain format) keeps the device shape.
    original_format : int, str or None
        The original op's format: a tiled 4-D tensor comes back as NCHW unless this is NHWC, HWCN or CHWN (and a
        5-D one as NCDHW unless NDHWC, DHWCN or DHWNC); a plain format is transposed into it when both name the same
        axes. Defaults to NCHW / NCDHW / ND.
    dtype : numpy dtype, optional
        Type of the result (cast in the same pass as the copy); defaults to the type of `data`.
    sub_format : int, optional
        The tensor's ``sub_format``: for FRACTAL_Z and FRACTAL_Z_3D the number of groups of a group convolution
        (0 or 1: none). Other formats have none.

    Returns
    -------
    numpy.ndarray
        A new C-contiguous array for a tiled format; for a plain format a view of `data` where no cast is needed.

    Raises
    ------
    DeviceFormatError
        If the format cannot be converted back (FRACTAL_ZN_LSTM, FRACTAL_Z_G ...), or the shapes do not fit it;
        the message names the format and the shapes, the caller adds the file.

    Examples
    --------
    >>> nchw = np.arange(1 * 3 * 2 * 2, dtype=np.float16).reshape(1, 3, 2, 2)
    >>> device = np.zeros((1, 1, 2, 2, 16), np.float16)
    >>> device[0, 0, :, :, :3] = nchw[0].transpose(1, 2, 0)
    >>> bool((to_original(device, "NC1HWC0", device.shape, (1, 3, 2, 2)) == nchw).all())
    True
    """
    name = format_name(device_format)
    original = None if original_format is None else format_name(original_format)
    device_shape = tuple(int(size) for size in device_shape)
    shape = None if original_shape is None else tuple(int(size) for size in original_shape)
    out_dtype = np.dtype(data.dtype if dtype is None else dtype)
    if data.size != math.prod(device_shape):
        raise DeviceFormatError(f"{name}: {data.size} elements for device shape {list(device_shape)} "
                                f"({math.prod(device_shape)} elements)")
    if name in PLAIN_FORMATS:
        return _plain(data, name, device_shape, shape or None, original, out_dtype)
    if name not in TILED_FORMATS:
        raise DeviceFormatError(f"cannot convert format {name} back to the original layout: graphcmp converts "
                                f"{', '.join(sorted(TILED_FORMATS | PLAIN_FORMATS))}")
    if shape is None:
        raise DeviceFormatError(f"{name}: no original shape; it is needed to cut the padding of the device format")
    if data.size == 0:
        return _empty(name, device_shape, shape, out_dtype)
    if sub_format > 1:
        if name not in ("FRACTAL_Z", "FRACTAL_Z_3D"):
            raise DeviceFormatError(f"{name}: sub_format {sub_format} is not understood (only FRACTAL_Z and "
                                    "FRACTAL_Z_3D have one: their group count)")
        return _fractal_z_groups(data, name, device_shape, shape, original, sub_format, out_dtype)
    if name == "FRACTAL_Z_C04":
        return _fractal_z_c04(data, device_shape, shape, original, out_dtype)
    return _tiled(_TILINGS[name], data, device_shape, shape, original, out_dtype, name)


def original_elements(data: np.ndarray, device_format: int | str, device_shape: Sequence[int],
                      original_shape: Sequence[int] | None, original_format: int | str | None = None,
                      sub_format: int = 0) -> list[np.ndarray]:
    """Arrays that together hold every element of the original tensor once, in no particular order: what its
    statistics need, without the copy `to_original` makes.

    For a tiled format these are views of `data` (the whole blocks, and the last partial block of each padded axis:
    the padding left out, no element moved); a plain format is `data` itself; a format whose elements views cannot
    pick out (a group convolution's FRACTAL_Z, FRACTAL_Z_C04) is converted by `to_original`. Parameters and errors
    are those of `to_original`.

    >>> device = np.zeros((1, 2, 2, 2, 16), np.float16)    # 20 channels: one whole block of 16 and 4 more
    >>> [piece.shape for piece in original_elements(device, "NC1HWC0", device.shape, (1, 20, 2, 2))]
    [(1, 1, 2, 2, 16), (1, 1, 2, 2, 4)]
    """
    name = format_name(device_format)
    shape = None if original_shape is None else tuple(int(size) for size in original_shape)
    device = tuple(int(size) for size in device_shape)
    if name in _TILINGS and shape is not None and data.size and sub_format <= 1 and data.size == math.prod(device):
        original = None if original_format is None else format_name(original_format)
        src, labels, layout, sizes = _source(_TILINGS[name], data, device, shape, original, name, regroup=False)
        return [view for _, _, _, view in _piece_views(src, labels, layout, sizes)]
    return [to_original(data, device_format, device_shape, original_shape, original_format, None, sub_format)]
