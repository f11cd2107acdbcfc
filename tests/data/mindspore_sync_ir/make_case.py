"""Write a small MindSpore 1.2 synchronous dump with its kernel graph IR and execution order, and its host twin.

``npu/net/device_0``: a Conv2D (input NC1HWC0, weight FracZ, output NC1HWC0), a ReLU (NC1HWC0) and a Flatten
(DefaultFormat) as MindSpore 1.2 dumps them with ``trans_flag`` off: the ``.bin`` files hold the device layout,
``graphs/ms_output_trace_code_graph_0.ir`` the kernel graph (host types, device types, full name per kernel, as
``anf_ir_dump.cc`` ``DumpCNode`` prints them) and ``execution_order/ms_execution_order_graph_0.csv`` the kernel order.
``bench/net/device_0``: the same kernels in float32 and the host layout (``DefaultFormat``), as a CPU/GPU run or
``trans_flag`` on writes them. The device layouts are made here by padding and transposing, independently of
graphcmp's inverse maps. Run from the repository root: ``python tests/data/mindspore_sync_ir/make_case.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SCOPE = "Default/network-WithLossCell/_backbone-Net"
CONV = f"{SCOPE}/conv1-Conv2d/Conv2D-op12"
RELU = f"{SCOPE}/ReLU-op15"
FLAT = f"{SCOPE}/flatten-Flatten/Flatten-op17"


def nc1hwc0(x: np.ndarray, c0: int = 16) -> np.ndarray:
    """(N, C, H, W) -> (N, C1, H, W, C0), channels zero-padded to whole blocks."""
    n, c, h, w = x.shape
    c1 = -(-c // c0)
    padded = np.zeros((n, c1 * c0, h, w), x.dtype)
    padded[:, :c] = x
    return padded.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2).copy()


def fractal_z(w: np.ndarray, c0: int = 16, n0: int = 16) -> np.ndarray:
    """(N, C, H, W) weight -> (C1*H*W, N1, N0, C0), N and C zero-padded to whole blocks."""
    n, c, h, k = w.shape
    c1, n1 = -(-c // c0), -(-n // n0)
    padded = np.zeros((n1 * n0, c1 * c0, h, k), w.dtype)
    padded[:n, :c] = w
    blocks = padded.reshape(n1, n0, c1, c0, h, k).transpose(2, 4, 5, 0, 1, 3)  # C1, H, W, N1, N0, C0
    return blocks.reshape(c1 * h * k, n1, n0, c0).copy()


def tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(29)
    x = rng.standard_normal((2, 20, 3, 3)).astype(np.float32)
    w = (rng.standard_normal((5, 20, 1, 1)) * 0.3).astype(np.float32)
    y = np.einsum("nchw,kc->nkhw", x, w[:, :, 0, 0])
    r = np.maximum(y, 0)
    return {"x": x, "w": w, "y": y, "r": r, "f": r.reshape(2, -1)}


def _bin(folder: Path, op: str, role: str, index: int, array: np.ndarray, dtype: str, fmt: str) -> None:
    dims = "_".join(map(str, array.shape))
    array.tofile(folder / f"{op.replace('/', '--')}_{role}_{index}_shape_{dims}_{dtype}_{fmt}.bin")


def _host(shape) -> str:
    return f"<Tensor[Float16]x[const vector][{', '.join(map(str, shape))}]>"


def _dev(fmt: str, array: np.ndarray) -> str:
    return f"<Float16x{fmt}[const vector][{', '.join(map(str, array.shape))}]>"


def write_npu(root: Path, t: dict[str, np.ndarray]) -> None:
    device = root / "net" / "device_0"
    folder = device / "iteration_0"
    folder.mkdir(parents=True)
    h = {k: v.astype(np.float16) for k, v in t.items()}
    dx, dw, dy, dr = nc1hwc0(h["x"]), fractal_z(h["w"]), nc1hwc0(h["y"]), nc1hwc0(h["r"])
    for op, role, index, array, fmt in ((CONV, "input", 0, dx, "NC1HWC0"), (CONV, "input", 1, dw, "FracZ"),
                                        (CONV, "output", 0, dy, "NC1HWC0"), (RELU, "input", 0, dy, "NC1HWC0"),
                                        (RELU, "output", 0, dr, "NC1HWC0"), (FLAT, "input", 0, h["r"], "DefaultFormat"),
                                        (FLAT, "output", 0, h["f"], "DefaultFormat")):
        _bin(folder, op, role, index, array, "Float16", fmt)
    (device / "graphs").mkdir()
    (device / "graphs" / "ms_output_trace_code_graph_0.ir").write_text(_ir(t, dx, dw, dy, dr))
    (device / "execution_order").mkdir()
    (device / "execution_order" / "ms_execution_order_graph_0.csv").write_text(
        "NodeExecutionOrder-FullNameWithScope\n" + "".join(f"{op}\n" for op in (CONV, RELU, FLAT)))


def _ir(t, dx, dw, dy, dr) -> str:
    x, w, y, f = t["x"].shape, t["w"].shape, t["y"].shape, t["f"].shape
    return "\n".join([
        "#IR entry      : @kernel_graph_0.1",
        "#attrs         :",
        "#Total params  : 2",
        "",
        f"%para1_x : {_host(x)}  :  {_dev('NC1HWC0', dx)}  :  IsWeight:false",
        f"%para2_conv1.weight : <Ref[Tensor(F16)]x[const vector][{', '.join(map(str, w))}]>  :  "
        f"{_dev('FracZ', dw)}  :  IsWeight:true",
        "",
        "#Total subgraph : 1",
        "",
        "subgraph attr:",
        "subgraph @kernel_graph_0.1() {",
        "  %0(equivoutput) = Conv2D(%para1_x, %para2_conv1.weight) {instance name: conv2d} primitive_attrs: "
        "{pri_format: NC1HWC0, format: NCHW, out_channel: 5, kernel_size: (1, 1), input_names: [x, w]}",
        f"      : ({_host(x)}, {_host(w)}) -> ({_host(y)})",
        f"      : ({_dev('NC1HWC0', dx)}, {_dev('FracZ', dw)}) -> ({_dev('NC1HWC0', dy)})",
        f"      : ({CONV})",
        "      # In file net.py(12)/        x = self.conv1(x)/",
        "  %1(equivoutput) = ReLU(%0) {instance name: relu} primitive_attrs: {input_names: [x]}",
        f"      : ({_host(y)}) -> ({_host(y)})",
        f"      : ({_dev('NC1HWC0', dy)}) -> ({_dev('NC1HWC0', dr)})",
        f"      : ({RELU})",
        "  %2(equivoutput) = Flatten(%1) {instance name: flatten} primitive_attrs: {input_names: [x]}",
        f"      : ({_host(y)}) -> ({_host(f)})",
        f"      : ({_dev('DefaultFormat', t['r'])}) -> ({_dev('DefaultFormat', t['f'])})",
        f"      : ({FLAT})",
        "  Return(%2)",
        "      : (<Tensor[Float16]x[const vector][2, 45]>)",
        f"      : ({SCOPE}/Return-op18)",
        "}",
        ""])


def write_bench(root: Path, t: dict[str, np.ndarray]) -> None:
    folder = root / "net" / "device_0" / "iteration_0"
    folder.mkdir(parents=True)
    for op, role, index, key in ((CONV, "input", 0, "x"), (CONV, "input", 1, "w"), (CONV, "output", 0, "y"),
                                 (RELU, "input", 0, "y"), (RELU, "output", 0, "r"), (FLAT, "input", 0, "r"),
                                 (FLAT, "output", 0, "f")):
        _bin(folder, op, role, index, t[key], "Float32", "DefaultFormat")


def main() -> None:
    t = tensors()
    for side, write in (("npu", write_npu), ("bench", write_bench)):
        shutil.rmtree(HERE / side, ignore_errors=True)
        write(HERE / side, t)


if __name__ == "__main__":
    main()
