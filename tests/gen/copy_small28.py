"""Copy the small development cases (under --limit bytes once their JSON is written compact) into tests/data/cases28.

    python copy_small28.py --root /work/cases28 [--limit 1000000] [--dest tests/data/cases28]

Each copied case keeps npu/ and bench/ (every stepK/rankN with dump.json, construct.json, stack.json re-written
without indentation: the same JSON values) and TRUTH.json. A case over the limit is copied without stack.json, or
else (one step, several micro-steps) cut after the truth's micro-step (micro-step 0 for a clean case) without
stack.json; TRUTH.json then says so in "copy". Needs no torch.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import truth28  # noqa: E402

FILES = ("dump.json", "construct.json", "stack.json")


def compact_files(case: str, stack: bool = True, last_micro: int | None = None):
    """(relative path, compact text) of every kept file of a case: without stack.json when `stack` is false, only the
    entries of micro-steps 0..last_micro (truth28.positions) in dump.json and construct.json when it is given."""
    for side in ("npu", "bench"):
        base = os.path.join(case, side)
        for dirpath, _, files in sorted(os.walk(base)):
            docs = {}
            for f in FILES:
                if f in files and (stack or f != "stack.json"):
                    with open(os.path.join(dirpath, f)) as fh:
                        docs[f] = json.load(fh)
            if last_micro is not None and "dump.json" in docs:
                data = docs["dump.json"]["data"]
                keep = {k for k, (m, _) in zip(data, truth28.positions(list(data))) if m <= last_micro}
                docs["dump.json"]["data"] = {k: v for k, v in data.items() if k in keep}
                construct = docs["construct.json"]
                kept = set(keep)
                for k in keep:  # a kept call's ancestors stay, dump entries or not (a module without data)
                    parent = construct.get(k)
                    while parent is not None and parent not in kept:
                        kept.add(parent)
                        parent = construct.get(parent)
                docs["construct.json"] = {k: v for k, v in construct.items() if k in kept}
            for f, doc in docs.items():
                yield os.path.relpath(os.path.join(dirpath, f), case), json.dumps(doc, separators=(",", ":"))


def truth_text(case: str, stack: bool, last_micro: int | None) -> str:
    with open(os.path.join(case, "TRUTH.json")) as fh:
        t = json.load(fh)
    if last_micro is not None:
        t["micro_steps"] = last_micro + 1
        t["ranks_affected"] = [e for e in t.get("ranks_affected", []) if e["micro_step"] <= last_micro]
        if "only_origins" in t:
            t["only_origins"] = [c for c in t["only_origins"] if c["micro_step"] <= last_micro]
    if last_micro is not None or not stack:
        cut = f"cut to micro-steps 0..{last_micro} (dump.json and construct.json), " if last_micro is not None else ""
        t["copy"] = cut + ("no stack.json" if not stack else "stack.json as dumped")
    return json.dumps(t, indent=1)


def fits(case: str, limit: int) -> tuple[list, str] | None:
    """The first of: everything, without stack.json, cut after the truth's micro-step (micro-step 0 for a clean run)
    that fits."""
    with open(os.path.join(case, "TRUTH.json")) as fh:
        t = json.load(fh)
    tries: list[tuple[bool, int | None]] = [(True, None), (False, None)]
    last = t["truth"]["micro_step"] if t["truth"] else 0
    if t.get("steps", 1) == 1 and t.get("micro_steps", 1) > last + 1:
        tries.append((False, last))
    for stack, cut in tries:
        files = [*compact_files(case, stack, cut), ("TRUTH.json", truth_text(case, stack, cut))]
        if sum(len(x) for _, x in files) <= limit:
            return files, ("as dumped" if stack else "no stack.json") + (f", micro-steps 0..{cut}" if cut is not None
                                                                        else "")
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/work/cases28")
    ap.add_argument("--limit", type=int, default=1_000_000)
    ap.add_argument("--dest", default=os.path.join(os.path.dirname(HERE), "data", "cases28"))
    a = ap.parse_args()
    for name in sorted(os.listdir(a.root)):
        case = os.path.join(a.root, name)
        if not os.path.isfile(os.path.join(case, "TRUTH.json")):
            continue
        out = os.path.join(a.dest, name)
        shutil.rmtree(out, ignore_errors=True)
        got = fits(case, a.limit)
        if got is None:
            print(f"{name}: over {a.limit / 1e6:.2f} MB even cut, not copied")
            continue
        files, how = got
        for rel, text in files:
            os.makedirs(os.path.dirname(os.path.join(out, rel)), exist_ok=True)
            with open(os.path.join(out, rel), "w") as fh:
                fh.write(text)
        print(f"{name}: {sum(len(x) for _, x in files) / 1e6:.2f} MB copied ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
