"""`graphcmp compare NPU BENCH -o cmp.npz`: match two runs, compare them, write the annotated result.

The result is one file: the npz container (columns, opened in a moment) unless ``-o`` names a
``.json`` file, which gets the annotated JSON document (docs/format.md; `graphcmp export --to json`
turns one into the other); ``-o`` with another suffix (``out.txt``) is refused.

When NPU or BENCH is a step/rank layout (``stepK/rankN``), every run is compared and ``-o`` names a
folder: one result per (step, rank) plus ``index.json``. When the two jobs are laid out differently
(tensor/pipeline parallel sizes), or ``--npu-layout``/``--bench-layout`` is given, each job's ranks are
merged into one logical run per step and those are compared (docs/parallel.md).
"""

from __future__ import annotations

import argparse
import os
from contextlib import nullcontext
from pathlib import Path

from graphcmp.cli.batch import add_batch_options, handle_batch
from graphcmp.cli.kernels import build_reader_later, build_tensor_kernels_later
from graphcmp.cli.mapping_options import add_mapping_options, input_files, matchers_from_args, render_rule_report
from graphcmp.cli.merged import add_layout_options, handle_merged, wants_merge
from graphcmp.cli.options import add_format, add_json, add_quiet
from graphcmp.cli.output import emit
from graphcmp.cli.progress import stages
from graphcmp.cli.render import render_first_divergence, render_outcome, render_summary
from graphcmp.core.derived import derive_bench, derive_npu_aside, derive_npu_here
from graphcmp.core.distributed.layout import discover_runs, is_batch_root
from graphcmp.core.errors import DumpFormatError, GraphcmpError, OutputError
from graphcmp.core.jsonio import gc_paused
from graphcmp.core.outputs import checked_output
from graphcmp.core.readers.detect import detect_format, read_graph
from graphcmp.core.readers.pair import read_pair, side_by_side
from graphcmp.core.rules import load_thresholds


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("compare", help="compare an npu run with its bench run", description=__doc__)
    parser.add_argument("npu", help="the run under test (msprobe rank folder, graph file ...)")
    parser.add_argument("bench", help="the baseline run")
    parser.add_argument("-o", "--output", help="output file ending in .npz (default: cmp.npz) or .json (the JSON "
                        "document), or folder for a step/rank layout (default: results)")
    parser.add_argument("--fuzzy", action=argparse.BooleanOptionalAction, default=True,
                        help="align calls in order inside matched modules where exact call counters disagree (an "
                        "extra op early in a run); on by default, --no-fuzzy pairs exact names only")
    parser.add_argument("--thresholds", metavar="FILE", help="TOML or JSON file overriding the default thresholds")
    parser.add_argument("--no-tensors", action="store_true",
                        help="compare statistics only, even when both runs dumped real tensors")
    parser.add_argument("--reference", metavar="DIR",
                        help="a third run at the npu run's precision without the bug (e.g. the model on the bench "
                        "hardware in bf16): each call's allowed noise is measured from it instead of modeled "
                        "(docs/noise.md); one run folder, like NPU")
    parser.add_argument("--overflow", action="store_true",
                        help="also fail (exit 1) on overflow: inf/NaN or fp16/bf16 limit in npu outputs")
    parser.add_argument("--fusion-rule", metavar="GRAPH",
                        help="Ascend raw dump against golden .npy files: the GE graph the model ran (atc --json or "
                        "ge_proto_*.txt) saying which original tensor each op's inputs and outputs stand for "
                        "(default: a GE graph beside the dump, else the original op each dump header names)")
    add_mapping_options(parser)
    add_batch_options(parser)
    add_layout_options(parser)
    add_format(parser)
    add_json(parser)
    add_quiet(parser)
    parser.set_defaults(handler=handle)


RESULT_SUFFIXES = (".npz", ".json")
"""What -o of one comparison may end with: the npz container or the JSON document."""


def _check_suffix(output: str) -> None:
    """Refuse an -o whose suffix names neither result format (``out.txt`` would hold an npz under a text name); a
    name without a suffix gets the npz container, as graphcmp's readers tell it by its first bytes."""
    if Path(output).suffix and not output.lower().endswith(RESULT_SUFFIXES):
        raise OutputError(f"{output}: -o names a result file ending in .npz or .json (.npz: the columns, opened in "
                          "a moment; .json: the annotated JSON document), e.g. -o cmp.npz")


def handle(args: argparse.Namespace) -> int:
    golden = _is_golden(args)
    if args.reference:
        if golden:
            raise GraphcmpError(f"{args.reference}: --reference measures the noise against a bench run; golden .npy "
                                "data has no run to measure it from")
        _check_reference(args)
    if not golden and (is_batch_root(args.npu) or is_batch_root(args.bench) or args.npu_layout or args.bench_layout):
        reason = wants_merge(args)
        if not reason:
            return handle_batch(args)  # its workers start the compiled reader's build (batch.compare_runs)
        code = handle_merged(args, reason)
        build_reader_later([str(run) for root in (args.npu, args.bench) for run in _first_run(root)], args.format,
                           quiet=args.quiet)
        build_tensor_kernels_later(quiet=args.quiet)
        return code
    # the cyclic collector spent 40 ms of a 1.4 s comparison of the 35k pair walking the lists the comparison makes
    # and frees, which hold no cycles; the few one comparison may leave were 22 MB at the peak of a 1M-node pair
    with gc_paused():
        return _compare_pair(args, golden)


def _compare_pair(args: argparse.Namespace, golden: bool) -> int:
    args.output = "cmp.npz" if args.output is None else args.output
    if args.format is None:  # a path that holds no run is the problem to name, before any about -o
        for run in (args.npu, args.bench):
            detect_format(run)
    checked_output(args.output, [args.npu, args.bench, *([args.reference] if args.reference else []),
                                 *input_files(args), *([args.fusion_rule] if args.fusion_rule else [])])
    _check_suffix(args.output)
    thresholds = load_thresholds(args.thresholds) if args.thresholds else None
    matchers = matchers_from_args(args)
    with stages(3, "compare", quiet=args.quiet) as bar:
        bar.set_postfix_str("reading both runs")
        if golden:
            from graphcmp.core.readers.ascend_golden import read_npu_and_golden

            npu, bench = read_npu_and_golden(args.npu, args.bench, args.fusion_rule)
        else:
            # each run's flow edges: recovered by the runs' writer
            npu, bench = read_pair(args.npu, args.bench, format=args.format, meanwhile=_load_comparison,
                                   ahead=derive_npu_aside, ahead_bench=derive_bench,
                                   ahead_loaded=derive_npu_here)
        from graphcmp.core.compare import compare_graphs
        from graphcmp.core.report import runs_written_meanwhile, save_report
        from graphcmp.core.tensorcmp import tensor_metrics_for
        bar.update()
        bar.set_postfix_str("comparing")
        meanwhile = runs_written_meanwhile(npu, bench, args.output) if side_by_side(args.npu, args.bench) else (
            nullcontext())
        with meanwhile as runs:
            tensors = None if args.no_tensors else tensor_metrics_for(npu, bench)
            reference = read_graph(args.reference, args.format) if args.reference else None
            reference_tensors = (None if args.no_tensors or reference is None
                                 else tensor_metrics_for(reference, bench))
            report = compare_graphs(npu, bench, fuzzy=args.fuzzy, matchers=matchers, thresholds=thresholds,
                                    tensor_metrics=tensors, reference=reference, reference_metrics=reference_tensors)
            bar.update()
            bar.set_postfix_str("writing")
            save_report(report, args.output, runs=runs)
        bar.update()
    from graphcmp.core.outcome import report_outcome

    analysis = report.analysis()
    outcome = report_outcome(report, overflow=args.overflow)
    summary = {**report.summary(), "output": args.output, "verdict": outcome.verdict, "outcome": outcome.to_dict(),
               "first_divergence": analysis.first.to_dict() if analysis.first else None}
    rules = render_rule_report(summary)
    text = [render_summary(summary), *([rules] if rules else []), render_first_divergence(analysis),
            render_outcome(summary["outcome"]), f"written: {args.output}"]
    emit(summary, "\n".join(text), args.json)
    if not golden:
        build_reader_later([args.npu, args.bench], args.format, quiet=args.quiet)
    build_tensor_kernels_later(quiet=args.quiet)
    return outcome.exit_code


def _first_run(root: str) -> list[Path]:
    """One run folder of a job (`root` a step/rank layout), or `root` itself when it is a run."""
    return list(discover_runs(root).values())[:1] if is_batch_root(root) else [Path(root)]


def _is_golden(args: argparse.Namespace) -> bool:
    """True when BENCH is a folder of golden .npy files and NPU an Ascend raw dump (checked only for a BENCH folder
    holding .npy files: step/rank roots and other runs are left to their readers)."""
    if args.format not in (None, "ascend_dump") or not _holds_npy(args.bench):
        return False
    try:
        if detect_format(args.bench) != "ascend_golden":
            return False
    except DumpFormatError:
        return False
    if detect_format(args.npu) != "ascend_dump":
        raise DumpFormatError(f"{args.npu}: golden data compare against an Ascend raw dump folder "
                              "({op_type}.{op_name}.{task_id}.{stream_id}.{timestamp} files)")
    return True


def _holds_npy(path: str) -> bool:
    try:
        return any(e.name.endswith(".npy") for e in os.scandir(path))
    except OSError:
        return False


def _check_reference(args: argparse.Namespace) -> None:
    """With --reference: NPU, BENCH and the reference are one run folder each (a job of one run stands for its
    run), or step/rank jobs of one layout compared run by run (the batch takes the reference job's run of each step
    and rank). Jobs to merge (other layouts, --npu-layout/--bench-layout) are bad input: no merged reference is built.
    """
    jobs = is_batch_root(args.npu) or is_batch_root(args.bench)
    if args.npu_layout or args.bench_layout or (jobs and wants_merge(args)):
        raise GraphcmpError(f"{args.reference}: --reference works run by run (one rank folder, or step/rank jobs of "
                            "one layout), not on merged parallel jobs; compare one rank folder of each")
    several = [path for path in (args.npu, args.bench) if is_batch_root(path) and len(discover_runs(path)) > 1]
    if several and not is_batch_root(args.reference):
        raise GraphcmpError(f"{args.reference}: one run folder, and {several[0]} holds several runs: give the "
                            "reference job (stepK/rankN folders in the npu job's layout)")
    if several:
        return  # the batch pairs the reference job's runs (core/distributed/batch.py: reference_runs)
    for name in ("npu", "bench", "reference"):
        path = getattr(args, name)
        if not is_batch_root(path):
            continue
        runs = discover_runs(path)
        if len(runs) != 1:
            raise GraphcmpError(f"{path}: holds {len(runs)} runs, and NPU and BENCH are one run each: give the "
                                "reference's rank folder (stepK/rankN)")
        setattr(args, name, str(next(iter(runs.values()))))


def _load_comparison() -> None:
    """Import what comes after reading while the npu run is read in the other process: the comparison's modules."""
    import graphcmp.core.compare
    import graphcmp.core.report  # noqa: F401
