"""A batch task on a worker started with a fixed glibc threshold (a Dask nanny's) reuses the memory it frees."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from graphcmp.core.distributed import allocator

GLIBC = "glibc" in ((os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None) or "")

# each round allocates and frees a 1 MiB array: above glibc's fixed 128 KiB mmap threshold, a fresh mapping every time
_PROBE = textwrap.dedent("""
    import resource
    import numpy as np
    from graphcmp.core.distributed.allocator import reused_allocations

    def faults():
        start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(200):
            np.ones(1 << 17).sum()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start

    before = faults()
    with reused_allocations(), reused_allocations():  # two tasks of one worker at once
        inside = faults()
    print(before, inside, faults())
""")


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_a_task_reuses_freed_memory_and_the_worker_gets_its_thresholds_back():
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536"}  # what a Dask nanny starts its workers with
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    before, inside, after = map(int, out.stdout.split())
    assert before > 200 * 200  # 256 pages mapped and faulted in per round
    assert inside < before / 20
    assert after > 200 * 200  # the block restored the thresholds the process was started with


def test_a_process_whose_thresholds_glibc_sets_itself_is_left_alone(monkeypatch):
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(allocator, "_glibc", lambda: pytest.fail("the allocator was touched"))
    with allocator.reused_allocations():
        pass
