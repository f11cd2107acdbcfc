"""The MindSpore-vs-PyTorch development cases: MindSpore under float16 automatic mixed precision (O1: msprobe names
every Cell class `…Opt`, `…Opt_N`) against PyTorch float32, with and without a weight-conversion bug
(amp28_common.py). Needs two virtual environments (see README.md):

    MS=/work/gen/msvenv/bin/python PT=/work/gen/venv/bin/python \
        python3 tests/gen/make_ms_cases28.py --root /work/cases28

Runs (under <root>/_runs/): ms_o1_{none,swap_kv,gamma_beta}, ms_o1_none_rerun, ms_o2_{none,gamma_beta}, pt_fp32.
Under O2 MindSpore wraps the network and every LayerNorm in cast cells (`Cell._backbone.layers.0.ln1._OutputTo16`
holding `..._backbone.LayerNorm`). Cases:
  ms_amp_clean        ms_o1_none against pt_fp32: no divergence (the rerun is bit-identical, every difference is
                      float16 rounding and the two frameworks' kernels)
  ms_amp_swap_kv      ms_o1_swap_kv against pt_fp32: the first dump.json entry differing from ms_o1_none
  ms_amp_gamma_beta   ms_o1_gamma_beta against pt_fp32: likewise
  ms_amp_o2_clean, ms_amp_o2_gamma_beta   the same under O2
Each case is compared with `--layer-mapping= --api-mapping=` (the built-in cross-framework rules), written to
TRUTH.json's `options`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import truth28  # noqa: E402

OPTIONS = ["--layer-mapping=", "--api-mapping="]
MODEL = ("GPTLite: token embedding + learned positions, 3 pre-norm blocks (fused qkv linear split in q/k/v, causal "
         "softmax attention of 5 heads of 8, proj; LayerNorm; MLP fc_in 96, exact GELU, fc_out), ln_f, head; vocab 50, "
         "d 40, tokens 3x10; one SGD training step")


def run(py: str, script: str, out: str, *args: str, force: bool = False) -> None:
    if os.path.isdir(os.path.join(out, "step0")) and not force:
        return
    shutil.rmtree(out, ignore_errors=True)
    log = out + ".log"
    with open(log, "w") as f, tempfile.TemporaryDirectory() as scratch:  # MindSpore's AMP writes its rewritten
        subprocess.run([py, os.path.join(HERE, script), "--out", out, *args], check=True, stdout=f,  # network
                       stderr=subprocess.STDOUT, cwd=scratch)  # classes to ./rewritten_network



def module_of(run_dir: str, node: str) -> str | None:
    return truth28.construct(run_dir, 0, 0).get(node)


def make_case(root: str, name: str, npu_run: str, bug: str, amp: str = "O1") -> None:
    runs = os.path.join(root, "_runs")
    case = os.path.join(root, name)
    shutil.rmtree(case, ignore_errors=True)
    shutil.copytree(os.path.join(runs, npu_run), os.path.join(case, "npu"))
    shutil.copytree(os.path.join(runs, "pt_fp32"), os.path.join(case, "bench"))
    nobug = os.path.join(runs, f"ms_{amp.lower()}_none")
    first = truth28.first_diff(os.path.join(runs, npu_run), nobug, 0, 0) if bug != "none" else None
    truth = {"kind": "ms_amp", "npu": "npu", "bench": "bench", "options": OPTIONS, "model": MODEL,
             "precision": f"npu MindSpore 2.10 CPU, auto_mixed_precision {amp} float16; bench PyTorch float32",
             "steps": 1, "micro": 1, "bug": bug, "npu_run": npu_run, "bench_run": "pt_fp32", "micro_steps": 1,
             "truth": None, "truth_ids": [], "truth_ranks": [0]}
    if first is not None:
        first["module"] = module_of(os.path.join(runs, npu_run), first["node"])
        truth.update(truth=first, truth_ids=[first["node"], first["module"]])
    if bug == "swap_kv":  # a permutation of rows: no statistic of the weight or of the qkv output can show it
        owner = module_of(os.path.join(runs, npu_run), first["module"])
        truth["truth_ids"].append(owner)
        truth["note"] = (f"the k and v blocks of the fused weight are swapped: Max/Min/Mean/Norm of the weight and of "
                         f"the qkv output are unchanged (the first entry differs only by the summation order of its "
                         f"Mean), so the first call statistics can show it is inside {owner}, which owns the weight")
    rerun = truth28.first_diff(os.path.join(runs, "ms_o1_none_rerun"), os.path.join(runs, "ms_o1_none"), 0, 0)
    truth["verification"] = {
        "method": f"tests/gen/truth28.py first_diff: bug run vs {os.path.basename(nobug)} (same framework and "
                  "precision, CPU)",
        "rerun_of_ms_o1_none_identical": rerun is None}
    with open(os.path.join(case, "TRUTH.json"), "w") as f:
        json.dump(truth, f, indent=1)
    print(name, (first or {}).get("node"), (first or {}).get("module"), "rerun identical:", rerun is None)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/work/cases28")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    ms_py = os.environ.get("MS", "/work/gen/msvenv/bin/python")
    pt_py = os.environ.get("PT", "/work/gen/venv/bin/python")
    runs = os.path.join(a.root, "_runs")
    os.makedirs(runs, exist_ok=True)
    run(pt_py, "pt_amp28.py", os.path.join(runs, "pt_fp32"), force=a.force)
    for bug in ("none", "swap_kv", "gamma_beta"):
        run(ms_py, "ms_amp28.py", os.path.join(runs, f"ms_o1_{bug}"), "--amp", "O1", "--bug", bug, force=a.force)
    run(ms_py, "ms_amp28.py", os.path.join(runs, "ms_o1_none_rerun"), "--amp", "O1", force=a.force)
    for bug in ("none", "gamma_beta"):
        run(ms_py, "ms_amp28.py", os.path.join(runs, f"ms_o2_{bug}"), "--amp", "O2", "--bug", bug, force=a.force)
    make_case(a.root, "ms_amp_clean", "ms_o1_none", "none")
    make_case(a.root, "ms_amp_swap_kv", "ms_o1_swap_kv", "swap_kv")
    make_case(a.root, "ms_amp_gamma_beta", "ms_o1_gamma_beta", "gamma_beta")
    make_case(a.root, "ms_amp_o2_clean", "ms_o2_none", "none", "O2")
    make_case(a.root, "ms_amp_o2_gamma_beta", "ms_o2_gamma_beta", "gamma_beta", "O2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
