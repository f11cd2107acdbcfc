"""Tests for graphcmp.core.tensorio: real msprobe .pt/.npy files, hand-made archives, hostile input."""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.tensorio import is_tensor_file, parse_pt, read_tensor

DATA = Path(__file__).resolve().parents[1] / "data" / "tensors"
EXPECTED = json.loads((DATA / "expected.json").read_text())["tensors"]
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
NUMPY_DTYPE = {"float32": np.float32, "bfloat16": np.float32, "int64": np.int64, "int32": np.int32}


# --- stats as msprobe computes them ----------------------------------------------------------------


def _bf16_round(value: float) -> float:
    """Round to the nearest bfloat16 (ties to even), as torch does for bf16 reductions."""
    bits = np.array([value], dtype=np.float32).view(np.uint32)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return float(bits.view(np.float32)[0])


def _assert_stats(array: np.ndarray, entry: dict) -> None:
    """Max/Min/Mean/Norm of `array` equal msprobe's (rtol 1e-5), allowing for how torch computed them.

    msprobe's Mean is a float32 sum, so near-zero means differ by ~1e-6 of max|x|; bf16 stats are
    rounded to bf16; float32 sums that overflowed to inf are recomputed in float32.
    """
    values = array.astype(np.float64).ravel()
    ours = {"Max": values.max(), "Min": values.min(), "Mean": values.mean(), "Norm": np.linalg.norm(values)}
    with np.errstate(over="ignore"):  # reproducing torch's float32 overflow is the point
        in_f32 = {"Mean": np.mean(array, dtype=np.float32),
                  "Norm": np.linalg.norm(array.astype(np.float32).ravel())}
    for stat, value in ours.items():
        expected = entry[stat]
        if expected is None:  # msprobe records no Mean/Norm for integer tensors
            continue
        if not np.isfinite(expected):
            value = in_f32[stat]
        elif "bfloat16" in entry["dtype"] and stat in ("Mean", "Norm"):
            value = _bf16_round(value)
        atol = 1e-6 * np.abs(values).max() if stat == "Mean" else 0.0
        assert np.isclose(value, expected, rtol=1e-5, atol=atol), f"{stat}: {value} != {expected}"


def _dtype_name(entry: dict) -> str:
    return entry["dtype"].removeprefix("torch.").lower()


# --- hand-made torch.save archives -----------------------------------------------------------------


@dataclass(frozen=True)
class G:
    """A pickle GLOBAL (module.name), written by name: torch is never needed to write one."""

    module: str
    name: str


@dataclass(frozen=True)
class Call:
    """A pickle REDUCE: func(*args)."""

    func: G
    args: tuple


@dataclass(frozen=True)
class PersId:
    """A pickle BINPERSID record, as torch.save writes for each storage."""

    pid: tuple


def _ops(obj: object) -> bytes:
    if isinstance(obj, G):
        return f"c{obj.module}\n{obj.name}\n".encode()
    if isinstance(obj, Call):
        return _ops(obj.func) + _ops(obj.args) + b"R"
    if isinstance(obj, PersId):
        return _ops(obj.pid) + b"Q"
    if isinstance(obj, bool):
        return b"\x88" if obj else b"\x89"
    if isinstance(obj, int):
        return b"J" + struct.pack("<i", obj)
    if isinstance(obj, str):
        return b"X" + struct.pack("<I", len(obj.encode())) + obj.encode()
    if isinstance(obj, tuple):
        return b"(" + b"".join(map(_ops, obj)) + b"t"
    raise TypeError(obj)


def tensor_record(storage: str, numel: int, size: tuple, stride: tuple, offset: int = 0,
                  rebuild: str = "_rebuild_tensor_v2", extra: tuple = (), module: str = "torch") -> Call:
    """What torch.save pickles for one tensor: rebuild(storage, offset, size, stride, False, hooks...)."""
    storage_ref = PersId(("storage", G(module, storage), "0", "cpu", numel))
    hooks = Call(G("collections", "OrderedDict"), ())
    return Call(G("torch._utils", rebuild), (storage_ref, offset, size, stride, False, hooks, *extra))


def make_pt(pickled: bytes | Call, storages: dict[str, bytes] | None = None, byteorder: str | None = "little",
            ) -> bytes:
    """A zip archive laid out as torch.save writes it: archive/{data.pkl, byteorder, data/<key>}."""
    if isinstance(pickled, Call):
        pickled = b"\x80\x02" + _ops(pickled) + b"."
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", pickled)
        if byteorder is not None:
            archive.writestr("archive/byteorder", byteorder)
        for key, raw in (storages or {}).items():
            archive.writestr(f"archive/data/{key}", raw)
        archive.writestr("archive/version", "3\n")
    return buffer.getvalue()


# --- suffix check ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("dump_tensor_data/Functional.conv2d.0.forward.output.0.pt", True),
    ("Cell.embedding.Embedding.forward.0.input.0.npy", True),
    (Path("a/B.NPY"), True),
    ("step0/rank0/dump.json", False),
    ("weights.pth", False),
    ("pt", False),
])
def test_is_tensor_file_looks_at_the_suffix_only(name: str | Path, expected: bool) -> None:
    assert is_tensor_file(name) is expected


# --- real msprobe files ----------------------------------------------------------------------------


@pytest.mark.parametrize("relpath", sorted(EXPECTED))
def test_real_file_matches_dump_json_stats(relpath: str) -> None:
    entry = EXPECTED[relpath]
    array = read_tensor(DATA / relpath)
    assert list(array.shape) == entry["shape"]
    assert array.dtype == NUMPY_DTYPE[_dtype_name(entry)]
    _assert_stats(array, entry)


def test_bfloat16_is_widened_to_float32_exactly() -> None:
    array = read_tensor(DATA / "pt_bf16" / "Functional.linear.6.forward.output.0.pt")
    assert array.dtype == np.float32
    assert not np.any(array.view(np.uint32) & 0xFFFF)  # every value is a bfloat16


def test_npy_is_memory_mapped_read_only() -> None:
    array = read_tensor(DATA / "npy" / "Primitive.layer_norm.LayerNorm.0.forward.output.1.npy")
    assert type(array) is np.ndarray
    assert isinstance(array.base, np.memmap)
    assert not array.flags.writeable


def test_fortran_order_npy(tmp_path: Path) -> None:
    values = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.save(tmp_path / "f.npy", values)
    np.testing.assert_array_equal(read_tensor(tmp_path / "f.npy"), values)


def test_torch_is_never_imported() -> None:
    read_tensor(DATA / "pt_fp32" / "Module.fc1.Linear.forward.0.output.0.pt")
    assert "torch" not in sys.modules


# --- layouts: strides, offsets, storage and dtype kinds --------------------------------------------


def test_transposed_view_of_a_real_storage_is_copied_contiguous() -> None:
    path = DATA / "pt_fp32" / "Module.fc1.Linear.forward.0.output.0.pt"  # float32 [4, 32]
    real = read_tensor(path)
    with zipfile.ZipFile(path) as archive:
        raw = archive.read(next(n for n in archive.namelist() if n.endswith("/data/0")))
    transposed = parse_pt(make_pt(tensor_record("FloatStorage", 128, (32, 4), (1, 32)), {"0": raw}))
    np.testing.assert_array_equal(transposed, real.T)
    assert transposed.flags.c_contiguous


def test_storage_offset_and_step_stride() -> None:
    raw = np.arange(10, dtype="<f8").tobytes()
    record = tensor_record("DoubleStorage", 10, (2, 2), (4, 1), offset=3)
    np.testing.assert_array_equal(parse_pt(make_pt(record, {"0": raw})), [[3.0, 4.0], [7.0, 8.0]])


def test_zero_size_tensor() -> None:
    array = parse_pt(make_pt(tensor_record("FloatStorage", 0, (0, 3), (3, 1)), {"0": b""}))
    assert array.shape == (0, 3)
    assert array.dtype == np.float32


@pytest.mark.parametrize(("storage", "dtype"), [
    ("DoubleStorage", "<f8"), ("FloatStorage", "<f4"), ("HalfStorage", "<f2"), ("LongStorage", "<i8"),
    ("IntStorage", "<i4"), ("ShortStorage", "<i2"), ("CharStorage", "i1"), ("ByteStorage", "u1"),
    ("BoolStorage", "?"), ("ComplexFloatStorage", "<c8"),
])
def test_each_typed_storage_class(storage: str, dtype: str) -> None:
    values = np.array([0, 1, 0, 1, 1, 0], dtype=dtype)
    array = parse_pt(make_pt(tensor_record(storage, 6, (2, 3), (3, 1)), {"0": values.tobytes()}))
    assert array.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(array, values.reshape(2, 3))


def test_bfloat16_bit_patterns() -> None:
    # 1, -2, inf, -inf, 0 and 0.15625 as bfloat16 bit patterns
    bits = np.array([0x3F80, 0xC000, 0x7F80, 0xFF80, 0x0000, 0x3E20], dtype="<u2")
    array = parse_pt(make_pt(tensor_record("BFloat16Storage", 6, (6,), (1,)), {"0": bits.tobytes()}))
    np.testing.assert_array_equal(array, np.array([1, -2, np.inf, -np.inf, 0, 0.15625], dtype=np.float32))


@pytest.mark.parametrize(("dtype_global", "numpy_dtype"),
                         [("float16", "<f2"), ("uint16", "<u2"), ("int32", "<i4")])
def test_rebuild_tensor_v3_reinterprets_an_untyped_storage(dtype_global: str, numpy_dtype: str) -> None:
    values = np.array([1, 2, 3, 4], dtype=numpy_dtype)
    record = tensor_record("UntypedStorage", values.nbytes, (4,), (1,), rebuild="_rebuild_tensor_v3",
                           extra=(G("torch", dtype_global),), module="torch.storage")
    np.testing.assert_array_equal(parse_pt(make_pt(record, {"0": values.tobytes()})), values)


def test_parameter_wrapper_is_unwrapped() -> None:
    tensor = tensor_record("FloatStorage", 2, (2,), (1,))
    hooks = Call(G("collections", "OrderedDict"), ())
    record = Call(G("torch._utils", "_rebuild_parameter"), (tensor, True, hooks))
    raw = np.array([1.5, -1.5], dtype="<f4").tobytes()
    np.testing.assert_array_equal(parse_pt(make_pt(record, {"0": raw})), [1.5, -1.5])


# --- hostile and broken input ----------------------------------------------------------------------


class _Shell:
    """Pickles as a call to os.system, the classic hostile pickle."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple:
        return (os.system, (self.command,))


def test_pickle_calling_os_system_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    path.write_bytes(make_pt(pickle.dumps(_Shell(f"echo pwned > {marker}"), protocol=2)))
    refused = r"evil\.pt: refused to load '(os|posix)\.system': only tensors"  # os.system lives in posix
    with pytest.raises(DumpFormatError, match=refused):
        read_tensor(path)
    assert not marker.exists()


def test_hostile_global_inside_a_tensor_record_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    hooks = Call(G("builtins", "exec"), (f"open({str(marker)!r}, 'w')",))
    storage = PersId(("storage", G("torch", "FloatStorage"), "0", "cpu", 1))
    record = Call(G("torch._utils", "_rebuild_tensor_v2"), (storage, 0, (1,), (1,), False, hooks))
    with pytest.raises(DumpFormatError, match=r"x\.pt: refused to load 'builtins\.exec'"):
        parse_pt(make_pt(record, {"0": b"\0\0\0\0"}), name="x.pt")
    assert not marker.exists()


@pytest.mark.parametrize("global_", [G("torch", "load"), G("torch.serialization", "load"), G("numpy", "load"),
                                     G("torch", "Tensor"), G("collections", "Counter")])
def test_only_tensor_rebuilding_globals_are_allowed(global_: G) -> None:
    with pytest.raises(DumpFormatError, match=rf"refused to load '{global_.module}\.{global_.name}'"):
        parse_pt(make_pt(Call(global_, ())))


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DumpFormatError, match=r"nothing\.pt: no such file"):
        read_tensor(tmp_path / "nothing.pt")
    with pytest.raises(DumpFormatError, match=r"nothing\.npy: no such file"):
        read_tensor(tmp_path / "nothing.npy")


def test_unknown_suffix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DumpFormatError, match=r"x\.bin: cannot read a tensor from a '\.bin' file"):
        read_tensor(tmp_path / "x.bin")


@pytest.mark.parametrize("keep", [0, 10, 200, 1000, 2000, -1])
def test_truncated_pt_raises_a_chained_dump_format_error(tmp_path: Path, keep: int) -> None:
    data = (DATA / "pt_fp32" / "Module.fc1.Linear.forward.0.output.0.pt").read_bytes()
    path = tmp_path / "cut.pt"
    path.write_bytes(data[:keep])
    with pytest.raises(DumpFormatError, match=r"cut\.pt: ") as caught:
        read_tensor(path)
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize("content", [b"", b"\x93NUMPY", b"not an array at all"])
def test_corrupt_npy(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "bad.npy").write_bytes(content)
    with pytest.raises(DumpFormatError, match=r"bad\.npy: not a readable \.npy file") as caught:
        read_tensor(tmp_path / "bad.npy")
    assert caught.value.__cause__ is not None


def test_truncated_npy(tmp_path: Path) -> None:
    data = (DATA / "npy" / "Primitive.get_shp.Shape.0.forward.input.0.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:-8])
    with pytest.raises(DumpFormatError, match=r"cut\.npy: not a readable \.npy file"):
        read_tensor(tmp_path / "cut.npy")


def test_pickled_object_npy_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DumpFormatError, match=r"obj\.npy: not a readable \.npy file"):
        read_tensor(tmp_path / "obj.npy")


def test_legacy_torch_format_is_named() -> None:
    legacy = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19." + pickle.dumps({"tensor": 1}, protocol=2)
    with pytest.raises(DumpFormatError, match=r"old\.pt: legacy \(non-zip\) torch\.save format"):
        parse_pt(legacy, name="old.pt")


def test_big_endian_archive_is_refused() -> None:
    data = make_pt(tensor_record("FloatStorage", 1, (1,), (1,)), {"0": b"\0\0\0\0"}, byteorder="big")
    with pytest.raises(DumpFormatError, match=r"byte order is 'big'; only little-endian"):
        parse_pt(data)


def test_archive_without_byteorder_record_is_read_as_little_endian() -> None:
    data = make_pt(tensor_record("FloatStorage", 1, (), ()), {"0": np.float32(2.5).tobytes()}, byteorder=None)
    assert parse_pt(data) == np.float32(2.5)


def test_zip_without_data_pkl() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/other.txt", "hello")
    with pytest.raises(DumpFormatError, match=r"w\.pt: no '<archive>/data\.pkl' record"):
        parse_pt(buffer.getvalue(), name="w.pt")


def test_missing_storage_record() -> None:
    with pytest.raises(DumpFormatError, match=r"storage record 'archive/data/0' is missing"):
        parse_pt(make_pt(tensor_record("FloatStorage", 4, (4,), (1,)), {}))


def test_short_storage_record_is_truncation() -> None:
    data = make_pt(tensor_record("FloatStorage", 4, (4,), (1,)), {"0": b"\0" * 12})
    with pytest.raises(DumpFormatError, match=r"holds 12 bytes, expected 16 \(4 x float32\); .* truncated"):
        parse_pt(data)


@pytest.mark.parametrize(("size", "stride", "offset"),
                         [((4,), (2,), 0), ((2, 2), (2, 1), 1), ((3,), (-1,), 2)])
def test_geometry_outside_the_storage_is_refused(size: tuple, stride: tuple, offset: int) -> None:
    data = make_pt(tensor_record("FloatStorage", 4, size, stride, offset=offset), {"0": b"\0" * 16})
    with pytest.raises(DumpFormatError, match=r"g\.pt: corrupt data\.pkl: ValueError: (.*overruns|invalid)"):
        parse_pt(data, name="g.pt")


@pytest.mark.parametrize("payload", [{"weight": 1}, (1, 2), "tensor"])
def test_anything_but_one_tensor_is_refused(payload: object) -> None:
    with pytest.raises(DumpFormatError, match=r"s\.pt: holds a \w+, expected a single tensor"):
        parse_pt(make_pt(pickle.dumps(payload, protocol=2)), name="s.pt")


def test_negative_element_count_is_refused() -> None:
    with pytest.raises(DumpFormatError, match=r"n\.pt: corrupt data\.pkl: .* declares -1 elements"):
        parse_pt(make_pt(tensor_record("FloatStorage", -1, (1,), (1,)), {"0": b"\0" * 4}), name="n.pt")


def test_bad_persistent_id() -> None:
    record = Call(G("torch._utils", "_rebuild_tensor_v2"), (PersId(("module", "x")), 0, (1,), (1,), False))
    with pytest.raises(DumpFormatError, match=r"unexpected persistent id \('module', 'x'\)"):
        parse_pt(make_pt(record))


def test_corrupt_pickle_bytes() -> None:
    with pytest.raises(DumpFormatError, match=r"c\.pt: corrupt data\.pkl") as caught:
        parse_pt(make_pt(b"\x80\x02\x8e\xff\xff\xff\xff\xff\xff\xff\x7f."), name="c.pt")  # BINBYTES8 of 2**63
    assert caught.value.__cause__ is not None


# --- every file of the large shared dumps ----------------------------------------------------------


def _shared_dump_dirs() -> list[Path]:
    if not SHARED.is_dir():
        return []
    return sorted(p.parent for p in SHARED.glob("**/dump.json") if (p.parent / "dump_tensor_data").is_dir())


def _tensor_entries(node: object):
    if isinstance(node, dict):
        if "data_name" in node:
            yield node
        else:
            for child in node.values():
                yield from _tensor_entries(child)
    elif isinstance(node, list):
        for child in node:
            yield from _tensor_entries(child)


@pytest.mark.shared
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is absent")
@pytest.mark.parametrize("dump_dir", _shared_dump_dirs(), ids=lambda p: str(p.relative_to(SHARED)))
def test_every_shared_tensor_file_matches_its_dump_json(dump_dir: Path) -> None:
    entries = list(_tensor_entries(json.loads((dump_dir / "dump.json").read_text())["data"]))
    assert entries
    for entry in entries:
        array = read_tensor(dump_dir / "dump_tensor_data" / entry["data_name"])
        assert list(array.shape) == entry["shape"], entry["data_name"]
        _assert_stats(array, entry)


# --- bounds: a small file never becomes a large array -----------------------------------------------------


def test_a_broadcast_view_larger_than_its_storage_is_refused() -> None:
    data = make_pt(tensor_record("FloatStorage", 1, (30000, 30000), (0, 0)), {"0": b"\0" * 4})
    assert len(data) < 1000  # 3.6 GB as an array
    with pytest.raises(DumpFormatError, match=r"b\.pt: corrupt data\.pkl: ValueError: .* a broadcast view"):
        parse_pt(data, name="b.pt")


def test_a_compressed_storage_inflating_past_the_limit_is_refused() -> None:
    numel = (64 << 20) // 4
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02" + _ops(tensor_record("FloatStorage", numel, (numel,), (1,)))
                         + b".")
        archive.writestr("archive/data/0", b"\0" * (numel * 4), compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(DumpFormatError, match=r"z\.pt: record 'archive/data/0' would inflate .* compression bomb"):
        parse_pt(buffer.getvalue(), name="z.pt")


def test_a_compressed_pickle_inflating_past_the_limit_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02" + b"\0" * (64 << 20), compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(DumpFormatError, match=r"record 'archive/data.pkl' would inflate"):
        parse_pt(buffer.getvalue(), name="p.pt")


def test_a_fifo_named_like_a_tensor_is_never_opened(tmp_path: Path) -> None:
    for name in ("t.pt", "t.npy"):
        os.mkfifo(tmp_path / name)
        with pytest.raises(DumpFormatError, match=f"{name}: is a FIFO"):
            read_tensor(tmp_path / name)


def _without_crc(data: bytes) -> bytes:
    """`data` as torch.save writes it with ``set_crc32_options(False)``: every CRC-32 field 0."""
    out = bytearray(data)
    for info in zipfile.ZipFile(io.BytesIO(data)).infolist():
        out[info.header_offset + 14:info.header_offset + 18] = bytes(4)  # local header
    at = out.find(b"PK\x01\x02")
    while at >= 0:  # central directory entries
        out[at + 16:at + 20] = bytes(4)
        at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


def test_a_file_saved_without_crc_is_read_as_torch_load_reads_it(tmp_path: Path) -> None:
    values = np.arange(12, dtype=np.float32)
    data = _without_crc(make_pt(tensor_record("FloatStorage", 12, (3, 4), (4, 1)), {"0": values.tobytes()}))
    with pytest.raises(zipfile.BadZipFile):  # what zipfile makes of it
        zipfile.ZipFile(io.BytesIO(data)).read("archive/data/0")
    (tmp_path / "nocrc.pt").write_bytes(data)
    array = read_tensor(tmp_path / "nocrc.pt")
    assert array.tolist() == values.reshape(3, 4).tolist() and not array.flags.writeable


def test_a_storage_record_cut_short_is_refused(tmp_path: Path) -> None:
    data = make_pt(tensor_record("FloatStorage", 12, (12,), (1,)), {"0": np.zeros(6, np.float32).tobytes()})
    (tmp_path / "short.pt").write_bytes(data)
    with pytest.raises(DumpFormatError, match=r"short\.pt: storage record 'archive/data/0' holds 24 bytes, "
                                              r"expected 48"):
        read_tensor(tmp_path / "short.pt")
