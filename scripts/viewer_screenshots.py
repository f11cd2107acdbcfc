"""Remake the viewer screenshots of docs/viewer.md (docs/img/viewer_*.png) from the shared data.

Each picture is the page a fresh URL opens (at the answer), in headless Debian chromium (Playwright),
1600 x 1000 px:

    .venv/bin/python scripts/viewer_screenshots.py [--out docs/img] [--only tf_small dist4 resnet50 mindspore]

* ``tf_small``: the 3-layer transformer with a perturbed ``layers.1.linear1`` weight against its baseline;
* ``dist4``: the 4-rank gloo job where rank 2 got other input tokens (a results folder: job overview);
* ``resnet50``: GE's build graph of Caffe ResNet-50 (one run), ``conv1`` selected (its folded weight and bias);
* ``mindspore``: MindSpore's perturbed CNN against its PyTorch twin, matched by the layer-mapping file;
* ``chart``: tf_small with the bottom panel on the error chart, dragged to 380 px (``?tab=chart&dth=380``);
* ``single_op``: the CNN dumped in tensor mode, its first divergence in the single-op view (``tab=op``);
* ``table``: the CNN's compare result table (``?tab=table``).

The comparisons are made in a temporary folder; the shared data is read from ../shared/data.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1600, "height": 1000}
CASES = ("tf_small", "dist4", "resnet50", "mindspore", "chart", "single_op", "table")


def _graphcmp(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "graphcmp", *args, "-q"], check=False, capture_output=True,
                          text=True)
    if done.returncode not in (0, 1):  # 1: compared, and the runs diverge
        raise SystemExit(f"graphcmp {' '.join(args)} failed:\n{done.stderr}")


def inputs(case: str, work: Path) -> tuple[list[str], str]:
    """(what `graphcmp serve` is given, the URL query) of one picture."""
    dumps = SHARED / "msprobe" / "dumps"
    if case in ("tf_small", "chart"):
        tf = dumps / "tf_small" / "statistics"
        return [str(tf / "perturb" / "step0" / "rank0"), str(tf / "baseline" / "step0" / "rank0")], \
            "?tab=chart&dth=380" if case == "chart" else ""
    if case in ("single_op", "table"):
        cnn = dumps / "cnn" / "tensor"
        _graphcmp("compare", str(cnn / "perturb" / "step0" / "rank0"), str(cnn / "baseline" / "step0" / "rank0"),
                  "-o", str(work / "cnn_tensor.npz"))
        query = "?tab=op&sel=npu:Functional.conv2d.1.forward&dth=520" if case == "single_op" else "?tab=table"
        return [str(work / "cnn_tensor.npz")], query
    if case == "dist4":
        dist = dumps / "dist4" / "statistics"
        _graphcmp("compare", str(dist / "perturb_rank2"), str(dist / "baseline"), "-o", str(work / "dist4"))
        return [str(work / "dist4")], ""
    if case == "resnet50":
        graph = SHARED / "formats" / "ge" / "samples" / "oam-tools" / "complie_path" / "ge_proto_00000062_Build.txt.gz"
        _graphcmp("build", str(graph), "-o", str(work / "resnet50.json"))
        return [str(work / "resnet50.json")], "?sel=npu:conv1conv1_relu"
    data = ROOT / "tests" / "data"
    _graphcmp("compare", str(data / "mindspore_cnn" / "npu"), str(data / "pytorch_cnn" / "bench"), "--layer-mapping",
              str(data / "mapping_files" / "cnn_ms_to_pt.yaml"), "-o", str(work / "mindspore.json"))
    return [str(work / "mindspore.json")], ""


def shoot(paths: list[str], query: str, out: Path) -> None:
    """Serve `paths`, open the page at `query`, wait until it has settled, and save the picture."""
    from playwright.sync_api import sync_playwright

    from graphcmp.app import create_app, open_results
    from graphcmp.app.server import start_server

    server = start_server(create_app(open_results(paths)), "127.0.0.1", 0).start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(server.url + query)
            page.wait_for_function("window.graphcmp && window.graphcmp.count('npu') > 0", timeout=60000)
            if "job" in page.content():
                page.wait_for_selector("#job-heat .nsewdrag", timeout=60000)
            if "tab=chart" in query or "tab=op" in query:
                page.wait_for_selector(".js-plotly-plot .scatterlayer .trace", timeout=60000)
            if "tab=table" in query:
                page.wait_for_selector("#table .dash-spreadsheet tbody tr", timeout=60000)
            page.wait_for_timeout(1500)  # the focus animation frame and plotly's last draw
            page.screenshot(path=str(out))
            browser.close()
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--only", nargs="*", choices=CASES, default=list(CASES))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.only:
            paths, query = inputs(case, Path(tmp))
            target = args.out / f"viewer_{case}.png"
            shoot(paths, query, target)
            print(f"written: {target}")


if __name__ == "__main__":
    main()
