"""The C allocator's thresholds for the length of a batch task, on a worker started to hand memory back eagerly.

A Dask nanny starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (so that memory freed between tasks goes back
to the system). Setting any glibc threshold also stops glibc from raising its mmap threshold as it sees large blocks
freed, which it otherwise does: every block above 128 KiB (a column of a few thousand tensors) is then a fresh mapping,
faulted in page by page and unmapped when freed. A 5,000-node run took 4,150 page faults instead of 16 and 15-25 %
longer (`bench/bench_batch.py`). `reused_allocations` gives glibc, while a task runs, the thresholds its own rule
would have reached, and when the last task ends restores those the process was started with and hands the free
memory back (``malloc_trim``), as the worker's settings intend.

Nothing is changed where those thresholds were left to glibc (a local pool) or where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

__all__ = ["reused_allocations"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
_DEFAULT_THRESHOLD = 128 * 1024  # glibc's own starting value of both
_MMAP_CEILING = 32 * 1024 * 1024  # the highest mmap threshold glibc's rule reaches on a 64-bit machine ...
_TRIM_CEILING = 2 * _MMAP_CEILING  # ... with the trim threshold it sets along with it
_INT_MAX = 2**31 - 1  # mallopt takes an int
_SETTINGS = {b"MALLOC_TRIM_THRESHOLD_": _M_TRIM_THRESHOLD, b"MALLOC_MMAP_THRESHOLD_": _M_MMAP_THRESHOLD,
             b"glibc.malloc.trim_threshold": _M_TRIM_THRESHOLD, b"glibc.malloc.mmap_threshold": _M_MMAP_THRESHOLD}

_lock = threading.Lock()
_active = 0  # tasks of this process inside the block (a Dask worker may run several in threads)


@contextmanager
def reused_allocations() -> Iterator[None]:
    """Within the block, memory a run frees is reused by the next instead of being mapped again (see the module);
    a no-op unless the process was started with a fixed glibc threshold."""
    fixed = _fixed_at_start()
    libc = _glibc() if fixed else None
    if libc is None:
        yield
        return
    global _active
    with _lock:
        if _active == 0:
            libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_CEILING)
            libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_CEILING)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                for parameter in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD):
                    libc.mallopt(parameter, fixed.get(parameter, _DEFAULT_THRESHOLD))
                libc.malloc_trim(0)


@cache
def _fixed_at_start() -> dict[int, int]:
    """The glibc thresholds the process was started with, by mallopt parameter: those its environment held when it
    started (`/proc/self/environ`), which is what glibc read. A variable set in `os.environ` since (a Dask nanny
    sets them in the process that starts it, which may then fork workers of its own) never reached glibc. {} where
    that environment cannot be read."""
    try:
        with open("/proc/self/environ", "rb") as file:
            entries = file.read().split(b"\0")
    except OSError:
        return {}
    fixed: dict[int, int] = {}
    for entry in entries:
        name, _, value = entry.partition(b"=")
        for setting in value.split(b":") if name == b"GLIBC_TUNABLES" else [entry]:
            key, _, number = setting.partition(b"=")
            if key in _SETTINGS and (threshold := _threshold(number)) is not None:
                fixed[_SETTINGS[key]] = threshold
    return fixed


def _threshold(text: bytes) -> int | None:
    """A threshold as glibc reads it (decimal, or hex with 0x), within mallopt's int; None when it is no number."""
    try:
        return min(int(text, 0), _INT_MAX)
    except ValueError:
        return None


@cache
def _glibc() -> ctypes.CDLL | None:
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
