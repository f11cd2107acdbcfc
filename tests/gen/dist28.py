"""Megatron-style tensor- and data-parallel TinyLlama on CPU (torch.distributed, gloo), dumped with msprobe 26.2.0.

    python dist28.py --tp 2 --dp 2 [--pp 2] --precision fp32 [--perturb RANK:PARAM:LAYER_OR_-1:SCALE] --out DIR

Model (plain torch, Megatron-core names; node ids like
`Module.module.decoder.layers.1.mlp.linear_fc1.ColumnParallelLinear.forward.0`):
  Wrapper.module = GPTModel (the wrapper is handed to msprobe and never dumped itself)
    embedding.word_embeddings   nn.Embedding(96, 48), replicated
    decoder.layers[i]           input_layernorm RMSNorm -> self_attention (linear_qkv ColumnParallelLinear 48 -> 3x48,
                                rows laid out [head, q/k/v, head_dim] so a row shard holds whole heads; rotary on q, k;
                                causal attention op by op; linear_proj RowParallelLinear 48 -> 48) -> residual ->
                                pre_mlp_layernorm RMSNorm -> mlp (linear_fc1 ColumnParallelLinear 48 -> 2x128 holding
                                [gate shard; up shard] per rank as Megatron's SwiGLU does, silu(gate) * up,
                                linear_fc2 RowParallelLinear 128 -> 48) -> residual
    decoder.final_layernorm     RMSNorm;  output_layer nn.Linear(48, 96, bias=False), replicated
  Parallel linears run one autograd Function (forward torch.matmul(x, w.t()); backward grad.matmul(w) and, for
  ColumnParallelLinear with TP > 1, dist.all_reduce(grad_input) over the TP group; grad_weight by matmul);
  RowParallelLinear all-reduces its partial output over the TP group (identity backward). No bias anywhere.
  The full weights are generated once (Generator seed 1234, fixed order) and sliced per TP rank, so every layout
  computes the same function.
Layout  world = tp x dp x pp, rank order tp-dp-pp (Megatron's tp-cp-ep-dp-pp with cp = ep = 1): tp_rank = rank % tp,
  dp_rank = rank // tp % dp, pp_rank = rank // (tp dp). With tp = dp = 2: TP groups [0,1],[2,3]; DP groups [0,2],[1,3]
  (and [4,6],[5,7] on a second stage). Every collective gets an explicit new_group.
Pipeline  --pp 2: stage 0 holds the embedding and layers 0-1, stage 1 layers 2-3 (named layers.0 and layers.1 on
  both stages, as Megatron names them), the final norm and the output layer; each micro-batch runs forward on stage 0,
  its activation goes to stage 1 (dist.send / dist.recv over the PP group), which runs forward and backward and sends
  the activation's gradient back; stage 0 then runs its backward (one micro-batch in flight).
Step    2 micro-batches of 2x16 tokens per data-parallel rank (replica r's micro-batch m: seeds 500 + 10 r + m;
  the same whatever the TP size), loss cross_entropy / 2, backward inside the dump window; then, still inside it,
  the data-parallel gradient all_reduce (SUM over the DP group, then / dp) when dp > 1; SGD step outside.
Precision  fp32 | bf16 (forward under torch.autocast('cpu', bfloat16); loss and backward outside).
--perturb RANK:PARAM:LAYER:SCALE  on global rank RANK only, decoder.layers.LAYER.PARAM (this rank's shard)
  += SCALE * randn (Generator seed 99).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

VOCAB, D, HEADS, FF, LAYERS, SEQ, BS, N_MICRO = 96, 48, 4, 128, 4, 16, 2, 2


class PS:
    tp = dp = pp = vpp = 1
    rank = tp_rank = dp_rank = pp_rank = 0
    tp_group = dp_group = pp_group = None


def _rank_of(t: int, d: int, p: int) -> int:
    return p * PS.tp * PS.dp + d * PS.tp + t


def init_state(tp: int, dp: int, pp: int = 1) -> None:
    PS.tp, PS.dp, PS.pp = tp, dp, pp
    if tp * dp * pp == 1:
        return
    PS.rank = dist.get_rank()
    PS.tp_rank, PS.dp_rank, PS.pp_rank = PS.rank % tp, PS.rank // tp % dp, PS.rank // (tp * dp)
    for p in range(pp):  # all ranks create all groups in the same order
        for d in range(dp):
            ranks = [_rank_of(i, d, p) for i in range(tp)]
            g = dist.new_group(ranks)
            if PS.rank in ranks:
                PS.tp_group = g
        for i in range(tp):
            ranks = [_rank_of(i, d, p) for d in range(dp)]
            g = dist.new_group(ranks)
            if PS.rank in ranks:
                PS.dp_group = g
    for d in range(dp):
        for i in range(tp):
            ranks = [_rank_of(i, d, p) for p in range(pp)]
            g = dist.new_group(ranks)
            if PS.rank in ranks:
                PS.pp_group = g


def virtual_stage(chunk: int) -> int:
    """Megatron's interleaving: model chunk c of stage s is virtual stage c * pp + s."""
    return chunk * PS.pp + PS.pp_rank


def layers_per_chunk() -> int:
    return LAYERS // (PS.pp * PS.vpp)


class LinearWithGradAccumulationAndAsyncCommunication(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, inp, weight, allreduce_dgrad):
        ctx.save_for_backward(inp, weight)
        ctx.allreduce_dgrad = allreduce_dgrad
        return torch.matmul(inp, weight.t())

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")  # the backward under the forward's autocast state, as Megatron does
    def backward(ctx, grad_output):
        inp, weight = ctx.saved_tensors
        grad_input = grad_output.matmul(weight)
        if ctx.allreduce_dgrad:
            dist.all_reduce(grad_input, group=PS.tp_group)
        g2 = grad_output.reshape(-1, grad_output.shape[-1])
        i2 = inp.reshape(-1, inp.shape[-1])
        grad_weight = g2.t().matmul(i2)
        return grad_input, grad_weight.to(weight.dtype), None


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        if PS.tp > 1:
            dist.all_reduce(x, group=PS.tp_group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class ColumnParallelLinear(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(fout // PS.tp, fin))

    def forward(self, x):
        return LinearWithGradAccumulationAndAsyncCommunication.apply(x, self.weight, PS.tp > 1)


class RowParallelLinear(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(fout, fin // PS.tp))

    def forward(self, x):
        return _ReduceFromModelParallelRegion.apply(
            LinearWithGradAccumulationAndAsyncCommunication.apply(x, self.weight, False))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.type_as(x)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class DotProductAttention(nn.Module):
    def __init__(self):
        super().__init__()
        hd = D // HEADS
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        emb = torch.cat([torch.outer(torch.arange(SEQ).float(), inv)] * 2, dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.register_buffer("mask", torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), 1), persistent=False)

    def forward(self, q, k, v):  # [b, s, heads_local, hd]
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        att = F.softmax(att.masked_fill(self.mask, -1e4).float(), dim=-1).type_as(q)
        ctx = torch.matmul(att, v)
        return ctx.transpose(1, 2).reshape(ctx.shape[0], ctx.shape[2], -1)


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads_local = HEADS // PS.tp
        self.linear_qkv = ColumnParallelLinear(D, 3 * D)
        self.core_attention = DotProductAttention()
        self.linear_proj = RowParallelLinear(D, D)

    def forward(self, h):
        b, s, _ = h.shape
        q, k, v = self.linear_qkv(h).view(b, s, self.heads_local, 3, D // HEADS).unbind(dim=3)
        return self.linear_proj(self.core_attention(q, k, v))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear_fc1 = ColumnParallelLinear(D, 2 * FF)
        self.linear_fc2 = RowParallelLinear(FF, D)

    def forward(self, h):
        g, u = torch.chunk(self.linear_fc1(h), 2, dim=-1)
        return self.linear_fc2(F.silu(g) * u)


class TransformerLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm(D)
        self.self_attention = SelfAttention()
        self.pre_mlp_layernorm = RMSNorm(D)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.self_attention(self.input_layernorm(x))
        return x + self.mlp(self.pre_mlp_layernorm(x))


class LanguageModelEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, D)

    def forward(self, ids):
        return self.word_embeddings(ids)


class TransformerBlock(nn.Module):
    def __init__(self, last: bool):
        super().__init__()
        self.layers = nn.ModuleList([TransformerLayer() for _ in range(layers_per_chunk())])
        self.final_layernorm = RMSNorm(D) if last else None

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.final_layernorm(x) if self.final_layernorm is not None else x


class GPTModel(nn.Module):
    """One virtual pipeline stage: the first embeds token ids, the others take the previous one's activation."""

    def __init__(self, virtual: int = 0):
        super().__init__()
        last = virtual == PS.pp * PS.vpp - 1
        self.embedding = LanguageModelEmbedding() if virtual == 0 else None
        self.decoder = TransformerBlock(last)
        self.output_layer = nn.Linear(D, VOCAB, bias=False) if last else None

    def forward(self, ids=None, hidden=None):
        h = self.decoder(self.embedding(ids) if self.embedding is not None else hidden)
        return self.output_layer(h) if self.output_layer is not None else h


class Wrapper(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *a):
        return self.module(*a)


def full_weights() -> dict:
    g = torch.Generator().manual_seed(1234)

    def rn(*shape, std):
        return torch.randn(*shape, generator=g) * std

    w = {"embedding.word_embeddings.weight": rn(VOCAB, D, std=0.15)}
    for i in range(LAYERS):
        p = f"decoder.layers.{i}."
        w[p + "input_layernorm.weight"] = 1.0 + rn(D, std=0.1)
        w[p + "self_attention.linear_qkv.weight"] = rn(3 * D, D, std=D ** -0.5)  # [head, q/k/v, hd] rows
        w[p + "self_attention.linear_proj.weight"] = rn(D, D, std=D ** -0.5)
        w[p + "pre_mlp_layernorm.weight"] = 1.0 + rn(D, std=0.1)
        w[p + "mlp.gate"] = rn(FF, D, std=D ** -0.5)
        w[p + "mlp.up"] = rn(FF, D, std=D ** -0.5)
        w[p + "mlp.linear_fc2.weight"] = rn(D, FF, std=FF ** -0.5)
    w["decoder.final_layernorm.weight"] = 1.0 + rn(D, std=0.1)
    w["output_layer.weight"] = rn(VOCAB, D, std=D ** -0.5)
    return w


def global_name(name: str, virtual: int) -> str:
    """The full model's name of a virtual stage's parameter (its decoder.layers.i is layer v * layers_per_chunk + i)."""
    if not name.startswith("decoder.layers."):
        return name
    i, rest = name[len("decoder.layers."):].split(".", 1)
    return f"decoder.layers.{virtual * layers_per_chunk() + int(i)}.{rest}"


def shard(full: dict, name: str, virtual: int) -> torch.Tensor:
    name = global_name(name, virtual)
    t, r = PS.tp, PS.tp_rank
    if name.endswith("linear_qkv.weight"):
        n = full[name].shape[0] // t
        return full[name][r * n:(r + 1) * n]
    if name.endswith("linear_fc1.weight"):
        pre = name[: -len("linear_fc1.weight")]
        g, u = full[pre + "gate"], full[pre + "up"]
        n = FF // t
        return torch.cat([g[r * n:(r + 1) * n], u[r * n:(r + 1) * n]])
    if name.endswith("linear_proj.weight") or name.endswith("linear_fc2.weight"):
        n = full[name].shape[1] // t
        return full[name][:, r * n:(r + 1) * n]
    return full[name]


def build(perturb: str | None) -> list[Wrapper]:
    """This rank's model chunks (one without virtual stages)."""
    full = full_weights()
    chunks = [GPTModel(virtual_stage(c)) for c in range(PS.vpp)]
    with torch.no_grad():
        for c, model in enumerate(chunks):
            for name, p in model.named_parameters():
                p.copy_(shard(full, name, virtual_stage(c)))
        if perturb:
            rank, param, layer, scale = perturb.split(":")
            chunk, _, layer = layer.rpartition(".")  # CHUNK.LAYER with virtual stages
            if int(rank) == PS.rank:
                p = chunks[int(chunk or 0)].get_parameter(f"decoder.layers.{layer}.{param}")
                p.add_(float(scale) * torch.randn(p.shape, generator=torch.Generator().manual_seed(99)))
    return [Wrapper(m) for m in chunks]


def batch(m: int):
    g = torch.Generator().manual_seed(500 + 10 * PS.dp_rank + m)
    x = torch.randint(0, VOCAB, (BS, SEQ), generator=g)
    return x, torch.randint(0, VOCAB, (BS, SEQ), generator=g)


def _peer(virtual: int) -> int:
    """The rank of this rank's tensor-parallel and data-parallel position on the stage running `virtual`."""
    return _rank_of(PS.tp_rank, PS.dp_rank, virtual % PS.pp)


def micro_batch(chunks: list[Wrapper], x: torch.Tensor, y: torch.Tensor, bf16: bool) -> list[torch.Tensor]:
    """One micro-batch through every virtual stage this rank runs, forward then backward, one micro-batch in
    flight: activations go to the next virtual stage and gradients back over dist.send / dist.recv."""
    last = PS.pp * PS.vpp - 1
    mine = [v for v in range(last + 1) if v % PS.pp == PS.pp_rank]
    kept, losses = {}, []
    for v in mine:
        hidden = None
        if v > 0:
            hidden = torch.empty(BS, SEQ, D)
            dist.recv(hidden, src=_peer(v - 1), group=PS.pp_group)
            hidden.requires_grad_(True)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=bf16):
            out = chunks[v // PS.pp](x) if hidden is None else chunks[v // PS.pp](x, hidden)
        if v == last:
            loss = F.cross_entropy(out.float().reshape(-1, VOCAB), y.reshape(-1)) / N_MICRO
            loss.backward()
            losses.append(loss.detach())
        else:
            dist.send(out.detach().float().contiguous(), dst=_peer(v + 1), group=PS.pp_group)
        kept[v] = (hidden, out)
    for v in reversed(mine):
        hidden, out = kept[v]
        if v != last:
            grad = torch.empty(BS, SEQ, D)
            dist.recv(grad, src=_peer(v + 1), group=PS.pp_group)
            out.backward(grad.to(out.dtype))
        if v > 0:
            dist.send(hidden.grad.contiguous(), dst=_peer(v - 1), group=PS.pp_group)
    return losses


def run_rank(rank: int, world: int, a, port: int) -> None:
    if world > 1:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    from msprobe.pytorch import PrecisionDebugger, seed_all

    seed_all(1234)
    init_state(a.tp, a.dp, a.pp)
    PS.vpp = a.vpp
    dbg = PrecisionDebugger(config_path=a.out.rstrip("/") + ".msprobe_config.json")
    chunks = build(a.perturb)
    params = [p for c in chunks for p in c.parameters()]
    for c in chunks:
        c.train()
    opt = torch.optim.SGD(params, lr=0.05)
    if world > 1:
        dist.barrier()
    dbg.start(chunks if PS.vpp > 1 else chunks[0], rank_id=rank)  # a model list: msprobe writes Module.<chunk>.
    losses = []
    for m in range(N_MICRO):
        losses.extend(micro_batch(chunks, *batch(m), a.precision == "bf16"))
    if PS.dp > 1:
        for p in params:
            dist.all_reduce(p.grad, group=PS.dp_group)
            p.grad.div_(PS.dp)
    dbg.stop()
    opt.step()
    opt.zero_grad()
    dbg.step()
    if losses:
        print(f"[rank{rank}] loss {sum(float(x) for x in losses):.6f}", flush=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--dp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=1, choices=[1, 2])
    ap.add_argument("--vpp", type=int, default=1, choices=[1, 2], help="model chunks per stage (needs --pp 2)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--perturb")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cfg = {"task": "statistics", "dump_path": os.path.abspath(a.out), "rank": [], "step": [], "level": "mix",
           "async_dump": False,
           "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
    with open(a.out.rstrip("/") + ".msprobe_config.json", "w") as f:
        json.dump(cfg, f, indent=2)
    world = a.tp * a.dp * a.pp
    if world == 1:
        run_rank(0, 1, a, 0)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run_rank, args=(world, a, port), nprocs=world, join=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
