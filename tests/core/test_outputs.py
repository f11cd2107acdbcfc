"""Writing results: never through a link, never over a device or an input (core/outputs.py)."""

from __future__ import annotations

import os
import stat

import pytest

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
