"""Parsing msprobe node ids into kind, operator, direction and call counter.

PyTorch ids: ``Module.<path>.<Class>.<forward|backward>.<n>``, ``Module.<path>.<Class>.parameters_grad[.<n>]``,
``<Api>.<name>.<n>.<forward|backward>`` (Api = Functional, Tensor, Torch, Distributed, NPU, Aten, VF ...).
MindSpore ids use ``Cell`` for modules and ``Primitive.<attr>.<Class>``, ``Mint``, ``Jit`` ... for APIs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from sys import intern

from graphcmp.core.records import Direction, NodeKind

__all__ = ["ARGUMENT_NAMES", "MODULE_PREFIXES", "argument_name", "parse_node_id", "parse_node_ids", "strip_counter"]

MODULE_PREFIXES = ("Module", "Cell")

ARGUMENT_NAMES: dict[str, tuple[str, ...]] = {
    "linear": ("input", "weight", "bias"),
    "bilinear": ("input1", "input2", "weight", "bias"),
    "conv1d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv2d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv3d": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv_transpose1d": ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "conv_transpose2d": ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "conv_transpose3d": ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
    "embedding": ("input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias", "eps"),
    "rms_norm": ("input", "normalized_shape", "weight", "eps"),
    "group_norm": ("input", "num_groups", "weight", "bias", "eps"),
    "batch_norm": ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"),
    "instance_norm": ("input", "running_mean", "running_var", "weight", "bias", "use_input_stats", "momentum",
                      "eps"),
    "scaled_dot_product_attention": ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"),
    "softmax": ("input", "dim"), "log_softmax": ("input", "dim"),
    "dropout": ("input", "p", "training", "inplace"),
    "matmul": ("input", "other"), "mm": ("input", "mat2"), "bmm": ("input", "mat2"),
    "addmm": ("input", "mat1", "mat2"), "baddbmm": ("input", "batch1", "batch2"),
    "cross_entropy": ("input", "target", "weight"),
    "MatMul": ("x1", "x2"), "BatchMatMul": ("x1", "x2"), "BiasAdd": ("input_x", "bias"),
    "Dense": ("x", "w", "b"), "Conv2D": ("x", "weight"), "LayerNorm": ("input_x", "gamma", "beta"),
}
"""Positional argument names of common API calls (PyTorch's functional signatures, MindSpore's primitive
inputs), so a dump's ``input.1`` of ``Functional.linear`` reads as ``weight``. Rules as data: a call not listed
keeps its slot number."""

_MODULE = re.compile(r"^(Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.(?P<dir>forward|backward)\.(?P<n>\d+)$")
_PARAM_GRAD = re.compile(r"^(Module|Cell)\.(?P<path>.+)\.(?P<cls>[^.]+)\.parameters_grad(?:\.(?P<n>\d+))?$")
_API = re.compile(r"^(?P<api>[A-Za-z_][\w]*)\.(?P<name>.+)\.(?P<n>\d+)\.(?P<dir>forward|backward)$")
_DIRECTION = {"forward": Direction.FORWARD, "backward": Direction.BACKWARD}
_BACKWARD = int(Direction.BACKWARD)


def argument_name(op: str, slot: str) -> str:
    """The name of input `slot` of an API call of `op` (``weight`` for slot ``1`` of ``linear``); a named slot
    (a keyword argument) as it is, an unknown one as ``input.<slot>``.

    >>> argument_name("linear", "1"), argument_name("layer_norm", "eps"), argument_name("gelu", "0")
    ('weight', 'eps', 'input.0')
    """
    if not slot.isdigit():
        return slot
    names = ARGUMENT_NAMES.get(op, ())
    k = int(slot)
    return names[k] if k < len(names) else f"input.{slot}"


def parse_node_id(node_id: str) -> tuple[NodeKind, str, Direction, int]:
    """Return (kind, op, direction, call counter) of an msprobe node id.

    The op is the class name for modules and the API's own name for API calls (the last
    dotted part, so ``Primitive.matmul.MatMul`` gives ``MatMul``). Unknown shapes are API nodes
    named by their id, with direction NONE and counter -1. Not cached: a run's ids are parsed once,
    and a cache would keep every id of every run read (a million-node run: ~150 MB).

    Examples
    --------
    >>> parse_node_id("Module.encoder.layers.0.linear1.Linear.forward.0")
    (<NodeKind.MODULE: 1>, 'Linear', <Direction.FORWARD: 0>, 0)
    >>> parse_node_id("Functional.linear.3.backward")
    (<NodeKind.API: 2>, 'linear', <Direction.BACKWARD: 1>, 3)
    >>> parse_node_id("Cell.fc1.Dense.parameters_grad.0")
    (<NodeKind.PARAM_GRAD: 3>, 'Dense', <Direction.BACKWARD: 1>, 0)
    """
    counters: list[int] = []
    (kind,), (op,), (direction,) = parse_node_ids((node_id,), counters=counters)
    return _KINDS[kind], op, _DIRECTIONS[direction], counters[0]


_KIND_API, _KIND_MODULE, _KIND_PARAM_GRAD = int(NodeKind.API), int(NodeKind.MODULE), int(NodeKind.PARAM_GRAD)
_DIRECTION_CODE = {"forward": int(Direction.FORWARD), "backward": int(Direction.BACKWARD)}
_KINDS = {int(kind): kind for kind in NodeKind}
_DIRECTIONS = {int(direction): direction for direction in Direction}


def parse_node_ids(node_ids: Iterable[str], *,
                   counters: list[int] | None = None) -> tuple[list[int], list[str], list[int]]:
    """`parse_node_id` of many ids as columns: (kind codes, ops, direction codes); each id's call counter is
    appended to `counters` when given.

    A plain ASCII module, parameter-gradient or API call id is split by one ``rsplit`` (several times faster than
    the regular expressions, which decide anything else): ``<api>.<name>.<n>.<dir>``,
    ``<Module>.<path>.<cls>.<dir>.<n>``, ``<Module>.<path>.<cls>.parameters_grad.<n>``, the op the third part from
    the end in all three. The rules run in this loop, not in a function per id (a call and a tuple per id cost a
    third of it), and an API call's prefix is checked once per distinct prefix.

    >>> parse_node_ids(["Functional.linear.3.backward", "Module.fc.Linear.forward.0", "odd"])
    ([2, 1, 2], ['linear', 'Linear', 'odd'], [1, 0, -1])
    """
    kinds: list[int] = []
    ops: list[str] = []
    directions: list[int] = []
    api_heads: dict[str, bool] = {}
    for node_id in node_ids:
        parts = node_id.rsplit(".", 3)
        kind = -1
        if len(parts) == 4 and parts[1] and node_id.isascii() and "\n" not in node_id:
            head, op, third, last = parts
            direction = _DIRECTION_CODE.get(last)
            if direction is not None:
                if third.isdigit() and ((known := api_heads.get(head)) or (
                        known is None and api_heads.setdefault(head, head.partition(".")[0].isidentifier()))):
                    kind, counter = _KIND_API, third
            elif last.isdigit() and node_id.startswith(("Module.", "Cell.")) and head.partition(".")[2] and (
                    (direction := _DIRECTION_CODE.get(third)) is not None or third == "parameters_grad"):
                kind = _KIND_MODULE if direction is not None else _KIND_PARAM_GRAD
                direction = _BACKWARD if direction is None else direction
                counter = last
        if kind < 0:
            found, op, found_direction, counter = _parse_by_expressions(node_id)
            kind, direction = int(found), int(found_direction)
        kinds.append(kind)
        ops.append(op)
        directions.append(direction)
        if counters is not None:
            counters.append(int(counter))
    return kinds, list(map(intern, ops)), directions  # one string per op: less memory


def _parse_by_expressions(node_id: str) -> tuple[NodeKind, str, Direction, int]:
    m = _MODULE.match(node_id)
    if m:
        return NodeKind.MODULE, m["cls"], _DIRECTION[m["dir"]], int(m["n"])
    m = _PARAM_GRAD.match(node_id)
    if m:
        return NodeKind.PARAM_GRAD, m["cls"], Direction.BACKWARD, int(m["n"] or 0)
    m = _API.match(node_id)
    if m:
        return NodeKind.API, m["name"].rsplit(".", 1)[-1], _DIRECTION[m["dir"]], int(m["n"])
    return NodeKind.API, node_id, Direction.NONE, -1


@cache
def strip_counter(node_id: str) -> str:
    """The id without its call counter: the name a call keeps when earlier calls shift counters.

    >>> strip_counter("Functional.linear.3.forward")
    'Functional.linear.forward'
    >>> strip_counter("Module.fc.Linear.forward.2")
    'Module.fc.Linear.forward'
    """
    m = _API.match(node_id)
    if m:
        return f"{m['api']}.{m['name']}.{m['dir']}"
    m = _MODULE.match(node_id)
    if m:
        return node_id[: m.start("n") - 1]
    m = _PARAM_GRAD.match(node_id)
    if m and m["n"] is not None:
        return node_id[: m.start("n") - 1]
    return node_id
