"""A batch task on a worker started with a fixed glibc threshold (a Dask nanny's) reuses the memory it frees."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from graphcmp.core.distributed import allocator

glibc_only = pytest.mark.skipif(allocator._glibc() is None, reason="glibc's allocator only")

# each round allocates and frees a 1 MiB array: above glibc's fixed 128 KiB mmap threshold, a fresh mapping every time
_PROBE = textwrap.dedent("""
    import os, resource, sys
    import numpy as np
    from graphcmp.core.distributed.allocator import reused_allocations

    def faults():
        start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(200):
            np.ones(1 << 17).sum()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start

    os.environ.update(dict(arg.split("=", 1) for arg in sys.argv[1:]))  # set after start: glibc never reads them
    before = faults()
    with reused_allocations(), reused_allocations():  # two tasks of one worker at once
        inside = faults()
    print(before, inside, faults())
""")


def _faults(env: dict[str, str], *later: str) -> list[int]:
    """Page faults of the probe's rounds before, inside and after the block, in a process started with `env` (and
    the variables `later` set once it runs)."""
    out = subprocess.run([sys.executable, "-c", _PROBE, *later], env={**os.environ, **env}, capture_output=True,
                         text=True, check=True)
    return list(map(int, out.stdout.split()))


@glibc_only
@pytest.mark.parametrize("env", [{"MALLOC_TRIM_THRESHOLD_": "65536"},  # what a Dask nanny starts its workers with
                                 {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0x10000"}])
def test_a_task_reuses_freed_memory_and_the_worker_gets_its_thresholds_back(env):
    before, inside, after = _faults(env)
    assert before > 200 * 200  # 256 pages mapped and faulted in per round
    assert inside < before / 20
    assert after > 200 * 200  # the block restored the thresholds the process was started with


@glibc_only
def test_thresholds_set_after_the_process_started_are_not_glibcs_and_are_left_alone():
    """A Dask nanny sets MALLOC_TRIM_THRESHOLD_ in the process that starts it; a worker that process forks inherits
    the variable but not the setting: glibc's own rule must stay in force after the block."""
    before, inside, after = _faults({}, "MALLOC_TRIM_THRESHOLD_=65536")
    assert max(before, inside, after) < 200 * 50  # glibc's rule reuses the memory throughout
    assert after <= inside + 10


def test_a_process_whose_thresholds_glibc_sets_itself_is_left_alone(monkeypatch):
    if allocator._fixed_at_start():
        pytest.skip("this process was started with a fixed glibc threshold")
    monkeypatch.setattr(allocator, "_glibc", lambda: pytest.fail("the allocator was touched"))
    with allocator.reused_allocations():
        pass
