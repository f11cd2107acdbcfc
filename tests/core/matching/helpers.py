"""Small helpers the matching tests share (reading runs, comparing with rule specs, finding the first error)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphcmp.core.compare import compare_graphs
from graphcmp.core.hierarchy import subtree_rows
from graphcmp.core.matching.specs import matchers_from_specs
from graphcmp.core.records import Direction
from graphcmp.core.report import CompareReport
from graphcmp.core.rules import ERROR


def compare_with(npu, bench, specs: Sequence[str]) -> CompareReport:
    """`compare_graphs` with the matchers the rule specs name (in the documented order)."""
    return compare_graphs(npu, bench, matchers=matchers_from_specs(list(specs)))


def first_forward_error(report: CompareReport) -> str | None:
    """The earliest error in forward execution order that contains no other error (the op, not its containers)."""
    status, npu = report.verdicts.status, report.npu
    is_error = status == ERROR
    end = subtree_rows(npu.nodes.parent)
    for row in np.flatnonzero(is_error & (npu.nodes.direction == Direction.FORWARD)).tolist():
        if not is_error[row + 1:end[row]].any():
            return npu.nodes.ids[row]
    return None


def partner(report: CompareReport, npu_id: str) -> str | None:
    """Bench id matched to `npu_id` (a fused group's anchor), None when unmatched."""
    b = int(report.matches.npu_to_bench[report.npu.row(npu_id)])
    return report.bench.nodes.ids[b] if b >= 0 else None


def statuses(report: CompareReport, status: str) -> set[str]:
    """Npu ids with verdict `status`."""
    from graphcmp.core.judge import status_code

    rows = np.flatnonzero(report.verdicts.status == status_code(status))
    return {report.npu.nodes.ids[r] for r in rows.tolist()}
