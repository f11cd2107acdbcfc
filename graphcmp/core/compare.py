"""The one orchestrator: read runs, match, pair tensors, compute metrics, judge — one call, one report.

`compare_graphs` is the comparison every entry point makes: `compare_paths` on two dump paths,
`compare_vis` on a tb-graph-ascend document (msprobe's links as the given matches), and
`apply_manual_matches` when a person's matches come first. `load_document` opens any file graphcmp
shows: its report or graph JSON, or a `.vis`/`.vis.db`, compared here; `load_documents` every graph of a
`.vis.db`, and `file_summary` the counts `graphcmp info` prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from graphcmp._version import __version__
from graphcmp.core.derived import derive_bench, derive_npu_aside, derive_npu_here
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.judge import judge
from graphcmp.core.mapping_files import load_builtin_op_table
from graphcmp.core.matching import ChildMatcher, RuleMatcher, default_matchers, match_graphs
from graphcmp.core.matching.by_api import is_cross_framework
from graphcmp.core.matching.by_op_table import OpTableMatcher
from graphcmp.core.matching.given import GivenMatcher, GivenMatches
from graphcmp.core.noise import noise_model
from graphcmp.core.outcome import job_outcome
from graphcmp.core.overflow import overflow_levels
from graphcmp.core.pairing import TensorMetricsFn, pair_metrics, pair_tensors
from graphcmp.core.readers.detect import VIS_SUFFIXES, detect_format, read_graph
from graphcmp.core.readers.pair import read_pair
from graphcmp.core.records import DumpGraph
from graphcmp.core.reference import reference_growth
from graphcmp.core.report import CompareOptions, CompareReport, graph_summary, load_saved
from graphcmp.core.rules import DEFAULT_THRESHOLDS, Thresholds
from graphcmp.core.tensorcmp import tensor_metrics_for

if TYPE_CHECKING:
    from graphcmp.core.matching.manual import ManualMatches
    from graphcmp.core.readers.vis import VisDocument

__all__ = ["apply_manual_matches", "compare_graphs", "compare_paths", "compare_vis", "file_summary", "load_document",
           "load_documents"]


def compare_graphs(
    npu: DumpGraph,
    bench: DumpGraph,
    *,
    fuzzy: bool = True,
    matchers: Sequence[ChildMatcher | RuleMatcher] | None = None,
    matches: GivenMatches | None = None,
    thresholds: Thresholds | None = None,
    tensor_metrics: TensorMetricsFn | None = None,
    reference: DumpGraph | None = None,
    reference_metrics: TensorMetricsFn | None = None,
) -> CompareReport:
    """Compare an npu run with its bench run.

    Parameters
    ----------
    npu, bench : DumpGraph
        The run under test and the baseline.
    fuzzy : bool
        Where exact ids disagree inside a matched parent (an extra call shifted the counters), align the
        calls in order (see `FuzzyMatcher`). Defaults to True. Ignored when `matchers` or `matches` is given.
    matchers : sequence of ChildMatcher, optional
        Matching strategies in priority order. Defaults to `default_matchers(fuzzy=fuzzy)`, or to none
        when `matches` is given.
    matches : GivenMatches, optional
        Pairs made elsewhere (msprobe's links in a `.vis`), pinned before `matchers`; the report records
        their ``source`` spec as a rule, so `apply_manual_matches` can rebuild them.
    thresholds : Thresholds, optional
        Tolerances and rules. Defaults to `DEFAULT_THRESHOLDS`.
    tensor_metrics : callable, optional
        Computes real-tensor metrics for the pairs (tensor task mode); None compares statistics only.
    reference : DumpGraph, optional
        A third run at the npu run's precision without the suspected bug (a GPU run in bfloat16): compared with
        the bench run by the same rules, it measures the noise each call may carry (core/reference.py), which
        replaces the modeled growth limit where it has the call.
    reference_metrics : callable, optional
        `tensor_metrics` for the reference run's pairs with the bench run.

    Examples
    --------
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0,
    ...      "Mean": 0.5, "Norm": 1.0}
    >>> bench = parse_msprobe({"data": {"Functional.relu.0.forward": {"input_args": [t], "output": [t]}}})
    >>> npu = parse_msprobe({"data": {"Functional.relu.0.forward": {"input_args": [t],
    ...                                                            "output": [dict(t, Max=2.0)]}}})
    >>> report = compare_graphs(npu, bench)
    >>> report.verdict("Functional.relu.0.forward").status
    'error'
    """
    given = [GivenMatcher(matches)] if matches is not None else []
    if matchers is None:
        matchers = [] if given else [*format_matchers(npu, bench), *default_matchers(fuzzy=fuzzy)]
    matchers = [*given, *_with_framework_layers(matchers, npu, bench)]
    thresholds = thresholds or DEFAULT_THRESHOLDS
    table = match_graphs(npu, bench, matchers)
    npu_rows, bench_rows = pair_tensors(npu, bench, table)
    pairs = pair_metrics(npu, bench, npu_rows, bench_rows, thresholds, tensor_metrics)
    overflow = overflow_levels(npu)
    measured = None
    if reference is not None:  # the same rules as the npu run's, without the pairs given for the npu run
        rules = [m for m in matchers if not isinstance(m, GivenMatcher)] or default_matchers(fuzzy=fuzzy)
        ref = compare_graphs(reference, bench, matchers=rules, thresholds=thresholds,
                             tensor_metrics=reference_metrics)
        measured = reference_growth(table.npu_to_bench, ref.matches.npu_to_bench, ref.noise,
                                    str(reference.info.path))
    noise = noise_model(npu, bench, table, pairs, thresholds.noise, overflow, measured)
    verdicts = judge(npu, bench, table, pairs, thresholds, noise)
    options = CompareOptions(fuzzy=fuzzy, matchers=tuple(m.name for m in matchers),
                             tensor_metrics=tensor_metrics is not None)
    return CompareReport(npu=npu, bench=bench, matches=table, pairs=pairs, verdicts=verdicts,
                         thresholds=thresholds, options=options, tool_version=__version__, noise=noise,
                         _cache={"overflow": overflow})


def _with_framework_layers(matchers: Sequence[ChildMatcher | RuleMatcher], npu: DumpGraph,
                           bench: DumpGraph) -> list[ChildMatcher | RuleMatcher]:
    """`specs.with_framework_layers`, whose module (every rule matcher, sqlite3 for tb-graph files) only a
    MindSpore run against a PyTorch run loads."""
    if not is_cross_framework(npu, bench):
        return list(matchers)
    from graphcmp.core.matching.specs import with_framework_layers  # see tests/test_layers.py: LAZY_IMPORTS

    return with_framework_layers(matchers, npu, bench)


def format_matchers(npu: DumpGraph, bench: DumpGraph) -> list[RuleMatcher]:
    """Rules a pair of runs of these formats needs by default: PyTorch 1.5 ``.h5`` dumps name one op by its
    backend (``NpuConvolutionBackward`` / ``CudnnConvolutionBackward``), paired by the built-in op table."""
    if "pytorch_h5" not in (npu.info.format, bench.info.format):
        return []
    return [OpTableMatcher(*load_builtin_op_table())]


def compare_paths(
    npu_path: str | os.PathLike[str],
    bench_path: str | os.PathLike[str],
    *,
    format: str | None = None,
    reference_path: str | os.PathLike[str] | None = None,
    **options,
) -> CompareReport:
    """Read both runs (format detected unless given), and the reference run when given, and compare them; see
    `compare_graphs`."""
    npu, bench = read_pair(npu_path, bench_path, format=format, ahead=derive_npu_aside, ahead_bench=derive_bench,
                           ahead_loaded=derive_npu_here)
    reference = read_graph(reference_path, format) if reference_path is not None else None
    return compare_graphs(npu, bench, reference=reference, **options)


def compare_vis(doc: VisDocument) -> CompareReport | DumpGraph:
    """The comparison a tb-graph-ascend compare document holds, judged by graphcmp (its run, for a build-only file).

    msprobe's links are the given matches; the rule is recorded as ``msprobe=<file>``, which
    rebuilds them from the file (`read_vis_links`). Thresholds are the defaults.

    Examples
    --------
    >>> from graphcmp.core.readers.vis import parse_vis
    >>> def side(link):
    ...     relu = {"node_type": 1, "subnodes": [], "matched_node_link": link}
    ...     root = {"node_type": 0, "subnodes": ["Functional.relu.0.forward"], "matched_node_link": ["DefaultModel"]}
    ...     return {"root": "DefaultModel", "node": {"DefaultModel": root, "Functional.relu.0.forward": relu}}
    >>> doc = parse_vis({"NPU": side(["Functional.relu.0.forward"]), "Bench": side([])}, source="/data/cmp.vis")
    >>> compare_vis(doc).matches.count_by_rule()
    {'root': 1, 'msprobe=/data/cmp.vis': 1}
    """
    from graphcmp.core.readers.vis import vis_source  # see tests/test_layers.py: LAZY_IMPORTS

    if doc.bench is None:
        return doc.npu
    given = GivenMatches(doc.links, f"msprobe={vis_source(doc.npu.info.path, doc.key)}")
    return compare_graphs(doc.npu, doc.bench, matches=given)


def load_document(path: str | os.PathLike[str]) -> CompareReport | DumpGraph:
    """Read a graphcmp report or graph JSON file, or a tb-graph-ascend `.vis`/`.vis.db` (its first graph).

    Raises
    ------
    DumpFormatError
        If the file is missing, damaged, or not one of these.
    """
    if os.path.isdir(path):
        raise DumpFormatError(_folder_is_no_result(path))
    if str(path).endswith(VIS_SUFFIXES):
        from graphcmp.core.readers.vis import read_vis  # see tests/test_layers.py: LAZY_IMPORTS

        return compare_vis(read_vis(path))
    return load_saved(path)


def _folder_is_no_result(path: str | os.PathLike[str]) -> str:
    """What to say of a folder given where a result belongs: a dump folder (what compare reads), or neither."""
    try:
        kind = f"a dump folder ({detect_format(path)})"
    except DumpFormatError:
        kind = "a folder without a result (no index.json of a job)"
    return (f"{path}: is {kind}; this command takes a result file or a results folder, which "
            "graphcmp compare NPU BENCH -o cmp.npz writes")


def load_documents(path: str | os.PathLike[str]) -> Iterator[CompareReport | DumpGraph]:
    """Every graph a file holds, read one at a time: each (step, rank) of a `.vis.db` (msprobe writes every step
    and rank of a job into one file), else the one document `load_document` reads.

    Raises
    ------
    DumpFormatError
        If the file is missing, damaged, or not one of these (when the generator is advanced).
    """
    if not _is_vis_db(path):
        yield load_document(path)
        return
    from graphcmp.core.readers.vis import list_vis_graphs, read_vis  # see tests/test_layers.py: LAZY_IMPORTS

    for key in list_vis_graphs(path):
        yield compare_vis(read_vis(path, key.step, key.rank))


def file_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What `graphcmp info` says about a result or graph file: the counts of its graph (and, for a comparison, its
    verdict); for a `.vis.db` of several graphs, the counts and verdict of each and the verdict of them all.

    Returns
    -------
    dict
        One graph: `CompareReport.summary` with ``verdict``, or `graph_summary` of a run. Several:
        ``{"path", "graphs": [each with its step and rank], "verdict", "outcome"}``, the verdict the worst of
        the compared graphs' (`job_outcome`; a file of runs only has none).

    Raises
    ------
    DumpFormatError
        If the file is missing, damaged, or not a file graphcmp reads.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from graphcmp.core.report import save_report
    >>> from graphcmp.samples import sample_pair
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "cmp.json"
    >>> save_report(compare_paths(*sample_pair()), path)
    >>> summary = file_summary(path)
    >>> summary["verdict"], summary["matched"], "graphs" in summary
    ('differ', 178, False)
    """
    graphs = [_document_summary(doc) for doc in load_documents(path)]
    if len(graphs) == 1:
        return graphs[0]
    out: dict[str, Any] = {"path": str(path), "graphs": graphs}
    runs = [{"step": g["step"], "rank": g["rank"], "error": None, "summary": g} for g in graphs if "outcome" in g]
    if runs:
        outcome = job_outcome({"runs": runs, "missing": {}, "analysis": {"origin": None}}).to_dict()
        out.update(verdict=outcome["verdict"], outcome=outcome)
    return out


def _document_summary(document: CompareReport | DumpGraph) -> dict[str, Any]:
    if isinstance(document, DumpGraph):
        return graph_summary(document)
    summary = document.summary()
    info = document.npu.info
    return {**summary, "step": info.step, "rank": info.rank, "verdict": summary["outcome"]["verdict"]}


def _is_vis_db(path: str | os.PathLike[str]) -> bool:
    return str(path).endswith((".vis.db", ".vis.db.gz"))


def apply_manual_matches(
    report: CompareReport, manual: ManualMatches, *, matchers: Sequence[ChildMatcher | RuleMatcher] | None = None,
    source: str = "manual",
) -> CompareReport:
    """Recompare `report`'s runs with `manual` first, then the report's own rules (or `matchers`).

    The report's rules are rebuilt from the names it records (`CompareOptions.matchers`, e.g.
    ``layer-mapping=/abs/mapping.yaml`` or msprobe's ``msprobe=/abs/compare.vis``), so their files
    must still exist; an earlier ``manual`` rule is replaced by `manual`. Thresholds are the report's;
    tensor metrics are recomputed when the report had them and the tensor files are still there.

    A comparison made with a reference run (`compare_graphs`'s ``reference``) reads that run again from the path it
    recorded, so the noise stays measured.

    Raises
    ------
    MappingError
        If a recorded rule cannot be rebuilt (its file is gone or changed).
    DumpFormatError
        If the recorded reference run is gone or damaged.

    Examples
    --------
    >>> from graphcmp.core.matching.manual import ManualMatches
    >>> from graphcmp.core.readers.msprobe import parse_msprobe
    >>> t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1], "Max": 1, "Min": 1, "Mean": 1, "Norm": 1}
    >>> npu = parse_msprobe({"data": {"Functional.relu.0.forward": {"output": [t]}}})
    >>> bench = parse_msprobe({"data": {"Torch.relu.0.forward": {"output": [t]}}})
    >>> report = compare_graphs(npu, bench)
    >>> report.verdict("Functional.relu.0.forward").status
    'unmatched'
    >>> manual = ManualMatches().with_match("Functional.relu.0.forward", "Torch.relu.0.forward")
    >>> apply_manual_matches(report, manual).verdict("Functional.relu.0.forward").status
    'pass'
    """
    from graphcmp.core.matching.manual import ManualMatcher  # see tests/test_layers.py: LAZY_IMPORTS
    from graphcmp.core.matching.specs import matchers_from_specs

    if matchers is None:
        matchers = matchers_from_specs([m for m in report.options.matchers if m.split("=", 1)[0] != "manual"])
    tensors = tensor_metrics_for(report.npu, report.bench) if report.options.tensor_metrics else None
    reference = read_graph(report.noise.reference) if report.noise.reference else None  # its noise, measured again
    reference_tensors = (tensor_metrics_for(reference, report.bench)
                         if reference is not None and report.options.tensor_metrics else None)
    return compare_graphs(report.npu, report.bench, matchers=[ManualMatcher(manual, source=source), *matchers],
                          thresholds=report.thresholds, tensor_metrics=tensors, reference=reference,
                          reference_metrics=reference_tensors)
