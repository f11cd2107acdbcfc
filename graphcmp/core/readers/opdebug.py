"""Ascend overflow files (``Opdebug.Node_OpDebug.{task}.{stream}.{timestamp}``): which kernel overflowed, and how.

The file is an ordinary raw dump file whose one output holds 2048 bytes of overflow debug information
(shared/data/formats/ASCEND_RAW_DUMP.md section 2), in one of two layouts:

* older, no magic: three blocks *DHA Atomic Add*, *L2 Atomic Add* and *AI Core*, each with
  ``model_id, stream_id, task_id, task_type, pc_start, para_base`` (uint64 at 0, 128 and 256) and a
  ``status`` (uint64 at 512, 768 and 1040; the AI Core block also has ``kernel_code`` at 1024 and
  ``block_idx`` at 1032);
* newer, uint32 magic ``0x5A5A5A5A`` at 0: ``version, valid, acc_type, rsv, data_len`` then uint64 fields
  whose list depends on the accelerator (AIC/AIV, AICPU, SDMA), the status last (four words for AIC/AIV
  in version 1).

A block with a nonzero status is an overflow of the kernel with its task and stream ids; the bits of the
status are named by `graphcmp.core.overflow_status.decode_overflow_status`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.overflow_status import decode_overflow_status
from graphcmp.core.readers.ascend_file import read_dump_tensor, read_header

__all__ = ["MAGIC", "OPDEBUG_SIZE", "OPDEBUG_TYPE", "OverflowRecord", "decode_opdebug", "read_opdebug"]

OPDEBUG_TYPE = "Opdebug"
OPDEBUG_SIZE = 2048
MAGIC = 0x5A5A5A5A

_OLD_BLOCKS = (("DHA Atomic Add", 0, 512), ("L2 Atomic Add", 128, 768), ("AI Core", 256, 1040))
_ACC_TYPES = {0: "AIC", 1: "AIV", 2: "AICPU", 3: "SDMA"}
_NEW_FIELDS = {
    "AIC": ("model_id", "stream_id", "task_id", "task_type", "context_id", "thread_id", "pc_start", "para_base",
            "core_id", "block_id", "status"),
    "AICPU": ("model_id", "stream_id", "task_id", "task_type", "context_id", "cpu_id", "thread_id", "status"),
    "SDMA": ("model_id", "stream_id", "task_id", "task_type", "context_id", "thread_id", "src_addr", "dst_addr",
             "channel_id", "status"),
}
_NEW_FIELDS["AIV"] = _NEW_FIELDS["AIC"]


@dataclass(frozen=True, slots=True)
class OverflowRecord:
    """One overflowing kernel: the block that saw it, its ids and its status word."""

    block: str
    task_id: int
    stream_id: int
    status: int
    model_id: int = 0

    def describe(self) -> str:
        """One line: ``AI Core status 0x20 (float overflow)``."""
        words = ", ".join(decode_overflow_status(self.status))
        return f"{self.block} status 0x{self.status:x}" + (f" ({words})" if words else "")


def read_opdebug(path: str | os.PathLike[str]) -> list[OverflowRecord]:
    """The overflow records of an Opdebug dump file (its output 0).

    Raises
    ------
    DumpFormatError
        If the file is not a dump file or its output is not 2048 bytes of overflow information.
    """
    header = read_header(path)
    if not any(t.role == "output" and t.index == 0 for t in header.tensors):
        raise DumpFormatError(f"{path}: an Opdebug file with no output")
    data = np.asarray(read_dump_tensor(path, "output", 0)).reshape(-1).view(np.uint8)
    return decode_opdebug(data.tobytes(), source=os.fspath(path))


def decode_opdebug(data: bytes, *, source: str = "<bytes>") -> list[OverflowRecord]:
    """Decode the 2048 bytes of overflow information (either layout) into records of nonzero status.

    Examples
    --------
    >>> raw = bytearray(2048)
    >>> struct.pack_into("<6Q", raw, 256, 1, 0, 10, 0, 0, 0)
    >>> struct.pack_into("<Q", raw, 1040, 0x20)
    >>> decode_opdebug(bytes(raw))
    [OverflowRecord(block='AI Core', task_id=10, stream_id=0, status=32, model_id=1)]

    Raises
    ------
    DumpFormatError
        If the bytes are too short for their layout.
    """
    if len(data) >= 24 and struct.unpack_from("<I", data, 0)[0] == MAGIC:
        return _new_layout(data, source)
    if len(data) < OPDEBUG_SIZE:
        raise DumpFormatError(f"{source}: overflow information of {len(data)} bytes, expected {OPDEBUG_SIZE}")
    out = []
    for block, info, status_at in _OLD_BLOCKS:
        model_id, stream_id, task_id = struct.unpack_from("<3Q", data, info)
        (status,) = struct.unpack_from("<Q", data, status_at)
        if status:
            out.append(OverflowRecord(block, int(task_id), int(stream_id), int(status), int(model_id)))
    return out


def _new_layout(data: bytes, source: str) -> list[OverflowRecord]:
    _version, valid, acc_type, _rsv, data_len = struct.unpack_from("<5I", data, 4)
    name = _ACC_TYPES.get(acc_type)
    if name is None:
        raise DumpFormatError(f"{source}: overflow information of unknown accelerator type {acc_type}")
    fields: Sequence[str] = _NEW_FIELDS[name]
    words = data_len // 8
    if 24 + data_len > len(data) or words < len(fields):
        raise DumpFormatError(f"{source}: overflow information declares {data_len} bytes of {name} fields, "
                              f"{len(data) - 24} present, {len(fields) * 8} needed")
    values = struct.unpack_from(f"<{words}Q", data, 24)
    record = dict(zip(fields, values))
    status_at = fields.index("status")
    status = 0
    for word in values[status_at:]:  # version 1 AIC/AIV: four status words
        status |= int(word)
    if not valid or not status:
        return []
    return [OverflowRecord(name, int(record["task_id"]), int(record["stream_id"]), status,
                           int(record["model_id"]))]
