#!/usr/bin/env python3
"""Grow the shared TP1 dump of the Megatron-style GPT into a synthetic TP x PP (x VPP) msprobe job and its baseline.

Made from real dumps, with shards consistent by construction:

* the **logical run** is the real TP1 dump (``parallel/tp1``) grown to ``--layers`` transformer layers:
  layer g copies the records of real layer ``g % 4``; module ids take the new layer index, API call
  counters are renumbered in execution order (a backward call keeps its forward twin's number);
* which tensor of a call is **split** (and along which dimension), **replicated** or a **partial sum**
  is read from the real TP2 job (``parallel/tp2``): a TP2 tensor of another shape than its TP1 twin is
  split where the shapes differ, one holding other values on the two ranks is partial, the rest
  replicated; the TP2 job also says where each ``all_reduce`` sits (after the call it sums);
* each rank gets its stage's layers (local numbering from 0, ``Module.<chunk>.`` ids with ``--vpp``),
  the model's containers (``GPTModel``, ``TransformerBlock``), embedding on the first virtual stage,
  head and loss on the last; ``irecv``/``isend`` records carry activations and gradients between
  virtual stages; its split tensors get slices whose statistics combine exactly into the logical
  ones (one slice holds the Max, another the Min, means averaging to the Mean, Norm^2 summing to
  Norm^2), partial sums a part of the whole, replicated tensors a copy;
* split dimensions that ``--tp`` does not divide are widened in both runs (4 heads become 8 for TP8).

The baseline is the logical run as one rank. ``--perturb RANK:LAYER`` scales Max and Min of the
``weight.t()`` call (and the weight) of that layer's first column-parallel linear on that rank by 1.25.

Usage::

    .venv/bin/python bench/make_parallel_job.py --out /tmp/graphcmp_parallel/tp8pp8 --tp 8 --pp 8 --layers 32
    # writes OUT/npu/step0/rank<r>/{dump,construct}.json (tp*pp ranks) and OUT/bench/step0/rank0/

A benchmark helper, not part of the package (it uses graphcmp only to read the real dumps).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphcmp.core.distributed.stitch import StageRun, _phases  # noqa: E402
from graphcmp.core.readers import read_graph  # noqa: E402
from graphcmp.core.records import DumpGraph, NodeKind  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "msprobe" / "dumps" / "parallel"
_LAYER = re.compile(r"\.layers\.(\d+)\.")
_API = re.compile(r"^(?P<name>[A-Za-z_]\w*\..+)\.(?P<n>\d+)\.(?P<dir>forward|backward)$")
SOURCE_LAYERS = 4


@dataclass
class Row:
    """One call of the logical run."""

    id: str
    source: str  # its id in the TP1 dump
    parent: str | None
    micro: int
    backward: bool
    layer: int | None  # global layer, None outside the layers
    container: bool  # holds layers (the model root, the transformer block)


def leaves(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    """(path, tensor record) of every tensor in a dump record."""
    if isinstance(value, dict) and value.get("type") == "torch.Tensor":
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from leaves(item, (*path, i))


def set_leaf(record: Any, path: tuple, leaf: dict) -> None:
    for key in path[:-1]:
        record = record[key]
    record[path[-1]] = leaf


# ---------------------------------------------------------------------------------------------- the logical run
def layer_of(graph: DumpGraph, row: int) -> int | None:
    m = _LAYER.search(graph.nodes.ids[row])
    while m is None and row > 0:
        row = int(graph.nodes.parent[row])
        m = _LAYER.search(graph.nodes.ids[row]) if row > 0 else None
    return int(m.group(1)) if m else None


def logical_rows(tp1: DumpGraph, layers: int) -> list[Row]:
    """The TP1 run grown to `layers` layers, in execution order, with logical ids."""
    phase, _ = _phases(StageRun(0, (0,), tp1))
    kinds, ids = tp1.nodes.kind, tp1.nodes.ids
    holders = {int(tp1.nodes.parent[r]) for r in range(1, len(tp1)) if layer_of(tp1, r) is not None
               and layer_of(tp1, int(tp1.nodes.parent[r])) is None}
    containers = set()
    for row in holders:
        while row > 0:
            containers.add(row)
            row = int(tp1.nodes.parent[row])
    blocks: dict[tuple[int, int], list[int]] = {}
    for row in range(1, len(tp1)):
        if kinds[row] != NodeKind.GROUP:
            blocks.setdefault(phase[row], []).append(row)
    rows: list[Row] = []
    for (micro, direction), members in sorted(blocks.items()):
        backward = direction == 1
        runs = [r for r in members if layer_of(tp1, r) is not None]
        first, last = members.index(runs[0]), members.index(runs[-1])
        by_layer: dict[int, list[int]] = {}
        for r in runs:
            by_layer.setdefault(layer_of(tp1, r), []).append(r)  # type: ignore[arg-type]
        order = range(layers - 1, -1, -1) if backward else range(layers)
        grown = [(g, r) for g in order for r in by_layer[g % SOURCE_LAYERS]]
        for g, r in [(None, r) for r in members[:first]] + grown + [(None, r) for r in members[last + 1:]]:
            up = int(tp1.nodes.parent[r])
            parent = None if up <= 0 or kinds[up] == NodeKind.GROUP else ids[up]
            rows.append(Row(ids[r], ids[r], parent, micro, backward, g, r in containers))
    _rename(rows)
    return rows


def _rename(rows: list[Row]) -> None:
    """Module ids take the global layer; API counters follow execution order (backward keeps its forward's)."""
    def module_id(node_id: str, g: int | None) -> str:
        return node_id if g is None else _LAYER.sub(f".layers.{g}.", node_id, count=1)

    numbers: dict[tuple, int] = {}
    following: dict[str, int] = {}
    renamed: dict[tuple[str, int | None], str] = {}
    for row in rows:
        m = _API.match(row.source)
        if m is None:
            new = module_id(row.source, row.layer)
        else:
            key = (m["name"], row.layer, int(m["n"]))
            if key not in numbers:
                numbers[key] = following.get(m["name"], 0)
                following[m["name"]] = numbers[key] + 1
            new = f"{m['name']}.{numbers[key]}.{m['dir']}"
        renamed[(row.source, row.layer)] = new
        row.id = new
    for row in rows:
        if row.parent is not None:
            parent_layer = row.layer if _LAYER.search(row.parent) else None
            row.parent = renamed.get((row.parent, parent_layer), module_id(row.parent, parent_layer))


# ---------------------------------------------------------------------------------------------- TP kinds
def tp_kinds(tp1: dict, tp2: list[dict]) -> dict[tuple[str, tuple], tuple[str, int]]:
    """(TP1 id, tensor path) -> ("split", dim) | ("partial", -1) | ("replicated", -1), learned from the TP2 job."""
    kinds = {}
    for node_id, record in tp1.items():
        twins = [t.get(node_id) for t in tp2]
        if any(t is None for t in twins):
            continue
        full = dict(leaves(record))
        parts = [dict(leaves(t)) for t in twins]
        for path, leaf in full.items():
            local = [p.get(path) for p in parts]
            if any(x is None for x in local):
                continue
            if local[0]["shape"] != leaf["shape"]:
                dim = next(d for d, (a, b) in enumerate(zip(local[0]["shape"], leaf["shape"])) if a != b)
                kinds[(node_id, path)] = ("split", dim)
            elif any(local[0].get(s) != local[1].get(s) for s in ("Max", "Min", "Mean", "Norm")):
                kinds[(node_id, path)] = ("partial", -1)
            else:
                kinds[(node_id, path)] = ("replicated", -1)
    return kinds


def reduce_sites(tp2: dict, tp2_construct: dict) -> set[str]:
    """TP1 ids of the calls whose output an all_reduce sums: in the TP2 job, the call of the all_reduce's module
    whose output holds the statistics of the all_reduce's input."""
    def fingerprint(leaf: dict) -> tuple:
        return (tuple(leaf.get("shape") or ()), *(leaf.get(k) for k in ("Max", "Min", "Mean", "Norm")))

    outputs: dict[tuple[str | None, tuple], str] = {}
    for node_id, record in tp2.items():
        out = next((leaf for path, leaf in leaves(record) if path[0] == "output"), None)
        if out is not None and not node_id.startswith("Distributed."):
            outputs.setdefault((tp2_construct.get(node_id), fingerprint(out)), node_id)
    sites = set()
    for node_id, record in tp2.items():
        if node_id.startswith("Distributed.all_reduce"):
            inp = next(leaf for path, leaf in leaves(record) if path[0] == "input_args")
            site = outputs.get((tp2_construct.get(node_id), fingerprint(inp)))
            if site is not None:
                sites.add(site)
    return sites


def widen(shape: list[int], dim: int, tp: int) -> list[int]:
    """The logical shape with split dimension `dim` widened until `tp` divides it."""
    out = list(shape)
    out[dim] *= tp // math.gcd(out[dim], tp)
    return out


def slice_leaf(leaf: dict, dim: int, tp: int, index: int) -> dict:
    """Slice `index` of `tp`: statistics that combine exactly into `leaf`'s."""
    out = dict(leaf)
    logical = widen(leaf["shape"], dim, tp)
    out["shape"] = [s // tp if d == dim else s for d, s in enumerate(logical)]
    hi, lo, mean, norm = leaf["Max"], leaf["Min"], leaf["Mean"], leaf["Norm"]
    if hi is None or lo is None:
        return out
    finite = [x for x in (hi, lo) if math.isfinite(x)]
    spread = (max(finite) - min(finite) or abs(finite[0]) or 1.0) / (4 * tp) if finite else 0.0
    if math.isfinite(hi):  # a non-finite extreme (a masked -inf in every head) is in every slice
        out["Max"] = hi - spread * index
    if math.isfinite(lo):
        out["Min"] = lo + spread * (tp - 1 - index)
    if mean is not None and math.isfinite(mean):
        out["Mean"] = mean + spread * 1e-3 * (index - (tp - 1) / 2)
    if norm is not None:
        out["Norm"] = norm / math.sqrt(tp)
    return out


def partial_leaf(leaf: dict, tp: int, index: int) -> dict:
    out = dict(leaf)
    for stat in ("Max", "Min", "Mean"):
        if out.get(stat) is not None:
            out[stat] = out[stat] / tp * (1 + 0.01 * index)
    if out.get("Norm") is not None:
        out["Norm"] = out["Norm"] / math.sqrt(tp)
    return out


# ---------------------------------------------------------------------------------------------- writing
@dataclass
class Job:
    tp: int
    pp: int
    vpp: int
    layers: int
    dp: int = 1

    @property
    def virtual(self) -> int:
        return self.pp * self.vpp

    def layers_of(self, v: int) -> range:
        per = self.layers // self.virtual
        return range(v * per, (v + 1) * per)

    def rank(self, tp_rank: int, v: int, dp_rank: int = 0) -> int:
        """Megatron's order tp-cp-ep-dp-pp: TP fastest, then data-parallel replicas, then stages."""
        return tp_rank + self.tp * (dp_rank + self.dp * (v % self.pp))


class RankWriter:
    """Records of one rank in its own execution order: local layer numbers, own counters, chunk prefixes."""

    def __init__(self, job: Job, tp_rank: int, stage: int, dp_rank: int = 0) -> None:
        self.job, self.tp_rank, self.stage, self.dp_rank = job, tp_rank, stage, dp_rank
        self.data: dict[str, Any] = {}
        self.construct: dict[str, str | None] = {}
        self.counters: dict[str, int] = {}
        self.numbers: dict[tuple[str, str], int] = {}
        self.names: dict[str, str] = {}

    def local_id(self, node_id: str, chunk: int, first_layer: int) -> str:
        m = _API.match(node_id)
        if m:
            key = (m["name"], f"{m['n']}")
            if key not in self.numbers:
                self.numbers[key] = self.counters.get(m["name"], 0)
                self.counters[m["name"]] = self.numbers[key] + 1
            return f"{m['name']}.{self.numbers[key]}.{m['dir']}"
        local = _LAYER.sub(lambda g: f".layers.{int(g.group(1)) - first_layer}.", node_id, count=1)
        return local.replace("Module.", f"Module.{chunk}.", 1) if self.job.vpp > 1 else local

    def add(self, node_id: str, parent: str | None, record: dict | None, construct: bool = True) -> None:
        if construct:
            self.construct[node_id] = parent
        if record is not None:
            self.data[node_id] = record

    def p2p(self, op: str, peer: int, leaf: dict) -> None:
        pp_group = [self.job.rank(self.tp_rank, s, self.dp_rank) for s in range(self.job.pp)]
        group = {"type": "torch.ProcessGroup", "group_ranks": pp_group, "group_id": f"pp{self.tp_rank}"}
        name = f"Distributed.{op}"
        node_id = f"{name}.{self.counters.get(name, 0)}.forward"
        self.counters[name] = self.counters.get(name, 0) + 1
        key = "dst" if op == "isend" else "src"
        record = {"input_args": [dict(leaf) if op == "isend" else None],
                  "input_kwargs": {key: {"type": "int", "value": peer}, "group": group},
                  "output": [dict(leaf) if op == "irecv" else None, {"type": "int", "value": peer}, group]}
        self.add(node_id, None, record)


def write_job(out: Path, rows: list[Row], tp1_data: dict, kinds: dict, sites: set[str], job: Job,
              perturb: tuple[int, int] | None) -> None:
    for dp_rank, tp_rank, stage in ((d, t, s) for d in range(job.dp) for t in range(job.tp) for s in range(job.pp)):
        writer = RankWriter(job, tp_rank, stage, dp_rank)
        for micro in sorted({r.micro for r in rows}):
            for backward in (False, True):
                chunks = range(job.vpp - 1, -1, -1) if backward else range(job.vpp)
                for chunk in chunks:
                    _write_block(writer, rows, tp1_data, kinds, sites, micro, backward, chunk * job.pp + stage,
                                 perturb)
        folder = out / "step0" / f"rank{job.rank(tp_rank, stage, dp_rank)}"
        folder.mkdir(parents=True, exist_ok=True)
        header = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None}
        (folder / "dump.json").write_text(json.dumps({**header, "data": writer.data}, separators=(",", ":")))
        (folder / "construct.json").write_text(json.dumps(writer.construct, separators=(",", ":")))


def _write_block(writer: RankWriter, rows: list[Row], tp1_data: dict, kinds: dict, sites: set[str], micro: int,
                 backward: bool, v: int, perturb: tuple[int, int] | None) -> None:
    job = writer.job
    mine = job.layers_of(v)
    block = [r for r in rows if r.micro == micro and r.backward == backward]
    first_layer_row = next(i for i, r in enumerate(block) if r.layer is not None)
    last_layer_row = max(i for i, r in enumerate(block) if r.layer is not None)
    opening, closing = (0, job.virtual - 1) if not backward else (job.virtual - 1, 0)
    edge_in = [r for r in block if r.layer == (mine[0] if not backward else mine[-1]) and r.parent
               and not _LAYER.search(r.parent)]
    if v != opening and edge_in:  # receive what the neighbouring virtual stage computed
        leaf = _first_tensor(tp1_data, edge_in[0].source, "input")
        writer.p2p("irecv", job.rank(writer.tp_rank, v - 1 if not backward else v + 1, writer.dp_rank), leaf)
    local = {}
    for i, row in enumerate(block):
        if row.layer is not None and row.layer not in mine:
            continue
        if row.layer is None and not row.container:
            keep = (i < first_layer_row and v == opening) or (i > last_layer_row and v == closing)
            if not keep:
                continue
        node_id = writer.local_id(row.id, v // job.pp, mine[0])
        local[row.id] = node_id
        parent = local.get(row.parent) if row.parent else None
        record = tp1_data.get(row.source)
        if record is not None:
            record = _rank_record(record, row, kinds, job.tp, writer.tp_rank, perturb,
                                  job.rank(writer.tp_rank, v, writer.dp_rank))
        writer.add(node_id, parent, record, construct=".parameters_grad" not in row.id)
        if row.source in sites and job.tp > 1:
            _all_reduce(writer, row, tp1_data, parent)
    edge_out = [r for r in block if r.layer == (mine[-1] if not backward else mine[0]) and r.parent
                and not _LAYER.search(r.parent)]
    if v != closing and edge_out:
        leaf = _first_tensor(tp1_data, edge_out[-1].source, "output")
        writer.p2p("isend", job.rank(writer.tp_rank, v + 1 if not backward else v - 1, writer.dp_rank), leaf)


def _first_tensor(data: dict, node_id: str, part: str) -> dict:
    record = data[node_id]
    key = next(k for k in record if k.startswith(part))
    return next(leaf for _, leaf in leaves(record[key]))


def _rank_record(record: dict, row: Row, kinds: dict, tp: int, tp_rank: int, perturb: tuple[int, int] | None,
                 rank: int) -> dict:
    out = json.loads(json.dumps(record))
    for path, leaf in list(leaves(record)):
        kind, dim = kinds.get((row.source, path), ("replicated", -1))
        if kind == "split":
            new = slice_leaf(leaf, dim, tp, tp_rank) if tp > 1 else dict(leaf, shape=widen(leaf["shape"], dim, 1))
        elif kind == "partial" and tp > 1:
            new = partial_leaf(leaf, tp, tp_rank)
        else:
            new = dict(leaf)
        if perturb == (rank, row.layer) and _first_column_weight(row, path, kind):
            new = dict(new, Max=new["Max"] * 1.25, Min=new["Min"] * 1.25)
        set_leaf(out, path, new)
    return out


def _first_column_weight(row: Row, path: tuple, kind: str) -> bool:
    """The weight (and its transpose) of a layer's first column-parallel linear: qkv."""
    if kind != "split":
        return False
    if "linear_qkv" in row.id and path[:2] == ("parameters", "weight"):
        return True
    parent = row.parent or ""
    return row.source.startswith("Tensor.t.") and "linear_qkv" in parent and ".forward." in parent


def _all_reduce(writer: RankWriter, row: Row, tp1_data: dict, parent: str | None) -> None:
    """The all_reduce that sums the partial output of `row`, right after it in its module (as in the TP2 job)."""
    record = tp1_data[row.source]
    key = next(k for k in record if k.startswith("output"))
    full = next(leaf for _, leaf in leaves(record[key]))
    tp = writer.job.tp
    group_ranks = [writer.job.rank(i, writer.stage, writer.dp_rank) for i in range(tp)]
    group = {"type": "torch.ProcessGroup", "group_ranks": group_ranks, "group_id": f"tp{group_ranks[0]}"}
    name = "Distributed.all_reduce"
    node_id = f"{name}.{writer.counters.get(name, 0)}.forward"  # also in a backward: a call made by autograd
    writer.counters[name] = writer.counters.get(name, 0) + 1
    writer.add(node_id, parent, {"input_args": [partial_leaf(full, tp, writer.tp_rank)],
                                 "input_kwargs": {"group": group}, "output": [dict(full), group]})


def bench_copy(out: Path, rows: list[Row], tp1_data: dict, kinds: dict, tp: int) -> None:
    """The logical run as one rank, its split dimensions widened as in the job."""
    data, construct = {}, {}
    for row in rows:
        record = tp1_data.get(row.source)
        if record is not None:
            record = json.loads(json.dumps(record))
            for path, leaf in list(leaves(record)):
                kind, dim = kinds.get((row.source, path), ("replicated", -1))
                if kind == "split":
                    set_leaf(record, path, dict(leaf, shape=widen(leaf["shape"], dim, tp)))
            data[row.id] = record
        if ".parameters_grad" not in row.id:
            construct[row.id] = row.parent
    folder = out / "step0" / "rank0"
    folder.mkdir(parents=True, exist_ok=True)
    header = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None}
    (folder / "dump.json").write_text(json.dumps({**header, "data": data}, separators=(",", ":")))
    (folder / "construct.json").write_text(json.dumps(construct, separators=(",", ":")))


def make_job(out: Path, *, tp: int, pp: int, vpp: int = 1, layers: int, dp: int = 1,
             perturb: tuple[int, int] | None = None, source: Path = SHARED) -> dict[str, int]:
    """Write OUT/npu (the job) and OUT/bench (its logical run as one rank); return their sizes."""
    if layers % (pp * vpp):
        raise SystemExit(f"--layers {layers} is not a multiple of pp * vpp = {pp * vpp}")
    tp1_dir = source / "tp1" / "step0" / "rank0"
    tp1 = read_graph(tp1_dir)
    tp1_data = json.loads((tp1_dir / "dump.json").read_text())["data"]
    tp2 = [json.loads((source / "tp2" / "step0" / f"rank{r}" / "dump.json").read_text())["data"] for r in (0, 1)]
    tp2_construct = json.loads((source / "tp2" / "step0" / "rank0" / "construct.json").read_text())
    rows = logical_rows(tp1, layers)
    kinds = tp_kinds(tp1_data, tp2)
    sites = reduce_sites(tp2[0], tp2_construct)
    job = Job(tp, pp, vpp, layers, dp)
    write_job(out / "npu", rows, tp1_data, kinds, sites, job, perturb)
    bench_copy(out / "bench", rows, tp1_data, kinds, tp)
    return {"ranks": tp * pp * dp, "logical_calls": len(rows)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--tp", type=int, default=8)
    ap.add_argument("--pp", type=int, default=8)
    ap.add_argument("--vpp", type=int, default=1)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--dp", type=int, default=1, help="data-parallel replicas (each an exact copy)")
    ap.add_argument("--perturb", help="RANK:LAYER, e.g. 13:20")
    ap.add_argument("--source", type=Path, default=SHARED, help="the shared parallel dumps (tp1, tp2)")
    a = ap.parse_args()
    perturb = tuple(int(x) for x in a.perturb.split(":")) if a.perturb else None
    sizes = make_job(a.out, tp=a.tp, pp=a.pp, vpp=a.vpp, layers=a.layers, dp=a.dp, perturb=perturb,  # type: ignore[arg-type]
                     source=a.source)
    print(json.dumps(sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
