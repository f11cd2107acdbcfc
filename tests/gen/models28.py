"""Small real models and planted bugs for the development cases of tests/gen (needs torch; not imported by pytest).

Models
  TinyLlama    LLaMA-style decoder: token embedding (no learned positions), blocks of
               RMSNorm -> causal self-attention with rotary embedding (q/k/v/o Linear, no bias, attention written op by
               op: matmul, scale, masked_fill, softmax, matmul) -> residual -> RMSNorm -> SwiGLU MLP
               (down(act(gate(x), up(x))), act = SiLU(gate) * up, either plain torch ops or the custom autograd
               Function `SwiGLUFn` whose backward is written by hand) -> residual; final RMSNorm; head tied to the
               embedding (F.linear(x, tok.weight)) or untied (nn.Linear).
  ResNetCkpt   ResNet-like CNN: stem conv-bn-relu, residual blocks (conv-bn-relu-conv-bn, 1x1 conv shortcut when the
               width changes, a per-block LayerScale-like scalar `gamma`), blocks 1..n-1 run through
               torch.utils.checkpoint (activation recomputation, reentrant), global average pool, fc.
  Mixer        MLP-Mixer: patches (unfold as reshape/permute) -> Linear patch embedding, blocks of
               LayerNorm -> token-mixing MLP (transpose, Linear, GELU, Linear, transpose) -> residual ->
               LayerNorm -> channel-mixing MLP -> residual; LayerNorm, mean pool, head.

Bugs (every bug keeps node names, call counters and dumped entries identical to the correct run: only numbers differ)
  install_hooks()              wraps F.linear once, BEFORE msprobe wraps it (so the wrapper is inside msprobe's node);
                               a pass-through unless a scale is planted
  plant_linear_scale(w, f, when)  the F.linear call made with weight `w` returns f x its result while `when()` is true
                               (a faulty kernel / a wrongly fused scale that starts at some point of the run)
  SwiGLUFn.beta[layer]         the hand-written backward of layer `layer` multiplies the gate by beta before its
                               sigmoid (the forward uses F.silu, right); beta 1.0 = correct
  ResBlock.gamma_after_first   the block's scalar gamma changes after its first call: the recomputation during the
                               backward pass (torch.utils.checkpoint) multiplies by another value than the forward did
"""
from __future__ import annotations

import math
import typing

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as ckpt

# ---------------------------------------------------------------- faulty F.linear
_ORIG_LINEAR = F.linear
_SCALED: dict[int, tuple[float, object]] = {}  # id(weight) -> (factor, when)
_INSTALLED: list[bool] = []


def _linear(input, weight, bias=None):
    out = _ORIG_LINEAR(input, weight, bias)
    planted = _SCALED.get(id(weight))
    if planted is not None and planted[1]():
        out = torch._C._VariableFunctions.mul(out, planted[0])  # builtin, not wrapped by msprobe: no extra node
    return out


def install_hooks() -> None:
    if torch.nn.functional.linear is _ORIG_LINEAR:
        torch.nn.functional.linear = _linear
        _INSTALLED.append(True)


def plant_linear_scale(weight, factor: float, when=lambda: True) -> None:
    assert _INSTALLED, "call install_hooks() before msprobe starts"
    _SCALED[id(weight)] = (float(factor), when)


# ---------------------------------------------------------------- LLaMA-style decoder
class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.type_as(x)


def rotary_tables(seq: int, hd: int, base: float = 10000.0):
    inv = 1.0 / (base ** (torch.arange(0, hd, 2).float() / hd))
    ang = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, d: int, nhead: int, seq: int):
        super().__init__()
        self.nhead, self.hd = nhead, d // nhead
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        cos, sin = rotary_tables(seq, self.hd)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1), persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        q = self.q_proj(x).view(b, t, self.nhead, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.nhead, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.nhead, self.hd).transpose(1, 2)
        cos, sin = self.cos[:t], self.sin[:t]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
        att = att.masked_fill(self.mask[:t, :t], -1e4)  # finite fill: no -inf in the dumped statistics
        att = F.softmax(att.float(), dim=-1).type_as(q)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        return self.o_proj(y)


class SwiGLUFn(torch.autograd.Function):
    """silu(gate) * up with a hand-written backward (as fused kernels ship it). beta[layer] != 1 is the planted bug:
    the backward evaluates the sigmoid at beta * gate."""

    beta: typing.ClassVar[dict[int, float]] = {}

    @staticmethod
    def forward(ctx, gate, up, layer):
        ctx.save_for_backward(gate, up)
        ctx.layer = layer
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx, grad):
        gate, up = ctx.saved_tensors
        z = gate * SwiGLUFn.beta.get(ctx.layer, 1.0)
        sig = torch.sigmoid(z)
        silu = gate * sig
        dgate = grad * up * (sig * (1 + gate * (1 - sig)))
        dup = grad * silu
        return dgate, dup, None


class SwiGLU(nn.Module):
    def __init__(self, d: int, ff: int, layer: int, custom_fn: bool):
        super().__init__()
        self.layer, self.custom_fn = layer, custom_fn
        self.gate_proj = nn.Linear(d, ff, bias=False)
        self.up_proj = nn.Linear(d, ff, bias=False)
        self.down_proj = nn.Linear(ff, d, bias=False)

    def forward(self, x):
        g, u = self.gate_proj(x), self.up_proj(x)
        h = SwiGLUFn.apply(g, u, self.layer) if self.custom_fn else F.silu(g) * u
        return self.down_proj(h)


class LlamaBlock(nn.Module):
    def __init__(self, d, nhead, ff, seq, layer, custom_fn):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = LlamaAttention(d, nhead, seq)
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = SwiGLU(d, ff, layer, custom_fn)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyLlama(nn.Module):
    def __init__(self, vocab=96, d=48, nhead=4, ff=128, n=4, seq=16, tied=True, custom_fn=False, extra_op=None):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([LlamaBlock(d, nhead, ff, seq, i, custom_fn) for i in range(n)])
        self.norm = RMSNorm(d)
        self.tied = tied
        if not tied:
            self.lm_head = nn.Linear(d, vocab, bias=False)
        self.extra_op = extra_op
        if extra_op == "probe":
            self.register_buffer("probe", torch.eye(d)[: d // 2].contiguous(), persistent=False)
        with torch.no_grad():  # deterministic, LLaMA-like init scales (logits of order 1 with the tied head)
            self.embed_tokens.weight.normal_(0.0, 0.15)
            for name, p in self.named_parameters():
                if name.endswith("layernorm.weight") or name == "norm.weight":
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape))

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        if self.extra_op == "probe":
            # the npu code base calls one more F.linear (a debug probe whose result is not used): every later
            # Functional.linear.N counter is one higher than in the bench run; the numbers are unchanged
            F.linear(x, self.probe)
        elif self.extra_op == "mul":
            # the npu code base scales the embedding by a multiplier that is 1.0 (Gemma-style normaliser switched
            # off): one more Tensor.__mul__, so every later Tensor.__mul__.N counter (RMSNorm, rotary, SwiGLU) is one
            # higher than in the bench run; the numbers are unchanged
            x = x * 1.0
        for layer in self.layers:
            x = layer(x)
        x = self.norm(x)
        return F.linear(x, self.embed_tokens.weight) if self.tied else self.lm_head(x)


# ---------------------------------------------------------------- ResNet-like CNN with activation recomputation
class ResBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False) if (cin != cout or stride != 1) else None
        self.gamma = 1.0  # LayerScale-like scalar on the residual branch
        self.gamma_after_first = None  # planted bug: the value used from the second call on (the recomputation)
        self.calls = 0

    def forward(self, x):
        g = self.gamma if (self.calls == 0 or self.gamma_after_first is None) else self.gamma_after_first
        self.calls += 1
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h)) * g
        s = x if self.shortcut is None else self.shortcut(x)
        return F.relu(h + s)


class ResNetCkpt(nn.Module):
    def __init__(self, widths=(8, 16, 16, 32), classes=10, checkpointed=True):
        super().__init__()
        self.stem = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.stem_bn = nn.BatchNorm2d(widths[0])
        blocks, cin = [], widths[0]
        for i, w in enumerate(widths):
            blocks.append(ResBlock(cin, w, 2 if (i > 0 and w != cin) else 1))
            cin = w
        self.blocks = nn.ModuleList(blocks)
        self.fc = nn.Linear(cin, classes)
        self.checkpointed = checkpointed

    def forward(self, x):
        x = F.relu(self.stem_bn(self.stem(x)))
        for i, blk in enumerate(self.blocks):
            # reentrant checkpoint: the block runs under no_grad first and again (recomputed) in the backward pass
            x = ckpt.checkpoint(blk, x, use_reentrant=True) if self.checkpointed and i > 0 else blk(x)
        x = x.mean(dim=(2, 3))
        return self.fc(x)

    def reset_calls(self):
        for b in self.blocks:
            b.calls = 0


# ---------------------------------------------------------------- MLP-Mixer
class MlpBlock(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class MixerLayer(nn.Module):
    def __init__(self, tokens, d, tok_hidden, ch_hidden):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.token_mix = MlpBlock(tokens, tok_hidden)
        self.norm2 = nn.LayerNorm(d)
        self.channel_mix = MlpBlock(d, ch_hidden)

    def forward(self, x):
        x = x + self.token_mix(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mix(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self, image=16, patch=4, d=32, n=16, tok_hidden=32, ch_hidden=64, classes=10):
        super().__init__()
        self.patch = patch
        tokens = (image // patch) ** 2
        self.stem = nn.Linear(3 * patch * patch, d)
        self.layers = nn.ModuleList([MixerLayer(tokens, d, tok_hidden, ch_hidden) for _ in range(n)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, img):
        b, c, h, w = img.shape
        p = self.patch
        x = img.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(b, (h // p) * (w // p), c * p * p)
        x = self.stem(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x).mean(dim=1))
