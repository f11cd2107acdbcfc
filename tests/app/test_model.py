"""ViewModel: twins, bench-side verdicts, per-node metric columns from the report, default bin edges, node views."""

from __future__ import annotations

import numpy as np

from graphcmp.app.model import ViewModel
from graphcmp.core.compare import compare_paths
from graphcmp.core.judge import UNMATCHED
from graphcmp.core.records import Role


def test_metric_values_are_the_report_columns(sample_model, sample_report):
    values, present = sample_model.metric_values("severity")
    v = sample_report.verdicts
    assert np.allclose(values[present], np.where(np.isinf(v.severity), np.nan, v.severity)[present], equal_nan=True)
    rel, has = sample_model.metric_values("rel_err")
    row = sample_report.npu.row("Functional.linear.2.forward")
    pairs = sample_report.pairs
    t = sample_report.npu.tensors
    mine = (t.node[pairs.npu] == row) & np.isin(t.role[pairs.npu], (Role.OUTPUT, Role.PARAM_GRAD))
    assert has[row] and np.isclose(rel[row], pairs.metrics["rel_err"][mine].max())
    assert not has[0]


def test_default_edges_come_from_the_rules(sample_model, sample_report):
    rule = sample_report.thresholds.rules["statistics"][0]
    assert sample_model.default_edges("rel_err") == (rule.warn, rule.error)
    assert sample_model.scheme("rel_err", "0.5, 0.1").edges == (0.1, 0.5)
    assert sample_model.scheme("rel_err", "nonsense").edges == (rule.warn, rule.error)
    # the sample pair has an origin: the default colours are the roles, so the origin stands out
    assert sample_model.scheme("no-such-metric", "").metric == "role"


def test_role_colours_roll_up_to_the_closed_modules(sample_model):
    from graphcmp.app.colors import ROLE_COLORS, legend_items
    from graphcmp.core.noise import NodeRole

    role, worst = sample_model.role("npu"), sample_model.worst_role("npu")
    origin = int(np.flatnonzero(role == NodeRole.ORIGIN)[0])
    graph = sample_model.graphs["npu"]
    assert graph.nodes.ids[origin] == "Functional.linear.2.forward"
    parent = int(graph.nodes.parent[origin])
    assert worst[parent] == NodeRole.ORIGIN and worst[0] == NodeRole.ORIGIN
    first_entry = legend_items(sample_model.scheme("role", ""))[0]
    assert first_entry == (ROLE_COLORS[NodeRole.ORIGIN], "origin of the divergence")


def test_bench_side_takes_twin_status(data_dir, perturb_pair):
    report = compare_paths(data_dir / "msprobe_extraop" / "npu", perturb_pair[1], fuzzy=False)
    model = ViewModel(report)
    bench = model.status("bench")
    matched = report.matches.bench_to_npu >= 0
    assert (bench[matched] == report.verdicts.status[report.matches.bench_to_npu[matched]]).all()
    assert (bench[~matched] == UNMATCHED).all() and (~matched).any()


def test_node_view_equals_the_core_view(sample_model, sample_report):
    for node_id in ("Module.encoder.layers.1.linear1.Linear.forward.0", "Functional.linear.2.forward"):
        row = sample_report.npu.row(node_id)
        assert sample_model.node_view("npu", row) == sample_report.npu.view(node_id)


def test_single_run_model(sample_report):
    model = ViewModel(sample_report.npu)
    assert model.sides == ("npu",) and not model.paired and model.status("npu") is None
    assert model.analysis is None and model.metric_names() == {"none": "node kind"}


def test_a_result_file_gives_the_viewer_its_data_flow_edges(perturb_pair, tmp_path, monkeypatch):
    """The edges stored in a result are drawn as they are: opening it recovers no data flow again."""
    import graphcmp.core.dataflow as dataflow_module
    from graphcmp.core.dataflow import flow_edges
    from graphcmp.core.report import load_report, save_report

    report = compare_paths(*perturb_pair)
    save_report(report, tmp_path / "cmp.npz")

    def recomputed(graph):
        raise AssertionError("data-flow edges recovered again although the result holds them")

    monkeypatch.setattr(dataflow_module, "_recovered_edges", recomputed)
    model = ViewModel(load_report(tmp_path / "cmp.npz"))
    for side in model.sides:
        expected = flow_edges(report.npu if side == "npu" else report.bench)
        assert model.flow_edges[side].src.tolist() == expected.src.tolist()
        assert model.flow_edges[side].dst.tolist() == expected.dst.tolist()
        assert len(model.flows[side]) > 0
