#!/usr/bin/env python3
"""Time a whole job: N ranks x a synthetic run grown from the real 4-rank dist4 structure.

The rank folders of the job are symbolic links to one synthetic npu/bench pair (bench/make_synthetic.py
on dist4 rank 0): every rank's comparison is real work, the disk holds one copy. A few ranks get the
perturbed npu run, the others an exact copy of the bench run. Usage::

    .venv/bin/python bench/bench_batch.py [--ranks 1024] [--nodes 5000] [--workers 2] [--dask]

Prints wall time, peak RSS of the parent and of the largest worker, the index size and the time to
load the index (what the viewer's overview reads).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "shared" / "data" / "msprobe" / "dumps" / "dist4" / "statistics" / "baseline" / \
    "step0" / "rank0"


def make_job(root: Path, ranks: int, nodes: int, perturbed: set[int]) -> tuple[Path, Path]:
    synth = root / "synth"
    if not (synth / "npu" / "dump.json").is_file():
        subprocess.run([sys.executable, str(HERE / "make_synthetic.py"), "--source", str(SOURCE), "--nodes",
                        str(nodes), "--out", str(synth)], check=True, capture_output=True)
    npu_root, bench_root = root / "npu" / "step0", root / "bench" / "step0"
    for rank in range(ranks):
        for side_root, target in ((npu_root, synth / ("npu" if rank in perturbed else "bench")),
                                  (bench_root, synth / "bench")):
            link = side_root / f"rank{rank}"
            if not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(target, target_is_directory=True)
    return npu_root.parent, bench_root.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dask", action="store_true", help="also run the job through a local Dask cluster")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "graphcmp_batch_bench")
    args = parser.parse_args(argv)

    from graphcmp.core.distributed.batch import load_index, run_batch

    perturbed = {args.ranks // 2, args.ranks // 2 + 1}
    npu, bench = make_job(args.work_dir, args.ranks, args.nodes, perturbed)
    print(f"job: {args.ranks} ranks x {args.nodes} nodes per side; perturbed ranks {sorted(perturbed)}")
    modes = [("local processes", None)]
    cluster = None
    if args.dask:
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0")
        modes.append(("dask LocalCluster", cluster.scheduler_address))
    try:
        for name, scheduler in modes:
            out = args.work_dir / f"results_{'dask' if scheduler else 'local'}"
            subprocess.run(["rm", "-rf", str(out)], check=True)
            start = time.perf_counter()
            index = run_batch(npu, bench, out, workers=args.workers, scheduler=scheduler)
            wall = time.perf_counter() - start
            self_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            child_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            t = time.perf_counter()
            load_index(out)
            load_s = time.perf_counter() - t
            origin = index["analysis"]["origin"]
            print(f"{name}: {len(index['runs'])} runs in {wall:.1f} s ({wall / len(index['runs']) * 1000:.0f} ms/run); "
                  f"peak RSS parent {self_mb:.0f} MB, largest local worker {child_mb:.0f} MB; "
                  f"index {(out / 'index.json').stat().st_size / 1e6:.1f} MB, loads in {load_s:.2f} s; "
                  f"origin rank {origin and origin['rank']} {origin and origin['node']}", flush=True)
    finally:
        if cluster is not None:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
