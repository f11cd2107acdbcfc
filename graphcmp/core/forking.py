"""A forked helper process that shares this process's data without a copy and sends what it makes through a pipe.

`graphcmp compare` has one write the runs' columns of its result while it compares (`report.RunsWriting`), the
vis-db export has one make the record texts while it inserts rows (`export.vis_db`), and `readers.pair` reads the
npu run in one: each only where `can_fork_aside`.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["Forked", "can_fork_aside"]


def can_fork_aside() -> bool:
    """True on a machine with a second core and ``fork`` (a child shares this process's data without a copy)."""
    return (os.cpu_count() or 1) >= 2 and "fork" in multiprocessing.get_all_start_methods()


class Forked:
    """``target(answer, *args)`` run in a forked process, which sends what it makes through `answer`; `receive`
    gives it here, in order.

    The process leaves Ctrl-C to this one (which stops it) and runs without the cyclic garbage collector, which
    would touch, and so copy, every page of the objects it shares with this process.
    """

    def __init__(self, target: Callable[..., None], *args: Any) -> None:
        fork = multiprocessing.get_context("fork")
        self._answer, sender = fork.Pipe(duplex=False)
        self.process = fork.Process(target=_run, args=(target, sender, *args), daemon=True)
        self.process.start()
        sender.close()

    def receive(self) -> Any:
        """The next thing the process sent; None when it sends nothing more (ended, or failed)."""
        try:
            return self._answer.recv()
        except (EOFError, OSError):
            return None

    def has_sent(self) -> bool:
        """True when `receive` would not wait: something was sent, or the process ended."""
        try:
            return self._answer.poll()
        except (EOFError, OSError):
            return True

    def stop(self) -> None:
        """Kill the process if it still runs, and wait for it."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self._answer.close()


def _run(target: Callable[..., None], answer: Connection, *args: Any) -> None:
    gc.disable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    target(answer, *args)
