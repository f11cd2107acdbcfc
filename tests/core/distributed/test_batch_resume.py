"""Resume keeps only runs made from the same inputs and options with a complete result; workers die with the parent."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from graphcmp.core.distributed.batch import BatchOptions, BatchStopped, _pool, options_digest, run_batch, run_key
from graphcmp.core.report import load_report
from graphcmp.samples import samples_dir

SAMPLE = samples_dir() / "msprobe" / "tf_small"
ORIGIN = (0, "Functional.linear.2.forward")  # the perturbed linear of layer 1, first seen in step 0


def _stamps(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted((out / "entries").iterdir())}


def _origin(index: dict) -> tuple | None:
    origin = index["analysis"]["origin"]
    return None if origin is None else (origin["step"], origin["node"])


def test_a_rerun_on_other_inputs_compares_again(tmp_path):
    out = tmp_path / "results"
    assert _origin(run_batch(SAMPLE / "perturb", SAMPLE / "baseline", out, workers=1)) == ORIGIN
    before = _stamps(out)
    again = run_batch(SAMPLE / "baseline", SAMPLE / "baseline", out, workers=1)  # baseline against itself
    assert _origin(again) is None  # not the old origin
    assert all(run["summary"]["verdicts"].get("error", 0) == 0 for run in again["runs"])
    assert all(_stamps(out)[name] != stamp for name, stamp in before.items())


def test_a_changed_input_file_redoes_that_run_only(tmp_path):
    npu = tmp_path / "npu"
    shutil.copytree(SAMPLE / "perturb", npu)
    out = tmp_path / "results"
    run_batch(npu, SAMPLE / "baseline", out, workers=1)
    before = _stamps(out)
    dump = npu / "step1" / "rank0" / "dump.json"
    dump.write_bytes(dump.read_bytes())  # same bytes, written again: another mtime
    run_batch(npu, SAMPLE / "baseline", out, workers=1)
    after = _stamps(out)
    assert after["step0_rank0.json"] == before["step0_rank0.json"]
    assert after["step1_rank0.json"] != before["step1_rank0.json"]


def test_other_options_or_threshold_content_compare_again(tmp_path):
    out = tmp_path / "results"
    limits = tmp_path / "limits.toml"
    limits.write_text("")
    run_batch(SAMPLE / "perturb", SAMPLE / "baseline", out, workers=1,
              options=BatchOptions(thresholds_file=str(limits)))
    first = _stamps(out)
    run_batch(SAMPLE / "perturb", SAMPLE / "baseline", out, workers=1,
              options=BatchOptions(thresholds_file=str(limits)))
    assert _stamps(out) == first  # same inputs, same options: kept
    limits.write_text("# the same limits, another file content\n")
    run_batch(SAMPLE / "perturb", SAMPLE / "baseline", out, workers=1,
              options=BatchOptions(thresholds_file=str(limits)))
    second = _stamps(out)
    assert all(second[name] != first[name] for name in first)
    index = run_batch(SAMPLE / "perturb", SAMPLE / "baseline", out, workers=1, options=BatchOptions(fuzzy=True))
    assert all(_stamps(out)[name] != second[name] for name in second)
    assert index["options"]["fuzzy"] is True and _origin(index) == ORIGIN


def test_the_key_covers_paths_files_and_options(tmp_path):
    digest = options_digest(BatchOptions())
    npu, bench = SAMPLE / "perturb" / "step0" / "rank0", SAMPLE / "baseline" / "step0" / "rank0"
    key = run_key(npu, bench, digest)
    assert key == run_key(npu, bench, digest)
    assert key != run_key(bench, bench, digest)
    assert key != run_key(npu, bench, options_digest(BatchOptions(tensors=False)))
    assert options_digest(BatchOptions(rules=("layer-mapping=/nonexistent.yaml",))) != digest


@pytest.mark.parametrize("damage", ["cut", "empty", "entry without key", "entry cut"])
def test_a_damaged_result_or_entry_is_compared_again(tmp_path, damage):
    out = tmp_path / "results"
    run_batch(SAMPLE / "perturb", SAMPLE / "baseline", out, workers=1)
    before = _stamps(out)
    result, entry = out / "step0_rank0.npz", out / "entries" / "step0_rank0.json"
    if damage == "cut":
        result.write_bytes(result.read_bytes()[: result.stat().st_size // 2])
    elif damage == "empty":
        result.write_bytes(b"")
    elif damage == "entry without key":
        entry.write_text(entry.read_text().replace('"key":', '"old_key":'))
    else:
        entry.write_bytes(entry.read_bytes()[:100])
    index = run_batch(SAMPLE / "perturb", SAMPLE / "baseline", out, workers=1)
    after = _stamps(out)
    assert after["step0_rank0.json"] != before["step0_rank0.json"]
    assert after["step1_rank0.json"] == before["step1_rank0.json"]
    assert _origin(index) == ORIGIN
    assert load_report(result).analysis().first.node == ORIGIN[1]


def test_a_result_cut_inside_a_member_is_not_complete(tmp_path):
    """A zip that still opens (central directory copied back) but whose member runs past the end is redone."""
    from graphcmp.core.distributed.batch import _complete

    out = tmp_path / "results"
    run_batch(SAMPLE / "perturb", SAMPLE / "baseline", out, workers=1, options=BatchOptions())
    result = out / "step0_rank0.npz"
    size = result.stat().st_size
    assert _complete(result, size) and not _complete(result, size - 1)
    data = result.read_bytes()
    tail = data.rindex(b"PK\x01\x02")  # the central directory and its end record, kept whole
    import zipfile
    with zipfile.ZipFile(result) as archive:
        last = max(archive.infolist(), key=lambda m: m.header_offset)
    cut = data[: last.header_offset + 40] + data[tail:]
    result.write_bytes(cut)
    assert not _complete(result, len(cut))


# --- stopping: the workers end with the parent -------------------------------------------------------------------

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _job(root: Path, ranks: int) -> tuple[Path, Path]:
    """A step of `ranks` rank folders on each side, symbolic links to the sample's step 0."""
    for side, source in (("npu", "perturb"), ("bench", "baseline")):
        step = root / side / "step0"
        step.mkdir(parents=True)
        for rank in range(ranks):
            (step / f"rank{rank}").symlink_to(SAMPLE / source / "step0" / "rank0", target_is_directory=True)
    return root / "npu", root / "bench"


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _start(args: list[str], out: Path) -> tuple[subprocess.Popen, list[int]]:
    """Start a batch in a child process; return it and its pool workers once both are comparing."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=Path(__file__).parents[3])
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        workers = _children(proc.pid)
        if len(workers) == 2 and (out / "entries").is_dir() and any((out / "entries").iterdir()):
            return proc, workers
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the batch did not start two workers")


def _wait_gone(pids: list[int], seconds: float = 60) -> list[int]:
    """The `pids` still alive after `seconds` (killed then, so that a failing test leaves none behind)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    survivors = [p for p in pids if _alive(p)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    return survivors


@linux_only
def test_kill_9_of_the_parent_leaves_no_worker(tmp_path):
    npu, bench = _job(tmp_path / "job", 400)
    out = tmp_path / "results"
    code = (f"from graphcmp.core.distributed.batch import run_batch; "
            f"run_batch({str(npu)!r}, {str(bench)!r}, {str(out)!r}, workers=2)")
    proc, workers = _start([sys.executable, "-c", code], out)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(60)
    assert _wait_gone(workers) == []


@linux_only
def test_sigterm_stops_the_workers_and_the_same_command_resumes(tmp_path):
    npu, bench = _job(tmp_path / "job", 400)
    out = tmp_path / "results"
    command = [sys.executable, "-m", "graphcmp", "compare", str(npu), str(bench), "-o", str(out), "--workers", "2",
               "-q"]
    proc, workers = _start(command, out)
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(120)
    finally:
        survivors = _wait_gone(workers, 5)  # gone when the parent returns
    assert code == 128 + signal.SIGTERM and survivors == []
    message = proc.stderr.read().decode().strip().splitlines()
    assert message[-1].startswith("graphcmp: stopped by SIGTERM; finished runs are kept")
    finished = len(list((out / "entries").iterdir()))
    assert 0 < finished < 400 and not (out / "index.json").exists()  # no index of another batch beside them
    index = run_batch(npu, bench, out, workers=2, progress=lambda *a: None)
    assert len(index["runs"]) == 400 and _origin(index) == ORIGIN


def test_a_stopped_pool_leaves_no_thread_running():
    """The pool's manager thread ends before the stop is raised on: at interpreter exit a thread still closing its
    wake-up pipe races with the exit hook that writes to it (an OSError traceback after the stop message)."""
    before = set(threading.enumerate())
    with pytest.raises(BatchStopped), _pool(2, None, 4) as (pool, _slots):
        running = [pool.submit(time.sleep, 30) for _ in range(4)]
        time.sleep(0.5)  # the workers have taken their tasks
        raise BatchStopped(signal.SIGTERM)
    assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []
    assert all(future.done() for future in running)
