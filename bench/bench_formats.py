#!/usr/bin/env python3
"""Result file formats compared on one saved comparison: write time, size, and time to open it again as a report.

Usage::

    .venv/bin/python bench/bench_formats.py RESULT [--repeat 3] [--formats json npz arrow parquet]

RESULT is any result graphcmp reads (``cmp.npz`` or ``cmp.json``). Each format writes the same document
(`CompareReport.to_dict`) and reads it back into a `CompareReport`, each in a fresh process (imports
included in the read time, as `graphcmp info` pays them):

* ``json``: graphcmp's annotated JSON document (orjson; `save_report(..., format="json")`);
* ``npz``: graphcmp's container (`graphcmp.core.npzio`: ``.npy`` members of one uncompressed zip, mapped);
* ``arrow`` / ``parquet`` (when pyarrow is installed): the same columns as Apache Arrow IPC (Feather v2,
  uncompressed, memory-mapped on read) or Parquet (snappy) tables, one per column length (a run's nodes,
  its tensors, the pairs ...), written into one folder, plus the small fields as JSON; read back through the
  same `Fields` checks. Strings become Python strings either way (the records hold tuples of str).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

_WRITE = """
import sys, time, json
sys.path.insert(0, {here!r})
import bench_formats as b
from graphcmp.core.report import load_saved
report = load_saved(sys.argv[1])
t = time.perf_counter()
b.write(report, sys.argv[2], sys.argv[3])
print(json.dumps({{"write": time.perf_counter() - t}}))
"""

_READ = """
import sys, time, json, resource
t = time.perf_counter()
sys.path.insert(0, {here!r})
import bench_formats as b
report = b.read(sys.argv[1], sys.argv[2])
report.summary()
print(json.dumps({{"read": time.perf_counter() - t,
                   "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def write(report, fmt: str, path: str) -> None:
    from graphcmp.core.report import save_report

    if fmt in ("json", "npz"):
        save_report(report, path, format=fmt)
        return
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    from graphcmp.core.npzio import MIN_COLUMN

    tables: dict[int, dict[str, object]] = {}
    small = _split(report.to_dict(), "", tables, MIN_COLUMN)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    (out / "document.json").write_bytes(json.dumps(small).encode())
    for length, columns in tables.items():
        table = pa.table({name: _arrow(values) for name, values in columns.items()})
        if fmt == "arrow":
            feather.write_feather(table, out / f"{length}.arrow", compression="uncompressed")
        else:
            pq.write_table(table, out / f"{length}.parquet")


def _arrow(values):
    import numpy as np
    import pyarrow as pa

    if isinstance(values, np.ndarray) and values.ndim == 2:
        return pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), values.shape[1])
    if isinstance(values, np.ndarray):
        return pa.array(values)
    return pa.array(values, pa.string()).dictionary_encode() if len(set(values)) * 2 <= len(values) \
        else pa.array(values, pa.string())


def _split(value, name, tables, min_column):
    """The document with its columns moved into `tables` (by length) and replaced by references."""
    import numpy as np

    if isinstance(value, np.ndarray):
        tables.setdefault(len(value), {})[name] = value
        return {"$col": name, "n": len(value)}
    if isinstance(value, dict):
        return {k: _split(v, f"{name}.{k}" if name else k, tables, min_column) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if len(value) >= min_column and type(value[0]) is str:
            tables.setdefault(len(value), {})[name] = list(value)
            return {"$col": name, "n": len(value)}
        return [_split(v, f"{name}.{k}", tables, min_column) for k, v in enumerate(value)]
    return value


def read(fmt: str, path: str):
    from graphcmp.core.report import CompareReport, load_saved

    if fmt in ("json", "npz"):
        return load_saved(path)
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    folder = Path(path)
    columns = {}
    for file in folder.glob(f"*.{fmt}"):
        table = feather.read_table(file, memory_map=True) if fmt == "arrow" else pq.read_table(file)
        for name in table.column_names:
            columns[name] = table[name]
    doc = json.loads((folder / "document.json").read_text())
    return CompareReport.from_dict(_join(doc, columns), str(folder))


def _join(value, columns):
    import pyarrow as pa

    if isinstance(value, dict):
        if "$col" in value:
            column = columns[value["$col"]].combine_chunks()
            if pa.types.is_fixed_size_list(column.type):
                return column.flatten().to_numpy().reshape(len(column), column.type.list_size)
            if pa.types.is_dictionary(column.type) or pa.types.is_string(column.type):
                return column.to_pylist()
            return column.to_numpy(zero_copy_only=False)
        return {k: _join(v, columns) for k, v in value.items()}
    if isinstance(value, list):
        return [_join(v, columns) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--formats", nargs="*", default=["json", "npz", "arrow", "parquet"])
    args = parser.parse_args(argv)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        args.formats = [f for f in args.formats if f in ("json", "npz")]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for fmt in args.formats:
                target = str(Path(tmp) / f"out.{fmt}")
                w = subprocess.run([sys.executable, "-c", _WRITE.format(here=str(HERE)), args.result, fmt, target],
                                   capture_output=True, text=True, check=True, cwd=tmp)
                r = subprocess.run([sys.executable, "-c", _READ.format(here=str(HERE)), fmt, target],
                                   capture_output=True, text=True, check=True, cwd=tmp)
                p = Path(target)
                size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size
                rows.setdefault(fmt, []).append({**json.loads(w.stdout.splitlines()[-1]),
                                                 **json.loads(r.stdout.splitlines()[-1]), "mb": size / 1e6})
                print(f"  {fmt}: {rows[fmt][-1]}", file=sys.stderr, flush=True)
                shutil.rmtree(target, ignore_errors=True) if p.is_dir() else p.unlink()
    print(f"| format | write s | size MB | open as a report s (fresh process) | peak RSS MB |  (median [range] of "
          f"{args.repeat}, {time.strftime('%Y-%m-%d')})")
    print("|---|---|---|---|---|")
    for fmt, runs in rows.items():
        print(f"| {fmt} | {_cell(runs, 'write')} | {runs[0]['mb']:.0f} | {_cell(runs, 'read')} | "
              f"{_cell(runs, 'peak_mb', 0)} |")
    return 0


def _cell(runs: list[dict], key: str, digits: int = 2) -> str:
    """Median [min-max] of `key` over `runs`."""
    values = [r[key] for r in runs]
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


if __name__ == "__main__":
    sys.exit(main())
