"""The layering rules: the core is a chain of layers that only import downwards, then the app, then the CLI.

`LAYERS` is the ordered list (docs/architecture.md describes each layer). A module may import
modules of its own layer or of layers below it, at the top of the file or inside a function; the
runtime imports of the whole package form no cycle. Imports under ``if TYPE_CHECKING:`` are type
hints only (a layer may name a type from above it that way), but the core never names the app or
the CLI at all. A graphcmp import inside a function body (or an ``import_module`` call) is allowed
only where `LAZY_IMPORTS` lists it, with the start-up time it saves as measured by
``bench/bench_imports.py``.
"""

from __future__ import annotations

import ast
import re
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "graphcmp"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("graphcmp._version", "graphcmp.samples", "graphcmp.core", "graphcmp.core.arrays", "graphcmp.core.errors",
              "graphcmp.core.inputs", "graphcmp.core.dtypes", "graphcmp.core.jsonio", "graphcmp.core.outputs",
              "graphcmp.core.export", "graphcmp.core.export.columns", "graphcmp.core.fields", "graphcmp.core.metrics",
              "graphcmp.core.npzio", "graphcmp.core.forking", "graphcmp.core.texts", "graphcmp.core.ascend_dtypes",
              "graphcmp.core.device_formats", "graphcmp.core.overflow_status", "graphcmp.core.simd",
              "graphcmp.core.jsonnum", "graphcmp.core.compiled", "graphcmp.core.tensor_fused",
              "graphcmp.core.tensor_fused_layout", "graphcmp.core.tensor_kernels", "graphcmp.core.stat_fused",
              "graphcmp.core.stat_kernels", "graphcmp.core.id_kernels", "graphcmp.core.id_fused")),
    ("records", ("graphcmp.core.records", "graphcmp.core.rules", "graphcmp.core.shards")),
    ("hierarchy", ("graphcmp.core.hierarchy", "graphcmp.core.dataflow")),
    ("readers", ("graphcmp.core.readers", "graphcmp.core.readers.*", "graphcmp.core.mapping_files",
                 "graphcmp.core.export.graph_json")),
    ("matching", ("graphcmp.core.matching", "graphcmp.core.matching.*")),
    ("pairing", ("graphcmp.core.pairing", "graphcmp.core.tensor_metrics", "graphcmp.core.tensorio",
                 "graphcmp.core.tensorcmp", "graphcmp.core.elementwise")),
    ("judge", ("graphcmp.core.judge", "graphcmp.core.noise", "graphcmp.core.overflow", "graphcmp.core.derived",
               "graphcmp.core.reference")),
    ("divergence", ("graphcmp.core.divergence",)),
    ("report", ("graphcmp.core.report", "graphcmp.core.outcome", "graphcmp.core.export.vis",
                "graphcmp.core.export.vis_records", "graphcmp.core.export.vis_db",
                "graphcmp.core.export.model_explorer", "graphcmp.core.export.document",
                "graphcmp.core.export.table", "graphcmp.core.export.table_files", "graphcmp.core.export.msaccucmp")),
    ("compare", ("graphcmp.core.compare", "graphcmp.core.distributed", "graphcmp.core.distributed.*")),
    ("app", ("graphcmp.app", "graphcmp.app.*")),
    ("cli", ("graphcmp", "graphcmp.__main__", "graphcmp.cli", "graphcmp.cli.*")),
)
"""Layers from the bottom up, and the modules of each (``*`` stands for the modules of a package)."""

LAZY_IMPORTS: dict[tuple[str, str], str] = {
    # the command line: `graphcmp` imports every subcommand module, so what a handler imported at the top of
    # its module would load before every command (figures: `bench/bench_imports.py --lazy`, the import on top
    # of what the importer's process already holds, median of 9 fresh processes, 2-core machine)
    ("graphcmp.core.readers.msprobe", "graphcmp.core.readers.msprobe_scan"):
        "8.6 ms before every command that reads no msprobe dump",
    ("graphcmp.core.readers.msprobe", "graphcmp.core.readers.naming_compiled"):
        "3.7 ms before every command that reads no msprobe dump (msprobe_scan loads it)",
    ("graphcmp.core.readers.msprobe_scan", "graphcmp.core.readers.msprobe_scan_kernels"):
        "400 ms (numba) in every reading process: taken only to build the kernels, or where they cannot be",
    ("graphcmp.core.readers.naming_compiled", "graphcmp.core.readers.naming_kernels"):
        "390 ms (numba) in every reading process: taken only to build the kernels, or where they cannot be",
    ("graphcmp.cli.kernels", "graphcmp.core.readers.msprobe_scan"):
        "8.6 ms before every command that reads no msprobe dump (reading one loads it)",
    ("graphcmp.cli.compare", "graphcmp.core.compare"):
        "45 ms: loaded while the forked process reads the npu run (read_pair meanwhile), not before it starts",
    ("graphcmp.cli.compare", "graphcmp.core.report"): "40 ms: with core.compare, while the npu run is read",
    ("graphcmp.cli.compare", "graphcmp.core.tensorcmp"): "0.2 ms, loaded with core.compare while the npu run is read",
    ("graphcmp.cli.build", "graphcmp.core.report"): "35 ms before every other command",
    ("graphcmp.cli.compare", "graphcmp.core.readers.ascend_golden"):
        "30-45 ms (the raw dump header's protobuf gencode): only an Ascend dump against golden data",
    ("graphcmp.cli.demo", "graphcmp.core.compare"): "45 ms before every other command",
    ("graphcmp.cli.demo", "graphcmp.core.report"): "40 ms before every other command",
    ("graphcmp.cli.demo", "graphcmp.core.outcome"): "3.5 ms before every other command (none: core.compare loads it)",
    ("graphcmp.cli.diverge", "graphcmp.core.compare"): "45 ms before every other command",
    ("graphcmp.cli.diverge", "graphcmp.core.report"): "40 ms before every other command",
    ("graphcmp.cli.diverge", "graphcmp.core.distributed.batch"): "5.5 ms before every other command",
    ("graphcmp.cli.info", "graphcmp.core.compare"): "45 ms before every other command",
    ("graphcmp.cli.info", "graphcmp.core.distributed.batch"): "5.5 ms before every other command",
    ("graphcmp.cli.batch", "graphcmp.core.distributed.batch"): "5.5 ms before every other command",
    ("graphcmp.cli.compare", "graphcmp.core.outcome"): "3.7 ms before every other command (none: core.report loads it)",
    ("graphcmp.cli.diverge", "graphcmp.core.outcome"): "3.7 ms before every other command",
    ("graphcmp.cli.info", "graphcmp.core.outcome"): "3.5 ms before every other command",
    ("graphcmp.cli.batch", "graphcmp.core.outcome"): "4.2 ms before every other command",
    ("graphcmp.cli.merged", "graphcmp.core.outcome"): "3.1 ms before every other command",
    ("graphcmp.cli.export", "graphcmp.core.compare"): "45 ms before every other command",
    ("graphcmp.cli.export", "graphcmp.core.distributed.results_folder"): "3 ms before every other command",
    ("graphcmp.cli.export", "graphcmp.core.export.vis"): "65 ms before every other command",
    ("graphcmp.cli.export", "graphcmp.core.export.vis_db"): "65 ms before every other command",
    ("graphcmp.cli.export", "graphcmp.core.export.model_explorer"): "60 ms before every other command",
    ("graphcmp.cli.export", "graphcmp.core.export.table_files"): "65 ms (as export.vis) before every other command",
    ("graphcmp.cli.export", "graphcmp.core.report"): "none after core.compare, which loads it; 40 ms alone",
    ("graphcmp.cli.export", "graphcmp.core.export.msaccucmp"): "40 ms (the report) before every other command",
    ("graphcmp.cli.export", "graphcmp.core.export.document"): "95 ms (the report and the vis exporter it names) "
        "before every other command",
    ("graphcmp.cli.mapping_options", "graphcmp.core.matching.specs"):
        "50 ms (every rule matcher, PyYAML): only when a rule option is given",
    ("graphcmp.cli.serve", "graphcmp.app"): "510 ms (Dash): `graphcmp compare` never loads Dash",
    ("graphcmp.cli.serve", "graphcmp.app.server"): "520 ms (Dash, werkzeug): only `serve` starts a server",
    ("graphcmp", "*"): "PEP 562 names: `import graphcmp` loads only the version, not 290 ms of the library",
    # the orchestrator: what only documents and manual matches need stays out of every `graphcmp compare`
    ("graphcmp.core.compare", "graphcmp.core.matching.specs"):
        "33 ms per comparison: rebuilding rules (every rule matcher, PyYAML) is for manual matches only",
    ("graphcmp.core.compare", "graphcmp.core.matching.manual"): "2.9 ms per comparison: manual matches only",
    ("graphcmp.core.compare", "graphcmp.core.readers.vis"):
        "23 ms per comparison (sqlite3, gzip, tempfile): tb-graph-ascend files only",
    # readers and tensors of one kind load only for that kind
    ("graphcmp.core.readers.detect", "*"): "29 ms for GE's protobuf gencode: each reader loads for its format",
    ("graphcmp.core.tensorcmp", "graphcmp.core.tensor_metrics"): "0.5 ms, with tensorio: tensor tasks only",
    ("graphcmp.core.tensorcmp", "graphcmp.core.tensorio"): "8 ms per comparison: tensor-task comparisons only",
    ("graphcmp.core.tensor_kernels", "graphcmp.core.simd"):
        "200-290 ms (numba, llvmlite; 3 fresh processes) and the cached kernel at the first call: only where the "
        "kernels are not built ahead of time, or to build them",
    ("graphcmp.core.tensor_kernels", "graphcmp.core.tensor_fused"):
        "240 ms (numba, llvmlite; median of 3, 200-360), and 260-410 ms loading the cached kernels at the first "
        "call: only where the kernels are not built ahead of time, or to build them",
    ("graphcmp.core.stat_kernels", "graphcmp.core.stat_fused"):
        "400 ms (numba) in every comparing process: taken only to build the kernels",
    ("graphcmp.core.readers.msprobe", "graphcmp.core.id_kernels"):
        "8 ms (core.compiled and hashlib) before every command that reads no msprobe dump (msprobe_scan loads it)",
    ("graphcmp.core.dataflow", "graphcmp.core.id_kernels"):
        "8 ms (core.compiled and hashlib) before every command: loaded by the first forward twins, after reading",
    ("graphcmp.core.id_kernels", "graphcmp.core.id_fused"):
        "400 ms (numba) in every process finding forward twins: taken only to build the kernels",
    ("graphcmp.core.tensorcmp", "graphcmp.core.tensor_kernels"):
        "3 ms, 12 ms where no compiled reader loaded core.compiled (`python -X importtime`): tensor tasks only",
    ("graphcmp.core.tensorio", "graphcmp.core.readers.mindspore_sync"):
        "30-45 ms (the raw dump reader it shares, protobuf gencode): only MindSpore synchronous dump tensors",
    ("graphcmp.core.tensorio", "graphcmp.core.readers.pytorch_h5"):
        "120-200 ms (the reader with ascend_dump's statistics and protobuf gencode), then 50-90 ms of h5py at the "
        "first read: only tensors inside PyTorch 1.5 HDF5 dumps",
    ("graphcmp.core.tensorio", "graphcmp.core.readers.ascend_file"):
        "30-45 ms (protobuf gencode): only tensors inside Ascend raw dump files",
    # parallel jobs: `graphcmp compare` of two job roots, and `graphcmp consistency`
    ("graphcmp.cli.merged", "graphcmp.core.distributed.topology"): "6 ms before every other command",
    ("graphcmp.cli.merged", "graphcmp.core.distributed.merge"): "17 ms before every other command",
    ("graphcmp.cli.merged", "graphcmp.core.distributed.merged"): "90 ms before every other command",
    ("graphcmp.cli.merged", "graphcmp.core.distributed.batch"): "5.5 ms before every other command",
    ("graphcmp.cli.consistency", "graphcmp.core.distributed.consistency"): "23 ms before every other command",
    ("graphcmp.cli.consistency", "graphcmp.core.distributed.topology"): "6 ms before every other command",
    ("graphcmp.core.distributed.merged", "graphcmp.core.tensor_metrics"): "0.4 ms, with tensorio: tensor tasks only",
    ("graphcmp.core.distributed.merged", "graphcmp.core.tensorio"): "7 ms per merged comparison: tensor tasks only",
    # a batch's parent process only schedules: comparing is for its tasks
    ("graphcmp.core.distributed.layout", "graphcmp.core.readers.ascend_dump"):
        "30-45 ms (protobuf gencode) in every comparison: only for a folder that is no msprobe layout",
    ("graphcmp.core.distributed.batch", "graphcmp.core.compare"):
        "42 ms in every process that imports batch (the viewer, `info`, `diverge`, a batch's parent) to compare none",
    ("graphcmp.core.distributed.batch", "graphcmp.core.matching.specs"): "50 ms: rule specs are a task's to rebuild",
    ("graphcmp.core.distributed.batch", "graphcmp.core.report"): "39 ms in a batch's parent, which writes no report",
}
"""(importing module, imported module or ``*`` for a computed name) -> the measured start-up time it saves."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "proto_gen" not in p.parts}


def layer_of(module: str) -> int:
    """Index of the layer `module` belongs to (the most specific pattern wins)."""
    matches = [(len(pattern), k) for k, (_, patterns) in enumerate(LAYERS) for pattern in patterns
               if fnmatchcase(module, pattern)]
    if not matches:
        raise KeyError(f"{module} is in no layer of tests/test_layers.py: add it to LAYERS")
    return max(matches)[1]


def _imports(path: Path) -> list[tuple[str, str]]:
    """(graphcmp module, where) of every import of `path`: where is "top", "function" or "typing"."""
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = where
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and where == "top":
                here = "function"
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                here = "typing"
            if isinstance(child, ast.Import):
                found.extend((a.name, here) for a in child.names if a.name.startswith("graphcmp"))
            elif isinstance(child, ast.ImportFrom) and child.module and child.module.startswith("graphcmp"):
                found.append((child.module, here))
                found.extend((f"{child.module}.{a.name}", here) for a in child.names
                             if f"{child.module}.{a.name}" in MODULES)  # `from package import module`
            elif isinstance(child, ast.Call) and _called(child) == "import_module":
                found.append(("*", here))
            visit(child, here)

    visit(ast.parse(path.read_text(encoding="utf-8")), "top")
    return found


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


IMPORTS = {name: _imports(path) for name, path in MODULES.items()}


def test_every_module_is_in_one_layer():
    for name in MODULES:
        layer_of(name)
    assert [name for name, _ in LAYERS][:10] == ["base", "records", "hierarchy", "readers", "matching", "pairing",
                                                 "judge", "divergence", "report", "compare"]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_look_down(module):
    mine = layer_of(module)
    upward = {(name, where) for name, where in IMPORTS[module]
              if name != "*" and where != "typing" and layer_of(name) > mine}
    assert not upward, f"{module} ({LAYERS[mine][0]}) imports from above: {sorted(upward)}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("graphcmp.core")))
def test_core_names_neither_app_nor_cli(module):
    bad = {name for name, _ in IMPORTS[module] if name.startswith(("graphcmp.app", "graphcmp.cli"))}
    assert not bad, f"{module} imports {bad}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("graphcmp.app")))
def test_app_never_imports_readers(module):
    bad = {name for name, _ in IMPORTS[module] if name.startswith(("graphcmp.cli", "graphcmp.core.readers."))
           and name != "graphcmp.core.readers.detect"}
    assert not bad, f"{module} imports {bad}"


def test_runtime_imports_form_no_cycle():
    graph = {m: {n for n, where in IMPORTS[m] if where != "typing" and n in MODULES and n != m} for m in MODULES}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycle = [*path[path.index(n):], n] if n in path else [m, n]
                pytest.fail(f"import cycle: {' -> '.join(cycle)}")
            if n not in state:
                visit(n, [*path, n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_imports_inside_functions_are_the_listed_few():
    found = {(m, n) for m in MODULES for n, where in IMPORTS[m] if where == "function"}
    unlisted = sorted(found - set(LAZY_IMPORTS))
    assert not unlisted, ("graphcmp imports inside functions (import them at the top, or measure the start-up time "
                          f"they save with bench/bench_imports.py and list them in LAZY_IMPORTS): {unlisted}")
    stale = sorted(set(LAZY_IMPORTS) - found)
    assert not stale, f"LAZY_IMPORTS lists imports that are gone: {stale}"
    assert all(re.search(r"\d+(\.\d+)? ms|PEP 562", reason) for reason in LAZY_IMPORTS.values())
