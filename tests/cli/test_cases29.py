"""The Ascend raw-dump development cases in tests/data/cases29 (made by tests/gen/make_ascend29.py: an encoder block, a
MobileNet-style CNN and an unrolled LSTM, fp16 and bf16, GE and MindSpore layouts): the generator's device formats
agree with graphcmp's inverse maps and with the shared CNN dumps, each truth names a dump file, and graphcmp's answer
(`compare DUMP GOLDEN --fusion-rule RULE`, then `diverge --json`) names the truth op with exit 1, or no origin with
exit 0 for a clean run."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from graphcmp.cli.main import main
from graphcmp.core.device_formats import to_original
from graphcmp.core.readers.ascend_file import _tensor_bytes, parse_dump_name, read_dump_tensor, read_header
from tests.conftest import shared

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "data" / "cases29"
NAMES = sorted(p.parent.name for p in CASES.glob("*/TRUTH.json"))

KNOWN_WRONG: dict[str, str] = {
    "mbn_bf16_perturb": "noise model: /expand output error 2.39e-2 (6.1 u bf16, its clean twin 3.9e-3) has margin "
                        "3.56 < origin_margin 4",
    "lstm_fp16_perturb": "noise model: /wh_1/MatMul output error 3.88e-3 (8 u fp16, its clean twin 5.9e-4) has margin "
                         "2.93 < origin_margin 4",
}
"""Cases graphcmp answers wrongly today, each with why: strict xfails, so a fix must take its case off the list."""


def truth_of(name: str) -> dict:
    return json.loads((CASES / name / "TRUTH.json").read_text())


@functools.cache
def generator():
    spec = importlib.util.spec_from_file_location("make_ascend29", ROOT / "tests" / "gen" / "make_ascend29.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)  # numpy and the MLP writer only: torch and onnx are imported when a case is made
    return mod


# --- the generator's writer -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("fmt", "shape", "groups"), [
    ("NC1HWC0", (2, 24, 3, 5), 0), ("NC1HWC0", (1, 56, 1, 1), 0), ("FRACTAL_Z", (40, 16, 1, 1), 0),
    ("FRACTAL_Z", (16, 3, 3, 3), 0), ("FRACTAL_Z", (24, 1, 3, 3), 24), ("FRACTAL_Z", (12, 2, 3, 3), 6),
    ("FRACTAL_NZ", (4, 96), 0), ("FRACTAL_NZ", (1, 16, 64), 0), ("FRACTAL_NZ", (2, 3, 20, 17), 0),
    ("NC1HWC0_C04", (1, 3, 16, 16), 0), ("FRACTAL_Z_C04", (16, 3, 3, 3), 0), ("FRACTAL_Z_C04", (20, 3, 5, 3), 0),
    ("NDC1HWC0", (1, 24, 4, 4, 4), 0), ("FRACTAL_Z_3D", (24, 16, 3, 3, 3), 0), ("FRACTAL_Z_3D", (16, 3, 3, 2, 3), 0)])
def test_generator_formats_round_trip_through_graphcmp(fmt, shape, groups):
    gen = generator()
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float16)
    device = gen.to_device(x, fmt, groups)
    back = to_original(device, fmt, device.shape, shape, sub_format=groups)
    assert back.shape == shape and np.array_equal(back, x)


def test_generator_writes_the_shared_cnn_device_tensors_byte_for_byte():
    folder = shared("ascend/A_cnn_bug/npu_dump/20250305101530/0/cnn_small/1/0")
    gen = generator()
    names = {3: "NC1HWC0", 4: "FRACTAL_Z", 29: "FRACTAL_NZ"}
    seen = set()
    for path in sorted(folder.iterdir()):
        for desc in read_header(path).tensors:
            if desc.format not in names:
                continue
            host = read_dump_tensor(path, desc.role, desc.index)
            _, _, raw = _tensor_bytes(path, desc.role, desc.index)
            device = gen.to_device(np.asarray(host), names[desc.format])
            assert device.shape == desc.shape and device.astype(np.float16).tobytes() == bytes(raw), path.name
            seen.add(names[desc.format])
    assert seen == set(names.values())


def test_there_are_cases_of_each_model_dtype_and_layout():
    truths = [truth_of(n) for n in NAMES]
    assert {t["model"] for t in truths} == {"encoder_block", "mobilenet_tiny", "lstm_unrolled", "video_conv3d"}
    assert {t["npu_dtype"] for t in truths} == {"float16", "bfloat16"}
    assert {t["layout"] for t in truths} == {"ge", "ms", "stats"}
    assert any(t["overflow"] for t in truths) and any(t["truth"]["first_divergent_npu_op"] is None for t in truths)


@pytest.mark.parametrize("name", NAMES)
def test_truth_names_a_dump_file_of_its_op(name):
    t = truth_of(name)
    files = sorted((CASES / name / t["dump_dir"]).iterdir())
    assert len(files) == t["n_dump_files"]
    op = t["truth"]["first_divergent_npu_op"]
    if op is None:
        assert t["bug"] is None and t["overflow"] is None
        return
    path = CASES / name / t["dump_dir"] / t["truth"]["dump_file"]
    parsed = parse_dump_name(path.name.removesuffix(".csv"))
    assert parsed.task_id == t["truth"]["task_id"] and parsed.op_name == op.replace("/", "_").replace(".", "_")
    if t["layout"] != "stats":
        assert read_header(path).op_name == op
    assert (parsed.stream_id == -1) == (t["layout"] == "ms")
    row = t["per_op"][0]
    assert row["op"] == op
    if t["overflow"]:  # the first op with a non-finite output (the model itself overflows fp16)
        debug = CASES / name / t["dump_dir"] / t["overflow"]["opdebug_file"]
        assert debug.name.startswith("Opdebug.Node_OpDebug.") and read_header(debug).tensors[0].size == 2048
        assert row["nonfinite"] > 0
    else:  # the first op not bit-identical to the run without the bug
        assert not row["bit_identical_to_clean"]


def _answer(capsys, tmp_path, name: str) -> tuple[int, dict | None]:
    t = truth_of(name)
    case = CASES / name
    out = tmp_path / "cmp"
    code = main(["compare", str(case / t["dump_dir"]), str(case / t["golden_dir"]), "--fusion-rule",
                 str(case / t["fusion_rule"]), "-o", str(out), "-q"])
    capsys.readouterr()
    main(["diverge", str(out), "--json"])
    return code, json.loads(capsys.readouterr().out)["first"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[n]))
                                  if n in KNOWN_WRONG else n for n in NAMES])
def test_first_origin_is_the_truth(capsys, tmp_path, name):
    code, first = _answer(capsys, tmp_path, name)
    op = truth_of(name)["truth"]["first_divergent_npu_op"]
    if op is None:
        assert code == 0 and first is None
        return
    assert code == 1 and first is not None and first["node"] == op
    if truth_of(name)["overflow"]:  # named with the status of the Opdebug record (old and new layouts)
        assert first["cause"] == "overflow" and any("status 0x20" in e for e in first["evidence"])


@pytest.mark.parametrize(("bug", "clean"), [("lstm_fp16_perturb", "lstm_fp16_clean"),
                                            ("enc_fp16_wtrans", "enc_fp16_clean"),
                                            ("mbn_fp16_mislaid", "mbn_fp16_clean")])
def test_npu_against_npu_finds_the_bug_by_op_name(capsys, tmp_path, bug, clean):
    """Two raw dumps of one model and dtype (an exact rerun but for the bug): the truth is the first origin, even
    where the noise of a golden comparison hides it (lstm_fp16_perturb)."""
    out = tmp_path / "cmp"
    code = main(["compare", str(CASES / bug / truth_of(bug)["dump_dir"]),
                 str(CASES / clean / truth_of(clean)["dump_dir"]), "-o", str(out), "-q"])
    capsys.readouterr()
    main(["diverge", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["first"]["node"] == truth_of(bug)["truth"]["first_divergent_npu_op"]
    assert doc["precision"]["kind"] == "exact rerun"


def test_statistics_dump_ops_take_their_names_from_the_rule(capsys, tmp_path):
    """A .csv dump names its ops as file names write them (/dw/conv -> _dw_conv): with the fusion rule the run and
    its answer use the ops' own names, so scopes and the answer read as in the GE graph."""
    from graphcmp.core.readers.ascend_golden import read_npu_and_golden
    t = truth_of("mbn_fp16_mislaid_stats")
    case = CASES / "mbn_fp16_mislaid_stats"
    npu, golden = read_npu_and_golden(case / t["dump_dir"], case / t["golden_dir"], case / t["fusion_rule"])
    assert npu.info.task == "statistics" and "/dw/conv/Conv/dw/act/Clip" in npu.nodes.ids
    assert "/dw/conv/Conv/dw/act" in npu.nodes.ids  # its scope
    assert not any(n.startswith("_") for n in npu.nodes.ids) and set(golden.nodes.ids) <= set(npu.nodes.ids)


def test_the_scoreboard_reads_the_ascend_truth_form():
    spec = importlib.util.spec_from_file_location("dev_scoreboard", ROOT / "bench" / "dev_scoreboard.py")
    board = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(board)
    cases = board.load_cases(CASES, ["mbn_fp16_mislaid", "lstm_fp16_clean"])
    by_name = {name: truth for name, _, truth in cases}
    bug = by_name["mbn_fp16_mislaid"]
    assert bug["npu"].endswith("/0") and bug["options"][0] == "--fusion-rule" and board.given_path(bug, 1)
    assert bug["truth_ids"] == ["/dw/conv/Conv/dw/act/Clip"] and by_name["lstm_fp16_clean"]["truth"] is None
    right, why = board.judge(bug, {"node": "/dw/conv/Conv/dw/act/Clip", "rank": 0, "step": 0}, [], 1)
    assert right and not why
    assert not board.judge(bug, {"node": "/expand/conv/Conv/expand/act/Clip", "rank": 0, "step": 0}, [], 1)[0]
