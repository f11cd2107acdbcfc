#!/usr/bin/env python3
"""Parallel jobs: time and memory of merging + comparing a synthetic TP x PP job, and the shared jobs against msprobe.

Two parts (both by default):

* ``--timing``: a TP8 x PP8 (64-rank) job grown from the shared dumps by ``bench/make_parallel_job.py``
  (made under ``--job-dir`` when missing, never in the repository) is merged and compared with its
  baseline in a fresh child process: wall time per stage (reading the ranks, merging them, the
  baseline, comparing, writing the results) and peak RSS of the process and of its reader
  processes; then the ``graphcmp compare`` command end to end. Median of ``--repeat`` runs.
* ``--tables``: every shared parallel job compared with tp1 the way ``graphcmp compare`` does it:
  merged node counts and matched share next to msprobe 26.2.0's own parallel merge
  (``vis/v26/parallel/results.json``), the first divergence next to the truth (``TRUTH.json``) and to
  msprobe's first flagged node; and ``graphcmp consistency`` on the TP jobs.

Usage::

    .venv/bin/python bench/bench_parallel.py [--timing] [--tables] [--tp 8 --pp 8 --layers 32] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
DATA = HERE.parent.parent / "shared" / "data" / "msprobe"
PARALLEL = DATA / "dumps" / "parallel"
MSPROBE = DATA / "vis" / "v26" / "parallel" / "results.json"
JOBS = ("tp2", "pp2", "tp2pp2", "tp2_perturb", "pp2_perturb", "tp2_desync")


def measure_once(npu: str, bench: str, out: str) -> dict:
    """Merge and compare in this process; stage times and peak RSS (own and of the reading processes)."""
    start = time.perf_counter()
    from graphcmp.core.distributed.merge import job_steps, merge_runs, read_step
    from graphcmp.core.distributed.merged import compare_merged
    from graphcmp.core.report import save_report

    stages = {"import": time.perf_counter() - start}
    t = time.perf_counter()
    ranks = next(iter(job_steps(npu).values()))
    graphs = read_step(ranks)
    stages["read npu ranks"] = time.perf_counter() - t
    t = time.perf_counter()
    merged = merge_runs(graphs, path=npu, step=0)
    del graphs
    stages["merge npu"] = time.perf_counter() - t
    t = time.perf_counter()
    baseline = merge_runs(read_step(next(iter(job_steps(bench).values()))), path=bench, step=0)
    stages["read+merge bench"] = time.perf_counter() - t
    t = time.perf_counter()
    report = compare_merged(merged.graph, baseline.graph)
    first = report.analysis().first
    stages["compare+diverge"] = time.perf_counter() - t
    t = time.perf_counter()
    save_report(report, out)
    stages["write"] = time.perf_counter() - t
    return {"wall": time.perf_counter() - start, "stages": stages, "ranks": len(ranks),
            "merged_nodes": len(merged.graph), "shards": len(merged.graph.shards), "first": first and first.node,
            "errors": report.summary()["verdicts"].get("error", 0), "layout": merged.layout.describe(),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_rss_readers_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def measure_cli(npu: str, bench: str, out: str) -> dict:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "graphcmp", "compare", npu, bench, "-o", out, "-q"],
                          capture_output=True, text=True, check=False)
    return {"wall": time.perf_counter() - start, "rc": proc.returncode,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def run_child(function: str, npu: str, bench: str, out: str) -> dict:
    code = (f"import json,sys; sys.path.insert(0, {str(HERE)!r}); import bench_parallel as b; "
            f"print(json.dumps(b.{function}({npu!r}, {bench!r}, {out!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def timing(args: argparse.Namespace) -> None:
    from make_parallel_job import make_job

    job = args.job_dir / f"tp{args.tp}pp{args.pp}_l{args.layers}"
    if not (job / "bench" / "step0" / "rank0" / "dump.json").is_file():
        make_job(job, tp=args.tp, pp=args.pp, layers=args.layers)
    size = sum(f.stat().st_size for f in (job / "npu").rglob("*.json")) / 1e6
    print(f"\n### TP{args.tp} x PP{args.pp} job, {args.layers} layers ({size:.0f} MB of dumps): merge + compare\n")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [run_child("measure_once", str(job / "npu"), str(job / "bench"), str(Path(tmp) / "out.json"))
                for _ in range(args.repeat)]
        best = sorted(runs, key=lambda r: r["wall"])[len(runs) // 2]
        print(f"layout: {best['layout']}; merged run {best['merged_nodes']} nodes, {best['shards']} shard records; "
              f"first divergence {best['first']}, error verdicts {best['errors']}")
        print(f"\n| step | seconds (median of {args.repeat}) |\n|---|---|")
        for name in best["stages"]:
            print(f"| {name} | {statistics.median(r['stages'][name] for r in runs):.2f} |")
        walls = [r["wall"] for r in runs]
        print(f"| **total** | **{statistics.median(walls):.2f}** [{min(walls):.2f}-{max(walls):.2f}] |")
        print(f"\npeak RSS: {max(r['peak_rss_mb'] for r in runs):.0f} MB (merging process), "
              f"{max(r['peak_rss_readers_mb'] for r in runs):.0f} MB (largest reader process)")
        cli = [run_child("measure_cli", str(job / "npu"), str(job / "bench"), str(Path(tmp) / "cli"))
               for _ in range(args.repeat)]
        print(f"`graphcmp compare` end to end: {statistics.median(c['wall'] for c in cli):.2f} s "
              f"[{min(c['wall'] for c in cli):.2f}-{max(c['wall'] for c in cli):.2f}], exit {cli[0]['rc']}, "
              f"peak RSS {max(c['peak_rss_mb'] for c in cli):.0f} MB (largest process)")


def tables() -> None:
    from graphcmp.core.distributed.consistency import check_job
    from graphcmp.core.distributed.merged import run_merged

    truth = json.loads((PARALLEL / "TRUTH.json").read_text())["variants"]
    msprobe = json.loads(MSPROBE.read_text())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for job in JOBS:
            t = time.perf_counter()
            index = run_merged(PARALLEL / job, PARALLEL / "tp1", Path(tmp) / job)
            seconds = time.perf_counter() - t
            rows.append((job, index, seconds, msprobe[f"{job}_vs_tp1"]["db"]["graphs"]))
    print("\n### Merged graphs against tp1: nodes and matched share\n")
    print("| job | graphcmp merged nodes (npu / tp1) | matched npu / tp1 | matched share of tp1 | error verdicts "
          "| msprobe merged nodes (npu / tp1) | msprobe matched npu / tp1 | msprobe share of tp1 |")
    print("|---|---|---|---|---|---|---|---|")
    for job, index, _, graphs in rows:
        s = index["runs"][0]["summary"]
        npu_m, bench_m = graphs["step0/rank0/NPU"], graphs["step0/rank0/Bench"]
        print(f"| {job} | {s['npu']['nodes']} / {s['bench']['nodes']} | {s['npu']['matched']} / "
              f"{s['bench']['matched']} | {s['bench']['matched'] / s['bench']['nodes']:.1%} | "
              f"{s['verdicts'].get('error', 0)} | {npu_m['nodes']} / {bench_m['nodes']} | {npu_m['matched']} / "
              f"{bench_m['matched']} | {bench_m['matched'] / bench_m['nodes']:.1%} |")
    print("\n### First divergence: truth, graphcmp, msprobe\n")
    print("| job | truth (rank: op / module) | graphcmp (rank: node; id in that rank's dump; module) | right "
          "| msprobe first flagged node | seconds |")
    print("|---|---|---|---|---|---|")
    for job, index, seconds, graphs in rows:
        origin = index["analysis"]["origin"]
        first = graphs["step0/rank0/NPU"].get("first_nonpass_by_node_order") or []
        theirs = first[0]["node"] if first else "none"
        if job in truth:
            op = truth[job]["first_divergent_op"]
            ids = {op["node"], op["module"], *op["first_compute_ops"], truth[job]["merged_graph_ids"]["module"]}
            expected = f"{op['rank']}: {op['node']} / {op['module'].split('decoder.')[-1]}"
        else:
            ids, expected, op = set(), "no divergence", {"rank": None}
        if origin is None:
            ours, right = "no divergence", not ids
        else:
            ours = (f"{origin['rank'] if origin['rank'] is not None else '?'}: {origin['node']}; "
                    f"{origin['source_id']}; {(origin['module'] or '-').split('decoder.')[-1]}")
            right = bool(ids) and (origin["node"] in ids or origin["module"] in ids) and origin["rank"] == op["rank"]
        print(f"| {job} | {expected} | {ours} | {'yes' if right else 'no'} | {theirs} | {seconds:.1f} |")
    print("\n### graphcmp consistency (no baseline)\n")
    print("| job | ranks that disagree | first disagreement |\n|---|---|---|")
    for job in ("tp2_desync", "tp2", "tp2_perturb", "tp2pp2"):
        result = check_job(PARALLEL / job)
        bad = result["bad_ranks"]
        first = f"rank {bad[0]['rank']}: {bad[0]['node']} {bad[0]['tensor']} ({bad[0]['parameter']})" if bad else "-"
        print(f"| {job} | {', '.join(str(b['rank']) for b in bad) or 'none'} | {first} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timing", action="store_true")
    parser.add_argument("--tables", action="store_true")
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--pp", type=int, default=8)
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--job-dir", type=Path, default=Path(tempfile.gettempdir()) / "graphcmp_parallel")
    args = parser.parse_args(argv)
    both = not args.timing and not args.tables
    if args.tables or both:
        tables()
    if args.timing or both:
        timing(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
