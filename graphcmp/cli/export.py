"""`graphcmp export cmp.npz --to json|vis|vis-db|model-explorer|csv|xlsx -o OUT`: hand a result to another tool.

``json`` writes graphcmp's annotated JSON document (docs/format.md) of a result,

``vis`` msprobe's JSON `.vis` (tb-graph-ascend 1.x-8.1.x), ``vis-db`` the SQLite `.vis.db`
(tb-graph-ascend 8.2+/26.x; several inputs, or a job's results folder, become one file, one graph pair per step
and rank, as msprobe writes a job), and
``model-explorer`` a folder with Google Model Explorer's graph JSON and one node-data JSON per metric, and
``csv`` / ``xlsx`` msprobe's `compare` result table of a comparison (one row per npu tensor, msprobe's columns for
the run's task mode, then graphcmp's verdict, role, margin, cause and call site; in xlsx, error rows red and
warning rows yellow).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from graphcmp.cli.options import add_json
from graphcmp.cli.output import emit
from graphcmp.core.errors import OutputError
from graphcmp.core.outputs import checked_output

if TYPE_CHECKING:
    from graphcmp.core.export.vis import ExportResult
    from graphcmp.core.records import DumpGraph
    from graphcmp.core.report import CompareReport

__all__ = ["add_parser", "handle"]

TARGETS = ("json", "vis", "vis-db", "model-explorer", "csv", "xlsx")
TABLES = ("csv", "xlsx")
"""Targets that write msprobe's compare result table: a comparison's, one row per npu tensor."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("export", help="write a result for tb-graph-ascend, Model Explorer or a spreadsheet",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="result of graphcmp compare or build (or a .vis/.vis.db); several, or a job's results "
                             "folder, only with vis-db")
    parser.add_argument("--to", required=True, choices=TARGETS, help="the format to write")
    parser.add_argument("-o", "--output", required=True,
                        help="output file (json, vis, vis-db, csv, xlsx) or folder (model-explorer)")
    add_json(parser, "what was written")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    files = _result_files(args.files)
    checked_output(args.output, files)
    if len(files) > 1 and args.to != "vis-db":
        raise OutputError(f"{args.output}: --to {args.to} writes one result; pass one FILE "
                          "(only vis-db gathers several steps and ranks, or a results folder, in one file)")
    from graphcmp.core.compare import load_document
    from graphcmp.core.export.document import write_json
    from graphcmp.core.export.model_explorer import write_model_explorer
    from graphcmp.core.export.vis import write_vis
    from graphcmp.core.export.vis_db import write_vis_db

    if args.to == "vis-db":
        result = write_vis_db(_documents(files), args.output)
    elif args.to in TABLES:
        result = _write_table(args.to, files[0], args.output)
    else:
        write = {"json": write_json, "vis": write_vis, "model-explorer": write_model_explorer}[args.to]
        result = write(load_document(files[0]), args.output)
    emit(_summary(args.to, result), _text(args.to, result), args.json)
    return 0


def _write_table(target: str, path: str, output: str) -> ExportResult:
    """msprobe's compare result table of the comparison in `path`, as CSV or xlsx."""
    from graphcmp.core.compare import load_document
    from graphcmp.core.export.table_files import write_csv_table, write_xlsx_table
    from graphcmp.core.report import CompareReport

    document = load_document(path)
    if not isinstance(document, CompareReport):
        raise OutputError(f"{path}: holds one run, not a comparison; --to {target} writes msprobe's compare "
                          "result table, which needs a result of graphcmp compare")
    return (write_csv_table if target == "csv" else write_xlsx_table)(document, output)


def _result_files(paths: list[str]) -> list[str]:
    """The given files, with a job's results folder replaced by its result files (step by step, rank by rank)."""
    from graphcmp.core.distributed.results_folder import folder_results

    files: list[str] = []
    for path in paths:
        files += [str(r.path) for r in folder_results(path)[0]] if os.path.isdir(path) else [path]
    return files


def _documents(files: list[str]) -> Iterator[CompareReport | DumpGraph]:
    from graphcmp.core.compare import load_document

    for path in files:  # one at a time: only one result is in memory while the file is written
        yield load_document(path)


def _summary(target: str, result: ExportResult) -> dict:
    count = "rows" if target in TABLES else "nodes"  # a table has a row per npu tensor
    return {"to": target, "paths": list(result.paths), count: result.nodes, "bytes": result.bytes,
            "seconds": round(result.seconds, 3)}


def _text(target: str, result: ExportResult) -> str:
    count = "rows" if target in TABLES else "nodes"
    lines = [f"{target}: {result.nodes} {count}, {result.bytes / 1e6:.1f} MB in {result.seconds:.1f} s"]
    lines += [f"written: {path}" for path in result.paths]
    return "\n".join(lines)
