"""`graphcmp compare NPU_ROOT BENCH_ROOT -o results/`: every (step, rank) of a job, locally or on Dask."""

from __future__ import annotations

import argparse
import sys

from graphcmp.cli.mapping_options import input_files, rule_specs
from graphcmp.cli.output import emit
from graphcmp.cli.render import render_batch, render_outcome
from graphcmp.core.outputs import checked_folder

__all__ = ["add_batch_options", "handle_batch"]


def add_batch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, metavar="N",
                        help="local worker processes for a step/rank layout (default: the number of cores)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run the per-rank work on an existing Dask cluster, e.g. tcp://host:8786")


def handle_batch(args: argparse.Namespace) -> int:
    from graphcmp.core.distributed.batch import BatchOptions, BatchStopped, batch_summary, run_batch  # job layouts

    out = "results" if args.output is None else args.output
    reference = getattr(args, "reference", None)
    checked_folder(out, [args.npu, args.bench, *([reference] if reference else []), *input_files(args)])
    options = BatchOptions(fuzzy=args.fuzzy, thresholds_file=args.thresholds, tensors=not args.no_tensors,
                           rules=tuple(rule_specs(args)), reference=reference)
    from tqdm import tqdm  # lazy: a single-pair compare never shows this bar

    bar = tqdm(total=0, desc="compare runs", unit="run", file=sys.stderr, disable=True if args.quiet else None,
               leave=False)

    def progress(done: int, total: int, label: str) -> None:
        bar.total = total
        bar.n = done
        bar.set_postfix_str(label)
        bar.refresh()

    try:
        index = run_batch(args.npu, args.bench, out, options=options, workers=args.workers,
                          scheduler=args.scheduler, progress=progress)
    except BatchStopped as stop:
        bar.close()
        print(f"graphcmp: stopped by {stop}; finished runs are kept in {out}: the same command resumes",
              file=sys.stderr)
        return 128 + stop.signum
    finally:
        bar.close()
    from graphcmp.core.outcome import job_outcome

    outcome = job_outcome(index)
    summary = {**batch_summary(index), "output": out, "verdict": outcome.verdict, "outcome": outcome.to_dict()}
    emit(summary, render_batch(summary) + "\n" + render_outcome(summary["outcome"]) + f"\nwritten: {out}/index.json",
         args.json)
    if any(run["error"] for run in summary["runs"]):
        return 2
    return outcome.exit_code
