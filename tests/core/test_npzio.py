"""The npz result container: same report as the JSON document, numpy opens it, damage names the field."""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import orjson
import pytest

from graphcmp.core import npzio
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.npzio import DOCUMENT_MEMBER, is_npz, read_npz, write_npz
from graphcmp.core.readers.msprobe import read_msprobe
from graphcmp.core.report import load_report, load_saved, save_graph, save_report
from graphcmp.core.texts import CodedTexts, UniqueTexts

PARTS = ("npu", "bench", "matches", "pairs", "verdicts", "noise", "thresholds", "options")


@pytest.fixture(scope="module")
def saved(overflow_report, tmp_path_factory):
    """The real overflow pair (inf and NaN statistics) compared, saved as npz and as JSON."""
    report = overflow_report
    folder = tmp_path_factory.mktemp("npz")
    save_report(report, folder / "cmp.npz")
    save_report(report, folder / "cmp.json")
    return report, folder / "cmp.npz", folder / "cmp.json"


def test_npz_and_json_hold_the_same_report(saved):
    report, npz, js = saved
    assert is_npz(npz) and not is_npz(js)
    for back in (load_report(npz), load_saved(js)):
        for part in PARTS:
            assert getattr(back, part) == getattr(report, part), part
        assert back.summary() == report.summary()
        assert back.analysis().to_dict() == report.analysis().to_dict()
        np.testing.assert_array_equal(back.overflow_levels(), report.overflow_levels())
    assert np.isinf(load_report(npz).npu.tensors.stats).any()


def test_numpy_opens_the_columns_aligned(saved):
    report, npz, _ = saved
    with np.load(npz) as columns:
        np.testing.assert_array_equal(columns["npu.nodes.parent"], report.npu.nodes.parent)
        np.testing.assert_array_equal(columns["verdicts.status"], report.verdicts.status)
    raw = Path(npz).read_bytes()
    with zipfile.ZipFile(npz) as zf:
        assert zf.testzip() is None  # every member's checksum
        doc = json.loads(zf.read(DOCUMENT_MEMBER))
        assert doc["format"] == "graphcmp.compare" and doc["npu"]["nodes"]["parent"] == {"$npy": "npu.nodes.parent"}
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
            if info.filename.endswith(".npy"):  # every column starts on a 64-byte boundary: mapped, not copied
                name_length, extra_length = struct.unpack_from("<HH", raw, info.header_offset + 26)  # local header's
                start = info.header_offset + 30 + name_length + extra_length
                header_len = 10 + int.from_bytes(zf.read(info.filename)[8:10], "little")
                assert (start + header_len) % 64 == 0, info.filename
    back = load_report(npz)
    assert not back.npu.nodes.parent.flags.writeable


def test_graph_file_as_npz(perturb_pair, tmp_path):
    graph = read_msprobe(perturb_pair[0])
    save_graph(graph, tmp_path / "run.npz", "test")
    back = load_saved(tmp_path / "run.npz")
    assert back.nodes == graph.nodes and back.tensors == graph.tensors and back.stacks == graph.stacks


def test_string_columns_keep_any_text(tmp_path):
    ids = [f"Functional.linear.{i}.forward" for i in range(100)]
    odd = ["", "a\0b", "é ü 中文", "\0", "x"] * 20  # NUL inside a string: the offsets decide
    repeated = ["torch.float32", "torch.bfloat16"] * 50
    write_npz(tmp_path / "s.npz", {"ids": tuple(ids), "odd": odd, "rep": tuple(repeated), "short": ["a", "b"]})
    back = read_npz(tmp_path / "s.npz")
    assert back["ids"] == ids and list(back["odd"]) == odd and back["short"] == ["a", "b"]
    assert type(back["rep"]) is CodedTexts and list(back["rep"]) == repeated  # categories come with their codes
    assert back["rep"].codes.tolist() == [0, 1] * 50
    with zipfile.ZipFile(tmp_path / "s.npz") as zf:
        names = set(zf.namelist())
    assert "rep.codes.npy" in names and "ids.utf8.npy" in names  # few values: codes; unique ids: text


def test_text_columns_of_one_value_unique_non_ascii_and_mixed_items(tmp_path):
    empty = ("",) * 100  # the md5 column of a statistics dump: one value
    unique = tuple(f"层.{i}\0é" for i in range(100))  # unique, non-ASCII, a NUL inside each: the offsets decide
    mixed = ["a"] * 99 + [1]  # not all text: stays an ordinary list
    write_npz(tmp_path / "t.npz", {"empty": empty, "unique": unique, "mixed": mixed})
    back = read_npz(tmp_path / "t.npz")
    assert list(back["empty"]) == list(empty) and back["unique"] == list(unique) and back["mixed"] == mixed
    with zipfile.ZipFile(tmp_path / "t.npz") as zf:
        codes = np.load(zf.open("empty.codes.npy"))
        ends = np.load(zf.open("unique.ends.npy"))
    assert codes.dtype == np.int8 and not codes.any()  # one value: the smallest codes
    assert ends[0] == len("层.0\0é".encode()) and ends[-1] == sum(len(u.encode()) + 1 for u in unique) - 1



def test_string_ends_are_byte_offsets_with_or_without_nul_inside(tmp_path):
    """Ends are found from the separators when no string holds a NUL, else from each string's length: same offsets."""
    plain = tuple(f"模块.{i}.é" for i in range(70))  # non-ASCII: a character is 2-3 bytes
    with_nul = (*plain[:-1], "x\0y")
    write_npz(tmp_path / "e.npz", {"plain": plain, "with_nul": with_nul})
    back = read_npz(tmp_path / "e.npz")
    assert back["plain"] == list(plain) and back["with_nul"] == list(with_nul)
    with zipfile.ZipFile(tmp_path / "e.npz") as zf:
        for name, texts in (("plain", plain), ("with_nul", with_nul)):
            ends = np.load(zf.open(f"{name}.ends.npy"))
            expected = np.cumsum([len(t.encode()) + 1 for t in texts]) - 1
            assert ends.dtype == np.int64 and ends.tolist() == expected.tolist()

def _rewrite(src, dst, change_doc=None, drop=(), replace=None):
    """Copy a container, changing its document or members."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            if info.filename in drop:
                continue
            data = zin.read(info.filename)
            if info.filename == DOCUMENT_MEMBER and change_doc:
                doc = json.loads(data)
                change_doc(doc)
                data = orjson.dumps(doc)
            if replace and info.filename in replace:
                data = replace[info.filename]
            zout.writestr(info.filename, data)


def _npy(values):
    import io

    buf = io.BytesIO()
    np.save(buf, values)
    return buf.getvalue()


@pytest.mark.parametrize(("damage", "message"), [
    ({"drop": ("npu.nodes.kind.npy",)}, r"field npu\.nodes\.kind is missing \(no member npu\.nodes\.kind\.npy\)"),
    ({"replace": {"npu.nodes.kind.npy": _npy(np.zeros(3, np.int8))}},
     r"field npu\.nodes\.kind holds 3 values, expected \d+"),
    ({"replace": {"verdicts.status.npy": _npy(np.zeros(5, np.float64))}},
     r"field verdicts\.status holds float64 values, expected int64"),
    ({"replace": {"matches.npu_to_bench.npy": _npy(np.array([2**40]))}},
     r"field matches\.npu_to_bench holds values outside the range of int32"),
    ({"replace": {"npu.nodes.parent.npy": b"not numpy"}}, r"field npu\.nodes\.parent is not a numpy column"),
    ({"change_doc": lambda d: d.__delitem__("pairs")}, r"field pairs is missing"),
    ({"drop": (DOCUMENT_MEMBER,)}, r"field document\.json is missing"),
])
def test_a_damaged_container_names_the_field(saved, tmp_path, damage, message):
    _, npz, _ = saved
    bad = tmp_path / "bad.npz"
    _rewrite(npz, bad, **damage)
    with pytest.raises(DumpFormatError, match=rf"bad\.npz: {message}"):
        load_report(bad)


def test_a_file_cut_short_is_one_clear_error(saved, tmp_path):
    _, npz, _ = saved
    bad = tmp_path / "cut.npz"
    bad.write_bytes(npz.read_bytes()[: npz.stat().st_size // 2])
    with pytest.raises(DumpFormatError, match=r"cut\.npz: not a graphcmp result \(not a readable zip"):
        load_report(bad)


def test_a_report_without_the_stored_noise_model_computes_it(saved, tmp_path):
    """Files written before the whole noise model was stored load with the model computed again."""
    report, _, js = saved
    doc = json.loads(js.read_text())
    for key in ("pair_error", "fresh_pair", "producer", "leaves", "origins", "shape_changed", "growth_limit"):
        del doc["noise"][key]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    assert load_report(old).noise == report.noise


def test_requires_grad_is_kept_and_older_files_load_without_it(saved, tmp_path):
    report, npz, js = saved
    grad = report.npu.tensors.requires_grad
    assert (grad == 1).any() and (grad == 0).any()
    for back in (load_report(npz), load_saved(js)):
        np.testing.assert_array_equal(back.npu.tensors.requires_grad, grad)
        np.testing.assert_array_equal(back.bench.tensors.requires_grad, report.bench.tensors.requires_grad)
    doc = json.loads(js.read_text())
    del doc["npu"]["tensors"]["requires_grad"]  # written before the column existed: not recorded
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    back = load_report(old)
    assert back.npu.tensors.requires_grad.tolist() == [-1] * len(grad)
    np.testing.assert_array_equal(back.bench.tensors.requires_grad, report.bench.tensors.requires_grad)


def test_npz_float_columns_are_the_decoded_json_columns_bit_for_bit(saved, tmp_path):
    """save_report writes the report's float columns to npz as they are, not through encode/decode; the
    bytes are those the encoded columns decode to (every NaN the one NaN, float32 widened, -0.0 kept)."""
    from graphcmp.core.export.columns import decode_floats, encode_floats
    from graphcmp.core.report import _npz_floats

    negative_nan = np.frombuffer(np.uint64(0xFFF8000000000001).tobytes(), np.float64)[0]
    for column in (np.array([1.5, -0.0, np.inf, -np.inf, negative_nan, np.nan]),
                   np.array([[np.nan, 2.0], [3.0, -np.inf]], np.float32), np.zeros(0)):
        stored = write_npz(tmp_path / "f.npz", {"c": _npz_floats(column)}) or read_npz(tmp_path / "f.npz")["c"]
        expected = decode_floats(encode_floats(column))
        assert stored["values"].tobytes() == expected.tobytes() and stored["values"].shape == expected.shape
    report, npz, _ = saved
    with zipfile.ZipFile(npz) as zf:
        severity = np.load(zf.open("verdicts.severity.values.npy"))
    assert severity.tobytes() == decode_floats(encode_floats(report.verdicts.severity)).tobytes()


@pytest.mark.parametrize("texts", [
    ("torch.float32", "torch.bfloat16") * 50,  # few values: categories
    tuple(f"[{i}, 4]" for i in range(100)),  # distinct: a text column
    ("[2]", "scalar", ""),  # short: stays in document.json
], ids=["categories", "texts", "short"])
def test_coded_texts_are_stored_as_the_texts_themselves(tmp_path, texts):
    from graphcmp.core.records import string_codes
    from graphcmp.core.texts import TextCodes

    write_npz(tmp_path / "texts.npz", {"c": texts})
    write_npz(tmp_path / "coded.npz", {"c": TextCodes(*string_codes(texts))})
    with zipfile.ZipFile(tmp_path / "texts.npz") as a, zipfile.ZipFile(tmp_path / "coded.npz") as b:
        assert a.namelist() == b.namelist()
        assert all(a.read(name) == b.read(name) for name in a.namelist())
    assert list(read_npz(tmp_path / "coded.npz")["c"]) == list(texts)


@pytest.mark.parametrize(("distinct", "dtype"), [(1, np.int8), (128, np.int8), (129, np.int16), (40_000, np.int32)])
def test_category_codes_take_the_smallest_integer_type_that_holds_them(tmp_path, distinct, dtype):
    from graphcmp.core.records import string_codes
    from graphcmp.core.texts import TextCodes

    texts = tuple(f"[{i % distinct}, 4]" for i in range(2 * distinct + 64))
    write_npz(tmp_path / "c.npz", {"texts": texts, "coded": TextCodes(*string_codes(texts))})
    with zipfile.ZipFile(tmp_path / "c.npz") as zf:
        for name in ("texts", "coded"):
            codes = np.load(zf.open(f"{name}.codes.npy"))
            assert codes.dtype == dtype and int(codes.max()) == distinct - 1
    back = read_npz(tmp_path / "c.npz")
    assert list(back["texts"]) == list(texts) and list(back["coded"]) == list(texts)


def test_row_numbers_and_bit_masks_are_stored_narrow_and_read_as_the_records_hold_them(saved):
    report, npz, _ = saved
    with zipfile.ZipFile(npz) as zf:
        stored = {name: np.load(zf.open(f"{name}.npy")) for name in (
            "noise.producer", "noise.leaves", "noise.origins", "npu.tensors.present", "bench.tensors.present")}
    assert {name: column.dtype for name, column in stored.items()} == dict.fromkeys(stored, np.dtype(np.int8))
    back = load_report(npz)
    for name in ("producer", "leaves", "origin_rows"):
        column, loaded = getattr(report.noise, name), getattr(back.noise, name)
        assert loaded.dtype == column.dtype == np.int64 and np.array_equal(loaded, column), name
    assert (report.noise.producer >= 0).any() and (report.noise.producer == -1).any()
    for side in ("npu", "bench"):
        present = getattr(back, side).tensors.present
        assert present.dtype == bool and np.array_equal(present, getattr(report, side).tensors.present)
        assert not present.all() and present.any()


def test_unique_texts_are_stored_as_strings_without_counting_them(tmp_path, monkeypatch):
    """A run's node ids (`UniqueTexts`) become a string column as any column of distinct texts would, but the writer
    never counts their distinct values (in a forked writer that touched every id); short ones stay in the JSON."""
    ids = tuple(f"Module.layers.{i}.Linear.forward.0" for i in range(100))
    counted = []
    real = npzio._distinct
    monkeypatch.setattr(npzio, "_distinct", lambda values: counted.append(len(values)) or real(values))
    write_npz(tmp_path / "u.npz", {"unique": UniqueTexts(ids), "short": UniqueTexts(ids[:3])})
    write_npz(tmp_path / "t.npz", {"unique": ids, "short": ids[:3]})
    assert counted == [100]  # only the plain tuple's
    with zipfile.ZipFile(tmp_path / "u.npz") as u, zipfile.ZipFile(tmp_path / "t.npz") as t:
        assert u.namelist() == t.namelist() and all(u.read(n) == t.read(n) for n in u.namelist())
    assert read_npz(tmp_path / "u.npz") == {"unique": list(ids), "short": list(ids[:3])}


def _document(rng: np.random.Generator) -> dict:
    return {"format": "x", "a": rng.standard_normal(300), "b": {"c": np.arange(50, dtype=np.int16)},
            "names": [f"näme{k}" for k in range(70)], "ünïcode": np.ones(3, bool), "small": [1, 2.5, None]}


def _same(back: dict, document: dict) -> None:
    np.testing.assert_array_equal(back["a"], document["a"])
    np.testing.assert_array_equal(back["b"]["c"], document["b"]["c"])
    np.testing.assert_array_equal(back["ünïcode"], document["ünïcode"])
    assert back["names"] == document["names"] and back["small"] == document["small"]


@pytest.mark.parametrize("limit", [npzio.ZIP64_LIMIT, 100, 0])
def test_the_container_is_a_zip_every_reader_opens_with_or_without_zip64_records(tmp_path, monkeypatch, limit):
    """Below `limit` plain records; above it (sizes, offsets, the central directory) zip64 ones, as zipfile writes."""
    monkeypatch.setattr(npzio, "ZIP64_LIMIT", limit)
    document = _document(np.random.default_rng(limit))
    whole, part = tmp_path / "whole.npz", tmp_path / "part.npz"
    write_npz(whole, document)
    references = npzio.begin_npz(part, {"a": document["a"], "names": document["names"]})
    write_npz(tmp_path / "finished.npz", document, begun=(part, references))
    for path in (whole, tmp_path / "finished.npz"):
        with zipfile.ZipFile(path) as zf:
            assert zf.testzip() is None
            assert sorted(zf.namelist()) == sorted(set(zf.namelist()))  # the part's members once
            assert any(i.flag_bits & 0x800 for i in zf.infolist())  # a non-ASCII name says it is UTF-8
        with np.load(path) as columns:
            np.testing.assert_array_equal(columns["a"], document["a"])
        _same(read_npz(path), document)
        if limit == 0:
            _all_zip64(path)
    assert not part.exists()


def _all_zip64(path: Path) -> None:
    """Every size and offset above 0 is in zip64 records: marked 0xFFFFFFFF where the plain fields are."""
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        infos, at = zf.infolist(), zf.start_dir
    assert raw.count(b"PK\x06\x06") >= 1 and raw.count(b"PK\x06\x07") >= 1  # zip64 end record and locator
    for info in infos:
        assert struct.unpack_from("<II", raw, info.header_offset + 18) == (0xFFFFFFFF, 0xFFFFFFFF)  # local sizes
        sizes_and_offset = struct.unpack_from("<II", raw, at + 20) + struct.unpack_from("<I", raw, at + 42)
        offset = 0xFFFFFFFF if info.header_offset > 0 else 0  # the first member's offset, 0, is no larger
        assert sizes_and_offset == (0xFFFFFFFF, 0xFFFFFFFF, offset), info.filename
        name, extra, comment = struct.unpack_from("<HHH", raw, at + 28)
        at += 46 + name + extra + comment


def test_more_members_than_a_plain_zip_counts(tmp_path):
    document = {f"c{k}": np.array([k], np.int32) for k in range(0x10000)}
    write_npz(tmp_path / "many.npz", document)
    with zipfile.ZipFile(tmp_path / "many.npz") as zf:
        assert len(zf.infolist()) == 0x10001
    back = read_npz(tmp_path / "many.npz")
    assert back["c65535"].tolist() == [65535] and len(back) == 0x10000
