#!/usr/bin/env python3
"""Say whether two graphcmp results (npz) hold the same comparison, member by member.

Usage::

    python bench/same_results.py RESULT_A.npz RESULT_B.npz

Every member of the two zip containers is compared byte for byte, except ``document.json``, which is compared
as JSON with its ``created`` time left out (two runs of the same comparison differ in nothing else). Prints the
members that differ, exit status 0 when none does. For checking that a change of speed or memory leaves the
answer and every column as they were (bench/README.md).
"""

from __future__ import annotations

import json
import sys
import zipfile


def differing_members(a: str, b: str) -> list[str]:
    """Names of the members of `a` and `b` that differ (or that only one of them has)."""
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        names_a, names_b = set(za.namelist()), set(zb.namelist())
        differ = sorted(names_a ^ names_b)
        for name in sorted(names_a & names_b):
            left, right = za.read(name), zb.read(name)
            if name == "document.json":
                left, right = (_without_created(json.loads(text)) for text in (left, right))
            if left != right:
                differ.append(name)
    return differ


def _without_created(document: dict) -> dict:
    document.pop("created", None)
    return document


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    differ = differing_members(*args)
    for name in differ:
        print(f"differs: {name}")
    print("same" if not differ else f"{len(differ)} members differ")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
