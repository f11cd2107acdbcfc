#!/usr/bin/env python3
"""Generate a large msprobe dump pair (npu, bench) by replicating the layer blocks of a real dump.

The structure comes from a real msprobe rank folder (``dump.json``, ``construct.json``, ``stack.json``):
the repeated layer blocks (``Module.encoder.layers.<i>.*`` and the APIs inside them, forward and
backward, plus ``parameters_grad``) are copied until the graph has the requested number of nodes.
Everything outside the layers (embedding, head, loss, top-level APIs) is kept once. The bench side
copies the real statistics; the npu side equals it up to a planted divergence: the first linear op of
``--perturb-layer`` gets a 10-30 % output error and every op that depends on it (later layers, head,
loss, the whole backward) a multiplicative noise: each stat is scaled by 1 ± u*r with u in [0.5, 1]
and r growing log-linearly from 1e-3 (right after the planted error) to 5e-2 (last record).

Usage::

    .venv/bin/python bench/make_synthetic.py \\
        --source ../shared/data/msprobe/dumps/tf_big/statistics/baseline/step0/rank0 \\
        --nodes 200000 --out /tmp/graphcmp_synth/200k [--perturb-layer K] [--seed S] [--indent 1 | --lines] [--check]

This is a benchmark helper, not part of the ``graphcmp`` package; it only needs numpy and orjson.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

__all__ = [
    "SynthError",
    "SynthSummary",
    "load_source",
    "main",
    "make_synthetic",
    "verify_output",
]

_API_RE = re.compile(r"^(?P<api>.+)\.(?P<n>\d+)\.(?P<dir>forward|backward)$")
_DIR_RE = re.compile(r"\.(forward|backward)(?:\.\d+)?$")
_PREFIX_RE = re.compile(r"^((?:Module|Cell)(?:\.[^.]+)*?)\.(\d+)\.")
_MODULE_HEADS = ("Module.", "Cell.")
_INPUT_KEYS = frozenset({"input_args", "input_kwargs", "input"})
_STAT_KEYS = ("Max", "Min", "Mean", "Norm")
_LINEAR_APIS = frozenset({"linear", "matmul", "addmm", "mm", "bmm"})
_NOISE_START = 1e-3  # noise level r of the first op after the planted error
_NOISE_END = 5e-2  # noise level r of the last record of the dump
_ORIGIN_ERROR = 0.1  # planted error: relative 0.1 x U(1, 3) on every output stat
_CHUNK = 8192  # records per write


class SynthError(Exception):
    """The source folder cannot be replicated (missing file, no layer blocks, odd order)."""


@dataclass(frozen=True, slots=True)
class SynthSummary:
    """What `make_synthetic` wrote."""

    layers_source: int  # layer blocks found in the source
    layers_out: int  # layer blocks written
    construct_entries: int
    data_entries: int
    param_grad_entries: int  # parameters_grad records (in dump.json, not in construct.json)
    nodes: int  # construct_entries + param_grad entries not in construct.json
    origin: str  # node id of the planted error on the npu side ("" if none)
    perturbed_records: int  # npu records that differ from bench
    bytes_written: tuple[tuple[str, int], ...]  # (relative path, size)
    seconds: float


# --------------------------------------------------------------------------- reading


@dataclass(slots=True)
class _Source:
    path: Path
    header: dict[str, Any]  # dump.json without "data"
    data: dict[str, Any]
    construct: dict[str, str | None]
    stack: dict[str, Any]
    nonfinite: bool  # a file needed the stdlib parser (bare NaN/Infinity tokens)


def _read_json(path: Path) -> tuple[Any, bool]:
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise SynthError(f"{path}: cannot read ({err.strerror}); pass a msprobe rank folder") from err
    try:
        return orjson.loads(raw), False
    except orjson.JSONDecodeError:
        pass
    try:  # msprobe writes bare NaN/Infinity in overflow dumps; orjson rejects them
        return json.loads(raw.decode("utf-8", errors="replace")), True
    except json.JSONDecodeError as err:
        raise SynthError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from err


def load_source(rank_dir: str | Path) -> _Source:
    """Read a msprobe rank folder (``dump.json``, ``construct.json``, optional ``stack.json``).

    Raises
    ------
    SynthError
        If a file is missing or malformed, or the dump holds tensors (task ``tensor``).
    """
    rank_dir = Path(rank_dir)
    dump, nf1 = _read_json(rank_dir / "dump.json")
    construct, nf2 = _read_json(rank_dir / "construct.json")
    stack_path = rank_dir / "stack.json"
    stack, nf3 = _read_json(stack_path) if stack_path.exists() else ({}, False)
    if not isinstance(dump, dict) or not isinstance(dump.get("data"), dict):
        raise SynthError(f'{rank_dir / "dump.json"}: no "data" object; pass a msprobe rank folder')
    if not isinstance(construct, dict):
        raise SynthError(f"{rank_dir / 'construct.json'}: expected an object {{node id: parent id}}")
    if dump.get("task") == "tensor":
        raise SynthError(
            f'{rank_dir / "dump.json"}: task is "tensor" (records point at .pt files); use a statistics or md5 dump'
        )
    header = {k: v for k, v in dump.items() if k != "data"}
    return _Source(rank_dir, header, dump["data"], construct, stack or {}, nf1 or nf2 or nf3)


# --------------------------------------------------------------------------- structure


def _is_module(node: str) -> bool:
    return node.startswith(_MODULE_HEADS)


def _direction(node: str) -> str:
    if "parameters_grad" in node:
        return "bwd"
    m = _DIR_RE.search(node)
    return "bwd" if m and m.group(1) == "backward" else "fwd"


def _detect_prefix(ids: Iterable[str]) -> tuple[str, int]:
    """Return the module prefix with the most distinct integer children, and that count."""
    seen: dict[str, set[int]] = defaultdict(set)
    for node in ids:
        m = _PREFIX_RE.match(node)
        if m:
            seen[m.group(1)].add(int(m.group(2)))
    if not seen:
        raise SynthError("no repeated layer blocks (Module.<path>.<i>.*) found in the source")
    prefix = max(seen, key=lambda p: (len(seen[p]), -len(p)))
    return prefix, max(seen[prefix]) + 1


class _Layout:
    """Layer label and direction of every source node."""

    def __init__(self, src: _Source, prefix: str) -> None:
        self.prefix = prefix
        self.layer_re = re.compile(re.escape(prefix) + r"\.(\d+)\.")
        self.label: dict[str, tuple[int | None, str]] = {}
        for node in list(src.construct) + [k for k in src.data if k not in src.construct]:
            self.label[node] = (self._layer(node, src.construct.get(node)), _direction(node))

    def _id_layer(self, node: str) -> int | None:
        m = self.layer_re.match(node)
        return int(m.group(1)) if m else None

    def _layer(self, node: str, parent: str | None) -> int | None:
        if _is_module(node):
            return self._id_layer(node)
        return self._id_layer(parent) if parent else None  # an API belongs to its module's layer

    def layer_of(self, node: str | None) -> int | None:
        if node is None:
            return None
        if node in self.label:
            return self.label[node][0]
        return self._id_layer(node)


def _template_of(j: int, n_src: int) -> int:
    """Source layer copied for new layer `j` (cycles over the middle layers 1..n_src-2)."""
    if n_src < 3:
        return 0
    return 1 + (j - (n_src - 1)) % (n_src - 2)


def _plan_layers(src: _Source, layout: _Layout, n_src: int, nodes: int) -> tuple[int, int]:
    """Return (layers to write, resulting node count) reaching at least `nodes` nodes."""
    sizes: Counter[int | None] = Counter(layout.label[k][0] for k in src.construct)
    extra = [k for k in src.data if k not in src.construct and "parameters_grad" in k]
    sizes.update(layout.label[k][0] for k in extra)
    total = len(src.construct) + len(extra)
    copies = 0
    while total < nodes:
        size = sizes[_template_of(n_src - 1 + copies, n_src)]
        if size == 0:
            raise SynthError(f"{src.path}: template layer has no nodes; cannot grow the graph")
        total += size
        copies += 1
    return n_src + copies, total


_Item = tuple[str, "int | None", bool]  # (source id, layer in the output or None, is a copy)


def _expand(seq: Sequence[str], layout: _Layout, n_src: int, n_out: int) -> list[_Item]:
    """Order of the output nodes: layer stacks grown from `n_src` to `n_out` layers.

    A *stack* is a run of layer blocks in one direction (forward 0, 1, ... or backward ..., 1, 0);
    other nodes in between (e.g. the encoder module) stay where they are. New layers are inserted
    between source layers n_src-2 and n_src-1, which becomes layer n_out-1, so first and last layer
    keep their real neighbours.
    """
    runs: list[list[Any]] = []  # [start, end, layer, direction]
    for idx, node in enumerate(seq):
        layer, direction = layout.label[node]
        if "parameters_grad" in node and runs and runs[-1][2] == layer:
            direction = runs[-1][3]  # msprobe 1.x records parameters_grad inside the forward block
        key = (layer, direction if layer is not None else None)
        if runs and (runs[-1][2], runs[-1][3]) == key:
            runs[-1][1] = idx + 1
        else:
            runs.append([idx, idx + 1, *key])
    stacks: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for ri, (_, _, layer, direction) in enumerate(runs):
        if layer is None:
            continue
        step = 1 if direction == "fwd" else -1
        if cur is not None and cur["dir"] == direction and layer - cur["last"] in (0, step):
            cur["runs"].append(ri)
            cur["last"] = layer
        else:
            cur = {"dir": direction, "runs": [ri], "last": layer}
            stacks.append(cur)
    insert_at: dict[int, list[_Item]] = {}
    if n_out > n_src:
        for st in stacks:
            by_layer: dict[int, list[int]] = defaultdict(list)
            for ri in st["runs"]:
                by_layer[runs[ri][2]].append(ri)
            if set(by_layer) != set(range(n_src)):
                first = seq[runs[st["runs"][0]][0]]
                raise SynthError(
                    f"{layout.prefix}: the {st['dir']} block run starting at {first!r} covers layers "
                    f"{sorted(by_layer)}, expected 0..{n_src - 1}; pass --layers-prefix"
                )
            fwd = st["dir"] == "fwd"
            new_layers = range(n_src - 1, n_out - 1) if fwd else range(n_out - 2, n_src - 2, -1)
            block: list[_Item] = []
            for j in new_layers:
                for ri in by_layer[_template_of(j, n_src)]:
                    block.extend((seq[k], j, True) for k in range(runs[ri][0], runs[ri][1]))
            insert_at[by_layer[n_src - 1 if fwd else n_src - 2][0]] = block
    out: list[_Item] = []
    for ri, (start, end, layer, _) in enumerate(runs):
        if ri in insert_at:
            out.extend(insert_at[ri])
        new = None if layer is None else (n_out - 1 if layer == n_src - 1 else layer)
        out.extend((seq[k], new, False) for k in range(start, end))
    return out


class _Renamer:
    """New ids: layer index replaced in module ids; API call counters renumbered in call order."""

    def __init__(self, layout: _Layout, n_src: int, n_out: int) -> None:
        self.layout = layout
        self.n_src, self.n_out = n_src, n_out
        self.next: dict[str, int] = defaultdict(int)
        self.assigned: dict[tuple[str, str, int], int] = {}

    def rename(self, node: str, layer: int | None, copy: bool) -> str:
        if _is_module(node):
            if layer is None:
                return node
            m = self.layout.layer_re.match(node)
            return node if m is None else f"{self.layout.prefix}.{layer}.{node[m.end() :]}"
        m = _API_RE.match(node)
        if m is None:
            return node
        key = (m.group("api"), m.group("n"), layer if copy and layer is not None else -1)
        n = self.assigned.get(key)
        if n is None:  # first sight, forward or backward: next free counter of this API
            n = self.assigned[key] = self.next[key[0]]
            self.next[key[0]] += 1
        return f"{key[0]}.{n}.{m.group('dir')}"

    def rename_parent(self, parent: str | None, item: _Item) -> str | None:
        if parent is None:
            return None
        src, layer, copy = item
        parent_layer = self.layout.layer_of(parent)
        if copy and parent_layer == self.layout.layer_of(src):
            return self.rename(parent, layer, True)
        if parent_layer is not None and parent_layer == self.n_src - 1:
            return self.rename(parent, self.n_out - 1, False)
        return self.rename(parent, parent_layer, False)


# --------------------------------------------------------------------------- npu perturbation


def _signed_stream(rng: np.random.Generator, low: float, high: float) -> Iterator[float]:
    """Endless factors ±U(low, high): a stat becomes value * (1 + level * factor)."""
    while True:
        magnitude = rng.uniform(low, high, 1 << 16)
        yield from (magnitude * rng.choice((-1.0, 1.0), 1 << 16)).tolist()


def _perturb_tensor(t: dict[str, Any], rel: float, z: Iterator[float]) -> dict[str, Any]:
    dtype = str(t.get("dtype", ""))
    if "int" in dtype or "bool" in dtype:
        return t
    new = dict(t)
    for key in _STAT_KEYS:
        v = t.get(key)
        if isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool)):
            new[key] = v * (1.0 + rel * next(z))
    if "md5" in t:
        new["md5"] = f"{zlib.crc32(str(t['md5']).encode() + repr(rel).encode()):08x}"
    mx, mn, me, nm = (new.get(k) for k in _STAT_KEYS)
    stats = (mx, mn, me, nm)
    if all(isinstance(v, (int, float)) and math.isfinite(v) for v in stats):
        if mx < mn:
            mx, mn = mn, mx
        new["Max"], new["Min"] = mx, mn
        new["Mean"] = min(max(me, mn), mx)
        new["Norm"] = max(nm, abs(mx), abs(mn))  # an L2 norm is at least the largest |element|
    return new


def _perturb_value(v: Any, rel: float, z: Iterator[float]) -> Any:
    if isinstance(v, dict):
        if "Max" in v or "md5" in v:
            return _perturb_tensor(v, rel, z)
        return {k: _perturb_value(x, rel, z) for k, x in v.items()}
    if isinstance(v, list):
        return [_perturb_value(x, rel, z) for x in v]
    return v


def _perturb_record(
    rec: dict[str, Any], rel_in: float | None, rel_out: float, z_in: Iterator[float], z_out: Iterator[float]
) -> dict[str, Any]:
    out = {}
    for key, value in rec.items():
        if key in _INPUT_KEYS:
            out[key] = value if rel_in is None else _perturb_value(value, rel_in, z_in)
        else:
            out[key] = _perturb_value(value, rel_out, z_out)
    return out


def _is_linear(new_id: str, parent: str | None) -> bool:
    m = _API_RE.match(new_id)
    if m is None:
        return False
    return m.group("api").rsplit(".", 1)[-1].lower() in _LINEAR_APIS or ".Linear." in (parent or "")


def _classify(
    items: list[_Item], ids: list[str], parents: dict[str, str | None], layout: _Layout, k: int
) -> tuple[list[str], int, list[int], list[tuple[int, int]]]:
    """Per data position: "clean", "noise" (inputs+outputs), "origin" (outputs, big) or "out".

    Returns the categories, the position of the first origin (-1 if none), the position whose
    noise level each node gets, and (origin op, its module or -1) position pairs.
    """
    n = len(items)
    cat = ["clean"] * n
    # layer-K forward blocks (one per micro-batch): positions, split where another layer starts
    blocks: list[list[int]] = []
    in_block = False
    for p, (src, layer, _) in enumerate(items):
        if layer is None or "parameters_grad" in src:
            continue
        if layer == k and layout.label[src][1] == "fwd":
            if not in_block:
                blocks.append([])
                in_block = True
            blocks[-1].append(p)
        else:
            in_block = False
    origins: list[int] = []
    for block in blocks:
        pick = next((p for p in block if _is_linear(ids[p], None)), None)
        if pick is None:
            pick = next((p for p in block if _is_linear(ids[p], parents.get(ids[p]))), None)
        if pick is None:  # level L0 dumps have modules only
            pick = next((p for p in block if ".Linear.forward" in ids[p]), None)
        if pick is None:
            pick = next((p for p in block if _API_RE.match(ids[p])), block[0])
        origins.append(pick)
        for p in block:
            if p > pick:
                cat[p] = "noise"
    if not origins:
        return cat, -1, list(range(n)), []
    p0 = min(origins)
    # next layer-labelled direction after each position (for forward nodes outside the layers)
    next_dir: list[str | None] = [None] * n
    nxt: str | None = None
    for p in range(n - 1, -1, -1):
        next_dir[p] = nxt
        src, layer, _ = items[p]
        if layer is not None:
            nxt = layout.label[src][1]
    for p in range(p0 + 1, n):
        src, layer, _ = items[p]
        if cat[p] != "clean":
            continue
        if layout.label[src][1] == "bwd":
            cat[p] = "noise"
        elif layer is None:
            if next_dir[p] != "fwd":  # head / loss between the last forward and the backward
                cat[p] = "noise"
        elif layer > k:
            cat[p] = "noise"
    position = {nid: p for p, nid in enumerate(ids)}
    for p in origins:
        cat[p] = "origin"
        par = parents.get(ids[p])
        if par in position and _is_module(par) and layout.layer_of(par) is not None:
            cat[position[par]] = "origin"  # the Linear module returns what its op returned
    # modules around a changed forward op return changed outputs, as noisy as their last changed op
    rel_pos = list(range(n))
    for p in range(n):
        if cat[p] == "clean" or layout.label[items[p][0]][1] != "fwd":
            continue
        par = parents.get(ids[p])
        while par is not None and par in position:
            q = position[par]
            if cat[q] == "clean":
                cat[q] = "out"
            if cat[q] == "out":
                rel_pos[q] = max(rel_pos[q], p)
            par = parents.get(par)
    return cat, p0, rel_pos, [(p, position.get(parents.get(ids[p]) or "", -1)) for p in origins]


# --------------------------------------------------------------------------- writing


def _dumps_factory(nonfinite: bool, indent: int | None = None) -> Callable[[Any], bytes]:
    """Record serialiser: compact, or laid out as ``json.dump(dump, indent=indent)`` writes a record
    (nested two levels deep: the record's own lines start with ``2 * indent`` spaces)."""
    if indent is None:
        if not nonfinite:
            return orjson.dumps
        # orjson would write NaN/Infinity as null; keep msprobe's bare tokens instead
        return lambda o: json.dumps(o, ensure_ascii=False, separators=(",", ":")).encode()
    base = b"\n" + b" " * (2 * indent)
    if nonfinite:
        return lambda o: json.dumps(o, ensure_ascii=False, indent=indent).encode().replace(b"\n", base)
    return lambda o: _reindent(orjson.dumps(o, option=orjson.OPT_INDENT_2), indent, base)


def _reindent(text: bytes, indent: int, base: bytes) -> bytes:
    """orjson's two-space indentation -> `indent` spaces per level after `base`, without a per-line loop.

    Deepest levels first, through a NUL placeholder (JSON text never holds a raw NUL).
    """
    depth = 1
    while b"\n" + b"  " * (depth + 1) in text:
        depth += 1
    for d in range(depth, 0, -1):
        text = text.replace(b"\n" + b"  " * d, b"\n" + b"\0" * (indent * d))
    return text.replace(b"\n", base).replace(b"\0", b" ")


def _open_dump(path: Path, header: dict[str, Any], indent: int | None = None) -> Any:
    f = path.open("wb")
    if indent is None:
        f.write(b"{")
        for key, value in header.items():
            f.write(orjson.dumps(key) + b":" + orjson.dumps(value) + b",")
        f.write(b'"data":{')
        return f
    pad = b"\n" + b" " * indent
    f.write(b"{")
    for key, value in header.items():
        f.write(pad + json.dumps({key: value}, indent=indent).encode()[2:-2].strip() + b",")
    f.write(pad + b'"data": {')
    return f


def make_synthetic(
    source: str | Path,
    out: str | Path,
    nodes: int,
    *,
    perturb_layer: int | None = None,
    seed: int | None = None,
    layers_prefix: str | None = None,
    indent: int | None = None,
    lines: bool = False,
) -> SynthSummary:
    """Write ``out/npu`` and ``out/bench`` msprobe rank folders with at least `nodes` nodes each.

    Parameters
    ----------
    source : path
        A msprobe rank folder (statistics or md5 task) with repeated layer blocks.
    out : path
        Output folder; ``npu/`` and ``bench/`` are created (files overwritten).
    nodes : int
        Minimum node count per side (construct.json entries + parameters_grad records).
    perturb_layer : int, optional
        Output layer whose first linear op gets the planted error. Defaults to the middle layer.
    seed : int, optional
        Seed of the npu noise. Defaults to 0.
    layers_prefix : str, optional
        Module path of the layer list, e.g. ``Module.encoder.layers``. Defaults to the module path
        with the most distinct integer children.
    indent : int, optional
        Write dump.json as ``json.dump(..., indent=indent)`` does (msprobe uses 1). Default: compact.
    lines : bool
        Compact records, one per line (``"data":{\n"id":{...},\n"id":{...}\n}}``); ignored with `indent`.

    Raises
    ------
    SynthError
        If the source is unreadable or its layer blocks are not in forward/backward stack order.
    """
    t0 = time.perf_counter()
    src = load_source(source)
    ids_all = list(src.construct) + list(src.data)
    if layers_prefix is None:
        prefix, n_src = _detect_prefix(ids_all)
    else:
        prefix = layers_prefix.rstrip(".")
        _, n_src = _detect_prefix(i for i in ids_all if i.startswith(prefix + "."))
    if n_src < 2:
        raise SynthError(f"{src.path}: only {n_src} block under {prefix}; need at least 2 layers")
    layout = _Layout(src, prefix)
    n_out, _ = _plan_layers(src, layout, n_src, nodes)
    k = n_out // 2 if perturb_layer is None else perturb_layer
    if not 0 <= k < n_out:
        raise SynthError(f"--perturb-layer {k}: the output has layers 0..{n_out - 1}")

    c_items = _expand(list(src.construct), layout, n_src, n_out)
    d_items = _expand(list(src.data), layout, n_src, n_out)
    ren = _Renamer(layout, n_src, n_out)
    c_ids = [ren.rename(*it) for it in c_items]  # construct first: it fixes the call order
    construct = {nid: ren.rename_parent(src.construct[it[0]], it) for nid, it in zip(c_ids, c_items, strict=True)}
    d_ids = [ren.rename(*it) for it in d_items]
    if len(construct) != len(c_ids) or len(set(d_ids)) != len(d_ids):
        raise AssertionError("renaming produced duplicate node ids")  # a bug, not bad input

    stack = _build_stack(src, c_items, c_ids, d_items, d_ids)
    out_dir = Path(out)
    npu_dir, bench_dir = out_dir / "npu", out_dir / "bench"
    npu_dir.mkdir(parents=True, exist_ok=True)
    bench_dir.mkdir(parents=True, exist_ok=True)
    dumps = _dumps_factory(src.nonfinite, indent)
    lines = lines and indent is None
    key_pad = (b"\n" if lines else b"") if indent is None else b"\n" + b" " * (2 * indent)
    key_sep = b":" if indent is None else b": "
    rec_sep = b","
    end = (b"\n}}" if lines else b"}}") if indent is None else b"\n" + b" " * indent + b"}\n}"
    construct_bytes = orjson.dumps(construct)
    stack_bytes = orjson.dumps(stack)
    for d in (npu_dir, bench_dir):
        (d / "construct.json").write_bytes(construct_bytes)
        (d / "stack.json").write_bytes(stack_bytes)

    cat, p0, rel_pos, origin_pairs = _classify(d_items, d_ids, construct, layout, k)
    rng = np.random.default_rng(0 if seed is None else seed)
    z_norm, z_big = _signed_stream(rng, 0.5, 1.0), _signed_stream(rng, 1.0, 3.0)
    planted: dict[int, dict[str, Any]] = {}  # position -> npu record of an op with the planted error
    for p, q in origin_pairs:
        op = src.data[d_items[p][0]]
        if not isinstance(op, dict):
            continue
        planted[p] = _perturb_record(op, None, _ORIGIN_ERROR, z_norm, z_big)
        module = src.data[d_items[q][0]] if q >= 0 else None
        if isinstance(module, dict) and "output" in op and module.get("output") == op["output"]:
            planted[q] = {**module, "output": planted[p]["output"]}  # the Linear returns its op's output
    span = max(len(d_items) - 1 - p0, 1)
    header = dict(src.header)
    cache: dict[str, bytes] = {}
    perturbed = 0
    with (
        _open_dump(npu_dir / "dump.json", header, indent) as f_npu,
        _open_dump(bench_dir / "dump.json", header, indent) as f_bench,
    ):
        npu_chunk: list[bytes] = []
        bench_chunk: list[bytes] = []
        first = True
        for p, ((src_id, _, _), nid) in enumerate(zip(d_items, d_ids, strict=True)):
            rec = src.data[src_id]
            rec_bytes = cache.get(src_id)
            if rec_bytes is None:
                rec_bytes = cache[src_id] = dumps(rec)
            key = key_pad + orjson.dumps(nid) + key_sep
            bench_chunk.append(key + rec_bytes)
            c = cat[p]
            if c == "clean" or not isinstance(rec, dict):
                npu_chunk.append(key + rec_bytes)
            else:
                rel = _NOISE_START * (_NOISE_END / _NOISE_START) ** (max(rel_pos[p] - p0, 0) / span)
                if p in planted:
                    new = planted[p]
                elif c == "origin":
                    new = _perturb_record(rec, None, _ORIGIN_ERROR, z_norm, z_big)
                elif c == "out":
                    new = _perturb_record(rec, None, rel, z_norm, z_norm)
                else:
                    new = _perturb_record(rec, rel, rel, z_norm, z_norm)
                npu_chunk.append(key + dumps(new))
                perturbed += 1
            if len(bench_chunk) >= _CHUNK:
                sep = b"" if first else rec_sep
                f_npu.write(sep + rec_sep.join(npu_chunk))
                f_bench.write(sep + rec_sep.join(bench_chunk))
                npu_chunk.clear()
                bench_chunk.clear()
                first = False
        sep = b"" if first or not bench_chunk else rec_sep
        f_npu.write(sep + rec_sep.join(npu_chunk) + end)
        f_bench.write(sep + rec_sep.join(bench_chunk) + end)

    d_set = set(d_ids)
    pg = sum(1 for nid in d_ids if "parameters_grad" in nid)
    extra = sum(1 for nid in d_set if nid not in construct and "parameters_grad" in nid)
    sizes = tuple(
        (f"{side}/{name}", (out_dir / side / name).stat().st_size)
        for side in ("npu", "bench")
        for name in ("dump.json", "construct.json", "stack.json")
    )
    return SynthSummary(
        layers_source=n_src,
        layers_out=n_out,
        construct_entries=len(construct),
        data_entries=len(d_ids),
        param_grad_entries=pg,
        nodes=len(construct) + extra,
        origin=d_ids[p0] if p0 >= 0 else "",
        perturbed_records=perturbed,
        bytes_written=sizes,
        seconds=time.perf_counter() - t0,
    )


def _build_stack(
    src: _Source, c_items: list[_Item], c_ids: list[str], d_items: list[_Item], d_ids: list[str]
) -> dict[str, Any]:
    """stack.json for the output: each new node joins its source node's group (or copies its frames)."""
    stack = src.stack
    grouped = bool(stack) and all(
        isinstance(v, list) and len(v) == 2 and isinstance(v[0], list) for v in stack.values()
    )
    seen: set[str] = set()
    order = [
        (it[0], nid)
        for it, nid in zip(c_items + d_items, c_ids + d_ids, strict=True)
        if not (nid in seen or seen.add(nid))
    ]
    if not grouped:  # msprobe <= 1.x: {node id: [frames]}
        return {nid: stack[s] for s, nid in order if s in stack}
    group_of = {node: g for g, (members, _) in stack.items() for node in members}
    members: dict[str, list[str]] = {g: [] for g in stack}
    for s, nid in order:
        g = group_of.get(s)
        if g is not None:
            members[g].append(nid)
    return {g: [members[g], frames] for g, (_, frames) in stack.items()}


# --------------------------------------------------------------------------- checking


def verify_output(out: str | Path, nodes: int) -> list[str]:
    """Return the problems found in ``out/npu`` and ``out/bench`` ([] if none).

    Checks: every construct parent is a key or null; no duplicate ids in any file; node count at
    least `nodes`; npu and bench have identical key sets; stats keep Max >= Mean >= Min, Norm >= 0.
    """
    problems: list[str] = []
    out = Path(out)
    sides: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
    for side in ("npu", "bench"):
        d = out / side
        dump, dup = _read_json_strict(d / "dump.json")
        construct, dup_c = _read_json_strict(d / "construct.json")
        stack, _ = _read_json(d / "stack.json")
        sides[side] = (dump, construct, stack)
        data = dump["data"]
        for name, keys in (("dump.json", dup), ("construct.json", dup_c)):
            if keys:
                problems.append(f"{side}/{name}: {len(keys)} repeated keys, e.g. {keys[0]}")
        bad_parents = [k for k, v in construct.items() if v is not None and v not in construct]
        if bad_parents:
            problems.append(f"{side}/construct.json: {len(bad_parents)} parents missing, e.g. {bad_parents[0]}")
        grouped = all(isinstance(v, list) and len(v) == 2 and isinstance(v[0], list) for v in stack.values())
        ids = [i for v in stack.values() for i in v[0]] if grouped else list(stack)
        if len(ids) != len(set(ids)):
            problems.append(f"{side}/stack.json: duplicate node ids")
        pg = sum(1 for k in data if k not in construct and "parameters_grad" in k)
        count = len(construct) + pg
        if count < nodes:
            problems.append(f"{side}: {count} nodes < {nodes}")
        missing = [k for k in data if k not in construct and "parameters_grad" not in k]
        if missing:
            problems.append(f"{side}/dump.json: {len(missing)} records not in construct.json, e.g. {missing[0]}")
        bad = _count_bad_stats(data)
        if bad:
            problems.append(f"{side}/dump.json: {bad} tensors break Max >= Mean >= Min or Norm >= 0")
    (nd, nc, ns), (bd, bc, bs) = sides["npu"], sides["bench"]
    if nd["data"].keys() != bd["data"].keys():
        problems.append("dump.json: npu and bench key sets differ")
    if list(nc.items()) != list(bc.items()) or ns != bs:
        problems.append("construct.json/stack.json: npu and bench differ")
    return problems


def _read_json_strict(path: Path) -> tuple[Any, list[str]]:
    """Load with the stdlib parser, collecting keys repeated inside one object (orjson drops them)."""
    repeated: list[str] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            repeated.extend(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)
        return obj

    return json.loads(path.read_bytes(), object_pairs_hook=pairs_hook), repeated


def _count_bad_stats(data: dict[str, Any]) -> int:
    bad = 0
    todo: list[Any] = list(data.values())
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            if "Max" in v:
                mx, mn, me, nm = (v.get(k) for k in _STAT_KEYS)
                if all(isinstance(x, (int, float)) and math.isfinite(x) for x in (mx, mn, me, nm)) and not (
                    mx >= me >= mn and nm >= 0
                ):
                    bad += 1
            else:
                todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
    return bad


# --------------------------------------------------------------------------- CLI


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="make_synthetic.py",
        description="Grow a real msprobe rank folder into a large npu/bench dump pair by replicating layers.",
    )
    p.add_argument("--source", required=True, help="msprobe rank folder, e.g. .../step0/rank0")
    p.add_argument("--nodes", type=int, required=True, help="minimum nodes per side")
    p.add_argument("--out", required=True, help="output folder; npu/ and bench/ are written inside")
    p.add_argument("--perturb-layer", type=int, default=None, help="layer with the planted error (default: middle)")
    p.add_argument("--seed", type=int, default=None, help="seed of the npu noise (default: 0)")
    p.add_argument("--layers-prefix", default=None, help="e.g. Module.encoder.layers (default: detected)")
    p.add_argument("--indent", type=int, default=None,
                   help="write dump.json indented like json.dump(..., indent=N); msprobe uses 1 (default: compact)")
    p.add_argument("--lines", action="store_true", help="write dump.json compact, one record per line")
    p.add_argument("--check", action="store_true", help="reload the output and verify it")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the generator; return 0 on success, 1 if --check finds problems, 2 on bad input."""
    args = _parse(argv)
    try:
        s = make_synthetic(
            args.source,
            args.out,
            args.nodes,
            perturb_layer=args.perturb_layer,
            seed=args.seed,
            layers_prefix=args.layers_prefix,
            indent=args.indent,
            lines=args.lines,
        )
    except SynthError as err:
        print(f"make_synthetic: {err}", file=sys.stderr)
        return 2
    print(f"layers            {s.layers_source} -> {s.layers_out}")
    print(f"construct entries {s.construct_entries:,}")
    print(f"dump.json records {s.data_entries:,} ({s.param_grad_entries:,} parameters_grad)")
    print(f"nodes per side    {s.nodes:,} (construct + parameters_grad)")
    print(f"planted error     {s.origin} ({s.perturbed_records:,} npu records differ)")
    for name, size in s.bytes_written:
        print(f"{name:<22}{size / 1e6:10.2f} MB")
    print(f"time              {s.seconds:.2f} s")
    if args.check:
        t0 = time.perf_counter()
        problems = verify_output(args.out, args.nodes)
        for line in problems:
            print(f"check: {line}", file=sys.stderr)
        print(f"check             {'ok' if not problems else 'FAILED'} ({time.perf_counter() - t0:.1f} s)")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
