"""Where the bundled sample dumps are: the source checkout, or the installed data folder."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["sample_pair", "samples_dir"]


def samples_dir() -> Path:
    """The `sample_graphs` folder (checkout first, then ``<prefix>/share/graphcmp``)."""
    candidates = (Path(__file__).resolve().parents[1] / "sample_graphs",
                  Path(sys.prefix) / "share" / "graphcmp" / "sample_graphs")
    return next((c for c in candidates if c.is_dir()), candidates[0])


def sample_pair() -> tuple[Path, Path]:
    """(npu, bench) rank folders of the demo: the perturbed 3-layer transformer vs its baseline, step 0."""
    base = samples_dir() / "msprobe" / "tf_small"
    return base / "perturb" / "step0" / "rank0", base / "baseline" / "step0" / "rank0"
