"""What a comparison derives from one run alone, computed once the run is read and kept with it.

Light on purpose (two modules below it): the processes that read the two runs of a pair side by side
(`readers.pair.read_pair`) compute it before the comparison starts, without loading the comparison.
"""

from __future__ import annotations

from graphcmp.core.dataflow import (
    communication_calls,
    earliest_producers,
    forward_twins,
    run_fingerprints,
    trained_parameters,
)
from graphcmp.core.hierarchy import execution_keys
from graphcmp.core.overflow import overflow_levels, summed_beyond_range
from graphcmp.core.records import DumpGraph

__all__ = ["derive_bench", "derive_npu", "derive_npu_aside", "derive_npu_here"]


def derive_npu(npu: DumpGraph) -> None:
    """Compute what `compare_graphs` derives from the npu run alone, kept with the run (`DumpGraph.memo`): its
    overflow levels and the noise model's producers, forward twins, communication calls and trained parameters
    (`derive_npu_aside` and `derive_npu_here`, which `read_pair` runs in two processes at once)."""
    derive_npu_aside(npu)
    derive_npu_here(npu)


def derive_npu_aside(npu: DumpGraph) -> None:
    """The part of `derive_npu` that `read_pair` runs (``ahead``) in the process that read the npu run, once it
    has handed the run over: the forward twins of the backward calls, the communication calls and the trained
    parameters (from the node ids; at 1M nodes it lasts about as long as the run's loading in the other process
    and `derive_npu_here` there, 0.8 s against 1.2 s, since the forward twins are found by the ids' bytes: by
    strings they took a second alone)."""
    forward_twins(npu)
    communication_calls(npu)
    trained_parameters(npu)


def derive_npu_here(npu: DumpGraph) -> None:
    """The part of `derive_npu` that `read_pair` gives (``ahead_loaded``) to whichever process is free first: this
    one once it has loaded the npu run (while the reading process runs `derive_npu_aside`), or the reading process
    once it has run that: the overflow levels and the earliest producers (the tensors' fingerprints, the execution
    keys), numpy passes over the tensor columns."""
    overflow_levels(npu)
    earliest_producers(npu)


def derive_bench(bench: DumpGraph) -> None:
    """Compute what `compare_graphs` derives from the bench run alone, kept with the run: its tensors'
    fingerprints (the matching's and the noise model's), execution keys and the statistics summed beyond their
    dtype's range. `read_pair` runs it (``ahead_bench``) once the bench run is read, while the other process still
    reads or derives from the npu run."""
    run_fingerprints(bench)
    execution_keys(bench)
    summed_beyond_range(bench)
