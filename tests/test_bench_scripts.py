"""The bench scripts that reach into graphcmp's internals still run: one short run each on the demo pair (a smoke
run, not a timing; the figures are `bench/README.md`'s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from graphcmp.core.compare import compare_paths
from graphcmp.core.report import save_report
from graphcmp.samples import samples_dir

ROOT = Path(__file__).resolve().parents[1]


def demo_pair(tmp_path: Path) -> Path:
    """A pair folder (npu/, bench/) as `bench/make_synthetic.py` writes them, of the demo's step 0."""
    base = samples_dir() / "msprobe" / "tf_small"
    pair = tmp_path / "pair"
    pair.mkdir()
    (pair / "npu").symlink_to(base / "perturb" / "step0" / "rank0")
    (pair / "bench").symlink_to(base / "baseline" / "step0" / "rank0")
    return pair


def run_bench(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_bench_stages_times_the_comparison_after_reading(tmp_path):
    out = run_bench("bench_stages.py", str(demo_pair(tmp_path)), "--rounds", "1")
    assert "| this tree |" in out


def test_bench_export_writes_each_target(tmp_path):
    pair = demo_pair(tmp_path)
    result = tmp_path / "cmp.npz"
    save_report(compare_paths(pair / "npu", pair / "bench"), result)
    out = run_bench("bench_export.py", str(result), "--out", str(tmp_path / "out"), "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert {row["target"] for row in rows} == {"vis", "vis-db", "model-explorer"}
    assert all(row["nodes"] == 2 * 178 and row["bytes"] > 0 for row in rows)


def test_bench_table_export_writes_with_each_writer(tmp_path):
    pair = demo_pair(tmp_path)
    result = tmp_path / "cmp.npz"
    save_report(compare_paths(pair / "npu", pair / "bench"), result)
    out = run_bench("bench_table_export.py", str(result), "--out", str(tmp_path / "out"), "--rows", "100",
                    "--writers", "graphcmp-xlsx", "graphcmp-csv", "--json")
    rows = {row["writer"]: row for row in map(json.loads, out.splitlines())}
    assert set(rows) == {"graphcmp-xlsx", "graphcmp-csv"}
    assert all(row["rows"] == 100 and row["mb"] >= 0 for row in rows.values())
    assert (tmp_path / "out" / "graphcmp-xlsx.xlsx").stat().st_size > 0
