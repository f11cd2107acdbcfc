"""Given matches (msprobe's links in a .vis): pinned as given, rebuilt from the rule the report records."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.compare import apply_manual_matches, compare_vis
from graphcmp.core.errors import DumpFormatError
from graphcmp.core.matching import match_graphs
from graphcmp.core.matching.manual import ManualMatches
from graphcmp.core.matching.specs import matchers_from_specs
from graphcmp.core.readers.vis import read_vis
from tests.conftest import DATA

VIS = [DATA / "vis_tf_small" / "compare_v812.vis.gz", DATA / "vis_tf_small" / "compare_v26.vis.db.gz",
       DATA / "vis_cnn_overflow" / "compare_v812.vis.gz"]


@pytest.mark.parametrize("path", VIS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recorded_rule_rebuilds_msprobes_matches(path):
    doc = read_vis(path)
    report = compare_vis(doc)
    (spec,) = report.options.matchers
    assert spec.startswith(f"msprobe={path.resolve()}")
    rebuilt = match_graphs(report.npu, report.bench, matchers_from_specs([spec]))
    for column in ("npu_to_bench", "bench_to_npu", "rule"):
        assert np.array_equal(getattr(rebuilt, column), getattr(report.matches, column)), column
    # every link msprobe wrote is a pair, nothing else is (but the root, and groups by their vote)
    ids, bench_ids = report.npu.nodes.ids, report.bench.nodes.ids
    pairs = {ids[n]: bench_ids[b] for n, b in zip(*report.matches.pairs())}
    assert {n: b for n, b in pairs.items() if n in doc.links} == dict(doc.links)


def test_a_manual_unmatch_holds_against_msprobes_pins():
    report = compare_vis(read_vis(VIS[0]))
    node = "Module.encoder.layers.0.linear1.Linear.forward.0"
    assert report.matches.npu_to_bench[report.npu.row(node)] == report.bench.row(node)
    again = apply_manual_matches(report, ManualMatches().with_unmatch(node, node))
    assert again.matches.npu_to_bench[again.npu.row(node)] == -1
    assert again.matches.matched == report.matches.matched - 1
    assert again.options.matchers == ("manual", *report.options.matchers)


def test_a_rule_whose_file_is_gone_names_the_file(tmp_path):
    gone = tmp_path / "compare.vis"
    with pytest.raises(DumpFormatError, match=r"compare.vis: no such file"):
        matchers_from_specs([f"msprobe={gone}"])
