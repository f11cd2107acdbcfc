"""A run's node ids as one UTF-8 buffer (`joined_ids`), and the compiled lookups over it (`graphcmp.core.id_fused`),
taken where they are built ahead of time.

`forward_twin_rows` finds the forward call of every backward call of a million-node run by hashing the ids' bytes:
a Python string made per backward call and a dict of the forward ids took a second at 1M nodes, which the forked
reader of a comparison spent after its read while the other process waited for it (`bench/bench_twins.py`).

The kernels are a `KernelSet` (`graphcmp.core.compiled`) built with the compiled dump.json reader
(`readers.msprobe_scan.build_kernels`). Until they are built, `forward_twin_rows` returns None and its caller finds
the twins by strings: loading numba instead would cost more than it saves.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphcmp.core.compiled import KernelSet

__all__ = ["KERNELS", "IdIndex", "IdRows", "forward_twin_rows", "joined_ids"]

_BYTES, _SPANS = "u1[::1]", "i8[::1]"

SIGNATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "twin_rows": ("i8[::1]", (_BYTES, _SPANS, _SPANS, "i8[::1]")),
    "index": ("Tuple((i8[:, ::1], i8))", (_BYTES, _SPANS, _SPANS)),
    "rows_in": ("i8[::1]", ("i8[:, ::1]", _BYTES, _SPANS, _SPANS, _BYTES, _SPANS, _SPANS)),
}

PADDING = 8
"""Zero bytes after the last id of `joined_ids`' buffer: the kernels read eight bytes at a time."""


def _dispatchers() -> dict[str, Any]:
    from graphcmp.core.id_fused import dispatchers  # see tests/test_layers.py: LAZY_IMPORTS

    return dispatchers()


KERNELS = KernelSet("ids", Path(__file__).with_name("id_fused.py"), SIGNATURES, _dispatchers)


def joined_ids(ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`ids` as one uint8 buffer (joined by ``\\n``, UTF-8 with lone surrogates kept, `PADDING` zero bytes after
    the last) and the start and end of each id's bytes in it.

    The spans come from the newlines of the joined bytes (a non-ASCII id is longer in bytes than in characters);
    only when an id itself holds a newline are its bytes counted one id at a time.

    >>> buf, starts, ends = joined_ids(["a.0", "bé"])
    >>> [bytes(buf[s:e]).decode() for s, e in zip(starts, ends)], len(buf)
    (['a.0', 'bé'], 15)
    """
    n = len(ids)
    raw = "\n".join(ids).encode("utf-8", "surrogatepass")  # a lone surrogate (json allows one) is kept
    buf = np.zeros(len(raw) + PADDING, np.uint8)
    buf[:len(raw)] = np.frombuffer(raw, np.uint8)
    breaks = np.flatnonzero(buf[:len(raw)] == 10)
    if len(breaks) == n - 1:
        starts = np.empty(n, np.int64)
        starts[:1] = 0
        starts[1:] = breaks + 1
        ends = np.empty(n, np.int64)
        ends[:-1] = breaks
        ends[-1:] = len(raw)
        return buf, starts, ends
    lengths = np.fromiter((len(s.encode("utf-8", "surrogatepass")) for s in ids), np.int64, n)
    ends = np.cumsum(lengths + 1) - 1
    return buf, ends - lengths, ends


def forward_twin_rows(ids: Sequence[str], rows: np.ndarray) -> np.ndarray | None:
    """Per row of `rows` (into `ids`), the row of the id that is its id with the last ``.backward`` made
    ``.forward`` (the later one of equal ids); -1 when it holds no ``.backward`` or that id is not among `ids`. None
    where the kernels are not built (never numba, never a build here).

    >>> twins = forward_twin_rows(["m.forward.0", "m.backward.0", "x.backward"], np.array([1, 2]))
    >>> twins is None or twins.tolist() == [0, -1]
    True
    """
    if not KERNELS.built():
        return None
    rows = np.ascontiguousarray(rows, np.int64)
    if len(rows) and (rows.min() < 0 or rows.max() >= len(ids)):
        raise IndexError(f"rows outside the {len(ids)} ids")
    buf, starts, ends = joined_ids(ids)
    return KERNELS.load(build=False).twin_rows(buf, starts, ends, rows)


@dataclass(frozen=True, slots=True)
class IdIndex:
    """The ids at [starts, ends) of `buf` (8 readable bytes past the last) in a compiled hash table: the row of each
    of many ids found without a dict of them (a dict of a million ids took 0.55-0.67 s to build here, and looking a
    million others up in it 0.25-0.6 s). Make one with `IdIndex.of`."""

    buf: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    table: np.ndarray
    repeated: int
    """How many ids equal an earlier one (the later one's row is found, as in a dict built in row order)."""

    @classmethod
    def of(cls, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> IdIndex | None:
        """The index of the ids at [starts, ends) of `buf`; None where the kernels are not built."""
        if not KERNELS.built():
            return None
        if len(starts) and (int(starts.min()) < 0 or int(ends.max()) + PADDING > len(buf)):
            raise IndexError(f"spans outside the {len(buf) - PADDING} bytes of the ids")
        table, repeated = KERNELS.load(build=False).index(buf, starts, ends)
        return cls(buf, starts, ends, table, int(repeated))

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """The row of each of `ids` among the indexed ids (-1: not among them).

        >>> buf, starts, ends = joined_ids(["a", "bé", "c"])
        >>> index = IdIndex.of(buf, starts, ends)
        >>> index is None or index.rows_of(["c", "x", "bé"]).tolist() == [2, -1, 1]
        True
        """
        if not len(ids):
            return np.empty(0, np.int64)
        keys, key_starts, key_ends = joined_ids(ids)
        return KERNELS.load(build=False).rows_in(self.table, self.buf, self.starts, self.ends, keys, key_starts,
                                                 key_ends)


class IdRows(Mapping):
    """Ids and their rows (positions in `ids`), as ``dict(zip(ids, range(len(ids))))`` gives them, for ids whose
    rows are looked up many at once (`rows_of`: by their bytes, in an `IdIndex` of them). A dict of them is made
    only when an id is looked up by itself. The ids are distinct (`IdIndex.repeated` is 0).

    >>> buf, starts, ends = joined_ids(["a", "b"])
    >>> index = IdIndex.of(buf, starts, ends)
    >>> rows = IdRows(["a", "b"], index) if index is not None else {"a": 0, "b": 1}
    >>> list(rows), rows["b"], "c" in rows, rows.rows_of(["b", "c"]).tolist() if index else [1, -1]
    (['a', 'b'], 1, False, [1, -1])
    """

    __slots__ = ("_dict", "ids", "index")

    def __init__(self, ids: Sequence[str], index: IdIndex) -> None:
        if index.repeated or len(index.starts) != len(ids):
            raise ValueError("IdRows: the index holds other ids, or an id twice")
        self.ids, self.index, self._dict = ids, index, None

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """The row of each of `ids` (-1: not among them)."""
        return self.index.rows_of(ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __getitem__(self, node_id: str) -> int:
        if self._dict is None:
            self._dict = dict(zip(self.ids, range(len(self.ids))))
        return self._dict[node_id]
