"""Writing a command's result: JSON on stdout for scripts, text for people."""

from __future__ import annotations

import os
import sys
from typing import Any

from graphcmp.core.jsonio import dumps_strict, sanitize_floats

__all__ = ["emit"]


def emit(data: dict[str, Any], text: str, as_json: bool) -> None:
    """Print `data` as one JSON object (with --json) or `text`.

    A reader that stops early (``graphcmp diverge ... | head``) closes the pipe: the rest is dropped
    quietly, and the command still ends with its own exit code.
    """
    try:
        if as_json:
            sys.stdout.write(dumps_strict(sanitize_floats(data)).decode() + "\n")
        else:
            sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that nothing written later (or flushed at exit) fails again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
