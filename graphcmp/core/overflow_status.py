"""The status word of an overflow debug record (GE's JSON records, Ascend Opdebug files): its bits in words."""

from __future__ import annotations

__all__ = ["STATUS_BITS", "decode_overflow_status"]

STATUS_BITS = {
    0x08: "min-negative sign flip",
    0x10: "integer add/sub/mul overflow",
    0x20: "float overflow",
    0x80: "negative float converted to unsigned",
    0x100: "FP32 to FP16 or int32 to FP16 overflow",
    0x400: "cube accumulation overflow",
}
"""Status bits of GE/AI Core overflow debug records."""


def decode_overflow_status(status: int) -> tuple[str, ...]:
    """Words for the bits of a GE overflow status.

    >>> decode_overflow_status(0x20 | 0x100)
    ('float overflow', 'FP32 to FP16 or int32 to FP16 overflow')
    >>> decode_overflow_status(0)
    ()
    """
    words = [name for bit, name in STATUS_BITS.items() if status & bit]
    unknown = status & ~sum(STATUS_BITS)
    if unknown:
        words.append(f"unknown bits 0x{unknown:x}")
    return tuple(words)
