"""Time the statistics metrics of a pair of msprobe runs with the compiled kernels (`core/stat_kernels.py`) and with
numpy's block-wise passes they replace, and a whole `compare_graphs` with each, alternated in one process.

    python bench/bench_stat_kernels.py /tmp/p35 --repeat 7

`PAIR` holds ``npu/`` and ``bench/`` (msprobe rank folders). The kernels are built first if they are not. Each row
gives the median and range of `--repeat` timings, and checks that both give the same bits.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from graphcmp.core import stat_kernels
from graphcmp.core.compare import compare_graphs
from graphcmp.core.derived import derive_bench, derive_npu
from graphcmp.core.judge import _nonfinite_pairs
from graphcmp.core.metrics import by_blocks
from graphcmp.core.noise import _stat_errors
from graphcmp.core.overflow import recorded_statistics
from graphcmp.core.pairing import stat_metrics
from graphcmp.core.readers import read_graph
from graphcmp.core.rules import Thresholds


def _timed(fn: Callable[[], object], repeat: int) -> tuple[list[float], object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times, result


def _figure(times: list[float]) -> str:
    return f"{statistics.median(times):.1f} ms [{min(times):.1f}-{max(times):.1f}]"


def _same(a: object, b: object) -> bool:
    parts_a = a if isinstance(a, tuple | list) else (a,)
    parts_b = b if isinstance(b, tuple | list) else (b,)
    return all(np.asarray(x).tobytes() == np.asarray(y).tobytes() for x, y in zip(parts_a, parts_b, strict=True))


def _unbuilt() -> bool:
    """`KernelSet.built` of kernels not built: numpy's passes, what a comparison takes until they are."""
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pair", type=Path)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    stat_kernels.build()
    if not stat_kernels.KERNELS.built():
        print("the kernels cannot be built here (no C compiler?)", file=sys.stderr)
        return 1
    npu, bench = read_graph(args.pair / "npu"), read_graph(args.pair / "bench")
    derive_npu(npu)
    derive_bench(bench)
    report = compare_graphs(npu, bench)
    i, j = report.pairs.npu, report.pairs.bench
    nt, bt = npu.tensors, bench.tensors
    npu_recorded, bench_recorded = recorded_statistics(npu), recorded_statistics(bench)
    count = np.ones(len(i))
    built, unbuilt = stat_kernels.KERNELS.built, _unbuilt

    def both(fn: Callable[[], object]) -> tuple[list[float], list[float], bool]:
        compiled_times, compiled = _timed(fn, args.repeat)
        stat_kernels.KERNELS.built = unbuilt
        try:
            numpy_times, plain = _timed(fn, args.repeat)
        finally:
            stat_kernels.KERNELS.built = built
        return numpy_times, compiled_times, _same(plain, compiled)

    rows = {
        "pairs' rel_err and identical (pairing.stat_metrics)": both(lambda: tuple(stat_metrics(
            nt, bt, i, j, Thresholds(), ("rel_err", "identical")).values())),
        "noise model's statistic errors": both(lambda: stat_kernels.stat_errors(
            nt.stats, npu_recorded, bt.stats, bench_recorded, i, j, count) if stat_kernels.KERNELS.built() else
            by_blocks(lambda i, j, c: _stat_errors(nt.stats[i], bt.stats[j], npu_recorded[i] & bench_recorded[j], c),
                      i, j, count)),
        "judge's overflow pairs": both(lambda: _nonfinite_pairs(npu, bench, report.pairs)),
    }
    whole_numpy, whole_compiled = [], []
    for _ in range(args.repeat):  # alternated: the machine's speed drifts
        for kernels, times in ((built, whole_compiled), (unbuilt, whole_numpy)):
            stat_kernels.KERNELS.built = kernels
            start = time.perf_counter()
            compare_graphs(npu, bench)
            times.append((time.perf_counter() - start) * 1e3)
    stat_kernels.KERNELS.built = built
    print(f"{args.pair}: {len(i):,} tensor pairs, median [range] of {args.repeat}")
    print("| step | numpy | compiled | same bits |\n|---|---|---|---|")
    for name, (plain, compiled, same) in rows.items():
        print(f"| {name} | {_figure(plain)} | {_figure(compiled)} | {same} |")
    print(f"| `compare_graphs`, all of it (alternated) | {_figure(whole_numpy)} | {_figure(whole_compiled)} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
