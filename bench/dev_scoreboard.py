#!/usr/bin/env python3
"""Development scoreboard: run a graphcmp command on every case under a root and say where its answer is right.

    python bench/dev_scoreboard.py [--root /work/cases28] [--graphcmp .venv/bin/graphcmp] [--only CASE ...]
                                   [--option=--fuzzy ...] [--keep DIR] [--json]

A case is a folder with `npu/`, `bench/` (msprobe step/rank layouts) and `TRUTH.json` (written by
`tests/gen/make_cases28.py`; tests/data/cases28 holds small ones), or an Ascend raw-dump case whose TRUTH.json names
its `dump_dir`, `golden_dir` and `fusion_rule` and `truth.first_divergent_npu_op` (the shared data's form, written
by `tests/gen/make_ascend29.py`; compared as `graphcmp compare DUMP GOLDEN --fusion-rule RULE`).
Each is compared with the DEFAULT options
(`graphcmp compare NPU BENCH -o DIR -q`: no `--fuzzy`, parallel layouts detected by graphcmp; a case's own
`options` in TRUTH.json, such as the mapping options of a MindSpore-vs-PyTorch case, and `--option` add options),
then `graphcmp diverge DIR --json` gives the origins and `graphcmp diverge RESULT --json` on each result file in DIR
gives the noise level.

Right means:
  no truth (a clean run)   no origin and `compare` exit 0
  a truth                  `compare` exit 1 and the first origin names the truth op or its module (`truth_ids`; a
                           merged pipeline job's origin by its id in its rank's own dump too, `source_id`), on a
                           truth rank (`truth_ranks`; an origin without a rank is wrong unless its `ranks` list holds
                           one), at the truth's step, and at its micro-step when the answer gives one
  `only_origins` given     also every origin is one of those calls (op or module), e.g. a perturbed weight's calls
The table: right?, the answer (node, rank, step, micro-step, direction), the truth, the first origin's margin (x the
noise allowed), the largest measured noise level over the result files (in unit roundoffs), the number of origins,
compare's exit code and the wall time of compare + diverge; a note (not judged) when the truth ran in another pass
than the answer's direction says. Exit 0 when every case is right.
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(cmd: list[str]) -> tuple[int, str, str]:
    cmd = [*shlex.split(cmd[0]), *cmd[1:]]  # the graphcmp command may be several words ("python -m graphcmp")
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def load_cases(root: Path, only: list[str] | None) -> list[tuple[str, Path, dict]]:
    out = []
    for truth in sorted(root.glob("*/TRUTH.json")):
        name = truth.parent.name
        if only and name not in only:
            continue
        out.append((name, truth.parent, ascend_truth(json.loads(truth.read_text()))))
    return out


def ascend_truth(truth: dict) -> dict:
    """An Ascend raw-dump case's TRUTH (``dump_dir``, ``golden_dir``, ``fusion_rule``, ``truth`` with
    ``first_divergent_npu_op``) in the form the judge reads; other TRUTH files as they are. The origin is the NPU op
    (one run: rank 0, step 0, micro-step 0)."""
    if "dump_dir" not in truth:
        return truth
    op = (truth.get("truth") or {}).get("first_divergent_npu_op")
    return {**truth, "kind": truth.get("kind", "ascend"), "npu": truth["dump_dir"], "bench": truth["golden_dir"],
            "options": [*truth.get("options", []), "--fusion-rule", truth["fusion_rule"]],
            "truth": {"node": op, "rank": 0, "step": 0, "micro_step": 0, "direction": "forward"} if op else None,
            "truth_ids": [op] if op else [], "truth_ranks": [0]}


def first_origin(div: dict) -> dict | None:
    for key in ("origin", "first"):
        v = div.get(key)
        if isinstance(v, dict) and v.get("node"):
            return v
    return None


def noise_of(gc: str, out: Path) -> tuple[float | None, float | None]:
    """The largest measured noise level (and in unit roundoffs) over the result files of a comparison folder."""
    level = units = None
    files = [f for f in sorted(out.glob("*.npz")) + sorted(out.glob("*.json")) if f.name != "index.json"] \
        if out.is_dir() else [out]
    for f in files:
        _, so, _ = run([gc, "diverge", str(f), "--json"])
        try:
            noise = json.loads(so).get("noise") or {}
        except ValueError:
            continue
        lv = noise.get("noise_level")
        if isinstance(lv, (int, float)) and (level is None or lv > level):
            level, units = lv, noise.get("noise_level_units")
    return level, units


def names(calls: list[dict]) -> set[str]:
    return {x for c in calls for x in (c.get("node"), c.get("module")) if x}


def judge(truth: dict, origin: dict | None, origins: list[dict], exit_code: int) -> tuple[bool, str]:
    """(right, why not) for one answer."""
    t = truth.get("truth")
    if t is None:
        if origin is not None:
            return False, "origin in a clean run"
        return (exit_code == 0), ("" if exit_code == 0 else f"exit {exit_code} in a clean run")
    if origin is None:
        return False, "no origin"
    why = []
    if exit_code != 1:
        why.append(f"exit {exit_code}")
    if not {origin.get("node"), origin.get("module"), origin.get("source_id")} & set(truth["truth_ids"]):
        why.append("other op")
    ranks = set(truth.get("truth_ranks") or [t["rank"]])
    got_ranks = {origin.get("rank")} | set(origin.get("ranks") or [])
    if not ranks & got_ranks:
        why.append(f"rank {origin.get('rank')}")
    if origin.get("step") not in (None, t["step"]) or origin.get("step") is None:
        why.append(f"step {origin.get('step')}")
    if origin.get("micro_step") is not None and origin.get("micro_step") != t["micro_step"]:
        why.append(f"micro-step {origin.get('micro_step')}")
    if truth.get("only_origins"):
        allowed = names(truth["only_origins"])
        extra = [o for o in origins if not {o.get("node"), o.get("module")} & allowed]
        if extra:
            why.append(f"{len(extra)} origins not the weight's calls")
    return not why, ", ".join(why)


def pass_note(truth: dict, origin: dict | None) -> str:
    """Not judged: the pass the truth ran in when the answer's direction says otherwise (an op of a custom Function's
    backward or of a recomputation is named `.forward` but runs in the backward pass)."""
    t = truth.get("truth")
    if not t or not origin or not origin.get("direction") or origin.get("node") != t["node"]:
        return ""
    if origin["direction"] != t["direction"]:
        return f"ran in the {t['direction']} pass, the answer says {origin['direction']}"
    return ""


def score(name: str, case: Path, truth: dict, gc: str, work: Path, options: list[str]) -> dict:
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.monotonic()
    given = [str(case / o) if k and given_path(truth, k) else o for k, o in enumerate(truth.get("options", []))]
    rc, _, err = run([gc, "compare", str(case / truth.get("npu", "npu")), str(case / truth.get("bench", "bench")),
                      *given, *options, "-o", str(out), "-q"])
    row = {"case": name, "kind": truth.get("kind"), "exit": rc, "truth": truth.get("truth"), "answer": None,
           "origins": None, "margin": None, "noise_level": None, "noise_units": None, "right": False, "why": "",
           "note": ""}
    if rc > 1:
        row["why"] = "compare failed: " + (err.strip().splitlines() or ["?"])[-1][:120]
        row["seconds"] = round(time.monotonic() - t0, 1)
        return row
    drc, so, derr = run([gc, "diverge", str(out), "--json"])
    row["seconds"] = round(time.monotonic() - t0, 1)
    try:
        div = json.loads(so)
    except ValueError:
        row["why"] = f"diverge printed no JSON (exit {drc}): " + (derr.strip().splitlines() or ["?"])[-1][:100]
        return row
    origin = first_origin(div)
    origins = div.get("origins") or ([origin] if origin else [])
    row["origins"] = len(origins)
    if origin:
        row["answer"] = {k: origin.get(k) for k in ("node", "module", "rank", "ranks", "step", "micro_step",
                                                    "direction", "cause")}
        row["margin"] = origin.get("margin")
    row["noise_level"], row["noise_units"] = noise_of(gc, out)
    row["right"], row["why"] = judge(truth, origin, origins, rc)
    row["note"] = pass_note(truth, origin)
    return row


def given_path(truth: dict, k: int) -> bool:
    """Whether option `k` of a case's options is a path inside the case folder (the value of ``--fusion-rule``)."""
    return truth["options"][k - 1] == "--fusion-rule"


def fmt_answer(a: dict | None) -> str:
    if not a:
        return "no divergence"
    rank = a.get("rank") if a.get("rank") is not None else (f"{a.get('ranks')}" if a.get("ranks") else "None")
    return f"{a['node']} r{rank} s{a.get('step')} mb{a.get('micro_step')} {a.get('direction') or ''}".rstrip()


def fmt_truth(t: dict | None) -> str:
    if not t:
        return "no divergence"
    return f"{t['node']} r{t['rank']} s{t['step']} mb{t['micro_step']} {t['direction']}"


def fmt_num(x: float | None, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if not isinstance(x, (int, float)):
        return str(x)  # e.g. "inf" written as a string
    return format(x, spec) if x == x and abs(x) != float("inf") else str(x)


def table(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        noise = fmt_num(r["noise_level"]) + (f" ({fmt_num(r['noise_units'])}u)" if r["noise_units"] else "")
        lines.append(f"## {r['case']} ({r['kind']}): {'RIGHT' if r['right'] else 'WRONG'}"
                     + (f" - {r['why']}" if r["why"] else "") + (f" (note: {r['note']})" if r.get("note") else ""))
        lines.append(f"   answer : {fmt_answer(r['answer'])}")
        lines.append(f"   truth  : {fmt_truth(r['truth'])}")
        lines.append(f"   margin {fmt_num(r['margin'])}  noise {noise}  origins {fmt_num(r['origins'], 'd')}  "
                     f"exit {r['exit']}  time {r.get('seconds', '-')}s")
    right = sum(r["right"] for r in rows)
    lines.append(f"right: {right}/{len(rows)}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="/work/cases28", help="folder of cases (each with npu/, bench/, TRUTH.json)")
    ap.add_argument("--graphcmp", default="graphcmp", help="the graphcmp command (split as a shell does)")
    ap.add_argument("--only", nargs="*", help="case names")
    ap.add_argument("--option", action="append", default=[], help="an extra compare option (repeat), e.g. --fuzzy")
    ap.add_argument("--keep", help="keep the comparison folders here")
    ap.add_argument("--json", action="store_true", help="one JSON list instead of the table")
    a = ap.parse_args()
    cases = load_cases(Path(a.root), a.only)
    if not cases:
        print(f"{a.root}: no case folders with a TRUTH.json", file=sys.stderr)
        return 2
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="dev-scoreboard-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, case, truth in cases:
        rows.append(score(name, case, truth, a.graphcmp, work, a.option))
        if not a.json:
            print(table(rows[-1:]).rsplit("\n", 1)[0], flush=True)
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"right: {sum(r['right'] for r in rows)}/{len(rows)}")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r["right"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
