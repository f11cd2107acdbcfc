"""The memory a stage freed, handed back to the system."""

from __future__ import annotations

import ctypes

import pytest

from graphcmp.core.heap import glibc, release_freed_memory


def _resident_pages() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1])


@pytest.mark.skipif(glibc() is None, reason="glibc's allocator only")
def test_freed_heap_memory_goes_back_to_the_system() -> None:
    libc = glibc()
    assert libc is not None
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(64 << 10) for _ in range(1600)]  # 100 MB in blocks below the mmap threshold: the heap
    for block in blocks:
        ctypes.memset(block, 1, 64 << 10)  # resident
    keep = libc.malloc(64 << 10)  # above them: the heap's top cannot shrink past it
    for block in blocks:
        libc.free(block)
    before = _resident_pages()
    release_freed_memory()
    after = _resident_pages()
    libc.free(keep)
    assert before - after > (50 << 20) // 4096  # most of the 100 MB freed inside the heap left the process
