"""Other layouts (VPP, TP4, PP4, more layers) grown from the shared dumps by bench/make_parallel_job.py.

The grown jobs have slices whose statistics combine exactly into their baseline's, so a clean job
must compare without an origin or an error verdict, and a planted shard must be named with its rank.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from graphcmp.core.distributed.merged import run_merged
from tests.conftest import shared

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


@pytest.mark.parametrize("tp, pp, vpp, layers, perturb", LAYOUTS)
def test_grown_layouts_name_a_planted_shard(tmp_path, tp, pp, vpp, layers, perturb):
    source = shared("msprobe/dumps/parallel")
    _generator().make_job(tmp_path / "clean", tp=tp, pp=pp, vpp=vpp, layers=layers, source=source)
    _generator().make_job(tmp_path / "planted", tp=tp, pp=pp, vpp=vpp, layers=layers, perturb=perturb, source=source)
    index = run_merged(tmp_path / "planted" / "npu", tmp_path / "clean" / "bench", tmp_path / "out", workers=1)
    origin = index["analysis"]["origin"]
    assert (origin["module"], origin["rank"], origin["cause"]) == (QKV.format(perturb[1]), perturb[0], "inputs differ")


def test_data_parallel_replicas_merge_once_and_a_drifted_parameter_is_found(tmp_path):
    from graphcmp.core.distributed.consistency import check_job

    _generator().make_job(tmp_path, tp=2, pp=2, dp=2, layers=4, source=shared("msprobe/dumps/parallel"))
    index = run_merged(tmp_path / "npu", tmp_path / "bench", tmp_path / "out", workers=1)
    layout = index["layouts"]["npu"]
    assert (layout["tp"], layout["pp"], layout["dp"]) == (2, 2, 2)
    assert layout["tp_groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]] and layout["pp_groups"][0] == [0, 4]
    assert index["analysis"]["origin"] is None and index["runs"][0]["summary"]["verdicts"].get("error", 0) == 0
    assert check_job(tmp_path / "npu", workers=1)["bad_ranks"] == []
    # the second replica's stage 0 (ranks 2 and 3, one TP group) drifted together: only the DP check sees it
    node = "Module.module.decoder.layers.0.input_layernorm.LayerNorm.forward.1"
    for rank in (2, 3):
        dump_file = tmp_path / "npu" / "step0" / f"rank{rank}" / "dump.json"
        dump = json.loads(dump_file.read_text())
        dump["data"][node]["parameters"]["weight"]["Max"] += 0.01
        dump_file.write_text(json.dumps(dump))
    result = check_job(tmp_path / "npu", workers=1)
    assert result["steps"][0]["checked"]["dp"] > 0
    found = [(f["check"], f["rank"], f["reference"], f["node"], f["parameter"]) for f in result["steps"][0]["findings"]]
    weight = "module.decoder.layers.0.input_layernorm.weight"
    assert found == [("dp parameter", 2, 0, node, weight), ("dp parameter", 3, 1, node, weight)]
    assert [b["rank"] for b in result["bad_ranks"]] == [2, 3]


def test_a_grown_tp4_job_agrees_with_the_real_tp2_job(tmp_path):
    source = shared("msprobe/dumps/parallel")
    _generator().make_job(tmp_path, tp=4, pp=1, layers=4, source=source)
    index = run_merged(tmp_path / "npu", source / "tp2", tmp_path / "out", workers=1)
    assert (index["layouts"]["npu"]["tp"], index["layouts"]["bench"]["tp"]) == (4, 2)
    assert index["analysis"]["origin"] is None and index["runs"][0]["summary"]["verdicts"].get("error", 0) == 0
