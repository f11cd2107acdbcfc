"""After a command that read msprobe runs (or the viewer, once it serves two): the compiled dump.json reader built
in the background, once; after one that read or compared tensor data, the compiled kernels of tensor data.

Until its kernels are built, a dump.json under `msprobe.BUILD_FROM_BYTES` is read by the chunked read, 2.5-2.7x
slower (bench/README.md), and a reading of one that small does not build them: the build takes about a minute.
So a command that read one starts the build in a detached process at the lowest priority as it ends
(`msprobe_scan.build_in_background`), and the next command reads by the compiled pass. The kernels of tensor data
(`core.tensor_kernels`) are built the same way; until then numba loads them, 0.5-0.7 s per process.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from graphcmp.core.errors import GraphcmpError
from graphcmp.core.readers.detect import detect_format

__all__ = ["build_reader_later", "build_tensor_kernels_later"]

NOTE = ("graphcmp: building the compiled dump.json reader in the background, once for this installation (about a "
        "minute at the lowest priority); later commands read dump.json about 2.5x faster")
TENSOR_NOTE = ("graphcmp: building the compiled tensor kernels in the background, once for this installation (under "
               "a minute at the lowest priority); later commands skip loading numba for tensor data")


def build_reader_later(runs: Sequence[str], format: str | None, *, quiet: bool) -> bool:
    """Start the background build when a run of `runs` is an msprobe folder and the reader is not built (and can
    be); say so on a terminal unless `quiet`. Whether it was started."""
    if not any(_msprobe(run, format) for run in runs):
        return False
    from graphcmp.core.readers.msprobe_scan import build_in_background  # see tests/test_layers.py: LAZY_IMPORTS

    started = build_in_background()
    if started and not quiet and sys.stderr.isatty():
        print(NOTE, file=sys.stderr)
    return started


def _msprobe(run: str, format: str | None) -> bool:
    if format is not None:
        return format == "msprobe"
    try:
        return detect_format(run) == "msprobe"
    except GraphcmpError:
        return False


def build_tensor_kernels_later(*, quiet: bool) -> bool:
    """Start building the compiled kernels of tensor data in the background when this process read or compared
    enough tensor data to gain from them and they are not built (`tensor_kernels.build_later`); say so on a terminal
    unless `quiet`. Whether it was started."""
    # loaded by the readers and comparisons of tensor data only: a process that never loaded it has nothing to build
    kernels = sys.modules.get("graphcmp.core.tensor_kernels")
    started = kernels is not None and kernels.build_later()
    if started and not quiet and sys.stderr.isatty():
        print(TENSOR_NOTE, file=sys.stderr)
    return started
