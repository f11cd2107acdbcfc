"""Results the viewer tests serve: the sample pair, a folder of two step reports, a dump with hostile names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphcmp.app.model import ViewModel
from graphcmp.core.compare import compare_paths
from graphcmp.core.report import CompareReport, save_report
from graphcmp.samples import samples_dir

TF_SMALL = samples_dir() / "msprobe" / "tf_small"
EVIL_ID = "Functional.<img src=x onerror=window.__xss=1>.0.forward"


@pytest.fixture(scope="session")
def sample_report(perturb_pair) -> CompareReport:
    return compare_paths(*perturb_pair)


@pytest.fixture(scope="session")
def sample_model(sample_report) -> ViewModel:
    return ViewModel(sample_report)


@pytest.fixture(scope="session")
def report_file(sample_report, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "cmp.json"
    save_report(sample_report, path)
    return path


@pytest.fixture(scope="session")
def steps_folder(tmp_path_factory) -> Path:
    """step0_rank0.json and step1_rank0.json: tf_small perturb vs baseline at steps 0 and 1."""
    folder = tmp_path_factory.mktemp("steps")
    for step in (0, 1):
        report = compare_paths(TF_SMALL / "perturb" / f"step{step}" / "rank0",
                               TF_SMALL / "baseline" / f"step{step}" / "rank0")
        save_report(report, folder / f"step{step}_rank0.json")
    return folder


def _tensor(value: float) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": value, "Min": 0.0,
            "Mean": value / 2, "Norm": value}


def write_dump(folder: Path, scale: float) -> Path:
    """A hand-made msprobe rank folder whose second call has an HTML tag as its name."""
    folder.mkdir(parents=True)
    data = {"Functional.linear.0.forward": {"input_args": [_tensor(1.0)], "output": [_tensor(2.0)]},
            EVIL_ID: {"input_args": [_tensor(2.0)], "output": [_tensor(2.0 * scale)]}}
    (folder / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch",
                                                  "dump_data_dir": None, "data": data}))
    (folder / "construct.json").write_text(json.dumps({k: None for k in data}))
    (folder / "stack.json").write_text(json.dumps({}))
    return folder


@pytest.fixture(scope="session")
def evil_report_file(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("evil")
    report = compare_paths(write_dump(root / "npu", 1.5), write_dump(root / "bench", 1.0))
    path = root / "cmp.json"
    save_report(report, path)
    return path


@pytest.fixture(scope="session")
def merged_results(tmp_path_factory) -> Path:
    """A results folder of the real TP2 job with a desynchronised LayerNorm weight on rank 1, merged, against TP1."""
    from graphcmp.core.distributed.merged import run_merged

    parallel = Path(__file__).resolve().parents[1] / "data" / "parallel"
    out = tmp_path_factory.mktemp("merged") / "results"
    run_merged(parallel / "tp2_desync", parallel / "tp1", out, workers=1)
    return out
