"""Where the web assets (CSS, JS) are: the source checkout, or the installed data folder."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["assets_dir"]


def assets_dir() -> Path:
    """The `assets` folder (checkout first, then ``<prefix>/share/graphcmp/assets``)."""
    candidates = (Path(__file__).resolve().parents[2] / "assets",
                  Path(sys.prefix) / "share" / "graphcmp" / "assets")
    return next((c for c in candidates if c.is_dir()), candidates[0])
