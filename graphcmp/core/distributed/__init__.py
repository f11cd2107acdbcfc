"""Many runs at once: step/rank layouts, batch comparison on a process pool or Dask, cross-rank analysis, and the
ranks of a tensor/pipeline-parallel job merged into one logical run (topology, tp_merge, stitch, merge, merged,
consistency)."""
