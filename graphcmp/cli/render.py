"""Human-readable text of reports and graphs (the only place the CLI formats output)."""

from __future__ import annotations

from typing import Any

__all__ = ["render_graph_summary", "render_summary"]

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
    for side in ("npu", "bench"):
        lines.extend(f"missing ({side}): {line}" for line in summary[side]["missing"])
    return "\n".join(lines)


def render_graph_summary(summary: dict[str, Any]) -> str:
    """Text of one run's counts."""
    kinds = ", ".join(f"{k} {v}" for k, v in summary["by_kind"].items())
    lines = [f"{summary['path']}: {summary['nodes']} nodes ({kinds}), {summary['tensors']} tensors"]
    lines.extend(f"missing: {line}" for line in summary["missing"])
    return "\n".join(lines)
