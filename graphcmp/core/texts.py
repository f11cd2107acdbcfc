"""Text columns by their codes: what a reader hands over (`TextCodes`) and what a run holds (`CodedTexts`); and
columns known to hold no text twice (`UniqueTexts`).

A run's text columns (slots, dtypes, shapes ...) repeat a few values millions of times. Kept with their codes,
`graphcmp.core.records.string_codes` costs nothing, a run sent to another process carries narrow codes instead of
a reference per text, and the npz container (`graphcmp.core.npzio`) stores the codes as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CodedTexts", "TextCodes", "UniqueTexts", "code_dtype"]


@dataclass(frozen=True, slots=True)
class TextCodes:
    """A column of texts given as codes: `codes` index `values`, the distinct texts (in order of first appearance
    when `string_codes` made them). A reader hands text columns to `HierarchyBuilder.add_tensors` this way, and
    `graphcmp.core.npzio.write_npz` stores one exactly as the texts it stands for, without coding them again."""

    codes: np.ndarray
    values: Sequence[str]

    def texts(self) -> list[str]:
        return np.array(self.values, object)[self.codes].tolist() if len(self.codes) else []


@dataclass(frozen=True, slots=True)
class UniqueTexts:
    """A column of texts that are all different (a run's node ids), for `graphcmp.core.npzio.write_npz`: stored as the
    strings themselves, without counting how many differ (which a column of other texts needs to choose between
    strings and codes). Counting a million ids took 0.3 s, and in a forked writer it touched, and so copied, every
    page of them."""

    values: Sequence[str]


class CodedTexts(tuple):
    """A tuple of texts drawn from few distinct values that also holds their codes, so `string_codes` (which the
    comparison asks for each text column) costs nothing, and a pickled run carries the narrow codes, not a
    reference per text.

    It is a tuple in every other respect: equal to the plain tuple of the same texts, and slices are plain tuples.
    Make one with `CodedTexts.of`.

    >>> column = CodedTexts.of(np.array([1, 0, 1]), ["int64", "float32", "unused"])
    >>> column == ("float32", "int64", "float32"), column.names, column.codes.tolist()
    (True, ('float32', 'int64'), [0, 1, 0])
    """

    codes: np.ndarray  # narrow ints, read-only: per text, its row in `names`
    names: tuple[str, ...]  # the distinct texts in order of first appearance

    @classmethod
    def of(cls, codes: np.ndarray, names: Sequence[str]) -> CodedTexts:
        """The texts ``names[codes]``, renumbered so that the names are the distinct texts in order of first
        appearance (as `string_codes` gives them); names no code uses are dropped."""
        codes = np.asarray(codes)
        order = _first_seen(codes, len(names))
        if len(order) != len(names) or (order != np.arange(len(order))).any():
            renumber = np.zeros(len(names), np.int64)
            renumber[order] = np.arange(len(order))
            codes, names = renumber[codes], [names[k] for k in order.tolist()]
        return cls._made(codes.astype(code_dtype(len(names) - 1), copy=False), tuple(names))

    @classmethod
    def _made(cls, codes: np.ndarray, names: tuple[str, ...]) -> CodedTexts:
        if len(names) == 1:
            column = cls(names * len(codes))
        else:
            column = cls(np.array(names, object)[codes].tolist() if len(codes) else ())
        codes.flags.writeable = False
        column.codes, column.names = codes, names
        return column

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return CodedTexts._made, (self.codes, self.names)

    def wide_codes(self) -> np.ndarray:
        """The codes as int64 (what `string_codes` gives), read-only, made on each call and not kept: a column of a
        million-node run's 2.9M tensors takes 23 MB so, 8 times its narrow codes, and a comparison asks for a dozen
        columns (0.28 GB held to the end when each was kept); widening one takes a few milliseconds."""
        wide = self.codes.astype(np.int64)
        wide.flags.writeable = False
        return wide


def code_dtype(high: int) -> np.dtype:
    """The smallest of int8, int16, int32, int64 that holds every integer from -1 to `high` (codes into `high` + 1
    values, row numbers of a table of `high` + 1 rows with -1 for none).

    >>> [code_dtype(k).name for k in (0, 127, 128, 40_000, 2**31)]
    ['int8', 'int8', 'int16', 'int32', 'int64']
    """
    for dtype in (np.int8, np.int16, np.int32):
        if high <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def _first_seen(codes: np.ndarray, count: int) -> np.ndarray:
    """The codes in `codes` (each in ``range(count)``) in order of first appearance.

    Blocks of growing size are looked at until every used code is found, so a column whose values all
    appear early (nearly every one) costs one count and a few small sorts, not a sort of the whole column.
    """
    used = int(np.count_nonzero(np.bincount(codes, minlength=count))) if len(codes) else 0
    found: list[int] = []
    seen = np.zeros(count, bool)
    start, block = 0, 1024
    while len(found) < used:
        distinct, first = np.unique(codes[start:start + block], return_index=True)
        new = ~seen[distinct]
        found += distinct[new][np.argsort(first[new])].tolist()
        seen[distinct] = True
        start, block = start + block, block * 4
    return np.array(found, np.int64)
