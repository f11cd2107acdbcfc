"""The details panel of a selected node: verdict and why, npu vs bench tensors with every metric, stack trace;
in a run merged from a parallel job, the ranks it came from and each tensor's per-rank records.

Everything is looked up in the report (node views, pair metric columns, verdict columns); all
names and values are passed to Dash as text children, so nothing from a dump is rendered as HTML.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from dash import html

from graphcmp.app.job import Peer
from graphcmp.app.model import ViewModel
from graphcmp.core.judge import STATUS_NAMES
from graphcmp.core.matching.fused_ops import original_names
from graphcmp.core.noise import NodeRole
from graphcmp.core.overflow import OVERFLOW_NAMES
from graphcmp.core.records import STAT_NAMES, NodeView, Role, TensorView
from graphcmp.core.rules import ERROR, WARNING
from graphcmp.core.shards import KIND_NAMES, ShardTable, node_provenance

__all__ = ["details_panel", "short_stack"]

_SHORT_FRAMES = 2
_LIBRARY_MARKERS = ("site-packages", "dist-packages", "/lib/python")
_MAX_PEERS = 64  # linked calls listed (an all_reduce of 1,024 ranks has 1,023)
_MAX_ATTRS = 200  # attributes listed per node (a GE op has a few dozen)
_MAX_VALUE = 2000  # characters of one attribute value shown
_ROLE_ORDER = {Role.INPUT: 0, Role.PARAM: 1, Role.OUTPUT: 2, Role.PARAM_GRAD: 3}
_MAX_FOLDS = 20  # folded inputs named per node
_MAX_SHARD_ROWS = 400  # per-rank records listed for one node (a 64-rank merge holds 8 per split tensor)


def details_panel(model: ViewModel, rows: dict[str, int], peers: Sequence[Peer] = ()) -> list:
    """Components for the selected node(s): `rows` maps side -> row (the selected node and its twin).

    `peers` are the calls on other ranks linked with a communication call (`JobIndex.peers`); each is
    a button with id ``{"type": "peer", "index": "<rank>:<row>"}`` that jumps to it (in the same step).
    """
    if not rows:
        return [html.P("Click a node to see its tensors, metrics, verdict and stack.", className="hint")]
    views = {side: model.node_view(side, row) for side, row in rows.items()}
    first = views.get("npu") or views["bench"]
    parts = [html.H3(first.id, className="node-id"), _facts(model, views, rows)]
    if "npu" in rows and model.paired:
        parts.append(_verdict(model, rows["npu"]))
    if peers:
        parts.append(_peers(peers))
    parts.append(_tensor_table(model, views, rows))
    parts.extend(_shards(model, rows))
    parts.extend(_attributes(model, rows))
    parts.extend(_stacks(views))
    return parts


def _facts(model: ViewModel, views: dict[str, NodeView], rows: dict[str, int]) -> html.Div:
    v = next(iter(views.values()))
    items = [f"{v.kind.name.lower()} · {v.op} · {v.direction.name.lower()} · micro-step {v.micro_step}",
             f"children: {len(v.children)}"]
    if model.paired:
        if "npu" in views and "bench" in views:
            rule = model.report.matches.rules[int(model.report.matches.rule[rows["npu"]])]
            twin = views["bench"].id
            items.append(f"bench twin ({rule} match): {twin}" if twin != v.id else f"matched ({rule})")
        else:
            items.append(f"no counterpart in the {'bench' if 'npu' in views else 'npu'} run")
    for side, row in rows.items():
        folds = model.trees[side].folds(row)
        if len(folds):
            ids = model.graphs[side].nodes.ids
            names = ", ".join(ids[r] for r in folds[:_MAX_FOLDS].tolist())
            more = f" … {len(folds) - _MAX_FOLDS} more" if len(folds) > _MAX_FOLDS else ""
            items.append(f"inputs folded into it on {side} (no input of their own): {len(folds)}: {names}{more}")
        into = model.trees[side].folded_into
        if into is not None and into[row] >= 0:
            items.append(f"drawn folded into {model.graphs[side].nodes.ids[int(into[row])]} on {side}")
        level = int(model.overflow[side][row])
        if level:
            items.append(f"overflow on {side}: {OVERFLOW_NAMES.get(level, level)} (inf/NaN or at the dtype's limit)")
    return html.Ul([html.Li(t) for t in items], className="facts")


def _verdict(model: ViewModel, row: int) -> html.Div:
    v = model.report.verdicts
    status = STATUS_NAMES[int(v.status[row])]
    worst = STATUS_NAMES[int(v.worst[row])]
    role = NodeRole(int(model.report.noise.role[row])).name.lower().replace("_", " ")
    lines = [html.Span(status, className=f"badge status-{status}"),
             html.Span(f" role: {role} · severity {_num(v.severity[row])} · input severity "
                       f"{_num(v.input_severity[row])} · worst below: {worst}"
                       + (f" · {int(v.unmatched_below[row])} unmatched below" if v.unmatched_below[row] else ""))]
    reason = v.reason[row]
    return html.Div([html.Div(lines), html.Div(reason or "—", className="reason")], className="verdict")


def _tensor_table(model: ViewModel, views: dict[str, NodeView], rows: dict[str, int]) -> html.Table:
    by_key: dict[tuple[int, str], dict[str, TensorView]] = {}
    for side, view in views.items():
        for t in view.tensors:
            by_key.setdefault((int(t.role), t.slot), {})[side] = t
    metrics = _pair_metrics(model, rows) if len(views) == 2 else {}
    head = html.Tr([html.Th(h) for h in ("tensor", "run", "dtype", "shape",
                                         *(s.capitalize() for s in STAT_NAMES), "md5 / value / metrics")])
    body = []
    for key in sorted(by_key, key=lambda k: (_ROLE_ORDER.get(k[0], 9), _slot_key(k[1]))):
        name = f"{Role(key[0]).name.lower()}.{key[1]}"
        sides = by_key[key]
        for side in ("npu", "bench"):
            if side in sides:
                body.append(_tensor_row(name if side == next(iter(sides)) else "", side, sides[side]))
        if key in metrics:
            body.append(_metric_row(metrics[key]))
    if not body:
        body = [html.Tr(html.Td("no tensors recorded for this node", colSpan=9))]
    return html.Table([html.Thead(head), html.Tbody(body)], className="tensors")


def _slot_key(slot: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in slot.split("."))


def _tensor_row(name: str, side: str, t: TensorView) -> html.Tr:
    stats = [html.Td(_num(t.stats[s]) if s in t.stats else "", className="num") for s in STAT_NAMES]
    extra = t.md5 or t.value or t.file
    return html.Tr([html.Td(name, className="slot"), html.Td(side), html.Td(t.dtype), html.Td(t.shape), *stats,
                    html.Td(extra)], className=f"side-{side}")


def _pair_metrics(model: ViewModel, rows: dict[str, int]) -> dict[tuple[int, str], dict]:
    """Metric values of every tensor pair of the npu node, by (role, slot)."""
    report = model.report
    pairs = report.pairs
    t = report.npu.tensors
    ks = np.flatnonzero(t.node[pairs.npu] == rows["npu"])
    metrics = pairs.metrics.at(ks)  # only these pairs' rows of a column not computed yet
    out = {}
    for i, k in enumerate(ks.tolist()):
        tensor = int(pairs.npu[k])
        values = {name: col[i] for name, col in metrics.items()}
        values["level"] = int(report.verdicts.pair_level[k])
        values["role"] = _pair_role(model, k)
        out[(int(t.role[tensor]), t.slot[tensor])] = values
    return out


def _pair_role(model: ViewModel, k: int) -> int:
    """The noise-model role behind pair `k`: for an input, the role of the call that produced it (its own node's
    when no compared call did); for an output, its node's."""
    report = model.report
    noise = report.noise
    tensor = int(report.pairs.npu[k])
    node = int(report.npu.tensors.node[tensor])
    producer = int(noise.producer[k]) if int(report.npu.tensors.role[tensor]) == Role.INPUT else -1
    return int(noise.role[producer if producer >= 0 else node])


def _pair_badge(level: int, role: int) -> html.Span:
    """The badge of a pair: its metric level, unless the noise model finds its error within what its precision
    allows (then "within noise", whatever limit a metric passed: the badge never contradicts the roles)."""
    name = STATUS_NAMES.get(level, "")
    if role == NodeRole.WITHIN_NOISE and level in (WARNING, ERROR):
        return html.Span("within noise", className="badge status-pass role-within",
                         title=f"{name} by the metric's fixed limit, but within the noise its precision allows")
    return html.Span(name, className=f"badge status-{name}")


def _metric_row(values: dict) -> html.Tr:
    rel = values.get("rel_errs")
    cells = [html.Td(_num(x), className="num") for x in rel] if rel is not None else [html.Td("")] * 4
    skip = {"rel_errs", "level", "identical", "role"}
    text = []
    for name, value in values.items():
        if name in skip:
            continue
        if isinstance(value, np.ndarray):
            text.append(f"{name} [{', '.join(_num(x) for x in value)}]")
        elif not (isinstance(value, float) and math.isnan(value)):
            text.append(f"{name} {_num(value)}")
    if values.get("identical"):
        text.append("identical")
    return html.Tr([html.Td(_pair_badge(values["level"], values["role"])), html.Td("Δ rel"),
                    html.Td(""), html.Td(""), *cells, html.Td(" · ".join(text), className="metrics")],
                   className="metric-row")


def _shards(model: ViewModel, rows: dict[str, int]) -> list:
    """Per side of a merged run: the ranks the node came from and every tensor's per-rank records (all text)."""
    out = []
    for side, row in rows.items():
        graph = model.graphs[side]
        shards: ShardTable | None = getattr(graph, "shards", None)
        origin = node_provenance(graph, row)
        if shards is None or not origin.ranks:
            continue
        where = f"merged from ranks {', '.join(map(str, origin.ranks))}"
        if origin.source_id and origin.source_id != graph.nodes.ids[row]:
            where += f" · its id in rank {origin.ranks[0]}'s dump: {origin.source_id}"
        head = html.Tr([html.Th(h) for h in ("tensor", "kind", "rank", "local shape",
                                             *(s.capitalize() for s in STAT_NAMES), "node in that rank's dump")])
        body = []
        t = graph.tensors
        disagreeing = set(shards.disagreeing().tolist())
        for k in sorted(graph.tensor_rows_at(row).tolist(),
                        key=lambda k: (_ROLE_ORDER.get(Role(int(t.role[k])), 9), _slot_key(t.slot[k]))):
            body.extend(_shard_rows(graph, shards, k, k in disagreeing))
            if len(body) >= _MAX_SHARD_ROWS:
                body.append(html.Tr(html.Td("… more shards not shown", colSpan=9)))
                break
        out.append(html.Div([html.H4(f"shards ({side})" if model.paired else "shards"), html.Div(where),
                             html.Table([html.Thead(head), html.Tbody(body)], className="shards")],
                            className="shards-panel"))
    return out


def _shard_rows(graph, shards: ShardTable, k: int, disagrees: bool) -> list:
    t = graph.tensors
    kind = KIND_NAMES.get(int(shards.kind[k]), "?")
    if kind == "split":
        dim = int(shards.split_dim[k])
        kind += f" along dim {dim}" if dim >= 0 else " (dimension from the other run)"
    if disagrees:
        kind += " · replicas disagree"
    name = f"{Role(int(t.role[k])).name.lower()}.{t.slot[k]}"
    own = graph.nodes.ids[int(t.node[k])]
    out = []
    for i, r in enumerate(shards.rows(k).tolist()):
        stats = [html.Td(_num(shards.stats[r, j]) if shards.present[r, j] else "", className="num")
                 for j in range(len(STAT_NAMES))]
        out.append(html.Tr([html.Td(name if i == 0 else "", className="slot"), html.Td(kind if i == 0 else ""),
                            html.Td(f"rank {int(shards.rank[r])}"), html.Td(shards.shape[r]), *stats,
                            html.Td(shards.node[r] if shards.node[r] != own else "")],
                           className="shard-row disagree" if disagrees else "shard-row"))
    return out


def _peers(peers: Sequence[Peer]) -> html.Div:
    """The linked calls on other ranks, each a jump to that rank's node, coloured by its verdict there."""
    items = []
    for p in peers[:_MAX_PEERS]:
        status, gap = p.status or "unknown", "" if p.complete else " (link incomplete)"
        items.append(html.Button([html.Span(status, className=f"badge status-{status}"),
                                  html.Span(f" rank {p.rank}: {p.node}{gap}")],
                                 id={"type": "peer", "index": f"{p.rank}:{p.position}"}, className="peer"))
    if len(peers) > _MAX_PEERS:
        items.append(html.Div(f"… {len(peers) - _MAX_PEERS} more ranks", className="muted"))
    return html.Div([html.H4(f"linked calls on other ranks ({len(peers)})"), *items], className="peers")


def _attributes(model: ViewModel, rows: dict[str, int]) -> list:
    """Each side's node attributes as a key/value table, a fused op's original ops first (all text)."""
    out = []
    for side, row in rows.items():
        attrs = model.attrs(side, row)
        if not attrs:
            continue
        parts: list = [html.H4(f"attributes ({side})" if model.paired else "attributes")]
        names = original_names(model.graphs[side], row)
        if len(names) > 1:
            parts.append(html.Div([html.Span("fused op", className="badge fused"),
                                   html.Span(f" of {len(names)} original ops: " + ", ".join(names))],
                                  className="fused-names"))
        body = [html.Tr([html.Td(key, className="attr-key"), html.Td(_clip(value))]) for key, value in
                attrs[:_MAX_ATTRS]]
        if len(attrs) > _MAX_ATTRS:
            body.append(html.Tr(html.Td(f"… {len(attrs) - _MAX_ATTRS} more", colSpan=2)))
        parts.append(html.Table(html.Tbody(body), className="attrs"))
        out.append(html.Div(parts, className="attributes"))
    return out


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_VALUE else text[:_MAX_VALUE] + f" … ({len(text):,} characters)"


def short_stack(frames: tuple[str, ...]) -> list[str]:
    """The first frames outside libraries (the model code that made the call), at most two.

    >>> short_stack(("File /x/site-packages/torch/a.py, line 1", "File /m/model.py, line 31, in forward", "c"))
    ['File /m/model.py, line 31, in forward', 'c']
    """
    own = [f for f in frames if not any(m in f for m in _LIBRARY_MARKERS)]
    return (own or list(frames))[:_SHORT_FRAMES]


def _stacks(views: dict[str, NodeView]) -> list:
    out = []
    shown: set[tuple[str, ...]] = set()
    for side, view in views.items():
        if not view.stack or view.stack in shown:
            continue
        shown.add(view.stack)
        out.append(html.Div([
            html.H4(f"stack ({side})" if len(views) > 1 else "stack"),
            html.Pre("\n".join(short_stack(view.stack)), className="stack-short"),
            html.Details([html.Summary(f"full stack ({len(view.stack)} frames)"),
                          html.Pre("\n".join(view.stack), className="stack-full")]),
        ], className="stack"))
    return out


def _num(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.6g}"
