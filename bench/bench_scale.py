#!/usr/bin/env python3
"""Scale figures of issue 17: the `graphcmp compare` command, the reader per dump.json layout, the stages of a
comparison, and opening a saved result, side by side with another tree of graphcmp, interleaved run by run.

Usage::

    .venv/bin/python bench/bench_scale.py compare PAIR_DIR... [--tree OTHER] [--repeat 3] [--msprobe CMD]
    .venv/bin/python bench/bench_scale.py read DUMP_DIR... [--tree OTHER] [--repeat 3]
    .venv/bin/python bench/bench_scale.py stages PAIR_DIR... [--repeat 1]
    .venv/bin/python bench/bench_scale.py open RESULT... [--tree OTHER --other-result RESULT ...] [--repeat 3]
    .venv/bin/python bench/bench_scale.py floor DUMP_DIR... [--repeat 3]
    .venv/bin/python bench/bench_scale.py timeline PAIR_DIR... [--tree OTHER] [--repeat 3]

A PAIR_DIR holds ``npu/`` and ``bench/`` (``make_synthetic.py --out``); DUMP_DIR is one rank folder. Every run
is a fresh process (imports included) under ``/usr/bin/time -v``: wall time, and GNU time's "Maximum resident
set size" (the largest of the process and the children it waited for, e.g. the forked bench reader).
``--tree`` is the root of another checkout (``git worktree add`` or ``git archive main | tar -x -C DIR``): its
runs use that tree's package (``PYTHONPATH``, started outside both trees), its default output name, and
alternate with this tree's runs, so both see the same machine (the 2-core machine is shared and its speed
drifts). ``--other-env NAME=VALUE`` sets a variable for the other tree's runs only: ``--tree . --other-env
GRAPHCMP_AHEAD_OF_TIME=0`` times this tree as a fresh installation runs it, before its dump.json reader is built.
``compare`` also runs msprobe's own comparison of each pair alternately (``msprobe graph_visualize``)
when msprobe is installed (``--msprobe CMD``; ``--msprobe none`` leaves it out) and prints the ratio.
``open`` times ``graphcmp info`` and ``graphcmp diverge`` on saved results and ``graphcmp serve`` until its page
answers (each tree opens the result its own compare wrote: ``--other-result``). ``stages`` times the stages of
one comparison inside one process (read npu, read bench, match, pair, metrics, overflow, noise model, judge,
analysis, write) with the resident set after each and the peak so far; ``floor`` the parse floor of a
dump.json (its bytes read, orjson over the whole file, msgspec's typed chunks); ``timeline`` when each stage of one
`graphcmp compare` ends, in ms from the interpreter's start (start-up imports, each run read in whichever process
reads it, the comparison's modules loaded, compare_graphs, the result written), alternated with ``--tree``.
Medians and ranges are printed as markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_TIME = "/usr/bin/time"  # GNU time: "Maximum resident set size" of the process and its waited-for children


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """Wall time and peak RSS of `cmd` under ``/usr/bin/time -v``, started in /tmp."""
    start = time.perf_counter()
    proc = subprocess.run([_TIME, "-v", *cmd], capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - start
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    if found is None:
        raise RuntimeError(f"{_TIME} -v gave no figure for {cmd}: {proc.stderr[-500:]}")
    return {"wall": wall, "peak_mb": int(found.group(1)) / 1024, "code": proc.returncode,
            "err": proc.stderr[-1500:], "out": proc.stdout[-3000:]}


def _env(tree: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = str(tree)
    return env


def _other_env(args: argparse.Namespace, name: str) -> dict[str, str]:
    """``--other-env`` for the other tree's runs (`name` is its label), nothing for this tree's."""
    if not name.startswith("other"):
        return {}
    return dict(setting.split("=", 1) for setting in args.other_env or [])


def run_measured(tree: Path, args: list[str], extra: dict[str, str] | None = None) -> dict:
    """Wall time and peak RSS of ``python -m graphcmp ARGS`` with `tree`'s package (and `extra` environment
    variables), started in /tmp."""
    result = _timed([sys.executable, "-m", "graphcmp", *args], _env(tree, extra))
    if result["code"] not in (0, 1):
        raise RuntimeError(f"graphcmp {' '.join(args)} ({tree}) failed: {result['err']}")
    return result


def run_python(tree: Path, code: str, *argv: str) -> dict:
    result = _timed([sys.executable, "-c", code, *argv], _env(tree))
    if result["code"] != 0:
        raise RuntimeError(f"{tree}: {result['err']}")
    return result


def _cell(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def _trees(args: argparse.Namespace) -> dict[str, Path]:
    trees = {"this tree": ROOT}
    if args.tree:
        trees = {f"other ({Path(args.tree).resolve().name})": Path(args.tree).resolve(), **trees}
    for tree in trees.values():  # installed packages carry bytecode; editable trees must compile it once
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "graphcmp")], check=True)
    return trees


def _output_name(tree: Path, folder: Path, label: str) -> str:
    """The default output of `graphcmp compare` in `tree` (a JSON report before the npz container existed)."""
    npz = (tree / "graphcmp" / "core" / "npzio.py").is_file()
    return str(folder / f"{label}.{'npz' if npz else 'json'}")


def _msprobe(args: argparse.Namespace) -> str | None:
    """msprobe's command (``--msprobe``, else ``msprobe`` on the PATH), or None to leave it out."""
    if args.msprobe == "none":
        return None
    return args.msprobe or shutil.which("msprobe")


def run_msprobe(msprobe: str, pair: str, out: Path) -> dict:
    """msprobe's own comparison of the pair (``graph_visualize``: a compare ``.vis.db``), timed the same way."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    r = _timed([msprobe, "graph_visualize", "-tp", f"{pair}/npu", "-gp", f"{pair}/bench", "-o", str(out)])
    made = list(out.glob("compare_*.vis.db"))
    if not made:
        raise RuntimeError(f"msprobe wrote no compare_*.vis.db for {pair}: {r['err']}")
    r["out_mb"] = made[0].stat().st_size / 1e6
    return r


def bench_compare(args: argparse.Namespace) -> None:
    trees = _trees(args)
    msprobe = _msprobe(args)
    results: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for pair in args.paths:
                for name, tree in trees.items():
                    out = _output_name(tree, Path(tmp), "cmp")
                    r = run_measured(tree, ["compare", f"{pair}/npu", f"{pair}/bench", "-o", out, "-q"],
                                     _other_env(args, name))
                    r["out_mb"] = Path(out).stat().st_size / 1e6
                    Path(out).unlink()
                    results.setdefault((pair, name), []).append(r)
                    print(f"  {pair} {name}: {r['wall']:.2f} s, {r['peak_mb']:.0f} MB", file=sys.stderr, flush=True)
                if msprobe:
                    r = run_msprobe(msprobe, pair, Path(tmp) / "msprobe")
                    results.setdefault((pair, "msprobe"), []).append(r)
                    print(f"  {pair} msprobe: {r['wall']:.2f} s, {r['peak_mb']:.0f} MB", file=sys.stderr, flush=True)
    print(f"| pair | tree | wall s, median [range] of {args.repeat} | peak RSS MB | result MB |")
    print("|---|---|---|---|---|")
    for (pair, name), runs in results.items():
        print(f"| {Path(pair).name} | {name} | {_cell([r['wall'] for r in runs])} "
              f"| {_cell([r['peak_mb'] for r in runs], 0)} | {runs[0]['out_mb']:.0f} |")
    for pair in args.paths:
        if (pair, "msprobe") in results:
            theirs = statistics.median(r["wall"] for r in results[(pair, "msprobe")])
            ours = statistics.median(r["wall"] for r in results[(pair, "this tree")])
            print(f"\n{Path(pair).name}: msprobe {theirs:.2f} s / this tree {ours:.2f} s = {theirs / ours:.1f}x "
                  "(medians)")


_READ = ("import sys, time\nfrom graphcmp.core.readers.msprobe import read_msprobe\n"
         "g = read_msprobe(sys.argv[1])\nprint(len(g), len(g.tensors))")


def bench_read(args: argparse.Namespace) -> None:
    trees = _trees(args)
    results: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.repeat):
        for folder in args.paths:
            for name, tree in trees.items():
                r = run_python(tree, _READ, folder)
                results.setdefault((folder, name), []).append(r)
                print(f"  {folder} {name}: {r['wall']:.2f} s, {r['peak_mb']:.0f} MB", file=sys.stderr, flush=True)
    print(f"| dump | dump.json MB | tree | read s (process), median [range] of {args.repeat} | peak RSS MB |")
    print("|---|---|---|---|---|")
    for (folder, name), runs in results.items():
        size = (Path(folder) / "dump.json").stat().st_size / 1e6
        print(f"| {folder} | {size:.0f} | {name} | {_cell([r['wall'] for r in runs])} "
              f"| {_cell([r['peak_mb'] for r in runs], 0)} |")


def serve_startup(tree: Path, path: str, timeout: float = 300.0) -> dict:
    """Seconds from starting ``graphcmp serve RESULT`` until its page answers, and the server's peak RSS then."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "graphcmp", "serve", path, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env(tree),
                            cwd=tempfile.gettempdir())
    try:
        while time.perf_counter() - start < timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"graphcmp serve {path} ({tree}) stopped: {proc.stderr.read()[-500:]!r}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
                    if page.status == 200:
                        wall = time.perf_counter() - start
                        break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError(f"graphcmp serve {path} did not answer within {timeout:g} s")
        with open(f"/proc/{proc.pid}/status") as f:
            peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    finally:
        proc.terminate()
        proc.wait(30)
    return {"wall": wall, "peak_mb": peak}


def bench_open(args: argparse.Namespace) -> None:
    trees = _trees(args)
    others = args.other_result or []
    results: dict[tuple[str, str, str], list[dict]] = {}
    for _ in range(args.repeat):
        for k, result in enumerate(args.paths):
            for name, tree in trees.items():
                path = others[k] if tree != ROOT and k < len(others) else result
                for command in ("info", "diverge", "serve"):
                    r = serve_startup(tree, path) if command == "serve" else \
                        run_measured(tree, [command, path, "--json"])
                    results.setdefault((path, name, command), []).append(r)
                    print(f"  {command} {path} {name}: {r['wall']:.2f} s", file=sys.stderr, flush=True)
    print(f"| result | MB | tree | command | wall s, median [range] of {args.repeat} | peak RSS MB |")
    print("|---|---|---|---|---|---|")
    for (path, name, command), runs in results.items():
        what = "serve` (until the page answers)" if command == "serve" else f"{command}`"
        print(f"| {Path(path).name} | {Path(path).stat().st_size / 1e6:.0f} | {name} | `{what} "
              f"| {_cell([r['wall'] for r in runs])} | {_cell([r['peak_mb'] for r in runs], 0)} |")


_STAGES = """
import resource, sys, time, json
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6
marks, t = [], time.perf_counter()
def mark(name):
    global t
    now = time.perf_counter()
    marks.append((name, now - t, rss(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
    t = now
from graphcmp.core.judge import judge
from graphcmp.core.matching import default_matchers, match_graphs
from graphcmp.core.noise import noise_model
from graphcmp.core.overflow import overflow_levels
from graphcmp.core.pairing import pair_metrics, pair_tensors
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.report import CompareOptions, CompareReport, save_report
from graphcmp.core.rules import DEFAULT_THRESHOLDS as th
mark("import")
npu = read_msprobe(sys.argv[1] + "/npu"); mark("read npu")
bench = read_msprobe(sys.argv[1] + "/bench"); mark("read bench")
table = match_graphs(npu, bench, default_matchers()); mark("match")
rows = pair_tensors(npu, bench, table); mark("pair tensors")
pairs = pair_metrics(npu, bench, *rows, th, None); mark("pair metrics")
overflow = overflow_levels(npu); mark("overflow levels")
noise = noise_model(npu, bench, table, pairs, th.noise, overflow); mark("noise model")
verdicts = judge(npu, bench, table, pairs, th, noise); mark("judge")
report = CompareReport(npu=npu, bench=bench, matches=table, pairs=pairs, verdicts=verdicts, thresholds=th,
                       options=CompareOptions(), tool_version="bench", noise=noise, _cache={"overflow": overflow})
report.analysis(); mark("divergence analysis")
save_report(report, sys.argv[2]); mark("write result")
print(json.dumps({"marks": marks, "nodes": len(npu), "tensors": len(npu.tensors), "pairs": len(pairs)}))
"""


def bench_stages(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for pair in args.paths:
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run([sys.executable, "-c", _STAGES, pair, str(Path(tmp) / "cmp.npz")],
                                     capture_output=True, text=True, check=True, cwd=tempfile.gettempdir(),
                                     env=_env(ROOT))
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            first = runs[0]
            print(f"\n{Path(pair).name}: {first['nodes']:,} nodes/side, {first['tensors']:,} tensors/side, "
                  f"{first['pairs']:,} pairs; one process, the stages one after the other (median of {args.repeat})")
            print("| stage | s | RSS after MB | peak so far MB |")
            print("|---|---|---|---|")
            for k, (name, *_) in enumerate(first["marks"]):
                secs = statistics.median(r["marks"][k][1] for r in runs)
                print(f"| {name} | {secs:.2f} | {statistics.median(r['marks'][k][2] for r in runs):.0f} "
                      f"| {statistics.median(r['marks'][k][3] for r in runs):.0f} |")
            total = statistics.median(sum(m[1] for m in r["marks"]) for r in runs)
            print(f"| total | {total:.2f} | | |")


_FLOOR = """
import json, sys, time
import orjson
from graphcmp.core.jsonio import MemberChunks
from graphcmp.core.readers.msprobe_leaves import typed_records
path = sys.argv[1] + "/dump.json"
t = time.perf_counter(); data = open(path, "rb").read(); read = time.perf_counter() - t
whole = None
if len(data) < 300e6:  # a whole 800 MB dump as Python objects would take ~6 GB of this shared machine
    t = time.perf_counter(); orjson.loads(data); whole = time.perf_counter() - t
del data
t = time.perf_counter()
for text in MemberChunks(path, "data").texts():
    typed_records(text)
typed = time.perf_counter() - t
print(json.dumps({"read": read, "orjson": whole, "typed": typed}))
"""


def bench_floor(args: argparse.Namespace) -> None:
    """The parse floor of one dump.json: reading its bytes, orjson over the whole file, and msgspec's typed
    decoding chunk by chunk (what the reader starts from), each in a fresh process."""
    print(f"| dump | dump.json MB | read bytes s | orjson.loads whole s | typed chunks s (msgspec), median of "
          f"{args.repeat} |")
    print("|---|---|---|---|---|")
    for folder in args.paths:
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, "-c", _FLOOR, folder], capture_output=True, text=True, check=True,
                                 cwd=tempfile.gettempdir(), env=_env(ROOT))
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        size = (Path(folder) / "dump.json").stat().st_size / 1e6
        whole = _cell([r["orjson"] for r in runs]) if runs[0]["orjson"] is not None else "- (over 300 MB)"
        print(f"| {folder} | {size:.0f} | {_cell([r['read'] for r in runs])} | {whole} "
              f"| {_cell([r['typed'] for r in runs])} |")


_TIMELINE = r"""
import json, os, sys, time
t0 = time.perf_counter()
with open("/proc/self/stat") as f:
    ticks = int(f.read().rsplit(")", 1)[1].split()[19])
with open("/proc/uptime") as f:
    before = float(f.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")  # interpreter start -> this line
main_pid, marks = os.getpid(), {}
def mark(name):
    at = round(before * 1000 + (time.perf_counter() - t0) * 1000, 1)
    if os.getpid() == main_pid:
        marks.setdefault(name, at)
    else:  # the forked reader: its own line on stderr
        os.write(2, ("TIMELINE " + json.dumps({name: at}) + "\n").encode())
def timed(module, name, label, ends_only=False):
    inner = getattr(module, name)
    def wrapper(*args, **kwargs):
        if not ends_only:
            mark(label + " start")
        value = inner(*args, **kwargs)
        mark(label + " end")
        return value
    setattr(module, name, wrapper)
npu_path = sys.argv[2]
import graphcmp.cli.main as cli
mark("command line imported")
import graphcmp.cli.compare as command
import graphcmp.core.readers.pair as pair
timed(command, "read_pair", "reads")
read = pair.read_graph
def read_graph(path, *args, **kwargs):
    graph = read(path, *args, **kwargs)
    mark(("npu" if os.fspath(path) == npu_path else "bench") + " read end")
    return graph
pair.read_graph = read_graph
for name, label in (("derive_npu_aside", "npu derived aside"), ("derive_npu_here", "npu derived here"),
                    ("derive_bench", "bench derived")):  # in whichever process runs them
    timed(command, name, label, ends_only=True)
timed(pair, "load_run", "npu run loaded", ends_only=True)
load = command._load_comparison
def load_comparison():
    load()
    mark("comparison modules loaded")
    import graphcmp.core.compare as compare
    import graphcmp.core.report as report
    timed(compare, "compare_graphs", "compare_graphs")
    timed(report, "save_report", "save_report", ends_only=True)
command._load_comparison = load_comparison
sys.argv = ["graphcmp", *sys.argv[1:]]
code = cli.main()
mark("done")
print("TIMELINE " + json.dumps(marks), flush=True)
os._exit(code)
"""


def bench_timeline(args: argparse.Namespace) -> None:
    """Per pair and tree, when each stage of one `graphcmp compare` ends (ms from the interpreter's start; the reads
    in whichever process makes them), medians and ranges of `--repeat` runs alternated between the trees."""
    trees = _trees(args)
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for pair in args.paths:
                for name, tree in trees.items():
                    out = _output_name(tree, Path(tmp), "cmp")
                    proc = subprocess.run([sys.executable, "-c", _TIMELINE, "compare", f"{pair}/npu", f"{pair}/bench",
                                           "-o", out, "-q"], capture_output=True, text=True,
                                          env=_env(tree, _other_env(args, name)),
                                          cwd=tempfile.gettempdir())
                    marks: dict[str, float] = {}
                    for line in (proc.stdout + proc.stderr).splitlines():
                        if line.startswith("TIMELINE "):
                            marks.update(json.loads(line.removeprefix("TIMELINE ")))
                    if proc.returncode not in (0, 1) or "done" not in marks:
                        raise RuntimeError(f"{tree}: {proc.stderr[-1500:]}")
                    results.setdefault((pair, name), []).append(marks)
    for pair in args.paths:
        names = [name for name in trees if (pair, name) in results]
        stages = sorted({m for name in names for run in results[(pair, name)] for m in run},
                        key=lambda m: statistics.median(r.get(m, 0.0) for r in results[(pair, names[-1])]))
        print(f"\n{Path(pair).name}: ms from the interpreter's start, median [range] of {args.repeat}")
        print("| stage ends | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for stage in stages:
            cells = [_cell([r[stage] for r in results[(pair, n)] if stage in r], 0) if any(
                stage in r for r in results[(pair, n)]) else "" for n in names]
            print(f"| {stage} | " + " | ".join(cells) + " |")
        print(f"\n{Path(pair).name}: ms each stage took, run by run, median [range] of {args.repeat}")
        print("| stage | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        for stage, took in _TIMELINE_SPANS.items():
            print(f"| {stage} | " + " | ".join(_cell([took(r) for r in results[(pair, n)]], 0) for n in names) + " |")


_TIMELINE_SPANS = {
    "reads (the later read's end)": lambda m: max(m["npu read end"], m["bench read end"]),
    "hand-over (reads end - the later read's end)":
        lambda m: m["reads end"] - max(m["npu read end"], m["bench read end"]),
    "compare_graphs": lambda m: m["compare_graphs end"] - m["compare_graphs start"],
    "after compare_graphs (result written, summary)": lambda m: m["done"] - m["compare_graphs end"],
}
"""Spans of one `graphcmp compare` from its timeline marks: which stage a change moved shows in each run's own
spans better than in the medians of its marks, which carry every earlier stage's spread."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("compare", "read", "stages", "open", "floor", "timeline"))
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--tree", help="root of another graphcmp tree to run side by side")
    parser.add_argument("--other-env", action="append", metavar="NAME=VALUE",
                        help="with compare and timeline: an environment variable of the other tree's runs; with "
                        "--tree . it times this tree in another state (GRAPHCMP_AHEAD_OF_TIME=0: before the "
                        "compiled dump.json reader is built)")
    parser.add_argument("--other-result", nargs="*", help="with open: the other tree's result per RESULT")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--msprobe", help="with compare: msprobe's command to run alternately (default: msprobe "
                                          "on the PATH, when installed; 'none' leaves it out)")
    args = parser.parse_args(argv)
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    {"compare": bench_compare, "read": bench_read, "stages": bench_stages, "open": bench_open,
     "floor": bench_floor, "timeline": bench_timeline}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
