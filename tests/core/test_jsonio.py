"""JSON reading helpers on real msprobe dumps: chunked members of an indent=1 file."""

from __future__ import annotations

import json
import math
import re

import pytest

from graphcmp.core.jsonio import LayoutMismatch, MemberChunks, _members_fill, load_json
from tests.conftest import DATA

OVERFLOW = DATA / "msprobe_overflow_tokens" / "npu" / "dump.json"


@pytest.mark.parametrize("chunk_bytes", [64, 1000, 50_000, 8 << 20])
def test_chunks_hold_every_record_in_file_order(chunk_bytes):
    whole = load_json(OVERFLOW.read_bytes(), str(OVERFLOW)).value
    chunks = MemberChunks(OVERFLOW, "data", chunk_bytes=chunk_bytes)
    parts = list(chunks)
    merged = [item for part in parts for item in part.items()]
    assert [k for k, _ in merged] == list(whole["data"])
    assert json.dumps(dict(merged)) == json.dumps(whole["data"])  # NaN/Infinity survive (stdlib chunks)
    assert any(isinstance(v, float) and math.isinf(v) for v in _floats(dict(merged)))
    assert chunks.rest == {**{k: v for k, v in whole.items() if k != "data"}, "data": {}}
    assert (len(parts) > 1) == (chunk_bytes < OVERFLOW.stat().st_size)


def _floats(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _floats(v)
    elif isinstance(value, list):
        for v in value:
            yield from _floats(v)
    elif isinstance(value, float):
        yield value


def test_members_after_the_data_object_are_kept(tmp_path):
    doc = json.loads(OVERFLOW.read_text())
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"task": doc["task"], "data": doc["data"], "extra": 7, "more": [1]}, indent=1))
    chunks = MemberChunks(path, "data", chunk_bytes=500)
    assert len([k for c in chunks for k in c]) == len(doc["data"])
    assert chunks.rest == {"task": doc["task"], "data": {}, "extra": 7, "more": [1]}


@pytest.mark.parametrize("chunk_bytes", [300, 500, 4096])
def test_an_object_after_the_data_object_asks_for_a_whole_read(tmp_path, chunk_bytes):
    # the end of "data" is looked up from the end of the file (msprobe writes it last); when
    # another object follows, some chunk does not parse before any of its members is handed out
    doc = json.loads(OVERFLOW.read_text())
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"task": doc["task"], "data": doc["data"],
                                "extra": {"a": [1, 2], "b": {"c": 1}, "d": 2}}, indent=1))
    seen = []
    with pytest.raises(LayoutMismatch):
        for chunk in MemberChunks(path, "data", chunk_bytes=chunk_bytes):
            seen.extend(chunk)
    assert set(seen) <= set(doc["data"])


@pytest.mark.parametrize(
    "write",
    [
        lambda doc: json.dumps(doc),  # compact, with Python's ", " and ": "
        lambda doc: json.dumps(doc, separators=(",", ":")),  # compact, as orjson writes it
        lambda doc: json.dumps(doc, indent=2),
        lambda doc: json.dumps(doc, indent=0),  # every key starts a line: only the dotted node ids are cuts
        lambda doc: "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in doc.items() if k != "data")
        + ',"data":{\n' + ",\n".join(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}"
                                       for k, v in doc["data"].items()) + "\n}}",  # one record per line
    ],
)
@pytest.mark.parametrize("chunk_bytes", [300, 4096])
def test_every_layout_is_read_in_chunks(tmp_path, write, chunk_bytes):
    doc = json.loads(OVERFLOW.read_text())
    path = tmp_path / "dump.json"
    path.write_text(write(doc))
    chunks = MemberChunks(path, "data", chunk_bytes=chunk_bytes)
    parts = list(chunks)
    assert len(parts) > 1
    assert json.dumps({k: v for part in parts for k, v in part.items()}) == json.dumps(doc["data"])
    assert chunks.rest == {**{k: v for k, v in doc.items() if k != "data"}, "data": {}}


def test_an_empty_object_gives_no_chunk(tmp_path):
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"task": "x", "data": {}}, indent=1))
    chunks = MemberChunks(path, "data", chunk_bytes=300)
    assert list(chunks) == [] and chunks.rest == {"task": "x", "data": {}}


@pytest.mark.parametrize(
    "write",
    [
        lambda doc: json.dumps({"data": doc["data"], "task": doc["task"]}),  # another member after "data"
        lambda doc: json.dumps(doc, indent=1)[:-2000],  # cut short
        lambda doc: json.dumps(doc, indent=1)[:-1] + ', "data": {"x": {}}}',  # "data" given twice
        lambda doc: json.dumps(doc, indent=1).replace("},\n  \"", "}\n  \"", 1),  # a comma missing
    ],
)
def test_other_layouts_and_damage_ask_for_a_whole_read(tmp_path, write):
    path = tmp_path / "dump.json"
    path.write_text(write(json.loads(OVERFLOW.read_text())))
    with pytest.raises(LayoutMismatch):
        list(MemberChunks(path, "data", chunk_bytes=300))


def test_the_close_is_found_backwards_across_window_edges(monkeypatch):
    import io

    from graphcmp.core import jsonio

    monkeypatch.setattr(jsonio, "_HEAD_BYTES", 8)
    for at in range(5, 40):
        text = b"x" * at + b"\n }" + b"y" * (40 - at)
        assert jsonio._last_close(io.BytesIO(text), 3, len(text), b"\n }") == at
    with pytest.raises(LayoutMismatch):
        jsonio._last_close(io.BytesIO(b"{" + b"\n  z" * 50), 1, 201, b"\n }")


@pytest.mark.parametrize("data", [b"[" * 2000 + b"]" * 2000, b'{"a":' * 3000 + b"1" + b"}" * 3000,
                                  b'{"data": {"a":' * 3000])
def test_deep_nesting_is_a_format_error(data):
    from graphcmp.core.errors import DumpFormatError

    with pytest.raises(DumpFormatError, match=r"x\.json: .*nested too deeply"):
        load_json(data, "x.json")


def test_an_integer_too_long_to_read_is_a_format_error():
    from graphcmp.core.errors import DumpFormatError

    with pytest.raises(DumpFormatError, match=r"x\.json: line 1: an integer of 5000 digits is beyond float64"):
        load_json(b"[" + b"9" * 5000 + b"]", "x.json")
    with pytest.raises(DumpFormatError, match=r"x\.json: line 2: an integer of 401 digits is beyond float64"):
        load_json(b'{\n"n": 1' + b"0" * 400 + b"}", "x.json")  # no column holds it (float64 ends at 309 digits)
    assert load_json(b'{"n": 1' + b"0" * 300 + b"}", "x.json").value["n"] == 1e300  # orjson: as a float


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"1E+0400", b"2.5e308"])
def test_a_number_beyond_float64_is_a_format_error(number):
    from graphcmp.core.errors import DumpFormatError

    with pytest.raises(DumpFormatError, match=rf"x\.json: line 1: {re.escape(number.decode())} is beyond float64"):
        load_json(b'{"Max": ' + number + b"}", "x.json")
    assert load_json(b'{"Max": 1e300, "Min": 1e-400}', "x.json").value == {"Max": 1e300, "Min": 0.0}


def test_a_file_that_cannot_open_json_is_refused_from_its_first_bytes(tmp_path):
    from graphcmp.core.errors import DumpFormatError
    from graphcmp.core.jsonio import read_json

    path = tmp_path / "dump.json"
    with path.open("wb") as f:
        f.truncate(1 << 30)  # sparse: a gigabyte of zeros on no disk
    with pytest.raises(DumpFormatError, match=r"dump\.json: not JSON \(it starts with bytes 00 00"):
        read_json(path)


def test_a_top_level_key_twice_is_refused_when_asked(tmp_path):
    from graphcmp.core.errors import DumpFormatError
    from graphcmp.core.jsonio import read_json

    path = tmp_path / "dump.json"
    path.write_text('{\n "data": {"a.0": {}},\n "task": "x",\n "data": {}\n}')
    assert read_json(path).value == {"data": {}, "task": "x"}  # what a parser does
    with pytest.raises(DumpFormatError, match=r"dump\.json: 'data' is a key twice at the top level"):
        read_json(path, unique_keys=True)
    path.write_text('{\n "task": "x",\n "data": {"task": {"task": 1}}\n}')  # a nested repeat of the name is fine
    assert read_json(path, unique_keys=True).value["task"] == "x"


def test_compact_members_are_accounted_for_by_length():
    compact = b'{"a.0":{"x":[1, 2]},"b.1":{},"c.2":{"y":"a b"}}'
    assert _members_fill(compact, 3)  # the cheap check settles it: no member repeats
    assert not _members_fill(b'{"a.0":{},"b.1":{"x":1},"a.0":{"x":1}}', 2)  # the repeat leaves text unaccounted
    assert not _members_fill(compact.replace(b'},"', b'}, "'), 3)  # whitespace between members: not known
    assert not _members_fill(b'{"a\\/0":{}}', 1) and not _members_fill(b'{"a\\u00e9":{}}', 1)  # escaped keys
