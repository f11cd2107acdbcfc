"""Copy the small development cases (under --limit bytes once their JSON is written compact) into tests/data/cases28.

    python copy_small28.py --root /work/cases28 [--limit 1000000] [--dest tests/data/cases28]

Each copied case keeps npu/ and bench/ (every stepK/rankN with dump.json, construct.json, stack.json re-written
without indentation: the same JSON values) and TRUTH.json. Needs no torch.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ("dump.json", "construct.json", "stack.json")


def compact_files(case: str):
    """(relative path, compact text) of every kept file of a case."""
    for side in ("npu", "bench"):
        base = os.path.join(case, side)
        for dirpath, _, files in sorted(os.walk(base)):
            for f in sorted(files):
                if f in FILES:
                    with open(os.path.join(dirpath, f)) as fh:
                        text = json.dumps(json.load(fh), separators=(",", ":"))
                    yield os.path.relpath(os.path.join(dirpath, f), case), text
    with open(os.path.join(case, "TRUTH.json")) as fh:
        yield "TRUTH.json", fh.read()


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
        files = list(compact_files(case))
        size = sum(len(t) for _, t in files)
        out = os.path.join(a.dest, name)
        shutil.rmtree(out, ignore_errors=True)
        if size > a.limit:
            print(f"{name}: {size / 1e6:.2f} MB, not copied")
            continue
        for rel, text in files:
            os.makedirs(os.path.dirname(os.path.join(out, rel)), exist_ok=True)
            with open(os.path.join(out, rel), "w") as fh:
                fh.write(text)
        print(f"{name}: {size / 1e6:.2f} MB copied")
    return 0


if __name__ == "__main__":
    sys.exit(main())
