"""What a comparison derives from the npu run alone, computed once the run is read and kept with it.

Light on purpose (two modules below it): the process that reads the npu run of a pair side by side
(`readers.pair.read_pair`) computes it before handing the run over, without loading the comparison.
"""

from __future__ import annotations

from graphcmp.core.dataflow import communication_calls, earliest_producers, forward_twins
from graphcmp.core.overflow import overflow_levels
from graphcmp.core.records import DumpGraph

__all__ = ["derive_npu"]


def derive_npu(npu: DumpGraph) -> None:
    """Compute what `compare_graphs` derives from the npu run alone, kept with the run (`DumpGraph.memo`): its
    overflow levels and the noise model's producers, forward twins and communication calls. `read_pair` runs it
    (``ahead``) in the process that read the npu run, while this one still reads the bench run."""
    overflow_levels(npu)
    earliest_producers(npu)
    forward_twins(npu)
    communication_calls(npu)
