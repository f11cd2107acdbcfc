"""Thresholds as data, and every value of a thresholds file checked (core/rules.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graphcmp.core.errors import GraphcmpError, RuleError
from graphcmp.core.rules import DEFAULT_THRESHOLDS, RULE_METRICS, Rule, Thresholds, load_thresholds
from graphcmp.core.tensor_metrics import TENSOR_METRICS


def test_the_defaults_pass_their_own_checks():
    assert Thresholds.from_dict(DEFAULT_THRESHOLDS.to_dict()) == DEFAULT_THRESHOLDS


def test_every_rule_metric_is_one_graphcmp_computes():
    tensor = {name for name, m in RULE_METRICS.items() if m.tasks == ("tensor",)}
    assert tensor == set(TENSOR_METRICS)
    assert {name for name, m in RULE_METRICS.items() if "statistics" in m.tasks} == {"rel_err", "md5_diff"}
    # a similarity is better high; everything else measures a difference
    assert {name for name, m in RULE_METRICS.items() if m.higher_is_better} == {
        "cosine", "one_thousandth", "five_thousandths"}


def test_a_rule_takes_its_metrics_direction_when_not_given():
    t = Thresholds.from_dict({"rules": {"tensor": [{"metric": "cosine", "warn": 0.999, "error": 0.9}]}})
    assert t.rules["tensor"] == (Rule("cosine", 0.999, 0.9, higher_is_better=True),)
    assert t.rules["statistics"] == DEFAULT_THRESHOLDS.rules["statistics"]  # other tasks keep their defaults


@pytest.mark.parametrize("data, says", [
    (None, "expected a table of thresholds, got None"),
    ([], "expected a table of thresholds, got []"),
    ({"atol": math.inf}, "atol: expected a finite number, got inf"),
    ({"atol": 10**400}, "atol: expected a finite number, got an integer of 401 digits"),
    ({"atol": -1e-7}, "atol: -1e-07 is outside [0, inf]"),
    ({"atol": True}, "atol: expected a number, got True"),
    ({"magnitude_floor": 0}, "magnitude_floor: 0 is outside (0, 1]"),
    ({"rules": []}, "rules: expected a table of task -> list of rules"),
    ({"rules": {"statistic": [{"metric": "rel_err", "warn": 1, "error": 2}]}}, "rules.statistic: unknown task"),
    ({"rules": {"statistics": []}}, "expected a list of at least one rule"),
    ({"rules": {"statistics": [{"metric": "cosine", "warn": 0.9, "error": 0.8}]}},
     "unknown metric 'cosine' for task statistics; known: md5_diff, rel_err"),
    ({"rules": {"tensor": [{"metric": "cos", "warn": 0.9, "error": 0.8}]}}, "unknown metric 'cos'"),
    ({"rules": {"statistics": [{"metric": "rel_err", "warn": 0.1, "error": 0.01}]}},
     "warn 0.1 lies beyond error 0.01"),
    ({"rules": {"tensor": [{"metric": "cosine", "warn": 0.9, "error": 0.99}]}}, "so warn >= error"),
    ({"rules": {"statistics": [{"metric": "rel_err", "warn": -1, "error": 0}]}}, "warn: -1 is outside [0, inf]"),
    ({"rules": {"tensor": [{"metric": "cosine", "warn": 2, "error": 0.9}]}}, "warn: 2 is outside [-1, 1]"),
    ({"rules": {"tensor": [{"metric": "cosine", "warn": 0.99, "error": 0.9, "higher_is_better": False}]}},
     "higher_is_better is False, but for cosine higher is better"),
    ({"rules": {"statistics": [{"metric": "rel_err", "warn": 0.1}]}}, "rule is missing 'error'"),
    ({"rules": {"statistics": [{"metric": "rel_err", "warn": 0.1, "error": 1, "eror": 2}]}}, "unknown key(s) ['eror']"),
    ({"noise": {"quantile": 1.5}}, "noise.quantile: 1.5 is outside (0, 1]"),
    ({"noise": {"origin_margin": 0.5}}, "noise.origin_margin: 0.5 is outside [1, inf]"),
    ({"noise": {"min_samples": 2.5}}, "noise.min_samples: expected a whole number, got 2.5"),
    ({"noise": []}, "noise: expected a table"),
])
def test_every_bad_value_is_named(data, says):
    with pytest.raises(RuleError) as err:
        Thresholds.from_dict(data, "t.json")
    assert str(err.value).startswith("t.json: ") and says in str(err.value)


@pytest.mark.parametrize("text, says", [
    ('{"atol": ' + "[" * 2000 + "]" * 2000 + "}", "nested too deeply"),
    ('{"atol": ' + "9" * 5000 + "}", "not valid JSON"),
    ("{", "not valid JSON"),
])
def test_unreadable_files_are_one_line(tmp_path, text, says):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(RuleError, match=says):
        load_thresholds(path)


def test_a_special_file_is_never_read(tmp_path):
    with pytest.raises(GraphcmpError, match="/dev/zero: is a character device"):
        load_thresholds("/dev/zero")


def test_a_rule_bins_as_before():
    rule = Rule("rel_err", warn=1e-3, error=1e-2)
    assert rule.levels(np.array([0.0, 5e-3, 0.5, np.nan])).tolist() == [0, 1, 2, 2]
