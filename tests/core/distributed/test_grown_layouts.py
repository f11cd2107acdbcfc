"""Other layouts (VPP, TP4, PP4, more layers) grown from the shared dumps by bench/make_parallel_job.py.

The grown jobs have slices whose statistics combine exactly into their baseline's, so a clean job
must compare without an origin or an error verdict, and a planted shard must be named with its rank.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from graphcmp.core.distributed.merged import run_merged
from tests.conftest import shared
from tests.core.distributed.marks import WEIGHT_DRIFT_EXCUSED

GENERATOR = Path(__file__).resolve().parents[3] / "bench" / "make_parallel_job.py"
QKV = "Module.module.decoder.layers.{}.self_attention.linear_qkv.ColumnParallelLinear.forward.0"

pytestmark = pytest.mark.shared


def _generator():
    spec = importlib.util.spec_from_file_location("make_parallel_job", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


LAYOUTS = [
    (2, 2, 2, 8, (0, 5)),  # layer 5: model chunk 1 of stage 0
    (4, 2, 1, 8, (6, 6)),  # TP4: heads, fc1 and fc2 slices of 64 collide with the hidden size
    (2, 4, 1, 8, (5, 4)),
]


@pytest.mark.parametrize("tp, pp, vpp, layers, perturb", LAYOUTS)
def test_grown_layouts_compare_clean(tmp_path, tp, pp, vpp, layers, perturb):
    _generator().make_job(tmp_path, tp=tp, pp=pp, vpp=vpp, layers=layers, source=shared("msprobe/dumps/parallel"))
    index = run_merged(tmp_path / "npu", tmp_path / "bench", tmp_path / "out", workers=1)
    layout = index["layouts"]["npu"]
    assert (layout["tp"], layout["pp"], layout["vpp"]) == (tp, pp, vpp)
    assert index["analysis"]["origin"] is None
    assert index["runs"][0]["summary"]["verdicts"].get("error", 0) == 0
    assert index["runs"][0]["summary"]["bench"]["unmatched"] == 0


@WEIGHT_DRIFT_EXCUSED
@pytest.mark.parametrize("tp, pp, vpp, layers, perturb", LAYOUTS)
def test_grown_layouts_name_a_planted_shard(tmp_path, tp, pp, vpp, layers, perturb):
    source = shared("msprobe/dumps/parallel")
    _generator().make_job(tmp_path / "clean", tp=tp, pp=pp, vpp=vpp, layers=layers, source=source)
    _generator().make_job(tmp_path / "planted", tp=tp, pp=pp, vpp=vpp, layers=layers, perturb=perturb, source=source)
    index = run_merged(tmp_path / "planted" / "npu", tmp_path / "clean" / "bench", tmp_path / "out", workers=1)
    origin = index["analysis"]["origin"]
    assert (origin["module"], origin["rank"], origin["cause"]) == (QKV.format(perturb[1]), perturb[0], "inputs differ")
