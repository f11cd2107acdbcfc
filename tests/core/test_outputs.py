"""Writing results: never through a link, never over a device or an input (core/outputs.py)."""

from __future__ import annotations

import os
import stat
import time

import pytest

from graphcmp.core import outputs
from graphcmp.core.errors import OutputError
from graphcmp.core.outputs import atomic_output, atomic_path, checked_folder, checked_output, write_atomic


def test_the_temporary_file_is_fresh_and_never_a_planted_link(tmp_path):
    victim = tmp_path / "dump.json"
    victim.write_text("input")
    os.symlink(victim, tmp_path / "out.json.part")
    write_atomic(tmp_path / "out.json", b"result")
    assert victim.read_text() == "input" and (tmp_path / "out.json").read_text() == "result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.json", "out.json", "out.json.part"]


def test_an_existing_link_as_target_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "dump.json"
    victim.write_text("input")
    os.symlink(victim, tmp_path / "out.json")
    write_atomic(tmp_path / "out.json", b"result")
    assert victim.read_text() == "input" and not (tmp_path / "out.json").is_symlink()


def test_the_result_gets_the_usual_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "out.json", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out.json").stat().st_mode) == 0o644


def test_a_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), atomic_output(tmp_path / "out.json") as f:
        f.write(b"half")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    with atomic_path(tmp_path / "db.vis.db") as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".db.vis.db.") and tmp.stat().st_size == 0
    assert (tmp_path / "db.vis.db").exists()


@pytest.mark.parametrize("make, says", [
    (lambda p: os.mkfifo(p), "is a FIFO"),
    (lambda p: os.symlink(os.devnull, p), "is a character device"),
])
def test_special_targets_are_refused(tmp_path, make, says):
    target = tmp_path / "out.json"
    make(target)
    with pytest.raises(OutputError, match=says):
        checked_output(target)
    with pytest.raises(OutputError, match=says):
        write_atomic(target, b"x")


def test_inputs_of_every_kind_are_protected(tmp_path):
    mapping = tmp_path / "map.yaml"
    mapping.write_text("a: b")
    with pytest.raises(OutputError, match="is the input"):
        checked_output(mapping, ["npu", "bench", None, mapping])
    checked_output(tmp_path / "cmp.json", ["npu", None, mapping])


def test_a_results_folder_is_not_a_file(tmp_path):
    assert checked_folder(tmp_path / "results") == tmp_path / "results"
    for name in ("mix.json", "cmp.npz", "out.vis.db"):
        with pytest.raises(OutputError, match="-o names a results folder"):
            checked_folder(tmp_path / name)
    (tmp_path / "plain").write_text("x")
    with pytest.raises(OutputError, match="-o names a results folder"):
        checked_folder(tmp_path / "plain")
    (tmp_path / "old.json").mkdir()  # an existing folder, whatever its name
    assert checked_folder(tmp_path / "old.json").name == "old.json"


def _held_inodes() -> set[int]:
    """Inodes of the regular files this process holds open."""
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            info = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            held.add(info.st_ino)
    return held


def _wait_reaped(timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while outputs._SPAWNED and time.monotonic() < deadline:
        outputs._reap()
        time.sleep(0.01)
    assert not outputs._SPAWNED


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd") or outputs._true() is None, reason="needs /proc and true")
def test_a_large_replaced_result_is_freed_by_a_spawned_process(tmp_path, monkeypatch):
    monkeypatch.setattr(outputs, "FREED_ELSEWHERE_BYTES", 1000)
    target, seen = tmp_path / "cmp.npz", tmp_path / "seen"
    target.write_bytes(b"o" * 1000)
    old_inode = target.stat().st_ino
    script = tmp_path / "holder"  # stands in for `true`: says which file it was given as descriptor 3
    script.write_text(f"#!/bin/sh\nstat -L -c %i /proc/self/fd/3 > {seen}\n")
    script.chmod(0o755)
    monkeypatch.setattr(outputs, "_true", lambda: str(script))
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new" and old_inode not in _held_inodes()
    _wait_reaped()
    assert int(seen.read_text()) == old_inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cmp.npz", "holder", "seen"]


def test_small_linked_or_unspawnable_replaced_files_are_freed_here(tmp_path, monkeypatch):
    spawned = []
    monkeypatch.setattr(os, "posix_spawn", lambda *a, **k: spawned.append(a) or 0)
    target = tmp_path / "cmp.npz"
    target.write_bytes(b"o" * 100)
    write_atomic(target, b"small")  # below the size: nothing spawned
    monkeypatch.setattr(outputs, "FREED_ELSEWHERE_BYTES", 10)
    os.link(target, tmp_path / "kept.npz")
    write_atomic(target, b"linked")  # another name keeps the file: nothing to free
    assert not spawned and (tmp_path / "kept.npz").read_bytes() == b"small"

    def refused(*_, **__):
        raise OSError("no processes left")

    monkeypatch.setattr(os, "posix_spawn", refused)
    before = _held_inodes()
    write_atomic(target, b"refused")
    assert target.read_bytes() == b"refused" and _held_inodes() <= before


@pytest.mark.parametrize("swap", ["swapped", "no swap here", "swap refused"])
def test_a_large_result_takes_the_place_of_the_old_one_whatever_the_swap(tmp_path, monkeypatch, swap):
    monkeypatch.setattr(outputs, "FREED_ELSEWHERE_BYTES", 1000)
    if swap == "no swap here":
        monkeypatch.setattr(outputs, "_renameat2", lambda: None)
    elif swap == "swap refused":  # a file system without RENAME_EXCHANGE: EINVAL
        monkeypatch.setattr(outputs, "_renameat2", lambda: lambda *_: -1)
    target = tmp_path / "cmp.npz"
    target.write_bytes(b"o" * 2000)
    with atomic_output(target) as f:
        f.write(b"n" * 3000)
    assert target.read_bytes() == b"n" * 3000 and os.listdir(tmp_path) == ["cmp.npz"]
    _wait_reaped()
