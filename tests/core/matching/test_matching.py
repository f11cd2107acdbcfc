"""Exact and fuzzy matching on real dumps."""

from __future__ import annotations

import numpy as np
import pytest

from graphcmp.core.matching import default_matchers, match_graphs
from graphcmp.core.matching.base import TreeMatcher
from graphcmp.core.matching.by_name import ExactMatcher
from graphcmp.core.readers.msprobe import read_msprobe
from tests.conftest import DATA


def _match(npu_path, bench_path, fuzzy):
    npu, bench = read_msprobe(npu_path), read_msprobe(bench_path)
    return npu, bench, match_graphs(npu, bench, default_matchers(fuzzy=fuzzy))


def test_same_code_matches_everything(perturb_pair):
    npu, bench, table = _match(*perturb_pair, fuzzy=False)
    assert table.matched == len(npu) == len(bench) == 178
    n_rows, b_rows = table.pairs()
    assert all(npu.nodes.ids[n] == bench.nodes.ids[b] for n, b in zip(n_rows, b_rows))


def test_extra_op_unmatches_later_calls_without_fuzzy(perturb_pair):
    npu, _, table = _match(DATA / "msprobe_extraop" / "npu", perturb_pair[1], fuzzy=False)
    assert len(npu) == 187
    # the extra F.linear shifts every later Functional.linear counter, so those calls lose their partner
    assert table.npu_to_bench[npu.row("Functional.linear.3.forward")] == -1
    assert table.matched == 158  # msprobe 26.2.0 matches 150 of 187 here


def test_fuzzy_matching_follows_the_shift(perturb_pair):
    npu, bench, table = _match(DATA / "msprobe_extraop" / "npu", perturb_pair[1], fuzzy=True)
    partner = table.npu_to_bench[npu.row("Functional.linear.3.forward")]
    assert bench.nodes.ids[partner] == "Functional.linear.2.forward"
    assert table.count_by_rule()["fuzzy"] == 26  # 20 shifted calls + the 6 forward adds exact ids would cross
    assert table.matched == 178  # msprobe 26.2.0 -fm matches 170 of 187
    # the extra call itself has no partner
    assert table.npu_to_bench[npu.row("Functional.linear.0.forward")] == -1
    unmatched = {npu.nodes.ids[r] for r in (table.npu_to_bench < 0).nonzero()[0]}
    assert all("linear.0." in u or "Apis_Between" in u or "cross_entropy" not in u for u in unmatched)


def test_match_is_one_to_one(perturb_pair):
    _, _, table = _match(DATA / "msprobe_extraop" / "npu", perturb_pair[1], fuzzy=True)
    _, b_rows = table.pairs()
    assert len(set(b_rows.tolist())) == len(b_rows)
    assert all(table.bench_to_npu[b] == n for n, b in zip(*table.pairs()))


class _OneParentAtATime:
    """`ExactMatcher` without its whole-tree pass: the walk asks it parent pair by parent pair."""

    def __init__(self, ordered: bool = False) -> None:
        self.ordered = ordered

    name = "exact"

    def match_children(self, npu, bench, npu_rows, bench_rows):
        return ExactMatcher(ordered=self.ordered).match_children(npu, bench, npu_rows, bench_rows)


@pytest.mark.parametrize("fuzzy", [False, True])
@pytest.mark.parametrize("npu_case, bench_case", [
    ("msprobe_extraop/npu", "msprobe_bf16/npu"),
    ("msprobe_bf16/npu", "msprobe_extraop/npu"),
    ("mindspore_cnn/npu", "mindspore_cnn/bench"),
    ("msprobe_gpt_mapping/npu", "msprobe_gpt_mapping/bench"),
    ("pytorch_cnn/npu", "pytorch_cnn/bench"),
])
def test_whole_tree_id_pass_equals_the_walk(npu_case, bench_case, fuzzy):
    npu, bench = read_msprobe(DATA / npu_case), read_msprobe(DATA / bench_case)
    fast = match_graphs(npu, bench, default_matchers(fuzzy=fuzzy))
    walked = match_graphs(npu, bench, [_OneParentAtATime(ordered=fuzzy), *default_matchers(fuzzy=fuzzy)[1:]])
    assert isinstance(ExactMatcher(), TreeMatcher) and not isinstance(_OneParentAtATime(), TreeMatcher)
    assert fast.matched > 0
    for column in ("npu_to_bench", "bench_to_npu", "rule"):
        assert np.array_equal(getattr(fast, column), getattr(walked, column)), column


def test_the_same_calls_in_another_order_keep_their_ids():
    """A pipeline schedule runs a stage's micro-batches in another order than a run without pipeline: every id is
    on both sides, so the exact ids are kept (aligning in order would pair micro-batch 1's forward with 0's
    backward). Only where calls are left over on a side do crossing pairs give way to alignment."""
    from graphcmp.core.readers.msprobe import parse_msprobe

    ids = ["Module.layer.Linear.forward.0", "Module.layer.Linear.forward.1", "Module.layer.Linear.backward.0",
           "Module.layer.Linear.backward.1"]
    npu = parse_msprobe({"data": {i: {} for i in ids}})  # 1F1B: both forwards first
    bench = parse_msprobe({"data": {i: {} for i in (ids[0], ids[2], ids[1], ids[3])}})
    table = match_graphs(npu, bench, default_matchers())
    paired = {npu.nodes.ids[n]: bench.nodes.ids[b] for n, b in enumerate(table.npu_to_bench.tolist()) if b > 0}
    assert paired == {i: i for i in ids}
    extra = parse_msprobe({"data": {"Functional.linear.0.forward": {}, **{i: {} for i in ids}}})
    table = match_graphs(extra, bench, default_matchers())  # a call of another name left over: these keep their ids
    assert table.count_by_rule()["exact"] == len(ids)


def test_shifted_counters_of_one_name_are_aligned_by_their_offset():
    """An extra multiply shifts every later ``Tensor.__mul__`` counter by one: inside a module called after it,
    npu ``mul.41``/``mul.42`` are bench ``mul.40``/``mul.41``, so ``mul.41`` pairs with ``mul.40``, not with its
    namesake. An extra call beside calls of its own name that keep their counters (npu add.0 and add.1 against
    bench add.0) leaves the matching ids paired."""
    from graphcmp.core.readers.msprobe import parse_msprobe
    from graphcmp.core.records import NodeKind

    npu = parse_msprobe({"data": {"Tensor.__mul__.41.forward": {}, "Tensor.__mul__.42.forward": {}}})
    bench = parse_msprobe({"data": {"Tensor.__mul__.40.forward": {}, "Tensor.__mul__.41.forward": {}}})
    table = match_graphs(npu, bench, default_matchers())
    twin = {npu.nodes.ids[n]: bench.nodes.ids[b] for n, b in enumerate(table.npu_to_bench.tolist())
            if b > 0 and npu.nodes.kind[n] != NodeKind.GROUP}
    assert twin == {"Tensor.__mul__.41.forward": "Tensor.__mul__.40.forward",
                    "Tensor.__mul__.42.forward": "Tensor.__mul__.41.forward"}
    npu = parse_msprobe({"data": {"Tensor.__add__.1.backward": {}, "Tensor.__add__.0.backward": {}}})
    bench = parse_msprobe({"data": {"Tensor.__add__.0.backward": {}}})
    table = match_graphs(npu, bench, default_matchers())
    assert bench.nodes.ids[table.npu_to_bench[npu.row("Tensor.__add__.0.backward")]] == "Tensor.__add__.0.backward"
