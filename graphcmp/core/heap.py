"""Handing the memory a finished stage freed back to the system (glibc's ``malloc_trim``).

Reading a large run allocates far more than the run it gives: the parsed chunks of its files, the tensor columns'
parts, the tables of ids. Freed, that memory mostly stays with the C allocator (numpy's blocks below glibc's mmap
threshold, which rises to 32 MiB as large blocks are freed, and the free pages inside its heap), so the process's
resident set stays at the read's peak while the comparison adds to it. A 1M-node msprobe run read in one process
held 1,150 MB resident and 650 MB after ``malloc_trim(0)``, which took 30 ms.
"""

from __future__ import annotations

import ctypes
import os
from functools import cache

__all__ = ["glibc", "release_freed_memory"]


def release_freed_memory() -> None:
    """Give the free memory of the C allocator's heaps back to the system; a no-op where the C library is not
    glibc."""
    libc = glibc()
    if libc is not None:
        libc.malloc_trim(0)


@cache
def glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (it has mallopt and malloc_trim), else None."""
    if not hasattr(os, "confstr") or "glibc" not in (_confstr("CS_GNU_LIBC_VERSION") or ""):
        return None
    try:
        libc = ctypes.CDLL(None)  # the symbols the process has loaded: glibc's among them
        libc.mallopt.argtypes, libc.malloc_trim.argtypes = [ctypes.c_int, ctypes.c_int], [ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


def _confstr(name: str) -> str | None:
    try:
        return os.confstr(name)
    except (ValueError, OSError):
        return None
