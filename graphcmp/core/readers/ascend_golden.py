"""Golden data of an Ascend comparison: the framework's own outputs as ``{op_name}.{output_index}.{timestamp}.npy``.

TensorFlow, ONNX and Caffe golden dumps name each file after the original op (``/``, ``.`` and spaces as ``_``),
its output index and a timestamp; several files of one tensor (iterations) leave the latest. Read alone
(`read_golden`), a golden folder is a run of one node per original op, in timestamp order, with its outputs.

Against an NPU raw dump the golden tensors are laid out the way the NPU ran (`read_golden_for`): one node per
dumped op, with the same name, whose outputs are the golden tensors its outputs stand for and whose inputs those
its inputs stand for (`graphcmp.core.readers.ascend_fusion.FusionRule`; without a rule, the ``original_op``
each output's dump header names, and no inputs). A fused op is thus compared as msaccucmp compares it: its output
against the last original op's output, its inputs against what produced them. Both runs then match by name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import HierarchyBuilder, execution_keys
from graphcmp.core.inputs import regular_file
from graphcmp.core.readers.ascend_dump import (
    compiled_stats_pay,
    in_threads,
    read_ascend_dump,
    scoped_nodes,
    tensor_stats,
)
from graphcmp.core.readers.ascend_fusion import FusionRule, find_fusion_rule, read_fusion_rule
from graphcmp.core.records import Direction, DumpGraph, NodeKind, Role, RunInfo

__all__ = [
    "GOLDEN_NAME",
    "MODEL_INPUTS_ATTR",
    "GoldenFile",
    "golden_files",
    "golden_key",
    "golden_view",
    "read_golden",
    "read_golden_for",
    "read_npu_and_golden",
    "rule_names",
    "sniff",
]

MODEL_INPUTS_ATTR = "model_inputs"
"""Node attribute: the input slots of an op that stand for a ``Data`` op of the rule (the model's inputs), which
msaccucmp's advisor checks first (`graphcmp.core.divergence.advisor_findings`)."""

GOLDEN_NAME = re.compile(r"^(?P<name>[.A-Za-z0-9_-]+)\.(?P<index>\d+)\.(?P<ts>\d{1,255})\.npy$")
"""A golden file name (msaccucmp's numpy pattern, anchored)."""


@dataclass(frozen=True, slots=True)
class GoldenFile:
    """One golden tensor file: its name in the folder, the op name as written, output index and time."""

    file: str
    name: str
    index: int
    timestamp: int


def golden_key(name: str) -> str:
    """An op name as golden file names write it: ``/``, ``.``, ``\\`` and spaces become ``_``.

    >>> golden_key("/layer1/bn2/BatchNormalization")
    '_layer1_bn2_BatchNormalization'
    """
    return re.sub(r"[/.\\ ]", "_", name)


def sniff(path: str | os.PathLike[str]) -> bool:
    """True for a folder whose ``.npy`` files are all named as golden tensors (at least one)."""
    folder = Path(path)
    if not folder.is_dir():
        return False
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".npy")]
    except OSError:
        return False
    return bool(names) and all(GOLDEN_NAME.match(n) for n in names)


def golden_files(folder: str | os.PathLike[str]) -> dict[tuple[str, int], GoldenFile]:
    """(op name as written, output index) -> its latest golden file in `folder`.

    Raises
    ------
    DumpFormatError
        If the folder cannot be listed or holds no golden file.
    """
    try:
        names = sorted(os.listdir(folder))
    except OSError as err:
        raise DumpFormatError(f"{folder}: cannot list the golden folder ({err})") from err
    found: dict[tuple[str, int], GoldenFile] = {}
    for name in names:
        m = GOLDEN_NAME.match(name)
        if m is None:
            continue
        f = GoldenFile(name, m["name"], int(m["index"]), int(m["ts"]))
        key = (f.name, f.index)
        if key not in found or found[key].timestamp < f.timestamp:
            found[key] = f
    if not found:
        raise DumpFormatError(f"{folder}: no golden file ({{op_name}}.{{output_index}}.{{timestamp}}.npy)")
    return found


def read_golden(path: str | os.PathLike[str]) -> DumpGraph:
    """Read a golden folder alone: one node per original op (as file names write it), its outputs, in time order.

    Raises
    ------
    DumpFormatError
        If the folder holds no golden file or a file is not a readable ``.npy``.
    """
    files = golden_files(path)
    first: dict[str, int] = {}
    for f in files.values():
        first[f.name] = min(first.get(f.name, f.timestamp), f.timestamp)
    names = sorted(first, key=lambda n: (first[n], n))
    builder = HierarchyBuilder()
    for seq, name in enumerate(names):
        builder.add_node(name, NodeKind.API, "", Direction.NONE, None, seq)
    rows = [(f.name, Role.OUTPUT, f.index, f) for f in sorted(files.values(), key=lambda f: (f.name, f.index))]
    _add_tensors(builder, Path(path), rows)
    info = RunInfo(path=str(path), format="ascend_golden", framework="golden", task="tensor")
    return builder.build(info, group_apis=False)


def read_golden_for(path: str | os.PathLike[str], npu: DumpGraph, rule: FusionRule | None = None) -> DumpGraph:
    """The golden tensors of folder `path` laid out as the ops of `npu` (an NPU raw dump) ran; see the module notes.

    Raises
    ------
    DumpFormatError
        If the folder holds no golden file, a file is not a readable ``.npy``, or no dumped op has one.
    """
    files = golden_files(path)
    by_key = {(golden_key(name), index): f for (name, index), f in files.items()}
    keys = execution_keys(npu)
    rows_run = sorted((row for row in range(1, len(npu)) if npu.nodes.has_data[row]), key=lambda r: keys[r])
    ops = [npu.nodes.ids[row] for row in rows_run]  # in execution order: the twins' order is the npu run's
    types = {node_id: npu.nodes.op[npu.row(node_id)] for node_id in ops}
    attrs = {node_id: dict(npu.nodes.attrs[npu.row(node_id)]) for node_id in ops} if npu.nodes.attrs else {}
    counts = _tensor_counts(npu)
    shapes = _npu_shapes(npu)
    rows: list[tuple[str, Role, int, GoldenFile]] = []
    used_ops = []
    in_rule = {golden_key(name): name for name in rule.ops} if rule is not None else {}
    for op in ops:
        n_in, n_out = counts.get(op, (0, 0))
        name = op if rule is None or op in rule.ops else in_rule.get(op, op)  # a .csv dump names ops as files do
        wanted = [(Role.OUTPUT, k, _output_origin(name, k, rule, attrs.get(op, {}))) for k in range(n_out)]
        if rule is not None:
            wanted += [(Role.INPUT, k, rule.input_origin(name, k)) for k in range(n_in)]
        found = [(role, k, _golden_file(by_key, o)) for role, k, o in wanted if o is not None]
        found = [(role, k, f) for role, k, f in found if f is not None]
        if found:
            used_ops.append(op)
            rows.extend((op, role, k, f) for role, k, f in found)
    if not rows:
        where = f" through the fusion rule {rule.source}" if rule is not None else " (no --fusion-rule given)"
        raise DumpFormatError(f"{path}: no golden file stands for an output of the dumped ops{where}")
    builder = HierarchyBuilder()
    node_attrs = [_golden_attrs(in_rule.get(op, op), rule, counts.get(op, (0, 0))[0]) for op in used_ops]
    scoped_nodes(builder, used_ops, [types[op] for op in used_ops], node_attrs)
    _add_tensors(builder, Path(path), rows, shapes)
    info = RunInfo(path=str(path), format="ascend_golden", framework="golden", task="tensor")
    return builder.build(info, group_apis=False)


def _golden_file(by_key: Mapping[tuple[str, int], GoldenFile], origin: tuple[str, int]) -> GoldenFile | None:
    """The golden file of an original tensor; a model input may be named ``input_{name}`` (msquickcmp's ONNX flow)."""
    key = golden_key(origin[0])
    return by_key.get((key, origin[1])) or by_key.get((f"input_{key}", origin[1]))


def _npu_shapes(npu: DumpGraph) -> dict[tuple[str, int, str], str]:
    t = npu.tensors
    return {(npu.nodes.ids[node], role, slot): shape
            for node, role, slot, shape in zip(t.node.tolist(), t.role.tolist(), t.slot, t.shape)}


def _output_origin(op: str, k: int, rule: FusionRule | None, attrs: Mapping[str, str]) -> tuple[str, int] | None:
    if rule is not None and op in rule.ops:
        return rule.output_origin(op, k)
    text = attrs.get(f"origin_output.{k}", "")
    if not text:
        return None
    name, _, index = text.rpartition(":")
    return (name, int(index)) if index.isdigit() else (text, k)


def _golden_attrs(op: str, rule: FusionRule | None, n_in: int) -> tuple[tuple[str, str], ...]:
    """The op's original op names, its place in the rule (msaccucmp's ``Index``) and its model-input slots."""
    if rule is None or op not in rule.ops:
        return ()
    attrs = [("rule_index", str(rule.positions[op]))]
    names = rule.original_names(op)
    if names:
        attrs.append(("original_op_names", ",".join(names)))
    inputs = [str(k) for k in range(n_in) if (o := rule.input_origin(op, k)) is not None
              and o[0] in rule.ops and rule.ops[o[0]].type == "Data"]
    if inputs:
        attrs.append((MODEL_INPUTS_ATTR, ",".join(inputs)))
    return tuple(attrs)


def _tensor_counts(npu: DumpGraph) -> dict[str, tuple[int, int]]:
    t = npu.tensors
    counts: dict[str, list[int]] = {}
    for node, role, slot in zip(t.node.tolist(), t.role.tolist(), t.slot):
        entry = counts.setdefault(npu.nodes.ids[node], [0, 0])
        k = int(slot) + 1 if slot.isdigit() else 0
        entry[role == Role.OUTPUT] = max(entry[role == Role.OUTPUT], k)
    return {k: (v[0], v[1]) for k, v in counts.items()}


def _add_tensors(builder: HierarchyBuilder, folder: Path, rows: Sequence[tuple[str, Role, int, GoldenFile]],
                 npu_shapes: Mapping[tuple[str, int, str], str] | None = None) -> None:
    """Tensors of golden files; one whose NPU twin has another shape of as many elements (a reshape the NPU graph
    dropped, ``Flatten``) is read as that shape (``file#shape=...``), as msaccucmp compares both flattened."""
    names = list(dict.fromkeys(f.file for _, _, _, f in rows))
    compiled = compiled_stats_pay(folder / name for name in names)
    stats = dict(zip(names, in_threads(lambda name: _measured(folder / name, compiled), names)))
    n = len(rows)
    shapes, files = [], []
    for op, role, k, f in rows:
        shape = stats[f.file][3]
        wanted = (npu_shapes or {}).get((op, int(role), str(k)), shape)
        part = golden_view(_dims(shape), _dims(wanted)) if wanted != shape and _dims(wanted) is not None else ""
        shapes.append(wanted if part else shape)
        files.append(f"{f.file}#{part}" if part else f.file)
    builder.add_tensors([r[0] for r in rows], [int(r[1]) for r in rows], [str(r[2]) for r in rows],
                        dtype=[stats[r[3].file][2] for r in rows], shape=shapes,
                        stats=np.array([stats[r[3].file][0] for r in rows]).reshape(n, 4),
                        present=np.array([stats[r[3].file][1] for r in rows]).reshape(n, 4),
                        md5=[""] * n, file=files, value=[""] * n)


def _measured(path: Path, compiled: bool = False) -> tuple[np.ndarray, np.ndarray, str, str]:
    """(statistics, which exist, dtype, shape) of a golden file, read through a memory map."""
    array = _load(path)
    stats, present = tensor_stats(array, compiled=compiled)
    return stats, present, str(array.dtype), _shape(array.shape)


def _dims(text: str) -> tuple[int, ...] | None:
    if not text.startswith("["):
        return None
    return tuple(int(d) for d in re.findall(r"\d+", text))


_TO_NCHW, _TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)


def golden_view(golden: tuple[int, ...] | None, npu: tuple[int, ...]) -> str:
    """How to read a golden tensor of shape `golden` as the NPU's `npu` ("" when it cannot be): the other 4-D layout
    (NHWC golden of a TensorFlow model against the NPU's NCHW, and back: ``perm=...``, msaccucmp's swap), or the same
    values in another shape of other rank (a ``Flatten`` the NPU graph dropped: ``shape=...``).

    >>> golden_view((1, 8, 8, 16), (1, 16, 8, 8)), golden_view((1, 32, 1, 1), (1, 32)), golden_view((4, 6), (6, 4))
    ('perm=0,3,1,2', 'shape=1,32', '')
    """
    if golden is None or golden == npu or int(np.prod(golden, dtype=np.int64)) != int(np.prod(npu, dtype=np.int64)):
        return ""
    if len(golden) == 4 == len(npu):
        for perm in (_TO_NCHW, _TO_NHWC):
            if tuple(golden[p] for p in perm) == npu:
                return "perm=" + ",".join(map(str, perm))
        return ""
    if len(golden) == len(npu):
        return ""  # same rank, other extents: not the same tensor, the comparison says so
    return "shape=" + ",".join(map(str, npu))


def _shape(shape: Iterable[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def _load(path: Path) -> np.ndarray:
    regular_file(path)  # a FIFO or a device named like a golden file would block the read or never end
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise DumpFormatError(f"{path}: not a readable .npy file ({err})") from err


def read_npu_and_golden(npu_path: str | os.PathLike[str], golden_path: str | os.PathLike[str],
                        fusion_rule: str | os.PathLike[str] | None = None) -> tuple[DumpGraph, DumpGraph]:
    """Read an NPU raw dump and its golden folder laid out as the dump ran (`read_golden_for`).

    The fusion rule is `fusion_rule` when given, else a GE graph found beside the dump
    (`graphcmp.core.readers.ascend_fusion.find_fusion_rule`), else none: outputs are then paired by the original
    op their dump headers name, and inputs are not compared.

    Raises
    ------
    DumpFormatError
        If either folder or the rule cannot be read.
    """
    npu = read_ascend_dump(npu_path)
    found = fusion_rule if fusion_rule is not None else find_fusion_rule(npu.info.path)
    rule = read_fusion_rule(found) if found is not None else None
    if rule is not None and npu.info.task == "statistics":
        names = rule_names(rule, npu.nodes.ids)
        if names:  # a statistics dump names its ops as file names write them: read it again with their own names
            npu = read_ascend_dump(npu_path, names)
    return npu, read_golden_for(golden_path, npu, rule)


def rule_names(rule: FusionRule, names: Iterable[str]) -> dict[str, str]:
    """Of `names`, those not in `rule` that are the file-name form (`golden_key`) of exactly one op of it, mapped to
    that op's name.

    >>> from graphcmp.core.readers.ascend_fusion import fusion_rule_from_ops
    >>> from graphcmp.core.readers.ge import GeOp
    >>> rule = fusion_rule_from_ops([GeOp("/dw/conv/Conv", "Conv2D"), GeOp("a/b", "Add"), GeOp("a_b", "Add")])
    >>> rule_names(rule, ["_dw_conv_Conv", "a_b", "other"])
    {'_dw_conv_Conv': '/dw/conv/Conv'}
    """
    keys: dict[str, list[str]] = {}
    for name in rule.ops:
        keys.setdefault(golden_key(name), []).append(name)
    return {n: keys[n][0] for n in names if n not in rule.ops and len(keys.get(n, ())) == 1}
