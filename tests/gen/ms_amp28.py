"""One MindSpore (PyNative, CPU) training step of `GPTLite` dumped by msprobe 26.2.0, optionally under automatic
mixed precision and with a conversion bug (see amp28_common.py).

    MS=/work/gen/msvenv/bin/python   # mindspore 2.10.0 + mindstudio-probe 26.2.0 + numpy 1.26.4 (see README)
    $MS tests/gen/ms_amp28.py --amp O1 --bug swap_kv --out /work/cases28/_runs/ms_o1_swap_kv

Step: dbg.start(net); loss, grads = value_and_grad(fwd)(x, y); dbg.stop(); SGD (outside the window); dbg.step().
msprobe computes its Norm statistic with `mindspore.mint.norm`, whose kernel the CPU backend lacks
(`LinalgVectorNorm unregistered`); `_cpu_norm_for_msprobe` gives msprobe's data processor a norm computed in numpy
(float32 sum of squares), the network itself is untouched.
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import amp28_common as common
import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops


class SelfAttention(nn.Cell):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.d, self.heads, self.hd = d, heads, d // heads
        self.qkv = nn.Dense(d, 3 * d)
        self.proj = nn.Dense(d, d)
        self.softmax = nn.Softmax(axis=-1)
        self.mask = Tensor(common.causal_mask())
        self.scale = 1.0 / math.sqrt(self.hd)

    def construct(self, x):
        b, t, d = x.shape
        q, k, v = ops.split(self.qkv(x), self.d, axis=-1)
        q = q.reshape(b, t, self.heads, self.hd).transpose(0, 2, 1, 3)
        k = k.reshape(b, t, self.heads, self.hd).transpose(0, 2, 1, 3)
        v = v.reshape(b, t, self.heads, self.hd).transpose(0, 2, 1, 3)
        scores = ops.matmul(q, k.transpose(0, 1, 3, 2)) * self.scale + self.mask.astype(q.dtype)
        out = ops.matmul(self.softmax(scores), v).transpose(0, 2, 1, 3).reshape(b, t, d)
        return self.proj(out)


class FeedForward(nn.Cell):
    def __init__(self, d: int, ff: int):
        super().__init__()
        self.fc_in = nn.Dense(d, ff)
        self.act = nn.GELU(approximate=False)
        self.fc_out = nn.Dense(ff, d)

    def construct(self, x):
        return self.fc_out(self.act(self.fc_in(x)))


class Block(nn.Cell):
    def __init__(self, d: int, heads: int, ff: int):
        super().__init__()
        self.ln1 = nn.LayerNorm((d,), epsilon=1e-5)
        self.attn = SelfAttention(d, heads)
        self.ln2 = nn.LayerNorm((d,), epsilon=1e-5)
        self.mlp = FeedForward(d, ff)

    def construct(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPTLite(nn.Cell):
    def __init__(self):
        super().__init__()
        c = common.CFG
        self.tok_emb = nn.Embedding(c["vocab"], c["d"])
        self.pos = Parameter(Tensor(np.zeros((c["seq"], c["d"]), np.float32)), name="pos")
        self.layers = nn.CellList([Block(c["d"], c["heads"], c["ff"]) for _ in range(c["layers"])])
        self.ln_f = nn.LayerNorm((c["d"],), epsilon=1e-5)
        self.head = nn.Dense(c["d"], c["vocab"])

    def construct(self, tokens):
        x = self.tok_emb(tokens) + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln_f(x))


def ms_name(name: str) -> str:
    """The MindSpore parameter name of a PyTorch one (LayerNorm weight/bias are gamma/beta)."""
    if name == "tok_emb.weight":
        return "tok_emb.embedding_table"
    module, _, leaf = name.rpartition(".")
    if module.rpartition(".")[2].startswith("ln"):
        return f"{module}.{ {'weight': 'gamma', 'bias': 'beta'}[leaf]}"
    return name


def load(net: nn.Cell, w: dict[str, np.ndarray]) -> None:
    params = {p.name for p in net.get_parameters()}
    table = {ms_name(k): Parameter(Tensor(v), name=ms_name(k)) for k, v in w.items()}
    assert set(table) == params, sorted(set(table) ^ params)
    ms.load_param_into_net(net, table, strict_load=True)


def _cpu_norm_for_msprobe() -> list[str]:
    import mindspore

    def norm(x, *args, **kwargs):
        a = x.asnumpy().astype(np.float32, copy=False)
        return np.float32(np.sqrt(np.sum(np.square(a, dtype=np.float32), dtype=np.float32)))

    class Mint:
        def __getattr__(self, name):
            return norm if name == "norm" else getattr(mindspore.mint, name)

    mod = importlib.import_module("msprobe.core.dump.data_dump.data_processor.mindspore_processor")
    mod.mint = Mint()
    return [mod.__name__ + ".mint"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--amp", default="O0", choices=["O0", "O1", "O2"])
    ap.add_argument("--bug", default="none", choices=common.BUGS)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_device("CPU")
    patched = _cpu_norm_for_msprobe()
    from msprobe.mindspore import PrecisionDebugger, seed_all
    seed_all(1234, mode=False)
    dbg = PrecisionDebugger(config_path=common.write_config(a.out))
    net = GPTLite()
    load(net, common.with_bug(common.weights(), a.bug))
    if a.amp != "O0":
        net = ms.amp.auto_mixed_precision(net, a.amp, dtype=ms.float16)
    net.set_train(True)
    x_np, y_np = common.inputs()
    x, y = Tensor(x_np.astype(np.int32)), Tensor(y_np.astype(np.int32).reshape(-1))

    def fwd(inp, lab):
        logits = net(inp)
        return ops.cross_entropy(logits.reshape(-1, logits.shape[-1]).astype(ms.float32), lab)

    params = net.trainable_params()
    grad_fn = ms.value_and_grad(fwd, None, params)
    opt = nn.SGD(params, learning_rate=0.01)
    dbg.start(net, rank_id=0)
    loss, grads = grad_fn(x, y)
    dbg.stop()
    opt(grads)
    dbg.step()
    print("loss", float(loss.asnumpy()), "patched", patched)


if __name__ == "__main__":
    main()
