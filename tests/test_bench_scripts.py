"""The bench scripts that reach into graphcmp's internals still run: one short run each on the demo pair (a smoke
run, not a timing; the figures are `bench/README.md`'s)."""

from __future__ import annotations

import importlib.util
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


def test_bench_scale_timeline_marks_each_stage_of_a_compare(tmp_path):
    out = run_bench("bench_scale.py", "timeline", str(demo_pair(tmp_path)), "--repeat", "1")
    for stage in ("command line imported", "npu read end", "bench read end", "compare_graphs end", "done"):
        assert f"| {stage} |" in out


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


def dev_scoreboard():
    spec = importlib.util.spec_from_file_location("dev_scoreboard", ROOT / "bench" / "dev_scoreboard.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_dev_scoreboard_judges_rank_micro_step_and_extra_origins():
    judge = dev_scoreboard().judge
    truth = {"truth": {"node": "Tensor.t.6.forward", "rank": 1, "step": 0, "micro_step": 2},
             "truth_ids": ["Tensor.t.6.forward", "Module.m.ColumnParallelLinear.forward.2"], "truth_ranks": [1]}
    origin = {"node": "Tensor.t.6.forward", "rank": 1, "step": 0, "micro_step": 2}
    assert judge(truth, origin, [origin], 1) == (True, "")
    assert judge(truth, {**origin, "rank": None, "ranks": [0, 1]}, [origin], 1)[0]
    assert judge(truth, {**origin, "rank": None}, [origin], 1) == (False, "rank None")
    assert judge(truth, {**origin, "micro_step": 0}, [origin], 1) == (False, "micro-step 0")
    assert judge(truth, origin, [origin], 0) == (False, "exit 0")
    other = {"node": "Functional.linear.9.forward", "module": "Module.x.Linear.forward.0"}
    assert judge({**truth, "only_origins": [origin]}, origin, [origin, other], 1) == (
        False, "1 origins not the weight's calls")
    clean = {"truth": None, "truth_ids": []}
    assert judge(clean, None, [], 0) == (True, "")
    assert judge(clean, None, [], 1) == (False, "exit 1 in a clean run")
    assert judge(clean, origin, [origin], 1) == (False, "origin in a clean run")


def test_dev_scoreboard_runs_on_the_small_cases():
    out = run_bench("dev_scoreboard.py", "--root", str(ROOT / "tests" / "data" / "cases28"), "--only",
                    "extraop_clean", "--graphcmp", f"{sys.executable} -m graphcmp", "--json")
    (row,) = json.loads(out)
    assert row["case"] == "extraop_clean" and row["truth"] is None
    assert row["right"] and row["exit"] == 0 and row["origins"] == 0 and row["noise_level"] is not None


def test_bench_ascend_reads_and_compares_a_small_dump_again_when_kept(tmp_path):
    keep = tmp_path / "dump"
    first = run_bench("bench_ascend.py", "--gb", "0.004", "--ops", "2", "--keep", str(keep), "--repeat", "2")
    assert "wrote 0.00 GB of NC1HWC0" in first and "compare with golden" in first and "processor" in first
    again = run_bench("bench_ascend.py", "--keep", str(keep), "--read-only")
    assert "written before" in again and "read (decode, to NCHW, statistics)" in again
    assert "compare with golden" not in again


def test_bench_mindspore_dump_reads_and_compares_a_small_pair_again_when_kept(tmp_path):
    keep = tmp_path / "dumps"
    first = run_bench("bench_mindspore_dump.py", "--gb", "0.004", "--ops", "2", "--keep", str(keep))
    assert "float16 npu tensors" in first and "compare with the float32 dump" in first and "processor" in first
    again = run_bench("bench_mindspore_dump.py", "--keep", str(keep), "--read-only")
    assert "written before" in again and "read the npu dump" in again and "compare with" not in again


def test_bench_jsonnum_parses_and_compares():
    out = run_bench("bench_jsonnum.py", "--count", "3000", "--rounds", "1")
    for line in ("parse_numbers", "scan + parse", "msgspec", "orjson"):
        assert f"  {line} " in out


def test_bench_names_checks_the_compiled_ids_against_parse_node_ids():
    construct = samples_dir() / "msprobe" / "tf_small" / "perturb" / "step0" / "rank0" / "construct.json"
    out = run_bench("bench_names.py", "--construct", str(construct), "--count", "1000", "--repeat", "1")
    assert "1,000 ids" in out and "same columns: True" in out and "parse_id_columns" in out


def test_bench_scan_times_the_compiled_pass(tmp_path):
    dump = demo_pair(tmp_path) / "npu" / "dump.json"
    out = run_bench("bench_scan.py", str(dump), "--runs", "1", "--rounds", "2")
    row = next(line for line in out.splitlines() if "| this tree |" in line)
    assert "leaves)" in row and float(row.split("|")[3]) > 0
