"""The noise model on mixed-precision cases with a known truth: the answer, the noise, the margins, the time.

    .venv/bin/python bench/bench_noise.py [--truth ../shared/data/msprobe/dumps/noise/TRUTH.json ...] [--json]

For every case (and step) of each TRUTH.json (the layout of ``shared/data/msprobe/dumps/noise``), runs
``graphcmp compare NPU BENCH -o TMP/cmp.json`` and ``graphcmp diverge TMP/cmp.json --json`` as whole
processes and prints: the first origin (or "none"), whether it is right (the truth op or its module; none for a
clean case), the measured noise level (largest output error before the first origin) in unit roundoffs, the
truth op's margin over the noise it is allowed, the largest margin of any other call before it, the error
verdicts, and the wall time of ``diverge``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_TRUTH = HERE.parents[1] / "shared" / "data" / "msprobe" / "dumps" / "noise" / "TRUTH.json"


def _graphcmp(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphcmp", *args], capture_output=True, text=True)


def _margins(result: Path, truth: list[str]) -> tuple[float | None, float | None]:
    """(margin of the truth op, largest margin of the other calls before it) from the saved report."""
    sys.path.insert(0, str(HERE.parent))
    import numpy as np

    from graphcmp.core.hierarchy import execution_keys
    from graphcmp.core.report import load_report

    report = load_report(result)
    noise, npu = report.noise, report.npu
    margin = np.maximum(np.nan_to_num(noise.margin, nan=0.0, posinf=0.0), noise.fresh_margin)
    rows = [npu.row(t) for t in truth if t in npu and npu.row(t) in set(noise.leaves.tolist())]
    if not rows:
        keys = execution_keys(npu)
        return None, float(margin[noise.leaves].max(initial=0.0))
    keys = execution_keys(npu)
    before = noise.leaves[keys[noise.leaves] < keys[rows[0]]]
    return float(margin[rows[0]]), float(margin[before].max(initial=0.0))


def run_case(name: str, case: dict, root: Path, step: int, work: Path) -> dict:
    out = work / f"{name}_step{step}.json"
    npu, bench = root / case["npu"] / f"step{step}" / "rank0", root / case["bench"] / f"step{step}" / "rank0"
    compared = _graphcmp("compare", str(npu), str(bench), "-o", str(out), "-q", "--json")
    if compared.returncode > 1:
        return {"case": name, "step": step, "answer": f"compare failed: {compared.stderr.strip()[-120:]}"}
    started = time.perf_counter()
    diverged = _graphcmp("diverge", str(out), "--json")
    seconds = time.perf_counter() - started
    analysis = json.loads(diverged.stdout)
    summary = json.loads(compared.stdout)
    first = analysis["first"]
    truth = case["truth_nodes"] if step == case.get("truth_step", 0) else []
    right = (first is None) if not truth else first is not None and bool({first["node"], first["module"]} & set(truth))
    truth_margin, noise_margin = _margins(out, truth[:1])
    noise = analysis["noise"]
    return {
        "case": name, "step": step, "precision": noise["precision"]["kind"],
        "answer": "none" if first is None else f"{first['node']} ({first['cause']})",
        "right": right, "noise_level": noise["noise_level"], "noise_units": noise["noise_level_units"],
        "truth_margin": truth_margin, "largest_other_margin": noise_margin,
        "errors": summary["verdicts"].get("error", 0), "diverge_s": round(seconds, 2),
        "compare_exit": compared.returncode,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--truth", nargs="*", default=[str(DEFAULT_TRUTH)], help="TRUTH.json files (noise layout)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for truth_file in map(Path, args.truth):
            for name, case in json.loads(truth_file.read_text()).items():
                if name.startswith("_"):
                    continue
                for step in range(case.get("steps", 1)):
                    rows.append(run_case(name, case, truth_file.parent, step, Path(tmp)))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0 if all(r.get("right") for r in rows) else 1
    print(f"{'case':28} {'step':>4} {'right':5} {'answer':44} {'noise (u)':>12} {'truth margin':>12} "
          f"{'other max':>9} {'errors':>6} {'diverge s':>9}")
    for r in rows:
        if "right" not in r:
            print(f"{r['case']:28} {r['step']:>4} {r['answer']}")
            continue
        tm = "-" if r["truth_margin"] is None else f"{r['truth_margin']:.3g}"
        print(f"{r['case']:28} {r['step']:>4} {'yes' if r['right'] else 'NO':5} {r['answer'][:44]:44} "
              f"{r['noise_level']:.2g} ({r['noise_units'] or 0:.2g}) {tm:>12} {r['largest_other_margin']:>9.3g} "
              f"{r['errors']:>6} {r['diverge_s']:>9}")
    print(f"right: {sum(bool(r.get('right')) for r in rows)}/{len(rows)}")
    return 0 if all(r.get("right") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
