"""Progress shown on a terminal and silent otherwise."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["stages"]


@contextmanager
def stages(total: int, desc: str, *, quiet: bool = False) -> Iterator[Any]:
    """A bar over `total` named stages; call ``bar.set_postfix_str(name)`` then ``bar.update()``.

    Off a terminal (or `quiet`) the bar does nothing, and tqdm is not even imported.
    """
    if quiet or not sys.stderr.isatty():
        yield _Silent()
        return
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=False,
               bar_format="{desc}: {n}/{total} {postfix} [{elapsed}]")
    try:
        yield bar
    finally:
        bar.close()


class _Silent:
    """The part of tqdm's interface `stages` callers use, doing nothing."""

    def set_postfix_str(self, text: str) -> None:
        pass

    def update(self, n: int = 1) -> None:
        pass
