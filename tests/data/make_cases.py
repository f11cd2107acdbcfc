"""Copies (and trims) the small real dumps in tests/data from ../shared/data. Run from the repo root.

Each case is a real msprobe rank folder, named by what it tests; see tests/data/README.md.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
HERE = Path(__file__).resolve().parent

COPIES = {
    "msprobe_overflow_tokens/npu": "msprobe/dumps/cnn/statistics/overflow/step0/rank0",
    "msprobe_overflow_tokens/bench": "msprobe/dumps/cnn/statistics/baseline/step0/rank0",
    "msprobe_extraop/npu": "msprobe/dumps/tf_small/statistics/extraop/step0/rank0",
    "msprobe_bf16/npu": "msprobe/dumps/tf_small/statistics/bf16/step0/rank0",
    "msprobe_md5/npu": "msprobe/dumps/tf_small/md5/perturb/step0/rank0",
    "msprobe_md5/bench": "msprobe/dumps/tf_small/md5/baseline/step0/rank0",
    "mindspore_cnn/npu": "mindspore_msprobe/dumps/ms/cnn/statistics_mix/perturb/step0/rank0",
    "mindspore_cnn/bench": "mindspore_msprobe/dumps/ms/cnn/statistics_mix/baseline/step0/rank0",
    "noise_softmax_scale_bf16/npu": "msprobe/dumps/noise/bf16_softmax_l2/target/step0/rank0",
    "noise_softmax_scale_bf16/bench": "msprobe/dumps/noise/bf16_softmax_l2/baseline/step0/rank0",
    "noise_clean_fp16/npu": "msprobe/dumps/noise/fp16_clean/target/step0/rank0",
    "noise_clean_fp16/bench": "msprobe/dumps/noise/fp16_clean/baseline/step0/rank0",
}
TRIMS = {  # case -> (source, number of dump.json records kept)
    "msprobe122_old_stack/rank": ("msprobe/dumps_msprobe122/tf_small/statistics/baseline/step0/rank", 40),
}


def copy_case(target: str, source: str) -> None:
    dest = HERE / target
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(SHARED / source, dest)
    for path in dest.rglob("*"):
        path.chmod(0o644 if path.is_file() else 0o755)


def trim_case(target: str, source: str, keep: int) -> None:
    src, dest = SHARED / source, HERE / target
    dest.mkdir(parents=True, exist_ok=True)
    dump = json.loads((src / "dump.json").read_text())
    kept = dict(list(dump["data"].items())[:keep])
    dump["data"] = kept
    construct = json.loads((src / "construct.json").read_text())
    construct = {k: v for k, v in construct.items() if k in kept or v in kept}
    stack = json.loads((src / "stack.json").read_text())
    stack = {k: v for k, v in stack.items() if k in kept}
    for name, doc in (("dump.json", dump), ("construct.json", construct), ("stack.json", stack)):
        (dest / name).write_text(json.dumps(doc, indent=1))


PARALLEL = {  # case -> job folder under msprobe/dumps/parallel, cut to its first micro-batch
    "parallel/tp1": "tp1", "parallel/tp2pp2": "tp2pp2", "parallel/tp2_desync": "tp2_desync",
}


def first_micro_batch(target: str, job: str) -> None:
    """Every rank of a parallel job, with only the calls of micro-batch 0 (compact JSON, no stack.json)."""
    from graphcmp.core.distributed.stitch import StageRun, _phases
    from graphcmp.core.readers import read_graph

    for rank_dir in sorted((SHARED / "msprobe/dumps/parallel" / job / "step0").iterdir()):
        graph = read_graph(rank_dir)
        phase, _ = _phases(StageRun(0, (0,), graph))
        kept = {graph.nodes.ids[row] for row, (micro, _) in phase.items() if micro == 0}
        dump = json.loads((rank_dir / "dump.json").read_text())
        dump["data"] = {k: _no_grad_flag(v) for k, v in dump["data"].items() if k in kept}
        construct = json.loads((rank_dir / "construct.json").read_text())
        construct = {k: v for k, v in construct.items() if k in kept}
        dest = HERE / target / "step0" / rank_dir.name
        dest.mkdir(parents=True, exist_ok=True)
        for name, doc in (("dump.json", dump), ("construct.json", construct)):
            (dest / name).write_text(json.dumps(doc, separators=(",", ":")))


def _no_grad_flag(value):
    if isinstance(value, dict):
        return {k: _no_grad_flag(v) for k, v in value.items() if k != "requires_grad"}
    if isinstance(value, list):
        return [_no_grad_flag(v) for v in value]
    return value


if __name__ == "__main__":
    for target, source in COPIES.items():
        copy_case(target, source)
    for target, (source, keep) in TRIMS.items():
        trim_case(target, source, keep)
    for target, job in PARALLEL.items():
        first_micro_batch(target, job)
