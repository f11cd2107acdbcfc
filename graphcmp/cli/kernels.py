"""After a command that read msprobe runs (or the viewer, once it serves two): the compiled dump.json reader built
in the background, once.

Until its kernels are built, a dump.json under `msprobe.BUILD_FROM_BYTES` is read by the chunked read, 2.5-2.7x
slower (bench/README.md), and a reading of one that small does not build them: the build takes about a minute.
So a command that read one starts the build in a detached process at the lowest priority as it ends
(`msprobe_scan.build_in_background`), and the next command reads by the compiled pass.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from graphcmp.core.errors import GraphcmpError
from graphcmp.core.readers.detect import detect_format

__all__ = ["build_reader_later"]

NOTE = ("graphcmp: building the compiled dump.json reader in the background, once for this installation (about a "
        "minute at the lowest priority); later commands read dump.json about 2.5x faster")


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
