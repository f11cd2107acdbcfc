"""Recognising a serialised protobuf message from a file's first bytes, before the file is read whole.

A binary graph (GE's ``ModelDef``, MindSpore's anf_ir ``ModelProto``) has no magic number: the only way to know
one is to decode it, which needs the whole file. `opens_message` walks the top-level fields of a bounded prefix
instead: each must be a field the message declares, of its wire type, with a length that fits the file. A file
of zeros (field 0), text, or another format fails within its first bytes, and is never read whole.
"""

from __future__ import annotations

from collections.abc import Set

__all__ = ["opens_message"]


def opens_message(head: bytes, size: int | None, fields: Set[tuple[int, int]]) -> bool:
    """Whether `head`, the first bytes of a file of `size` bytes (None: unknown, as for gzip), reads as the
    top-level fields of a message declaring `fields` ((field number, wire type) pairs).

    >>> fields = {(1, 2), (2, 0)}
    >>> opens_message(bytes([0x0a, 2]) + b"ge" + bytes([0x10, 1]), 6, fields)
    True
    >>> opens_message(bytes(8), 8, fields), opens_message(b"# IR entry", 10, fields)
    (False, False)
    >>> opens_message(bytes([0x0a, 0x7f]) + b"ge", 4, fields)  # a length beyond the file
    False
    """
    at = 0
    while at < len(head):
        tag, at = _varint(head, at)
        if tag is None:
            return at > 0  # the prefix ends inside a tag
        if (tag >> 3, tag & 7) not in fields:
            return False
        value, at = _varint(head, at)
        if value is None:
            return True
        if tag & 7 == 2:
            at += value
            if size is not None and at > size:
                return False
    return at > 0


def _varint(data: bytes, at: int) -> tuple[int | None, int]:
    """The protobuf varint at `at` and the offset after it; (None, end of `data`) when `data` ends inside it."""
    value = shift = 0
    for k in range(at, min(len(data), at + 10)):
        value |= (data[k] & 0x7F) << shift
        shift += 7
        if data[k] < 0x80:
            return value, k + 1
    return None, len(data)
