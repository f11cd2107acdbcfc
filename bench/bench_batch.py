#!/usr/bin/env python3
"""Time a whole job: N ranks x a synthetic run grown from the real 4-rank dist4 structure.

The rank folders of the job are symbolic links to one synthetic npu/bench pair (bench/make_synthetic.py
on dist4 rank 0): every rank's comparison is real work, the disk holds one copy. A few ranks get the
perturbed npu run, the others an exact copy of the bench run. Usage::

    .venv/bin/python bench/bench_batch.py [--ranks 1024] [--nodes 5000] [--workers 2] [--dask] [--indent 1]

Prints wall time, CPU time of the parent and of its local workers, peak RSS of the parent and of the
largest worker, the index size and the time to load the index (what the viewer's overview reads); then
the time of a resume that finds every run finished, and what keying the runs for a resume costs: statting
every input file (what a batch does) against hashing their content. ``--repeat N`` runs each mode N times
(medians and ranges). Run it with the interpreter of another tree's environment to time that version of
the package on the same job (the first line names the package it imported).

``--stages N`` times N runs of the job in this process instead, stage by stage (CPU time, medians over the
runs after one warm-up run, as a warm worker does them): reading each side, comparing, writing the result, the
entry; what a run costs without a pool or another process competing for the cores.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "shared" / "data" / "msprobe" / "dumps" / "dist4" / "statistics" / "baseline" / \
    "step0" / "rank0"


def make_job(root: Path, ranks: int, nodes: int, perturbed: set[int], indent: int | None = None) -> tuple[Path, Path]:
    """The job's npu and bench roots; its pair is written compactly, or with `indent` (msprobe writes indent=1)."""
    synth = root / ("synth" if indent is None else f"synth_indent{indent}")
    if not (synth / "npu" / "dump.json").is_file():
        layout = [] if indent is None else ["--indent", str(indent)]
        subprocess.run([sys.executable, str(HERE / "make_synthetic.py"), "--source", str(SOURCE), "--nodes",
                        str(nodes), "--out", str(synth), *layout], check=True, capture_output=True)
    npu_root, bench_root = root / "npu" / "step0", root / "bench" / "step0"
    for rank in range(ranks):
        for side_root, target in ((npu_root, synth / ("npu" if rank in perturbed else "bench")),
                                  (bench_root, synth / "bench")):
            link = side_root / f"rank{rank}"
            if link.is_symlink() and link.readlink() != target:  # another --ranks: other perturbed ranks
                link.unlink()
            if not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(target, target_is_directory=True)
    return npu_root.parent, bench_root.parent


def key_costs(npu: Path, bench: Path) -> str:
    """Seconds to key every run by stat (what a resume does) and by hashing every input file's content."""
    import hashlib

    from graphcmp.core.distributed.layout import pair_runs

    try:
        from graphcmp.core.distributed.batch import BatchOptions, options_digest, run_key
    except ImportError:
        return "keys: this tree does not key its runs"
    pairs = pair_runs(npu, bench)[0]
    start = time.perf_counter()
    digest = options_digest(BatchOptions())
    for n, b in pairs.values():
        run_key(n, b, digest)
    stat_s = time.perf_counter() - start
    start, size = time.perf_counter(), 0
    for n, b in pairs.values():
        for side in (n, b):
            for file in sorted(Path(side).rglob("*")):
                data = file.read_bytes()
                size += len(data)
                hashlib.blake2b(data, digest_size=16)
    return (f"keys of {len(pairs)} runs: stat {stat_s:.2f} s; content hash {time.perf_counter() - start:.2f} s "
            f"({size / 1e9:.1f} GB read)")


def stage_costs(npu: Path, bench: Path, out: Path, runs: int) -> str:
    """CPU ms per run of each stage of `compare_run` (medians over `runs` runs after a warm-up), one line each."""
    from graphcmp.core.compare import compare_graphs
    from graphcmp.core.distributed.batch import BatchOptions, _heat_rows, compare_run
    from graphcmp.core.distributed.layout import pair_runs
    from graphcmp.core.distributed.links import comm_calls
    from graphcmp.core.readers import read_graph
    from graphcmp.core.readers.msprobe import compiled_reads, reusing_structure
    from graphcmp.core.report import save_report
    from graphcmp.core.tensorcmp import tensor_metrics_for

    subprocess.run(["rm", "-rf", str(out)], check=True)
    out.mkdir(parents=True)
    pairs = sorted(pair_runs(npu, bench)[0].items(), key=lambda item: item[0].rank or 0)
    stride = max(1, len(pairs) // runs)
    chosen = [pairs[0], *pairs[::stride][:runs]]  # the first again as the warm-up
    costs: dict[str, list[float]] = {}
    clock = [0.0]

    def tick(stage: str) -> None:
        now = time.process_time()
        costs.setdefault(stage, []).append((now - clock[0]) * 1000)
        clock[0] = now

    def run_stages(key, n, b) -> None:
        clock[0] = time.process_time()
        npu_graph = read_graph(n)
        tick("read npu")
        bench_graph = read_graph(b)
        tick("read bench")
        report = compare_graphs(npu_graph, bench_graph, tensor_metrics=tensor_metrics_for(npu_graph, bench_graph))
        tick("compare_graphs")
        save_report(report, out / f"{key.label}.npz")
        tick("save_report")
        report.summary(), report.analysis(), comm_calls(report.npu, key.rank or 0), _heat_rows(report)
        tick("entry (summary, first, comm, heat)")
        compare_run(str(n), str(b), str(out), key.step, key.rank, BatchOptions())
        tick("compare_run, all of it")

    with reusing_structure(), compiled_reads():  # as a worker reads its runs (`batch.compare_runs`)
        for key, (n, b) in chosen:
            run_stages(key, n, b)
    width = max(map(len, costs))
    lines = [f"{stage:<{width}}  {statistics.median(ms[1:]):6.1f} ms  [{min(ms[1:]):.1f}-{max(ms[1:]):.1f}]"
             for stage, ms in costs.items()]
    return f"CPU per run, {len(chosen) - 1} runs in this process (median [range]):\n" + "\n".join(lines)


def run_mode(npu: Path, bench: Path, out: Path, workers: int, scheduler: str | None) -> tuple[float, str]:
    """Run the whole job into a fresh `out`; return (wall seconds, one line of figures)."""
    from graphcmp.core.distributed.batch import load_index, run_batch

    subprocess.run(["rm", "-rf", str(out)], check=True)
    cpu = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    index = run_batch(npu, bench, out, workers=workers, scheduler=scheduler)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    parent_cpu, workers_cpu = ((a.ru_utime + a.ru_stime) - (b.ru_utime + b.ru_stime) for a, b in zip(after, cpu))
    t = time.perf_counter()
    load_index(out)
    load_s = time.perf_counter() - t
    runs = len(index["runs"])
    origin = index["analysis"]["origin"]
    sizes = [f.stat().st_size for f in out.glob("step*_rank*.npz")]
    return wall, (f"{runs} runs in {wall:.1f} s ({wall / runs * 1000:.0f} ms/run); CPU parent {parent_cpu:.1f} s, "
                  f"local workers {workers_cpu:.1f} s; peak RSS parent "
                  f"{after[0].ru_maxrss / 1024:.0f} MB, largest local worker {after[1].ru_maxrss / 1024:.0f} MB; "
                  f"index {(out / 'index.json').stat().st_size / 1e6:.1f} MB, loads in {load_s:.2f} s; "
                  f"results {sum(sizes) / max(len(sizes), 1) / 1e6:.1f} MB/run; "
                  f"origin rank {origin and origin['rank']} {origin and origin['node']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dask", action="store_true", help="also run the job through a local Dask cluster")
    parser.add_argument("--no-local", action="store_true", help="skip the local processes")
    parser.add_argument("--repeat", type=int, default=1, help="runs per mode (medians and ranges)")
    parser.add_argument("--indent", type=int, default=None,
                        help="write the pair's dump.json with this indent (msprobe's own: 1); default compact")
    parser.add_argument("--stages", type=int, default=0, metavar="N",
                        help="only time N runs in this process, stage by stage (CPU ms per run)")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "graphcmp_batch_bench")
    args = parser.parse_args(argv)

    import graphcmp
    from graphcmp.core.distributed.batch import run_batch

    perturbed = {args.ranks // 2, args.ranks // 2 + 1}
    npu, bench = make_job(args.work_dir, args.ranks, args.nodes, perturbed, args.indent)
    print(f"graphcmp {graphcmp.__version__} from {Path(graphcmp.__file__).parent}")
    print(f"job: {args.ranks} ranks x {args.nodes} nodes per side, dump.json "
          f"{'compact' if args.indent is None else f'indent={args.indent}'}; perturbed ranks {sorted(perturbed)}",
          flush=True)
    if args.stages:
        print(stage_costs(npu, bench, args.work_dir / "results_stages", args.stages))
        return 0
    modes = ([] if args.no_local else ["local processes"]) + (["dask LocalCluster"] if args.dask else [])
    for name in modes:
        cluster = None
        if name.startswith("dask"):  # started for its own runs only: its scheduler's threads live in this process
            from distributed import LocalCluster

            cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                   dashboard_address=":0")
        scheduler = cluster and cluster.scheduler_address
        try:
            out = args.work_dir / f"results_{'dask' if scheduler else 'local'}"
            walls = []
            for _ in range(args.repeat):
                wall, line = run_mode(npu, bench, out, args.workers, scheduler)
                walls.append(wall)
                print(f"{name}: {line}", flush=True)
            if args.repeat > 1:
                print(f"{name}: median {statistics.median(walls):.1f} s [{min(walls):.1f}-{max(walls):.1f}]")
            start = time.perf_counter()
            run_batch(npu, bench, out, workers=args.workers, scheduler=scheduler)
            print(f"{name}: resume with every run finished: {time.perf_counter() - start:.2f} s", flush=True)
        finally:
            if cluster is not None:
                cluster.close()
    print(key_costs(npu, bench))
    return 0


if __name__ == "__main__":
    sys.exit(main())
