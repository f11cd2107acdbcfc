"""The hostile-input corpus: small inputs generated from the real copies in tests/data, one per case.

Each case writes its inputs into a fresh folder and says how graphcmp must answer:

* ``error``: exit 2 and one line on stderr (``graphcmp: error: <file>: ...``), naming `expect`;
* ``inconclusive``: exit 1 and the verdict line saying too little was compared (or an input is incomplete);
* ``ok``: exit 0 or 1 (a comparison that ran), for the sanity cases and for outputs that must go elsewhere.

Whatever the case, the runner (test_corpus.py) also requires: no traceback, no hang, no more memory than
`runner.MEMORY_LIMIT`, and every input unchanged (`inputs` are hashed before and after). Classes follow the
issue (14, part A): outputs, bombs, special files, nesting, big integers, thresholds, atc JSON, truncation,
tensors, honest results.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import json
import os
import shutil
import sqlite3
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import DATA
from tests.core.test_tensorio import make_pt, tensor_record

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs" / "msprobe" / "tf_small"
BASELINE = SAMPLES / "baseline" / "step0" / "rank0"
PERTURB = SAMPLES / "perturb" / "step0" / "rank0"
GPT = DATA / "msprobe_gpt_mapping"
GE_TEXT = DATA / "ge_tf_gatherv2" / "ge_proto_00056_Build.txt"
ATC_JSON = DATA / "ge_om_json" / "msquickcmp_om_model.json"
IR = DATA / "mindspore_ir_lenet_infer"
KERNELS = DATA / "mindspore_dump_lenet_cast"
WEIGHT = DATA / "tensors" / "pt_fp32" / "Functional.conv2d.0.forward.input.1.pt"  # [8, 3, 3, 3] float32
OTHER = DATA / "tensors" / "pt_fp32" / "Module.fc1.Linear.forward.0.output.0.pt"  # another shape

GIB = 1 << 30


@dataclass
class Spec:
    """One generated case: the command, the inputs it must not change, and the expected answer."""

    argv: list[str]
    expect: str  # "error", "inconclusive" or "ok"
    says: str = ""  # text the answer must hold (the error line, or the verdict)
    inputs: list[Path] = field(default_factory=list)  # files and folders hashed before and after
    keep: list[Path] = field(default_factory=list)  # special files that must still be what they were


@dataclass(frozen=True)
class Case:
    kind: str  # the class of the issue
    name: str
    make: Callable[[Path], Spec]


CASES: list[Case] = []


def case(kind: str) -> Callable[[Callable[[Path], Spec]], Callable[[Path], Spec]]:
    def register(make: Callable[[Path], Spec]) -> Callable[[Path], Spec]:
        CASES.append(Case(kind, make.__name__.removeprefix("case_"), make))
        return make
    return register


# --- building inputs ----------------------------------------------------------------------------------

def copy(src: Path, dst: Path) -> Path:
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
    return dst


def compare(npu: Path, bench: Path, out: Path, *more: str) -> list[str]:
    return ["compare", str(npu), str(bench), "-o", str(out), "-q", *more]


def gzip_bomb(path: Path, inflated: int = 3 * GIB, prefix: bytes = b"") -> Path:
    """A gzip file of about inflated / 1000 bytes: concatenated members of 16 MiB of zeros (3 GiB -> 3 MB)."""
    member = gzip.compress(b"\0" * (16 << 20), 6)
    with path.open("wb") as f:
        if prefix:
            f.write(gzip.compress(prefix))
        for _ in range(inflated // (16 << 20)):
            f.write(member)
    return path


def tensor_dump(folder: Path, pt: Path | bytes, *, shape: list[int], data_name: str = "w.pt") -> Path:
    """A one-call msprobe tensor dump whose weight is `pt` (a real .pt file, or crafted bytes)."""
    stats = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": 0.19167961180210114,
             "Min": -0.19190657138824463, "Mean": 0.003984455484896898, "Norm": 1.575226068496704,
             "requires_grad": True, "data_name": data_name}
    x = dict(stats, shape=[8, 3, 3, 3], data_name="x.pt")
    call = {"input_args": [x, stats], "input_kwargs": {}, "output": []}
    doc = {"task": "tensor", "level": "L1", "framework": "pytorch", "dump_data_dir": str(folder / "dump_tensor_data"),
           "data": {"Functional.conv2d.0.forward": call}}
    (folder / "dump_tensor_data").mkdir(parents=True)
    (folder / "dump.json").write_text(json.dumps(doc, indent=1))
    (folder / "construct.json").write_text("{}")
    (folder / "stack.json").write_text("{}")
    shutil.copy(WEIGHT, folder / "dump_tensor_data" / "x.pt")
    target = folder / "dump_tensor_data" / "w.pt"
    if isinstance(pt, bytes):
        target.write_bytes(pt)
    else:
        shutil.copy(pt, target)
    return folder


def tensor_pair(root: Path, npu_pt: Path | bytes, *, shape: list[int] | None = None, **kw) -> tuple[Path, Path]:
    bench = tensor_dump(root / "bench", WEIGHT, shape=[8, 3, 3, 3])
    npu = tensor_dump(root / "npu", npu_pt, shape=shape or [8, 3, 3, 3], **kw)
    return npu, bench


def thresholds(root: Path, text: str, suffix: str = ".toml") -> tuple[Path, list[str]]:
    path = root / f"thresholds{suffix}"
    path.write_text(text)
    return path, ["--thresholds", str(path)]


def atc(root: Path, change: Callable[[dict], None]) -> Path:
    doc = json.loads(ATC_JSON.read_text())
    change(doc)
    path = root / "model.json"
    path.write_text(json.dumps(doc))
    return path


def deep(depth: int, open_: str = "[", close: str = "]", inner: str = "1") -> str:
    return open_ * depth + inner + close * depth


# --- outputs: -o never touches an input, a link, a device ---------------------------------------------

@case("outputs")
def case_output_is_the_thresholds_file(root: Path) -> Spec:
    given, opts = thresholds(root, "atol = 1e-7\n")
    return Spec(compare(PERTURB, BASELINE, given, *opts), "error", "is the input", [given])


@case("outputs")
def case_output_is_the_mapping_file(root: Path) -> Spec:
    given = copy(GPT / "mapping.yaml", root / "mapping.yaml")
    return Spec(compare(GPT / "npu", GPT / "bench", given, f"--layer-mapping={given}"), "error", "is the input",
                [given])


@case("outputs")
def case_output_is_the_matches_file(root: Path) -> Spec:
    given = root / "cmp.matches.json"
    given.write_text(json.dumps({"format": "graphcmp.matches", "version": 1, "matches": [], "unmatches": []}))
    return Spec(compare(PERTURB, BASELINE, given, "--matches", str(given)), "error", "is the input", [given])


@case("outputs")
def case_output_is_the_npu_dump_file(root: Path) -> Spec:
    npu = copy(PERTURB, root / "npu")
    return Spec(compare(npu, BASELINE, npu / "dump.json"), "error", "lies inside the input", [npu])


@case("outputs")
def case_planted_part_link_to_an_input(root: Path) -> Spec:
    npu = copy(PERTURB, root / "npu")
    os.symlink(npu / "dump.json", root / "cmp.json.part")
    return Spec(compare(npu, BASELINE, root / "cmp.json"), "ok", "", [npu])


@case("outputs")
def case_output_is_a_character_device(root: Path) -> Spec:
    os.symlink(os.devnull, root / "out.json")  # resolves to the device; a regression replaces only the link
    return Spec(compare(PERTURB, BASELINE, root / "out.json"), "error", "is a character device",
                keep=[Path(os.devnull)])


@case("outputs")
def case_output_is_a_fifo(root: Path) -> Spec:
    os.mkfifo(root / "out.json")
    return Spec(compare(PERTURB, BASELINE, root / "out.json"), "error", "is a FIFO", keep=[root / "out.json"])


@case("outputs")
def case_export_over_its_input(root: Path) -> Spec:
    given = copy(DATA / "vis_tf_small" / "compare_v812.vis.gz", root / "compare.vis.gz")
    return Spec(["export", str(given), "--to", "vis", "-o", str(given)], "error", "is the input", [given])


@case("outputs")
def case_build_output_through_a_planted_link(root: Path) -> Spec:
    npu = copy(PERTURB, root / "npu")
    os.symlink(npu / "dump.json", root / "run.json.part")
    return Spec(["build", str(npu), "-o", str(root / "run.json"), "-q"], "ok", "written:", [npu])


@case("outputs")
def case_job_output_named_like_a_file(root: Path) -> Spec:
    parallel = copy(DATA / "parallel", root / "parallel")
    return Spec(compare(parallel / "tp2pp2", parallel / "tp1", root / "mix.json"), "error",
                "-o names a results folder", [parallel])


# --- bombs: every inflation bounded -------------------------------------------------------------------

@case("bombs")
def case_gzip_bomb_as_a_ge_graph(root: Path) -> Spec:
    bomb = gzip_bomb(root / "ge_proto_00001_Build.txt.gz", prefix=b'graph {\n  name: "g"\n  op {\n')
    return Spec(compare(bomb, GE_TEXT, root / "cmp.json", "--format", "ge"), "error", "inflates to more than",
                [bomb])


@case("bombs")
def case_gzip_bomb_detected_as_ge(root: Path) -> Spec:
    head = GE_TEXT.read_bytes()[:4096]
    bomb = gzip_bomb(root / "graph.txt.gz", prefix=head)
    return Spec(compare(bomb, GE_TEXT, root / "cmp.json"), "error", "inflates to more than", [bomb])


@case("bombs")
def case_vis_gz_bomb(root: Path) -> Spec:
    bomb = gzip_bomb(root / "compare.vis.gz", prefix=b'{"NPU": {"node": {')
    return Spec(["info", str(bomb)], "error", "inflates to more than", [bomb])


@case("bombs")
def case_vis_db_gz_bomb(root: Path) -> Spec:
    db = root / "seed.vis.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE tb_nodes (id TEXT)")
    bomb = gzip_bomb(root / "compare.vis.db.gz", prefix=db.read_bytes())
    db.unlink()
    return Spec(["info", str(bomb)], "error", "inflates to more than", [bomb])


@case("bombs")
def case_pt_member_bomb(root: Path) -> Spec:
    numel = (256 << 20) // 4
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        pickled = make_pt(tensor_record("FloatStorage", numel, (numel,), (1,)))
        with zipfile.ZipFile(io.BytesIO(pickled)) as src:
            for item in src.infolist():
                archive.writestr(item, src.read(item.filename))
        archive.writestr("archive/data/0", b"\0" * (numel * 4), compress_type=zipfile.ZIP_DEFLATED)
    npu, bench = tensor_pair(root, buffer.getvalue(), shape=[numel])
    return Spec(compare(npu, bench, root / "cmp.json"), "error", "compression bomb", [npu, bench])


@case("bombs")
def case_pt_stride_zero_storage(root: Path) -> Spec:
    size = (30000, 30000)  # 900 M float32 elements (3.6 GB) over one stored element
    npu, bench = tensor_pair(root, make_pt(tensor_record("FloatStorage", 1, size, (0, 0)), {"0": b"\0" * 4}),
                             shape=list(size))
    return Spec(compare(npu, bench, root / "cmp.json"), "error", "broadcast view", [npu, bench])


@case("bombs")
def case_pt_pickle_member_bomb(root: Path) -> Spec:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02" + b"\0" * (256 << 20), compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr("archive/byteorder", "little")
    npu, bench = tensor_pair(root, buffer.getvalue())
    return Spec(compare(npu, bench, root / "cmp.json"), "error", "compression bomb", [npu, bench])


# --- special files: never opened as files -------------------------------------------------------------

@case("special")
def case_dev_zero_as_the_npu_run(root: Path) -> Spec:
    return Spec(compare(Path("/dev/zero"), BASELINE, root / "cmp.json"), "error", "is a character device",
                keep=[Path("/dev/zero")])


@case("special")
def case_dev_zero_with_a_format(root: Path) -> Spec:
    return Spec(compare(Path("/dev/zero"), GE_TEXT, root / "cmp.json", "--format", "ge"), "error",
                "is a character device", keep=[Path("/dev/zero")])


@case("special")
def case_fifo_as_the_npu_run(root: Path) -> Spec:
    os.mkfifo(root / "npu.json")
    return Spec(compare(root / "npu.json", BASELINE, root / "cmp.json"), "error", "is a FIFO",
                keep=[root / "npu.json"])


def replaced(path: Path, make: Callable[[Path], object]) -> Path:
    """`path`, a file of a copied input, replaced by what `make` creates there (a FIFO, a link)."""
    path.unlink()
    make(path)
    return path


@case("special")
def case_fifo_as_dump_json(root: Path) -> Spec:
    npu = copy(PERTURB, root / "npu")
    replaced(npu / "dump.json", os.mkfifo)
    return Spec(compare(npu, BASELINE, root / "cmp.json"), "error", "is a FIFO", keep=[npu / "dump.json"])


@case("special")
def case_fifo_as_stack_json(root: Path) -> Spec:
    npu = copy(PERTURB, root / "npu")
    replaced(npu / "stack.json", os.mkfifo)
    return Spec(compare(npu, BASELINE, root / "cmp.json"), "error", "stack.json: is a FIFO", keep=[npu / "stack.json"])


@case("special")
def case_dump_json_links_to_dev_zero(root: Path) -> Spec:
    npu = copy(PERTURB, root / "npu")
    replaced(npu / "dump.json", lambda path: os.symlink("/dev/zero", path))
    return Spec(compare(npu, BASELINE, root / "cmp.json"), "error", "is a character device", [npu])


@case("special")
def case_symlink_loop_as_the_npu_run(root: Path) -> Spec:
    os.symlink(root / "b", root / "a")
    os.symlink(root / "a", root / "b")
    return Spec(compare(root / "a", BASELINE, root / "cmp.json"), "error", "form a loop")


@case("special")
def case_symlink_loop_as_dump_json(root: Path) -> Spec:
    npu = copy(PERTURB, root / "npu")
    replaced(npu / "dump.json", lambda path: os.symlink(path, path))
    return Spec(compare(npu, BASELINE, root / "cmp.json"), "error", "loop", [npu])


@case("special")
def case_dev_zero_as_thresholds(root: Path) -> Spec:
    return Spec(compare(PERTURB, BASELINE, root / "cmp.json", "--thresholds", "/dev/zero"), "error",
                "is a character device", keep=[Path("/dev/zero")])


@case("special")
def case_fifo_as_mapping_file(root: Path) -> Spec:
    os.mkfifo(root / "mapping.yaml")
    return Spec(compare(GPT / "npu", GPT / "bench", root / "cmp.json", f"--layer-mapping={root / 'mapping.yaml'}"),
                "error", "is a FIFO", keep=[root / "mapping.yaml"])


@case("special")
def case_fifo_as_a_tensor_file(root: Path) -> Spec:
    npu, bench = tensor_pair(root, WEIGHT)
    replaced(npu / "dump_tensor_data" / "w.pt", os.mkfifo)
    return Spec(compare(npu, bench, root / "cmp.json"), "error", "is a FIFO", [bench],
                keep=[npu / "dump_tensor_data" / "w.pt"])


@case("special")
def case_fifo_as_a_kernel_dump_file(root: Path) -> Spec:
    dump = copy(KERNELS, root / "kernels")
    victim = replaced(next((dump / "npu").rglob("*.npy")), os.mkfifo)
    return Spec(compare(dump / "npu", dump / "bench", root / "cmp.json"), "error", "is a FIFO", keep=[victim])


@case("special")
def case_vis_file_links_to_dev_zero(root: Path) -> Spec:
    os.symlink("/dev/zero", root / "compare.vis")
    return Spec(["info", str(root / "compare.vis")], "error", "is a character device", keep=[Path("/dev/zero")])


# --- nesting: deep structures end in one line, not a RecursionError -----------------------------------

@case("nesting")
def case_thresholds_json_nested_2000_deep(root: Path) -> Spec:
    given, opts = thresholds(root, '{"atol": ' + deep(2000) + "}", ".json")
    return Spec(compare(PERTURB, BASELINE, root / "cmp.json", *opts), "error", "thresholds", [given])


@case("nesting")
def case_thresholds_toml_nested_2000_deep(root: Path) -> Spec:
    given, opts = thresholds(root, "atol = " + deep(2000) + "\n")
    return Spec(compare(PERTURB, BASELINE, root / "cmp.json", *opts), "error", "thresholds", [given])


@case("nesting")
def case_mapping_json_nested_2000_deep(root: Path) -> Spec:
    path = root / "api.json"
    path.write_text(deep(2000, '{"a": ', "}"))
    return Spec(compare(GPT / "npu", GPT / "bench", root / "cmp.json", f"--api-mapping={path}"), "error",
                "api.json", [path])


@case("nesting")
def case_mapping_yaml_nested_2000_deep(root: Path) -> Spec:
    path = root / "mapping.yaml"
    path.write_text(deep(2000))
    return Spec(compare(GPT / "npu", GPT / "bench", root / "cmp.json", f"--layer-mapping={path}"), "error",
                "mapping.yaml", [path])


@case("nesting")
def case_yaml_alias_bomb(root: Path) -> Spec:
    lines = ["a: &a [x, y, z, w, v, u, t, s, r]"]
    for k, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[k]
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    path = root / "mapping.yaml"
    path.write_text("\n".join(lines) + "\n")  # ~570 bytes; 9^9 leaves when expanded
    return Spec(compare(GPT / "npu", GPT / "bench", root / "cmp.json", f"--layer-mapping={path}"), "error",
                "YAML alias", [path])


@case("nesting")
def case_recursive_yaml(root: Path) -> Spec:
    path = root / "mapping.yaml"
    path.write_text("TargetBlock: &a {x: *a}\n")
    return Spec(compare(GPT / "npu", GPT / "bench", root / "cmp.json", f"--layer-mapping={path}"), "error",
                "mapping.yaml", [path])


@case("nesting")
def case_atc_json_nested_2000_deep(root: Path) -> Spec:
    path = root / "model.json"
    path.write_text('{"graph": [{"op": [{"name": "a", "attr": ' + deep(2000) + "}]}]}")
    return Spec(compare(path, ATC_JSON, root / "cmp.json"), "error", "model.json", [path])


@case("nesting")
def case_ge_text_nested_2000_deep(root: Path) -> Spec:
    path = root / "ge_proto_00001_Build.txt"
    nested = 'func { attr { key: "x" value { ' * 2000 + "}}}" * 2000
    path.write_text('graph {\n  name: "g"\n  op {\n    name: "a"\n    type: "T"\n    attr {\n      key: "k"\n'
                    f"      value {{ {nested} }}\n    }}\n  }}\n}}\n")
    return Spec(compare(path, GE_TEXT, root / "cmp.json"), "error", "nested too deeply", [path])


@case("nesting")
def case_matches_json_nested_2000_deep(root: Path) -> Spec:
    path = root / "x.matches.json"
    path.write_text('{"format": "graphcmp.matches", "matches": ' + deep(2000) + "}")
    return Spec(compare(PERTURB, BASELINE, root / "cmp.json", "--matches", str(path)), "error", "x.matches.json",
                [path])


# --- big integers ---------------------------------------------------------------------------------------

@case("bigints")
def case_thresholds_with_a_400_digit_integer(root: Path) -> Spec:
    given, opts = thresholds(root, "atol = " + "9" * 400 + "\n")
    return Spec(compare(PERTURB, BASELINE, root / "cmp.json", *opts), "error", "400 digits", [given])


@case("bigints")
def case_thresholds_json_with_a_5000_digit_integer(root: Path) -> Spec:
    given, opts = thresholds(root, '{"atol": ' + "9" * 5000 + "}", ".json")
    return Spec(compare(PERTURB, BASELINE, root / "cmp.json", *opts), "error", "thresholds", [given])


@case("bigints")
def case_atc_op_id_of_400_digits(root: Path) -> Spec:
    path = atc(root, lambda d: d["graph"][0]["op"][0].update(id=int("9" * 400)))
    return Spec(compare(path, ATC_JSON, root / "cmp.json"), "error", "model.json", [path])


@case("bigints")
def case_atc_dims_of_400_digits(root: Path) -> Spec:
    path = atc(root, lambda d: d["graph"][0]["op"][1]["output_desc"][0].update(shape={"dim": [int("9" * 400)]}))
    return Spec(compare(path, ATC_JSON, root / "cmp.json"), "error", "model.json", [path])


@case("bigints")
def case_atc_dims_of_400_digits_as_text(root: Path) -> Spec:
    path = atc(root, lambda d: d["graph"][0]["op"][1]["output_desc"][0].update(shape={"dim": ["9" * 400]}))
    return Spec(compare(path, ATC_JSON, root / "cmp.json", "--format", "ge"), "error", "shape", [path])


@case("bigints")
def case_mapping_with_a_5000_digit_integer(root: Path) -> Spec:
    path = root / "mapping.yaml"
    path.write_text("TargetBlock:\n  attn: " + "9" * 5000 + "\n")  # read as the name it is, which nothing has
    return Spec(compare(GPT / "npu", GPT / "bench", root / "cmp.json", f"--layer-mapping={path}"), "inconclusive",
                "no child 'attn' under any TargetBlock", [path])


@case("bigints")
def case_ir_dims_of_400_digits(root: Path) -> Spec:
    source = IR / "13_optimize_0566.ir"
    path = root / source.name
    path.write_text(source.read_text().replace("(2, 1, 32, 32)", "(2, 1, 32, " + "9" * 400 + ")"))
    return Spec(compare(path, path, root / "cmp.json"), "ok", "verdict: agree", [path])


# --- thresholds: malformed is refused, never "everything passes" ------------------------------------

_RULE = '{{"metric": "{m}", "warn": {w}, "error": {e}}}'


def _thresholds_case(text: str, says: str, suffix: str = ".json") -> Callable[[Path], Spec]:
    def make(root: Path) -> Spec:
        given, opts = thresholds(root, text, suffix)
        return Spec(compare(PERTURB, BASELINE, root / "cmp.json", *opts), "error", says, [given])
    return make


for _name, _text, _says in [
    ("null", "null", "expected a table of thresholds"),
    ("empty_list", "[]", "expected a table of thresholds"),
    ("unknown_metric", '{"rules": {"statistics": [' + _RULE.format(m="cosin", w=0.1, e=0.2) + "]}}",
     "unknown metric"),
    ("tensor_metric_for_statistics", '{"rules": {"statistics": [' + _RULE.format(m="cosine", w=0.99, e=0.9) + "]}}",
     "unknown metric"),
    ("atol_1e999", '{"atol": 1e999}', "finite number"),
    ("typo_task", '{"rules": {"statistic": [' + _RULE.format(m="rel_err", w=0.1, e=0.2) + "]}}", "unknown task"),
    ("warn_beyond_error", '{"rules": {"statistics": [' + _RULE.format(m="rel_err", w=0.5, e=0.01) + "]}}",
     "lies beyond error"),
    ("negative_limit", '{"rules": {"statistics": [' + _RULE.format(m="rel_err", w=-1, e=-0.5) + "]}}",
     "outside"),
    ("empty_rules", '{"rules": {"statistics": []}}', "at least one rule"),
    ("rule_not_a_table", '{"rules": {"statistics": [1]}}', "each rule is a table"),
    ("wrong_direction", '{"rules": {"tensor": [{"metric": "cosine", "warn": 0.99, "error": 0.9, '
     '"higher_is_better": false}]}}', "higher_is_better"),
    ("string_number", '{"atol": "1e-7"}', "expected a number"),
    ("noise_quantile_zero", '{"noise": {"quantile": 0}}', "outside"),
    ("noise_min_samples_fraction", '{"noise": {"min_samples": 2.5}}', "whole number"),
    ("unknown_rule_key", '{"rules": {"statistics": [{"metric": "rel_err", "warn": 0.1, "eror": 0.2}]}}',
     "unknown key"),
    ("toml_inf", "atol = inf\n", "finite number"),
]:
    CASES.append(Case("thresholds", _name, _thresholds_case(_text, _says, ".toml" if _name.startswith("toml") else
                                                             ".json")))


# --- atc JSON of wrong types --------------------------------------------------------------------------

def _atc_case(change: Callable[[dict], None], says: str) -> Callable[[Path], Spec]:
    def make(root: Path) -> Spec:
        path = atc(root, change)
        return Spec(compare(path, ATC_JSON, root / "cmp.json", "--format", "ge"), "error", says, [path])
    return make


def _op(k: int = 0) -> Callable[[dict], dict]:
    return lambda d: d["graph"][0]["op"][k]


for _name, _change, _says in [
    ("input_is_a_number", lambda d: _op()(d).update(input=5), '"input"'),
    ("name_is_an_object", lambda d: _op()(d).update(name={"a": 1}), '"name"'),
    ("type_is_a_list", lambda d: _op()(d).update(type=["Conv2D"]), '"type"'),
    ("output_desc_is_text", lambda d: _op()(d).update(output_desc="x"), '"output_desc"'),
    ("shape_is_a_list", lambda d: _op(1)(d)["output_desc"][0].update(shape=[1, 2]), "shape"),
    ("dims_are_words", lambda d: _op(1)(d)["output_desc"][0].update(shape={"dim": ["a"]}), "shape"),
    ("dtype_is_a_list", lambda d: _op(1)(d)["output_desc"][0].update(dtype=[1]), "dtype"),
    ("attr_is_text", lambda d: _op()(d).update(attr="x"), '"attr"'),
    ("attr_list_is_a_number", lambda d: _op()(d).update(attr=[{"key": "k", "value": {"list": {"s": 5}}}]), '"attr"'),
    ("graph_is_a_list_of_numbers", lambda d: d.update(graph=[1, 2]), "no \"graph\" list"),
    ("graph_name_is_a_number", lambda d: d["graph"][0].update(name=7), '"name"'),
    ("subgraph_name_is_text", lambda d: _op()(d).update(subgraph_name="g"), '"subgraph_name"'),
]:
    CASES.append(Case("atc_json", _name, _atc_case(_change, _says)))


# --- truncation: an error, or a salvage that says what it kept ----------------------------------------

def _cut(src: Path, dst: Path, fraction: float) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * fraction)])
    return dst


@case("truncation")
def case_ir_text_cut_in_half(root: Path) -> Spec:
    source = next(p for p in sorted(IR.glob("*.ir")) if b"# Total subgraphs" in p.read_bytes()[:4096])
    cut = _cut(source, root / source.name, 0.5)
    whole = copy(source, root / "whole" / source.name)
    return Spec(compare(cut, whole, root / "cmp.json"), "inconclusive", "cut short", [cut, whole])


@case("truncation")
def case_ir_text_cut_at_a_line_end(root: Path) -> Spec:
    source = next(p for p in sorted(IR.glob("*.ir")) if b"# Total subgraphs" in p.read_bytes()[:4096])
    text = source.read_bytes()
    cut = root / source.name
    cut.write_bytes(text[: text.rindex(b"\n", 0, len(text) * 2 // 3) + 1])
    whole = copy(source, root / "whole" / source.name)
    return Spec(compare(cut, whole, root / "cmp.json"), "inconclusive", "cut short", [cut, whole])


@case("truncation")
def case_actor_set_ir_cut_mid_line(root: Path) -> Spec:
    source = next(p for p in sorted(IR.glob("*.ir")) if p.read_bytes().startswith(b"%"))
    cut = _cut(source, root / source.name, 0.6)
    if cut.read_bytes().endswith(b"\n"):
        cut.write_bytes(cut.read_bytes()[:-3])
    whole = copy(source, root / "whole" / source.name)
    return Spec(compare(cut, whole, root / "cmp.json"), "inconclusive", "cut short", [cut, whole])


@case("truncation")
def case_pb_cut_in_half(root: Path) -> Spec:
    source = next(IR.glob("*.pb"))
    cut = _cut(source, root / source.name, 0.5)
    return Spec(compare(cut, source, root / "cmp.json", "--format", "mindspore_ir"), "error", source.name, [cut])


@case("truncation")
def case_gzip_ge_graph_cut_short(root: Path) -> Spec:
    packed = root / "g.txt.gz"
    packed.write_bytes(gzip.compress(GE_TEXT.read_bytes())[:-200])
    return Spec(compare(packed, GE_TEXT, root / "cmp.json", "--format", "ge"), "error", "g.txt.gz", [packed])


@case("truncation")
def case_dump_json_cut_short(root: Path) -> Spec:
    npu = copy(BASELINE, root / "npu")
    _cut(BASELINE / "dump.json", npu / "dump.json", 0.8)
    return Spec(compare(npu, BASELINE, root / "cmp.json"), "inconclusive", "incomplete", [npu])


# --- tensors: the file the dump names, of the shape it records ---------------------------------------

@case("tensors")
def case_tensor_pair_sanity(root: Path) -> Spec:
    npu, bench = tensor_pair(root, WEIGHT)
    return Spec(compare(npu, bench, root / "cmp.json"), "ok", "verdict: agree", [npu, bench])


@case("tensors")
def case_pt_of_another_shape(root: Path) -> Spec:
    npu, bench = tensor_pair(root, OTHER)
    return Spec(compare(npu, bench, root / "cmp.json"), "error", "but the dump records [8, 3, 3, 3]", [npu, bench])


@case("tensors")
def case_data_name_climbs_out(root: Path) -> Spec:
    copy(WEIGHT, root / "victim.pt")
    npu, bench = tensor_pair(root, WEIGHT, data_name="../../victim.pt")
    return Spec(compare(npu, bench, root / "cmp.json"), "error", "outside the dump folder", [npu, bench])


@case("tensors")
def case_data_name_absolute(root: Path) -> Spec:
    victim = copy(WEIGHT, root / "victim.pt")
    npu, bench = tensor_pair(root, WEIGHT, data_name=str(victim))
    return Spec(compare(npu, bench, root / "cmp.json"), "error", "outside the dump folder", [npu, bench, victim])


@case("tensors")
def case_pt_holding_a_pickle_payload(root: Path) -> Spec:
    payload = b"\x80\x02cos\nsystem\nX\x05\x00\x00\x00touch\x85R."
    npu, bench = tensor_pair(root, make_pt(payload))
    return Spec(compare(npu, bench, root / "cmp.json"), "error", "refused to load 'os.system'", [npu, bench])


# --- honest results: too little compared is never agreement ------------------------------------------

@case("honest")
def case_dump_without_data(root: Path) -> Spec:
    npu = root / "npu"
    npu.mkdir()
    (npu / "dump.json").write_text('{"data": {}}')
    return Spec(compare(npu, BASELINE, root / "cmp.json"), "inconclusive", "holds no node with data", [npu])


@case("honest")
def case_graph_against_a_dump(root: Path) -> Spec:
    return Spec(compare(GE_TEXT, BASELINE, root / "cmp.json"), "inconclusive", "no tensor pair was compared")


@case("honest")
def case_mindspore_against_pytorch(root: Path) -> Spec:
    return Spec(compare(DATA / "mindspore_cnn" / "bench", DATA / "pytorch_cnn" / "bench", root / "cmp.json"),
                "inconclusive", "--layer-mapping --api-mapping")


@case("honest")
def case_renamed_modules_without_mapping(root: Path) -> Spec:
    return Spec(compare(GPT / "npu", GPT / "bench", root / "cmp.json"), "inconclusive", "--layer-mapping FILE")


# --- npz results (the default output): read as bounded as any other input ------------------------------

def npz_result(root: Path, npu: Path = PERTURB, bench: Path = BASELINE) -> Path:
    """A real comparison saved as the npz container."""
    from graphcmp.core.compare import compare_paths
    from graphcmp.core.report import save_report

    path = root / "cmp.npz"
    save_report(compare_paths(npu, bench), path)
    return path


def rezip(src: Path, dst: Path, change: Callable[[str, bytes], tuple[bytes, int]]) -> Path:
    """A copy of the container `src` whose members `change` rewrites (data, compress type)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data, how = change(info.filename, zin.read(info.filename))
            zout.writestr(zipfile.ZipInfo(info.filename), data, compress_type=how)
    return dst


@case("outputs")
def case_default_output_is_npz(root: Path) -> Spec:
    return Spec(["compare", str(PERTURB), str(BASELINE), "-q"], "ok", "verdict: differ")


@case("special")
def case_fifo_as_an_npz_result(root: Path) -> Spec:
    os.mkfifo(root / "cmp.npz")
    return Spec(["diverge", str(root / "cmp.npz")], "error", "is a FIFO", keep=[root / "cmp.npz"])


@case("bombs")
def case_npz_member_deflated_from_a_bomb(root: Path) -> Spec:
    src, bomb = npz_result(root), root / "bomb.npz"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bomb, "w") as zout:
        for info in zin.infolist():
            member = zipfile.ZipInfo(info.filename)
            member.compress_type = zipfile.ZIP_DEFLATED
            with zout.open(member, "w", force_zip64=True) as f:
                f.write(zin.read(info.filename))
                for _ in range(GIB // (16 << 20) if info.filename == "npu.nodes.parent.npy" else 0):
                    f.write(b"\0" * (16 << 20))  # 1 GiB of zeros deflated to about 1 MB
    return Spec(["info", str(bomb)], "error", "is compressed", [bomb])


@case("bombs")
def case_npz_column_header_claims_a_trillion_values(root: Path) -> Spec:
    src = npz_result(root)

    def grow(name: str, data: bytes) -> tuple[bytes, int]:
        if name == "npu.tensors.stats.values.npy":
            data = data.replace(b"'shape': (", b"'shape': (1000000000000, ", 1)
        return data, zipfile.ZIP_STORED
    bad = rezip(src, root / "big.npz", grow)
    return Spec(["diverge", str(bad)], "error", "field npu.tensors.stats", [bad])


@case("nesting")
def case_npz_document_nested_2000_deep(root: Path) -> Spec:
    src = npz_result(root)
    bad = rezip(src, root / "deep.npz", lambda name, data: (
        deep(2000).encode() if name == "document.json" else data, zipfile.ZIP_STORED))
    return Spec(["info", str(bad)], "error", "document.json", [bad])


@case("truncation")
def case_npz_result_cut_short(root: Path) -> Spec:
    src = npz_result(root)
    cut = root / "cut.npz"
    cut.write_bytes(src.read_bytes()[: src.stat().st_size * 2 // 3])
    return Spec(["info", str(cut)], "error", "not a graphcmp result", [cut])


@case("honest")
def case_inconclusive_npz_result_stays_inconclusive(root: Path) -> Spec:
    saved = npz_result(root, GE_TEXT, BASELINE)
    return Spec(["diverge", str(saved)], "inconclusive", "no tensor pair was compared", [saved])


# --- dumps: msprobe dump content that must not read as something it is not ----------------------------

def damaged_dump(root: Path, change: Callable[[str], str | bytes] | None = None, *, compact: bool = False,
                 construct: Callable[[dict], None] | None = None) -> Path:
    """A copy of the real baseline dump (msprobe's indent=1 layout, or compact) with dump.json's text changed
    by `change` (str -> str or bytes) and construct.json by `construct`."""
    run = copy(BASELINE, root / "bench")
    text = json.dumps(json.loads((run / "dump.json").read_text()), indent=None if compact else 1)
    changed = change(text) if change else text
    (run / "dump.json").write_bytes(changed if isinstance(changed, bytes) else changed.encode("utf-8", "surrogatepass"))
    if construct is not None:
        parents = json.loads((run / "construct.json").read_text())
        construct(parents)
        (run / "construct.json").write_text(json.dumps(parents, indent=1))
    return run


EMBEDDING = "Functional.embedding.0.forward"
ADD = "Tensor.__add__.0.forward"
FIRST_MAX = '"Max": 3.902043104171753'  # the embedding weight's Max, the first float32 statistic of the dump


def _dump_case(says: str, change: Callable[[str], str | bytes] | None = None, *, expect: str = "error",
               compact: bool = False, construct: Callable[[dict], None] | None = None) -> Callable[[Path], Spec]:
    def make(root: Path) -> Spec:
        run = damaged_dump(root, change, compact=compact, construct=construct)
        return Spec(compare(BASELINE, run, root / "cmp.npz"), expect, says, [run])
    return make


def _renamed(new: str | bytes) -> Callable[[str], str | bytes]:
    if isinstance(new, bytes):
        return lambda text: text.encode().replace(EMBEDDING.encode(), new)
    return lambda text: text.replace(EMBEDDING, new)


def _twice_in_data(text: str) -> str:
    """The first record of "data" again as the last (msprobe's indent=1 layout)."""
    start = text.index(f'"{EMBEDDING}"')
    record = text[start: text.index('\n  "', start)].rstrip(",")
    last = text.rindex('\n  "')
    return text[: last + 3] + record + ",\n  " + text[last + 3:]


_DUMP_CASES = {
    "name_not_utf8_indented": _dump_case("line 7: bytes that are not UTF-8 (ff)",
                                         _renamed(b"Functional.emb\xff\xfe.0.forward")),
    "name_not_utf8_compact": _dump_case("line 1: bytes that are not UTF-8", _renamed(b"Functional.emb\xff.0.forward"),
                                        compact=True),
    "name_with_a_lone_surrogate_indented": _dump_case("lone UTF-16 surrogate (\\ud800",
                                                      _renamed("Functional.emb\\ud800.0.forward")),
    "name_with_a_lone_surrogate_compact": _dump_case("lone UTF-16 surrogate (\\udc00",
                                                     _renamed("Functional.emb\\udc00.0.forward"), compact=True),
    "name_with_surrogate_bytes": _dump_case("bytes that are not UTF-8", _renamed("Functional.emb\ud800.0.forward")),
    "statistic_is_text": _dump_case(f"'{EMBEDDING}' input 1: Max is \"abc\", expected a number",
                                    lambda t: t.replace(FIRST_MAX, '"Max": "abc"', 1)),
    "statistic_is_text_compact": _dump_case("Max is \"abc\"", lambda t: t.replace(FIRST_MAX, '"Max": "abc"', 1),
                                            compact=True),
    "statistic_is_true_on_a_float_tensor": _dump_case("Max is true, expected a number",
                                                      lambda t: t.replace(FIRST_MAX, '"Max": true', 1)),
    "statistic_is_a_list": _dump_case("Max is [1,2]", lambda t: t.replace(FIRST_MAX, '"Max": [1, 2]', 1)),
    "statistic_is_an_object": _dump_case("Mean is {\"v\":1}",
                                         lambda t: t.replace('"Mean": -0.020885473117232323', '"Mean": {"v": 1}', 1)),
    "node_id_twice_in_data": _dump_case(f"'{EMBEDDING}' is recorded twice in \"data\"", _twice_in_data),
    "node_id_twice_in_data_compact": _dump_case("'Tensor.__add__.0.forward' is recorded twice",
                                                lambda t: t.replace('"data": {', f'"data": {{"{ADD}": {{}}, ', 1),
                                                compact=True),
    "parent_not_listed": _dump_case("parent 'Module.nowhere.Foo.forward.0' named but not listed", expect="inconclusive",
                                    construct=lambda c: c.__setitem__(EMBEDDING, "Module.nowhere.Foo.forward.0")),
    "parent_cycle": _dump_case("construct.json: parent links form a cycle",
                               construct=lambda c: c.__setitem__("Module.embedding.Embedding.forward.0", EMBEDDING)),
    "parent_is_itself": _dump_case("construct.json: parent links form a cycle through 'Tensor.__add__.0.forward'",
                                   construct=lambda c: c.__setitem__(*["Tensor.__add__.0.forward"] * 2)),
}
for _name, _make in _DUMP_CASES.items():
    _make.__name__ = _name
    case("dumps")(_make)


@case("dumps")
def case_node_id_twice_in_construct_json(root: Path) -> Spec:
    run = copy(BASELINE, root / "bench")
    text = (run / "construct.json").read_text()
    (run / "construct.json").write_text(text.replace("{\n", '{\n "Tensor.__add__.0.forward": null,\n', 1))
    return Spec(compare(BASELINE, run, root / "cmp.npz"), "error",
                "construct.json: 'Tensor.__add__.0.forward' is a key twice", [run])


@case("dumps")
def case_bool_tensor_statistics_are_read(root: Path) -> Spec:  # sanity: msprobe writes true/false for bool tensors
    pair = DATA / "noise_softmax_scale_bf16"
    return Spec(compare(pair / "bench", pair / "bench", root / "cmp.npz"), "ok", "verdict: agree")


# --- results: damaged result files (npz, JSON, .vis.db), each a one-line error naming file and field ------

@functools.cache
def _good_result(fmt: str) -> Path:
    """A real comparison of the small transformer (perturbed against baseline), saved once per session."""
    from graphcmp.core.compare import compare_paths
    from graphcmp.core.report import save_report

    path = Path(tempfile.mkdtemp(prefix="graphcmp_corpus_")) / f"cmp.{fmt}"
    save_report(compare_paths(PERTURB, BASELINE), path)
    return path


def _cell(doc: dict, dotted: str, row: int, value: int) -> None:
    """Set one value of a column (an npz array widened to hold it, or a JSON list)."""
    *head, last = dotted.split(".")
    for key in head:
        doc = doc[key]
    column = doc[last]
    if isinstance(column, list):
        column[row] = value
        return
    import numpy as np
    dtype = column.dtype
    if not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
        dtype = np.int64
    column = np.array(column, dtype)
    column[row] = value
    doc[last] = column


def _shortened(doc: dict, dotted: str) -> None:
    *head, last = dotted.split(".")
    for key in head:
        doc = doc[key]
    doc[last] = doc[last][:-1]


def damaged_result(root: Path, fmt: str, damage: Callable[[dict], None]) -> Path:
    """The real result as npz or JSON with `damage` applied to its document."""
    from graphcmp.core.npzio import read_npz, write_npz

    good = _good_result(fmt)
    path = root / f"bad.{fmt}"
    if fmt == "json":
        doc = json.loads(good.read_text())
        damage(doc)
        path.write_text(json.dumps(doc))
    else:
        doc = read_npz(good)
        damage(doc)
        write_npz(path, doc)
    return path


def _result_case(fmt: str, command: str, damage: Callable[[dict], None], says: str) -> Callable[[Path], Spec]:
    def make(root: Path) -> Spec:
        bad = damaged_result(root, fmt, damage)
        argv = {"export": ["export", str(bad), "--to", "vis", "-o", str(root / "out.vis")],
                "serve": ["serve", str(bad), "--port", "0"]}.get(command, [command, str(bad)])
        return Spec(argv, "error", f"bad.{fmt}: field {says}", [bad])
    return make


_RESULT_CASES = {
    "status_300": ("npz", "diverge", lambda d: _cell(d, "verdicts.status", 5, 300),
                   "verdicts.status holds 300 (row 5)"),
    "status_7_json": ("json", "info", lambda d: _cell(d, "verdicts.status", 5, 7), "verdicts.status holds 7 (row 5)"),
    "kind_out_of_range": ("npz", "export", lambda d: _cell(d, "npu.nodes.kind", 3, 9), "npu.nodes.kind holds 9"),
    "role_300_json": ("json", "serve", lambda d: _cell(d, "bench.tensors.role", 0, 300),
                      "bench.tensors.role holds 300"),
    "parent_2_pow_40": ("npz", "info", lambda d: _cell(d, "npu.nodes.parent", 5, 2 ** 40), "npu.nodes.parent holds"),
    "parent_2_pow_40_json": ("json", "diverge", lambda d: _cell(d, "npu.nodes.parent", 5, 2 ** 40), "npu.nodes.parent"),
    "parent_negative": ("npz", "export", lambda d: _cell(d, "npu.nodes.parent", 5, -7), "npu.nodes.parent holds -7"),
    "tensor_node_2_pow_40": ("json", "info", lambda d: _cell(d, "npu.tensors.node", 0, 2 ** 40), "npu.tensors.node"),
    "match_negative": ("npz", "diverge", lambda d: _cell(d, "matches.bench_to_npu", 3, -9),
                       "matches.bench_to_npu holds -9 (row 3)"),
    "match_beyond_the_other_run": ("json", "export", lambda d: _cell(d, "matches.npu_to_bench", 3, 178),
                                   "matches.npu_to_bench holds 178 (row 3)"),
    "stack_row_beyond_the_stacks": ("npz", "serve", lambda d: _cell(d, "bench.nodes.stack", 2, 10 ** 6),
                                    "bench.nodes.stack holds 1000000"),
    "pair_row_beyond_the_tensors": ("npz", "info", lambda d: _cell(d, "pairs.bench", 0, 10 ** 6), "pairs.bench holds"),
    "short_column_of_ints": ("npz", "diverge", lambda d: _shortened(d, "npu.nodes.kind"), "npu.nodes.kind holds 177"),
    "short_column_of_strings_json": ("json", "export", lambda d: _shortened(d, "bench.tensors.dtype"),
                                     "bench.tensors.dtype holds 491"),
    "result_parent_cycle": ("npz", "export",
                     lambda d: (_cell(d, "npu.nodes.parent", 1, 2), _cell(d, "npu.nodes.parent", 2, 1)),
                     "npu.nodes.parent forms a cycle"),
    "result_parent_self_json": ("json", "serve", lambda d: _cell(d, "bench.nodes.parent", 3, 3),
                          "bench.nodes.parent forms a cycle"),
    "noise_role_out_of_range": ("npz", "diverge", lambda d: _cell(d, "noise.role", 2, 4), "noise.role holds 4"),
    "overflow_level_out_of_range_json": ("json", "info", lambda d: _cell(d, "overflow", 2, 30), "overflow holds 30"),
}
for _name, (_fmt, _command, _damage, _says) in _RESULT_CASES.items():
    _make = _result_case(_fmt, _command, _damage, _says)
    _make.__name__ = _name
    case("results")(_make)


VIS_DB = DATA / "vis_tf_small" / "compare_v26.vis.db.gz"
_NODE = "NPU_0_0_Functional.embedding.0.forward"


def _vis_db_case(command: str, sql: str, says: str, params: tuple = (_NODE,)) -> Callable[[Path], Spec]:
    def make(root: Path) -> Spec:
        path = root / "bad.vis.db"
        path.write_bytes(gzip.decompress(VIS_DB.read_bytes()))
        with contextlib.closing(sqlite3.connect(path)) as conn, conn:
            conn.execute(sql, params)
        argv = ["export", str(path), "--to", "json", "-o", str(root / "out.json")] if command == "export" else [
            command, str(path)]
        return Spec(argv, "error", says, [path])
    return make


_VIS_DB_CASES = {
    "vis_db_node_type_text": ("info", "UPDATE tb_nodes SET node_type = 'abc' WHERE id = ?",
                              "tb_nodes column node_type of node 'Functional.embedding.0.forward' holds 'abc'"),
    "vis_db_rank_text": ("diverge", "UPDATE tb_nodes SET rank = 'abc' WHERE id = ?",
                         "tb_nodes column rank holds 'abc'"),
    "vis_db_link_a_number": ("export", "UPDATE tb_nodes SET matched_node_link = '5' WHERE id = ?",
                             "column matched_node_link of node 'Functional.embedding.0.forward': holds a number"),
    "vis_db_input_data_a_list": ("info", "UPDATE tb_nodes SET input_data = '[1, 2]' WHERE id = ?",
                                 "column input_data of node 'Functional.embedding.0.forward': holds a list"),
    "vis_db_input_data_cut": ("diverge", "UPDATE tb_nodes SET input_data = '{\"a\": ' WHERE id = ?",
                              "column input_data of node 'Functional.embedding.0.forward': not valid JSON"),
    "vis_db_statistic_text": ("export", "UPDATE tb_nodes SET input_data = replace(input_data, '\"Max\": ', "
                              "'\"Max\": \"abc\", \"x\": ') WHERE id = ?", "Max is 'abc', expected a number"),
    "vis_db_micro_step_text": ("info", "UPDATE tb_nodes SET micro_step_id = 'abc' WHERE id = ?",
                               "column micro_step_id of node 'Functional.embedding.0.forward' holds 'abc'"),
    "vis_db_precision_text": ("diverge", "UPDATE tb_nodes SET precision_index = 'x' WHERE id = ?",
                              "column precision_index of node 'Functional.embedding.0.forward' is 'x'"),
    "vis_db_colors_cut": ("info", "UPDATE tb_config SET node_colors = '{\"#fff\": ['",
                          "tb_config column node_colors: not valid JSON", ()),
    "vis_db_sub_nodes_an_object": ("export", "UPDATE tb_nodes SET sub_nodes = '{\"a\": 1}' WHERE id = ?",
                                   "column sub_nodes of node 'Module.embedding.Embedding.forward.0': holds an object",
                                   ("NPU_0_0_Module.embedding.Embedding.forward.0",)),
}
for _name, (_command, _sql, _says, *_params) in _VIS_DB_CASES.items():
    _make = _vis_db_case(_command, _sql, _says, *_params)
    _make.__name__ = _name
    case("results")(_make)
