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
import tomllib

from graphcmp.core.errors import RuleError

__all__ = ["DEFAULT_THRESHOLDS", "ERROR", "PASS", "WARNING", "NoiseRule", "Rule", "Status", "Thresholds",
           "load_thresholds"]


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
        call within about twice the run's 90th-percentile growth, and a real bug sits several times
        above the largest noise.
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
    def from_dict(cls, data: Mapping[str, Any], source: str = "<thresholds>") -> Thresholds:
        """Defaults overridden by `data` (the shape `to_dict` writes); unknown keys are an error."""
        base = cls()
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise RuleError(f"{source}: unknown threshold(s) {sorted(unknown)}; known: {sorted(known)}")
        scalars = {k: _number(v, f"{source}: {k}") for k, v in data.items() if k not in ("rules", "noise")}
        rules = dict(base.rules)
        for task, specs in (data.get("rules") or {}).items():
            rules[task] = tuple(_rule(spec, f"{source}: rules.{task}") for spec in specs)
        return replace(base, rules=rules, noise=_noise_rule(data.get("noise", {}), f"{source}: noise"), **scalars)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise RuleError(f"{where}: expected a number, got {value!r}")
    return float(value)


def _noise_rule(spec: Any, where: str) -> NoiseRule:
    if not isinstance(spec, Mapping):
        raise RuleError(f"{where}: expected a table of {[f.name for f in fields(NoiseRule)]}, got {spec!r}")
    known = {f.name for f in fields(NoiseRule)}
    unknown = set(spec) - known
    if unknown:
        raise RuleError(f"{where}: unknown setting(s) {sorted(unknown)}; known: {sorted(known)}")
    values = {k: _number(v, f"{where}.{k}") for k, v in spec.items()}
    if "min_samples" in values:
        values["min_samples"] = int(values["min_samples"])
    return replace(NoiseRule(), **values)


def _rule(spec: Any, where: str) -> Rule:
    if not isinstance(spec, Mapping):
        raise RuleError(f"{where}: each rule is a table with metric, warn, error; got {spec!r}")
    try:
        return Rule(metric=str(spec["metric"]), warn=_number(spec["warn"], where),
                    error=_number(spec["error"], where), higher_is_better=bool(spec.get("higher_is_better", False)))
    except KeyError as err:
        raise RuleError(f"{where}: rule is missing {err.args[0]!r} (needs metric, warn, error)") from err


DEFAULT_THRESHOLDS = Thresholds()


def load_thresholds(path: str | os.PathLike[str]) -> Thresholds:
    """Read threshold overrides from a TOML or JSON file.

    Raises
    ------
    RuleError
        If the file is missing, does not parse, or names unknown thresholds.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise RuleError(f"{path}: cannot read thresholds file ({err.strerror})") from err
    except UnicodeDecodeError as err:
        raise RuleError(f"{path}: not a text file; thresholds are TOML or JSON") from err
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise RuleError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'} ({err})") from err
    return Thresholds.from_dict(data, str(path))
