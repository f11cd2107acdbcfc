"""A forked helper process that shares this process's data without a copy and sends what it makes through a pipe.

`graphcmp compare` has one write the runs' columns of its result while it compares (`report.RunsWriting`), the
vis-db export has one make the record texts while it inserts rows (`export.vis_db`), and `readers.pair` reads the
npu run in one: each only where `can_fork_aside`.

The process is forked by ``os.fork`` and its messages are pickles on a pipe, each after its length: what
``multiprocessing`` would do for one child and one pipe, without importing it (``multiprocessing.connection`` took
16-21 ms of every command's start-up, before the npu run's reading process could start).
"""

from __future__ import annotations

import atexit
import gc
import os
import pickle
import select
import signal
import struct
import traceback
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import Any

__all__ = ["Forked", "Sender", "can_fork_aside"]

_LENGTH = struct.Struct("<Q")  # the byte length of the pickle that follows


def can_fork_aside() -> bool:
    """True on a machine with a second core and ``fork`` (a child shares this process's data without a copy)."""
    return (os.cpu_count() or 1) >= 2 and hasattr(os, "fork")


class Sender:
    """The forked process's end of the pipe: `send` writes one object."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def send(self, value: Any) -> None:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        _write_all(self._fd, _LENGTH.pack(len(data)))
        _write_all(self._fd, data)


class Forked:
    """``target(answer, *args)`` run in a forked process, which sends what it makes through `answer` (a `Sender`);
    `receive` gives it here, in order.

    The process leaves Ctrl-C to this one (which stops it) and runs without the cyclic garbage collector, which
    would touch, and so copy, every page of the objects it shares with this process. It ends with ``os._exit``: no
    exit handler of this process runs there, no buffer of this process is written twice. One still running when
    this process exits is killed then.
    """

    def __init__(self, target: Callable[..., None], *args: Any) -> None:
        read, write = os.pipe()
        try:
            self.pid = os.fork()
        except OSError:  # no process to be had (EAGAIN, ENOMEM): the caller does the work itself or says so
            os.close(read)
            os.close(write)
            raise
        if self.pid == 0:  # the forked process
            os.close(read)
            _run(target, Sender(write), *args)
        os.close(write)
        self._answer = os.fdopen(read, "rb", buffering=0)  # unbuffered: `select` sees every byte not read
        self.exitcode: int | None = None
        _LIVE.add(self)

    def receive(self) -> Any:
        """The next thing the process sent; None when it sends nothing more (ended, or failed)."""
        try:
            head = _read_exactly(self._answer, _LENGTH.size)
            data = _read_exactly(self._answer, _LENGTH.unpack(head)[0]) if head is not None else None
            return pickle.loads(data) if data is not None else None
        except (OSError, ValueError, EOFError, pickle.UnpicklingError):  # ValueError: a closed pipe
            return None

    def has_sent(self) -> bool:
        """True when `receive` would not wait: something was sent, or the process ended."""
        try:
            return bool(select.select([self._answer], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def join(self) -> int:
        """Wait for the process to end; its exit code (0: it returned, 1: it raised, -N: killed by signal N)."""
        if self.exitcode is None:
            _, status = os.waitpid(self.pid, 0)
            self.exitcode = os.waitstatus_to_exitcode(status)
            _LIVE.discard(self)
        return self.exitcode

    def stop(self) -> None:
        """Kill the process if it still runs, and wait for it."""
        if self.exitcode is None:
            with suppress(ProcessLookupError):  # reaped already: nothing to kill
                os.kill(self.pid, signal.SIGKILL)
            self.join()
        self._answer.close()


def _run(target: Callable[..., None], answer: Sender, *args: Any) -> None:
    """The forked process: `target`, then ``os._exit`` (1 with the traceback on stderr if it raised)."""
    code = 1
    try:
        gc.disable()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        target(answer, *args)
        code = 0
    except BaseException:
        with suppress(OSError):
            os.write(2, traceback.format_exc().encode(errors="replace"))  # not through sys.stderr's buffer
    finally:
        os._exit(code)


def _read_exactly(raw: Any, size: int) -> bytearray | None:
    """`size` bytes from the unbuffered file `raw`; None when it ends first."""
    data = bytearray(size)
    view, done = memoryview(data), 0
    while done < size:
        got = raw.readinto(view[done:])
        if not got:
            return None
        done += got
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_LIVE: weakref.WeakSet[Forked] = weakref.WeakSet()


@atexit.register
def _kill_live() -> None:
    """Kill the processes still running when this one exits (``multiprocessing``'s daemon processes are too)."""
    for forked in list(_LIVE):
        forked.stop()
