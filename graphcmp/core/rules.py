"""Tolerances and verdict rules as data: every threshold graphcmp uses lives here, with its unit.

A `Rule` bins one metric into pass / warning / error (`Status` codes); `Thresholds` holds the
rules per task (statistics, tensor, md5) and the tolerances the statistics metrics need. Defaults
are documented once, below; a TOML or JSON file overrides any of them (`load_thresholds`).
"""

from __future__ import annotations

import enum
import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from graphcmp.core.errors import DumpFormatError, RuleError
from graphcmp.core.inputs import open_regular

__all__ = ["DEFAULT_THRESHOLDS", "ERROR", "PASS", "RULE_METRICS", "SCALAR_RANGES", "WARNING", "MetricRange",
           "NoiseRule", "Rule", "Status", "Thresholds", "load_thresholds"]


class Status(enum.IntEnum):
    """Verdict code of a tensor pair or an npu node (int8 columns hold these values).

    Among judged nodes a larger code is worse (``np.maximum`` rolls verdicts up); a node without
    pairs to judge is SKIP, one without a counterpart UNMATCHED. Reports write the codes with their
    names (``enums.status``).
    """

    UNMATCHED = -2
    SKIP = -1
    PASS = 0
    WARNING = 1
    ERROR = 2


PASS, WARNING, ERROR = Status.PASS, Status.WARNING, Status.ERROR


@dataclass(frozen=True, slots=True)
class Rule:
    """Bins one metric: beyond `warn` is a warning, beyond `error` an error; NaN is always an error.

    Examples
    --------
    >>> Rule("rel_err", warn=1e-3, error=1e-2).levels(np.array([0.0, 5e-3, 0.5, np.nan])).tolist()
    [0, 1, 2, 2]
    >>> Rule("cosine", warn=0.9999, error=0.99, higher_is_better=True).levels(np.array([1.0, 0.995])).tolist()
    [0, 1]
    """

    metric: str
    warn: float
    error: float
    higher_is_better: bool = False

    def levels(self, values: np.ndarray) -> np.ndarray:
        """PASS/WARNING/ERROR per value (int8)."""
        values = np.asarray(values, dtype=np.float64)
        sign = -1.0 if self.higher_is_better else 1.0
        with np.errstate(invalid="ignore"):
            level = (sign * values > sign * self.warn).astype(np.int8)
            level[sign * values > sign * self.error] = ERROR
        level[np.isnan(values)] = ERROR
        return level


def _default_rules() -> dict[str, tuple[Rule, ...]]:
    return {
        # relative error of an output statistic (max/min/mean/norm), see metrics.stat_rel_error
        "statistics": (Rule("rel_err", warn=1e-3, error=1e-2),),
        # real tensors: cosine similarity and Euclidean relative distance
        "tensor": (Rule("cosine", warn=0.9999, error=0.99, higher_is_better=True),
                   Rule("euc_rel", warn=1e-3, error=1e-2)),
        # md5/crc32 of each tensor: 0 equal, 1 different
        "md5": (Rule("md5_diff", warn=0.5, error=0.5),),
    }


@dataclass(frozen=True, slots=True)
class NoiseRule:
    """How the noise model (core/noise.py, docs/noise.md) turns errors into origins.

    Attributes
    ----------
    origin_margin : float
        A call is an origin when its output error exceeds this many times the noise the model allows
        it (its calibrated growth limit times its input error plus the unit roundoff), or an input no
        earlier call produced differs by this many times its own noise. Default 4: rounding keeps a
        call within about twice the run's 90th-percentile growth, and the statistics' estimates of a
        tensor's error (its Max, Min, Mean and Norm against the bench run's) scatter up to twice that
        again (3.9 measured before the origin of a float16 run, bench/README.md, issue 29).
    tensor_origin_margin : float
        `origin_margin` of the calls outside the backward pass when both runs hold real tensors (task
        ``tensor``: msprobe tensor dumps, raw NPU dumps against golden data): their errors include the
        measured distance of the whole tensors, and rounding keeps them within the growth bound itself.
        Default 2: the forward calls before any origin in 52 tensor comparisons of eleven models in
        float16, bfloat16 and mixed precision stay at most 1.34 (bench/README.md, issue 29), where a
        one-channel weight error in a bfloat16 run stands at 2.6-3.6. Gradients keep `origin_margin`:
        they sum nearly cancelling terms, and a clean bfloat16 run's RMSNorm rsqrt backward stands at 2.01.
    quantile : float
        The quantile of the run's own growths (per direction and call kind) taken as the growth
        limit. Default 0.9: a tenth of the calls may be above it without raising it, so one bug, or
        a few calls it feeds, cannot calibrate itself away.
    min_samples : int
        Fewest calls a group needs for its own limit; smaller groups use their direction's, and a
        direction with fewer calls uses 1 (rounding alone keeps the growth near 1). Default 10, the
        smallest group in which the 0.9 quantile is not the largest value.
    """

    origin_margin: float = 4.0
    quantile: float = 0.9
    min_samples: int = 10
    tensor_origin_margin: float = 2.0


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every tolerance used to judge a comparison.

    Attributes
    ----------
    rules : Mapping of task name to tuple of Rule
        Verdict rules per task mode. Defaults: statistics ``rel_err`` warn 1e-3, error 1e-2;
        tensor ``cosine`` warn < 0.9999, error < 0.99 and ``euc_rel`` warn 1e-3, error 1e-2;
        md5 any difference is an error.
    atol : float
        Absolute difference (in the tensor's own units) below which two statistics count as
        equal. Default 1e-7: float32 noise on values that are zero in theory (a gradient of
        ~1e-9) is not a difference.
    magnitude_floor : float
        Smallest denominator of a relative error, as a fraction of the bench tensor's largest
        magnitude max(|Max|, |Min|). Default 1e-3: a Mean of 1e-9 in a tensor of values near 1
        is measured against 1e-3, not against itself.
    same_input_rel : float
        When every input and parameter of a node is identical on both sides, an output relative
        error above this is at least a warning ("inputs agree, outputs differ"). Default 1e-6.
    noise : NoiseRule
        The noise model's settings. A node the model finds within noise passes whatever the rules
        above say; an origin is an error.
    """

    rules: Mapping[str, tuple[Rule, ...]] = field(default_factory=_default_rules)
    atol: float = 1e-7
    magnitude_floor: float = 1e-3
    same_input_rel: float = 1e-6
    noise: NoiseRule = field(default_factory=NoiseRule)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as written into reports."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("rules", "noise")}
        out["rules"] = {task: [asdict(r) for r in rules] for task, rules in self.rules.items()}
        out["noise"] = asdict(self.noise)
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = "<thresholds>") -> Thresholds:
        """Defaults overridden by `data` (the shape `to_dict` writes), every value checked.

        Raises
        ------
        RuleError
            If `data` is not a table, names an unknown threshold, task, metric or setting, or a value is
            not a finite number in its range (`RULE_METRICS`, `SCALAR_RANGES`), a warning limit lies
            beyond its error limit, or a task has no rule.

        Examples
        --------
        >>> Thresholds.from_dict({"atol": 1e999})
        Traceback (most recent call last):
        graphcmp.core.errors.RuleError: <thresholds>: atol: expected a finite number, got inf
        >>> Thresholds.from_dict({"rules": {"statistics": [{"metric": "rel_err", "warn": 0.1, "error": 0.01}]}})
        Traceback (most recent call last):
        graphcmp.core.errors.RuleError: <thresholds>: rules.statistics[0]: warn 0.1 lies beyond error 0.01 \
(rel_err: lower is better, so warn <= error)
        """
        if not isinstance(data, Mapping):
            raise RuleError(f"{source}: expected a table of thresholds, got {_short(data)}")
        base = cls()
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise RuleError(f"{source}: unknown threshold(s) {sorted(map(str, unknown))}; known: {sorted(known)}")
        scalars = {k: _in_range(v, f"{source}: {k}", *SCALAR_RANGES[k]) for k, v in data.items()
                   if k not in ("rules", "noise")}
        rules = dict(base.rules)
        given = data.get("rules", {})
        if not isinstance(given, Mapping):
            raise RuleError(f"{source}: rules: expected a table of task -> list of rules, got {_short(given)}")
        for task, specs in given.items():
            if task not in rules:
                raise RuleError(f"{source}: rules.{task}: unknown task; known: {sorted(rules)}")
            if not isinstance(specs, (list, tuple)) or not specs:
                raise RuleError(f"{source}: rules.{task}: expected a list of at least one rule, got {_short(specs)} "
                                "(leave the task out to keep its default rules)")
            rules[task] = tuple(_rule(spec, task, f"{source}: rules.{task}[{k}]") for k, spec in enumerate(specs))
        return replace(base, rules=rules, noise=_noise_rule(data.get("noise", {}), f"{source}: noise"), **scalars)


@dataclass(frozen=True, slots=True)
class MetricRange:
    """What a rule on one metric may say: the metric's range, its direction and the tasks that compute it."""

    low: float
    high: float
    higher_is_better: bool
    tasks: tuple[str, ...]


_ALL_TASKS = ("statistics", "tensor", "md5")
_TENSOR = ("tensor",)
RULE_METRICS: dict[str, MetricRange] = {
    "rel_err": MetricRange(0.0, math.inf, False, _ALL_TASKS),  # a relative error of a statistic
    "md5_diff": MetricRange(0.0, 1.0, False, _ALL_TASKS),  # 0 equal, 1 different
    "cosine": MetricRange(-1.0, 1.0, True, _TENSOR),
    "euc_rel": MetricRange(0.0, math.inf, False, _TENSOR),
    "max_abs": MetricRange(0.0, math.inf, False, _TENSOR),
    "max_rel": MetricRange(0.0, math.inf, False, _TENSOR),
    "one_thousandth": MetricRange(0.0, 1.0, True, _TENSOR),  # a share of elements
    "five_thousandths": MetricRange(0.0, 1.0, True, _TENSOR),
    "kl": MetricRange(0.0, math.inf, False, _TENSOR),
    "are": MetricRange(0.0, math.inf, False, _TENSOR),
    "mean_abs": MetricRange(0.0, math.inf, False, _TENSOR),
    "rmse": MetricRange(0.0, math.inf, False, _TENSOR),
    "max_rel_nz": MetricRange(0.0, math.inf, False, _TENSOR),
    "mean_rel": MetricRange(0.0, math.inf, False, _TENSOR),
}
"""Metrics a rule may bin (the per-pair columns of `pairing.pair_metrics` and `tensor_metrics.TENSOR_METRICS`)."""

SCALAR_RANGES: dict[str, tuple[float, float, bool]] = {
    "atol": (0.0, math.inf, True),  # (low, high, low allowed)
    "magnitude_floor": (0.0, 1.0, False),  # a fraction of the largest magnitude; 0 would divide by zero
    "same_input_rel": (0.0, math.inf, True),
    "origin_margin": (1.0, math.inf, True),  # below 1 the noise itself would be an origin
    "tensor_origin_margin": (1.0, math.inf, True),
    "quantile": (0.0, 1.0, False),
    "min_samples": (1.0, math.inf, True),
}
"""Ranges of the scalar thresholds and noise settings."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RuleError(f"{where}: expected a number, got {_short(value)}")
    try:
        number = float(value)
    except OverflowError as err:
        raise RuleError(f"{where}: expected a finite number, got an integer of {len(str(abs(value)))} digits") from err
    if not math.isfinite(number):
        raise RuleError(f"{where}: expected a finite number, got {number}")
    return number


def _in_range(value: Any, where: str, low: float, high: float, low_allowed: bool = True) -> float:
    number = _number(value, where)
    if number < low or (number == low and not low_allowed) or number > high:
        bounds = f"{'[' if low_allowed else '('}{low:g}, {high:g}]"
        raise RuleError(f"{where}: {number:g} is outside {bounds}")
    return number


def _noise_rule(spec: Any, where: str) -> NoiseRule:
    if not isinstance(spec, Mapping):
        raise RuleError(f"{where}: expected a table of {[f.name for f in fields(NoiseRule)]}, got {_short(spec)}")
    known = {f.name for f in fields(NoiseRule)}
    unknown = set(spec) - known
    if unknown:
        raise RuleError(f"{where}: unknown setting(s) {sorted(map(str, unknown))}; known: {sorted(known)}")
    values: dict[str, Any] = {k: _in_range(v, f"{where}.{k}", *SCALAR_RANGES[k]) for k, v in spec.items()}
    if "min_samples" in values:
        if values["min_samples"] != int(values["min_samples"]):
            raise RuleError(f"{where}.min_samples: expected a whole number, got {values['min_samples']:g}")
        values["min_samples"] = int(values["min_samples"])
    return replace(NoiseRule(), **values)


_RULE_KEYS = ("metric", "warn", "error", "higher_is_better")


def _rule(spec: Any, task: str, where: str) -> Rule:
    if not isinstance(spec, Mapping):
        raise RuleError(f"{where}: each rule is a table with metric, warn, error; got {_short(spec)}")
    if unknown := sorted(map(str, set(spec) - set(_RULE_KEYS))):
        raise RuleError(f"{where}: unknown key(s) {unknown}; a rule has {', '.join(_RULE_KEYS)}")
    if missing := [k for k in _RULE_KEYS[:3] if k not in spec]:
        raise RuleError(f"{where}: rule is missing {missing[0]!r} (needs metric, warn, error)")
    metric = spec["metric"]
    usable = sorted(name for name, m in RULE_METRICS.items() if task in m.tasks)
    if not isinstance(metric, str) or metric not in RULE_METRICS or task not in RULE_METRICS[metric].tasks:
        raise RuleError(f"{where}: unknown metric {_short(metric)} for task {task}; known: {', '.join(usable)}")
    m = RULE_METRICS[metric]
    warn = _in_range(spec["warn"], f"{where}.warn", m.low, m.high)
    error = _in_range(spec["error"], f"{where}.error", m.low, m.high)
    better = spec.get("higher_is_better", m.higher_is_better)
    if better is not m.higher_is_better:
        raise RuleError(f"{where}: higher_is_better is {_short(better)}, but for {metric} "
                        f"{'higher' if m.higher_is_better else 'lower'} is better (leave it out)")
    if (warn > error) if not m.higher_is_better else (warn < error):
        order = "warn >= error" if m.higher_is_better else "warn <= error"
        raise RuleError(f"{where}: warn {warn:g} lies beyond error {error:g} ({metric}: "
                        f"{'higher' if m.higher_is_better else 'lower'} is better, so {order})")
    return Rule(metric=metric, warn=warn, error=error, higher_is_better=m.higher_is_better)


DEFAULT_THRESHOLDS = Thresholds()


def load_thresholds(path: str | os.PathLike[str]) -> Thresholds:
    """Read threshold overrides from a TOML or JSON file.

    Raises
    ------
    RuleError
        If the file is missing or not a regular file, does not parse, or names unknown or bad thresholds
        (see `Thresholds.from_dict`).
    """
    path = Path(path)
    try:
        with open_regular(path) as f:
            raw = f.read()
    except DumpFormatError as err:
        raise RuleError(f"thresholds file {err}") from err
    except OSError as err:
        raise RuleError(f"{path}: cannot read thresholds file ({err.strerror})") from err
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RuleError(f"{path}: not a text file; thresholds are TOML or JSON") from err
    kind = "JSON" if path.suffix == ".json" else "TOML"
    import tomllib  # only a thresholds file needs it: 5 ms before every command

    try:
        data = json.loads(text) if kind == "JSON" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise RuleError(f"{path}: not valid {kind} ({err})") from err
    except RecursionError as err:
        raise RuleError(f"{path}: not valid {kind} (nested too deeply for a thresholds file)") from err
    except ValueError as err:  # an integer too long to read (Python's int_max_str_digits)
        raise RuleError(f"{path}: not valid {kind} ({err})") from err
    return Thresholds.from_dict(data, str(path))
