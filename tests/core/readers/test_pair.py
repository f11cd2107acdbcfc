"""Reading an npu run and its bench run side by side (the bench run in a forked process)."""

from __future__ import annotations

import errno
import io
import os
import pickle
import tempfile
import time
from dataclasses import replace

import numpy as np
import pytest

from graphcmp.core import dataflow
from graphcmp.core.compare import compare_graphs
from graphcmp.core.derived import derive_bench, derive_npu, derive_npu_aside, derive_npu_here
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.overflow import overflow_levels
from graphcmp.core.readers import pair
from graphcmp.core.readers.detect import read_graph


@pytest.fixture
def side_by_side(monkeypatch):
    monkeypatch.setattr(pair, "PARALLEL_READ_BYTES", 0)  # the small sample pair too


def test_side_by_side_reads_what_one_process_reads(side_by_side, perturb_pair):
    npu, bench = pair.read_pair(*perturb_pair)
    assert npu == read_graph(perturb_pair[0]) and bench == read_graph(perturb_pair[1])


def test_what_the_comparison_derives_from_the_npu_run_is_derived_ahead_and_used(side_by_side, perturb_pair):
    npu, bench = pair.read_pair(*perturb_pair, ahead=derive_npu)
    assert {"overflow", "producers", "forward twins", "communication", "trained parameters"} <= set(npu._cache)
    assert "forward twins" not in bench._cache  # the npu run's alone
    fresh = read_graph(perturb_pair[0])
    assert (dataflow.forward_twins(npu) >= 0).any()
    for derived in (dataflow.forward_twins, dataflow.earliest_producers, overflow_levels):
        assert np.array_equal(derived(npu), derived(fresh))
        assert not derived(npu).flags.writeable  # derived in the reading process, read-only here too
    assert compare_graphs(npu, bench) == compare_graphs(fresh, read_graph(perturb_pair[1]))


def test_a_bad_bench_run_is_the_error_reading_it_here_gives(side_by_side, perturb_pair, tmp_path):
    with pytest.raises(DumpFormatError, match="missing: no such file or folder"):
        pair.read_pair(perturb_pair[0], tmp_path / "missing")


def test_when_both_runs_are_bad_the_npu_runs_error_is_given(side_by_side, tmp_path):
    for side in ("npu", "bench"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "dump.json").write_text('{"data": [')  # cut short
    with pytest.raises(DumpFormatError) as raised:
        pair.read_pair(tmp_path / "npu", tmp_path / "bench")
    assert str(tmp_path / "npu") in str(raised.value) and str(tmp_path / "bench") not in str(raised.value)


@pytest.mark.parametrize("in_memory", [True, False])
def test_the_bench_run_leaves_no_file_behind(side_by_side, perturb_pair, tmp_path, monkeypatch, in_memory):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the run is written without a memory file
    if not in_memory:
        monkeypatch.delattr(os, "memfd_create", raising=False)
    _npu, bench = pair.read_pair(*perturb_pair)
    assert bench == read_graph(perturb_pair[1]) and list(tmp_path.iterdir()) == []


def test_a_full_disk_sends_the_bench_run_through_the_pipe(side_by_side, perturb_pair, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pickle, "dump", full)  # in the forked process too
    _npu, bench = pair.read_pair(*perturb_pair)
    assert bench == read_graph(perturb_pair[1])


def test_a_run_written_part_by_part_reads_back_equal(perturb_pair):
    run = read_graph(perturb_pair[1])
    dataflow.flow_edges(run)
    spool = io.BytesIO()
    pair.dump_run(run, spool)
    spool.seek(0)
    back = pair.load_run(spool)
    assert back == run and back.nodes.ids == run.nodes.ids and type(back.nodes.ids) is tuple
    assert np.array_equal(dataflow.flow_edges(back).src, dataflow.flow_edges(run).src)
    assert not back.tensors.stats.flags.writeable and spool.read() == b""  # every part read, nothing after


def test_node_ids_holding_a_nul_byte_are_written_as_they_are(perturb_pair):
    run = read_graph(perturb_pair[1])
    ids = ("root\0odd", *run.nodes.ids[1:])
    run = replace(run, nodes=replace(run.nodes, ids=ids), _rows={}, _cache={})
    spool = io.BytesIO()
    pair.dump_run(run, spool)
    spool.seek(0)
    assert pair.load_run(spool).nodes.ids == ids


def test_what_the_comparison_derives_from_either_run_is_derived_in_both_processes_at_once(side_by_side,
                                                                                          perturb_pair):
    npu, bench = pair.read_pair(*perturb_pair, ahead=derive_npu_aside, ahead_bench=derive_bench,
                                ahead_loaded=derive_npu_here)
    assert {"fingerprints", "execution_keys", "summed_beyond_range"} <= set(bench._cache)
    assert "forward twins" not in bench._cache
    assert {"overflow", "producers", "forward twins", "communication", "trained parameters"} <= set(npu._cache)
    assert not any(d.flags.writeable for d in npu._cache.values() if isinstance(d, np.ndarray))
    fresh = read_graph(perturb_pair[1])
    assert np.array_equal(dataflow.run_fingerprints(bench), dataflow.run_fingerprints(fresh))
    assert compare_graphs(npu, bench) == compare_graphs(read_graph(perturb_pair[0]), fresh)


def test_what_was_derived_reaches_this_process_when_the_disk_fills_after_the_run(side_by_side, perturb_pair,
                                                                                monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)  # the derived arrays' part, in the forked process
    npu, _bench = pair.read_pair(*perturb_pair, ahead=derive_npu)
    assert npu == read_graph(perturb_pair[0]) and "forward twins" in npu._cache
    assert not dataflow.forward_twins(npu).flags.writeable


def test_an_npu_run_the_reading_process_does_not_send_is_no_bad_input(side_by_side, perturb_pair, monkeypatch):
    monkeypatch.setattr(pair, "read_graph", lambda path, format=None: os._exit(3))  # killed, in the forked process
    monkeypatch.setattr(pair, "side_by_side", lambda *paths: True)
    with pytest.raises(RuntimeError, match="ended without sending it"):
        pair._npu_run(pair.Forked(pair._read_spooled, perturb_pair[0], None, 0), perturb_pair[0], io.BytesIO())


@pytest.mark.parametrize("slower", ["here", "reading process"])
def test_what_either_process_may_derive_is_derived_once_by_the_first_free(side_by_side, perturb_pair, tmp_path,
                                                                          slower):
    done_by = tmp_path / "pids"

    def late(seconds):
        return lambda graph: time.sleep(seconds)

    def loaded(graph):
        derive_npu_here(graph)
        with done_by.open("a") as file:
            file.write(f"{os.getpid()}\n")

    # 3 s late: the other reads the small pair and derives within a fraction of that, even on a loaded machine
    ahead, ahead_bench = ((derive_npu_aside, late(3.0)) if slower == "here" else
                          (lambda graph: (time.sleep(3.0), derive_npu_aside(graph)), None))
    npu, _bench = pair.read_pair(*perturb_pair, ahead=ahead, ahead_bench=ahead_bench, ahead_loaded=loaded)
    pids = done_by.read_text().split()
    assert len(pids) == 1 and (pids[0] == str(os.getpid())) == (slower == "reading process")
    assert {"overflow", "producers", "forward twins", "communication", "trained parameters"} <= set(npu._cache)
    fresh = read_graph(perturb_pair[0])
    for derived in (dataflow.earliest_producers, overflow_levels):
        assert np.array_equal(derived(npu), derived(fresh)) and not derived(npu).flags.writeable


def test_a_claim_is_taken_once_across_processes():
    with pair._Claim() as claim:
        child = os.fork()
        if child == 0:
            os._exit(0 if claim.take() else 1)
        _pid, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0 and not claim.take()


def test_the_run_handed_over_is_kept_when_its_reading_process_fails_afterwards(monkeypatch):
    from graphcmp.core.readers import pair

    monkeypatch.setattr(pair, "PARALLEL_READ_BYTES", 0)  # the npu run read by a forked process
    if not pair.can_fork_aside():
        pytest.skip("no fork here")

    def broken(graph):  # fails after the run was sent: what it derives is a cache, made again when needed
        raise ValueError("a bug in a derivation")

    from tests.conftest import sample_pair

    npu, bench = pair.read_pair(*sample_pair(), ahead=broken)
    assert len(npu) == len(bench) > 0
