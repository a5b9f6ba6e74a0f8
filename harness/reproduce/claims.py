"""A paper's claim, the runs it compares, and whether the harness reproduces its direction.

A claim names a summary metric (`harness.analysis` columns), the runs of a subject and of a
baseline (by matrix, autoscaler, parameters and any resolved config field), the direction the
paper reports and the paper's own figure. Runs are paired by repetition (the cells of a
reproduction matrix share their seeds), so the harness figure is the mean paired difference
relative to the baseline's mean, with the 95 % t-interval of the paired differences on the same
scale. The direction is reproduced ("yes") when the whole interval lies on the paper's side,
"partly" when only the mean does, "no" otherwise; with one repetition there is no interval and
the mean alone decides.

`Holds` claims are about how often something is true in a set of runs (MEAD's targets met or
missed): the figure is the share of runs with a Wilson 95 % interval; "yes" when all runs agree
with the paper, "partly" when some do, "no" when none does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pandas as pd
from scipy import stats

from harness.analysis.metrics import mean_ci


class Direction(StrEnum):
    LOWER = "lower"
    HIGHER = "higher"


class Verdict(StrEnum):
    YES = "yes"
    PARTLY = "partly"
    NO = "no"
    UNKNOWN = "not measured"


@dataclass(frozen=True)
class Select:
    """Runs of one configuration: a matrix, an autoscaler, a subset of its parameters and of the config."""

    label: str
    matrix: str
    autoscaler: str
    params: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)  # dotted paths of the resolved experiment

    def mask(self, runs: pd.DataFrame) -> pd.Series:
        ok = (runs["matrix"] == self.matrix) & (runs["autoscaler"] == self.autoscaler)
        for key, value in self.params.items():
            ok &= runs["params"].map(lambda p, k=key, v=value: _same(json.loads(p or "{}").get(k), v))
        for key, value in self.config.items():
            col = f"config.{key}"
            ok &= runs[col].map(lambda x, v=value: _same(x, v)) if col in runs else False
        return ok


def _same(a: Any, b: Any) -> bool:
    if b is None:  # a null setting (e.g. "the profile's downtime") reads back as None or, in a float column, NaN
        return a is None or (isinstance(a, float) and math.isnan(a))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


@dataclass(frozen=True)
class Outcome:
    """One row of a claims table."""

    claim: str
    section: str
    paper: str
    harness: str
    verdict: Verdict
    n: int
    mean: float = math.nan  # the harness figure as a number (relative change in %, or a share in %)
    low: float = math.nan
    high: float = math.nan
    detail: str = ""


@dataclass(frozen=True)
class Relative:
    """`metric` of `subject` against `baseline`: (subject - baseline) / baseline, paired by repetition."""

    claim: str
    section: str
    paper: str
    metric: str
    subject: Select
    baseline: Select
    direction: Direction

    def evaluate(self, runs: pd.DataFrame) -> Outcome:
        s = _by_repetition(runs, self.subject, self.metric)
        b = _by_repetition(runs, self.baseline, self.metric)
        both = s.index.intersection(b.index)
        d = (s[both] - b[both]).dropna()
        base = float(b[both][d.index].mean()) if len(d) else math.nan
        label = f"{self.subject.label} vs {self.baseline.label}"
        if len(d) == 0:
            return Outcome(self.claim, self.section, self.paper, f"{label}: {self.metric} not measured",
                           Verdict.UNKNOWN, 0)
        ci = mean_ci(d.to_numpy(float))
        sign = -1.0 if self.direction == Direction.LOWER else 1.0
        values = f"{_num(base + ci.mean)} vs {_num(base)}"
        if base != 0 and math.isfinite(base):
            scale = 100.0 / abs(base)
            mean, low, high = ci.mean * scale, ci.low * scale, ci.high * scale
            text = f"{mean:+.0f} %" + (f" [{low:+.0f}, {high:+.0f}]" if math.isfinite(low) else "")
        else:  # a zero baseline has no relative change: the difference itself
            mean, low, high = ci.mean, ci.low, ci.high
            text = f"{mean:+.3g}" + (f" [{low:+.3g}, {high:+.3g}]" if math.isfinite(low) else "")
        if ci.n < 2 or not math.isfinite(ci.half_width):
            verdict = Verdict.YES if sign * ci.mean > 0 else Verdict.NO
        elif sign * ci.low > 0 and sign * ci.high > 0:
            verdict = Verdict.YES
        elif sign * ci.mean > 0:
            verdict = Verdict.PARTLY
        else:
            verdict = Verdict.NO
        return Outcome(self.claim, self.section, self.paper, f"{text} ({values})", verdict, ci.n,
                       mean, low, high, label)


@dataclass(frozen=True)
class Holds:
    """How often `metric` is true (1.0) over the runs of `cells`; the paper says always or never."""

    claim: str
    section: str
    paper: str
    metric: str
    cells: Sequence[Select]
    expect: bool  # True: the paper has it hold in every run; False: in none

    def evaluate(self, runs: pd.DataFrame) -> Outcome:
        values = pd.concat([runs.loc[c.mask(runs), self.metric] for c in self.cells]).astype(float).dropna()
        labels = ", ".join(dict.fromkeys(c.label for c in self.cells))
        if values.empty:
            return Outcome(self.claim, self.section, self.paper, f"{labels}: {self.metric} not measured",
                           Verdict.UNKNOWN, 0, detail=labels)
        n = len(values)
        k = int((values > 0.5).sum())
        low, high = wilson(k, n)
        agree = k if self.expect else n - k
        verdict = Verdict.YES if agree == n else Verdict.PARTLY if agree > 0 else Verdict.NO
        share = 100.0 * k / n
        text = f"{k}/{n} runs ({share:.0f} % [{100 * low:.0f}, {100 * high:.0f}])"
        return Outcome(self.claim, self.section, self.paper, text, verdict, n, share, 100 * low, 100 * high, labels)


Claim = Relative | Holds


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n."""
    if n == 0:
        return math.nan, math.nan
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _by_repetition(runs: pd.DataFrame, sel: Select, metric: str) -> pd.Series:
    rows = runs[sel.mask(runs)]
    if rows.empty or metric not in rows:
        return pd.Series(dtype=float)
    return rows.groupby("repetition")[metric].mean().astype(float)


def _num(v: float) -> str:
    if not math.isfinite(v):
        return "nan"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def evaluate(claims: Sequence[Claim], runs: pd.DataFrame) -> list[Outcome]:
    return [c.evaluate(runs) for c in claims]


def outcomes_frame(outcomes: Sequence[Outcome]) -> pd.DataFrame:
    return pd.DataFrame([vars(o) for o in outcomes])


def flat_config(config: Mapping[str, Any], prefix: str = "config.") -> dict[str, Any]:
    """A resolved experiment as {"config.dotted.path": value} (lists kept as JSON)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out.update(flat_config(value, f"{prefix}{key}."))
        elif isinstance(value, list | tuple):
            out[f"{prefix}{key}"] = json.dumps(value)
        else:
            out[f"{prefix}{key}"] = value
    return out
