"""Many runs at once: step/rank layouts, batch comparison on a process pool or Dask, cross-rank analysis."""
