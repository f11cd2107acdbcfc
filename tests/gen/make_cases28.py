"""Make the development cases: dump every run (msprobe 26.2.0, CPU torch 2.13.0), verify each truth against a run
without the bug at the same precision and layout, and write <root>/<case>/{npu,bench,TRUTH.json}.

    PY=/path/to/venv/bin/python  python make_cases28.py --root /work/cases28 [--only CASE ...] [--force]
        [--task tensor]

Runs are dumped once under <root>/_runs/<run>/ (with <run>.msprobe_config.json next to it, and <run>.log) and copied
into the cases that use them. `--force` dumps again. `--task tensor` dumps every run in msprobe's tensor mode (the
cases of single-process runs only; give them a root of their own): the same numerics, so the same truth, judged
with the real-tensor metrics. See README.md for what each case is.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import truth28  # noqa: E402

LLAMA = ("TinyLlama (LLaMA-style: RMSNorm, rotary embedding, causal attention written op by op, SwiGLU MLP; vocab 96, "
         "d 48, 4 heads, ff 128, 4 layers, seq 16), tied head, tokens 2x16 per micro-batch")
LLAMA_FN = LLAMA.replace("tied head", "untied head, the SwiGLU activation as a custom torch.autograd.Function "
                         "(SwiGLUFn: F.silu(gate) * up forward, hand-written backward) in every layer")
RESNET = ("ResNetCkpt (stem conv-bn-relu; 4 residual blocks conv-bn-relu-conv-bn x gamma + shortcut, "
          "widths 8/16/16/32; blocks 1-3 under torch.utils.checkpoint(use_reentrant=True): recomputed in the backward "
          "pass), "
          "images 4x3x16x16")
MIXER = ("MLP-Mixer (16 layers: LayerNorm, token-mixing MLP, LayerNorm, channel-mixing MLP; d 32, 16 patches of 4x4), "
         "images 2x3x16x16")
TLLAMA = ("Megatron-style TinyLlama (RMSNorm, rotary, SwiGLU; ColumnParallelLinear linear_qkv / linear_fc1, "
          "RowParallelLinear linear_proj / linear_fc2 with all_reduce; vocab 96, d 48, 4 heads, ff 128, 4 layers, "
          "seq 16), tokens 2x16 per "
          "data-parallel rank and micro-batch, 2 micro-batches")

# run name -> (script, arguments)
RUNS = {
    "llama_fp32": ("dump28.py", "--model llama --precision fp32"),
    "llama_fp32_extraop": ("dump28.py", "--model llama --precision fp32 --extraop probe"),
    "llama_fp32_extraop_perturb": ("dump28.py", "--model llama --precision fp32 --extraop probe "
                                   "--bug perturb:layers.1.mlp.gate_proj.weight:0.05"),
    "llama_fp32_extramul": ("dump28.py", "--model llama --precision fp32 --extraop mul"),
    "llama_fp32_extramul_perturb": ("dump28.py", "--model llama --precision fp32 --extraop mul "
                                    "--bug perturb:layers.1.self_attn.k_proj.weight:0.05"),
    "llama_fp32_2step_sgd": ("dump28.py", "--model llama --precision fp32 --steps 2 --opt sgd"),
    "llama_bf16_2step_sgd": ("dump28.py", "--model llama --precision bf16 --steps 2 --opt sgd"),
    "llama_fp32_2step_adamw": ("dump28.py", "--model llama --precision fp32 --steps 2 --opt adamw"),
    "llama_bf16_2step_adamw": ("dump28.py", "--model llama --precision bf16 --steps 2 --opt adamw"),
    "llamafn_fp32": ("dump28.py", "--model llama_fn --precision fp32"),
    "llamafn_bf16": ("dump28.py", "--model llama_fn --precision bf16"),
    "llamafn_bf16_bwdbug": ("dump28.py", "--model llama_fn --precision bf16 --bug bwd_beta:2:1.5"),
    "llama_fp32_4mb": ("dump28.py", "--model llama --precision fp32 --micro 4"),
    "llama_fp16_4mb": ("dump28.py", "--model llama --precision fp16 --micro 4"),
    "llama_fp16_4mb_bug": ("dump28.py", "--model llama --precision fp16 --micro 4 "
                           "--bug scale_from_mb:layers.2.self_attn.v_proj.weight:1.25:2"),
    "resnet_fp32": ("dump28.py", "--model resnet --precision fp32"),
    "resnet_bf16": ("dump28.py", "--model resnet --precision bf16"),
    "resnet_bf16_bug": ("dump28.py", "--model resnet --precision bf16 --bug recompute_gamma:2:1.5"),
    "mixer_fp32_4mb": ("dump28.py", "--model mixer16 --precision fp32 --micro 4"),
    "mixer_fp32_4mb_perturb": ("dump28.py", "--model mixer16 --precision fp32 --micro 4 "
                               "--bug perturb:layers.9.channel_mix.fc1.weight:0.05"),
    "llama12_fp32_4mb": ("dump28.py", "--model llama12 --precision fp32 --micro 4"),
    "llama12_fp32_4mb_perturb": ("dump28.py", "--model llama12 --precision fp32 --micro 4 "
                                 "--bug perturb:layers.1.mlp.up_proj.weight:0.05"),
    "llama2_fp32_2step_sgd": ("dump28.py", "--model llama2 --precision fp32 --steps 2 --opt sgd"),
    "llama2_bf16_2step_sgd": ("dump28.py", "--model llama2 --precision bf16 --steps 2 --opt sgd"),
    "llama2_fp32_2step_adamw": ("dump28.py", "--model llama2 --precision fp32 --steps 2 --opt adamw"),
    "llama2_bf16_2step_adamw": ("dump28.py", "--model llama2 --precision bf16 --steps 2 --opt adamw"),
    "llama2_fp32_4mb": ("dump28.py", "--model llama2 --precision fp32 --micro 4"),
    "llama2_fp16_4mb": ("dump28.py", "--model llama2 --precision fp16 --micro 4"),
    "llama2_fp16_4mb_bug": ("dump28.py", "--model llama2 --precision fp16 --micro 4 "
                            "--bug scale_from_mb:layers.1.self_attn.v_proj.weight:1.25:2"),
    "tp1_fp32": ("dist28.py", "--tp 1 --dp 1 --precision fp32"),
    "tp2_bf16": ("dist28.py", "--tp 2 --dp 1 --precision bf16"),
    "tp2_bf16_perturb": ("dist28.py", "--tp 2 --dp 1 --precision bf16 --perturb 1:mlp.linear_fc1.weight:1:0.05"),
    "tp1dp2_fp32": ("dist28.py", "--tp 1 --dp 2 --precision fp32"),
    "tp2dp2_fp32": ("dist28.py", "--tp 2 --dp 2 --precision fp32"),
    "tp2dp2_fp32_replica": ("dist28.py", "--tp 2 --dp 2 --precision fp32 --perturb 3:pre_mlp_layernorm.weight:2:0.05"),
    "tp2pp2_bf16": ("dist28.py", "--tp 2 --pp 2 --precision bf16"),
    "tp2pp2_bf16_perturb": ("dist28.py", "--tp 2 --pp 2 --precision bf16 --perturb 3:mlp.linear_fc1.weight:1:0.05"),
    "tp2pp2vpp2_fp32": ("dist28.py", "--tp 2 --pp 2 --vpp 2 --precision fp32"),
    "tp2pp2vpp2_fp32_perturb": ("dist28.py",
                                "--tp 2 --pp 2 --vpp 2 --precision fp32 --perturb 1:mlp.linear_fc1.weight:1.0:0.05"),
    "tp2pp2dp2_fp32": ("dist28.py", "--tp 2 --dp 2 --pp 2 --precision fp32"),
    "tp2pp2dp2_fp32_replica": ("dist28.py",
                               "--tp 2 --dp 2 --pp 2 --precision fp32 --perturb 6:pre_mlp_layernorm.weight:0:0.05"),
}

AUTOCAST = ("npu: forward under torch.autocast('cpu', dtype=torch.{}); loss on out.float() and backward outside; "
            "bench: fp32")

# case -> design. ref = the run without the bug at the npu's precision/layout (None: the npu run has no bug)
CASES = {
    "extraop_perturb": dict(
        kind="extraop", npu="llama_fp32_extraop_perturb", bench="llama_fp32", ref="llama_fp32_extraop", model=LLAMA,
        precision="fp32 both", steps=1, micro=1,
        bug="npu: one extra F.linear (an unused debug probe) after the embedding, so every later Functional.linear.N "
            "counter is one higher than in bench; AND layers.1.mlp.gate_proj.weight += 0.05*randn (seed 99). "
            "Default options must pair the shifted calls."),
    "extraop_clean": dict(
        kind="extraop", npu="llama_fp32_extraop", bench="llama_fp32", ref=None, model=LLAMA, precision="fp32 both",
        steps=1, micro=1, bug=None,
        note="npu has one extra F.linear (unused probe); every other call is bit-identical to bench (checked)."),
    "extramul_perturb": dict(
        kind="extraop", npu="llama_fp32_extramul_perturb", bench="llama_fp32", ref="llama_fp32_extramul", model=LLAMA,
        precision="fp32 both", steps=1, micro=1,
        bug="npu: the embedding output times 1.0 (one extra Tensor.__mul__, so every later Tensor.__mul__.N counter - "
            "RMSNorm, rotary, SwiGLU - is one higher than in bench); AND layers.1.self_attn.k_proj.weight += "
            "0.05*randn (seed 99). Default options must pair the shifted calls."),
    "extramul_clean": dict(
        kind="extraop", npu="llama_fp32_extramul", bench="llama_fp32", ref=None, model=LLAMA, precision="fp32 both",
        steps=1, micro=1, bug=None,
        note="npu has one extra Tensor.__mul__ (x 1.0); every other call is bit-identical to bench (checked)."),
    "clean_2step_sgd_bf16": dict(
        kind="multistep", npu="llama_bf16_2step_sgd", bench="llama_fp32_2step_sgd", ref=None, model=LLAMA,
        precision=AUTOCAST.format("bfloat16"), steps=2, micro=1, bug=None,
        note="steps 0 and 1 dumped, SGD lr 0.05 step between them outside the dump window: step 1's weights carry "
             "step 0's bf16 gradient noise."),
    "clean_2step_adamw_bf16": dict(
        kind="multistep", npu="llama_bf16_2step_adamw", bench="llama_fp32_2step_adamw", ref=None, model=LLAMA,
        precision=AUTOCAST.format("bfloat16"), steps=2, micro=1, bug=None,
        note="as clean_2step_sgd_bf16 with AdamW (lr 1e-3, weight decay 0.01): every weight moves by about lr whatever "
             "its gradient, the sign of small bf16 gradients decides the direction."),
    "fn_backward_bf16": dict(
        kind="custom_backward", npu="llamafn_bf16_bwdbug", bench="llamafn_fp32", ref="llamafn_bf16", model=LLAMA_FN,
        precision=AUTOCAST.format("bfloat16"), steps=1, micro=1,
        bug="layers.2's SwiGLUFn backward evaluates sigmoid(1.5 * gate) instead of sigmoid(gate) (its first op, "
            "Tensor.__mul__ of gate by the constant, gets 1.5 instead of 1.0); the forward is right. msprobe dumps the "
            "backward's ops as forward API calls in the middle of the backward pass."),
    "fp16_accum_mb2": dict(
        kind="micro_batch", npu="llama_fp16_4mb_bug", bench="llama_fp32_4mb", ref="llama_fp16_4mb", model=LLAMA,
        precision=AUTOCAST.format("float16"), steps=1, micro=4,
        bug="4 micro-batches of gradient accumulation (loss / 4 each); from micro-batch 2 on the F.linear call with "
            "layers.2.self_attn.v_proj.weight returns 1.25 x its result (a kernel fault that starts mid-step); "
            "micro-batches 0 and 1 are right."),
    "recompute_bf16": dict(
        kind="recompute", npu="resnet_bf16_bug", bench="resnet_fp32", ref="resnet_bf16", model=RESNET,
        precision=AUTOCAST.format("bfloat16"), steps=1, micro=1,
        bug="blocks.2's residual-branch scalar gamma is 1.0 in its first call and 1.5 when torch.utils.checkpoint "
            "recomputes it during the backward pass (module state changed by the first call): the forward is right, "
            "the recomputation (Tensor.__mul__ by gamma) is not, so blocks.2's gradients are wrong."),
    "recompute_clean_bf16": dict(
        kind="recompute", npu="resnet_bf16", bench="resnet_fp32", ref=None, model=RESNET,
        precision=AUTOCAST.format("bfloat16"), steps=1, micro=1, bug=None),
    "tp2_bf16_perturb": dict(
        kind="tp_mixed", npu="tp2_bf16_perturb", bench="tp1_fp32", ref="tp2_bf16", model=TLLAMA,
        precision=AUTOCAST.format("bfloat16"), steps=1, micro=2, layout={"npu": "tp=2", "bench": "tp=1"},
        bug="rank 1's shard of layers.1.mlp.linear_fc1.weight (ColumnParallelLinear, its rows) += 0.05*randn "
            "(seed 99)."),
    "tp2_bf16_clean": dict(
        kind="tp_mixed", npu="tp2_bf16", bench="tp1_fp32", ref=None, model=TLLAMA,
        precision=AUTOCAST.format("bfloat16"), steps=1, micro=2, layout={"npu": "tp=2", "bench": "tp=1"}, bug=None),
    "dp_replica": dict(
        kind="dp_replica", npu="tp2dp2_fp32_replica", bench="tp1dp2_fp32", ref="tp2dp2_fp32", model=TLLAMA,
        precision="fp32 both", steps=1, micro=2,
        layout={"npu": "tp=2,dp=2 (order tp-dp: ranks 0,1 = replica 0; 2,3 = replica 1)",
                "bench": "tp=1,dp=2 (rank r = replica r, the same micro-batches as npu replica r)"},
        bug="rank 3 (tp rank 1 of data-parallel replica 1) holds layers.2.pre_mlp_layernorm.weight (an RMSNorm weight, "
            "replicated over TP and DP) += 0.05*randn (seed 99); every other rank holds the right value. The data-"
            "parallel gradient all_reduce runs inside the dump window."),
    "dp_clean": dict(
        kind="dp_replica", npu="tp2dp2_fp32", bench="tp1dp2_fp32", ref=None, model=TLLAMA, precision="fp32 both",
        steps=1, micro=2,
        layout={"npu": "tp=2,dp=2 (order tp-dp)", "bench": "tp=1,dp=2 (rank r = replica r)"}, bug=None,
        note="dp_replica without the bug: TP2 sums the matmuls in another order than TP1, fp32 rounding only."),
    "tp2pp2_bf16_perturb": dict(
        kind="tp_mixed", npu="tp2pp2_bf16_perturb", bench="tp1_fp32", ref="tp2pp2_bf16", model=TLLAMA,
        precision=AUTOCAST.format("bfloat16"), steps=1, micro=2,
        layout={"npu": "tp=2,pp=2 (stage 1 = ranks 2,3, its layers named layers.0-1)", "bench": "tp=1"},
        bug="rank 3's shard (stage 1, tp rank 1) of its layers.1 (layer 3 of the model) mlp.linear_fc1.weight += "
            "0.05*randn (seed 99); truth ids are rank 3's own (stage-local)."),
    "tp2pp2_bf16_clean": dict(
        kind="tp_mixed", npu="tp2pp2_bf16", bench="tp1_fp32", ref=None, model=TLLAMA,
        precision=AUTOCAST.format("bfloat16"), steps=1, micro=2, layout={"npu": "tp=2,pp=2", "bench": "tp=1"},
        bug=None),
    "vpp_perturb": dict(
        kind="tp_pp_vpp", npu="tp2pp2vpp2_fp32_perturb", bench="tp1_fp32", ref="tp2pp2vpp2_fp32", model=TLLAMA,
        precision="fp32 both", steps=1, micro=2,
        layout={"npu": "tp=2,pp=2,vpp=2 (two model chunks a stage, one layer each: virtual stage c*2+s; msprobe "
                       "names a model list's chunks Module.<c>.)", "bench": "tp=1"},
        bug="rank 1's shard (stage 0, tp rank 1) of chunk 1's layers.0 (virtual stage 2: layer 2 of the model) "
            "mlp.linear_fc1.weight += 0.05*randn (seed 99); truth ids are rank 1's own."),
    "vpp_clean": dict(
        kind="tp_pp_vpp", npu="tp2pp2vpp2_fp32", bench="tp1_fp32", ref=None, model=TLLAMA, precision="fp32 both",
        steps=1, micro=2, layout={"npu": "tp=2,pp=2,vpp=2", "bench": "tp=1"}, bug=None),
    "pp_dp_replica": dict(
        kind="dp_replica", npu="tp2pp2dp2_fp32_replica", bench="tp1dp2_fp32", ref="tp2pp2dp2_fp32", model=TLLAMA,
        precision="fp32 both", steps=1, micro=2,
        layout={"npu": "tp=2,pp=2,dp=2 (order tp-dp-pp: stage 0 = ranks 0-3, stage 1 = ranks 4-7; replica 1 = ranks "
                       "2,3,6,7); stage 1 names its layers 2-3 layers.0-1, as Megatron does",
                "bench": "tp=1,dp=2 (rank r = replica r, the same micro-batches as npu replica r)"},
        bug="rank 6 (tp rank 0, replica 1, stage 1) holds its layers.0 (layer 2 of the model) pre_mlp_layernorm.weight "
            "(an RMSNorm weight, replicated over TP and DP) += 0.05*randn (seed 99); rank 7 of its TP group and every "
            "other rank hold the right value. Truth ids are rank 6's own (stage-local); the answer's source_id says "
            "its id there."),
    "pp_dp_clean": dict(
        kind="dp_replica", npu="tp2pp2dp2_fp32", bench="tp1dp2_fp32", ref=None, model=TLLAMA, precision="fp32 both",
        steps=1, micro=2,
        layout={"npu": "tp=2,pp=2,dp=2 (order tp-dp-pp)", "bench": "tp=1,dp=2 (rank r = replica r)"}, bug=None,
        note="pp_dp_replica without the bug: the stages reduce their gradients in another order than the TP1 run "
             "(last stage first); fp32 rounding only."),
    "mixer_perturb_4mb": dict(
        kind="stress", npu="mixer_fp32_4mb_perturb", bench="mixer_fp32_4mb", ref="mixer_fp32_4mb", model=MIXER,
        precision="fp32 both", steps=1, micro=4, param=("layers.9.channel_mix.fc1.weight", [64, 32]),
        bug="layers.9.channel_mix.fc1.weight += 0.05*randn (seed 99), 4 micro-batches: the origins must be that "
            "weight's calls and nothing else (only_origins lists them per micro-step and direction)."),
    "clean_2step_sgd_bf16_small": dict(
        kind="multistep", npu="llama2_bf16_2step_sgd", bench="llama2_fp32_2step_sgd", ref=None,
        model=LLAMA.replace("4 layers", "2 layers"), precision=AUTOCAST.format("bfloat16"), steps=2, micro=1, bug=None,
        note="clean_2step_sgd_bf16 with 2 layers (small enough for tests/data)."),
    "clean_2step_adamw_bf16_small": dict(
        kind="multistep", npu="llama2_bf16_2step_adamw", bench="llama2_fp32_2step_adamw", ref=None,
        model=LLAMA.replace("4 layers", "2 layers"), precision=AUTOCAST.format("bfloat16"), steps=2, micro=1, bug=None,
        note="clean_2step_adamw_bf16 with 2 layers (small enough for tests/data)."),
    "fp16_accum_mb2_small": dict(
        kind="micro_batch", npu="llama2_fp16_4mb_bug", bench="llama2_fp32_4mb", ref="llama2_fp16_4mb",
        model=LLAMA.replace("4 layers", "2 layers"), precision=AUTOCAST.format("float16"), steps=1, micro=4,
        bug="fp16_accum_mb2 with 2 layers: from micro-batch 2 on the F.linear call with "
            "layers.1.self_attn.v_proj.weight returns 1.25 x its result."),
    "llama12_perturb_4mb": dict(
        kind="stress", npu="llama12_fp32_4mb_perturb", bench="llama12_fp32_4mb", ref="llama12_fp32_4mb",
        model="TinyLlama (12 layers, d 32, 4 heads, ff 64, vocab 96, seq 16), untied head, tokens 2x16 per micro-batch",
        precision="fp32 both", steps=1, micro=4, param=("layers.1.mlp.up_proj.weight", [64, 32]),
        bug="layers.1.mlp.up_proj.weight += 0.05*randn (seed 99) early in a 12-layer decoder, 4 micro-batches: almost "
            "every later call differs; the origins must be that weight's calls and nothing else (only_origins)."),
}


def dump(root: str, run: str, force: bool, py: str, suffix: str = "") -> str:
    out = os.path.join(root, "_runs", run + suffix)
    if os.path.isdir(out) and not force:
        return out
    shutil.rmtree(out, ignore_errors=True)
    script, args = RUNS[run]
    if TASK != "statistics":
        args += f" --task {TASK}"
    t0 = time.monotonic()
    with open(out + ".log", "w") as log:
        rc = subprocess.call([py, os.path.join(HERE, script), *args.split(), "--out", out], stdout=log,
                             stderr=subprocess.STDOUT)
    if rc != 0:
        raise SystemExit(f"{run}: dump failed, see {out}.log")
    print(f"  dumped {run}{suffix} in {time.monotonic() - t0:.1f}s", flush=True)
    return out


def aligned_equal(npu: str, bench: str) -> dict:
    """extraop clean: align the two entry sequences by name without call counters (difflib); the npu run may only add
    entries (the extra call), and every aligned pair must be exactly equal."""
    a, b = truth28.entries(npu, 0, 0), truth28.entries(bench, 0, 0)
    ka, kb = list(a), list(b)

    def strip(k: str) -> str:
        api = k.startswith(("Functional.", "Tensor.", "Torch."))
        return k.rsplit(".", 2)[0] + "." + k.rsplit(".", 1)[1] if api else k

    sm = difflib.SequenceMatcher(None, [strip(k) for k in ka], [strip(k) for k in kb], autojunk=False)
    extra, missing, unequal = [], [], []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            unequal += [x for x, y in zip(ka[i1:i2], kb[j1:j2]) if truth28.diff_fields(a[x], b[y])]
        else:
            extra += ka[i1:i2]
            missing += kb[j1:j2]
    return {"check": "npu and bench entries aligned in order by name without call counters: npu only adds the extra "
                     "call, every aligned pair exact", "extra_calls": extra, "bench_only": missing,
            "unequal": unequal[:5], "ok": 0 < len(extra) <= 2 and not missing and not unequal}


def rerun_check(root: str, run: str, force: bool, py: str) -> dict:
    """Dump `run` a second time and check that every entry is bit-identical (the runs are deterministic, so a
    difference between the bug run and the no-bug run is the bug's, and one between npu and bench is precision's)."""
    again = dump(root, run, force, py, suffix="__rerun")
    diff = truth28.first_diff_job(again, os.path.join(root, "_runs", run))
    return {"check": f"a second run of {run} is bit-identical to it (every dump.json leaf, every step and rank)",
            "got": diff, "ok": diff is None}


TASK = "statistics"
"""msprobe's task for every run (`--task`)."""


def make_case(root: str, name: str, d: dict, force: bool, py: str, rerun: bool = False) -> dict:
    runs = {k: dump(root, d[k], force, py) for k in ("npu", "bench", "ref") if d.get(k)}
    case = os.path.join(root, name)
    shutil.rmtree(case, ignore_errors=True)
    os.makedirs(case)
    for side in ("npu", "bench"):
        shutil.copytree(runs[side], os.path.join(case, side))
    t = {k: v for k, v in d.items() if k not in ("ref", "param")}
    t.update(npu="npu", bench="bench", npu_run=d["npu"], bench_run=d["bench"], steps=d["steps"], micro_steps=d["micro"])
    checks = []
    if d.get("ref"):
        first = truth28.first_diff_job(runs["npu"], runs["ref"])
        every = truth28.all_diffs(runs["npu"], runs["ref"])
        if first is None:
            raise SystemExit(f"{name}: the bug run equals the no-bug run")
        t["truth"] = first
        t["truth_ids"] = [x for x in (first["node"], first["module"]) if x]
        compute = truth28.first_compute(runs["npu"], runs["ref"], first)
        if compute:  # the first difference is a view of the weight (Tensor.t): the op computing with it names it too
            t["first_compute_op"] = compute
            t["truth_ids"].append(compute)
        t["truth_ranks"] = sorted({e["rank"] for e in every
                                   if e["step"] == first["step"] and e["index"] == first["index"]})
        t["ranks_affected"] = [{"rank": e["rank"], "step": e["step"], "micro_step": e["micro_step"],
                                "direction": e["direction"], "first": e["node"], "index": e["index"]} for e in every]
        checks.append({"check": f"first dump.json entry differing from the no-bug run {d['ref']} (same precision and "
                                "layout, deterministic CPU)", "got": first, "ok": True})
        if "param" in d:
            calls = truth28.calls_using_param(runs["npu"], runs["ref"], d["param"][1])
            t["only_origins"] = calls
            ok = bool(calls) and calls[0]["node"] == first["node"]
            checks.append({"check": f"calls taking {d['param'][0]} (forward) and their backward entries",
                           "got": len(calls), "ok": ok})
            if not ok:
                raise SystemExit(f"{name}: the first difference is not a call of the perturbed weight")
    else:
        t["truth"] = None
        t["truth_ids"] = []
        if d["kind"] == "extraop":
            c = aligned_equal(runs["npu"], runs["bench"])
            checks.append(c)
            if not c["ok"]:
                raise SystemExit(f"{name}: {c}")
        else:
            checks.append({"check": "clean by construction: the same code and seeds as bench, only the autocast "
                                    "precision differs", "ok": True})
    if rerun:
        c = rerun_check(root, d.get("ref") or d["npu"], force, py)
        checks.append(c)
        if not c["ok"]:
            raise SystemExit(f"{name}: not deterministic: {c}")
    t["verification"] = {"method": "tests/gen/truth28.py: bug run vs no-bug run at the same precision, dump.json "
                                   "entries in file (= execution) order, every leaf exact", "checks": checks}
    with open(os.path.join(case, "TRUTH.json"), "w") as f:
        json.dump(t, f, indent=1)
    return t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/work/cases28")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--py", default=os.environ.get("PY", sys.executable))
    ap.add_argument("--rerun", action="store_true", help="also dump the no-bug run (the npu run of a clean case) again "
                    "and check it is bit-identical")
    ap.add_argument("--task", default="statistics", choices=["statistics", "tensor"],
                    help="msprobe's task for every run; tensor: the cases of single-process runs only")
    a = ap.parse_args()
    global TASK
    TASK = a.task
    os.makedirs(os.path.join(a.root, "_runs"), exist_ok=True)
    for name, d in CASES.items():
        if a.only and name not in a.only:
            continue
        if TASK == "tensor" and any(RUNS[d[k]][0] != "dump28.py" for k in ("npu", "bench", "ref") if d.get(k)):
            continue
        print(name, flush=True)
        t = make_case(a.root, name, d, a.force, a.py, a.rerun)
        tr = t["truth"]
        print("  truth:", "no divergence" if tr is None else
              f"{tr['node']} ({tr['module']}) rank {tr['rank']} step {tr['step']} micro {tr['micro_step']} "
              f"{tr['direction']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
