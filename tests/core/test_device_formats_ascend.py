"""Device formats and element types on the shared Ascend raw dumps (``../shared/data/ascend``): NC1HWC0 feature
maps, FRACTAL_Z conv weights and a FRACTAL_NZ matmul output, fp16 and fp32, read back and checked three ways:

* a TransData op's input and output are the same tensor in two formats: both must decode to the same array;
* a fused Conv2D's output must be the convolution of its decoded input, weight and bias (to fp16 rounding), which
  fails if the weight's N, C, H or W come out in another order;
* an op's decoded output compared with the golden ONNX Runtime tensor gives the cosine ``TRUTH.json`` records.

The file header is read with a few lines of protobuf wire decoding here (tests only; the reader is another module's
job): ``uint64 header length | DumpData | the tensors' bytes, inputs then outputs``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from graphcmp.core.ascend_dtypes import decode
from graphcmp.core.device_formats import format_name, to_original
from tests.conftest import SHARED, shared

pytestmark = [pytest.mark.shared, pytest.mark.skipif(not (SHARED / "ascend").is_dir(),
                                                     reason="../shared/data/ascend is absent")]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _fields(buf: bytes):
    """(field number, value) of one message: varints as int, length-delimited fields as bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        if key & 7 == 0:
            value, pos = _varint(buf, pos)
        elif key & 7 == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        else:
            raise AssertionError(f"wire type {key & 7} not in DumpData")
        yield key >> 3, value


def _dims(buf: bytes) -> tuple[int, ...]:
    dims: list[int] = []
    for number, value in _fields(buf):
        if number == 1 and isinstance(value, int):
            dims.append(value)
        elif number == 1:                       # packed
            pos = 0
            while pos < len(value):
                dim, pos = _varint(value, pos)
                dims.append(dim)
    return tuple(dims)


def read_dump(path: Path) -> dict[str, list[dict]]:
    """The inputs and outputs of one raw dump file: data_type, format, shape, original_shape and bytes."""
    raw = path.read_bytes()
    (length,) = struct.unpack_from("<Q", raw)
    tensors: dict[str, list[dict]] = {"input": [], "output": []}
    for number, value in _fields(raw[8:8 + length]):
        if number in (3, 4):                    # OpOutput: size 6, original_shape 7; OpInput: size 5, original 6
            size, original = (6, 7) if number == 3 else (5, 6)
            tensor = {"data_type": 0, "format": 0, "shape": (), "original_shape": (), "size": 0}
            names = {1: "data_type", 2: "format", size: "size"}
            for field, item in _fields(value):
                if field in names:
                    tensor[names[field]] = item
                elif field in (3, original):
                    tensor["shape" if field == 3 else "original_shape"] = _dims(item)
            tensors["output" if number == 3 else "input"].append(tensor)
    offset = 8 + length
    for tensor in tensors["input"] + tensors["output"]:
        tensor["bytes"] = raw[offset:offset + tensor["size"]]
        offset += tensor["size"]
    assert offset == len(raw)
    return tensors


def host(tensor: dict, dtype=np.float32) -> np.ndarray:
    flat = decode(tensor["bytes"], tensor["data_type"], int(np.prod(tensor["shape"])))
    return to_original(flat, tensor["format"], tensor["shape"], tensor["original_shape"], dtype=dtype)


def dump_file(case: str, op: str) -> Path:
    folder = shared(f"ascend/{case}") / json.loads((SHARED / "ascend/TRUTH.json").read_text())[case]["dump_dir"]
    (path,) = folder.glob(f"*.{op}.*")
    return path


@pytest.mark.parametrize(("op", "device_side", "formats"), [
    ("trans_TransData_1", "output", ("NCHW", "NC1HWC0")),
    ("trans_TransData_2", "input", ("NC1HWC0", "NCHW")),
    ("trans_TransData_3", "input", ("FRACTAL_NZ", "ND")),
])
@pytest.mark.parametrize("case", ["A_cnn_bug", "B_cnn_clean"])
def test_a_transdata_holds_one_tensor_in_two_formats(case, op, device_side, formats):
    tensors = read_dump(dump_file(case, op))
    (source,), (result,) = tensors["input"], tensors["output"]
    assert (format_name(source["format"]), format_name(result["format"])) == formats
    plain = result if device_side == "input" else source
    device = source if device_side == "input" else result
    assert device["shape"] != plain["shape"]
    np.testing.assert_array_equal(host(device, np.float16), host(plain, np.float16))


def conv2d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, stride: int) -> np.ndarray:
    """NCHW convolution, 'same' padding, in float64."""
    pad = weight.shape[2] // 2
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, weight.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("nchwij,ocij->nohw", windows, weight.astype(np.float64)) + bias.astype(np.float64)[:, None, None]


@pytest.mark.parametrize("op", ["_conv1_Conv_relu_Relu", "_layer1_conv1_Conv_layer1_relu_Relu", "_layer1_conv2_Conv",
                                "_conv4_Conv_relu4_Relu"])
def test_a_conv_output_is_the_convolution_of_its_decoded_nc1hwc0_input_and_fractal_z_weight(op):
    tensors = read_dump(dump_file("B_cnn_clean", op))
    x, weight, bias = (host(tensor) for tensor in tensors["input"])
    (out,) = (host(tensor) for tensor in tensors["output"])
    assert format_name(tensors["input"][1]["format"]) == "FRACTAL_Z" and weight.shape[0] == out.shape[1]
    expected = conv2d(x, weight, bias, x.shape[2] // out.shape[2])
    if op.endswith("Relu"):
        expected = np.maximum(expected, 0)
    ulp = 2.0 ** -10 * np.abs(expected) + 2.0 ** -24    # the output is rounded to fp16 once
    assert (np.abs(out - expected) <= ulp).all()
    swapped = conv2d(x, weight.transpose(0, 1, 3, 2), bias, x.shape[2] // out.shape[2])
    assert np.abs(out - (np.maximum(swapped, 0) if op.endswith("Relu") else swapped)).max() > 100 * ulp.max()


@pytest.mark.parametrize("case", ["A_cnn_bug", "B_cnn_clean"])
@pytest.mark.parametrize(("op", "golden"), [("_layer1_conv2_Conv", "_layer1_bn2_BatchNormalization"),
                                            ("_fc_Gemm", "_fc_Gemm"), ("_maxpool_MaxPool", "_maxpool_MaxPool")])
def test_decoded_outputs_against_the_golden_give_the_recorded_cosine(case, op, golden):
    truth = json.loads((SHARED / "ascend/TRUTH.json").read_text())[case]
    path = dump_file(case, op)
    (recorded,) = (row["cos"] for row in truth["per_op"] if row["file"] == path.name)
    (out,) = (host(tensor, np.float64) for tensor in read_dump(path)["output"])
    (golden_file,) = (shared(f"ascend/{case}") / truth["golden_dir"]).glob(f"{golden}.0.*.npy")
    expected = np.load(golden_file).astype(np.float64)
    assert out.shape == expected.shape
    cosine = float(out.ravel() @ expected.ravel() / np.linalg.norm(out) / np.linalg.norm(expected))
    assert cosine == pytest.approx(recorded, abs=1e-9)
