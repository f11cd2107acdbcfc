"""Ascend raw-dump development cases of other models than the shared CNN (deterministic, seeded).

    /work/gen/venv/bin/python tests/gen/make_ascend29.py --root /work/cases29 [--only CASE ...]

Three models, each exported to ONNX (TorchScript exporter, opset 17, BatchNorm kept) and run by ONNX Runtime in fp32
(all optimizations off) for the golden outputs of every node (``{node name, / . -> _}.{output}.{timestamp}.npy``):

* ``enc``: a transformer encoder block (LayerNorm, q/k/v/o Linear = MatMul + Add, 2-head attention with a scale Mul
  and Softmax, GELU through Erf, two residual Adds), input 1x16x32;
* ``mbn``: a MobileNet-style CNN (3x3/2 conv + BN + ReLU6, an inverted residual block with a depthwise conv, a
  channel Concat of a 1x1 conv branch and an AveragePool branch, global average pool, Gemm), input 1x3x16x16;
* ``lstm``: an LSTM cell unrolled over 3 steps (three model inputs, Gemm / MatMul, Split into 4 gates,
  Sigmoid / Tanh / Mul / Add), then a Gemm head; h0 and c0 are zeros.

The NPU is emulated per GE op (as ATC would fuse: Conv + BN (+ Clip) one Conv2D named by the conv and activation
names with the BN folded into the weight in fp32; MatMul + Add one MatMulV2 with a bias; Reshape + Transpose one
ConfusionTransposeD; Div/Erf/Add/Mul/Mul one Gelu; Cast and TransData around): inputs and weights in float16 or
bfloat16, fp32 compute and accumulation (PyTorch CPU, one thread), the output rounded to the dtype (overflow ->
inf). Device formats: NC1HWC0 feature maps, FRACTAL_Z conv weights (the depthwise one in the group layout,
``sub_format`` = groups), FRACTAL_NZ matmul outputs (batched for the encoder). Dump files are written by the
writer of tests/data/ascend_mlp/make_ascend_cases.py (GE folder layout; the ``lstm`` fp16 cases in the MindSpore
asynchronous one), with an ``Opdebug.Node_OpDebug`` file for the overflow cases (old layout for ``mbn``, the newer
0x5A5A5A5A one for ``lstm``) and the GE graph in ``atc --json`` form.

Truth: the first NPU op (execution order) whose outputs are not bit-identical to the emulation of the same model and
dtype without the bug (a clean case: none); for an overflow (the model itself scaled, the golden finite), the first op
with a non-finite output. Every case: ``<root>/<case>/{model.onnx, golden/, fusion_rule/<model>.json, npu_dump/...,
TRUTH.json}``.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "data" / "ascend_mlp"))

import make_ascend_cases as mlp  # noqa: E402  (the raw dump writer, bf16 helpers)
from make_ascend_cases import fractal_nz, nc1hwc0  # noqa: E402  (forward maps)

DT = {**mlp.DT, "bool": 12}
FMT = {"NCHW": 0, "ND": 2, "NC1HWC0": 3, "FRACTAL_Z": 4, "NC1HWC0_C04": 12, "FRACTAL_Z_C04": 13, "FRACTAL_NZ": 29,
       "NCDHW": 30, "NDC1HWC0": 32, "FRACTAL_Z_3D": 33}
GE_DT = {"float32": "DT_FLOAT", "float16": "DT_FLOAT16", "bfloat16": "DT_BF16", "int32": "DT_INT32",
         "uint8": "DT_UINT8"}
T_GOLDEN = 1741300000000000
T_DUMP = 1741300500000000


# --- device formats (forward maps, C0 = N0 = 16) ------------------------------------------------------------------

def fractal_z(w: np.ndarray) -> np.ndarray:
    """(N, C, H, W) weight -> (C1*H*W, N1, 16, 16): block (c1, h, w) holds N0 x C0."""
    n, c, h, k = w.shape
    n1, c1 = -(-n // 16), -(-c // 16)
    padded = np.zeros((n1 * 16, c1 * 16, h, k), w.dtype)
    padded[:n, :c] = w
    return padded.reshape(n1, 16, c1, 16, h, k).transpose(2, 4, 5, 0, 1, 3).reshape(c1 * h * k, n1, 16, 16).copy()


def fractal_z_groups(w: np.ndarray, groups: int) -> np.ndarray:
    """A group convolution's (N, C/groups, H, W) weight in GE's grouped FRACTAL_Z: `e` groups share a block, their
    Cin x Cout matrices on its diagonal (written element by element, independently of graphcmp's vectorized
    inverse)."""
    n, cin, h, k = w.shape
    cout = n // groups
    e = min(math.lcm(cin, 16) // cin, math.lcm(cout, 16) // cout, groups)
    cin_b, cout_b = -(-e * cin // 16) * 16, -(-e * cout // 16) * 16
    blocks = -(-groups // e)
    dev = np.zeros((blocks, cin_b // 16, h, k, cout_b, 16), w.dtype)
    for g in range(groups):
        block, pos = divmod(g, e)
        for co in range(cout):
            for ci in range(cin):
                cin_pos = pos * cin + ci
                dev[block, cin_pos // 16, :, :, pos * cout + co, cin_pos % 16] = w[g * cout + co, ci]
    return dev.reshape(blocks * (cin_b // 16) * h * k, cout_b // 16, 16, 16)


def fractal_z_c04(w: np.ndarray) -> np.ndarray:
    """(N, C<=4, H, W) weight -> (K1, N1, 16, 16): the reduction axis (H, W, C0=4) of each output channel
    flattened, padded to 16, and cut into fractals (k1, n1, n0, k0)."""
    n, c, h, k = w.shape
    padded = np.zeros((n, 4, h, k), w.dtype)
    padded[:, :c] = w
    rows = padded.transpose(0, 2, 3, 1).reshape(n, h * k * 4)            # (N, K)
    k1, n1 = -(-h * k * 4 // 16), -(-n // 16)
    matrix = np.zeros((n1 * 16, k1 * 16), w.dtype)
    matrix[:n, :h * k * 4] = rows
    return matrix.reshape(n1, 16, k1, 16).transpose(2, 0, 1, 3).copy()


def ndc1hwc0(x: np.ndarray) -> np.ndarray:
    """(N, C, D, H, W) -> (N, D, C1, H, W, 16)."""
    n, c, d, h, w = x.shape
    c1 = -(-c // 16)
    padded = np.zeros((n, c1 * 16, d, h, w), x.dtype)
    padded[:, :c] = x
    return padded.reshape(n, c1, 16, d, h, w).transpose(0, 3, 1, 4, 5, 2).copy()


def fractal_z_3d(w: np.ndarray) -> np.ndarray:
    """(N, C, D, H, W) weight -> (D*C1*H*W, N1, 16, 16): block (d, c1, h, w) holds N0 x C0."""
    n, c, d, h, k = w.shape
    n1, c1 = -(-n // 16), -(-c // 16)
    padded = np.zeros((n1 * 16, c1 * 16, d, h, k), w.dtype)
    padded[:n, :c] = w
    out = padded.reshape(n1, 16, c1, 16, d, h, k).transpose(4, 2, 5, 6, 0, 1, 3)
    return out.reshape(d * c1 * h * k, n1, 16, 16).copy()


def to_device(x: np.ndarray, fmt: str, groups: int = 0) -> np.ndarray:
    if fmt == "NC1HWC0":
        return nc1hwc0(x)
    if fmt == "NC1HWC0_C04":
        return nc1hwc0(x, 4)
    if fmt == "FRACTAL_Z_C04":
        return fractal_z_c04(x)
    if fmt == "NDC1HWC0":
        return ndc1hwc0(x)
    if fmt == "FRACTAL_Z_3D":
        return fractal_z_3d(x)
    if fmt == "FRACTAL_Z":
        return fractal_z_groups(x, groups) if groups > 1 else fractal_z(x)
    if fmt == "FRACTAL_NZ":
        return fractal_nz(x)
    return x


# --- numerics -------------------------------------------------------------------------------------------------

def rnd(x, dtype: str) -> np.ndarray:
    """`x` rounded to `dtype` (IEEE round to nearest even, overflow -> inf), held as float32 (int32 kept)."""
    x = np.asarray(x)
    if dtype == "int32":
        return x.astype(np.int32)
    x = x.astype(np.float32)
    if dtype == "float16":
        with np.errstate(over="ignore", invalid="ignore"):
            return x.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":
        return mlp.bf16_value(x)
    return x


def raw_bytes(x: np.ndarray, dtype: str) -> bytes:
    if dtype == "bfloat16":
        return mlp.bf16_bits(x).tobytes()
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(x.astype({"float16": np.float16, "float32": np.float32, "int32": np.int32,
                                              "uint8": np.uint8}[dtype])).tobytes()


def th(v):
    import torch
    return torch.from_numpy(np.ascontiguousarray(v.array))


@dataclass
class Val:
    """One tensor of the NPU graph: host values (rounded to `dtype`), device format, what it stands for."""

    ref: str
    array: np.ndarray
    dtype: str
    fmt: str
    origin: tuple[str, int] | None
    groups: int = 0

    def dump(self, address: int = 0x1000) -> dict:
        device = to_device(self.array, self.fmt, self.groups)
        return {"raw": raw_bytes(device, self.dtype), "dtype": DT[self.dtype], "format": FMT[self.fmt],
                "shape": list(device.shape), "original_shape": list(self.array.shape), "origin": self.origin,
                "address": address, "sub_format": self.groups if self.groups > 1 else 0}


@dataclass
class Op:
    type: str
    name: str
    originals: list[str]
    inputs: list[Val]
    outputs: list[Val]
    attrs: dict = field(default_factory=dict)


class Emu:
    """Records the NPU graph while computing it (eagerly)."""

    def __init__(self, dtype: str):
        self.dt = dtype
        self.datas: list[Val] = []
        self.consts: list[Val] = []
        self.ops: list[Op] = []

    def data(self, name: str, array: np.ndarray) -> Val:
        host = {4: "NCHW", 5: "NCDHW"}.get(array.ndim, "ND")
        v = Val(f"{name}:0", np.asarray(array, np.float32), "float32", host, (name, 0))
        self.datas.append(v)
        return v

    def const(self, name: str, array: np.ndarray, fmt: str = "ND", groups: int = 0, dtype: str | None = None) -> Val:
        v = Val(f"{name}:0", rnd(array, dtype or self.dt), dtype or self.dt, fmt, None, groups)
        self.consts.append(v)
        return v

    def op(self, op_type: str, name: str, originals, inputs, outputs, attrs=None) -> list[Val]:
        """`outputs`: (fp32 result, device format, origin (op, index), dtype or None for the run's)."""
        vals = []
        for k, out in enumerate(outputs):
            array, fmt, origin = out[:3]
            dtype = out[3] if len(out) > 3 and out[3] else self.dt
            vals.append(Val(f"{name}:{k}", rnd(array, dtype), dtype, fmt, origin))
        self.ops.append(Op(op_type, name, list(originals), list(inputs), vals, attrs or {}))
        return vals

    def one(self, op_type, name, originals, inputs, array, fmt, origin, dtype=None, attrs=None) -> Val:
        return self.op(op_type, name, originals, inputs, [(array, fmt, origin, dtype)], attrs)[0]

    # layout helpers: Cast / TransData keep the tensor's origin
    def cast(self, name: str, v: Val, dtype: str) -> Val:
        return self.one("Cast", name, [], [v], v.array, v.fmt, v.origin, dtype)

    def transdata(self, name: str, v: Val, fmt: str) -> Val:
        array = v.array
        return self.one("TransData", name, [], [v], array, fmt, v.origin, v.dtype,
                        attrs={"src_format": v.fmt, "dst_format": fmt})


def f32(v: Val | np.ndarray) -> np.ndarray:
    return v.array if isinstance(v, Val) else v


# --- the models ---------------------------------------------------------------------------------------------

def build_models():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Encoder(nn.Module):
        def __init__(self, d=32, heads=2, ff=64):
            super().__init__()
            self.h, self.dh = heads, d // heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.scale = 1 / math.sqrt(self.dh)

        def forward(self, x):
            b, n, d = x.shape
            y = self.ln1(x)
            q = self.q(y).reshape(b, n, self.h, self.dh).transpose(1, 2)
            k = self.k(y).reshape(b, n, self.h, self.dh).transpose(1, 2)
            v = self.v(y).reshape(b, n, self.h, self.dh).transpose(1, 2)
            a = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
            c = (a @ v).transpose(1, 2).reshape(b, n, d)
            x = x + self.o(c)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class ConvBN(nn.Module):
        def __init__(self, cin, cout, k=1, stride=1, groups=1, act=True):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False)
            self.bn = nn.BatchNorm2d(cout)
            self.act = nn.ReLU6() if act else None

        def forward(self, x):
            x = self.bn(self.conv(x))
            return self.act(x) if self.act else x

    class MobileNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = ConvBN(3, 16, 3, 2)
            self.expand, self.dw = ConvBN(16, 24), ConvBN(24, 24, 3, 1, 24)
            self.project = ConvBN(24, 16, act=False)
            self.head, self.pool = ConvBN(16, 40), nn.AvgPool2d(3, 1, 1)
            self.fc = nn.Linear(56, 10)

        def forward(self, x):
            x = self.stem(x)
            x = x + self.project(self.dw(self.expand(x)))
            z = torch.cat([self.head(x), self.pool(x)], 1)
            return self.fc(F.adaptive_avg_pool2d(z, 1).flatten(1))

    class InvertedResidual(nn.Module):
        def __init__(self, c=16, wide=48):
            super().__init__()
            self.expand, self.dw = ConvBN(c, wide), ConvBN(wide, wide, 3, 1, wide)
            self.project = ConvBN(wide, c, act=False)

        def forward(self, x):
            return x + self.project(self.dw(self.expand(x)))

    class MobileNetDeep(nn.Module):
        def __init__(self, blocks=6):
            super().__init__()
            self.stem = ConvBN(3, 16, 3, 2)
            self.blocks = nn.Sequential(*(InvertedResidual() for _ in range(blocks)))
            self.head, self.fc = ConvBN(16, 64), nn.Linear(64, 10)

        def forward(self, x):
            x = self.head(self.blocks(self.stem(x)))
            return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

    class LSTM(nn.Module):
        def __init__(self, features=20, hidden=24):
            super().__init__()
            self.hd = hidden
            self.wx = nn.Linear(features, 4 * hidden)
            self.wh = nn.Linear(hidden, 4 * hidden, bias=False)
            self.head = nn.Linear(hidden, 8)

        def forward(self, x0, x1, x2):
            h = torch.zeros(x0.shape[0], self.hd)
            c = torch.zeros_like(h)
            for x in (x0, x1, x2):
                i, f, g, o = (self.wx(x) + self.wh(h)).split(self.hd, 1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
            return self.head(h)

    class Conv3dBN(nn.Module):
        def __init__(self, cin, cout, k=3, stride=1):
            super().__init__()
            self.conv = nn.Conv3d(cin, cout, k, stride, k // 2, bias=False)
            self.bn = nn.BatchNorm3d(cout)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))

    class Video3D(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(Conv3dBN(3, 16, 3, (1, 2, 2)), Conv3dBN(16, 24))  # dotted names: blocks.0
            self.pool = nn.MaxPool3d((1, 2, 2))
            self.fc = nn.Linear(24, 6)

        def forward(self, x):
            x = self.pool(self.blocks(x))
            return self.fc(F.adaptive_avg_pool3d(x, 1).flatten(1))

    class EncoderStack(nn.Module):
        def __init__(self, blocks=4):
            super().__init__()
            self.layers = nn.ModuleList(Encoder() for _ in range(blocks))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    return {"enc": Encoder, "mbn": MobileNet, "lstm": LSTM, "c3d": Video3D, "enc4": EncoderStack,
            "mbn6": MobileNetDeep}


def make_model(kind: str, overflow: bool):
    """The torch model (seeded) and its inputs {name: array}."""
    import torch
    torch.manual_seed(29)
    model = build_models()[kind]()
    gen = torch.Generator().manual_seed(2929)
    with torch.no_grad():
        for mod in model.modules():  # BN statistics and LayerNorm affine not at their defaults
            if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d, torch.nn.LayerNorm)):
                mod.weight.copy_(1 + 0.2 * torch.randn(mod.weight.shape, generator=gen))
                mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=gen))
            if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)):
                mod.running_mean.copy_(0.1 * torch.randn(mod.running_mean.shape, generator=gen))
                mod.running_var.copy_(0.5 + torch.rand(mod.running_var.shape, generator=gen))
        if overflow and kind == "mbn":  # in the model itself: the golden stays finite, fp16 does not
            model.project.bn.weight[3] *= 1.5e5
            model.project.bn.bias[3] = 6e4
        if overflow and kind == "lstm":
            model.wx.weight[30] *= 1e5
    model.eval()
    rng = np.random.default_rng(2930)
    if kind in ("enc", "enc4"):
        inputs = {"input": rng.standard_normal((1, 16, 32)).astype(np.float32)}
    elif kind in ("mbn", "mbn6"):
        inputs = {"input": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    elif kind == "c3d":
        inputs = {"input": rng.standard_normal((1, 3, 4, 8, 8)).astype(np.float32)}
    else:
        inputs = {f"x{t}": rng.standard_normal((4, 20)).astype(np.float32) for t in range(3)}
    return model, inputs


def export_and_golden(model, inputs: dict, path: Path) -> dict[tuple[str, int], np.ndarray]:
    """Export to ONNX (opset 17) and run every node output with ONNX Runtime fp32, optimizations off."""
    import onnx
    import onnxruntime as ort
    import torch
    args = tuple(torch.from_numpy(a) for a in inputs.values())
    torch.onnx.export(model, args, str(path), opset_version=17, dynamo=False, do_constant_folding=False,
                      input_names=list(inputs), output_names=["output"])
    proto = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    known = {v.name: v for v in (*proto.graph.value_info, *proto.graph.output)}
    nodes = [n for n in proto.graph.node if n.op_type not in ("Constant", "Identity")]
    wanted = [o for n in nodes for o in n.output if o]
    del proto.graph.output[:]
    proto.graph.output.extend(known[o] for o in wanted)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    values = dict(zip(wanted, session.run(wanted, inputs)))
    out = {(name, 0): array for name, array in inputs.items()}
    for n in nodes:
        for k, o in enumerate(n.output):
            out[(n.name, k)] = values[o]
    return out


def params(model) -> dict[str, np.ndarray]:
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    return sd


def fold(p: dict, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """Conv weight and bias with the BN folded in (fp32)."""
    w = p[f"{prefix}.conv.weight"]
    s = p[f"{prefix}.bn.weight"] / np.sqrt(p[f"{prefix}.bn.running_var"] + np.float32(1e-5))
    bias = p[f"{prefix}.bn.bias"] - p[f"{prefix}.bn.running_mean"] * s
    return (w * s.reshape(-1, *[1] * (w.ndim - 1))).astype(np.float32), bias


# --- the NPU programs ---------------------------------------------------------------------------------------

def npu_enc(p: dict, inputs: dict, dtype: str, bug: str, blocks: int = 0) -> Emu:
    """The encoder block (`blocks` 0: its ops at the top level) or a stack of `blocks` of them (``/layers.{i}/...``);
    a stack's bug is planted in its block 2 (the last block when fewer)."""
    e = Emu(dtype)
    mix, bug = variant(bug)  # mix: LayerNorm and Softmax in fp32 between Casts, as a mixed-precision graph runs them
    x = e.cast("trans_Cast_0", e.data("input", inputs["input"]), dtype)
    names = {"casts": iter(range(10, 1000)), "transdata": iter(range(1, 1000))}
    if not blocks:
        x = encoder_block(e, p, x, "", "", bug, mix, names)
    for i in range(blocks):
        x = encoder_block(e, p, x, f"/layers.{i}", f"layers.{i}.", bug if i == min(2, blocks - 1) else "", mix, names)
    e.cast("trans_Cast_5", x, "float32")
    return e


def npu_enc4(p: dict, inputs: dict, dtype: str, bug: str) -> Emu:
    return npu_enc(p, inputs, dtype, bug, blocks=4)


def encoder_block(e: Emu, p: dict, x: Val, scope: str, key: str, bug: str, mix: bool, names: dict) -> Val:
    """One encoder block on `x` (ND): ONNX names under `scope`, parameters under `key`."""
    import torch
    import torch.nn.functional as F
    dtype = e.dt

    def fp32(v):
        return e.cast(f"trans_Cast_{next(names['casts'])}", v, "float32") if mix else v

    def back(v):
        return e.cast(f"trans_Cast_{next(names['casts'])}", v, dtype) if mix else v

    def transdata(v, fmt):
        return e.transdata(f"trans_TransData_{next(names['transdata'])}", v, fmt)

    def ln(name, v, prefix):
        wide = "float32" if mix else None
        g = e.const(f"{key}{prefix}.weight", p[f"{key}{prefix}.weight"], dtype=wide)
        b = e.const(f"{key}{prefix}.bias", p[f"{key}{prefix}.bias"], dtype=wide)
        v = fp32(v)
        out = F.layer_norm(th(v), (v.array.shape[-1],), th(g), th(b), 1e-5).numpy()
        return back(e.one("LayerNorm", name, [name], [v, g, b], out, "ND", (name, 0), wide))

    def linear(prefix, v, bias=True, scale_col=None):
        w = p[f"{key}{prefix}.weight"].T.copy()  # (in, out): the ONNX MatMul's weight
        if scale_col is not None:
            w[:, scale_col[0]] *= scale_col[1]
        if bug == "wtrans" and prefix == "o":  # the square weight laid out transposed
            w = w.T.copy()
        wv = e.const(f"{key}{prefix}.weight", w, "FRACTAL_NZ")
        ins, out = [v, wv], th(v) @ th(wv)
        if bias:
            bv = e.const(f"{key}{prefix}.bias", p[f"{key}{prefix}.bias"])
            ins.append(bv)
            out = out + th(bv)
        op = f"{scope}/{prefix}"
        return e.one("MatMulV2", f"{op}/MatMul", [f"{op}/MatMul", f"{op}/Add"], ins, out.numpy(), "FRACTAL_NZ",
                     (f"{op}/Add", 0))

    y = transdata(ln(f"{scope}/ln1/LayerNormalization", x, "ln1"), "FRACTAL_NZ")
    perturb = {"perturb": ("v", (5, 1.05)), "perturb_bf": ("v", (5, 1.15))}.get(bug)
    q = linear("q", y)
    k = linear("k", y)
    v = linear("v", y, scale_col=perturb[1] if perturb else None)

    def heads(name, val, originals, perm):
        a = val.array.reshape(1, 16, 2, 16).transpose(*perm).copy()
        return e.one("ConfusionTransposeD", scope + name, [scope + o for o in originals], [val], a, "ND",
                     (scope + originals[-1], 0))

    def op(op_type, name, inputs, array, fmt="ND", originals=None, dtype=None, attrs=None):
        originals = [scope + o for o in (originals or [name])]
        return e.one(op_type, scope + name, originals, inputs, array, fmt, (originals[-1], 0), dtype, attrs)

    qh = heads("/Transpose", q, ["/Reshape", "/Transpose"], (0, 2, 1, 3))
    kh = heads("/Transpose_2", k, ["/Reshape_1", "/Transpose_2"], (0, 2, 3, 1))
    vh = heads("/Transpose_1", v, ["/Reshape_2", "/Transpose_1"], (0, 2, 1, 3))
    s = op("BatchMatMulV2", "/MatMul", [qh, kh], (th(qh) @ th(kh)).numpy())
    scale = 1 / math.sqrt(32 if bug == "scale" else 16)  # the bug: the model width's scale, not a head's
    sc = fp32(op("Muls", "/Mul", [s], (th(s) * np.float32(scale)).numpy(), attrs={"value": scale}))
    a = back(op("SoftmaxV2", "/Softmax", [sc], torch.softmax(th(sc), -1).numpy(), dtype="float32" if mix else None))
    c = op("BatchMatMulV2", "/MatMul_1", [a, vh], (th(a) @ th(vh)).numpy())
    c2 = op("ConfusionTransposeD", "/Transpose_3", [c], c.array.transpose(0, 2, 1, 3).reshape(1, 16, 32),
            "FRACTAL_NZ", ["/Transpose_3", "/Reshape_3"])
    o = transdata(linear("o", c2), "ND")
    r1 = op("Add", "/Add", [x, o], (th(x) + th(o)).numpy())
    y2 = transdata(ln(f"{scope}/ln2/LayerNormalization", r1, "ln2"), "FRACTAL_NZ")
    h = linear("fc1", y2, bias=bug != "nobias")
    gelu = op("Gelu", "/Div/Mul_2", [h], F.gelu(th(h)).numpy(), "FRACTAL_NZ", ["/Div", "/Erf", "/Add_1", "/Mul_1",
                                                                                "/Mul_2"])
    f2 = transdata(linear("fc2", gelu), "ND")
    return op("Add", "/Add_2", [r1, f2], (th(r1) + th(f2)).numpy())


def variant(bug: str) -> tuple[bool, str]:
    """(the mixed-precision variant?, the bug) of a case's bug text (``mix``, ``mix+scale``, ``scale``)."""
    mix = bug == "mix" or bug.startswith("mix+")
    return mix, (bug.partition("+")[2] if mix else bug)


def npu_mbn(p: dict, inputs: dict, dtype: str, bug: str) -> Emu:
    import torch.nn.functional as F
    e = Emu(dtype)
    # the first conv's 3 channels in the C0 = 4 formats (ATC's small-channel optimisation)
    x = e.transdata("trans_TransData_1", e.cast("trans_Cast_0", e.data("input", inputs["input"]), dtype),
                    "NC1HWC0_C04")

    def conv(prefix, v, stride=1, groups=1, act=True, op_type="Conv2D"):
        w, b = fold(p, prefix)
        if bug in ("perturb", "perturb_bf") and prefix == "expand":
            w[7] *= 1.05 if bug == "perturb" else 1.15
        fmt = "FRACTAL_Z_C04" if v.fmt == "NC1HWC0_C04" else "FRACTAL_Z"
        wv = e.const(f"/{prefix}/conv/Conv_weight_fold", w, fmt, groups if groups > 1 else 0)
        bv = e.const(f"/{prefix}/conv/Conv_bias_fold", b)
        if bug == "mislaid" and prefix == "dw":  # the depthwise weight laid out with H and W swapped
            wv.array = wv.array.transpose(0, 1, 3, 2).copy()
        k = w.shape[-1]
        out = F.conv2d(th(v), th(wv), th(bv), stride, k // 2, 1, groups)
        names = [f"/{prefix}/conv/Conv", f"/{prefix}/bn/BatchNormalization"]
        if act:
            out = out.clamp(0, 6)
            names.append(f"/{prefix}/act/Clip")
        name = f"/{prefix}/conv/Conv" + (f"/{prefix}/act/Clip" if act else "")
        return e.one(op_type, name, names, [v, wv, bv], out.numpy(), "NC1HWC0", (names[-1], 0),
                     attrs={"groups": groups, "strides": stride})

    x = conv("stem", x, 2)
    y = conv("project", conv("dw", conv("expand", x), groups=24, op_type="DepthwiseConv2D"), act=False)
    r = e.one("Add", "/Add", ["/Add"], [x, y], (th(x) + th(y)).numpy(), "NC1HWC0", ("/Add", 0))
    hd = conv("head", r)
    pl = e.one("AvgPoolV2", "/pool/AveragePool", ["/pool/AveragePool"], [r],
               F.avg_pool2d(th(r), 3, 1, 1, count_include_pad=True).numpy(), "NC1HWC0", ("/pool/AveragePool", 0))
    cat = e.one("ConcatD", "/Concat", ["/Concat"], [hd, pl], np.concatenate([hd.array, pl.array], 1), "NC1HWC0",
                ("/Concat", 0), attrs={"concat_dim": 1})
    gap = e.one("ReduceMeanD", "/GlobalAveragePool", ["/GlobalAveragePool"], [cat],
                th(cat).mean((2, 3), keepdim=True).numpy(), "NC1HWC0", ("/GlobalAveragePool", 0))
    flat = e.transdata("trans_TransData_2", gap, "NCHW")
    flat2 = Val(flat.ref, flat.array.reshape(1, 56), flat.dtype, "ND", flat.origin)  # Flatten: removed by ATC
    wv, bv = e.const("fc.weight", p["fc.weight"]), e.const("fc.bias", p["fc.bias"])
    fc = e.one("MatMulV2", "/fc/Gemm", ["/fc/Gemm"], [flat2, wv, bv], (th(flat2) @ th(wv).T + th(bv)).numpy(),
               "FRACTAL_NZ", ("/fc/Gemm", 0), attrs={"transpose_x2": True})
    e.cast("trans_Cast_4", e.transdata("trans_TransData_3", fc, "ND"), "float32")
    return e


def npu_mbn6(p: dict, inputs: dict, dtype: str, bug: str) -> Emu:
    """Stem, six inverted residual blocks (``/blocks/blocks.N/...``), head conv, global pool, Gemm; a bug in block 4
    (perturb: its expand conv's channel 7) or block 3 (mislaid: its depthwise weight H/W swapped)."""
    import torch.nn.functional as F
    e = Emu(dtype)
    x = e.transdata("trans_TransData_1", e.cast("trans_Cast_0", e.data("input", inputs["input"]), dtype),
                    "NC1HWC0_C04")

    def conv(key, v, stride=1, groups=1, act=True, op_type="Conv2D"):
        w, b = fold(p, key)
        if bug in ("perturb", "perturb_bf") and key == "blocks.4.expand":
            w[7] *= 1.05 if bug == "perturb" else 1.15
        block, _, part = key.removeprefix("blocks.").partition(".")  # "blocks.3.dw" -> /blocks/blocks.3/dw
        scope = f"/blocks/blocks.{block}/{part}" if key.startswith("blocks.") else f"/{key}"
        fmt = "FRACTAL_Z_C04" if v.fmt == "NC1HWC0_C04" else "FRACTAL_Z"
        wv = e.const(f"{scope}/conv/Conv_weight_fold", w, fmt, groups if groups > 1 else 0)
        bv = e.const(f"{scope}/conv/Conv_bias_fold", b)
        if bug == "mislaid" and key == "blocks.3.dw":
            wv.array = wv.array.transpose(0, 1, 3, 2).copy()
        out = F.conv2d(th(v), th(wv), th(bv), stride, w.shape[-1] // 2, 1, groups)
        names = [f"{scope}/conv/Conv", f"{scope}/bn/BatchNormalization"]
        if act:
            out = out.clamp(0, 6)
            names.append(f"{scope}/act/Clip")
        name = f"{scope}/conv/Conv" + (f"{scope}/act/Clip" if act else "")
        return e.one(op_type, name, names, [v, wv, bv], out.numpy(), "NC1HWC0", (names[-1], 0),
                     attrs={"groups": groups, "strides": stride})

    x = conv("stem", x, 2)
    for i in range(6):
        k = f"blocks.{i}"
        y = conv(f"{k}.project", conv(f"{k}.dw", conv(f"{k}.expand", x), groups=48, op_type="DepthwiseConv2D"),
                 act=False)
        add = f"/blocks/blocks.{i}/Add"
        x = e.one("Add", add, [add], [x, y], (th(x) + th(y)).numpy(), "NC1HWC0", (add, 0))
    hd = conv("head", x)
    gap = e.one("ReduceMeanD", "/GlobalAveragePool", ["/GlobalAveragePool"], [hd],
                th(hd).mean((2, 3), keepdim=True).numpy(), "NC1HWC0", ("/GlobalAveragePool", 0))
    flat = e.transdata("trans_TransData_2", gap, "NCHW")
    flat2 = Val(flat.ref, flat.array.reshape(1, 64), flat.dtype, "ND", flat.origin)  # Flatten: removed by ATC
    wv, bv = e.const("fc.weight", p["fc.weight"]), e.const("fc.bias", p["fc.bias"])
    fc = e.one("MatMulV2", "/fc/Gemm", ["/fc/Gemm"], [flat2, wv, bv], (th(flat2) @ th(wv).T + th(bv)).numpy(),
               "FRACTAL_NZ", ("/fc/Gemm", 0), attrs={"transpose_x2": True})
    e.cast("trans_Cast_4", e.transdata("trans_TransData_3", fc, "ND"), "float32")
    return e


def npu_c3d(p: dict, inputs: dict, dtype: str, bug: str) -> Emu:
    import torch.nn.functional as F
    e = Emu(dtype)
    x = e.transdata("trans_TransData_1", e.cast("trans_Cast_0", e.data("input", inputs["input"]), dtype), "NDC1HWC0")

    def conv(k, v, stride):
        w, b = fold(p, f"blocks.{k}")
        prefix = f"blocks/blocks.{k}"
        if bug == "nobias" and k == 1:
            b = None  # the BN shift folded into the bias, lost
        wv = e.const(f"/{prefix}/conv/Conv_weight_fold", w, "FRACTAL_Z_3D")
        if bug == "mislaid" and k == 1:  # the 3-D weight laid out with D and H swapped
            wv.array = wv.array.transpose(0, 1, 3, 2, 4).copy()
        ins = [v, wv]
        if b is not None:
            ins.append(e.const(f"/{prefix}/conv/Conv_bias_fold", b))
        out = F.conv3d(th(v), th(wv), th(ins[2]) if len(ins) > 2 else None, stride, 1).relu()
        names = [f"/{prefix}/conv/Conv", f"/{prefix}/bn/BatchNormalization", f"/{prefix}/Relu"]
        return e.one("Conv3D", f"/{prefix}/conv/Conv/{prefix}/Relu", names, ins, out.numpy(), "NDC1HWC0",
                     (names[-1], 0), attrs={"strides": str(stride)})

    y = conv(1, conv(0, x, (1, 2, 2)), 1)
    pool = e.one("MaxPool3D", "/pool/MaxPool", ["/pool/MaxPool"], [y], F.max_pool3d(th(y), (1, 2, 2)).numpy(),
                 "NDC1HWC0", ("/pool/MaxPool", 0))
    gap = e.one("ReduceMeanD", "/GlobalAveragePool", ["/GlobalAveragePool"], [pool],
                th(pool).mean((2, 3, 4), keepdim=True).numpy(), "NDC1HWC0", ("/GlobalAveragePool", 0))
    flat = e.transdata("trans_TransData_2", gap, "NCDHW")
    flat2 = Val(flat.ref, flat.array.reshape(1, 24), flat.dtype, "ND", flat.origin)  # Flatten: removed by ATC
    wv, bv = e.const("fc.weight", p["fc.weight"]), e.const("fc.bias", p["fc.bias"])
    fc = e.one("MatMulV2", "/fc/Gemm", ["/fc/Gemm"], [flat2, wv, bv], (th(flat2) @ th(wv).T + th(bv)).numpy(),
               "FRACTAL_NZ", ("/fc/Gemm", 0), attrs={"transpose_x2": True})
    e.cast("trans_Cast_4", e.transdata("trans_TransData_3", fc, "ND"), "float32")
    return e


def npu_lstm(p: dict, inputs: dict, dtype: str, bug: str) -> Emu:
    import torch
    e = Emu(dtype)
    xs = [e.cast(f"trans_Cast_{t}", e.data(f"x{t}", inputs[f"x{t}"]), dtype) for t in range(3)]
    wx = e.const("wx.weight", p["wx.weight"])
    bx = e.const("wx.bias", p["wx.bias"])
    wh_w = p["wh.weight"].copy()
    if bug == "perturb":
        wh_w[40] *= 1.05  # one output row (a forget-gate unit) of the recurrent weight
    wh = e.const("wh.weight", wh_w)
    h = e.const("/wh/Constant", np.zeros((4, 24), np.float32))
    c = e.const("/Constant_1", np.zeros((4, 24), np.float32))
    suffix = ["", "_1", "_2"]
    sig, tanh, mul, add = torch.sigmoid, torch.tanh, torch.mul, torch.add
    n_sig = n_tanh = n_mul = 0
    for t in range(3):
        s = suffix[t]
        gx_in = [xs[t], wx] + ([] if bug == "nobias" else [bx])
        gx_out = th(xs[t]) @ th(wx).T + (0 if bug == "nobias" else th(bx))
        gx = e.one("MatMulV2", f"/wx{s}/Gemm", [f"/wx{s}/Gemm"], gx_in, gx_out.numpy(), "ND", (f"/wx{s}/Gemm", 0),
                   attrs={"transpose_x2": True})
        gh = e.one("MatMulV2", f"/wh{s}/MatMul", [f"/wh{s}/MatMul"], [h, wh], (th(h) @ th(wh).T).numpy(), "ND",
                   (f"/wh{s}/MatMul", 0), attrs={"transpose_x2": True})
        add_name = f"/Add_{2 * t}" if t else "/Add"
        g = e.one("Add", add_name, [add_name], [gx, gh], (th(gx) + th(gh)).numpy(), "ND", (add_name, 0))
        split = f"/Split_{t}" if t else "/Split"
        order = [0, 2, 1, 3] if bug == "splitswap" and t == 1 else [0, 1, 2, 3]  # f and g gates swapped
        parts = e.op("SplitD", split, [split], [g],
                     [(g.array[:, 24 * j:24 * (j + 1)], "ND", (split, k)) for k, j in enumerate(order)],
                     attrs={"split_dim": 1, "num_split": 4})

        def un(fn, kind, idx, v):
            name = f"/{kind}_{idx}" if idx else f"/{kind}"
            return e.one(kind, name, [name], [v], fn(th(v)).numpy(), "ND", (name, 0))

        def bi(fn, kind, idx, a, b):
            name = f"/{kind}_{idx}" if idx else f"/{kind}"
            return e.one(kind, name, [name], [a, b], fn(th(a), th(b)).numpy(), "ND", (name, 0))

        f_gate = un(sig, "Sigmoid", n_sig, parts[1])
        fc = bi(mul, "Mul", n_mul, f_gate, c)
        i_gate = un(sig, "Sigmoid", n_sig + 1, parts[0])
        g_gate = un(tanh, "Tanh", n_tanh, parts[2])
        ig = bi(mul, "Mul", n_mul + 1, i_gate, g_gate)
        c = bi(add, "Add", 2 * t + 1, fc, ig)
        o_gate = un(sig, "Sigmoid", n_sig + 2, parts[3])
        tc = un(tanh, "Tanh", n_tanh + 1, c)
        h = bi(mul, "Mul", n_mul + 2, o_gate, tc)
        n_sig, n_tanh, n_mul = n_sig + 3, n_tanh + 2, n_mul + 3
    w, b = e.const("head.weight", p["head.weight"]), e.const("head.bias", p["head.bias"])
    out = e.one("MatMulV2", "/head/Gemm", ["/head/Gemm"], [h, w, b], (th(h) @ th(w).T + th(b)).numpy(),
                "FRACTAL_NZ", ("/head/Gemm", 0), attrs={"transpose_x2": True})
    e.cast("trans_Cast_3", e.transdata("trans_TransData_4", out, "ND"), "float32")
    return e


PROGRAMS = {"enc": npu_enc, "mbn": npu_mbn, "lstm": npu_lstm, "c3d": npu_c3d, "enc4": npu_enc4, "mbn6": npu_mbn6}
MODEL_NAMES = {"enc": "encoder_block", "mbn": "mobilenet_tiny", "lstm": "lstm_unrolled", "c3d": "video_conv3d",
               "enc4": "encoder_stack", "mbn6": "mobilenet_deep"}

# case -> (model, dtype, bug, layout, overflow, description)
CASES = {
    "enc_fp16_clean": ("enc", "float16", "", "ge", False, "no bug"),
    "enc_bf16_clean": ("enc", "bfloat16", "", "ge", False, "no bug"),
    "enc_fp16_scale": ("enc", "float16", "scale", "ge", False,
                       "attention scale Muls uses 1/sqrt(32) (the model width) instead of 1/sqrt(16) (a head)"),
    "enc_fp16_perturb": ("enc", "float16", "perturb", "ge", False, "v weight: output column 5 scaled x1.05"),
    "enc_bf16_perturb": ("enc", "bfloat16", "perturb_bf", "ge", False, "v weight: output column 5 scaled x1.15"),
    "enc_bf16_nobias": ("enc", "bfloat16", "nobias", "ge", False, "fc1's MatMulV2 runs without its bias"),
    "enc_fp16_wtrans": ("enc", "float16", "wtrans", "ge", False, "o's square weight transposed in its FRACTAL_NZ"),
    "enc_mix_clean": ("enc", "float16", "mix", "ge", False,
                      "fp16 with LayerNorm and Softmax in fp32 between Casts (a mixed-precision graph), no bug"),
    "enc_mix_scale": ("enc", "float16", "mix+scale", "ge", False,
                      "the mixed-precision graph with the attention scale 1/sqrt(32) for 1/sqrt(16)"),
    "enc4_fp16_clean": ("enc4", "float16", "", "ge", False, "4 encoder blocks (/layers.N/...), no bug"),
    "enc4_bf16_clean": ("enc4", "bfloat16", "", "ge", False, "4 encoder blocks, no bug"),
    "enc4_fp16_scale": ("enc4", "float16", "scale", "ge", False, "block 2's attention scale 1/sqrt(32)"),
    "enc4_bf16_perturb": ("enc4", "bfloat16", "perturb_bf", "ge", False,
                          "block 2's v weight: output column 5 scaled x1.15"),
    "enc4_fp16_nobias": ("enc4", "float16", "nobias", "ge", False, "block 2's fc1 runs without its bias"),
    "mbn_fp16_clean": ("mbn", "float16", "", "ge", False, "no bug"),
    "mbn_bf16_clean": ("mbn", "bfloat16", "", "ge", False, "no bug"),
    "mbn_fp16_mislaid": ("mbn", "float16", "mislaid", "ge", False,
                         "depthwise weight laid out with H and W swapped in its grouped FRACTAL_Z"),
    "mbn_fp16_perturb": ("mbn", "float16", "perturb", "ge", False,
                         "expand conv (BN folded): output channel 7 scaled x1.05"),
    "mbn_bf16_perturb": ("mbn", "bfloat16", "perturb_bf", "ge", False,
                         "expand conv (BN folded): output channel 7 scaled x1.15"),
    "mbn_fp16_overflow": ("mbn", "float16", "", "ge", True,
                          "project BN channel 3: gamma x1.5e5, beta 6e4 in the model: fp16 overflow, "
                          "Opdebug old layout"),
    "mbn6_fp16_clean": ("mbn6", "float16", "", "ge", False, "six inverted residual blocks (/blocks/blocks.N/), no bug"),
    "mbn6_bf16_clean": ("mbn6", "bfloat16", "", "ge", False, "six inverted residual blocks, no bug"),
    "mbn6_fp16_perturb": ("mbn6", "float16", "perturb", "ge", False,
                          "block 4's expand conv: output channel 7 scaled x1.05"),
    "mbn6_bf16_mislaid": ("mbn6", "bfloat16", "mislaid", "ge", False,
                          "block 3's depthwise weight laid out with H and W swapped"),
    "mbn_fp16_mislaid_stats": ("mbn", "float16", "mislaid", "stats", False,
                               "mbn_fp16_mislaid as a statistics-mode dump (one .csv per op)"),
    "c3d_fp16_clean": ("c3d", "float16", "", "ge", False, "no bug"),
    "c3d_bf16_clean": ("c3d", "bfloat16", "", "ge", False, "no bug"),
    "c3d_fp16_mislaid": ("c3d", "float16", "mislaid", "ge", False,
                         "conv2's 3-D weight laid out with D and H swapped in its FRACTAL_Z_3D"),
    "c3d_bf16_nobias": ("c3d", "bfloat16", "nobias", "ge", False, "conv2 runs without its folded BN bias"),
    "lstm_fp16_clean": ("lstm", "float16", "", "ms", False, "no bug (MindSpore async layout)"),
    "lstm_bf16_clean": ("lstm", "bfloat16", "", "ge", False, "no bug"),
    "lstm_fp16_perturb": ("lstm", "float16", "perturb", "ge", False,
                          "recurrent weight wh: row 40 scaled x1.05 (step 0 multiplies h0 = 0: first seen at step 1)"),
    "lstm_bf16_nobias": ("lstm", "bfloat16", "nobias", "ge", False, "the x projection runs without its bias"),
    "lstm_fp16_splitswap": ("lstm", "float16", "splitswap", "ge", False,
                            "step 1's SplitD writes the forget and cell gates to each other's outputs (1 and 2)"),
    "lstm_fp16_overflow": ("lstm", "float16", "", "ms", True,
                           "wx row 30 x1e5 in the model: fp16 overflow in /wx/Gemm (gone after the gates), "
                           "MindSpore async layout, Opdebug new layout"),
}


# --- the GE graph -------------------------------------------------------------------------------------------

def _a_s(key, value):
    return {"key": key, "value": {"s": value}}


def _a_list_i(key, values):
    return {"key": key, "value": {"list": {"i": [int(v) for v in values], "val_type": "VT_LIST_INT"}}}


def _desc(v: Val, with_origin: bool) -> dict:
    origin_fmt = {4: "NCHW", 5: "NCDHW"}.get(v.array.ndim, "ND")
    attrs = [_a_s("origin_format", origin_fmt), _a_list_i("origin_shape", v.array.shape),
             _a_s("origin_data_type", "DT_FLOAT")]
    if with_origin and v.origin is not None:
        attrs += [_a_s("_datadump_origin_name", v.origin[0]),
                  {"key": "_datadump_origin_output_index", "value": {"i": v.origin[1]}},
                  _a_s("_datadump_origin_format", origin_fmt), _a_s("_datadump_origin_data_type", "DT_FLOAT")]
    device = to_device(np.zeros(v.array.shape, np.float16), v.fmt, v.groups)
    return {"attr": attrs, "device_type": "NPU", "dtype": GE_DT[v.dtype], "layout": v.fmt,
            "real_dim_cnt": v.array.ndim, "shape": {"dim": list(device.shape)}}


def fusion_rule(e: Emu, model: str) -> dict:
    producers = {v.ref: v.ref for v in (*e.datas, *e.consts)}
    for op in e.ops:
        for v in op.outputs:
            producers[v.ref] = v.ref
    ops = []
    for v in e.datas:
        ops.append({"name": v.ref[:-2], "type": "Data", "input": [""],
                    "attr": [_a_s("_ge_attr_op_kernel_lib_name", "DNN_VM_GE_LOCAL_OP_STORE")],
                    "output_desc": [_desc(v, False)], "output_i": [0]})
    seq = 1
    for v in e.consts:
        ops.append({"name": v.ref[:-2], "type": "Const", "id": seq,
                    "attr": [_a_s("_ge_attr_op_kernel_lib_name", "DNN_VM_GE_LOCAL_OP_STORE")],
                    "output_desc": [_desc(v, False)], "output_i": [0]})
        seq += 1
    for op in e.ops:
        inputs = [v.ref for v in op.inputs]
        attrs = [{"key": "_datadump_original_op_names",
                  "value": {"list": {"val_type": "VT_LIST_STRING", **({"s": op.originals} if op.originals else {})}}},
                 _a_s("_ge_attr_op_kernel_lib_name", "AIcoreEngine")]
        for key, value in op.attrs.items():
            if isinstance(value, str):
                attrs.append(_a_s(key, value))
            elif isinstance(value, bool):
                attrs.append({"key": key, "value": {"b": value}})
            elif isinstance(value, int):
                attrs.append({"key": key, "value": {"i": value}})
            else:
                attrs.append({"key": key, "value": {"f": float(value)}})
        ops.append({"name": op.name, "type": op.type, "id": seq, "input": inputs, "attr": attrs,
                    "input_desc": [_desc(v, False) for v in op.inputs],
                    "output_desc": [_desc(v, True) for v in op.outputs],
                    "src_name": [i.rpartition(":")[0] for i in inputs],
                    "src_index": [int(i.rpartition(":")[2]) for i in inputs]})
        seq += 1
    last = e.ops[-1]
    ops.append({"name": "Node_Output", "type": "NetOutput", "id": seq, "input": [last.outputs[0].ref],
                "input_desc": [_desc(last.outputs[0], False)]})
    return {"attr": [_a_s("framework_type", "Onnx")],
            "graph": [{"name": model, "input": [f"{v.ref}" for v in e.datas], "op": ops}], "name": model}


# --- writing a case -----------------------------------------------------------------------------------------

def opdebug_old(task_id: int, stream_id: int, status: int) -> bytes:
    """2048 bytes, old layout: DHA / L2 Atomic Add blocks empty, AI Core info at 256, its status at 1040."""
    raw = bytearray(2048)
    struct.pack_into("<6Q", raw, 256, 1, stream_id, task_id, 0, 0x1240_8000_0000, 0x12C0_4000_1000)
    struct.pack_into("<3Q", raw, 1024, 0x1240_8000_0000, 0, status)
    return bytes(raw)


def metrics(npu: np.ndarray, gold: np.ndarray) -> dict:
    a = npu.astype(np.float64).ravel()
    b = gold.astype(np.float64).ravel()
    with np.errstate(all="ignore"):
        cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) if a.size == b.size else None
        rel = float(np.linalg.norm(a - b) / np.linalg.norm(b)) if a.size == b.size and np.linalg.norm(b) else None
        mx = float(np.max(np.abs(a - b))) if a.size == b.size else None
    return {"cos": cos, "rel_l2": rel, "max_abs": mx}


def same(a: Val, b: Val) -> bool:
    return a.array.shape == b.array.shape and raw_bytes(a.array, a.dtype) == raw_bytes(b.array, b.dtype)


def write_case(root: Path, name: str) -> dict:
    kind, dtype, bug, layout, overflow, description = CASES[name]
    case = root / name
    if case.exists():
        shutil.rmtree(case)
    (case / "golden").mkdir(parents=True)
    (case / "fusion_rule").mkdir()
    model, inputs = make_model(kind, overflow)
    gold = export_and_golden(model, inputs, case / "model.onnx")
    p = params(model)
    e = PROGRAMS[kind](p, inputs, dtype, bug)
    lost = sorted({v.origin[0] for op in e.ops for v in op.outputs if v.origin and v.origin not in gold})
    if lost:
        raise SystemExit(f"{name}: NPU outputs stand for tensors the ONNX model does not have: {lost}")
    clean = PROGRAMS[kind](p, inputs, dtype, "mix" if variant(bug)[0] else "")
    for k, ((op_name, index), array) in enumerate(gold.items()):
        np.save(case / "golden" / f"{key(op_name)}.{index}.{T_GOLDEN + 13 * k}.npy", array)
    rule_name = MODEL_NAMES[kind]
    rule = json.dumps(fusion_rule(e, rule_name), separators=(",", ":"))
    (case / "fusion_rule" / f"{rule_name}.json").write_text(rule)
    if layout == "ms":  # MindSpore asynchronous dump: {device}/{net}_graph_{id}/{id}/{iteration}, no stream id
        folder, stream = case / "npu_dump" / "0" / f"{rule_name}_graph_0" / "0" / "0", None
    else:  # GE: {time}/{device}/{model}/{model_id}/{iteration}
        folder, stream = case / "npu_dump" / "20250307093000" / "0" / rule_name / "1" / "0", 0
    folder.mkdir(parents=True)
    per_op, first_diff, first_nonfinite = [], None, None
    files = {}
    for k, (op, op_clean) in enumerate(zip(e.ops, clean.ops)):
        task, ts = k + 2, T_DUMP + 41 * (k + 1)
        fname = mlp.file_name(op.type, op.name, task, stream, ts) + (".csv" if layout == "stats" else "")
        files[op.name] = (fname, task, ts)
        ins = [v.dump(0x1000 + 0x100 * i) for i, v in enumerate(op.inputs)]
        outs = [v.dump(0x8000 + 0x100 * i) for i, v in enumerate(op.outputs)]
        if layout == "stats":
            arrays = ([v.array for v in op.inputs], [v.array for v in op.outputs])
            (folder / fname).write_text(mlp.stats_csv(ins, outs, arrays))
        else:
            mlp.write_dump(folder / fname, op.name, ts, ins, outs)
        identical = all(same(a, b) for a, b in zip(op.outputs, op_clean.outputs))
        nonfinite = int(sum((~np.isfinite(v.array)).sum() for v in op.outputs))
        if not identical and first_diff is None:
            first_diff = op
        if nonfinite and first_nonfinite is None:
            first_nonfinite = op
        row = {"op": op.name, "type": op.type, "exec_index": k, "task_id": task, "stream_id": stream, "file": fname,
               "originals": op.originals, "bit_identical_to_clean": identical, "nonfinite": nonfinite}
        for j, v in enumerate(op.outputs):
            g = gold.get(v.origin) if v.origin else None
            if g is not None and g.size == v.array.size:
                m = metrics(v.array, g)
                mc = metrics(op_clean.outputs[j].array, g)
                row.setdefault("outputs", []).append({"index": j, "origin": list(v.origin), **m,
                                                      "clean_cos": mc["cos"], "clean_rel_l2": mc["rel_l2"]})
        per_op.append(row)
    truth_op = first_nonfinite if overflow else first_diff
    opdebug = None
    if overflow:
        assert truth_op is not None, f"{name}: no fp16 overflow"
        fname, task, ts = files[truth_op.name]
        status = 0x20
        raw = opdebug_old(task, 0, status) if kind == "mbn" else mlp.opdebug_new(task, 0, status)
        debug = mlp.tensor(np.frombuffer(raw, np.uint8), "uint8")
        opdebug = mlp.file_name("Opdebug", "Node_OpDebug", 1, 0, ts + 7)
        mlp.write_dump(folder / opdebug, "Node_OpDebug", ts + 7, [], [debug])
    if variant(bug)[1]:
        assert truth_op is not None, f"{name}: the bug changes nothing"
    bug = bug if variant(bug)[1] else ""
    truth = {"divergent": truth_op is not None, "first_divergent_npu_op": truth_op.name if truth_op else None}
    if truth_op is not None:
        fname, task, ts = files[truth_op.name]
        truth.update({"op_type": truth_op.type, "original_onnx_ops": truth_op.originals,
                      "origin_output": list(truth_op.outputs[0].origin), "task_id": task, "stream_id": stream,
                      "dump_file": fname, "overflow": overflow})
    clean_rows = [o for r in per_op if r["bit_identical_to_clean"] for o in r.get("outputs", [])
                  if o["cos"] is not None and math.isfinite(o["cos"])]
    record = {
        "case": name, "model": rule_name, "onnx": "model.onnx", "npu_dtype": dtype, "layout": layout,
        "description": description,
        "bug": {"kind": bug, "op": truth_op.name} if bug else None,
        "overflow": {"op": truth_op.name, "status": 0x20, "opdebug_file": opdebug,
                     "opdebug_layout": "old" if kind == "mbn" else "new (0x5A5A5A5A)",
                     "golden_max_abs": float(max(np.abs(g).max() for g in gold.values()))} if overflow else None,
        "dump_dir": str(folder.relative_to(case)), "golden_dir": "golden",
        "fusion_rule": f"fusion_rule/{rule_name}.json",
        "n_dump_files": len(e.ops) + (1 if overflow else 0), "n_golden_files": len(gold),
        "first_op_differing_from_clean_run": first_diff.name if first_diff else None,
        "truth": truth,
        "truth_ids": [truth_op.name] if truth_op else [],
        "noise_clean_ops": {"min_cos": min((o["cos"] for o in clean_rows), default=None),
                            "max_rel_l2": max((o["rel_l2"] for o in clean_rows if o["rel_l2"] is not None),
                                              default=None)},
        "per_op": per_op,
    }
    (case / "TRUTH.json").write_text(json.dumps(record, indent=1))
    return record


SMALL = ("enc_fp16_clean", "enc_mix_clean", "enc_bf16_nobias", "enc_fp16_wtrans",
         "mbn_fp16_clean", "mbn_fp16_mislaid", "mbn_fp16_perturb", "mbn_bf16_perturb", "mbn_fp16_overflow",
         "mbn_fp16_mislaid_stats", "c3d_fp16_mislaid", "c3d_bf16_nobias",
         "lstm_fp16_clean", "lstm_fp16_perturb", "lstm_fp16_splitswap", "lstm_fp16_overflow")
"""The cases copied into tests/data/cases29 (`--copy-small`)."""


def copy_small(root: Path, dest: Path) -> None:
    """Copy the `SMALL` cases into `dest` without their ONNX model, each model's golden folder once
    (``_golden/<model>``; the overflow models' own), the TRUTH without its per-op table (the truth op's row kept)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in SMALL:
        t = json.loads((root / name / "TRUTH.json").read_text())
        shared = f"_golden/{name.split('_')[0]}" + ("_overflow" if t["overflow"] else "")
        if not (root / name / "npu_dump").exists():
            raise SystemExit(f"{root / name}: no such case; make the cases first")
        if not (dest / shared).exists():
            shutil.copytree(root / name / t["golden_dir"], dest / shared)
        shutil.copytree(root / name / "npu_dump", dest / name / "npu_dump")
        shutil.copytree(root / name / "fusion_rule", dest / name / "fusion_rule")
        op = t["truth"]["first_divergent_npu_op"]
        t["per_op"] = [r for r in t["per_op"] if r["op"] == op]
        t["golden_dir"] = f"../{shared}"
        t["onnx"] = None
        (dest / name / "TRUTH.json").write_text(json.dumps(t, separators=(",", ":")))


def key(name: str) -> str:
    return name.replace("/", "_").replace(".", "_").replace("\\", "_").replace(" ", "_")


def verify_shared(folder: Path) -> int:
    """Emulate the shared clean CNN (``B_cnn_clean``: its ONNX model's weights, its golden input) with this file's
    machinery and compare every dumped tensor with the shared dump, bit for bit. Prints the mismatches; returns
    their number."""
    import onnx
    import torch.nn.functional as F
    from onnx import numpy_helper

    from graphcmp.core.readers.ascend_file import read_dump_tensor, read_header  # the repo is on the path (mlp)
    graph = onnx.load(str(folder / "model.onnx")).graph
    init = {i.name: numpy_helper.to_array(i).astype(np.float32) for i in graph.initializer}
    x0 = np.load(next((folder / "golden").glob("input.0.*.npy")))
    e = Emu("float16")
    x = e.transdata("trans_TransData_1", e.cast("trans_Cast_0", e.data("input", x0), "float16"), "NC1HWC0")

    def conv(cname, bname, v, act, stride=1):
        w = init[f"{cname}.weight"]
        s = init[f"{bname}.weight"] / np.sqrt(init[f"{bname}.running_var"] + np.float32(1e-5))
        wv = e.const("w", (w * s[:, None, None, None]).astype(np.float32), "FRACTAL_Z")
        bv = e.const("b", init[f"{bname}.bias"] - init[f"{bname}.running_mean"] * s)
        out = F.conv2d(th(v), th(wv), th(bv), stride, 1)
        return e.one("Conv2D", cname, [], [v, wv, bv], (out.relu() if act else out).numpy(), "NC1HWC0", None)

    y = conv("conv1", "bn1", x, True)
    y = e.one("MaxPoolV3", "maxpool", [], [y], F.max_pool2d(th(y), 2).numpy(), "NC1HWC0", None)
    z = conv("layer1.conv2", "layer1.bn2", conv("layer1.conv1", "layer1.bn1", y, True), False)
    a = e.one("Add", "add", [], [y, z], (th(y) + th(z)).numpy(), "NC1HWC0", None)
    r = e.one("Relu", "relu2", [], [a], th(a).relu().numpy(), "NC1HWC0", None)
    c4 = conv("conv4", "bn4", r, True, 2)
    gap = e.one("ReduceMeanD", "gap", [], [c4], th(c4).mean((2, 3), keepdim=True).numpy(), "NC1HWC0", None)
    flat = e.transdata("trans_TransData_2", gap, "NCHW")
    flat2 = Val(flat.ref, flat.array.reshape(1, -1), flat.dtype, "ND", None)
    wv, bv = e.const("fc.weight", init["fc.weight"]), e.const("fc.bias", init["fc.bias"])
    fc = e.one("MatMulV2", "fc", [], [flat2, wv, bv], (th(flat2) @ th(wv).T + th(bv)).numpy(), "FRACTAL_NZ", None)
    e.cast("trans_Cast_4", e.transdata("trans_TransData_3", fc, "ND"), "float32")
    dumps = sorted((p for p in next((folder / "npu_dump").glob("*/*/*/*/*")).iterdir()),
                   key=lambda p: int(p.name.split(".")[-3]))
    bad = 0
    for op, path in zip(e.ops, dumps):
        descs = read_header(path).tensors
        for role, vals in (("input", op.inputs), ("output", op.outputs)):
            for k, v in enumerate(vals):
                theirs = np.asarray(read_dump_tensor(path, role, k), np.float32).reshape(v.array.shape)
                if raw_bytes(theirs, v.dtype) != raw_bytes(v.array, v.dtype):
                    bad += 1
                    print(f"{path.name} {role}.{k}: max diff {np.abs(theirs - v.array).max()}")
        assert len(descs) == len(op.inputs) + len(op.outputs), path.name
    print(f"{len(dumps)} dump files, {len(e.ops)} ops emulated, {bad} tensors differ")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="/work/cases29")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--copy-small", metavar="DEST", help="only copy the small cases of --root into DEST")
    ap.add_argument("--verify-shared", metavar="CASE", help="only emulate the shared clean CNN case (its folder) and "
                    "compare every tensor with its dump, bit for bit")
    a = ap.parse_args()
    if a.verify_shared:
        import torch
        torch.set_num_threads(1)
        return 1 if verify_shared(Path(a.verify_shared)) else 0
    if a.copy_small:
        copy_small(Path(a.root), Path(a.copy_small))
        return 0
    import torch
    torch.set_num_threads(1)
    root = Path(a.root)
    root.mkdir(parents=True, exist_ok=True)
    for name in CASES:
        if a.only and name not in a.only:
            continue
        r = write_case(root, name)
        t = r["truth"]
        print(f"{name:20} {r['npu_dtype']:9} {r['layout']:3} truth={t['first_divergent_npu_op']} "
              f"ops={r['n_dump_files']} min_clean_cos={r['noise_clean_ops']['min_cos']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
