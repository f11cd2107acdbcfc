"""Dump a *reference* run for `graphcmp compare --reference`: the run of `dump28.py` with every F.linear computed
with another reduction order, as another device's kernel does (a split-K matmul).

    python reference28.py --model llama --precision fp16 --micro 4 --out DIR     # options of dump28.py

On CPU a run at the npu run's precision without the bug is bit-identical to the npu run without it: too easy a
reference. Here each F.linear sums its inner dimension in two halves (``x[..., :k/2] @ w[:, :k/2].T`` plus the rest,
each half rounded to the autocast dtype, then added), so the reference rounds differently at every linear and the
noise it shows is a rounding noise of its own, as a GPU run at the npu's precision would show; F.conv2d likewise sums
its input channels in two halves. The split runs inside the node msprobe dumps for the call (builtins only: no extra
nodes, names and counters those of a normal run).
Needs models28.py and dump28.py of this folder, torch 2.13.0 (CPU) and mindstudio-probe 26.2.0 (see README.md).
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dump28
import models28


def split_k(linear):
    """`linear` computed as the sum of its two halves along the inner dimension."""
    vf = torch._C._VariableFunctions  # builtins: msprobe does not wrap them

    def split(input, weight, bias=None):
        k = weight.shape[-1]
        h = k // 2
        if h == 0:
            return linear(input, weight, bias)
        low = linear(vf.narrow(input, -1, 0, h), vf.narrow(weight, -1, 0, h))
        high = linear(vf.narrow(input, -1, h, k - h), vf.narrow(weight, -1, h, k - h), bias)
        return vf.add(low, high)

    return split


def split_channels(conv):
    """`conv` (groups=1) computed as the sum of its two halves along the input channels."""
    vf = torch._C._VariableFunctions

    def split(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        c = weight.shape[1]
        h = c // 2
        if groups != 1 or h == 0:
            return conv(input, weight, bias, stride, padding, dilation, groups)
        low = conv(vf.narrow(input, 1, 0, h), vf.narrow(weight, 1, 0, h), None, stride, padding, dilation)
        high = conv(vf.narrow(input, 1, h, c - h), vf.narrow(weight, 1, h, c - h), bias, stride, padding, dilation)
        return vf.add(low, high)

    return split


if __name__ == "__main__":
    models28.install_hooks()  # F.linear -> models28._linear, which calls models28._ORIG_LINEAR at call time
    models28._ORIG_LINEAR = split_k(models28._ORIG_LINEAR)
    torch.nn.functional.conv2d = split_channels(torch.nn.functional.conv2d)  # before msprobe wraps it
    dump28.main()
