"""Reader for tb-graph-ascend files: msprobe's `.vis` (JSON, 1.x-8.1.x) and `.vis.db` (SQLite, 8.2+/26.x).

A file reads as parts, never as a finished comparison: a build-only file holds one run (a
`DumpGraph`); a compare file an npu and a bench run whose nodes msprobe linked by
``matched_node_link`` (`VisDocument.links`, npu id -> bench id). The orchestrator
(`graphcmp.core.compare.compare_vis`) compares the two runs with msprobe's links as the given
matches, so graphcmp's own judge computes the verdicts. msprobe's verdict colours
(``precision_index`` per npu node with the file's colour legend) and overflow marks are kept as
extra information, in the `VisDocument` and in ``NodeTable.attrs`` (keys ``msprobe.*``).

`parse_vis` works on a document already in memory (a parsed `.vis`, or one graph of a `.vis.db`
turned into the same shape) and is what tests call; `read_vis` opens a file (``.gz`` too) and
delegates. A `.vis.db` holds one graph pair per (step, rank): `list_vis_graphs` lists them and
`read_vis` loads the one asked for. `vis_source` names one graph of a file in a rule spec
(``msprobe=<vis_source>``), and `read_vis_links` reads only its links back, for that rule.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import math
import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson

from graphcmp.core.errors import DumpFormatError
from graphcmp.core.hierarchy import GROUP_PREFIX, MAX_DEPTH, depths, rebuild_graph, too_deep
from graphcmp.core.inputs import copy_inflated, read_input, regular_file
from graphcmp.core.jsonio import check_json_opening, load_json
from graphcmp.core.readers.detect import VIS_SUFFIXES
from graphcmp.core.readers.msprobe_schema import FILE_KEY, SCALAR_TYPES, STAT_KEYS, file_name
from graphcmp.core.readers.naming import parse_node_ids
from graphcmp.core.records import Direction, DumpGraph, FrozenColumns, NodeKind, NodeTable, Role, RunInfo, TensorTable

__all__ = [
    "ATTR_COLOR",
    "ATTR_DISTRIBUTED",
    "ATTR_OVERFLOW",
    "ATTR_PRECISION",
    "VIS_SUFFIXES",
    "ColorBand",
    "VisDocument",
    "VisGraphKey",
    "VisNodeType",
    "list_vis_graphs",
    "parse_vis",
    "read_vis",
    "read_vis_links",
    "sniff",
    "split_vis_source",
    "vis_source",
]


ATTR_PRECISION = "msprobe.precision_index"
ATTR_OVERFLOW = "msprobe.overflow_level"
ATTR_DISTRIBUTED = "msprobe.matched_distributed"
ATTR_COLOR = "msprobe.color"

MSPROBE_TASKS = {"summary": "statistics", "md5": "md5", "all": "tensor", "tensor": "tensor"}
"""msprobe task names -> graphcmp task modes."""



class VisNodeType(enum.IntEnum):
    """msprobe's ``node_type`` codes (its ``NodeOp``) that graphcmp reads and writes."""

    MODULE = 0  # a module call (and the root)
    API = 1  # an API call
    GROUP = 9  # API_LIST: a run of top-level API calls (Apis_Between_Modules.N)


_ABSENT = frozenset({"", "null", "None", "N/A", "none"})
_SCALAR_TYPES = {"int": int, "float": float, "bool": bool}
assert tuple(_SCALAR_TYPES) == SCALAR_TYPES
_SIDES = ("NPU", "Bench")
_COMPARE_FIELDS = frozenset({
    "Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr",
    "NormRelativeErr", "Requires_grad Consistent", "Result", "Err_message", "Cosine", "EucDist", "MaxAbsErr",
    "One Thousandth Err Ratio", "Five Thousandths Err Ratio", "md5",
})  # msprobe's comparison results on npu leaves: not part of the dumped value
_FILE_NAME = re.compile(r"(?:_step(\d+))?_rank(\d+)_")
_DB_GRAPH = re.compile(r"#step=(\d+)&rank=(\d+)$")


class VisGraphKey(NamedTuple):
    """One graph (pair) of a tb-graph-ascend file."""

    step: int
    rank: int


@dataclass(frozen=True, slots=True)
class ColorBand:
    """One entry of a file's colour legend: nodes whose ``precision_index`` is in [low, high].

    The band without bounds (``low is None``) is the colour of unmatched nodes.
    """

    color: str
    low: float | None
    high: float | None
    level: str = ""  # msprobe 26.x "accuracy_level": pass, warning, error, unmatched node
    description: str = ""

    def contains(self, value: float) -> bool:
        """True when `value` lies in the band (bounds included)."""
        return self.low is not None and self.high is not None and self.low <= value <= self.high


@dataclass(frozen=True, slots=True, eq=False)
class VisDocument(FrozenColumns):
    """One graph (pair) of a tb-graph-ascend file, as graphcmp records plus msprobe's own extras.

    Attributes
    ----------
    npu : DumpGraph
        The npu run (the only run of a build-only file).
    bench : DumpGraph or None
        The bench run of a compare file; None for a build-only file.
    links : Mapping of str to str
        msprobe's matches of a compare file, npu id -> bench id: the last entry of an npu node's
        ``matched_node_link``, when the bench run has that node and no earlier npu node (in
        execution order) took it. Empty for a build-only file.
    key : VisGraphKey
        Step and rank of the graph.
    task : str
        msprobe's task name (``summary``, ``md5``, ``all``).
    micro_steps : int
        Micro-step count the file declares.
    overflow_check : bool
        Whether msprobe ran with overflow checking (``-oc``).
    colors : tuple of ColorBand
        The file's colour legend.
    tool_tip : str
        The file's tool-tip text (JSON text, as msprobe writes it).
    precision_index : ndarray of float64
        msprobe's ``precision_index`` per npu row, NaN where the file has none (read-only).
    overflow_level : tuple of str
        msprobe's overflow mark per npu row, "" where none.
    """

    npu: DumpGraph
    bench: DumpGraph | None
    links: Mapping[str, str]
    key: VisGraphKey
    task: str
    micro_steps: int
    overflow_check: bool
    colors: tuple[ColorBand, ...]
    tool_tip: str
    precision_index: np.ndarray
    overflow_level: tuple[str, ...]

    @property
    def is_compare(self) -> bool:
        """True for a compare file (an npu and a bench run), False for a build-only file."""
        return self.bench is not None

    def color(self, node_id: str) -> str | None:
        """The colour msprobe's viewer gives an npu node (None: no colour, as for nodes without data)."""
        row = self.npu.row(node_id)
        if self.is_compare and node_id not in self.links:
            return next((band.color for band in self.colors if band.low is None), None)
        return color_of(float(self.precision_index[row]), self.colors)


def color_of(value: float, colors: Sequence[ColorBand]) -> str | None:
    """The colour of the first band holding `value` (None for NaN or no band).

    >>> color_of(0.5, (ColorBand("#FFFCF3", 0, 0.3), ColorBand("#FFDC7F", 0.3, 0.6)))
    '#FFDC7F'
    """
    if math.isnan(value):
        return None
    return next((band.color for band in colors if band.contains(value)), None)


# --------------------------------------------------------------------------- files


def sniff(path: str | os.PathLike[str]) -> bool:
    """True when `path` is a file named like a tb-graph-ascend file (``.vis``, ``.vis.db``, gzipped too)."""
    return Path(path).is_file() and str(path).endswith(VIS_SUFFIXES)


def list_vis_graphs(path: str | os.PathLike[str]) -> tuple[VisGraphKey, ...]:
    """The (step, rank) graphs a file holds, in order.

    A `.vis` holds one graph; its step and rank come from msprobe's file name
    (``compare_step1_rank2_<time>.vis``), 0 when the name has none.

    Raises
    ------
    DumpFormatError
        If the file is missing or is not a tb-graph-ascend file.
    """
    path = _existing(path)
    if _is_db(path):
        with _db_connection(path) as conn:
            return _db_keys(conn, str(path))
    return (_json_key(path),)


def read_vis(
    path: str | os.PathLike[str], step: int | None = None, rank: int | None = None
) -> VisDocument:
    """Read one graph (pair) of a `.vis`, `.vis.db` or their `.gz`.

    Parameters
    ----------
    path : path-like
        The file.
    step, rank : int, optional
        Which graph of a `.vis.db` to load. Defaults to the first one `list_vis_graphs` lists.

    Raises
    ------
    DumpFormatError
        If the file is not a tb-graph-ascend file, is malformed, or holds no such (step, rank).
    """
    path = _existing(path)
    if _is_db(path):
        with _db_connection(path) as conn:
            key = _pick_key(_db_keys(conn, str(path)), step, rank, str(path))
            doc = _db_document(conn, key, str(path))
        return parse_vis(doc, source=str(path), key=key)
    raw = _read_bytes(path)
    doc = load_json(raw, str(path), salvage=False).value
    return parse_vis(doc, source=str(path), key=_json_key(path))


def vis_source(path: str | os.PathLike[str], key: VisGraphKey) -> str:
    """The absolute path of a file, with ``#step=S&rank=R`` for a `.vis.db` (which holds several graphs).

    >>> vis_source("/data/compare_rank0.vis", VisGraphKey(0, 0))
    '/data/compare_rank0.vis'
    >>> vis_source("/data/compare.vis.db", VisGraphKey(1, 3))
    '/data/compare.vis.db#step=1&rank=3'
    """
    resolved = str(Path(path).resolve())
    return f"{resolved}#step={key.step}&rank={key.rank}" if _is_db(Path(path)) else resolved


def split_vis_source(text: str) -> tuple[Path, int | None, int | None]:
    """Inverse of `vis_source`: (path, step, rank); step and rank are None for a `.vis`.

    >>> split_vis_source("/data/compare.vis.db#step=1&rank=3")
    (PosixPath('/data/compare.vis.db'), 1, 3)
    """
    m = _DB_GRAPH.search(text)
    if m is None:
        return Path(text), None, None
    return Path(text[: m.start()]), int(m.group(1)), int(m.group(2))


def read_vis_links(source: str) -> dict[str, str]:
    """msprobe's matches of one compare graph, npu id -> bench id (`VisDocument.links`), without its tensors.

    Parameters
    ----------
    source : str
        The file, as `vis_source` names it (``#step=S&rank=R`` picks a graph of a `.vis.db`).

    Raises
    ------
    DumpFormatError
        If the file is missing, is not a tb-graph-ascend file, or holds no compare graph there.
    """
    path, step, rank = split_vis_source(source)
    path = _existing(path)
    if _is_db(path):
        with _db_connection(path) as conn:
            key = _pick_key(_db_keys(conn, str(path)), step, rank, str(path))
            doc = _db_document(conn, key, str(path), tensors=False)
    else:
        doc = load_json(_read_bytes(path), str(path), salvage=False).value
    if not isinstance(doc, Mapping) or not isinstance(doc.get("NPU"), Mapping) or "Bench" not in doc:
        raise DumpFormatError(f"{path}: holds no compare graph (no \"NPU\" and \"Bench\"), so no msprobe matches")
    npu_nodes, bench_nodes = _nodes(doc["NPU"], "NPU", str(path)), _nodes(doc["Bench"], "Bench", str(path))
    order, _, _ = _preorder(npu_nodes, _root(doc["NPU"], npu_nodes, f"{path}: NPU"), f"{path}: NPU")
    return _links(order, npu_nodes, bench_nodes)


def _existing(path: str | os.PathLike[str]) -> Path:
    path = regular_file(path)
    if not str(path).endswith(VIS_SUFFIXES):
        raise DumpFormatError(f"{path}: not a tb-graph-ascend file (expected a name ending in "
                              f"{', '.join(VIS_SUFFIXES)})")
    return path


def _is_db(path: Path) -> bool:
    return str(path).endswith((".vis.db", ".vis.db.gz"))


def _read_bytes(path: Path) -> bytes:
    try:
        check_json_opening(read_input(path, limit=1 << 16, gunzip=path.suffix == ".gz"), path)  # before it all
        return read_input(path, gunzip=path.suffix == ".gz")  # inflating is bounded: no compression bomb
    except (OSError, EOFError) as err:
        raise DumpFormatError(f"{path}: cannot read ({err})") from err


def _json_key(path: Path) -> VisGraphKey:
    m = _FILE_NAME.search(path.name)
    if not m:
        return VisGraphKey(0, 0)
    return VisGraphKey(int(m.group(1) or 0), int(m.group(2)))


def _pick_key(keys: Sequence[VisGraphKey], step: int | None, rank: int | None, source: str) -> VisGraphKey:
    for key in keys:
        if (step is None or key.step == step) and (rank is None or key.rank == rank):
            return key
    listed = ", ".join(f"step {k.step} rank {k.rank}" for k in keys) or "none"
    raise DumpFormatError(f"{source}: no graph for step {step} rank {rank} (the file holds: {listed})")


@contextlib.contextmanager
def _db_connection(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection that never writes beside the file.

    msprobe writes WAL-mode databases, and SQLite creates ``-wal``/``-shm`` files when it opens one
    normally, so a finished file is opened as immutable. A gzipped file, or one whose ``-wal`` still
    holds changes (tb-graph-ascend keeps edits there), is copied to a temporary folder first.
    """
    with contextlib.ExitStack() as stack:
        db_path, immutable = path, True
        wal = Path(f"{path}-wal")
        if path.suffix == ".gz" or (wal.is_file() and wal.stat().st_size > 0):
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="graphcmp_vis_")))
            db_path, immutable = folder / path.name.removesuffix(".gz"), path.suffix == ".gz"
            _copy_db(path, db_path, wal)
        try:
            conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro{'&immutable=1' if immutable else ''}",
                                   uri=True)
        except sqlite3.Error as err:
            raise DumpFormatError(f"{path}: cannot open as SQLite ({err})") from err
        stack.callback(conn.close)
        conn.row_factory = sqlite3.Row
        _check_tables(conn, str(path))
        yield conn


def _copy_db(path: Path, target: Path, wal: Path) -> None:
    try:
        if path.suffix == ".gz":
            with target.open("wb") as dst:
                copy_inflated(path, dst)  # bounded: a small .vis.db.gz never fills the disk
        else:
            shutil.copyfile(path, target)
            shutil.copyfile(wal, Path(f"{target}-wal"))
    except (OSError, EOFError) as err:
        raise DumpFormatError(f"{path}: cannot read ({err})") from err


def _check_tables(conn: sqlite3.Connection, source: str) -> None:
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as err:
        raise DumpFormatError(f"{source}: not an SQLite file ({err})") from err
    missing = {"tb_nodes", "tb_config"} - tables
    if missing:
        raise DumpFormatError(f"{source}: not a tb-graph-ascend .vis.db (no table {', '.join(sorted(missing))})")


def _db_keys(conn: sqlite3.Connection, source: str) -> tuple[VisGraphKey, ...]:
    rows = _query(conn, "SELECT DISTINCT step, rank FROM tb_nodes ORDER BY step, rank", (), source)
    if not rows:  # a file of no graph: never "0 graphs" read as a clean result
        raise DumpFormatError(f"{source}: tb_nodes holds no node, so the file holds no graph")
    return tuple(VisGraphKey(_db_int(r, "step", source), _db_int(r, "rank", source)) for r in rows)


def _db_int(row: sqlite3.Row, column: str, source: str, node: str = "") -> int:
    """An INTEGER column of a `.vis.db` row (SQLite keeps whatever a writer put there: check it)."""
    value = row[column]
    if type(value) is str and value.strip().lstrip("-").isdigit() and len(value) < 20:
        value = int(value)  # a TEXT column (node_type): msprobe writes the code as text
    if type(value) is not int:
        where = f" of node {node!r}" if node else ""
        raise DumpFormatError(f"{source}: tb_nodes column {column}{where} holds {value!r}, expected an integer")
    return value


def _query(conn: sqlite3.Connection, sql: str, params: tuple, source: str) -> list[sqlite3.Row]:
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error as err:
        raise DumpFormatError(f"{source}: unexpected .vis.db layout ({err})") from err


def _db_document(conn: sqlite3.Connection, key: VisGraphKey, source: str, *, tensors: bool = True) -> dict[str, Any]:
    """One (step, rank) of a `.vis.db` in the shape of a `.vis` document (`tensors`: with input/output data)."""
    config = _query(conn, "SELECT * FROM tb_config", (), source)
    if not config:
        raise DumpFormatError(f"{source}: table tb_config is empty")
    cfg = dict(config[0])
    stacks = {r["id"]: r["stack_info"] for r in _query(conn, "SELECT id, stack_info FROM tb_stack", (), source)}
    doc: dict[str, Any] = {
        "ToolTip": cfg.get("tool_tip") or "",
        "Colors": _json_text(cfg.get("node_colors"), {}, f"{source}: tb_config column node_colors"),
        "MicroSteps": micro_steps(cfg.get("micro_steps"), f"{source}: tb_config column micro_steps"),
        "task": cfg.get("task") or "",
        "OverflowCheck": bool(cfg.get("overflow_check")),
    }
    sides = {}
    for side in _SIDES:
        rows = _query(conn, "SELECT * FROM tb_nodes WHERE step = ? AND rank = ? AND data_source = ? "
                      "ORDER BY node_order", (key.step, key.rank, side), source)
        if rows:
            sides[side] = _db_side(rows, stacks, source, tensors=tensors)
    if cfg.get("graph_type") == "compare" and "Bench" in sides:
        doc.update(sides)
    elif "NPU" in sides:
        doc.update(sides["NPU"])
    else:
        raise DumpFormatError(f"{source}: no NPU nodes for step {key.step} rank {key.rank}")
    return doc


def _db_side(
    rows: Sequence[sqlite3.Row], stacks: Mapping[str, str], source: str, *, tensors: bool = True
) -> dict[str, Any]:
    nodes: dict[str, Any] = {}
    root = None
    for r in rows:
        name = r["node_name"]
        if not isinstance(name, str):
            raise DumpFormatError(f"{source}: tb_nodes column node_name holds {name!r}, expected text")
        if not r["up_node"]:
            root = name
        where = f"{source}: tb_nodes column {{}} of node {name!r}"
        node_type, *_ = (_db_int(r, column, source, name) for column in ("node_type", "micro_step_id", "node_order"))
        if not isinstance(precision := r["precision_index"], (int, float, type(None))):
            try:
                precision = _checked_stat(precision, where.format("precision_index"))
            except _BadStat as bad:
                raise DumpFormatError(str(bad)) from None
        nodes[name] = {
            "id": name, "node_type": node_type, "upnode": r["up_node"] or "None",
            "subnodes": _json_text(r["sub_nodes"], [], where.format("sub_nodes")),
            "matched_node_link": _json_text(r["matched_node_link"], [], where.format("matched_node_link")),
            "stack_info": _json_text(stacks.get(r["stack_id"]), [], f"{source}: tb_stack row {r['stack_id']!r}"),
            "micro_step_id": r["micro_step_id"],
            "data": {"precision_index": precision, "overflow_level": r["overflow_level"]},
            "matched_distributed": _json_text(r["matched_distributed"], {}, where.format("matched_distributed")),
            "input_data": _json_text(r["input_data"], {}, where.format("input_data")) if tensors else {},
            "output_data": _json_text(r["output_data"], {}, where.format("output_data")) if tensors else {},
        }
    if root is None:
        raise DumpFormatError(f"{source}: no root node (a node with an empty up_node)")
    return {"root": root, "dump_data_dir": rows[0]["dump_data_dir"], "node": nodes}


def _json_text(text: str | None, default: Any, where: str) -> Any:
    """A JSON text column of a `.vis.db` (`where`: the file, table, column and node, for messages), of the
    type of `default` (a list or an object)."""
    if not text:
        return default
    if not isinstance(text, str):
        raise DumpFormatError(f"{where}: holds {text!r}, expected JSON text")
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = load_json(text.encode(), where, salvage=False).value
    if value is None:  # null: as an empty column
        return default
    if not isinstance(value, type(default)):
        raise DumpFormatError(f"{where}: holds {_kind_name(value)}, expected {_kind_name(default)}")
    return value


def _kind_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true or false", type(None): "null"}.get(
        type(value), f"a number ({value})" if isinstance(value, (int, float)) else type(value).__name__)


# --------------------------------------------------------------------------- documents


def parse_vis(doc: Mapping[str, Any], *, source: str = "<memory>", key: VisGraphKey | None = None) -> VisDocument:
    """Turn a parsed `.vis` document (one graph or an NPU/Bench pair) into graphcmp records.

    Examples
    --------
    >>> node = {"node_type": 1, "input_data": {}, "subnodes": [], "matched_node_link": [], "data": {},
    ...         "output_data": {"Functional.relu.0.forward.output.0": {
    ...             "type": "torch.Tensor", "dtype": "torch.float32", "shape": "[2]",
    ...             "Max": "1.0", "Min": "0.0", "Mean": "0.5", "Norm": "null", "data_name": "-1"}}}
    >>> root = {"node_type": 0, "subnodes": ["Functional.relu.0.forward"], "input_data": {}, "output_data": {}}
    >>> doc = parse_vis({"root": "DefaultModel", "node": {"DefaultModel": root, "Functional.relu.0.forward": node}})
    >>> doc.is_compare, doc.npu.view("Functional.relu.0.forward").tensors[0].stats
    (False, {'max': 1.0, 'min': 0.0, 'mean': 0.5})
    """
    if not isinstance(doc, Mapping):
        raise DumpFormatError(f"{source}: expected a JSON object, got {type(doc).__name__}")
    key = key or VisGraphKey(0, 0)
    task = str(doc.get("task") or "summary")
    colors = _colors(doc.get("Colors") or {}, source)
    bench: DumpGraph | None = None
    links: dict[str, str] = {}
    if "NPU" in doc and "Bench" in doc:
        npu, precision, overflow = _side(doc["NPU"], "NPU", source, key, task, colors)
        bench, _, _ = _side(doc["Bench"], "Bench", source, key, task, ())
        links = _links(npu.nodes.ids, doc["NPU"]["node"], doc["Bench"]["node"])
        if lost := _lost_links(npu.nodes.ids, doc["NPU"]["node"], doc["Bench"]["node"]):
            npu = dataclasses.replace(npu, info=dataclasses.replace(npu.info, missing=(*npu.info.missing, lost)))
    elif "node" in doc:
        npu, precision, overflow = _side(doc, "graph", source, key, task, colors)
    else:
        raise DumpFormatError(f"{source}: not a msprobe .vis document (no \"NPU\"/\"Bench\" and no \"node\")")
    tool_tip = doc.get("ToolTip") or ""
    return VisDocument(
        npu=npu, bench=bench, links=links, key=key, task=task,
        micro_steps=micro_steps(doc.get("MicroSteps"), f"{source}: MicroSteps"),
        overflow_check=bool(doc.get("OverflowCheck")), colors=colors,
        tool_tip=tool_tip if isinstance(tool_tip, str) else orjson.dumps(tool_tip).decode(),
        precision_index=precision, overflow_level=overflow,
    )


def _colors(colors: Any, source: str) -> tuple[ColorBand, ...]:
    if not isinstance(colors, Mapping):
        raise DumpFormatError(f"{source}: \"Colors\" is a {type(colors).__name__}, expected an object")
    bands = []
    for color, spec in colors.items():
        value = spec.get("value") if isinstance(spec, Mapping) else None
        bounds = (float(value[0]), float(value[1])) if isinstance(value, list) and len(value) == 2 else (None, None)
        bands.append(ColorBand(str(color), *bounds, level=str(spec.get("accuracy_level", "")),
                               description=str(spec.get("description", ""))))
    return tuple(bands)


def _links(npu_order: Sequence[str], npu_nodes: Mapping[str, Any], bench_nodes: Mapping[str, Any]) -> dict[str, str]:
    """msprobe's matches: the last entry of an npu node's ``matched_node_link`` is its bench node, unless
    the bench run has no such node or an earlier npu node (in `npu_order`) already took it."""
    links: dict[str, str] = {}
    taken: set[str] = set()
    for node_id in npu_order:
        link = _record(npu_nodes[node_id], node_id, "NPU").get("matched_node_link") or []
        if link and link[-1] in bench_nodes and link[-1] not in taken:
            links[node_id] = link[-1]
            taken.add(link[-1])
    return links


def _lost_links(npu_order: Sequence[str], npu_nodes: Mapping[str, Any], bench_nodes: Mapping[str, Any]) -> str:
    """A note on the npu nodes whose ``matched_node_link`` names a bench node the file does not hold ("" if none):
    msprobe linked them, the link leads nowhere, so they are left unmatched."""
    lost = [(node_id, link[-1]) for node_id in npu_order
            if (link := npu_nodes[node_id].get("matched_node_link")) and link[-1] not in bench_nodes]
    if not lost:
        return ""
    node_id, target = lost[0]
    return (f"matched_node_link of {len(lost)} npu node(s) links to a bench node the file does not hold (first: "
            f"{node_id!r} -> {target!r}); those links were dropped and the nodes left unmatched")


def _nodes(graph: Any, side: str, source: str) -> Mapping[str, Any]:
    if not isinstance(graph, Mapping) or not isinstance(graph.get("node"), Mapping):
        raise DumpFormatError(f"{source}: {side}: no \"node\" object")
    return graph["node"]


def _root(graph: Mapping[str, Any], nodes: Mapping[str, Any], where: str) -> str:
    root = str(graph.get("root") or "DefaultModel")
    if root not in nodes:
        raise DumpFormatError(f"{where}: root {root!r} is not among the nodes")
    return root


def _side(
    graph: Any, side: str, source: str, key: VisGraphKey, task: str, colors: tuple[ColorBand, ...]
) -> tuple[DumpGraph, np.ndarray, tuple[str, ...]]:
    nodes = _nodes(graph, side, source)
    order, parent, notes = _preorder(nodes, _root(graph, nodes, f"{source}: {side}"), f"{source}: {side}")
    depth = depths(np.asarray(parent, np.int64))
    if (deep := too_deep(depth)) is not None:
        raise DumpFormatError(f"{source}: {side}: node {order[deep]!r} lies {int(depth[deep])} levels deep; no run's "
                              f"calls nest deeper than {MAX_DEPTH}")
    records = [_record(nodes[node_id], node_id, f"{source}: {side}") for node_id in order]
    precision = np.array([_float(_data(r).get("precision_index")) for r in records], np.float64)
    overflow = tuple(str(_data(r).get("overflow_level") or "") for r in records)
    stack_rows, stacks = _intern_stacks(records)
    table = _node_table(order, parent, records, stack_rows, _attrs(records, precision, overflow, colors))
    tensors = _tensor_table(order, records, table.kind, f"{source}: {side}")
    info = RunInfo(path=source, format="msprobe-vis", framework=_framework(order), task=MSPROBE_TASKS.get(task, task),
                   rank=key.rank, step=key.step, missing=tuple(notes))
    return rebuild_graph(info, table, tensors, stacks), precision, overflow


def _record(node: Any, node_id: str, where: str) -> Mapping[str, Any]:
    if not isinstance(node, Mapping):
        raise DumpFormatError(f"{where}: node {node_id!r} is a {type(node).__name__}, expected an object")
    return node


_FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "node_type": ((int,), "a whole number (msprobe's node type code)"),
    "micro_step_id": ((int,), "a whole number"),
    "subnodes": ((list,), "a list of node names"),
    "matched_node_link": ((list,), "a list of node names"),
    "stack_info": ((list,), "a list of stack frames (text)"),
    "input_data": ((dict,), "an object of tensor records"),
    "output_data": ((dict,), "an object of tensor records"),
}
"""The fields of a node record graphcmp reads, and the type each must have when present and not null."""

_LISTS_OF_TEXT = ("subnodes", "matched_node_link", "stack_info")


def _check_fields(record: Mapping[str, Any], node_id: str, where: str) -> None:
    """Refuse a node record whose fields are of another type than msprobe writes (a name list that is an object,
    node data that is a list): read anyway, they would drop the node's data or links without a word."""
    for key, (types, expected) in _FIELD_TYPES.items():
        value = record.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or isinstance(value, bool):
            raise DumpFormatError(f"{where}: node {node_id!r}: {key} is {_kind_name(value)}, expected {expected}")
        if key in _LISTS_OF_TEXT and (odd := next((v for v in value if not isinstance(v, str)), None)) is not None:
            raise DumpFormatError(f"{where}: node {node_id!r}: {key} holds {_kind_name(odd)}, expected "
                                  f"{expected}")


def micro_steps(value: Any, where: str) -> int:
    """The number of micro-steps a document declares (absent or null: 1), a whole number of at least 1."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DumpFormatError(f"{where} holds {value!r}, expected a whole number of micro-steps")
    return value or 1


def _data(record: Mapping[str, Any]) -> Mapping[str, Any]:
    data = record.get("data")
    return data if isinstance(data, Mapping) else {}


def _preorder(nodes: Mapping[str, Any], root: str, where: str) -> tuple[list[str], list[int], list[str]]:
    """Node ids in pre-order over ``subnodes`` (file order), with the parent row of each."""
    order: list[str] = []
    parent: list[int] = []
    seen: set[str] = set()
    todo: list[tuple[str, int]] = [(root, -1)]
    while todo:
        node_id, up = todo.pop()
        if node_id in seen:
            raise DumpFormatError(f"{where}: node {node_id!r} is listed under two parents (or in a cycle)")
        seen.add(node_id)
        row = len(order)
        order.append(node_id)
        parent.append(up)
        record = _record(nodes[node_id], node_id, where)
        _check_fields(record, node_id, where)
        kids = record.get("subnodes") or []
        for kid in reversed(kids):
            if kid not in nodes:
                raise DumpFormatError(f"{where}: node {node_id!r} lists sub-node {kid!r}, which is not in the file")
            todo.append((kid, row))
    stray = [n for n in nodes if n not in seen]
    for node_id in stray:  # not reachable from the root: shown at top level
        _check_fields(_record(nodes[node_id], node_id, where), node_id, where)
        seen.add(node_id)
        order.append(node_id)
        parent.append(0)
    notes = [f"{where}: {len(stray)} node(s) not reachable from the root; shown at top level"] if stray else []
    return order, parent, notes


def _node_table(
    order: list[str], parent: list[int], records: list[Mapping[str, Any]], stack_rows: np.ndarray,
    attrs: tuple[tuple[tuple[str, str], ...], ...],
) -> NodeTable:
    n = len(order)
    kind = np.zeros(n, np.int8)
    direction = np.full(n, Direction.NONE, np.int8)
    micro = np.zeros(n, np.int16)
    counters: list[int] = []
    kinds, ops, directions = parse_node_ids(order, counters=counters)
    ops[0] = ""  # the root's, as the other readers give it
    for row in range(1, n):
        kind[row], ops[row], direction[row] = _kind(records[row], kinds[row], ops[row], directions[row], counters[row])
        step = records[row].get("micro_step_id")
        micro[row] = int(step) if isinstance(step, (int, float)) and step >= 0 else micro[parent[row]]
    _group_directions(kind, direction, parent)
    return NodeTable(
        ids=tuple(order), parent=np.asarray(parent, np.int32), kind=kind, op=tuple(ops), direction=direction,
        micro_step=micro, stack=stack_rows,
        has_data=np.fromiter((bool(r.get("input_data") or r.get("output_data")) for r in records), bool, n),
        attrs=attrs,
    )


def _kind(record: Mapping[str, Any], kind: int, op: str, direction: int, counter: int) -> tuple[int, str, int]:
    """A node's kind, op and direction: as its id parses (`parse_node_ids`), but as the record's type says for a
    group, and for a module whose id does not parse."""
    if record.get("node_type") == VisNodeType.GROUP:
        return NodeKind.GROUP, GROUP_PREFIX, Direction.NONE
    if kind == NodeKind.API and counter < 0 and record.get("node_type") == VisNodeType.MODULE:
        kind = NodeKind.MODULE
    return kind, op, direction


def _group_directions(kind: np.ndarray, direction: np.ndarray, parent: list[int]) -> None:
    """A group takes the direction of its first member (as `HierarchyBuilder` does)."""
    for row in range(len(parent) - 1, 0, -1):
        p = parent[row]
        if p > 0 and kind[p] == NodeKind.GROUP:
            direction[p] = direction[row]


def _intern_stacks(records: list[Mapping[str, Any]]) -> tuple[np.ndarray, tuple[tuple[str, ...], ...]]:
    """Stack row per node (-1 without one) and the distinct stacks, in first-use order."""
    interned: dict[tuple[str, ...], int] = {}
    rows = np.full(len(records), -1, np.int32)
    for i, r in enumerate(records):
        frames = tuple(str(f) for f in (r.get("stack_info") or ()))
        if frames:
            rows[i] = interned.setdefault(frames, len(interned))
    return rows, tuple(interned)


def _attrs(
    records: list[Mapping[str, Any]], precision: np.ndarray, overflow: tuple[str, ...], colors: tuple[ColorBand, ...]
) -> tuple[tuple[tuple[str, str], ...], ...]:
    out = []
    for row, r in enumerate(records):
        attrs: list[tuple[str, str]] = []
        if not math.isnan(precision[row]):
            attrs.append((ATTR_PRECISION, repr(float(precision[row]))))
            color = color_of(float(precision[row]), colors)
            if color:
                attrs.append((ATTR_COLOR, color))
        if overflow[row]:
            attrs.append((ATTR_OVERFLOW, overflow[row]))
        if r.get("matched_distributed"):
            attrs.append((ATTR_DISTRIBUTED, orjson.dumps(r["matched_distributed"]).decode()))
        out.append(tuple(attrs))
    return tuple(out) if any(out) else ()


def _framework(order: list[str]) -> str:
    if any(n.startswith(("Cell.", "Primitive.", "Mint.")) for n in order[:200]):
        return "mindspore"
    return "pytorch" if any(n.startswith(("Module.", "Functional.", "Tensor.", "Torch.")) for n in order[:200]) else ""


# --------------------------------------------------------------------------- tensors


class _Columns:
    """Tensor columns filled leaf by leaf."""

    def __init__(self) -> None:
        self.node: list[int] = []
        self.role: list[int] = []
        self.slot: list[str] = []
        self.dtype: list[str] = []
        self.shape: list[str] = []
        self.stats: list[tuple[float, float, float, float]] = []
        self.present: list[tuple[bool, bool, bool, bool]] = []
        self.md5: list[str] = []
        self.file: list[str] = []
        self.value: list[str] = []
        self.row = 0  # the node being read, for messages

    def add(self, row: int, role: int, slot: str, leaf: Mapping[str, Any]) -> None:
        fields = _leaf_fields(leaf)
        if fields is None:
            return
        dtype, shape, md5, file, value, *stats = fields
        self.node.append(row)
        self.role.append(role)
        self.slot.append(slot)
        self.dtype.append(dtype)
        self.shape.append(shape)
        self.stats.append(tuple(0.0 if s is None else s for s in stats))
        self.present.append(tuple(s is not None for s in stats))
        self.md5.append(md5)
        self.file.append(file)
        self.value.append(value)

    def table(self) -> TensorTable:
        if not self.node:
            return TensorTable.empty()
        return TensorTable(
            node=np.asarray(self.node, np.int32), role=np.asarray(self.role, np.int8), slot=tuple(self.slot),
            dtype=tuple(self.dtype), shape=tuple(self.shape), stats=np.asarray(self.stats, np.float64),
            present=np.asarray(self.present, bool), md5=tuple(self.md5), file=tuple(self.file),
            value=tuple(self.value),
        )


def _tensor_table(order: list[str], records: list[Mapping[str, Any]], kind: np.ndarray, where: str) -> TensorTable:
    cols = _Columns()
    try:
        _fill(cols, order, records, kind)
    except _BadStat as bad:
        raise DumpFormatError(f"{where}: node {order[cols.row]!r}: {bad.args[0]}") from None
    return cols.table()


class _BadStat(ValueError):
    """A statistic that is neither a number nor one of the texts msprobe writes for none."""


def _fill(cols: _Columns, order: list[str], records: list[Mapping[str, Any]], kind: np.ndarray) -> None:
    for row, (node_id, record) in enumerate(zip(order, records)):
        cols.row = row
        prefix = node_id + "."
        param_grad = kind[row] == NodeKind.PARAM_GRAD
        inputs = _items(record.get("input_data"), prefix)
        outputs = _items(record.get("output_data"), prefix)
        by_role: dict[int, list[tuple[str, Any]]] = {int(r): [] for r in Role}
        for suffix, leaf in inputs:
            role, slot = _input_role(suffix, param_grad)
            by_role[role].append((slot, leaf))
        for suffix, leaf in outputs:
            head, _, rest = suffix.partition(".")
            by_role[int(Role.OUTPUT)].append((rest if head == "output" and rest else suffix, leaf))
        for role in (Role.INPUT, Role.OUTPUT, Role.PARAM, Role.PARAM_GRAD):
            for slot, leaf in by_role[int(role)]:
                cols.add(row, int(role), slot, leaf)


def _items(data: Any, prefix: str) -> list[tuple[str, Any]]:
    if not isinstance(data, Mapping):
        return []
    return [(k[len(prefix):] if k.startswith(prefix) else k, v) for k, v in data.items() if isinstance(v, Mapping)]


def _input_role(suffix: str, param_grad: bool) -> tuple[int, str]:
    head, _, rest = suffix.partition(".")
    if head == "input" and rest:
        return int(Role.INPUT), rest
    if head == "parameters" and rest:
        return int(Role.PARAM), rest
    return int(Role.PARAM_GRAD if param_grad else Role.INPUT), suffix


def _leaf_fields(leaf: Mapping[str, Any]) -> tuple | None:
    """One leaf's row in `msprobe_schema.COLUMNS` order, as the msprobe reader would record it; None to skip.

    Route 4 of `msprobe_schema`: msprobe's copy of a leaf holds statistics and shapes as text.
    """
    kind = leaf.get("type")
    if kind is None:
        return None  # {"value": "null"}: an argument that was None, which dumps do not record
    kind = str(kind)
    if kind in _SCALAR_TYPES and "value" in leaf:
        return _scalar_fields(kind, leaf["value"])
    if "dtype" in leaf and kind not in ("str",) and not str(leaf.get("dtype", "")).startswith("<class"):
        name = str(leaf.get(FILE_KEY) or "")
        return (str(leaf.get("dtype") or ""), str(leaf.get("shape") or ""), _text(leaf.get("md5")),
                file_name(None if name == "None" else name), "", *(_checked_stat(leaf.get(k), k) for k in STAT_KEYS))
    return kind, "", "", "", _other_text(leaf), None, None, None, None


_NOT_VALUE = frozenset({"type", "value", "requires_grad", FILE_KEY})


def _other_text(leaf: Mapping[str, Any]) -> str:
    """Text of a non-numeric argument, as the msprobe reader keeps it (its value, else its other fields)."""
    if "value" in leaf:
        return "" if leaf["value"] is None else str(leaf["value"])
    fields = {k: _json_list(v) for k, v in leaf.items() if k not in _NOT_VALUE and k not in _COMPARE_FIELDS}
    return orjson.dumps(fields).decode() if fields else ""


def _json_list(value: Any) -> Any:
    """msprobe writes lists as their Python text ("[0, 1]"); read them back as lists."""
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        with contextlib.suppress(orjson.JSONDecodeError):
            return orjson.loads(value)
    return value


def _scalar_fields(kind: str, value: Any) -> tuple | None:
    text = str(value)
    if text in _ABSENT and kind != "bool":
        return kind, "", "", "", text, None, None, None, None
    try:
        number = float(text in ("True", "true")) if kind == "bool" else float(_SCALAR_TYPES[kind](float(text)))
    except ValueError:
        return kind, "", "", "", text, None, None, None, None
    shown = orjson.dumps(text in ("True", "true") if kind == "bool" else int(number) if kind == "int" else number)
    return kind, "scalar", "", "", shown.decode(), number, number, number, None


def _stat(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if text in _ABSENT:
        return None
    try:
        return float(text)
    except ValueError:
        return None


_BOOL_TEXT = frozenset({"True", "False", "true", "false"})


def _checked_stat(value: Any, what: str) -> float | None:
    """`_stat`, but text that is neither a number nor none (nor a bool tensor's True/False) is `_BadStat`: such
    a value is no measurement (read as none, the node would compare nothing and say nothing)."""
    stat = _stat(value)
    if stat is None and value is not None and not isinstance(value, bool) and (
            text := str(value).strip()) not in _ABSENT and text not in _BOOL_TEXT:
        raise _BadStat(f"{what} is {str(value)[:40]!r}, expected a number")
    return stat


def _float(value: Any) -> float:
    stat = _stat(value)
    return math.nan if stat is None else stat


def _text(value: Any) -> str:
    return "" if value is None or str(value) in _ABSENT else str(value)
