"""Dump training steps of one small model with msprobe's PrecisionDebugger on CPU (one process per run).

    python dump28.py --model llama --precision bf16 --steps 2 --opt adamw --out DIR
    python dump28.py --model llama --bug perturb:layers.1.mlp.gate_proj.weight:0.05 --extraop --out DIR

Models (see models28.py)
  llama      TinyLlama(vocab 96, d 48, 4 heads, ff 128, 4 layers, seq 16), tied head, tokens 2x16
  llama_fn   the same with the SwiGLU activation as the custom autograd Function SwiGLUFn in every layer, untied head
  resnet     ResNetCkpt(widths 8,16,16,32): blocks 1..3 under torch.utils.checkpoint (reentrant), images 4x3x16x16
  mixer16    Mixer(16 layers, d 32, 16 tokens of 4x4 patches), images 2x3x16x16
  llama2     TinyLlama with 2 layers (small cases for CI), tied head, tokens 2x16
  llama12    TinyLlama(vocab 96, d 32, 4 heads, ff 64, 12 layers, seq 16), untied head, tokens 2x16
Precision   fp32 | bf16 | fp16: forward under torch.autocast('cpu', dtype); loss on out.float() and backward outside
Steps       --steps N training steps, each dumped (step k: its own batch); the optimizer step runs outside the dump
            window; --opt sgd (lr 0.05) | adamw (lr 1e-3, weight decay 0.01)
Micro       --micro M forward/backward passes per step (gradient accumulation, loss / M), micro-batch m its own batch
Bugs        none
            perturb:PARAM:SCALE        PARAM += SCALE * randn (Generator seed 99) before training
            scale_from_mb:PARAM:F:MB   the F.linear call with weight PARAM returns F x its result from micro-batch MB on
            bwd_beta:LAYER:BETA        llama_fn: layer LAYER's SwiGLUFn backward evaluates sigmoid(BETA * gate)
            recompute_gamma:BLOCK:G    resnet: blocks.BLOCK's gamma is G from its second call on (the recomputation)
--extraop   llama: probe = one extra F.linear (unused probe) after the embedding: later Functional.linear counters
            shift by one; mul = the embedding times 1.0: later Tensor.__mul__ counters shift by one
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models28

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
SEEDS = {"llama": 2024, "llama_fn": 2025, "resnet": 2026, "mixer16": 2027, "llama12": 2028, "llama2": 2029}
STATE = {"micro": 0}


def make_model(name: str, extraop: str | None):
    torch.manual_seed(SEEDS[name])
    if name == "llama":
        return models28.TinyLlama(tied=True, extra_op=extraop)
    if name == "llama_fn":
        return models28.TinyLlama(tied=False, custom_fn=True, extra_op=extraop)
    if name == "llama2":
        return models28.TinyLlama(n=2, tied=True)
    if name == "llama12":
        return models28.TinyLlama(d=32, ff=64, n=12, tied=False)
    if name == "resnet":
        return models28.ResNetCkpt()
    if name == "mixer16":
        return models28.Mixer()
    raise ValueError(name)


def batch(name: str, step: int, micro: int):
    seed = SEEDS[name] * 10 + 1000 * step + 100 * micro
    gx, gy = torch.Generator().manual_seed(seed + 1), torch.Generator().manual_seed(seed + 2)
    if name.startswith("llama"):
        return torch.randint(0, 96, (2, 16), generator=gx), torch.randint(0, 96, (2, 16), generator=gy)
    n = 4 if name == "resnet" else 2
    return torch.randn(n, 3, 16, 16, generator=gx), torch.randint(0, 10, (n,), generator=gy)


def plant(model, bug: str) -> None:
    kind, *arg = bug.split(":")
    if kind == "none":
        return
    if kind == "perturb":
        p = model.get_parameter(arg[0])
        with torch.no_grad():
            p.add_(float(arg[1]) * torch.randn(p.shape, generator=torch.Generator().manual_seed(99)))
    elif kind == "scale_from_mb":
        start = int(arg[2])
        models28.plant_linear_scale(model.get_parameter(arg[0]), float(arg[1]), lambda: STATE["micro"] >= start)
    elif kind == "bwd_beta":
        models28.SwiGLUFn.beta[int(arg[0])] = float(arg[1])
    elif kind == "recompute_gamma":
        model.blocks[int(arg[0])].gamma_after_first = float(arg[1])
    else:
        raise ValueError(bug)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=list(SEEDS))
    ap.add_argument("--precision", default="fp32", choices=list(DTYPES))
    ap.add_argument("--bug", default="none")
    ap.add_argument("--extraop", choices=["probe", "mul"])
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--micro", type=int, default=1)
    ap.add_argument("--opt", default="sgd", choices=["sgd", "adamw"])
    ap.add_argument("--task", default="statistics", choices=["statistics", "tensor"],
                    help="tensor: every tensor saved as well (the real-tensor metrics)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    models28.install_hooks()  # before msprobe wraps F.linear; a pass-through unless a scale is planted
    from msprobe.pytorch import PrecisionDebugger, seed_all

    seed_all(SEEDS[a.model])
    os.makedirs(a.out, exist_ok=True)
    cfg = {"task": a.task, "dump_path": os.path.abspath(a.out), "rank": [], "step": [], "level": "mix",
           "async_dump": False,
           "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"},
           "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}
    cfg_path = a.out.rstrip("/") + ".msprobe_config.json"  # next to (not inside) the dump folder
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    dbg = PrecisionDebugger(config_path=cfg_path)

    model = make_model(a.model, a.extraop)
    plant(model, a.bug)
    model.train()
    if a.opt == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    dtype = DTYPES[a.precision]
    for step in range(a.steps):
        dbg.start(model, rank_id=0)  # msprobe 26.x: folder rank0 instead of proc<pid>
        for mb in range(a.micro):
            STATE["micro"] = mb
            if hasattr(model, "reset_calls"):
                model.reset_calls()
            x, y = batch(a.model, step, mb)
            if dtype is None:
                out = model(x)
            else:
                with torch.autocast(device_type="cpu", dtype=dtype):
                    out = model(x)
            loss = F.cross_entropy(out.float().reshape(-1, out.shape[-1]), y.reshape(-1)) / a.micro
            loss.backward()
        dbg.stop()
        opt.step()
        opt.zero_grad()
        dbg.step()
        print("step", step, "loss", float(loss) * a.micro)


if __name__ == "__main__":
    main()
