"""`naming.parse_node_ids` compiled: msprobe node ids held as one UTF-8 buffer parsed into columns.

A reader that holds all node ids of a dump as one bytes buffer (the ids joined by ``\\n``, with the start and end
offset of each) parses them here without a Python string per id: one compiled pass decides every id that
`naming.parse_node_ids` decides by its fast rule (plain ASCII ``<api>.<name>.<n>.<dir>``,
``<Module>.<path>.<cls>.<dir>.<n>``, ``<Module>.<path>.<cls>.parameters_grad.<n>``), reads its call counter from the
digits and finds its op (the third dotted part from the end) in a hash table keyed by the op's bytes, so that a
Python string is made once per distinct op. Every other id (non-ASCII, another shape, a counter of more than 18
digits) goes to `parse_node_ids` itself as a string. The columns are those `parse_node_ids` gives, element by
element.

The kernel is in `naming_kernels`, loaded as a `KernelSet` (built ahead of time: milliseconds, no numba; else numba,
0.2-0.45 s once per process and 0.1-0.2 s loading the cached kernel): a million ids take 0.06 s of processor time
here from a buffer and 0.16 s from a list of str (joined first), against 0.54 s in `parse_node_ids`
(`bench/bench_names.py`). The readers take it after a compiled read of dump.json; small inputs keep `parse_node_ids`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from sys import intern
from typing import Any

import numpy as np

from graphcmp.core.compiled import KernelSet
from graphcmp.core.id_kernels import joined_ids
from graphcmp.core.readers.naming import parse_node_ids

__all__ = ["KERNELS", "parse_id_columns", "parse_joined"]


def _kernel_dispatchers() -> dict[str, Any]:
    from graphcmp.core.readers.naming_kernels import dispatchers  # see tests/test_layers.py: LAZY_IMPORTS

    return dispatchers()


KERNELS = KernelSet("naming", Path(__file__).with_name("naming_kernels.py"),
                    {"parse_spans": ("Tuple((i1[::1], i1[::1], i8[::1], i8[::1], i8[::1], i8[::1]))",
                                     ("u1[::1]", "i8[::1]", "i8[::1]"))}, _kernel_dispatchers)
"""The parser's kernels; `msprobe_scan` builds and loads them with its own."""


def parse_id_columns(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, ids: Sequence[str] | None = None,
                     ) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """`naming.parse_node_ids` of the ids held at bytes [starts, ends) of `buf`, as columns: (kind codes, ops,
    direction codes, call counters), equal element by element to what `parse_node_ids(ids, counters=counters)`
    gives (kinds, ops, directions, counters).

    Parameters
    ----------
    buf
        uint8 array of the ids' UTF-8 bytes (usually joined by ``\\n``; an id holding a newline is read as
        `parse_node_ids` reads it).
    starts, ends
        int64 arrays: id ``i`` is ``buf[starts[i]:ends[i]]``.
    ids
        The ids as strings, if the caller has them: those the compiled pass leaves to `parse_node_ids` are taken
        from here instead of being decoded from `buf`.

    Returns
    -------
    kinds : int8 array of `NodeKind` codes
    ops : list of str, each distinct op one interned string (``sys.intern``)
    directions : int8 array of `Direction` codes
    counters : int64 array of call counters (-1 for an id of no known shape)

    A counter beyond int64 (an id with a 19-digit or longer counter) raises OverflowError.

    >>> ids = ["Functional.linear.3.backward", "Module.fc.Linear.forward.0", "odd"]
    >>> kinds, ops, directions, counters = parse_joined(ids)
    >>> kinds.tolist(), ops, directions.tolist(), counters.tolist()
    ([2, 1, 2], ['linear', 'Linear', 'odd'], [1, 0, -1], [3, 0, -1])
    """
    buf = np.ascontiguousarray(buf, np.uint8)
    starts = np.ascontiguousarray(starts, np.int64)
    ends = np.ascontiguousarray(ends, np.int64)
    if starts.shape != ends.shape or starts.ndim != 1:
        raise ValueError(f"starts {starts.shape} and ends {ends.shape} must be one-dimensional and alike")
    if len(starts) and (starts.min() < 0 or ends.max() > len(buf) or np.any(ends < starts)):
        raise ValueError(f"spans outside the buffer of {len(buf)} bytes or ending before they start")
    kinds, directions, counters, codes, first_start, first_end = KERNELS.load().parse_spans(buf, starts, ends)
    data = buf.data
    table = [intern(str(data[a:b], "ascii")) for a, b in zip(first_start.tolist(), first_end.tolist())]
    left = np.flatnonzero(codes < 0)  # op code -1: left to parse_node_ids
    if len(left):
        _parse_left(left, buf, starts, ends, ids, (kinds, table, directions, counters, codes))
    return kinds, np.array(table, dtype=object)[codes].tolist(), directions, counters


def _parse_left(left: np.ndarray, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                ids: Sequence[str] | None, columns: tuple[np.ndarray, list[str], np.ndarray, np.ndarray, np.ndarray],
                ) -> None:
    """`parse_node_ids` of the ids at rows `left` into `columns` (kinds, op table, directions, counters, op codes):
    their ops are added to the table, each distinct op once."""
    kinds, table, directions, counters, codes = columns
    rows = left.tolist()
    if ids is not None:
        texts = [ids[r] for r in rows]
    else:
        data = buf.data
        texts = [str(data[starts[r]:ends[r]], "utf-8", "surrogatepass") for r in rows]
    found: list[int] = []
    left_kinds, left_ops, left_directions = parse_node_ids(texts, counters=found)
    kinds[left] = left_kinds
    directions[left] = left_directions
    counters[left] = np.array(found, dtype=np.int64)  # OverflowError beyond int64
    code_of = {op: code for code, op in enumerate(table)}
    for row, op in zip(rows, left_ops):
        code = code_of.get(op)
        if code is None:
            code = code_of[op] = len(table)
            table.append(op)  # interned by parse_node_ids
        codes[row] = code


def parse_joined(ids: Sequence[str]) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """`parse_id_columns` of `ids` given as strings, joined into one buffer first (`id_kernels.joined_ids`)."""
    if not len(ids):
        empty = np.empty(0, np.int64)
        return empty.astype(np.int8), [], empty.astype(np.int8), empty
    return parse_id_columns(*joined_ids(ids), ids)
