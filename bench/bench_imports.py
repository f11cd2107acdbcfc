#!/usr/bin/env python3
"""Start-up import times: what `graphcmp compare` imports, and what each listed in-function import saves.

Usage::

    .venv/bin/python bench/bench_imports.py [--repeat 9] [--lazy] [--json]

Every figure is measured inside a fresh interpreter (``time.perf_counter`` around ``import_module``,
so interpreter start-up noise stays out), median of ``--repeat`` processes, the cases interleaved.

* ``start-up``: ``graphcmp.cli.main``, everything a command loads before it does anything;
* ``compare modules``: what `graphcmp compare` loads next (``core.compare``, ``core.report``,
  ``core.tensorcmp``), while its forked process reads the npu run;
* with ``--lazy``, every entry of ``LAZY_IMPORTS`` in tests/test_layers.py: the imported module on top
  of what its importer's process already holds (the figure its reason quotes).

Run it with ``PYTHONPATH=<another tree>`` to measure that tree the same way (compare side by side).
The package's bytecode is compiled first, as ``pip install`` does.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLI = "graphcmp.cli.main"
COMPARE = ("graphcmp.core.compare", "graphcmp.core.report", "graphcmp.core.tensorcmp")
# what the importer's process has loaded when the listed import runs (default: the command line's start-up)
BASES = {"graphcmp.core.compare": (CLI, *COMPARE), "graphcmp.core.tensorcmp": (CLI, *COMPARE),
         "graphcmp.core.distributed.batch": (CLI, "graphcmp.core.distributed.batch"),
         "graphcmp.core.distributed.merge": (CLI, "graphcmp.core.distributed.merge"),
         "graphcmp.core.distributed.merged": (CLI, "graphcmp.core.distributed.merged"),
         "graphcmp.core.tensor_metrics": (CLI, *COMPARE, "graphcmp.core.tensor_metrics", "graphcmp.core.tensorio"),
         "graphcmp": ("graphcmp",)}
COMPUTED = {"graphcmp.core.readers.detect": ("graphcmp.core.readers.ge",),  # what `import_module` would load
            "graphcmp": ("graphcmp.core.compare", "graphcmp.core.divergence", "graphcmp.core.distributed.batch")}

_CODE = ("import importlib, time\n"
         "for m in {base!r}: importlib.import_module(m)\n"
         "t = time.perf_counter()\n"
         "for m in {wanted!r}: importlib.import_module(m)\n"
         "print(time.perf_counter() - t)")


def measure(base: tuple[str, ...], wanted: tuple[str, ...]) -> float:
    """Milliseconds to import `wanted` in a fresh interpreter that has imported `base`."""
    out = subprocess.run([sys.executable, "-c", _CODE.format(base=base, wanted=wanted)], capture_output=True,
                         text=True, check=True)
    return float(out.stdout.split()[-1]) * 1000


def lazy_cases() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    spec = importlib.util.spec_from_file_location("test_layers", HERE.parent / "tests" / "test_layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = {}
    for importer, imported in module.LAZY_IMPORTS:
        base = BASES.get(importer, (CLI,))
        wanted = COMPUTED.get(importer, ()) if imported == "*" else (imported,)
        cases[f"{importer} -> {imported}"] = (base, wanted)
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--lazy", action="store_true", help="also measure every entry of LAZY_IMPORTS")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import graphcmp

    compileall.compile_dir(Path(graphcmp.__file__).parent, quiet=1)
    cases = {"start-up (graphcmp.cli.main)": ((), (CLI,)), "compare modules (on top of start-up)": ((CLI,), COMPARE)}
    if args.lazy:
        cases.update(lazy_cases())
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, (base, wanted) in cases.items():
            times[name].append(measure(base, wanted))
    result = {name: {"median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v)}
              for name, v in times.items()}
    if args.json:
        print(json.dumps({"package": graphcmp.__file__, "times": result}, indent=1))
        return 0
    print(f"package: {graphcmp.__file__} (median of {args.repeat} processes, [range])")
    for name, r in result.items():
        print(f"{r['median_ms']:8.1f} ms  [{r['min_ms']:.1f}-{r['max_ms']:.1f}]  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
