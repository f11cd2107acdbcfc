#!/usr/bin/env python3
"""Time and memory of writing msprobe's compare result table as xlsx with each candidate library, and as CSV.

The table (`graphcmp.core.export.table.compare_table`) is made once per process from one comparison report,
then each writer writes the same rows (cells as the xlsx holds them, `table_files.xlsx_rows`) with error rows
filled red and warning rows yellow, as msprobe's highlighted xlsx. Each writer runs in its own process: the
report is loaded and the table made, the peak-RSS counter is reset (Linux ``/proc/self/clear_refs``), the file
is written, and the script prints the wall and CPU time of the write, the file size and how far the resident
set grew during it. A candidate that is not installed is reported as such.

Candidates: ``xlsxwriter`` (constant-memory mode), ``openpyxl`` (write-only mode), ``pyexcelerate``,
``rustpy-xlsxwriter`` (Rust's rust_xlsxwriter behind a Python API: rows as dicts), and ``graphcmp-xlsx``
/ ``graphcmp-csv``: graphcmp's own writers (`write_xlsx_table`, `write_csv_table`) as the CLI runs them.

Usage::

    S=../shared/data/msprobe/dumps/tf_big/statistics/baseline/step0/rank0
    .venv/bin/python bench/make_synthetic.py --source $S --nodes 70000 --out /tmp/synth70k   # ~200k pairs
    .venv/bin/graphcmp compare /tmp/synth70k/npu /tmp/synth70k/bench -o /tmp/synth70k/cmp.npz -q
    .venv/bin/python bench/bench_table_export.py /tmp/synth70k/cmp.npz --out /tmp/synth70k/table [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

RED, YELLOW = "FF0000", "FFFF00"


def _xlsxwriter(path: str, names: list[str], rows: Iterable[tuple], colours: list[str]) -> None:
    import xlsxwriter

    book = xlsxwriter.Workbook(path, {"constant_memory": True, "strings_to_numbers": False,
                                      "strings_to_formulas": False, "strings_to_urls": False})
    sheet = book.add_worksheet("compare_result")
    fills = {"red": book.add_format({"bg_color": "#" + RED, "pattern": 1}),
             "yellow": book.add_format({"bg_color": "#" + YELLOW, "pattern": 1}), "": None}
    sheet.write_row(0, 0, names)
    for r, (row, colour) in enumerate(zip(rows, colours), 1):
        sheet.write_row(r, 0, row, fills[colour])
    book.close()


def _openpyxl(path: str, names: list[str], rows: Iterable[tuple], colours: list[str]) -> None:
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.styles import PatternFill

    book = Workbook(write_only=True)
    sheet = book.create_sheet("compare_result")
    fills = {"red": PatternFill("solid", start_color=RED, end_color=RED),
             "yellow": PatternFill("solid", start_color=YELLOW, end_color=YELLOW)}
    sheet.append(names)
    for row, colour in zip(rows, colours):
        if colour:
            cells = [WriteOnlyCell(sheet, value) for value in row]
            for cell in cells:
                cell.fill = fills[colour]
            sheet.append(cells)
        else:
            sheet.append(row)
    book.save(path)


def _pyexcelerate(path: str, names: list[str], rows: Iterable[tuple], colours: list[str]) -> None:
    from pyexcelerate import Color, Fill, Style, Workbook

    book = Workbook()
    sheet = book.new_sheet("compare_result", data=[names, *rows])
    styles = {"red": Style(fill=Fill(background=Color(255, 0, 0))),
              "yellow": Style(fill=Fill(background=Color(255, 255, 0)))}
    for r, colour in enumerate(colours, 2):  # 1-based rows, the header first
        if colour:
            sheet.set_row_style(r, styles[colour])
    book.save(path)


def _rustpy_xlsxwriter(path: str, names: list[str], rows: Iterable[tuple], colours: list[str]) -> None:
    import rustpy_xlsxwriter as rx

    fills = {"red": rx.Format().set_background_color(RED), "yellow": rx.Format().set_background_color(YELLOW)}
    records = [dict(zip(names, row)) for row in rows]
    rx.write_worksheet(records, path, sheet_name="compare_result",
                       row_formats={r: fills[c] for r, c in enumerate(colours, 1) if c})


CANDIDATES: dict[str, tuple[str, Callable[..., None]]] = {
    "xlsxwriter": ("xlsxwriter", _xlsxwriter),
    "openpyxl": ("openpyxl", _openpyxl),
    "pyexcelerate": ("pyexcelerate", _pyexcelerate),
    "rustpy-xlsxwriter": ("rustpy_xlsxwriter", _rustpy_xlsxwriter),
}
OWN = ("graphcmp-xlsx", "graphcmp-csv")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def run_one(report_path: str, writer: str, out_dir: str, rows: int | None) -> dict:
    """Load the report, make the table, write it with `writer`, and measure (inside the child process)."""
    from dataclasses import replace

    from graphcmp.core.export.table import compare_table
    from graphcmp.core.export.table_files import write_csv_table, write_xlsx_table, xlsx_rows
    from graphcmp.core.report import load_report

    t0 = time.perf_counter()
    report = load_report(report_path)
    t1 = time.perf_counter()
    table = compare_table(report)
    if rows is not None:
        table = replace(table, columns=tuple(c[:rows] for c in table.columns), npu_rows=table.npu_rows[:rows],
                        pairs=table.pairs[:rows], levels=table.levels[:rows])
    t2 = time.perf_counter()
    out = Path(out_dir) / (f"{writer}.csv" if writer == "graphcmp-csv" else f"{writer}.xlsx")
    out.unlink(missing_ok=True)
    exact_peak = _reset_peak()
    rss0 = _status_kb("VmRSS")
    cpu0 = time.process_time()
    w0 = time.perf_counter()
    if writer == "graphcmp-xlsx":
        write_xlsx_table(table, out)
    elif writer == "graphcmp-csv":
        write_csv_table(table, out)
    else:
        CANDIDATES[writer][1](str(out), list(table.names), xlsx_rows(table), table.highlights().tolist())
    w1 = time.perf_counter()
    cpu1 = time.process_time()
    return {"writer": writer, "rows": len(table), "columns": len(table.names), "load_s": round(t1 - t0, 2),
            "table_s": round(t2 - t1, 2), "write_s": round(w1 - w0, 2), "cpu_s": round(cpu1 - cpu0, 2),
            "mb": round(out.stat().st_size / 1e6, 1),
            "rss_growth_mb": round((_status_kb("VmHWM" if exact_peak else "VmRSS") - rss0) / 1024, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", help="a comparison result (graphcmp compare -o cmp.npz)")
    parser.add_argument("--out", required=True, help="folder for the files written")
    parser.add_argument("--writers", nargs="+", default=[*CANDIDATES, *OWN], choices=[*CANDIDATES, *OWN])
    parser.add_argument("--rows", type=int, help="write only the first ROWS rows of the table")
    parser.add_argument("--json", action="store_true", help="print one JSON object per writer")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_one(args.report, args.child, args.out, args.rows)))
        return 0
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for writer in args.writers:
        module = CANDIDATES[writer][0] if writer in CANDIDATES else None
        if module is not None and importlib.util.find_spec(module) is None:
            line = {"writer": writer, "error": f"not installed (pip install {writer})"}
        else:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            cmd = [sys.executable, __file__, args.report, "--out", args.out, "--child", writer]
            cmd += ["--rows", str(args.rows)] if args.rows is not None else []
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode:
                line = {"writer": writer, "error": done.stderr.strip().splitlines()[-1:]}
            else:
                line = json.loads(done.stdout.strip().splitlines()[-1])
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                line["process_cpu_s"] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)
        if args.json:
            print(json.dumps(line))
        elif "error" in line:
            print(f"{writer:18s} {line['error']}")
        else:
            print(f"{writer:18s} {line['rows']:>8,} rows x {line['columns']} columns: write {line['write_s']:6.2f} s "
                  f"(cpu {line['cpu_s']:.2f} s), {line['mb']:6.1f} MB, RSS +{line['rss_growth_mb']:.0f} MB "
                  f"(table made in {line['table_s']:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
