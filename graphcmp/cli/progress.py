"""Progress shown on a terminal and silent otherwise (tqdm decides from the stream)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tqdm import tqdm

__all__ = ["stages"]


@contextmanager
def stages(total: int, desc: str, *, quiet: bool = False) -> Iterator[tqdm]:
    """A bar over `total` named stages; call ``bar.set_postfix_str(name)`` then ``bar.update()``."""
    bar = tqdm(total=total, desc=desc, file=sys.stderr, disable=True if quiet else None, leave=False,
               bar_format="{desc}: {n}/{total} {postfix} [{elapsed}]")
    try:
        yield bar
    finally:
        bar.close()
