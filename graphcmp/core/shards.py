"""Per-shard records of a merged graph: the rank records each logical tensor was built from.

A graph merged from the ranks of a tensor/pipeline-parallel job (`graphcmp.core.distributed.merge`)
holds one logical tensor per row. `ShardTable` keeps, for every such row, the records it came from
(one per rank: statistics, local shape, the node id in that rank's own dump) and how they combine:

* ``single``: held by one rank (pipeline stages, TP=1);
* ``replicated``: every rank of the tensor-parallel group must hold the same values (LayerNorm
  weights, all_reduce outputs); the row shows one replica, the others are kept for checks;
* ``split``: each rank holds a slice along `split_dim` (-1: the dimension is not known); the row's
  statistics are combined exactly (`combine_split`);
* ``partial``: a partial sum awaiting its all_reduce; the row shows the reduced value.

The node provenance (which ranks a merged node came from, its id in the first source rank's dump,
and its rank when a single one holds it) is in `NodeTable.attrs` under `RANKS_ATTR`,
`SOURCE_ID_ATTR` and `RANK_ATTR`. `attribute_rank` names the shard a divergence comes from when
the evidence is sound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphcmp.core.dtypes import normalize_dtype
from graphcmp.core.metrics import stat_rel_errors
from graphcmp.core.records import DumpGraph, FrozenColumns

__all__ = [
    "KIND_NAMES",
    "PARTIAL",
    "RANKS_ATTR",
    "RANK_ATTR",
    "REPLICATED",
    "SINGLE",
    "SOURCE_ID_ATTR",
    "SPLIT",
    "Provenance",
    "ShardTable",
    "attribute_rank",
    "combine_split",
    "dtype_eps",
    "node_provenance",
    "shape_text",
]

SINGLE, REPLICATED, SPLIT, PARTIAL = 0, 1, 2, 3
KIND_NAMES = {SINGLE: "single", REPLICATED: "replicated", SPLIT: "split", PARTIAL: "partial"}

RANKS_ATTR = "ranks"
"""Node attribute: the source ranks of a merged node, as ``"0,1"``."""
SOURCE_ID_ATTR = "source_id"
"""Node attribute: the node's id in its first source rank's own dump."""
RANK_ATTR = "rank"
"""Node attribute: the rank a merged node is attributed to, when a single rank holds it."""

_BF16_EPS = 2.0 ** -7  # 8 significant bits: numpy has no bfloat16


@dataclass(frozen=True, slots=True, eq=False)
class ShardTable(FrozenColumns):
    """The rank records of every tensor row of a merged graph (shard rows sorted by tensor row).

    Attributes
    ----------
    tensor : ndarray of int32
        Tensor row (in the merged graph) each shard belongs to, ascending.
    rank : ndarray of int32
        Rank that holds the shard.
    stats, present : ndarray
        The shard's own statistics (n, 4) in `STAT_NAMES` order and which of them were recorded.
    shape : tuple of str
        The shard's local shape as the rank dumped it.
    node : tuple of str
        Id of the node in that rank's own dump.
    file : tuple of str
        Path of the shard's tensor file (tensor task), ``""`` when there is none.
    kind : ndarray of int8
        Per tensor row of the merged graph: `SINGLE`, `REPLICATED`, `SPLIT` or `PARTIAL`.
    split_dim : ndarray of int8
        Per tensor row: the dimension a split tensor is cut along; -1 when not split or not known.
    error : ndarray of float64, optional
        Per shard, the Euclidean relative distance of the shard's tensor to the matching slice of the
        bench tensor (tensor task, measured by the comparison); None or NaN where not measured.
    """

    tensor: np.ndarray
    rank: np.ndarray
    stats: np.ndarray
    present: np.ndarray
    shape: tuple[str, ...]
    node: tuple[str, ...]
    file: tuple[str, ...]
    kind: np.ndarray
    split_dim: np.ndarray
    error: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.tensor)

    def rows(self, tensor_row: int) -> np.ndarray:
        """Shard rows of one merged tensor row."""
        return np.arange(np.searchsorted(self.tensor, tensor_row), np.searchsorted(self.tensor, tensor_row, "right"))

    def ranks_of(self, tensor_row: int) -> list[int]:
        """Ranks holding one merged tensor row."""
        return self.rank[self.rows(tensor_row)].tolist()

    def disagreeing(self) -> np.ndarray:
        """Tensor rows that are replicated but whose replicas are not all identical."""
        replicated = np.flatnonzero(self.kind == REPLICATED)
        if not len(replicated):
            return replicated
        first = np.searchsorted(self.tensor, replicated)
        out = []
        for t, start in zip(replicated.tolist(), first.tolist()):
            stop = int(np.searchsorted(self.tensor, t, "right"))
            if stop - start > 1 and not _all_same(self.stats[start:stop], self.present[start:stop]):
                out.append(t)
        return np.array(out, np.int64)


def _all_same(stats: np.ndarray, present: np.ndarray) -> bool:
    ref, ref_present = stats[0], present[0]
    same = (stats == ref) | (np.isnan(stats) & np.isnan(ref)) | ~(present & ref_present)
    return bool(same.all() and (present == ref_present).all())


def combine_split(stats: np.ndarray, present: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Statistics of a tensor from those of its disjoint slices: Max of Max, Min of Min, Norm = sqrt(sum
    Norm^2), Mean weighted by element count. A statistic is present when every slice recorded it.

    Parameters
    ----------
    stats, present : ndarray, shape (k, 4) or (k, m, 4)
        One row per slice (`STAT_NAMES` order), for one tensor or for m tensors at once.
    counts : ndarray, shape (k,) or (k, m)
        Elements in each slice (from its shape).

    Examples
    --------
    >>> s = np.array([[2.0, -1.0, 0.5, 3.0], [1.0, -4.0, -0.5, 4.0]])
    >>> combine_split(s, np.ones((2, 4), bool), np.array([2, 2]))[0].tolist()
    [2.0, -4.0, 0.0, 5.0]
    """
    stats = np.asarray(stats, np.float64)
    counts = np.asarray(counts, np.float64)
    total = counts.sum(axis=0)
    weights = np.where(total > 0, counts / np.where(total > 0, total, 1.0), 1.0 / max(len(counts), 1))
    with np.errstate(invalid="ignore", over="ignore"):
        out = np.stack([stats[..., 0].max(axis=0), stats[..., 1].min(axis=0), (stats[..., 2] * weights).sum(axis=0),
                        np.sqrt((stats[..., 3] ** 2).sum(axis=0))], axis=-1)
    return out, np.asarray(present, bool).all(axis=0)


def dtype_eps(name: str) -> float:
    """Relative spacing of floating-point numbers of a dtype (0 for integer and unknown types).

    >>> dtype_eps("torch.bfloat16"), dtype_eps("torch.float32") == float(np.finfo(np.float32).eps)
    (0.0078125, True)
    """
    text = normalize_dtype(name)
    if text == "bfloat16":
        return _BF16_EPS
    try:
        return float(np.finfo(np.dtype(text)).eps) if "float" in text else 0.0
    except TypeError:
        return 0.0


def shape_text(dims: Sequence[int]) -> str:
    """The shape as readers write it.

    >>> shape_text((2, 16, 64))
    '[2, 16, 64]'
    """
    return "[" + ", ".join(str(int(d)) for d in dims) + "]"


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a merged node came from."""

    ranks: tuple[int, ...]
    source_id: str | None
    rank: int | None


def node_provenance(graph: DumpGraph, row: int) -> Provenance:
    """The source ranks, first-source id and (single) rank of a merged node; empty for other graphs.

    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> node_provenance(parse_msprobe({"data": {"Functional.relu.0.forward": {}}}), 1)
    Provenance(ranks=(), source_id=None, rank=None)
    """
    attrs = dict(graph.nodes.attrs[row]) if graph.nodes.attrs else {}
    ranks = tuple(int(r) for r in attrs.get(RANKS_ATTR, "").split(",") if r)
    rank = attrs.get(RANK_ATTR)
    return Provenance(ranks, attrs.get(SOURCE_ID_ATTR), int(rank) if rank else None)


def attribute_rank(
    npu: DumpGraph, bench: DumpGraph, npu_rows: np.ndarray, bench_rows: np.ndarray, tolerance: float
) -> int | None:
    """The rank whose shard a divergence at one merged node comes from, when the evidence is sound.

    Evidence, per tensor pair of the node (`npu_rows[k]` merged npu tensor, `bench_rows[k]` its bench
    tensor): a slice of a split tensor whose Max is above the bench tensor's Max, or whose Min is
    below its Min, by more than the noise (a slice cannot leave the range of the whole), or in the tensor
    task the one slice whose tensor differs from its slice of the bench tensor (`ShardTable.error`); or, for a
    replicated tensor whose replicas disagree, the one replica that differs from the bench by more
    than the noise and more than every other replica does. The noise is `tolerance` or the rounding
    step of either dtype, whichever is larger, relative to the tensor's magnitude. The answer is the
    one rank all evidence names; None when there is none or it names several ranks.

    Parameters
    ----------
    npu : DumpGraph
        The merged npu graph (its `shards` are read; a graph without shards gives None).
    bench : DumpGraph
        The bench graph.
    npu_rows, bench_rows : ndarray
        Paired tensor rows of the node.
    tolerance : float
        Relative difference beyond noise (unitless; the divergence analysis gives the noise model's origin margin
        times the node's unit roundoff).
    """
    shards: ShardTable | None = getattr(npu, "shards", None)
    if shards is None or not len(npu_rows):
        return None
    named: set[int] = set()
    for i, j in zip(np.asarray(npu_rows).tolist(), np.asarray(bench_rows).tolist()):
        rows = shards.rows(i)
        if len(rows) < 2:
            continue
        noise = max(tolerance, dtype_eps(npu.tensors.dtype[i]), dtype_eps(bench.tensors.dtype[j]))
        kind = int(shards.kind[i])
        if kind == SPLIT and shards.error is not None and not np.isnan(shards.error[rows]).all():
            named.update(_worst_slice(shards, rows, noise))
        elif kind == SPLIT:
            named.update(_out_of_range(shards, rows, bench.tensors.stats[j], bench.tensors.present[j], noise))
        elif kind == REPLICATED:
            named.update(_odd_replica(shards, rows, bench.tensors.stats[j], bench.tensors.present[j], noise))
    return named.pop() if len(named) == 1 else None


def _out_of_range(shards: ShardTable, rows: np.ndarray, bench: np.ndarray, present: np.ndarray,
                  noise: float) -> list[int]:
    if not (present[0] and present[1]):
        return []
    scale = max(abs(bench[0]), abs(bench[1]))
    if not np.isfinite(scale) or scale == 0:
        return []
    stats, have = shards.stats[rows], shards.present[rows]
    with np.errstate(invalid="ignore"):
        above = have[:, 0] & ((stats[:, 0] - bench[0]) / scale > noise)
        below = have[:, 1] & ((bench[1] - stats[:, 1]) / scale > noise)
    return shards.rank[rows[above | below]].tolist()


def _worst_slice(shards: ShardTable, rows: np.ndarray, noise: float) -> list[int]:
    """The one shard whose tensor departs from its slice of the bench tensor by more than the noise."""
    err = shards.error[rows]  # type: ignore[index]
    bad = np.flatnonzero(~np.isnan(err) & (err > noise))
    return [int(shards.rank[rows[bad[0]]])] if len(bad) == 1 else []


def _odd_replica(shards: ShardTable, rows: np.ndarray, bench: np.ndarray, present: np.ndarray,
                 noise: float) -> list[int]:
    stats = shards.stats[rows]
    err = stat_rel_errors(stats, np.broadcast_to(bench, stats.shape), shards.present[rows] & present,
                          atol=0.0, magnitude_floor=0.0).max(axis=1)
    worst = float(err.max())
    bad = np.flatnonzero(err == worst)
    others = err[err < worst]
    rest = float(others.max()) if len(others) else 0.0
    if worst > noise and worst - rest > noise and len(bad) == 1:
        return [int(shards.rank[rows[bad[0]]])]
    return []
