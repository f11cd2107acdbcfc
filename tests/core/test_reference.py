"""`compare --reference`: the noise each call may carry, measured from a third run at the npu run's precision.

Real case: tests/data/reference_bf16 (2-layer TinyLlama, npu under bf16 autocast against fp32; the reference is
the npu run made with every F.linear summed in two halves, so it rounds differently). Planted cases show what the
measurement changes: a call whose growth the reference shows too is no origin; a reference that departs beyond
rounding cannot hide a bug.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphcmp.cli.main import main
from graphcmp.core.compare import apply_manual_matches, compare_graphs, compare_paths
from graphcmp.core.divergence import analyze
from graphcmp.core.matching.manual import ManualMatches
from graphcmp.core.noise import LIBRARY_ERROR, noise_ceiling, unit_roundoff
from graphcmp.core.readers.msprobe import parse_msprobe
from graphcmp.core.reference import measured_growth, reference_growth
from graphcmp.core.report import load_saved, save_report
from tests.conftest import DATA

CASE = DATA / "reference_bf16"
TRUTH = "Functional.linear.9.forward"  # layers.1.self_attn.v_proj's F.linear, 1.05 x its result in npu_bug


def _tensor(v: float, dtype: str = "float32", mean: float = 0.0) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch." + dtype, "shape": [8], "Max": v, "Min": -v, "Mean": mean,
            "Norm": 2 * v}


def _run(out: float, dtype: str, extra: bool = False):
    """linear (input 1.0) -> relu; `out` is the linear's output Max (its error against 1.0 is out - 1)."""
    data = {"Functional.linear.0.forward": {"input_args": [_tensor(1.0)], "output": [_tensor(out, dtype)]},
            "Torch.relu.0.forward": {"input_args": [_tensor(out, dtype)], "output": [_tensor(out, dtype)]}}
    if extra:  # a call the npu and bench runs do not have, first: the counters of the rest stay
        data = {"Torch.tanh.0.forward": {"input_args": [_tensor(1.0)], "output": [_tensor(0.7, dtype)]}, **data}
    return parse_msprobe({"data": data})


def test_reference_differs_from_the_npu_run_by_rounding_only():
    """The test case's reference is a realistic one: not bit-identical to npu, within bf16 rounding of it."""
    noise = compare_paths(CASE / "reference", CASE / "npu").noise
    assert noise.precision.kind == "same precision"
    assert 0 < noise.noise_level < noise_ceiling(unit_roundoff("bfloat16"))
    assert len(noise.origin_rows) == 0


def test_clean_run_measured_from_the_reference_has_no_origin():
    report = compare_paths(CASE / "npu", CASE / "bench", reference_path=CASE / "reference")
    noise = report.noise
    assert len(noise.origin_rows) == 0 and report.analysis().first is None
    assert noise.reference.endswith("reference") and noise.measured.sum() >= 0.95 * len(noise.leaves)
    assert noise.summary()["reference"]["measured_calls"] == int(noise.measured.sum())
    # measured, not modeled: the limits differ from the calibrated ones where the reference shows more growth
    modeled = compare_paths(CASE / "npu", CASE / "bench").noise
    assert np.any(noise.growth_limit[noise.leaves] != modeled.growth_limit[noise.leaves])
    assert np.all(noise.growth_limit[noise.leaves[noise.measured[noise.leaves]]] >= 1.0)


def test_bug_is_the_first_origin_with_the_noise_measured_from_the_reference():
    modeled = compare_paths(CASE / "npu_bug", CASE / "bench").analysis().first
    report = compare_paths(CASE / "npu_bug", CASE / "bench", reference_path=CASE / "reference")
    first = report.analysis().first
    assert first is not None and first.node == TRUTH and first.cause == "op"
    assert first.margin >= modeled.margin > report.noise.rule.origin_margin
    assert any(line.startswith("allowed by noise") and "measured growth limit" in line for line in first.evidence)
    assert any(f"noise measured from the reference run {report.noise.reference}" in line for line in first.evidence)
    assert "noise measured from the reference run" in first.summary
    assert [f.kind for f in report.analysis().findings].count("reference") == 1


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_reference_survives_save_and_load(tmp_path, suffix):
    report = compare_paths(CASE / "npu_bug", CASE / "bench", reference_path=CASE / "reference")
    path = tmp_path / f"cmp{suffix}"
    save_report(report, path)
    loaded = load_saved(path)
    assert loaded.noise.reference == report.noise.reference
    assert np.array_equal(loaded.noise.measured, report.noise.measured)
    assert np.array_equal(loaded.noise.growth_limit, report.noise.growth_limit, equal_nan=True)
    assert analyze(loaded).first == analyze(report).first


def test_without_reference_nothing_is_stored(tmp_path):
    report = compare_paths(CASE / "npu", CASE / "bench")
    assert report.noise.reference == "" and not len(report.noise.measured)
    save_report(report, tmp_path / "cmp.json")
    doc = json.loads((tmp_path / "cmp.json").read_text())
    assert "reference" not in doc["noise"] and "measured" not in doc["noise"]
    assert load_saved(tmp_path / "cmp.json").noise.reference == ""


def test_cli_compare_and_diverge_name_the_reference(tmp_path, capsys):
    out = tmp_path / "cmp.npz"
    ref = str(CASE / "reference")
    assert main(["compare", str(CASE / "npu"), str(CASE / "bench"), "--reference", ref, "-o", str(out), "-q"]) == 0
    assert "the noise the reference run" in capsys.readouterr().out
    assert main(["compare", str(CASE / "npu_bug"), str(CASE / "bench"), "--reference", ref, "-o", str(out),
                 "-q"]) == 1
    capsys.readouterr()
    assert main(["diverge", str(out), "--json"]) == 1
    analysis = json.loads(capsys.readouterr().out)
    assert analysis["first"]["node"] == TRUTH
    assert analysis["noise"]["reference"]["path"] == ref
    assert main(["diverge", str(out)]) == 1
    text = capsys.readouterr().out
    assert f"noise measured from the reference run {ref}" in text


def test_cli_reference_errors_are_one_line(tmp_path, capsys):
    out = str(tmp_path / "cmp.npz")
    code = main(["compare", str(CASE / "npu"), str(CASE / "bench"), "--reference", str(tmp_path / "none"), "-o",
                 out, "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(tmp_path / "none") in err[0]
    job = tmp_path / "job"
    for rank in (0, 1):
        (job / "step0" / f"rank{rank}").mkdir(parents=True)
        (job / "step0" / f"rank{rank}" / "dump.json").write_text((CASE / "reference" / "dump.json").read_text())
    code = main(["compare", str(CASE / "npu"), str(CASE / "bench"), "--reference", str(job), "-o", out, "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "holds 2 runs" in err[0]
    assert not (tmp_path / "cmp.npz").exists()


def test_a_job_of_one_run_stands_for_its_run(tmp_path, capsys):
    job = tmp_path / "ref" / "step0" / "rank0"
    job.mkdir(parents=True)
    for name in ("dump.json", "construct.json"):
        (job / name).write_text((CASE / "reference" / name).read_text())
    code = main(["compare", str(CASE / "npu_bug"), str(CASE / "bench"), "--reference", str(tmp_path / "ref"),
                 "-o", str(tmp_path / "cmp.json"), "-q"])
    assert code == 1
    assert load_saved(tmp_path / "cmp.json").noise.reference == str(job)


def test_growth_is_mapped_through_the_bench_call():
    """The reference's growth lands on the npu call matched to the same bench call, whatever the reference's rows."""
    bench, npu = _run(1.0, "float32"), _run(1.0, "float32")
    reference = _run(1.01, "bfloat16", extra=True)  # one more call first: its rows are shifted by one
    ref = compare_graphs(reference, bench)
    npu_matches = compare_graphs(npu, bench).matches.npu_to_bench
    growth = reference_growth(npu_matches, ref.matches.npu_to_bench, ref.noise, "ref")
    linear = npu.nodes.ids.index("Functional.linear.0.forward")
    ref_linear = reference.nodes.ids.index("Functional.linear.0.forward")
    assert ref_linear != linear
    assert growth.growth[linear] == pytest.approx(measured_growth(ref.noise)[ref_linear])
    assert growth.growth[linear] == pytest.approx(0.01 / (2.0**-8 + LIBRARY_ERROR))
    assert np.isnan(growth.growth[0])  # the root: no compared call


def test_growth_the_reference_shows_is_no_origin():
    """A call that grows its error 6x beyond one rounding is an origin for the model; the reference shows the
    same growth at that call (it is the precision's, at this op), so it is noise."""
    u = 2.0**-8
    bench, npu, reference = _run(1.0, "float32"), _run(1.0 + 6 * u, "bfloat16"), _run(1.0 + 5 * u, "bfloat16")
    assert compare_graphs(npu, bench).noise.first_origin >= 0
    noise = compare_graphs(npu, bench, reference=reference).noise
    assert noise.first_origin == -1 and noise.measured.sum() == 2


def test_a_reference_beyond_rounding_cannot_hide_a_bug():
    """A reference that itself departs by more than the precision explains (a bug of its own) measures no more
    noise than rounding can make: the npu's bug stays an origin."""
    bench, npu, reference = _run(1.0, "float32"), _run(1.5, "bfloat16"), _run(1.5, "bfloat16")
    noise = compare_graphs(npu, bench, reference=reference).noise
    linear = npu.nodes.ids.index("Functional.linear.0.forward")
    assert noise.first_origin == linear and noise.measured[linear]
    assert noise.allowed(linear) == pytest.approx(noise_ceiling(2.0**-8), rel=1e-3)


def test_manual_matches_keep_the_reference():
    report = compare_paths(CASE / "npu_bug", CASE / "bench", reference_path=CASE / "reference")
    again = apply_manual_matches(report, ManualMatches())
    assert again.noise.reference == report.noise.reference
    assert np.array_equal(again.noise.measured, report.noise.measured)
    assert again.analysis().first.node == TRUTH


def _job(root, runs):
    """A step/rank job of the test case's runs: rank N is `runs[N]` (dump.json and construct.json copied)."""
    for rank, name in enumerate(runs):
        folder = root / "step0" / f"rank{rank}"
        folder.mkdir(parents=True)
        for file in ("dump.json", "construct.json"):
            (folder / file).write_text((CASE / name / file).read_text())
    return root


def test_batch_measures_each_rank_from_the_reference_jobs_rank(tmp_path, capsys):
    npu = _job(tmp_path / "npu", ["npu", "npu_bug"])
    bench = _job(tmp_path / "bench", ["bench", "bench"])
    ref = _job(tmp_path / "ref", ["reference", "reference"])
    out = tmp_path / "results"
    code = main(["compare", str(npu), str(bench), "--reference", str(ref), "-o", str(out), "-q", "--json",
                 "--workers", "1"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [r["first"] for r in summary["runs"]] == [None, TRUTH]
    for rank in (0, 1):
        assert load_saved(out / f"step0_rank{rank}.npz").noise.reference == str(ref / "step0" / f"rank{rank}")
    assert json.loads((out / "index.json").read_text())["options"]["reference"] == str(ref)
    keys = [json.loads((out / "entries" / f"step0_rank{r}.json").read_text())["key"] for r in (0, 1)]
    (ref / "step0" / "rank1" / "dump.json").write_text((CASE / "reference" / "dump.json").read_text())  # rewritten
    assert main(["compare", str(npu), str(bench), "--reference", str(ref), "-o", str(out), "-q", "--workers",
                 "1"]) == 1
    again = [json.loads((out / "entries" / f"step0_rank{r}.json").read_text())["key"] for r in (0, 1)]
    assert again[0] == keys[0] and again[1] != keys[1]  # only the run whose reference changed is compared again


def test_batch_reference_job_without_a_rank_is_bad_input(tmp_path, capsys):
    npu = _job(tmp_path / "npu", ["npu", "npu_bug"])
    bench = _job(tmp_path / "bench", ["bench", "bench"])
    ref = _job(tmp_path / "ref", ["reference"])
    code = main(["compare", str(npu), str(bench), "--reference", str(ref), "-o", str(tmp_path / "r"), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no run for step0_rank1" in err[0]
    code = main(["compare", str(npu), str(bench), "--reference", str(CASE / "reference"), "-o",
                 str(tmp_path / "r"), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "holds several runs" in err[0]
    code = main(["compare", str(npu), str(bench), "--reference", str(ref), "--npu-layout", "tp=2", "-o",
                 str(tmp_path / "r"), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "merged parallel jobs" in err[0]
