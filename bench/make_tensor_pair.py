#!/usr/bin/env python3
"""Make a multi-GB tensor-mode pair of runs with msprobe (PyTorch, CPU) for `bench_tensor_mode.py`.

Usage (a Python with CPU torch and msprobe installed, e.g. ``pip install torch mindstudio-probe==26.2.0``)::

    python bench/make_tensor_pair.py OUT [--layers 8] [--d 512] [--batch 8] [--seq 256]

Writes ``OUT/npu`` and ``OUT/bench``: one training step (forward and backward, level mix, task ``tensor``) of a
small transformer language model (embedding, ``--layers`` ``nn.TransformerEncoderLayer`` of width ``--d`` with
``--d / 64`` heads and a 4 x d feed-forward, layer norm, linear head) on a batch of ``--batch`` x ``--seq`` tokens.
Both runs start from the same seed; the npu run has one weight perturbed (``encoder.layers.1.linear1.weight``
plus 0.05 x N(0, 1)), so the first divergence is that layer's ``linear1`` in the forward pass. The defaults give
about 5.1 GB per side (1,015 ``.pt`` files; torch 2.13.0+cpu, msprobe 26.2.0; about 135 s per side). Keep OUT
outside the repository (e.g. /tmp/tmode). Each run is a process of its own (msprobe's debugger is a singleton);
this script starts them.

``--npy-from PAIR`` writes instead the pair PAIR made before with every tensor file as ``.npy``, the files msprobe's
MindSpore dumps hold (``np.save`` of each tensor; dump.json's ``data_name`` renamed to match; construct.json and
stack.json copied): the same tensors, to time the ``.npy`` reading against the ``.pt`` one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

_RUN = r"""
import json, os, sys
import torch
import torch.nn as nn
import torch.nn.functional as F
from msprobe.pytorch import PrecisionDebugger, seed_all

out, variant, layers, d, batch, seq = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
vocab = 1000


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model=d, nhead=max(d // 64, 1), dim_feedforward=4 * d,
                                           dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.norm(self.encoder(self.embedding(tokens) + self.pos)))


seed_all(1234)
os.makedirs(out, exist_ok=True)
config = {"task": "tensor", "dump_path": os.path.abspath(out), "rank": [], "step": [], "level": "mix",
          "async_dump": False, "tensor": {"scope": [], "list": [], "data_mode": ["all"]}}
config_path = out.rstrip("/") + ".msprobe_config.json"  # next to the dump: msprobe wants nothing else inside
with open(config_path, "w") as f:
    json.dump(config, f)
debugger = PrecisionDebugger(config_path=config_path)
torch.manual_seed(1234)
model = LM()
tokens = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(7))
labels = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(8))
if variant == "perturb":
    with torch.no_grad():
        weight = model.encoder.layers[1].linear1.weight
        weight.add_(0.05 * torch.randn(weight.shape, generator=torch.Generator().manual_seed(99)))
model.train()
debugger.start(model, rank_id=0)
loss = F.cross_entropy(model(tokens).reshape(-1, vocab), labels.reshape(-1))
loss.backward()
debugger.stop()
debugger.step()
print("loss", float(loss))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="folder for the two runs (outside the repository)")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--d", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--npy-from", metavar="PAIR", help="write PAIR's runs with .npy tensor files instead")
    args = parser.parse_args()
    if args.npy_from:
        for side in ("bench", "npu"):
            _npy_copy(os.path.join(args.npy_from, side), os.path.join(args.out, side))
        return 0
    for side, variant in (("bench", "baseline"), ("npu", "perturb")):
        folder = os.path.join(args.out, side)
        if os.path.exists(folder):
            print(f"{folder}: exists, kept")
            continue
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", _RUN, folder, variant, str(args.layers), str(args.d),
                        str(args.batch), str(args.seq)], check=True)
        files = sizes = 0
        for root, _dirs, names in os.walk(folder):
            files += sum(name.endswith(".pt") for name in names)
            sizes += sum(os.path.getsize(os.path.join(root, name)) for name in names)
        print(json.dumps({"run": folder, "seconds": round(time.perf_counter() - start, 1), "pt_files": files,
                          "gigabytes": round(sizes / 1e9, 2)}))
    return 0


def _npy_copy(source: str, folder: str) -> None:
    """The run at `source` written to `folder` with its ``.pt`` tensor files as ``.npy`` (torch is imported here only:
    a Python with torch runs this)."""
    import numpy as np
    import torch

    if os.path.exists(folder):
        print(f"{folder}: exists, kept")
        return
    start, files, sizes = time.perf_counter(), 0, 0
    for root, _dirs, names in os.walk(source):
        target = os.path.join(folder, os.path.relpath(root, source))
        os.makedirs(target, exist_ok=True)
        for name in names:
            path = os.path.join(root, name)
            if name.endswith(".pt"):
                array = torch.load(path, weights_only=True).numpy()
                np.save(os.path.join(target, name[:-3] + ".npy"), array)
                files, sizes = files + 1, sizes + array.nbytes
            elif name == "dump.json":
                with open(path, encoding="utf-8") as f:
                    doc = json.load(f)
                _rename_data(doc)
                with open(os.path.join(target, name), "w", encoding="utf-8") as f:
                    json.dump(doc, f, indent=1)
            else:
                shutil.copy2(path, target)
    print(json.dumps({"run": folder, "seconds": round(time.perf_counter() - start, 1), "npy_files": files,
                      "gigabytes": round(sizes / 1e9, 2)}))


def _rename_data(value: object) -> None:
    """Every ``data_name`` ending in ``.pt`` under `value` renamed to end in ``.npy``, in place."""
    if isinstance(value, dict):
        name = value.get("data_name")
        if isinstance(name, str) and name.endswith(".pt"):
            value["data_name"] = name[:-3] + ".npy"
        for item in value.values():
            _rename_data(item)
    elif isinstance(value, list):
        for item in value:
            _rename_data(item)


if __name__ == "__main__":
    sys.exit(main())
