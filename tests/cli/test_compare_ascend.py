"""`graphcmp compare NPU_DUMP GOLDEN --fusion-rule GRAPH` and NPU against NPU, in-process."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from graphcmp.cli.main import main
from tests.conftest import DATA, shared

MLP = DATA / "ascend_mlp"


def _compare(capsys, tmp_path, npu, bench, *options):
    out = tmp_path / "cmp.npz"
    code = main(["compare", str(npu), str(bench), *map(str, options), "-o", str(out), "-q"])
    capsys.readouterr()
    assert main(["diverge", str(out), "--json"]) == code
    return code, json.loads(capsys.readouterr().out)


def _mlp(case):
    return MLP / case / "npu_dump", MLP / case / "golden", "--fusion-rule", MLP / case / "fusion_rule" / "mlp.json"


def test_clean_fp16_run_agrees(capsys, tmp_path):
    code, doc = _compare(capsys, tmp_path, *_mlp("clean"))
    assert code == 0 and doc["first"] is None
    assert doc["precision"]["kind"] == "mixed precision"
    pairs = {(p["npu"], p["bench"]) for p in doc["precision"]["dtype_pairs"]}
    assert ("float16", "float32") in pairs and ("bfloat16", "float32") in pairs  # the NPU dtypes reach the noise model


def test_planted_weight_is_the_first_origin(capsys, tmp_path):
    code, doc = _compare(capsys, tmp_path, *_mlp("bug"))
    assert code == 1
    assert doc["first"]["node"] == "mlp/fc2/MatMul" and doc["first"]["module"] == "mlp/fc2"
    assert doc["first"]["cause"] == "op" and doc["first"]["margin"] > 4


def test_overflow_named_with_its_opdebug_status(capsys, tmp_path):
    code, doc = _compare(capsys, tmp_path, *_mlp("overflow"))
    assert code == 1
    assert doc["first"]["node"] == "mlp/fc2/MatMul" and doc["first"]["cause"] == "overflow"
    assert "the device's overflow record: AIC status 0x20 (float overflow)" in doc["first"]["evidence"]
    assert doc["first_overflow"]["node"] == "mlp/fc2/MatMul"


def test_statistics_dump_against_golden(capsys, tmp_path):
    code, doc = _compare(capsys, tmp_path, *_mlp("stats"))
    assert code == 0 and doc["outcome"]["coverage"]["npu"]["share"] == 1.0


def test_fusion_rule_found_beside_the_dump(capsys, tmp_path):
    case = tmp_path / "bug"
    shutil.copytree(MLP / "bug", case)
    shutil.move(case / "fusion_rule" / "mlp.json", case / "npu_dump" / "mlp.json")
    code, doc = _compare(capsys, tmp_path, case / "npu_dump", case / "golden")
    assert code == 1 and doc["first"]["node"] == "mlp/fc2/MatMul"
    assert doc["outcome"]["coverage"]["tensor_pairs"] > 9  # inputs too: the rule was used


def test_npu_against_npu_by_op_name(capsys, tmp_path):
    code, doc = _compare(capsys, tmp_path, MLP / "bug" / "npu_dump", MLP / "clean" / "npu_dump")
    assert code == 1 and doc["first"]["node"] == "mlp/fc2/MatMul"
    assert doc["precision"]["kind"] == "exact rerun"


def test_golden_needs_a_raw_dump(capsys, tmp_path):
    code = main(["compare", str(MLP / "clean" / "golden"), str(MLP / "clean" / "golden"), "--fusion-rule",
                 str(MLP / "clean" / "fusion_rule" / "mlp.json"), "-o", str(tmp_path / "x.npz"), "-q"])
    assert code == 2 and "golden data compare against an Ascend raw dump" in capsys.readouterr().err


@pytest.mark.shared
@pytest.mark.parametrize(("case", "run", "origin"), [
    ("A_cnn_bug", "20250305101530", "/layer1/conv2/Conv"),
    ("B_cnn_clean", "20250305102210", None),
    ("C_cnn_overflow", "20250305103045", "/conv4/Conv/relu4/Relu"),
])
def test_shared_cnn_cases(capsys, tmp_path, case, run, origin):
    root = shared(f"ascend/{case}")
    code, doc = _compare(capsys, tmp_path, root / f"npu_dump/{run}/0/cnn_small/1/0", root / "golden",
                         "--fusion-rule", root / "fusion_rule/cnn_small.json")
    if origin is None:
        assert code == 0 and doc["first"] is None
        return
    assert code == 1 and doc["first"]["node"] == origin
    if case == "C_cnn_overflow":
        assert doc["first"]["cause"] == "overflow"
        assert any("AI Core status 0x20" in line for line in doc["first"]["evidence"])


def _advisor(doc):
    return {f["kind"]: f for f in doc["findings"] if f["kind"].startswith("advisor_")}


def test_msaccucmp_advisor_checks_among_the_findings(capsys, tmp_path):
    _, clean = _compare(capsys, tmp_path, *_mlp("clean"))
    assert set(_advisor(clean)) == {"advisor_consistency"} and _advisor(clean)["advisor_consistency"]["level"] == "info"
    _, bug = _compare(capsys, tmp_path, *_mlp("bug"))
    consistency = _advisor(bug)["advisor_consistency"]
    # msaccucmp's rule (the first cosine below 0.99) lands on the argmax the wrong weight flips: fc2's own output
    # keeps cosine 0.9927, which the noise model finds 149x beyond its fp16 noise (test_planted_weight_...)
    assert consistency["level"] == "warning" and consistency["node"] == "mlp/ArgMax"
    assert "output:0 (0.980286)" in consistency["message"] and "a problem to fix" in consistency["message"]
    _, overflow = _compare(capsys, tmp_path, *_mlp("overflow"))
    assert _advisor(overflow)["advisor_fp16_overflow"]["node"] == "mlp/fc2/MatMul"


def test_advisor_input_inconsistent(capsys, tmp_path):
    case = tmp_path / "case"
    shutil.copytree(MLP / "clean", case)
    x = next((case / "golden").glob("x.0.*.npy"))
    np.save(x, -np.load(x))  # the golden run was fed another input
    _, doc = _compare(capsys, tmp_path, case / "npu_dump", case / "golden", "--fusion-rule",
                      case / "fusion_rule" / "mlp.json")
    assert _advisor(doc)["advisor_input_inconsistent"]["node"] == "trans_Cast_0"


def test_iterations_as_steps_npu_against_npu(capsys, tmp_path):
    """Two dump roots of two iterations each: one comparison per (iteration, device), as step/rank runs."""
    from graphcmp.core.distributed.layout import discover_runs

    for side, cases in (("npu", ("bug", "clean")), ("bench", ("clean", "clean"))):
        for iteration, case in enumerate(cases):
            shutil.copytree(MLP / case / "npu_dump/20250306101500/0/mlp/1/0",
                            tmp_path / side / f"20250306101500/0/mlp/1/{iteration}")
    assert sorted(k.label for k in discover_runs(tmp_path / "npu")) == ["step0_rank0", "step1_rank0"]
    out = tmp_path / "results"
    code = main(["compare", str(tmp_path / "npu"), str(tmp_path / "bench"), "-o", str(out), "-q", "--workers", "1"])
    capsys.readouterr()
    assert code == 1
    assert main(["diverge", str(out), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    first = doc.get("first") or doc.get("origin")
    assert first["node"] == "mlp/fc2/MatMul" and first["step"] == 0


def test_a_dump_with_an_undecoded_dtype_exits_2_with_one_line(capsys, tmp_path):
    from pathlib import Path

    from tests.data.ascend_mlp.make_ascend_cases import tensor, write_dump

    out = tensor(np.zeros(3, np.uint8), "uint8")
    out["dtype"], out["shape"], out["original_shape"] = 38, [4], [4]  # DT_FLOAT6_E2M3
    dump = Path(tmp_path) / "dump"
    dump.mkdir()
    path = dump / "Quant.net_quant.3.0.1741200000000300"
    write_dump(path, "net/quant", 1741200000000300, [tensor(np.ones(4, np.float16), "float16")], [out])
    code = main(["compare", str(dump), str(dump), "-o", str(tmp_path / "cmp.npz"), "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert f"{path}: output 0: DT_FLOAT6_E2M3 (code 38) is not decoded" in err


def test_mindspore_sync_dump_in_device_formats_against_a_host_layout_run_agrees(capsys, tmp_path):
    case = DATA / "mindspore_sync_ir"
    code = main(["compare", str(case / "npu"), str(case / "bench"), "-o", str(tmp_path / "cmp.npz"), "-q"])
    capsys.readouterr()
    assert code == 0
