"""The PyTorch twin of ms_amp28.py: one float32 training step of `GPTLite` (CPU) dumped by msprobe 26.2.0, the
baseline of the MindSpore-vs-PyTorch cases (see amp28_common.py).

    /work/gen/venv/bin/python tests/gen/pt_amp28.py --out /work/cases28/_runs/pt_fp32
"""
from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import amp28_common as common
import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.d, self.heads, self.hd = d, heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.softmax = nn.Softmax(dim=-1)
        self.register_buffer("mask", torch.from_numpy(common.causal_mask()))
        self.scale = 1.0 / math.sqrt(self.hd)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = torch.split(self.qkv(x), self.d, dim=-1)
        q = q.reshape(b, t, self.heads, self.hd).transpose(1, 2)
        k = k.reshape(b, t, self.heads, self.hd).transpose(1, 2)
        v = v.reshape(b, t, self.heads, self.hd).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(2, 3)) * self.scale + self.mask
        out = torch.matmul(self.softmax(scores), v).transpose(1, 2).reshape(b, t, d)
        return self.proj(out)


class FeedForward(nn.Module):
    def __init__(self, d: int, ff: int):
        super().__init__()
        self.fc_in = nn.Linear(d, ff)
        self.act = nn.GELU()
        self.fc_out = nn.Linear(ff, d)

    def forward(self, x):
        return self.fc_out(self.act(self.fc_in(x)))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, ff: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = SelfAttention(d, heads)
        self.ln2 = nn.LayerNorm(d, eps=1e-5)
        self.mlp = FeedForward(d, ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPTLite(nn.Module):
    def __init__(self):
        super().__init__()
        c = common.CFG
        self.tok_emb = nn.Embedding(c["vocab"], c["d"])
        self.pos = nn.Parameter(torch.zeros(c["seq"], c["d"]))
        self.layers = nn.ModuleList([Block(c["d"], c["heads"], c["ff"]) for _ in range(c["layers"])])
        self.ln_f = nn.LayerNorm(c["d"], eps=1e-5)
        self.head = nn.Linear(c["d"], c["vocab"])

    def forward(self, tokens):
        x = self.tok_emb(tokens) + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln_f(x))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bug", default="none", choices=common.BUGS)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from msprobe.pytorch import PrecisionDebugger, seed_all
    seed_all(1234)
    dbg = PrecisionDebugger(config_path=common.write_config(a.out))
    net = GPTLite()
    state = {k: torch.from_numpy(v) for k, v in common.with_bug(common.weights(), a.bug).items()}
    net.load_state_dict(state, strict=False)
    assert set(state) == {k for k, _ in net.named_parameters()}
    net.train()
    x_np, y_np = common.inputs()
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np).reshape(-1)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    dbg.start(net, rank_id=0)  # msprobe 26.x: folder rank0 instead of proc<pid>
    logits = net(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y)
    loss.backward()
    dbg.stop()
    opt.step()
    dbg.step()
    print("loss", float(loss))


if __name__ == "__main__":
    main()
