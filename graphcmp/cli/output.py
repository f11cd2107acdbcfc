"""Writing a command's result: JSON on stdout for scripts, text for people."""

from __future__ import annotations

import sys
from typing import Any

from graphcmp.core.jsonio import dumps_strict, sanitize_floats

__all__ = ["emit"]


def emit(data: dict[str, Any], text: str, as_json: bool) -> None:
    """Print `data` as one JSON object (with --json) or `text`."""
    if as_json:
        sys.stdout.write(dumps_strict(sanitize_floats(data)).decode() + "\n")
    else:
        print(text)
