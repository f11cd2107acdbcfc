"""Every case of the hostile-input corpus (cases.py) in its own process: the expected answer, no traceback,
no hang, no run over the memory limit, and no input changed."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

import pytest

from tests.corpus import cases_more  # noqa: F401  (its cases join CASES)
from tests.corpus.cases import CASES, Case, Spec
from tests.corpus.runner import MEMORY_LIMIT, TIME_LIMIT, Result, run


def _digest(paths: list[Path]) -> dict[str, str]:
    """sha256 of every file under `paths` (links as their target text), keyed by path."""
    out: dict[str, str] = {}
    for top in paths:
        for path in sorted([top, *top.rglob("*")]) if top.is_dir() and not top.is_symlink() else [top]:
            if path.is_symlink():
                out[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                out[str(path)] = _file_digest(path)
            elif not path.is_dir():
                out[str(path)] = "special"
    return out


def _file_digest(path: Path) -> str:
    """sha256 of the file's size and of its data regions with their offsets: its holes (a sparse gigabyte of zeros)
    are read as the zeros they are without reading them; where the file system cannot tell, the whole file."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        digest.update(f"{size}".encode())
        for start, end in _data_regions(file.fileno(), size):
            file.seek(start)
            digest.update(f" {start}:".encode())
            while start < end and (chunk := file.read(min(end - start, 1 << 24))):
                digest.update(chunk)
                start += len(chunk)
    return digest.hexdigest()


def _data_regions(fd: int, size: int) -> list[tuple[int, int]]:
    regions, offset = [], 0
    try:
        while offset < size:
            start = os.lseek(fd, offset, os.SEEK_DATA)
            offset = os.lseek(fd, start, os.SEEK_HOLE)
            regions.append((start, offset))
    except OSError as error:  # ENXIO: no data after offset; else no SEEK_DATA here
        if error.errno != errno.ENXIO:
            return [(0, size)]
    return regions


def _kind(path: Path) -> int:
    return stat.S_IFMT(os.stat(path).st_mode)


def _check(spec: Spec, result: Result) -> None:
    assert not result.hung, f"no answer within {TIME_LIMIT:g} s"
    assert "Traceback" not in result.err, result.err[-2000:]
    assert result.peak_bytes < MEMORY_LIMIT
    lines = [line for line in result.err.splitlines() if line.strip()]
    if spec.expect == "error":
        assert result.code == 2, (result.code, result.out[-500:], result.err[-500:])
        assert len(lines) == 1 and lines[0].startswith("graphcmp: error: "), lines
        assert spec.says in lines[0], lines[0]
    elif spec.expect == "inconclusive":
        assert result.code == 1, (result.code, result.err[-500:])
        verdict = next(line for line in result.out.splitlines() if line.startswith("verdict: "))
        assert verdict.startswith("verdict: inconclusive"), verdict
        assert spec.says in result.out, result.out[-1500:]
    else:
        assert result.code in (0, 1), (result.code, result.err[-500:])
        assert spec.says in result.out, result.out[-1500:]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}:{c.name}" for c in CASES])
def test_case(case: Case, tmp_path: Path) -> None:
    spec = case.make(tmp_path)
    before = _digest(spec.inputs)
    kinds = {path: _kind(path) for path in spec.keep}
    result = run(spec.argv, tmp_path)
    _check(spec, result)
    assert _digest(spec.inputs) == before, "an input changed"
    assert {path: _kind(path) for path in spec.keep} == kinds, "a special file was replaced"


def test_every_class_of_the_issue_has_cases() -> None:
    kinds = {c.kind for c in CASES}
    assert kinds == {"outputs", "bombs", "special", "nesting", "bigints", "thresholds", "atc_json", "truncation",
                     "tensors", "honest", "dumps", "results",
                     # issue 30
                     "dump_nesting", "huge_numbers", "ir_nesting", "vis_types", "result_ids", "quoted_bytes",
                     "unknown_big", "duplicate_keys", "empty_data", "invented_parents", "ge_duplicates", "ir_cut",
                     "vis_silent", "cli"}
    assert len({c.name for c in CASES}) == len(CASES)
