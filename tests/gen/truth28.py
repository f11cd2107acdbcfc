"""Ground truth for the development cases: where a planted bug first shows, found by comparing the run with the bug
against a run WITHOUT the bug at the SAME precision and layout (CPU runs are deterministic, so every difference
between the two is caused by the bug).

    python truth28.py first BUG_RUN NOBUG_RUN            print the first differing dump.json entry per step and rank
    (make_cases28.py calls the functions below and writes TRUTH.json)

Definitions
  order        dump.json's entry order (= execution order: msprobe writes an entry when the call returns)
  micro-step   entries from one start of the model's first module (`Module.<first>.forward.K`) to the next
  direction    the pass the entry ran in: "forward" until the first backward entry of its micro-step, then "backward"
               (ops run inside a custom autograd Function's backward or a checkpoint recomputation are named
               `.forward` by msprobe but ran in the backward pass); `name_direction` is the name's own suffix
  differs      any input/output/parameter leaf differs (dtype, shape, Max, Min, Mean, Norm, value) - exact
No torch needed: only the JSON files.
"""
from __future__ import annotations

import json
import os
import re
import sys


def load(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def entries(run: str, step: int, rank: int) -> dict:
    return load(os.path.join(run, f"step{step}", f"rank{rank}", "dump.json"))["data"]


def construct(run: str, step: int, rank: int) -> dict:
    return load(os.path.join(run, f"step{step}", f"rank{rank}", "construct.json"))


def ranks_of(run: str, step: int = 0) -> list[int]:
    names = os.listdir(os.path.join(run, f"step{step}"))
    return sorted(int(n[4:]) for n in names if re.fullmatch(r"rank\d+", n))


def steps_of(run: str) -> list[int]:
    return sorted(int(n[4:]) for n in os.listdir(run) if re.fullmatch(r"step\d+", n))


def positions(keys: list[str]) -> list[tuple[int, str]]:
    """(micro-step, direction) of every key, in order."""
    first_mod = next((k for k in keys if k.startswith("Module.") and ".forward." in k), None)
    stem = first_mod.rsplit(".", 1)[0] + "." if first_mod else None
    out, micro, in_bwd = [], -1, False
    for k in keys:
        if stem and k.startswith(stem) and k[len(stem):].isdigit():
            micro, in_bwd = micro + 1, False
        if k.endswith(".backward") or ".backward." in k or ".parameters_grad" in k:
            in_bwd = True
        out.append((max(micro, 0), "backward" if in_bwd else "forward"))
    return out


def leaves(v, prefix=""):
    """Flatten an entry into {path: leaf dict}."""
    if isinstance(v, dict) and ("type" in v or "dtype" in v):
        yield prefix, v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from leaves(x, f"{prefix}.{k}" if prefix else k)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from leaves(x, f"{prefix}.{i}")
    elif v is not None:
        yield prefix, {"value": v}


STAT_KEYS = ("type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "value")


def diff_fields(a: dict, b: dict) -> list[str]:
    la, lb = dict(leaves(a)), dict(leaves(b))
    out = []
    for k in sorted(set(la) | set(lb)):
        x, y = la.get(k), lb.get(k)
        if x is None or y is None or any(_ne(x.get(s), y.get(s)) for s in STAT_KEYS):
            out.append(k)
    return out


def _ne(x, y) -> bool:
    if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
        return False  # NaN in both
    return x != y


def parent(cons: dict, node: str) -> str | None:
    """The enclosing module of an API node (construct.json gives each node's parent)."""
    p = cons.get(node)
    while p and not p.startswith("Module."):
        p = cons.get(p)
    return p


def first_diff(bug_run: str, ref_run: str, step: int, rank: int) -> dict | None:
    """The first entry (dump.json order) that differs between the two runs, or None when they are identical."""
    a, b = entries(bug_run, step, rank), entries(ref_run, step, rank)
    keys = list(a)
    if keys != list(b):
        raise SystemExit(f"{bug_run} and {ref_run} step {step} rank {rank}: other entries - not the same code path")
    pos = positions(keys)
    for i, k in enumerate(keys):
        f = diff_fields(a[k], b[k])
        if f:
            return {"node": k, "module": parent(construct(bug_run, step, rank), k), "rank": rank, "step": step,
                    "micro_step": pos[i][0], "direction": pos[i][1],
                    "name_direction": "backward" if k.endswith(".backward") else "forward", "index": i,
                    "fields": f[:6]}
    return None


VIEW_OPS = ("t", "transpose", "view", "reshape", "contiguous", "permute", "unbind", "chunk", "split", "expand",
            "__getitem__", "to", "float", "type_as")


def first_compute(bug_run: str, ref_run: str, first: dict) -> str | None:
    """When the first difference is a view of the bug's tensor (e.g. `Tensor.t` of a perturbed weight), the first
    differing computing call after it in the same module (e.g. the matmul that uses the weight)."""
    if first["node"].split(".")[1] not in VIEW_OPS:
        return None
    a, b = entries(bug_run, first["step"], first["rank"]), entries(ref_run, first["step"], first["rank"])
    cons = construct(bug_run, first["step"], first["rank"])
    for k in list(a)[first["index"] + 1:]:
        if parent(cons, k) != first["module"]:
            continue
        if k.split(".")[1] not in VIEW_OPS and diff_fields(a[k], b[k]):
            return k
    return None


def first_diff_job(bug_run: str, ref_run: str) -> dict | None:
    """The first difference over the job: earliest step; then, of the ranks whose first difference is a call of
    their own (not a `Distributed.*` call, whose output came from another rank: a pipeline receive, an all_reduce),
    the earliest position (ties: lowest rank); positions of different ranks are only compared among those."""
    for step in steps_of(bug_run):
        found = [d for r in ranks_of(bug_run, step) if (d := first_diff(bug_run, ref_run, step, r))]
        own = [d for d in found if not d["node"].startswith("Distributed.")]
        if found:
            return min(own or found, key=lambda d: (d["index"], d["rank"]))
    return None


def all_diffs(bug_run: str, ref_run: str) -> list[dict]:
    """Every (step, rank)'s first difference: which ranks see the bug at all and where first."""
    out = []
    for step in steps_of(bug_run):
        for r in ranks_of(bug_run, step):
            d = first_diff(bug_run, ref_run, step, r)
            if d:
                out.append(d)
    return out


def calls_using_param(bug_run: str, ref_run: str, shape: list[int]) -> list[dict]:
    """Every forward API call that takes the perturbed parameter (an input leaf of the parameter's shape that differs
    from the no-bug run; activations have other shapes in these models), the backward entry of the same call and the
    parameter-gradient entries of the modules that make those calls."""
    out = []
    for step in steps_of(bug_run):
        for r in ranks_of(bug_run, step):
            a, b = entries(bug_run, step, r), entries(ref_run, step, r)
            keys = list(a)
            pos = positions(keys)
            cons = construct(bug_run, step, r)
            fwd_hits = set()
            for i, k in enumerate(keys):
                if not k.endswith(".forward"):
                    continue
                la, lb = dict(leaves(a[k].get("input_args", []))), dict(leaves(b[k].get("input_args", [])))
                if any(v.get("shape") == shape and diff_fields(v, lb.get(p, {})) for p, v in la.items()):
                    fwd_hits.add(k[: -len(".forward")])
                    out.append({"node": k, "module": parent(cons, k), "rank": r, "step": step,
                                "micro_step": pos[i][0], "direction": pos[i][1], "index": i})
            mine = [c for c in out if c["step"] == step and c["rank"] == r and c["module"]]
            modules = {c["module"].rsplit(".", 2)[0] for c in mine}
            for i, k in enumerate(keys):
                grad = k.startswith("Module.") and ".parameters_grad" in k and k.split(".parameters_grad")[0] in modules
                if (k.endswith(".backward") and k[: -len(".backward")] in fwd_hits) or grad:
                    out.append({"node": k, "module": parent(cons, k), "rank": r, "step": step,
                                "micro_step": pos[i][0], "direction": pos[i][1], "index": i})
    return sorted(out, key=lambda d: (d["step"], d["rank"], d["index"]))


def main() -> int:
    if len(sys.argv) != 4 or sys.argv[1] != "first":
        print(__doc__)
        return 2
    for d in all_diffs(sys.argv[2], sys.argv[3]):
        print(json.dumps(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
