"""Copy the runs of the `--reference` test case into tests/data/reference_bf16 (compact JSON, < 1 MB in all).

    python tests/gen/copy_reference28.py --root /work/cases28ref

The runs (made with dump28.py and reference28.py, torch 2.13.0 CPU + msprobe 26.2.0; 2-layer TinyLlama, one
micro-batch, npu under bf16 autocast):

    bench      dump28.py --model llama2 --precision fp32                  -> <root>/llama2_fp32
    npu        dump28.py --model llama2 --precision bf16                  -> <root>/llama2_bf16
    npu_bug    dump28.py --model llama2 --precision bf16 \\
                   --bug scale_from_mb:layers.1.self_attn.v_proj.weight:1.05:0   -> <root>/llama2_bf16_bug105
    reference  reference28.py --model llama2 --precision bf16             -> <root>/llama2_bf16_ref

The truth of npu_bug is `Functional.linear.9.forward` (layers.1.self_attn.v_proj, 1.05 x its result): the first
dump.json entry that differs from npu (same precision, deterministic CPU).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

RUNS = {"bench": "llama2_fp32", "npu": "llama2_bf16", "npu_bug": "llama2_bf16_bug105", "reference": "llama2_bf16_ref"}
OUT = Path(__file__).resolve().parents[1] / "data" / "reference_bf16"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    root = Path(ap.parse_args().root)
    for name, run in RUNS.items():
        src, dst = root / run / "step0" / "rank0", OUT / name
        dst.mkdir(parents=True, exist_ok=True)
        files = ["dump.json", "construct.json"] + (["stack.json"] if name == "npu_bug" else [])
        for file in files:
            doc = json.loads((src / file).read_text())
            (dst / file).write_text(json.dumps(doc, separators=(",", ":")))
    print(sum(f.stat().st_size for f in OUT.rglob("*.json")), "bytes in", OUT)


if __name__ == "__main__":
    main()
