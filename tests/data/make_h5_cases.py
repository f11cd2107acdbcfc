"""Write the PyTorch 1.5 ``.h5`` dump cases of tests/core/readers/test_pytorch_h5.py into tests/data/pytorch_h5/.

A small CNN step (conv -> relu -> flatten -> linear, then its backward) computed in numpy, written as the Ascend
PyTorch 1.5 dumper lays a run out (``/{op}/{seq}/{input|output}/{param}``, the ``DataType`` / ``DeviceType`` /
``FormatType`` / ``Stride`` / ``Type`` attributes, float16 stored as float32):

* ``gpu.h5``: float32 on CUDA, the backward of the convolution named ``CudnnConvolutionBackward``;
* ``npu_clean.h5``: the same step in float16 on the NPU (``NpuConvolutionBackward``, whose input is ``input``
  where the GPU's is ``self``), every value rounded through float16;
* ``npu_bug.h5``: as ``npu_clean.h5`` but the relu's backward lets negative inputs through a quarter of the time
  (a planted bug in ``ReluBackward0``); everything after it inherits the error.

The forward calls' names are illustrative (the same on both backends); the backward names are the autograd
functions PyTorch 1.5 records. Run: ``python tests/data/make_h5_cases.py`` (deterministic; each file is well
under 200 KB).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

OUT = Path(__file__).parent / "pytorch_h5"
_DTYPE_CODES = {"float32": 1, "float16": 10, "int64": 7}
_CPU, _CUDA, _NPU = 0, 1, 9  # c10::DeviceType values; the fork's NPU value is only recorded, never read


def _step(half: bool, bug: bool, cpu: bool = False) -> list[tuple[str, dict[str, dict[str, np.ndarray]]]]:
    """The calls of one training step: (op name, {"input": {...}, "output": {...}})."""
    rng = np.random.default_rng(2021)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    fc = (rng.standard_normal((10, 4 * 4 * 4)) * 0.1).astype(np.float32)
    bias = (rng.standard_normal(10) * 0.1).astype(np.float32)
    target = rng.standard_normal((2, 10)).astype(np.float32)

    def q(a: np.ndarray) -> np.ndarray:  # the npu's precision
        return a.astype(np.float16).astype(np.float32) if half else a.astype(np.float32)

    x, w, fc, bias = q(x), q(w), q(fc), q(bias)
    cols = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # (2, 3, 4, 4, 3, 3)
    conv = q(np.einsum("bchwij,ocij->bohw", cols, w))
    relu = q(np.maximum(conv, 0))
    flat = relu.reshape(2, -1)
    out = q(flat @ fc.T + bias)
    grad_out = q((out - target) / out.size)
    grad_flat = q(grad_out @ fc)
    grad_fc = q(grad_out.T @ flat)
    grad_relu = grad_flat.reshape(relu.shape)
    mask = conv > 0
    if bug:
        mask = mask | (np.arange(conv.size).reshape(conv.shape) % 4 == 0)
    grad_conv = q(grad_relu * mask)
    grad_w = q(np.einsum("bohw,bchwij->ocij", grad_conv, cols))
    npu = half
    conv_backward = "NpuConvolutionBackward" if npu else "ThnnConv2DBackward" if cpu else "CudnnConvolutionBackward"
    conv_input = "input" if npu else "self"
    return [
        ("ConvolutionForward", {"input": {"input": x, "weight": w}, "output": {"result": conv}}),
        ("ReluForward", {"input": {"self": conv}, "output": {"result": relu}}),
        ("AddmmForward", {"input": {"self": bias, "mat1": flat, "mat2": fc.T.copy()}, "output": {"result": out}}),
        ("AddmmBackward", {"input": {"grad": grad_out, "mat1": flat, "mat2": fc.T.copy(),
                                    "alpha": np.int64(1), "beta": np.int64(1)},
                           "output": {"result": [grad_flat, grad_fc.T.copy()]}}),
        ("ReluBackward0", {"input": {"grad": grad_relu, "result": relu}, "output": {"result": grad_conv}}),
        (conv_backward, {"input": {"grad": grad_conv, conv_input: x, "weight": w,
                                   "stride": np.array([1, 1], np.int64), "padding": np.array([0, 0], np.int64)},
                         "output": {"result": [grad_w]}}),
    ]


def _tensor(group: h5py.Group, name: str, array: np.ndarray, dtype: str, device: int) -> None:
    data = group.create_dataset(name, data=array.astype(np.float32 if dtype == "float16" else array.dtype))
    data.attrs.create("DeviceType", device, dtype="<i4")
    data.attrs.create("DataType", _DTYPE_CODES[dtype], dtype="<i4")
    data.attrs.create("FormatType", 0, dtype="<i4")  # ACL_FORMAT_NCHW
    data.attrs.create("Type", 0, dtype="<i4")  # SaveType::TENSOR
    strides = np.cumprod((1, *array.shape[:0:-1]))[::-1] if array.ndim else np.zeros(0, np.int64)
    data.attrs.create("Stride", np.asarray(strides, np.int64), dtype="<i8")


def _scalar(group: h5py.Group, name: str, value: np.ndarray) -> None:
    data = group.create_dataset(name, data=value)
    data.attrs.create("Type", 3 if np.ndim(value) == 0 else 2, dtype="<i4")  # SaveType::I64 / VEC_I64


def write(path: Path, *, half: bool, bug: bool = False, cpu: bool = False) -> None:
    """Write one run's dump to `path` (`cpu`: a float32 CPU run, its convolution's backward ``ThnnConv2DBackward``)."""
    dtype, device = ("float16", _NPU) if half else ("float32", _CPU if cpu else _CUDA)
    with h5py.File(path, "w") as f:
        for seq, (op, roles) in enumerate(_step(half, bug, cpu), start=1):
            for role, params in roles.items():
                group = f.require_group(f"/{op}/{seq}/{role}")
                for name, value in params.items():
                    if isinstance(value, list):
                        sub = group.require_group(name)
                        for i, item in enumerate(value):
                            _tensor(sub, f"{name}_{i}", item, dtype, device)
                    elif value.dtype == np.int64:
                        _scalar(group, name, value)
                    else:
                        _tensor(group, name, value, dtype, device)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    write(OUT / "gpu.h5", half=False)
    write(OUT / "npu_clean.h5", half=True)
    write(OUT / "npu_bug.h5", half=True, bug=True)


if __name__ == "__main__":
    main()
