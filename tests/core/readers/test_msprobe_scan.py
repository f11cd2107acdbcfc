"""The compiled dump.json pass (`msprobe_scan`) gives the graph the chunked read gives, on every dump of the tests,
on records made to be odd, on random records, and when its outputs start tiny and its windows are small."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from graphcmp.core import compiled, id_kernels
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.id_kernels import PADDING, IdIndex, IdRows
from graphcmp.core.readers import msprobe_scan, naming_compiled
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.readers.msprobe_scan import read_dump_compiled
from tests.core.readers.test_msprobe import _ODD_LEAVES, _same_graph

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLES = Path(__file__).resolve().parents[3] / "sample_graphs"
_ROOTS = {"data": DATA, "sample_graphs": SAMPLES}
DUMPS = sorted(f"{top}/{p.parent.relative_to(root)}" for top, root in _ROOTS.items() for p in root.rglob("dump.json"))


def _folder(case: str) -> Path:
    top, _, rest = case.partition("/")
    return _ROOTS[top] / rest


def _same_both_ways(folder: Path) -> None:
    """The compiled pass reads `folder` (gives no None) and its graph is the chunked read's."""
    assert read_dump_compiled(folder) is not None
    _same_graph(read_msprobe(folder, compiled=True), read_msprobe(folder, compiled=False))


def test_the_kernels_built_ahead_of_time_read_as_numba_s_own(monkeypatch):
    """The extension built ahead of time and numba's just-in-time dispatchers (its fallback) give the same graphs."""
    cases = DUMPS[::6]
    built = [read_msprobe(_folder(case), compiled=True) for case in cases]
    assert msprobe_scan.kernels_built()
    for kernels in (msprobe_scan._KERNELS, naming_compiled.KERNELS):
        monkeypatch.setattr(kernels, "_loaded", compiled._Jit(kernels.dispatchers()))
    for case, graph in zip(cases, built):
        _same_graph(read_msprobe(_folder(case), compiled=True), graph)


def test_every_dump_of_the_tests_is_found():
    assert len(DUMPS) > 60 and any(case.startswith("sample_graphs/") for case in DUMPS)


@pytest.mark.parametrize("case", DUMPS)
def test_every_dump_of_the_tests_reads_the_same(case):
    _same_both_ways(_folder(case))


def _run(tmp_path: Path, data: dict, *, indent: int | None = None, header_after: bool = False,
         name: str = "run", **header) -> Path:
    """A dump folder holding `data` (dump.json only: construct.json and stack.json are noted missing)."""
    run = tmp_path / name
    run.mkdir()
    head = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None, **header}
    doc = {"data": data, **head} if header_after else {**head, "data": data}
    (run / "dump.json").write_text(json.dumps(doc, indent=indent))
    return run


def _tensor(**fields) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 1.5, "Min": -0.25,
            "Mean": 0.125, "Norm": 2.0, "requires_grad": True, **fields}


@pytest.mark.parametrize("indent", [None, 1])
def test_odd_leaves_read_as_plain_dicts_read_them(tmp_path, indent):
    _same_both_ways(_run(tmp_path, _ODD_LEAVES, indent=indent))


_ODD_RECORDS = {
    "Functional.nested.0.forward": {"input_args": [[_tensor(), None, {"type": "int", "value": 3}], _tensor()],
                                    "output": [_tensor(shape=[])]},
    "Functional.deeper.0.forward": {"input_args": [[[_tensor()]]]},  # a list in a list in a list
    "Functional.typed_kwargs.0.forward": {"input_kwargs": {"type": "torch.Tensor", "dtype": "torch.int8"}},
    "Functional.kwargs.0.forward": {"input_kwargs": {"": _tensor(), "alpha": {"type": "float", "value": 0.5},
                                                     "none": None}},
    "Functional.repeated_kwarg.0.forward": {"input_kwargs": {"a": _tensor(), "b": _tensor(Max=2.0)}},
    "Module.fc.Linear.parameters_grad": {"weight": _tensor(), "bias": [_tensor(Max=3.0)], "gamma": None},
    "Module.fc.Linear.parameters_grad.1": {"weight": [_tensor(), _tensor(Max=4.0)]},
    "Functional.recompute.0.forward": {"is_recompute": True, "input_args": [_tensor()], "count": 3, "name": "x"},
    "Functional.extra.0.forward": {"input_args": [_tensor()], "meta": {"k": [1, 2]}},
    "Functional.reversed.0.forward": {"output": [_tensor()], "input_args": [_tensor(Max=5.0)]},
    "Functional.group.0.forward": {"input_args": [{"type": "torch.ProcessGroup", "group_ranks": [0, 1],
                                                   "group_id": "123"}, {"type": "slice", "value": [0, 4, None]}]},
    "Functional.fields.0.forward": {"input_args": [_tensor(extra="x"), _tensor(md5="ab12cd34"),
                                                   _tensor(data_name="Functional.fields.0.forward.input.2.pt"),
                                                   _tensor(data_name="-1"), _tensor(data_name=None),
                                                   _tensor(dtype=None), _tensor(shape=None), _tensor(Mean=None)]},
    "Functional.numbers.0.forward": {"input_args": [_tensor(Max=12345678901234567890123, Min=-0.0),
                                                    _tensor(Max=1e300, Min=5e-324, Mean=2, Norm=-17),
                                                    _tensor(dtype="torch.bool", Max=True, Min=False),
                                                    {"type": "int", "value": 12345678901234567890123},
                                                    {"type": "bool", "value": True}, {"type": "str", "value": "é"}]},
    "Functional.é.0.forward": {"output": [_tensor(dtype="torch.floät32")]},
    "Functional.empty.0.forward": {},
    "Functional.nulls.0.forward": {"input_args": None, "output": [], "parameters": {}},
}


@pytest.mark.parametrize("indent", [None, 1])
@pytest.mark.parametrize("ascii_only", [True, False])
def test_odd_records_read_as_the_chunked_read_reads_them(tmp_path, indent, ascii_only):
    run = tmp_path / "run"
    run.mkdir()
    doc = {"task": "statistics", "level": "mix", "data": _ODD_RECORDS}
    (run / "dump.json").write_text(json.dumps(doc, indent=indent, ensure_ascii=ascii_only), encoding="utf-8")
    _same_both_ways(run)


def test_a_call_named_like_parameter_gradients_goes_to_the_chunked_read(tmp_path):
    run = _run(tmp_path, {"Functional.parameters_grad.0.forward": {"output": [_tensor()]}})
    assert read_dump_compiled(run) is None
    _same_graph(read_msprobe(run, compiled=True), read_msprobe(run, compiled=False))


def test_non_finite_statistics_are_read_in_place(tmp_path):
    data = {"Functional.mask.0.forward": {"output": [_tensor(Max=float("inf"), Min=float("-inf"), Mean=float("nan"))]}}
    run = _run(tmp_path, data, indent=1)
    assert b"-Infinity" in (run / "dump.json").read_bytes()
    _same_both_ways(run)
    graph = read_msprobe(run, compiled=True)
    assert graph.tensors.present.all()


def test_header_after_data_and_other_members(tmp_path):
    run = _run(tmp_path, {"Functional.a.0.forward": {"output": [_tensor()]}}, header_after=True, task="tensor",
               extra={"nested": [1, {"x": None}]})
    _same_both_ways(run)
    assert read_msprobe(run, compiled=True).info.task == "tensor"


def test_md5_task_is_told_by_the_first_tensor(tmp_path):
    data = {"Functional.a.0.forward": {"input_args": [{"type": "int", "value": 1}], "output": [_tensor(md5="0a1b")]},
            "Functional.b.0.forward": {"output": [_tensor()]}}
    assert read_msprobe(_run(tmp_path, data), compiled=True).info.task == "md5"


@pytest.mark.parametrize("layout", [None, 1])
def test_tiny_outputs_grow_and_small_windows_read_the_same(tmp_path, monkeypatch, layout):
    rng = random.Random(5)
    data = {f"Functional.op{k}.{k}.forward": _random_record(rng) for k in range(300)}
    run = _run(tmp_path, data, indent=layout)
    whole = read_msprobe(run, compiled=False)
    monkeypatch.setattr(msprobe_scan, "_FIRST_SCALE", 0.0)
    monkeypatch.setattr(msprobe_scan, "WINDOW_BYTES", 4096)
    grew = []
    grow = msprobe_scan._Outputs.grow
    monkeypatch.setattr(msprobe_scan._Outputs, "grow", lambda self, share: grew.append(1) or grow(self, share))
    _same_graph(read_msprobe(run, compiled=True), whole)
    assert len(grew) > 10


def _random_leaf(rng: random.Random) -> object:
    kind = rng.random()
    if kind < 0.55:
        stat = [rng.uniform(-1e3, 1e3), rng.randint(-9, 9), None, rng.choice([1e-310, 3.4e38, -0.0]),
                float("nan"), float("inf")]
        fields = {k: rng.choice(stat) for k in ("Max", "Min", "Mean", "Norm") if rng.random() < 0.9}
        leaf = {"type": "torch.Tensor", "dtype": rng.choice(["torch.float32", "torch.bfloat16", None]),
                "shape": [rng.randint(0, 9) for _ in range(rng.randint(0, 3))], **fields}
        if rng.random() < 0.3:
            leaf["requires_grad"] = rng.choice([True, False, None])
        if rng.random() < 0.2:
            leaf["md5"] = f"{rng.getrandbits(32):08x}"
        if rng.random() < 0.2:
            leaf["data_name"] = rng.choice(["-1", "a.pt", None, -1])
        if rng.random() < 0.1:
            del leaf["dtype"]
        return leaf
    if kind < 0.8:
        return {"type": rng.choice(["int", "float", "bool", "str", "torch.Size"]),
                "value": rng.choice([rng.randint(-5, 5), rng.random(), True, "s", [1, 2], None])}
    if kind < 0.9:
        return None
    return [_random_leaf(rng) for _ in range(rng.randint(0, 3))]


def _random_record(rng: random.Random) -> dict:
    record: dict = {}
    if rng.random() < 0.9:
        record["input_args"] = [_random_leaf(rng) for _ in range(rng.randint(0, 4))]
    if rng.random() < 0.4:
        record["input_kwargs"] = {f"k{i}": _random_leaf(rng) for i in range(rng.randint(0, 3))}
    if rng.random() < 0.9:
        record["output"] = [_random_leaf(rng) for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.2:
        record["parameters"] = {"weight": _random_leaf(rng), "bias": None}
    return record


@pytest.mark.parametrize("seed", range(12))
def test_random_records_read_the_same(tmp_path, seed):
    rng = random.Random(seed)
    data = {f"{rng.choice(['Functional', 'Tensor', 'Torch'])}.op{k}.{k}.forward": _random_record(rng)
            for k in range(rng.randint(1, 60))}
    for k in range(rng.randint(0, 4)):
        data[f"Module.m{k}.Linear.parameters_grad"] = {"weight": _random_leaf(rng), "bias": [_random_leaf(rng)]}
    run = _run(tmp_path, data, indent=rng.choice([None, 1, 2]))
    try:
        whole = read_msprobe(run, compiled=False)
    except DumpFormatError as err:  # a true/false statistic of a float tensor: both reads say so
        with pytest.raises(DumpFormatError, match="expected a number"):
            read_msprobe(run, compiled=True)
        assert "expected a number" in str(err)
        return
    _same_graph(read_msprobe(run, compiled=True), whole)


@pytest.mark.parametrize("text", [
    b"", b"[]", b"{}", b'{"task": "statistics"}', b'{"data": []}', b'{"data": {"a": 3}}', b'{"data": {"a": {}}',
    b'{"data": {"a": {"output": [{"type": "x", "Max": 01}]}}}', b'{"data": {}, "data": {}}', b'{"data": {}} x',
    b'{"data": {"a": {}, }}', b'{"data": {"a": {"output": [{"type": "x"]}}}', b"\xff\xfe",
])
def test_text_the_pass_does_not_read_goes_to_the_other_reads(tmp_path, text):
    run = tmp_path / "run"
    run.mkdir()
    (run / "dump.json").write_bytes(text)
    assert read_dump_compiled(run) is None


@pytest.mark.parametrize("make", ["twice", "bad_statistic", "cut_short"])
def test_damaged_dumps_are_reported_or_salvaged_as_before(tmp_path, make):
    data = {"Functional.a.0.forward": {"output": [_tensor()]}, "Functional.b.0.forward": {"output": [_tensor()]}}
    run = _run(tmp_path, data, indent=1)
    text = (run / "dump.json").read_text()
    if make == "twice":
        text = text.replace('"Functional.b.0.forward"', '"Functional.a.0.forward"')
    elif make == "bad_statistic":
        text = text.replace('"Max": 1.5', '"Max": true', 1)
    else:
        text = text[: len(text) * 2 // 3]
    (run / "dump.json").write_text(text)
    assert read_dump_compiled(run) is None
    try:
        expected = read_msprobe(run, compiled=False)
    except DumpFormatError as err:
        with pytest.raises(DumpFormatError) as info:
            read_msprobe(run, compiled=True)
        assert str(info.value) == str(err)
        return
    _same_graph(read_msprobe(run, compiled=True), expected)


def test_the_dump_is_not_changed(tmp_path):
    source = _folder("data/pytorch_cnn/npu")
    run = tmp_path / "run"
    shutil.copytree(source, run)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    read_msprobe(run, compiled=True)
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


@pytest.mark.parametrize(("built", "can_be_built", "size", "compiled"), [
    (True, True, 1, True),  # built: every dump.json, whatever its size
    (False, True, 150, False),  # not yet built: chunked (the command line builds them in the background)...
    (False, True, 300, True),  # ... unless the build pays within this read (BUILD_FROM_BYTES)
    (False, False, 150, True),  # cannot be built: numba's dispatchers from COMPILED_FROM_BYTES
    (False, False, 50, False),
])
def test_which_read_a_dump_json_gets(monkeypatch, built, can_be_built, size, compiled):
    """The compiled pass where it reads sooner, counting what its kernels cost to load (sizes in units the test sets:
    COMPILED_FROM_BYTES 100, BUILD_FROM_BYTES 200)."""
    from graphcmp.core.readers import msprobe

    folder = SAMPLES / "msprobe" / "tf_small" / "perturb" / "step0" / "rank0"
    taken = []
    monkeypatch.setattr(msprobe_scan, "kernels_built", lambda: built)
    monkeypatch.setattr(msprobe_scan, "kernels_can_be_built", lambda: can_be_built)
    monkeypatch.setattr(msprobe_scan, "read_dump_compiled", lambda path: taken.append(path))  # None: chunked then
    bytes_ = (folder / "dump.json").stat().st_size
    monkeypatch.setattr(msprobe, "COMPILED_FROM_BYTES", bytes_ * 100 // size)
    monkeypatch.setattr(msprobe, "BUILD_FROM_BYTES", bytes_ * 200 // size)
    assert len(read_msprobe(folder)) > 0
    assert bool(taken) is compiled


def _string_end_reference(text: bytes, p: int, n: int) -> tuple[int, bool]:
    escaped = False
    while p < n:
        if text[p] == 0x22:
            return p, escaped
        if text[p] == 0x5C:
            escaped, p = True, p + 2
            continue
        if text[p] < 0x20:
            return -1, escaped
        p += 1
    return -1, escaped


def test_strings_and_whitespace_eight_bytes_at_a_time_end_where_byte_by_byte_does():
    """`_string_end` and `_ws` (eight bytes at a time) against byte-by-byte references, from every position of
    random text rich in quotes, backslashes, control bytes, UTF-8 and runs of spaces, to every kind of end."""
    import numpy as np

    from graphcmp.core.readers.msprobe_scan_kernels import _string_end, _ws

    rng = random.Random(7)
    pieces = ['"', "\\", '\\"', "\n", "\t", "\r", " " * 9, " " * 3, "\x01", "\x1f", "é", "é", "a", "Module.fc", "€"]
    text = "".join(rng.choice(pieces) for _ in range(3000)).encode()
    buf = np.frombuffer(text, np.uint8)
    for p in range(len(text)):
        n = rng.choice([len(text), min(len(text), p + rng.randrange(0, 20))])
        assert _string_end(buf, p, n) == _string_end_reference(text, p, n), (p, n, text[p:p + 20])
        q = p
        while q < n and text[q] in b" \n\r\t":
            q += 1
        assert _ws(buf, p, n) == q, (p, n, text[p:p + 20])


def test_texts_compared_eight_bytes_at_a_time_are_equal_only_when_every_byte_is():
    """`_same` against Python's equality, for texts of 0 to 40 bytes that differ in one byte anywhere, or not."""
    import numpy as np

    from graphcmp.core.readers.msprobe_scan_kernels import _same

    rng = random.Random(8)
    for _ in range(3000):
        size = rng.randrange(0, 41)
        text = bytes(rng.randrange(32, 127) for _ in range(size))
        other = bytearray(text)
        if size and rng.random() < 0.7:
            other[rng.randrange(size)] ^= 1 << rng.randrange(7)
        other = bytes(other) + (b"x" if rng.random() < 0.1 else b"")
        left = np.frombuffer(b"<" + text + b">", np.uint8)
        right = np.frombuffer(b"[[" + other, np.uint8)
        assert _same(left, 1, 1 + size, right, 2, right.size) == (text == other), (text, other)


def _value_end_reference(text: bytes, p: int, n: int) -> int:
    """`_value_end` a byte at a time, as it read before it skipped inside brackets."""
    depth = 0
    while p < n:
        c = text[p]
        if c == 0x22:
            q, _ = _string_end_reference(text, p + 1, n)
            if q < 0:
                return -1
            p = q + 1
        elif c in b"{[":
            depth, p = depth + 1, p + 1
        elif c in b"}]":
            if depth == 0:
                return p
            depth, p = depth - 1, p + 1
        elif depth == 0 and c in b", \n\r\t":
            return p
        else:
            p += 1
        if depth == 0 and c in b'}]"':
            return p
    return p if depth == 0 else -1


def test_values_skipped_eight_bytes_at_a_time_end_where_byte_by_byte_does():
    """`_value_end` against the byte-at-a-time reference, from every position of random JSON-like text: nested
    brackets and braces, strings holding brackets and escaped quotes, numbers, indentation."""
    import numpy as np

    from graphcmp.core.readers.msprobe_scan_kernels import _value_end

    rng = random.Random(9)
    pieces = ["[", "]", "{", "}", '"', '"a[b"', '"x\\"]"', ",", " ", "\n      ", "12", "-3.5e-7", "null", "\x02",
              "é", "[\n 2,\n 32\n]", '{"k": [1, 2]}']
    text = "".join(rng.choice(pieces) for _ in range(2500)).encode()
    buf = np.frombuffer(text, np.uint8)
    for p in range(len(text)):
        n = rng.choice([len(text), min(len(text), p + rng.randrange(0, 60))])
        assert _value_end(buf, p, n) == _value_end_reference(text, p, n), (p, n, text[p:p + 30])


def test_the_record_positions_are_found_by_the_ids_bytes(tmp_path):
    """With the id kernels built, the positions come as `IdRows` (no dict of the ids), equal to the dict's, for
    plain ids (the walk's own bytes) and when an id was written escaped (its bytes joined again)."""
    data = {"Functional.a.0.forward": {"output": [_tensor()]}, "Module.b\u00e9.B.forward.0": {"output": [_tensor()]},
            "Functional.c.0.forward": {}}
    for name, escaped in (("plain", False), ("escaped", True)):
        run = _run(tmp_path, data, name=name)
        if not escaped:
            (run / "dump.json").write_text(json.dumps({"task": "statistics", "data": data}, ensure_ascii=False))
        walked = read_dump_compiled(run)
        assert walked is not None
        positions = walked[2]
        assert isinstance(positions, IdRows)
        assert dict(positions) == {node_id: k for k, node_id in enumerate(data)}
        assert positions.rows_of(["Functional.c.0.forward", "x", "Module.b\u00e9.B.forward.0"]).tolist() == [2, -1, 1]
        _same_both_ways(run)


def test_the_walk_s_id_bytes_get_their_padding_when_the_heap_has_no_room():
    ids = ["a.0", "bb.1"]
    heap = np.frombuffer(b"a.0\nbb.1\n", np.uint8).copy()
    state = np.zeros(msprobe_scan._STATE_SIZE, np.int64)
    state[msprobe_scan._ID_BYTES] = len(heap)
    records = np.array([[0, 3, 0], [4, 8, 0]], np.int64)
    out = SimpleNamespace(state=state, id_heap=heap)
    buf, starts, ends = msprobe_scan._id_bytes(ids, out, records)
    assert len(buf) >= len(heap) + PADDING and bytes(buf[:len(heap)]) == bytes(heap)
    assert IdIndex.of(buf, starts, ends).rows_of(["bb.1", "a.0"]).tolist() == [1, 0]
    records[1, 2] = 4  # an escaped id: joined again from the strings
    joined = msprobe_scan._id_bytes(ids, out, records)[0]
    assert joined is not heap and bytes(joined[:8]) == b"a.0\nbb.1"


def test_without_the_id_kernels_the_positions_are_a_dict(monkeypatch):
    folder = _folder("data/pytorch_cnn/npu")
    with_index = read_msprobe(folder, compiled=True)
    monkeypatch.setattr(id_kernels.KERNELS, "built", lambda: False)
    walked = read_dump_compiled(folder)
    assert type(walked[2]) is dict and list(walked[2].values()) == list(range(len(walked[2])))
    _same_graph(read_msprobe(folder, compiled=True), with_index)
