"""Text columns by their codes: what a reader hands over (`TextCodes`) and what a run holds (`CodedTexts`); and
columns known to hold no text twice (`UniqueTexts`).

A run's text columns (slots, dtypes, shapes ...) repeat a few values millions of times. Kept with their codes,
`graphcmp.core.records.string_codes` costs nothing, a run sent to another process carries narrow codes instead of
a reference per text, and the npz container (`graphcmp.core.npzio`) stores the codes as they are.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CodedTexts", "TextCodes", "UniqueTexts", "code_dtype", "formatted"]


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


class CodedTexts(Sequence):
    """A column of texts drawn from few distinct values, held as their codes: `string_codes` (which the comparison
    asks for each text column) costs nothing, a pickled run carries the narrow codes, and no reference per text is
    held. A million-node run's six text columns took 138 MB as tuples (a pointer per text); a comparison holds two
    runs.

    It reads as the tuple of its texts: equal to that tuple, slices are plain tuples, numpy makes the same object
    array of it. Make one with `CodedTexts.of`.

    >>> column = CodedTexts.of(np.array([1, 0, 1]), ["int64", "float32", "unused"])
    >>> column == ("float32", "int64", "float32"), column.names, column.codes.tolist()
    (True, ('float32', 'int64'), [0, 1, 0])
    >>> column[-1], column[:2], list(column), column.count("float32")
    ('float32', ('float32', 'int64'), ['float32', 'int64', 'float32'], 2)
    """

    __slots__ = ("codes", "names")

    codes: np.ndarray  # narrow ints, read-only: per text, its row in `names`
    names: tuple[str, ...]  # the distinct texts in order of first appearance

    def __init__(self, codes: np.ndarray, names: tuple[str, ...]) -> None:
        self.codes, self.names = codes, names

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
        codes.flags.writeable = False
        return cls(codes, names)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return CodedTexts._made, (self.codes, self.names)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self._texts(self.codes[index]))
        return self.names[self.codes[index]]

    def __iter__(self) -> Iterator[str]:
        return map(self.names.__getitem__, self.codes.tolist())

    def __contains__(self, text: object) -> bool:
        return text in self.names  # every name is used (`of` drops the others)

    def count(self, text: Any) -> int:
        return int(np.count_nonzero(self.codes == self.names.index(text))) if text in self.names else 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CodedTexts):  # both numbered in order of first appearance (`of`): equal texts, equal codes
            return self.names == other.names and bool(np.array_equal(self.codes, other.codes))
        if isinstance(other, tuple):
            return len(self) == len(other) and tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: object) -> tuple:
        return tuple(self) + other if isinstance(other, tuple) else NotImplemented

    def __radd__(self, other: object) -> tuple:
        return other + tuple(self) if isinstance(other, tuple) else NotImplemented

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        texts = self._texts(self.codes)
        return texts if dtype is None else texts.astype(dtype)

    def __repr__(self) -> str:
        return repr(tuple(self))

    def _texts(self, codes: np.ndarray) -> np.ndarray:
        return np.array(self.names, object)[codes] if len(codes) else np.empty(0, object)

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


def formatted(values: list[float], conversion: str) -> list[str]:
    """``conversion % value`` of each of `values` (a printf-style conversion such as ``"%.3g"``, which gives floats
    what ``format(value, ".3g")`` does), made by one ``%`` over them all: half the time of a call per value (30,000
    reasons of a comparison: 19-22 ms against 9-16 ms).

    >>> formatted([0.000123456, float("inf"), 12345.0], "%.3g")
    ['0.000123', 'inf', '1.23e+04']
    """
    if not values:
        return []
    return ((conversion + "\0") * len(values) % tuple(values)).split("\0")[:-1]


def _first_seen(codes: np.ndarray, count: int) -> np.ndarray:
    """The codes in `codes` (each in ``range(count)``) in order of first appearance.

    Blocks of growing size are looked at until every used code is found, and of each block only the codes not
    seen before are sorted: a column whose values all appear early (nearly every one) costs one count, a sort of
    its first block and a look per later code, not a sort of the whole column (a batch run's text columns of 15,000
    tensors: 0.2 ms against 0.4-0.8 ms when every block was sorted).
    """
    used = int(np.count_nonzero(np.bincount(codes, minlength=count))) if len(codes) else 0
    found: list[int] = []
    seen = np.zeros(count, bool)
    start, block = 0, 1024
    while len(found) < used:
        part = codes[start:start + block]
        distinct, first = np.unique(part[~seen[part]], return_index=True)
        found += distinct[np.argsort(first)].tolist()
        seen[distinct] = True
        start, block = start + block, block * 4
    return np.array(found, np.int64)
