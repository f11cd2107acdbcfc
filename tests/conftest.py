"""Shared paths of the real test inputs."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import pytest

from graphcmp.samples import sample_pair

# tests/gen holds the generators of the development dumps: they import torch and msprobe, which the test
# environment does not have, so neither the test nor the doctest collection may import them
collect_ignore = ["gen"]

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
REPORT_SCHEMA = json.loads(resources.files("graphcmp").joinpath("data/report.schema.json").read_text())
"""The JSON Schema graphcmp ships for its report document."""


@pytest.fixture(scope="session", autouse=True)
def built_kernels() -> None:
    """The compiled dump.json pass built ahead of time before any test runs, with the statistics and the tensor
    metrics' kernels: a fresh checkout builds them once (about a minute), which would otherwise fall into whichever
    test first reads a large dump or a batch, under its time limit, and every process a test starts would load
    numba's kernels instead. Every msprobe read then takes the compiled pass, and every comparison the compiled
    metrics, as a user's do; the chunked read is what tests ask for by ``compiled=False`` or a `chunk_bytes`, and
    `test_msprobe_scan` holds the two to the same graphs (`test_stat_kernels` and `test_tensor_metrics_blocks` the
    metrics to numpy's)."""
    from graphcmp.core import tensor_kernels
    from graphcmp.core.readers import msprobe_scan

    sets = [*msprobe_scan._BUILT_TOGETHER, tensor_kernels.KERNELS]
    # each pytest-xdist worker (gw0, gw1, ...) begins with another set: two build at once where, in one order, one
    # would wait on the other's lock
    first = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % len(sets)
    for kernels in sets[first:] + sets[:first]:
        kernels.load()


@pytest.fixture(scope="session")
def perturb_pair() -> tuple[Path, Path]:
    """(npu, bench): the 3-layer transformer with a perturbed linear1 weight in layer 1, and its baseline."""
    return sample_pair()


@pytest.fixture(scope="session")
def overflow_report():
    """The real overflow pair (inf and NaN statistics, statistics not recorded) compared."""
    from graphcmp.core.compare import compare_paths

    return compare_paths(DATA / "msprobe_overflow_tokens" / "npu", DATA / "msprobe_overflow_tokens" / "bench")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


def shared(path: str) -> Path:
    """A path under ../shared/data, skipping the test when it is absent."""
    full = SHARED / path
    if not full.exists():
        pytest.skip(f"shared data not available: {full}")
    return full
