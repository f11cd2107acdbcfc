"""Kernels built ahead of time (`core/compiled.py`): built once per source text, loaded without building or numba,
checked call by call, and numba's dispatchers where a build fails or is declined."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from graphcmp.core import compiled
from graphcmp.core.compiled import AHEAD_OF_TIME_ENV, KernelSet, sources

CORE = Path(compiled.__file__).resolve().parent

_KERNELS = '''
import numba
import numpy as np


@numba.njit(cache=False)
def shifted(values, by):
    out = np.empty(values.size, np.int64)
    for i in range(values.size):
        out[i] = values[i] + by
    return out, values.size
'''


def _kernel_set(folder: Path, text: str = _KERNELS, signature: str = "Tuple((i8[::1], i8))",
                arguments: tuple[str, ...] = ("i8[::1]", "i8"), **options: Any) -> KernelSet:
    """A set of one kernel, ``shifted``, defined in `folder`/graphcmp/tiny_kernels.py (`options`: the set's own)."""
    source = folder / "graphcmp" / "tiny_kernels.py"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(text)

    def dispatchers() -> dict:
        spec = importlib.util.spec_from_file_location(f"tiny_kernels_{abs(hash(text))}", source)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return {"shifted": module.shifted}

    return KernelSet("tiny", source, {"shifted": (signature, arguments)}, dispatchers, **options)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """Builds go to a folder of the test's own."""
    folder = tmp_path / "cache"
    monkeypatch.setattr(compiled, "_folders", lambda beside: [folder])
    monkeypatch.delenv(AHEAD_OF_TIME_ENV, raising=False)
    return folder


def test_sources_are_the_kernels_module_and_what_it_imports():
    found = {path.relative_to(CORE).as_posix() for path in sources(CORE / "readers" / "msprobe_scan_kernels.py")}
    assert {"readers/msprobe_scan_kernels.py", "readers/msprobe_scan_layout.py", "jsonnum.py", "simd.py",
            "records.py"} <= found
    assert "readers/msprobe_scan.py" not in found  # the Python that drives the kernels is not compiled


def test_a_set_is_built_once_then_loaded_and_checked(cache, tmp_path):
    kernels = _kernel_set(tmp_path)
    assert not kernels.built()
    loaded = kernels.load()
    assert kernels.built() and list(cache.glob("_tiny_*.so"))
    out, size = loaded.shifted(np.arange(4, dtype=np.int64), 10)
    assert out.tolist() == [10, 11, 12, 13] and size == 4
    with pytest.raises(TypeError, match="argument 0 is a 1-d int32 array"):
        loaded.shifted(np.arange(4, dtype=np.int32), 1)  # the extension itself would read it as int64s
    with pytest.raises(TypeError, match="not C-contiguous"):
        loaded.shifted(np.arange(8, dtype=np.int64)[::2], 1)
    with pytest.raises(TypeError, match="1 arguments given, 2 expected"):
        loaded.shifted(np.arange(4, dtype=np.int64))

    again = _kernel_set(tmp_path)
    again.dispatchers = lambda: pytest.fail("a built set is loaded without numba's dispatchers")
    assert again.built() and again.load().shifted(np.zeros(2, np.int64), 1)[0].tolist() == [1, 1]


def test_another_source_text_is_another_build(cache, tmp_path):
    first = _kernel_set(tmp_path)
    first.load()
    key = first.key()
    edited = _kernel_set(tmp_path, _KERNELS.replace("values[i] + by", "values[i] - by"))  # the same file, edited
    assert edited.key() != key and not edited.built()
    assert edited.load().shifted(np.arange(3, dtype=np.int64), 1)[0].tolist() == [-1, 0, 1]
    assert len(list(cache.glob("_tiny_*.so"))) == 1  # the older build is removed


_DIVIDING = """
import numba


@numba.njit(cache=False)
def shifted(values, by):
    return values[0] / values[1], by
"""


def test_the_sets_flags_and_processor_reach_its_build(cache, tmp_path):
    # numba's ahead-of-time build compiles with its own defaults: Python's error model raises on a division by 0
    halves = np.array([1.0, 0.0])
    plain = _kernel_set(tmp_path / "plain", _DIVIDING, "Tuple((f8, i8))", ("f8[::1]", "i8"))
    with pytest.raises(ZeroDivisionError):
        plain.load().shifted(halves, 1)
    flagged = _kernel_set(tmp_path / "flagged", _DIVIDING, "Tuple((f8, i8))", ("f8[::1]", "i8"),
                          flags={"error_model": "numpy", "release_gil": True}, host_cpu=True)
    assert flagged.key() != plain.key()
    assert flagged.load().shifted(halves, 1) == (np.inf, 1)
    assert flagged.built() and list(cache.glob(f"_tiny_{compiled._processor()}_{flagged.key()}*.so"))
    assert len(list(cache.glob("_tiny_*.so"))) == 2  # a build for this processor leaves the other one alone


def test_a_set_not_built_can_be_loaded_from_numba_without_building(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(compiled, "_build", lambda *args: pytest.fail("not built when asked not to"))
    kernels = _kernel_set(tmp_path)
    assert kernels.load(build=False).shifted(np.arange(2, dtype=np.int64), 3)[0].tolist() == [3, 4]
    assert not kernels.built() and not list(cache.glob("_tiny_*"))


def test_a_failed_build_falls_back_to_numba_and_is_not_tried_again(cache, tmp_path, monkeypatch):
    kernels = _kernel_set(tmp_path, signature="no_such_type")
    loaded = kernels.load()
    assert not kernels.built() and list(cache.glob("_tiny_*.failed"))
    assert loaded.shifted(np.arange(2, dtype=np.int64), 1)[0].tolist() == [1, 2]  # numba's dispatcher
    monkeypatch.setattr(compiled, "_build", lambda *args: pytest.fail("a failed build is not tried again"))
    assert _kernel_set(tmp_path, signature="no_such_type").load().shifted(np.zeros(1, np.int64), 2)[0][0] == 2


def test_the_environment_can_ask_for_numba(cache, tmp_path, monkeypatch):
    monkeypatch.setenv(AHEAD_OF_TIME_ENV, "0")
    monkeypatch.setattr(compiled, "_build", lambda *args: pytest.fail("not built when numba is asked for"))
    kernels = _kernel_set(tmp_path)
    assert not kernels.built()
    assert kernels.load().shifted(np.arange(2, dtype=np.int64), 3)[0].tolist() == [3, 4]


def test_loading_a_built_set_needs_no_numba(tmp_path):
    """A fresh process reads a dump by the built kernels without importing numba (what the build is for)."""
    import subprocess

    from graphcmp.core.readers import msprobe_scan

    assert msprobe_scan._KERNELS.load() is not None and msprobe_scan.kernels_built()  # built here if need be
    from graphcmp.core.readers import naming_compiled

    naming_compiled.KERNELS.load()
    dump = Path(__file__).resolve().parents[2] / "sample_graphs"
    folder = next(p.parent for p in sorted(dump.rglob("dump.json")))
    code = ("import sys; from graphcmp.core.readers.msprobe import read_msprobe; "
            f"g = read_msprobe({str(folder)!r}); print(len(g.nodes.ids), 'numba' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    nodes, numba_loaded = done.stdout.split()
    assert int(nodes) > 10 and numba_loaded == "False"


def test_a_set_is_buildable_until_built_declined_failed_or_being_built(cache, tmp_path, monkeypatch):
    import fcntl

    kernels = _kernel_set(tmp_path)
    assert kernels.buildable()
    cache.mkdir(parents=True)
    with open(cache / f"_tiny_{kernels.key()}.lock", "a") as lock:  # another process building it now
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert not kernels.buildable()
        fcntl.flock(lock, fcntl.LOCK_UN)
    assert kernels.buildable()
    monkeypatch.setenv(AHEAD_OF_TIME_ENV, "0")
    assert not kernels.buildable()
    monkeypatch.delenv(AHEAD_OF_TIME_ENV)
    kernels.load()
    assert not kernels.buildable()
    failing = _kernel_set(tmp_path / "other", signature="no_such_type")
    assert failing.buildable()
    failing.load()
    assert not failing.buildable()
    nowhere = tmp_path / "a_file"
    nowhere.write_text("")
    monkeypatch.setattr(compiled, "_folders", lambda beside: [nowhere / "cache"])  # no folder can be made there
    assert not _kernel_set(tmp_path / "third").buildable()


def test_a_detached_build_runs_its_entry_in_a_session_of_its_own_at_the_lowest_priority(tmp_path, monkeypatch):
    """`build_detached` runs ``module:function`` in a new process that outlives its caller's terminal session, niced
    to 19, with this graphcmp first on its path, wherever the caller runs."""
    import json
    import os
    import time

    out = tmp_path / "seen.json"
    (tmp_path / "probe_entry.py").write_text(
        "import json, os, graphcmp\n"
        "def probe():\n"
        f"    open({str(out)!r} + '.part', 'w').write(json.dumps([os.nice(0), os.getsid(0), graphcmp.__file__]))\n"
        f"    os.replace({str(out)!r} + '.part', {str(out)!r})\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    decoy = tmp_path / "elsewhere" / "graphcmp"  # the command ran beside another checkout: not the one to build
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("")
    monkeypatch.chdir(decoy.parent)
    assert compiled.build_detached("probe_entry:probe")
    deadline = time.monotonic() + 180
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    niceness, session, package = json.loads(out.read_text())
    assert niceness == 19 and session != os.getsid(0)
    assert Path(package).resolve() == Path(compiled.__file__).resolve().parents[1] / "__init__.py"


def test_a_detached_build_that_cannot_start_says_so(monkeypatch):
    monkeypatch.setattr(compiled.sys, "executable", "")
    assert compiled.build_detached("probe_entry:probe") is False
