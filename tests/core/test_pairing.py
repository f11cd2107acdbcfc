"""Tensor pairing: the rule path agrees with the vectorised path when rules add nothing."""

from __future__ import annotations

import dataclasses

import numpy as np

from graphcmp.core.matching import default_matchers, match_graphs
from graphcmp.core.pairing import pair_tensors
from graphcmp.core.readers.msprobe import read_msprobe


def test_rule_path_pairs_like_the_fast_path(perturb_pair):
    npu, bench = read_msprobe(perturb_pair[0]), read_msprobe(perturb_pair[1])
    table = match_graphs(npu, bench, default_matchers())
    fast = pair_tensors(npu, bench, table)
    assert len(fast[0]) == len(npu.tensors) == 492  # same code, same tensors
    # a rename for an op the run does not have sends pairing down the rule path, with the same result
    ruled = pair_tensors(npu, bench, dataclasses.replace(table, slot_renames={"Dense": {"gamma": "weight"}}))
    assert all(np.array_equal(a, b) for a, b in zip(fast, ruled))
