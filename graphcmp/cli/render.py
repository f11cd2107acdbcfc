"""Human-readable text of reports and graphs (the only place the CLI formats output)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphcmp.core.divergence import Analysis, Divergence

__all__ = ["render_analysis", "render_batch", "render_graph_summary", "render_job_analysis", "render_summary"]

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


def render_analysis(analysis: Analysis) -> str:
    """Text of a divergence `Analysis`: the first divergence with its evidence, candidates, findings."""
    lines = []
    if analysis.first is None:
        lines.append("no divergence: every compared output agrees within tolerance")
    else:
        lines.extend(_divergence_lines("first divergence", analysis.first))
    if analysis.candidates:
        lines.append("next candidates:")
        lines.extend(f"  {c.node} ({c.cause}, output error {c.output_error:.3g})" for c in analysis.candidates)
    kind = "exact rerun (any difference counts)" if analysis.exact_rerun else "cross-device (noise floor applies)"
    lines.append(f"comparison kind: {kind}")
    if analysis.findings:
        lines.append("findings:")
        lines.extend(f"  [{f.level}] {f.message}" for f in analysis.findings)
    return "\n".join(lines)


def _divergence_lines(title: str, d: Divergence) -> list[str]:
    where = ", ".join(part for part in (
        f"rank {d.rank}" if d.rank is not None else "", f"step {d.step}" if d.step is not None else "",
        f"micro-step {d.micro_step}", d.direction) if part)
    return [f"{title}: {d.node} ({where})", f"  module: {d.module or '-'}", f"  cause: {d.cause}",
            *(f"  {e}" for e in d.evidence)]


def render_batch(summary: dict[str, Any]) -> str:
    """Text of a batch summary: one line per (step, rank), missing runs, the job's origin of divergence."""
    lines = []
    for run in summary["runs"]:
        where = f"step {run['step']} rank {run['rank']}"
        if run["error"]:
            lines.append(f"{where}: failed: {run['error']}")
            continue
        verdicts = ", ".join(f"{k} {run['verdicts'][k]}" for k in _ORDER if k in run["verdicts"])
        comm = run["comm"]
        lines.append(f"{where}: {run['nodes']['npu']}/{run['nodes']['bench']} nodes, {run['matched']} matched; "
                     f"{verdicts}; comm {comm['linked']}/{comm['nodes']} linked; "
                     f"first divergence {run['first'] or '-'}")
    for side, labels in summary["missing"].items():
        if labels:
            lines.append(f"only on the {side.split('_')[0]} side: {', '.join(labels)}")
    origin = summary["origin"]
    lines.append("job: no divergence" if origin is None else
                 f"job: first divergence on rank {origin['rank']}, step {origin['step']}: {origin['node']} "
                 f"({origin['cause']}; module {origin['module'] or '-'})")
    return "\n".join(lines)


def render_job_analysis(analysis: dict[str, Any]) -> str:
    """Text of a job's cross-rank analysis: the origin rank and node, and how the divergence spread."""
    origin = analysis["origin"]
    if origin is None:
        return "no divergence on any rank"
    lines = [f"origin: rank {origin['rank']}, step {origin['step']}, micro-step {origin['micro_step']}: "
             f"{origin['node']}", f"  module: {origin['module'] or '-'}", f"  cause: {origin['cause']}",
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
