"""Running one graphcmp command the way a hostile input would meet it: in its own process, under a memory limit
and a time limit, with what it did measured (exit code, output, peak memory, time)."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

MEMORY_LIMIT = 2 << 30
"""Address space a command may use (bytes): 2 GiB, the issue's bound for any input of the corpus."""

TIME_LIMIT = 180.0
"""Seconds a command may take before it counts as hung. Every case of the corpus finishes in a few; the margin is for
a machine slowed tenfold or more (a shared CI machine), where a real hang still ends the case."""

_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "default"}


@dataclass(frozen=True)
class Result:
    """What one command did."""

    code: int | None  # None: killed at the time limit
    out: str
    err: str
    seconds: float
    peak_bytes: int

    @property
    def hung(self) -> bool:
        return self.code is None


def _limit() -> None:  # runs in the child before graphcmp starts
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    os.setsid()


def run(argv: list[str], cwd: Path, *, timeout: float = TIME_LIMIT) -> Result:
    """Run ``python -m graphcmp <argv>`` in `cwd` under `MEMORY_LIMIT` and `timeout` (then killed, with every
    process it started)."""
    env = {**os.environ, **_ENV}
    start = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "graphcmp", *argv], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_limit)
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, kill)
    streams: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda k=k, f=f: streams.__setitem__(k, f.read()))
               for k, f in (("out", process.stdout), ("err", process.stderr))]
    for thread in (timer, *readers):
        thread.start()
    _, status, usage = os.wait4(process.pid, 0)  # this child's own peak memory, not the test process's
    timer.cancel()
    with contextlib.suppress(ProcessLookupError):  # a process it left behind holds the pipes open: end it first
        os.killpg(process.pid, signal.SIGKILL)
    for reader in readers:
        reader.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    return Result(None if killed.is_set() else process.returncode, streams["out"].decode("utf-8", "replace"),
                  streams["err"].decode("utf-8", "replace"), time.monotonic() - start, usage.ru_maxrss * 1024)
