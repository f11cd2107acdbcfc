"""Human-readable text of reports and graphs (the only place the CLI formats output)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphcmp.core.divergence import Analysis, Divergence

__all__ = ["render_analysis", "render_batch", "render_consistency", "render_first_divergence", "render_graph_summary",
           "render_job_analysis", "render_merged", "render_outcome", "render_summary"]

_ORDER = ("pass", "warning", "error", "skip", "unmatched")


def render_summary(summary: dict[str, Any]) -> str:
    """Text of `CompareReport.summary()`."""
    npu, bench = summary["npu"], summary["bench"]
    verdicts = summary["verdicts"]
    lines = [
        f"npu   {npu['path']}: {npu['nodes']} nodes, {npu['matched']} matched, {npu['unmatched']} unmatched",
        f"bench {bench['path']}: {bench['nodes']} nodes, {bench['matched']} matched, {bench['unmatched']} unmatched",
        "matched by rule: " + ", ".join(f"{k} {v}" for k, v in summary["matched_by_rule"].items()),
        "verdicts (npu nodes): " + ", ".join(f"{k} {verdicts[k]}" for k in _ORDER if k in verdicts),
        f"tensor pairs compared: {summary['tensor_pairs']}; micro-steps: {summary['micro_steps']}",
    ]
    if summary.get("precision"):
        lines.append(f"precision: {_precision_text(summary['precision'])}")
    if summary.get("roles"):
        roles = summary["roles"].items()
        lines.append("roles (npu nodes): " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in roles))
    if summary.get("overflow"):
        lines.append("overflow (npu nodes): " + ", ".join(f"{k} {v}" for k, v in summary["overflow"].items()))
    for side in ("npu", "bench"):
        lines.extend(f"missing ({side}): {line}" for line in summary[side]["missing"])
    return "\n".join(lines)


def render_graph_summary(summary: dict[str, Any]) -> str:
    """Text of one run's counts."""
    kinds = ", ".join(f"{k} {v}" for k, v in summary["by_kind"].items())
    lines = [f"{summary['path']}: {summary['nodes']} nodes ({kinds}), {summary['tensors']} tensors"]
    lines.extend(f"missing: {line}" for line in summary["missing"])
    return "\n".join(lines)


def render_graphs(summary: dict[str, Any]) -> str:
    """Text of a file of several graphs (`file_summary`): each graph's counts under its step and rank, then the
    verdict of them all."""
    lines = [f"{summary['path']}: {len(summary['graphs'])} graphs"]
    for graph in summary["graphs"]:
        compared = "outcome" in graph
        text = render_summary(graph) + "\n" + render_outcome(graph["outcome"]) if compared else \
            render_graph_summary(graph)
        lines.append(f"step {graph['step']} rank {graph['rank']}:")
        lines.extend(f"  {line}" for line in text.splitlines())
    if "outcome" in summary:
        lines.append(render_outcome(summary["outcome"]))
    return "\n".join(lines)


def render_outcome(outcome: dict[str, Any]) -> str:
    """The verdict line of an `Outcome` (as a dict) and its hints, one per line."""
    return "\n".join([f"verdict: {outcome['reason']}", *(f"  hint: {h}" for h in outcome.get("hints", ()))])


def render_analysis(analysis: Analysis, outcome: dict[str, Any] | None = None) -> str:
    """Text of a divergence `Analysis`: the first divergence with its evidence, candidates, findings.

    With an inconclusive `outcome`, "no divergence" is said only of what was compared.
    """
    lines = []
    if analysis.first is None and outcome is not None and outcome["verdict"] == "inconclusive":
        lines.append(f"no divergence among the compared outputs, but too little was compared to say the runs "
                     f"agree ({outcome['reason'].removeprefix('inconclusive: ')})")
    elif analysis.first is None:
        lines.append(f"no divergence: every compared output is within {_noise_text(analysis.noise)}")
    else:
        lines.extend(_divergence_lines("first divergence", analysis.first))
    if analysis.candidates:
        lines.append("next candidates:")
        lines.extend(f"  {c.node} ({c.cause}, {_margin_text(c.margin)} the noise allowed)" for c in analysis.candidates)
    lines.append(f"precision: {_precision_text(analysis.precision.to_dict())}")
    if analysis.findings:
        lines.append("findings:")
        lines.extend(f"  [{f.level}] {f.message}" for f in analysis.findings if f.kind != "precision")
    if outcome is not None:
        lines.append(render_outcome(outcome))
    return "\n".join(lines)


def render_first_divergence(analysis: Analysis) -> str:
    """One line: the first divergence (or that there is none), as `compare` prints it."""
    d = analysis.first
    if d is None:
        return f"first divergence: none (every compared output is within {_noise_text(analysis.noise)})"
    return (f"first divergence: {d.node} ({d.cause}, {_margin_text(d.margin)} the noise allowed"
            f"{f', rank {d.rank}' if d.rank is not None else ''}) in {d.module or '-'}; see graphcmp diverge")


def _divergence_lines(title: str, d: Divergence) -> list[str]:
    where = ", ".join(part for part in (
        f"rank {d.rank}" if d.rank is not None else "", f"step {d.step}" if d.step is not None else "",
        f"micro-step {d.micro_step}", d.direction) if part)
    source = [f"  in its rank's own dump: {d.source_id}"] if d.source_id and d.source_id != d.node else []
    site = [f"  at: {d.call_site}"] if d.call_site else []
    why = [f"  why: {d.summary}"] if d.summary else []
    return [f"{title}: {d.node} ({where})", f"  module: {d.module or '-'}", *site,
            f"  cause: {d.cause}, {_margin_text(d.margin)} the noise allowed", *why, *source,
            *(f"  {e}" for e in d.evidence)]


def _margin_text(margin: float) -> str:
    return f"{margin:.3g}x" if margin == margin and margin != float("inf") else "far beyond"


def _precision_text(precision: dict[str, Any]) -> str:
    pairs = ", ".join(f"{p['nodes']} {p['npu']} vs {p['bench']}" for p in precision.get("dtype_pairs", []))
    return f"{precision.get('kind', '?')} (nodes: {pairs or 'no float outputs'})"


def _noise_text(noise: dict[str, Any]) -> str:
    level, units = noise.get("noise_level"), noise.get("noise_level_units")
    reference = noise.get("reference")
    if reference:
        lacks = reference["compared_calls"] - reference["measured_calls"]
        allows = f"the noise the reference run {reference['path']} shows" + (
            f" (at the {lacks} calls it lacks, the noise its precision allows)" if lacks else "")
    else:
        allows = "the noise its precision allows"
    if level is None:
        return allows
    return f"{allows} (measured noise level {level:.3g}" + (f", {units:.3g} unit roundoffs)" if units else ")")


def render_batch(summary: dict[str, Any]) -> str:
    """Text of a batch summary: one line per (step, rank), missing runs, the job's origin of divergence."""
    lines = []
    for run in summary["runs"]:
        where = f"step {run['step']} " + ("merged" if run.get("merged") else f"rank {run['rank']}")
        if "replica" in run:
            where += f" (data-parallel replica {run['replica']}: ranks {','.join(map(str, run.get('ranks') or ()))})"
        if run["error"]:
            lines.append(f"{where}: failed: {run['error']}")
            continue
        verdicts = ", ".join(f"{k} {run['verdicts'][k]}" for k in _ORDER if k in run["verdicts"])
        comm = run["comm"]
        links = "" if run.get("merged") else f"comm {comm['linked']}/{comm['nodes']} linked; "
        lines.append(f"{where}: {run['nodes']['npu']}/{run['nodes']['bench']} nodes, {run['matched']} matched; "
                     f"{verdicts}; {links}first divergence {run['first'] or '-'}")
    for side, labels in summary["missing"].items():
        if labels:
            lines.append(f"only on the {side.split('_')[0]} side: {', '.join(labels)}")
    origin = summary["origin"]
    lines.append("job: no divergence" if origin is None else
                 f"job: first divergence on {_rank_text(origin)}, step {origin['step']}: {origin['node']} "
                 f"({origin['cause']}; module {origin['module'] or '-'})")
    return "\n".join(lines)


def _rank_text(origin: dict[str, Any]) -> str:
    """``rank 1``; for a merged node held by several ranks and not attributed, ``one of ranks 0,1``."""
    ranks = origin.get("ranks") or ()
    if origin.get("rank") is None and ranks:
        return "one of ranks " + ",".join(map(str, ranks))
    source = origin.get("source_id")
    own = f" (its id there: {source})" if source and source != origin.get("node") else ""
    return f"rank {origin['rank']}{own}"


def render_merged(summary: dict[str, Any]) -> str:
    """Text of a merged comparison: both layouts, why the ranks were merged, then the batch lines."""
    layouts = summary["layouts"]
    lines = [f"npu layout:   {layouts['npu']['text']}", f"bench layout: {layouts['bench']['text']}",
             f"merged into one logical run per step: {summary['merged_because']}"]
    lines.extend(f"note ({side}): {note}" for side in ("npu", "bench") for note in layouts[side]["notes"])
    return "\n".join([*lines, render_batch(summary)])


def render_consistency(result: dict[str, Any]) -> str:
    """Text of `graphcmp consistency`: the layout, what was checked, each rank that disagrees and where."""
    lines = [f"layout: {result['layout']['text']}"]
    for step in result["steps"]:
        checked = step["checked"]
        lines.append(f"step {step['step']}: {checked['replicated']} replicated tensors, {checked['collectives']} "
                     f"collective outputs, {checked['p2p']} send/receive pairs, {checked['dp']} data-parallel "
                     f"parameters, {checked.get('dp_tensors', 0)} other data-parallel tensors checked")
        for finding in step["findings"][: result.get("shown", 20)]:
            lines.append(f"  rank {finding['rank']} differs from rank {finding['reference']} ({finding['check']}): "
                         f"{finding['node']} {finding['tensor']} — {finding['detail']}")
        hidden = len(step["findings"]) - result.get("shown", 20)
        if hidden > 0:
            lines.append(f"  ... {hidden} more")
    bad = result["bad_ranks"]
    if bad:
        lines.append(f"first disagreement: rank {bad[0]['rank']} at {bad[0]['node']} {bad[0]['tensor']}"
                     + (f" (parameter {bad[0]['parameter']})" if bad[0].get("parameter") else ""))
    elif result.get("verdict", "agree") == "agree":
        lines.append("no rank disagrees with the others")
    if result.get("reason"):
        lines.append(f"verdict: {result['reason']}")
    return "\n".join(lines)


def render_job_analysis(analysis: dict[str, Any]) -> str:
    """Text of a job's cross-rank analysis: the origin rank and node, and how the divergence spread."""
    origin = analysis["origin"]
    if origin is None:
        return "no divergence on any rank"
    lines = [f"origin: rank {origin['rank']}, step {origin['step']}, micro-step {origin['micro_step']}: "
             f"{origin['node']}", f"  module: {origin['module'] or '-'}",
             *([f"  at: {origin['call_site']}"] if origin.get("call_site") else []), f"  cause: {origin['cause']}",
             *([f"  why: {origin['summary']}"] if origin.get("summary") else []),
             *(f"  {e}" for e in origin["evidence"])]
    others = analysis["origins"][1:]
    if others:
        lines.append("other ranks diverging without a communication from a diverged rank: "
                     + ", ".join(f"rank {o['rank']} at {o['node']}" for o in others))
    step = analysis["steps"][str(origin["step"])]
    for hop in step["spread"]:
        lines.append(f"  -> rank {hop['rank']} via {hop['via']} from rank {hop['from_rank']} ({hop['from_node']})")
    for name, result in analysis["steps"].items():
        unlinked = len(result["unlinked_calls"])
        lines.append(f"step {name}: {result['links']} communication links, {unlinked} unlinked call(s)")
    return "\n".join(lines)
