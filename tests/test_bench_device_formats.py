"""bench/bench_device_formats.py still runs (one small smoke run, not a timing; the figures are its own)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_device_formats_prints_a_row_per_case():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_device_formats.py"), "--mb", "2",
                           "--repeat", "1"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| fp16") or line.startswith("| bf16")]
    assert len(rows) == 4 and "| reference" in done.stdout and all(float(row.split("|")[3]) > 0 for row in rows)
