#!/usr/bin/env python3
r"""Time the viewer's search on a realistic id list: ordinary and backtracking patterns, and the server meanwhile.

Usage::

    .venv/bin/python bench/bench_search.py [--ids 1000000] [--result CMP.json] [--re-timeout 10] [--serve] [--json]

The ids are those of a comparison result (``--result``) or the shipped sample's ids with its encoder
layers repeated until there are ``--ids`` of them (real names: ``Module.encoder.layers.7.linear1.Linear
.forward.0``, ``Functional.linear.3.forward`` ...). For every pattern it prints the time of
`graphcmp.app.find.IdText.matching` (median of 3) and the hits ("gave up" when it stopped at
`SEARCH_SECONDS`), and, for comparison, the time Python's
``re`` takes on the same lower-cased text in a child process that is killed after ``--re-timeout`` seconds
(the engine the viewer used before). With ``--serve`` it also starts the real viewer server on the
result (or on the sample pair), sends the search as a page does (``?q=`` in the URL) and, while that
runs, asks for ``/_dash-layout`` every 20 ms: the search's answer time and the slowest of those other
answers are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent

PATTERNS = {  # label -> pattern
    "literal, one id": r"layers\.7\.linear1\.linear\.forward\.0$",
    "literal, a layer": r"layers\.1\.",
    "literal, half the ids": "forward",
    "regex, a few layers": r"layers\.1\d\.\w+\.linear",
    "regex, every id": r".*",
    "backtracking (.|.)*!": r"(.|.)*!",
    "backtracking (\\w+\\.?)+!": r"(\w+\.?)+!",
    "backtracking (.*)*!": r"(.*)*!",
    "backtracking (.+)+$ anchored": r"(.+)+\$",
    "backtracking (.*){1,32}(.*){1,32}x": r"(.*){1,32}(.*){1,32}x",
    "linear, 100k states: .{1000} x 30": ".{1000}" * 30,
}

_STDLIB = """
import re, sys, time
text = sys.stdin.buffer.read()
t = time.perf_counter()
n = sum(1 for _ in re.compile(sys.argv[1].lower().encode(), re.M).finditer(text))
print(time.perf_counter() - t, n)
"""


def sample_ids(count: int) -> tuple[str, ...]:
    """The sample run's ids, its encoder layers repeated until there are about `count` ids."""
    from graphcmp.core.compare import compare_paths
    from graphcmp.samples import sample_pair

    ids = compare_paths(*sample_pair()).npu.nodes.ids
    layer = [i for i in ids if ".layers.0." in i]
    rest = [i for i in ids if ".layers." not in i]
    layers = max(1, (count - len(rest)) // len(layer))
    return tuple(rest + [i.replace(".layers.0.", f".layers.{k}.") for k in range(layers) for i in layer])


def result_ids(result: Path) -> tuple[str, ...]:
    from graphcmp.app.results import open_results

    results = open_results([result])
    return results.document(results.default.key).npu.nodes.ids


def time_new(ids: tuple[str, ...], pattern: str, repeat: int = 3) -> tuple[float, int | str]:
    """Median seconds of the viewer's search, and its hits (or "gave up" when it stopped at its deadline)."""
    from graphcmp.app.find import IdText, SearchError, compile_search

    text = IdText(ids)
    text.prepare()
    times, hits = [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        try:
            hits = len(text.matching(compile_search(pattern)))
        except SearchError:
            hits = "gave up"
        times.append(time.perf_counter() - t)
    return statistics.median(times), hits


def time_stdlib(ids: tuple[str, ...], pattern: str, timeout: float) -> str:
    """Python's re over the lower-cased ids joined by newlines, in a child process killed after `timeout` s."""
    text = "\n".join(ids).lower().encode()
    try:
        done = subprocess.run([sys.executable, "-c", _STDLIB, pattern], input=text, capture_output=True,
                              timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return f"> {timeout:g} s (killed)"
    seconds, hits = done.stdout.split()
    return f"{float(seconds):.3f} s ({int(hits)} matches)"


def serve_and_search(paths: list[str], pattern: str) -> dict[str, float]:
    """Search `pattern` through the real server while another client asks for the layout every 20 ms."""
    from graphcmp.app import create_app, open_results
    from graphcmp.app.server import start_server

    app = create_app(open_results(paths))
    server = start_server(app, "127.0.0.1", 0).start()
    try:
        urllib.request.urlopen(server.url).read()
        deps = json.loads(urllib.request.urlopen(server.url + "_dash-dependencies").read())
        body = view_request(deps, "?" + urllib.parse.urlencode({"q": pattern}))
        others: list[float] = []
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                urllib.request.urlopen(server.url + "_dash-layout").read()
                others.append(time.perf_counter() - t)
                time.sleep(0.02)

        poller = threading.Thread(target=poll)
        poller.start()
        time.sleep(0.1)
        t = time.perf_counter()
        request = urllib.request.Request(server.url + "_dash-update-component", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(request).read())
        search = time.perf_counter() - t
        time.sleep(0.1)
        stop.set()
        poller.join()
    finally:
        server.stop()
    info = answer["response"]["hit-info"]["children"]
    return {"search s": round(search, 3), "hit info": str(info), "other requests": len(others),
            "slowest other request s": round(max(others), 3)}


def view_request(deps: list[dict], search: str) -> dict:
    """The body a page posts for the view callback when its URL is `search` (other inputs empty)."""
    view = next(d for d in deps if d["output"].startswith("..url.search..."))
    outputs = [dict(zip(("id", "property"), part.rsplit(".", 1))) for part in view["output"].strip(".").split("...")]
    inputs = [{**i, "value": search if (i["id"], i["property"]) == ("url", "search") else None}
              for i in view["inputs"]]
    return {"output": view["output"], "outputs": outputs, "inputs": inputs, "state": [],
            "changedPropIds": ["url.search"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=1_000_000, help="how many sample ids (without --result)")
    parser.add_argument("--result", type=Path, help="search the npu ids of this comparison result instead")
    parser.add_argument("--re-timeout", type=float, default=10.0, help="seconds before Python's re is killed")
    parser.add_argument("--serve", action="store_true", help="also search through the real server")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent))
    ids = result_ids(args.result) if args.result else sample_ids(args.ids)
    rows = {}
    for label, pattern in PATTERNS.items():
        seconds, hits = time_new(ids, pattern)
        rows[label] = {"pattern": pattern, "RE2 s": round(seconds, 3), "hits": hits,
                       "Python re": time_stdlib(ids, pattern, args.re_timeout)}
    out: dict = {"ids": len(ids), "MB": round(sum(map(len, ids)) / 1e6, 1), "patterns": rows}
    if args.serve:
        from graphcmp.samples import sample_pair

        paths = [str(args.result)] if args.result else [str(p) for p in sample_pair()]
        out["server"] = serve_and_search(paths, PATTERNS["backtracking (.|.)*!"])
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{out['ids']:,} ids ({out['MB']} MB)")
    print(f"{'pattern':40} {'search':>9} {'hits':>9}   Python re")
    for label, row in rows.items():
        hits = f"{row['hits']:,}" if isinstance(row["hits"], int) else row["hits"]
        print(f"{label:40} {row['RE2 s']:>7.3f} s {hits:>9}   {row['Python re']}")
    if "server" in out:
        print("server, (.|.)*! as ?q=:", out["server"])


if __name__ == "__main__":
    main()
