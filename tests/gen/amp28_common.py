"""Framework-free part of the MindSpore-vs-PyTorch development cases (numpy only): the network's sizes, its
weights and inputs, the planted conversion bugs and msprobe's config. `ms_amp28.py` (MindSpore) and
`pt_amp28.py` (PyTorch) build the same network from these and dump one training step each.

Network `GPTLite`: token embedding + learned positions -> 3 x pre-norm block (ln1, attn = one fused `qkv` linear
split into q, k, v, causal softmax attention, `proj`; ln2, mlp = fc_in, exact GELU, fc_out) -> ln_f -> head.
Sizes are deliberately unlike the shared TinyLM (fused qkv, causal mask, 5 heads of 8).

Bugs (applied to the MindSpore side's weights only, as a checkpoint converter would get them wrong):
  swap_kv      layers.1.attn.qkv: the k and v row blocks of the fused weight and bias swapped (weight statistics
               unchanged: only the attention that uses them shows it)
  gamma_beta   layers.2.ln2: gamma loaded from the PyTorch bias and beta from the weight
"""
from __future__ import annotations

import json
import os

import numpy as np

CFG = dict(vocab=50, d=40, heads=5, ff=96, layers=3, seq=10, batch=3)
BUGS = ("none", "swap_kv", "gamma_beta")


def weights() -> dict[str, np.ndarray]:
    """Every parameter under its PyTorch name, float32, from fixed seeds."""
    c, rs = CFG, np.random.RandomState(2028)
    d, ff = c["d"], c["ff"]

    def lin(name, n_out, n_in):
        w[f"{name}.weight"] = (rs.randn(n_out, n_in) / np.sqrt(n_in)).astype(np.float32)
        w[f"{name}.bias"] = (0.02 * rs.randn(n_out)).astype(np.float32)

    def norm(name):
        w[f"{name}.weight"] = (1 + 0.1 * rs.randn(d)).astype(np.float32)
        w[f"{name}.bias"] = (0.05 * rs.randn(d)).astype(np.float32)

    w: dict[str, np.ndarray] = {"tok_emb.weight": rs.randn(c["vocab"], d).astype(np.float32),
                                "pos": (0.1 * rs.randn(c["seq"], d)).astype(np.float32)}
    for i in range(c["layers"]):
        p = f"layers.{i}"
        norm(f"{p}.ln1")
        lin(f"{p}.attn.qkv", 3 * d, d)
        lin(f"{p}.attn.proj", d, d)
        norm(f"{p}.ln2")
        lin(f"{p}.mlp.fc_in", ff, d)
        lin(f"{p}.mlp.fc_out", d, ff)
    norm("ln_f")
    lin("head", c["vocab"], d)
    return w


def with_bug(w: dict[str, np.ndarray], bug: str) -> dict[str, np.ndarray]:
    """The weights as the converter with `bug` hands them to the MindSpore run."""
    w = dict(w)
    d = CFG["d"]
    if bug == "swap_kv":
        for name in ("layers.1.attn.qkv.weight", "layers.1.attn.qkv.bias"):
            q, k, v = np.split(w[name], 3, axis=0)
            w[name] = np.concatenate([q, v, k], axis=0)
    elif bug == "gamma_beta":
        w["layers.2.ln2.weight"], w["layers.2.ln2.bias"] = w["layers.2.ln2.bias"], w["layers.2.ln2.weight"]
    elif bug != "none":
        raise ValueError(bug)
    assert all(a.shape == b.shape for a, b in zip(w.values(), weights().values())), d
    return w


def inputs() -> tuple[np.ndarray, np.ndarray]:
    c = CFG
    x = np.random.RandomState(11).randint(0, c["vocab"], (c["batch"], c["seq"]))
    y = np.random.RandomState(12).randint(0, c["vocab"], (c["batch"], c["seq"]))
    return x, y


def causal_mask() -> np.ndarray:
    """Additive mask: 0 on and below the diagonal, -1e4 above (finite in float16)."""
    s = CFG["seq"]
    return np.triu(np.full((s, s), -1e4, np.float32), k=1)


def write_config(out: str) -> str:
    """msprobe's config, statistics at level mix, written next to the dump folder."""
    cfg = {"task": "statistics", "dump_path": os.path.abspath(out), "rank": [], "step": [], "level": "mix",
           "async_dump": False,
           "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
    path = out.rstrip("/") + ".msprobe_config.json"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    return path
