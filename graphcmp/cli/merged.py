"""`graphcmp compare NPU_ROOT BENCH_ROOT` for jobs of different layouts: each merged into one logical run.

Used when a layout is stated (``--npu-layout``/``--bench-layout``) or the two jobs are laid out
differently; a job that cannot be merged is compared rank by rank instead, after one line saying why.
"""

from __future__ import annotations

import argparse
import sys

from graphcmp.cli.batch import handle_batch
from graphcmp.cli.mapping_options import input_files, rule_specs
from graphcmp.cli.output import emit
from graphcmp.cli.render import render_merged, render_outcome
from graphcmp.core.outputs import checked_folder

__all__ = ["add_layout_options", "handle_merged", "layout_specs", "wants_merge"]


def add_layout_options(parser: argparse.ArgumentParser) -> None:
    for side in ("npu", "bench"):
        parser.add_argument(f"--{side}-layout", metavar="SPEC",
                            help=f"the {side} job's layout, e.g. tp=2,pp=2[,vpp=2][,order=tp-cp-ep-dp-pp]: merge its "
                                 "ranks into one logical run (default: detected from its communication calls)")


def layout_specs(args: argparse.Namespace) -> tuple:
    """The stated layouts (None where not stated); a bad statement raises `LayoutError`."""
    from graphcmp.core.distributed.topology import parse_layout

    return tuple(parse_layout(text) if text else None for text in (args.npu_layout, args.bench_layout))


def wants_merge(args: argparse.Namespace) -> str | None:
    """Why the two job roots are merged before comparing (None: compare rank N with rank N)."""
    from graphcmp.core.distributed.merge import merge_reason

    npu_spec, bench_spec = layout_specs(args)
    return merge_reason(args.npu, args.bench, npu_spec, bench_spec)


def handle_merged(args: argparse.Namespace, reason: str) -> int:
    from graphcmp.core.distributed.batch import batch_summary
    from graphcmp.core.distributed.merged import MergeOptions, run_merged
    from graphcmp.core.distributed.topology import LayoutContradiction, LayoutError

    out = "results" if args.output is None else args.output
    checked_folder(out, [args.npu, args.bench, *input_files(args)])
    npu_spec, bench_spec = layout_specs(args)
    options = MergeOptions(fuzzy=args.fuzzy, thresholds_file=args.thresholds, tensors=not args.no_tensors,
                           rules=tuple(rule_specs(args)), npu_layout=npu_spec, bench_layout=bench_spec)
    quiet = args.quiet or not sys.stderr.isatty()
    try:
        index = run_merged(args.npu, args.bench, out, options=options, workers=args.workers,
                           scheduler=args.scheduler,
                           progress=None if quiet else (lambda text: print(f"graphcmp: {text}", file=sys.stderr)))
    except LayoutContradiction:
        raise  # a stated layout the dump contradicts is bad input (exit 2), not a job to compare rank by rank
    except LayoutError as err:
        print(f"graphcmp: cannot merge the ranks: {err}", file=sys.stderr)
        return handle_batch(args)
    from graphcmp.core.outcome import job_outcome

    outcome = job_outcome(index)
    summary = {**batch_summary(index), "layouts": index["layouts"], "merged_because": reason, "output": out,
               "verdict": outcome.verdict, "outcome": outcome.to_dict()}
    emit(summary, render_merged(summary) + "\n" + render_outcome(summary["outcome"])
         + f"\nwritten: {out}/index.json", args.json)
    if any(run["error"] for run in summary["runs"]):
        return 2
    return outcome.exit_code
