"""Writes the small Ascend raw dump cases of tests/data/ascend_mlp (run from anywhere; deterministic).

A 2-layer MLP with a softmax and a bfloat16 scale, run "on the NPU" in numpy: fp16 (and bf16) inputs and weights,
float32 accumulation, outputs rounded to the op's dtype (overflow -> inf), written as raw dump files by the writer
below (8-byte header length, DumpData header, raw bytes); its golden outputs are the same model in float32, written
as ``{op_name}.{output_index}.{timestamp}.npy``; the GE graph is written in ``atc --json`` form. Cases:

* ``clean``: GE folder layout, one file in the older whole-protobuf layout, an input the writer skipped (address 0);
* ``bug``: ``mlp/fc2/MatMul`` uses a weight with one column scaled by 1.5 (the first divergence);
* ``overflow``: MindSpore asynchronous layout (no stream ids), fc2's weight column scaled by 1e5 in the model itself
  (the golden stays finite), fp16 overflows in fc2, an Opdebug file in the newer layout (magic 0x5A5A5A5A) flags it;
* ``stats``: the clean run as a statistics-mode dump (one ``.csv`` per op).

The writer is checked against the shared CNN dumps in tests/core/readers/test_ascend_dump.py (byte for byte).
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from graphcmp.core.readers.proto_gen import dump_data_pb2  # noqa: E402

DT = {"float32": 1, "float16": 2, "int32": 7, "int64": 8, "bfloat16": 27, "uint8": 4}
FMT = {"NCHW": 0, "ND": 2, "FRACTAL_NZ": 29}
T0 = 1741200000000000


# --- the writer -----------------------------------------------------------------------------------------

def bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 -> bfloat16 bit patterns (uint16)."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype(np.uint16)


def bf16_value(x: np.ndarray) -> np.ndarray:
    return (bf16_bits(x).astype(np.uint32) << 16).view(np.float32)


def fractal_nz(x: np.ndarray) -> np.ndarray:
    """(..., H, W) -> (..., W1, H1, 16, 16) device layout, padded with zeros (the forward map, C0 = 16)."""
    *batch, h, w = x.shape
    h1, w1 = -(-h // 16), -(-w // 16)
    padded = np.zeros((*batch, h1 * 16, w1 * 16), x.dtype)
    padded[..., :h, :w] = x
    nb = len(batch)
    out = padded.reshape(*batch, h1, 16, w1, 16)
    return out.transpose(*range(nb), nb + 2, nb, nb + 1, nb + 3).copy()


def nc1hwc0(x: np.ndarray, c0: int = 16) -> np.ndarray:
    """(N, C, H, W) -> (N, C1, H, W, C0), C padded with zeros (the forward map; C0 = 4 is the C04 format of a first
    conv's few channels)."""
    n, c, h, w = x.shape
    c1 = -(-c // c0)
    padded = np.zeros((n, c1 * c0, h, w), x.dtype)
    padded[:, :c] = x
    return padded.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2).copy()


def tensor(array: np.ndarray, dtype: str, fmt: str = "ND", original_shape=None, origin=None, address=0x1000):
    """A tensor to write: host array, its dump dtype, its device format (the device bytes are made here)."""
    if dtype == "bfloat16":
        raw = bf16_bits(array).tobytes()
        device_shape = array.shape
    elif fmt == "FRACTAL_NZ":
        device = fractal_nz(array.astype(dtype))
        raw, device_shape = device.tobytes(), device.shape
    else:
        raw, device_shape = array.astype(dtype).tobytes(), array.shape
    return {"raw": raw, "dtype": DT[dtype], "format": FMT[fmt], "shape": list(device_shape),
            "original_shape": list(original_shape if original_shape is not None else array.shape),
            "origin": origin, "address": address}


def _fill(desc, t, with_data: bool) -> None:
    desc.data_type = t["dtype"]
    desc.format = t["format"]
    desc.shape.dim.extend(t["shape"])
    desc.original_shape.dim.extend(t["original_shape"])
    desc.size = len(t["raw"])
    desc.address = t["address"]
    if t.get("sub_format"):  # the group count of a group convolution's FRACTAL_Z weight
        desc.sub_format = t["sub_format"]
    if with_data:
        desc.data = t["raw"]


def header(op_name: str, dump_time: int, inputs, outputs, *, inline: bool = False,
           attr: str = "", buffers=(), workspaces=()) -> dump_data_pb2.DumpData:
    message = dump_data_pb2.DumpData(version="2.0", dump_time=dump_time, op_name=op_name)
    if attr:  # an FFTS+ op's thread slice map, JSON
        message.attr.add(name="_sgt_json_info", value=attr)
    for raw in buffers:  # an op's L1 buffer (BufferType L1 = 0)
        message.buffer.add(buffer_type=0, size=len(raw), data=raw if inline else b"")
    for raw in workspaces:  # its workspace (SpaceType LOG = 0)
        message.space.add(type=0, size=len(raw), data=raw if inline else b"")
    for t in inputs:
        _fill(message.input.add(), t, inline)
    for t in outputs:
        out = message.output.add()
        _fill(out, t, inline)
        if t["origin"]:
            out.original_op.name, out.original_op.output_index = t["origin"]
            out.original_op.data_type = DT["float32"]
            out.original_op.format = FMT["ND"]
    return message


def write_dump(path: Path, op_name: str, dump_time: int, inputs, outputs, *, inline: bool = False,
               attr: str = "", buffers=(), workspaces=()) -> None:
    """One raw dump file: ``uint64 LE length | DumpData | inputs | outputs | buffers | workspaces`` (or, `inline`,
    one whole DumpData); a tensor with address 0 is declared but its bytes are not written, as the device writer
    does. `attr`: the JSON of an FFTS+ op's thread slices (its header's first attribute). `buffers`, `workspaces`:
    the raw bytes of the op's L1 buffers and workspaces, written after the outputs in that order (the device
    writer's ``ProcessOpBufferDump`` then ``ProcessOpWorkspaceDump``)."""
    message = header(op_name, dump_time, inputs, outputs, inline=inline, attr=attr, buffers=buffers,
                     workspaces=workspaces)
    body = message.SerializeToString()
    if inline:
        path.write_bytes(body)
        return
    data = b"".join(t["raw"] for t in (*inputs, *outputs) if t["address"]) + b"".join(buffers) + b"".join(workspaces)
    path.write_bytes(struct.pack("<Q", len(body)) + body + data)


def opdebug_new(task_id: int, stream_id: int, status: int) -> bytes:
    """2048 bytes of overflow information, newer layout: AIC fields (version 0, one status word)."""
    fields = (0, stream_id, task_id, 0, 0, 0, 0x1240_8000_0000, 0x12C0_4000_1000, 3, 0, status)
    raw = struct.pack("<6I", 0x5A5A5A5A, 0, 1, 0, 0, 8 * len(fields)) + struct.pack(f"<{len(fields)}Q", *fields)
    return raw + bytes(2048 - len(raw))


def stats_csv(inputs, outputs, arrays) -> str:
    lines = ["Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,Count,Nan Count,"
             "Negative Inf Count,Positive Inf Count"]
    names = {1: "DT_FLOAT", 2: "DT_FLOAT16", 7: "DT_INT32", 27: "DT_BF16"}
    for role, items, values in (("Input", inputs, arrays[0]), ("Output", outputs, arrays[1])):
        for k, (t, a) in enumerate(zip(items, values)):
            if not t["address"]:
                continue
            v = np.asarray(a, np.float64)
            shape = "x".join(str(d) for d in t["original_shape"])
            lines.append(f"{role},{k},{len(t['raw'])},{names[t['dtype']]},ND,{shape},{v.max()},{v.min()},{v.mean()},"
                         f"{v.size},{int(np.isnan(v).sum())},{int(np.isneginf(v).sum())},{int(np.isposinf(v).sum())}")
    return "\n".join(lines) + "\n"


# --- the model ------------------------------------------------------------------------------------------

def weights(case: str):
    rng = np.random.default_rng(29)
    w1 = rng.standard_normal((16, 24)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(24).astype(np.float32) * 0.1
    w2 = rng.standard_normal((24, 16)).astype(np.float32) * 0.3
    b2 = rng.standard_normal(16).astype(np.float32) * 0.1
    x = rng.standard_normal((4, 16)).astype(np.float32)
    if case == "overflow":
        w2[:, 3] *= 1e5  # in the model itself: the golden run is finite, fp16 is not
    return x, w1, b1, w2, b2


def golden(x, w1, b1, w2, b2):
    """The float32 model: every original op's output."""
    mm1 = x @ w1
    add1 = mm1 + b1
    relu = np.maximum(add1, 0)
    mm2 = relu @ w2
    add2 = mm2 + b2
    e = np.exp(add2 - add2.max(axis=1, keepdims=True))
    soft = e / e.sum(axis=1, keepdims=True)
    scaled = soft * np.float32(2.5)
    return {"x": x, "mlp/fc1/MatMul": mm1, "mlp/fc1/BiasAdd": add1, "mlp/fc1/Relu": relu, "mlp/fc2/MatMul": mm2,
            "mlp/fc2/BiasAdd": add2, "mlp/ArgMax": add2.argmax(axis=1).astype(np.int32), "mlp/Softmax": soft,
            "mlp/scale/Mul": scaled}


def half(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(np.float16)


def npu_ops(case: str):
    """(op type, op name, inputs, outputs, arrays) in execution order, computed in fp16 / bf16."""
    x, w1, b1, w2, b2 = weights(case)
    w2_npu = w2.copy()
    if case == "bug":
        w2_npu[:, 5] *= 1.5
    xh = half(x)
    w1h, b1h, w2h, b2h = half(w1), half(b1), half(w2_npu), half(b2)
    fc1 = half(np.maximum(xh.astype(np.float32) @ w1h.astype(np.float32) + b1h.astype(np.float32), 0))
    with np.errstate(over="ignore", invalid="ignore"):
        fc2 = half(fc1.astype(np.float32) @ w2h.astype(np.float32) + b2h.astype(np.float32))
        f = fc2.astype(np.float32)
        e = np.exp(f - f.max(axis=1, keepdims=True))
        soft = half(e / e.sum(axis=1, keepdims=True))
    soft_bf = bf16_value(soft.astype(np.float32))
    scaled = bf16_value(soft_bf * np.float32(2.5))
    arg = np.nan_to_num(fc2.astype(np.float32), nan=-np.inf).argmax(axis=1).astype(np.int32)
    axis = np.array([1], np.int32)
    ops = [
        ("Cast", "trans_Cast_0", [tensor(x, "float32")], [tensor(xh, "float16", origin=("x", 0))],
         ([x], [xh])),
        ("MatMulV2", "mlp/fc1/MatMul", [tensor(xh, "float16"), tensor(w1h, "float16"), tensor(b1h, "float16")],
         [tensor(fc1, "float16", origin=("mlp/fc1/Relu", 0))], ([xh, w1h, b1h], [fc1])),
        ("MatMulV2", "mlp/fc2/MatMul", [tensor(fc1, "float16"), tensor(w2h, "float16"), tensor(b2h, "float16")],
         [tensor(fc2, "float16", "FRACTAL_NZ", origin=("mlp/fc2/BiasAdd", 0))], ([fc1, w2h, b2h], [fc2])),
        ("TransData", "trans_TransData_1", [tensor(fc2, "float16", "FRACTAL_NZ")],
         [tensor(fc2, "float16", origin=("mlp/fc2/BiasAdd", 0))], ([fc2], [fc2])),
        ("ArgMaxV2", "mlp/ArgMax", [tensor(fc2, "float16"), tensor(axis, "int32", address=0)],
         [tensor(arg, "int32", origin=("mlp/ArgMax", 0))], ([fc2, axis], [arg])),
        ("SoftmaxV2", "mlp/Softmax", [tensor(fc2, "float16")], [tensor(soft, "float16", origin=("mlp/Softmax", 0))],
         ([fc2], [soft])),
        ("Cast", "trans_Cast_2", [tensor(soft, "float16")], [tensor(soft_bf, "bfloat16", origin=("mlp/Softmax", 0))],
         ([soft], [soft_bf])),
        ("Mul", "mlp/scale/Mul", [tensor(soft_bf, "bfloat16")],
         [tensor(scaled, "bfloat16", origin=("mlp/scale/Mul", 0))], ([soft_bf], [scaled])),
        ("Cast", "trans_Cast_3", [tensor(scaled, "bfloat16")],
         [tensor(scaled, "float32", origin=("mlp/scale/Mul", 0))], ([scaled], [scaled])),
    ]
    return ops, golden(x, w1, b1, w2, b2)


# --- the GE graph ---------------------------------------------------------------------------------------

def fusion_rule() -> dict:
    def attr_s(key, value):
        return {"key": key, "value": {"s": value}}

    def names(*items):
        return {"key": "_datadump_original_op_names", "value": {"list": {"s": list(items)}}}

    def out(origin, index=0, dtype="DT_FLOAT16"):
        attrs = [attr_s("_datadump_origin_name", origin)]
        if index:
            attrs.append({"key": "_datadump_origin_output_index", "value": {"i": index}})
        return {"dtype": dtype, "attr": attrs}

    ops = [
        {"name": "x", "type": "Data", "output_desc": [{"dtype": "DT_FLOAT"}]},
        {"name": "trans_Cast_0", "type": "Cast", "id": 1, "input": ["x:0"], "output_desc": [out("x")]},
        {"name": "mlp/fc1/w", "type": "Const", "id": 2, "output_desc": [{"dtype": "DT_FLOAT16"}]},
        {"name": "mlp/fc1/b", "type": "Const", "id": 3, "output_desc": [{"dtype": "DT_FLOAT16"}]},
        {"name": "mlp/fc1/MatMul", "type": "MatMulV2", "id": 4, "input": ["trans_Cast_0:0", "mlp/fc1/w:0",
                                                                       "mlp/fc1/b:0"],
         "attr": [names("mlp/fc1/MatMul", "mlp/fc1/BiasAdd", "mlp/fc1/Relu")], "output_desc": [out("mlp/fc1/Relu")]},
        {"name": "mlp/fc2/w", "type": "Const", "id": 5, "output_desc": [{"dtype": "DT_FLOAT16"}]},
        {"name": "mlp/fc2/b", "type": "Const", "id": 6, "output_desc": [{"dtype": "DT_FLOAT16"}]},
        {"name": "mlp/fc2/MatMul", "type": "MatMulV2", "id": 7, "input": ["mlp/fc1/MatMul:0", "mlp/fc2/w:0",
                                                                       "mlp/fc2/b:0", "x:-1"],
         "attr": [names("mlp/fc2/MatMul", "mlp/fc2/BiasAdd")], "output_desc": [out("mlp/fc2/BiasAdd")]},
        {"name": "trans_TransData_1", "type": "TransData", "id": 8, "input": ["mlp/fc2/MatMul:0"],
         "output_desc": [out("mlp/fc2/BiasAdd")]},
        {"name": "mlp/axis", "type": "Const", "id": 9, "output_desc": [{"dtype": "DT_INT32"}]},
        {"name": "mlp/ArgMax", "type": "ArgMaxV2", "id": 10, "input": ["trans_TransData_1:0", "mlp/axis:0"],
         "output_desc": [out("mlp/ArgMax", dtype="DT_INT32")]},
        {"name": "mlp/Softmax", "type": "SoftmaxV2", "id": 11, "input": ["trans_TransData_1:0"],
         "output_desc": [out("mlp/Softmax")]},
        {"name": "trans_Cast_2", "type": "Cast", "id": 12, "input": ["mlp/Softmax:0"],
         "output_desc": [out("mlp/Softmax", dtype="DT_BF16")]},
        {"name": "mlp/scale/Mul", "type": "Mul", "id": 13, "input": ["trans_Cast_2:0"],
         "output_desc": [out("mlp/scale/Mul", dtype="DT_BF16")]},
        {"name": "trans_Cast_3", "type": "Cast", "id": 14, "input": ["mlp/scale/Mul:0"],
         "output_desc": [out("mlp/scale/Mul", dtype="DT_FLOAT")]},
        {"name": "out", "type": "NetOutput", "id": 15, "input": ["trans_Cast_3:0", "mlp/ArgMax:0"]},
    ]
    return {"name": "mlp", "graph": [{"name": "mlp", "op": ops}]}


def file_name(op_type: str, op_name: str, task: int, stream: int | None, ts: int) -> str:
    name = op_name.replace("/", "_").replace(".", "_").replace(" ", "_")
    return f"{op_type}.{name}.{task}." + (f"{stream}." if stream is not None else "") + str(ts)


def write_case(case: str, root: Path) -> None:
    ops, gold = npu_ops("overflow" if case == "overflow" else "bug" if case == "bug" else "clean")
    if root.exists():
        shutil.rmtree(root)
    if case == "overflow":  # MindSpore asynchronous dump: {device}/{net}_graph_{id}/{id}/{iteration}
        folder, stream = root / "npu_dump" / "0" / "mlp_graph_0" / "0" / "0", None
    else:  # GE: {time}/{device}/{model}/{model_id}/{iteration}
        folder, stream = root / "npu_dump" / "20250306101500" / "0" / "mlp" / "1" / "0", 0
    folder.mkdir(parents=True)
    for k, (op_type, op_name, inputs, outputs, arrays) in enumerate(ops):
        task, ts = k + 2, T0 + 40 * (k + 1)
        name = file_name(op_type, op_name, task, stream, ts)
        if case == "stats":
            (folder / f"{name}.csv").write_text(stats_csv(inputs, outputs, arrays))
        else:
            write_dump(folder / name, op_name, ts, inputs, outputs, inline=case == "clean" and k == 0)
        if case == "overflow" and op_name == "mlp/fc2/MatMul":
            debug = tensor(np.frombuffer(opdebug_new(task, 0, 0x20), np.uint8), "uint8")
            write_dump(folder / file_name("Opdebug", "Node_OpDebug", 1, 0, ts + 5), "Node_OpDebug", ts + 5, [],
                       [debug])
    gold_dir = root / "golden"
    gold_dir.mkdir()
    for k, (name, value) in enumerate(gold.items()):
        np.save(gold_dir / f"{name.replace('/', '_')}.0.{T0 - 10000 + 10 * k}.npy", value)
    (root / "fusion_rule").mkdir()
    (root / "fusion_rule" / "mlp.json").write_text(json.dumps(fusion_rule(), indent=1))


def main() -> None:
    for case in ("clean", "bug", "overflow", "stats"):
        write_case(case, HERE / case)


if __name__ == "__main__":
    main()
