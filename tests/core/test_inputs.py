"""Opening inputs: regular files and folders only, and bounded inflation (core/inputs.py)."""

from __future__ import annotations

import gzip
import io
import os

import pytest

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.inputs import (
    INFLATE_RATIO_LIMIT,
    check_input,
    copy_inflated,
    inflate,
    open_regular,
    read_input,
    special_entries,
)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_special_files_are_named_before_a_byte_is_read(fifo):
    with pytest.raises(DumpFormatError, match="pipe: is a FIFO"):
        check_input(fifo)
    with pytest.raises(DumpFormatError, match="pipe: is a FIFO, not a regular file"):
        read_input(fifo)  # would block forever if it were opened for reading the usual way
    with pytest.raises(DumpFormatError, match="/dev/zero: is a character device"):
        read_input("/dev/zero")  # would never end


def test_links_that_loop_or_lead_nowhere(tmp_path):
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    with pytest.raises(DumpFormatError, match="a: its symbolic links form a loop"):
        check_input(tmp_path / "a")
    with pytest.raises(DumpFormatError, match="a: its symbolic links form a loop"):
        open_regular(tmp_path / "a")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    with pytest.raises(DumpFormatError, match="dangling: a symbolic link to nothing"):
        check_input(tmp_path / "dangling")


def test_a_folder_lists_its_special_entries(tmp_path, fifo):
    (tmp_path / "dump.json").write_text("{}")
    os.symlink("/dev/null", tmp_path / "stack.json")
    found = special_entries(tmp_path)
    assert sorted(line.split(": ")[0].rsplit("/", 1)[1] for line in found) == ["pipe", "stack.json"]
    with pytest.raises(DumpFormatError, match="is a folder"):
        open_regular(tmp_path)


def test_gzip_inflates_whole_members_and_padding(tmp_path):
    path = tmp_path / "a.gz"
    path.write_bytes(gzip.compress(b"hello " * 10) + gzip.compress(b"world") + b"\0" * 8)
    assert read_input(path) == b"hello " * 10 + b"world"
    assert read_input(path, limit=8) == b"hello he"
    assert read_input(path, gunzip=False)[:2] == b"\x1f\x8b"
    out = io.BytesIO()
    assert copy_inflated(path, out) == 65 and out.getvalue().endswith(b"world")


def test_inflation_stops_at_the_ratio_limit(tmp_path):
    member = gzip.compress(b"\0" * (16 << 20))  # ~16 KB inflating 1000-fold
    path = tmp_path / "bomb.gz"
    path.write_bytes(member * 64)  # 1 GiB if inflated
    size = path.stat().st_size
    says = rf"bomb\.gz: inflates to more than {INFLATE_RATIO_LIMIT} times its {size} "
    with pytest.raises(DumpFormatError, match=says):
        read_input(path)
    with pytest.raises(DumpFormatError, match="inflates to more than"):
        copy_inflated(path, io.BytesIO())
    with pytest.raises(DumpFormatError, match="inflates to more than"):
        inflate(member * 64, "bomb")


def test_a_small_file_may_inflate_past_the_ratio(tmp_path):
    data = b"x" * 500_000  # gzip -9 makes ~1 KB of it: a ratio of 500, but harmless
    path = tmp_path / "small.gz"
    path.write_bytes(gzip.compress(data, 9))
    assert read_input(path) == data


def test_a_cut_gzip_file_is_named(tmp_path):
    path = tmp_path / "cut.gz"
    path.write_bytes(gzip.compress(os.urandom(50_000))[:-100])
    with pytest.raises(DumpFormatError, match=r"cut\.gz: the gzip file ends early"):
        read_input(path)
