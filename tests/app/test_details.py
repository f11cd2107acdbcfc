"""The details panel: verdict and reason, both runs' tensors with metrics, stack; names stay text."""

from __future__ import annotations

from dash import html

from graphcmp.app.details import details_panel
from graphcmp.app.model import ViewModel
from graphcmp.core.report import load_report


def _texts(component) -> list[str]:
    """Every string child in a Dash component tree."""
    if isinstance(component, str):
        return [component]
    if isinstance(component, (list, tuple)):
        return [t for c in component for t in _texts(c)]
    children = getattr(component, "children", None)
    return _texts(children) if children is not None else []


def _components(component) -> list:
    if isinstance(component, (list, tuple)):
        return [c for x in component for c in _components(x)]
    if not hasattr(component, "children"):
        return []
    return [component, *_components(component.children)]


def test_linear_with_perturbed_weight(sample_model, sample_report):
    node = "Module.encoder.layers.1.linear1.Linear.forward.0"
    row = sample_report.npu.row(node)
    panel = details_panel(sample_model, {"npu": row, "bench": sample_report.matches.npu_to_bench[row]})
    text = "\n".join(_texts(panel))
    verdict = sample_report.verdict(node)
    assert node in text and verdict.reason in text and verdict.status in text
    weight = sample_report.npu.view(node).tensors
    npu_max = next(t for t in weight if t.slot == "weight").stats["max"]
    assert f"{npu_max:.6g}" in text
    assert "param.weight" in text and "Δ rel" in text and "rel_err" in text and "full stack" in text


def test_unmatched_bench_only_node(data_dir, perturb_pair):
    from graphcmp.core.compare import compare_paths

    report = compare_paths(data_dir / "msprobe_extraop" / "npu", perturb_pair[1], fuzzy=False)
    model = ViewModel(report)
    row = int((report.matches.bench_to_npu < 0).nonzero()[0][1])
    text = "\n".join(_texts(details_panel(model, {"bench": row})))
    assert report.bench.nodes.ids[row] in text and "no counterpart in the npu run" in text


def test_hostile_names_are_text(evil_report_file):
    from tests.app.conftest import EVIL_ID

    report = load_report(evil_report_file)
    model = ViewModel(report)
    row = report.npu.row(EVIL_ID)
    panel = details_panel(model, {"npu": row, "bench": int(report.matches.npu_to_bench[row])})
    assert EVIL_ID in _texts(panel)
    assert not any(type(c).__name__ in ("Img", "Iframe", "Script") or "dangerously_allow_html" in c.to_plotly_json()
                   ["props"] for c in _components(panel))


def test_nothing_selected(sample_model):
    panel = details_panel(sample_model, {})
    assert isinstance(panel[0], html.P)


def test_merged_node_lists_its_shards_per_rank(merged_results):
    report = load_report(merged_results / "step0_merged.json")
    model = ViewModel(report)
    node = "Functional.layer_norm.2.forward"
    row = report.npu.row(node)
    text = "\n".join(_texts(details_panel(model, {"npu": row, "bench": int(report.matches.npu_to_bench[row])})))
    assert "shards (npu)" in text and "merged from ranks 0, 1" in text
    assert "replicated · replicas disagree" in text and "rank 1" in text
    assert "1.26999" in text and "1.26011" in text  # the two replicas of the LayerNorm weight, both listed
    stage = "Module.module.decoder.layers.1.mlp.linear_fc1.ColumnParallelLinear.forward.0"
    text = "\n".join(_texts(details_panel(model, {"npu": report.npu.row(stage)})))
    assert "split along dim 0" in text and "[128, 64]" in text  # each rank's slice of the [256, 64] weight
