"""Is B different from A, and how sure are we? Statistics for a few repetitions per side.

Benchmark cells have 3-10 repetitions, so every number here is meant for small samples:
- each side: mean, sample SD, the 95 % t-interval half-width (METRICS.md "Across repetitions");
- the difference B - A with Welch's interval (unequal variances, Welch-Satterthwaite degrees of
  freedom: Welch 1947, "The generalization of Student's problem when several different population
  variances are involved");
- two tests that disagree where their assumptions differ: Welch's t (means, roughly normal
  values) and the Mann-Whitney U (ranks, no shape assumed; exact p without ties). Both from scipy.

The verdict calls a difference only when both tests do. With 3 runs a side the U test cannot
reach p < 0.05 at all (its smallest two-sided p is 2 / C(6, 3) = 0.1); then Welch decides alone
and the verdict says so.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from harness.analysis.metrics import t_factor

ALPHA = 0.05


class Verdict(StrEnum):
    HIGHER = "higher"
    LOWER = "lower"
    NO_DIFFERENCE = "no significant difference"
    TESTS_DISAGREE = "unclear: the tests disagree"
    IDENTICAL = "identical"
    TOO_FEW = "too few runs"
    NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class SideStats:
    """One side's values of one metric (NaN values - not measured - left out and not counted)."""

    n: int
    mean: float
    sd: float
    ci: float  # half-width of the 95 % t-interval; NaN below 2 values

    def as_dict(self) -> dict[str, Any]:
        return {k: _plain(v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Difference:
    """B - A for one metric: the estimate, its Welch interval, both tests and the verdict."""

    diff: float
    ci_low: float
    ci_high: float
    welch_t: float
    welch_df: float
    welch_p: float
    mwu_u: float  # U of B (pairs where B's value is larger, ties counting 1/2)
    mwu_p: float
    verdict: Verdict
    note: str = ""  # why the verdict rests on one test, if it does

    def as_dict(self) -> dict[str, Any]:
        out = {k: _plain(v) for k, v in asdict(self).items()}
        out["verdict"] = self.verdict.value
        return out

    @property
    def verdict_text(self) -> str:
        return f"{self.verdict.value} ({self.note})" if self.note else self.verdict.value


def _plain(v: Any) -> Any:
    """JSON-safe: NaN and infinities become None (unknown is not zero, and JSON has no NaN)."""
    if isinstance(v, float | np.floating):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


def finite(values: Any) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    return arr[~np.isnan(arr)]


def describe(values: Any, level: float = 0.95) -> SideStats:
    """Mean, sample SD (ddof 1) and t-interval half-width of the measured values."""
    x = finite(values)
    n = len(x)
    if n == 0:
        return SideStats(0, math.nan, math.nan, math.nan)
    mean = float(x.mean())
    if n < 2:
        return SideStats(1, mean, math.nan, math.nan)
    sd = float(x.std(ddof=1))
    return SideStats(n, mean, sd, t_factor(n, level) * sd / math.sqrt(n))


def smallest_u_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided exact Mann-Whitney p with these sample sizes: all of one side above the other."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def difference(a_values: Any, b_values: Any, alpha: float = ALPHA, level: float = 0.95) -> Difference:
    """Compare B with A (B - A); see the module docstring for the rules of the verdict."""
    from scipy import special, stats

    a, b = finite(a_values), finite(b_values)
    nan = math.nan
    if len(a) == 0 or len(b) == 0:
        return Difference(nan, nan, nan, nan, nan, nan, nan, nan, Verdict.NOT_MEASURED)
    diff = float(b.mean() - a.mean())
    if len(a) < 2 or len(b) < 2:
        return Difference(diff, nan, nan, nan, nan, nan, nan, nan, Verdict.TOO_FEW, "needs 2 runs a side")
    va, vb = float(a.var(ddof=1)), float(b.var(ddof=1))
    se2 = va / len(a) + vb / len(b)
    u_res = stats.mannwhitneyu(b, a, alternative="two-sided")
    u, u_p = float(u_res.statistic), float(u_res.pvalue)
    if se2 == 0.0:  # no spread on either side: Welch is undefined, the ranks still speak
        if diff == 0.0:
            return Difference(0.0, 0.0, 0.0, nan, nan, nan, u, 1.0, Verdict.IDENTICAL)
        direction = Verdict.HIGHER if diff > 0 else Verdict.LOWER
        verdict = direction if u_p < alpha else Verdict.NO_DIFFERENCE
        return Difference(diff, diff, diff, nan, nan, nan, u, u_p, verdict, "no spread: U test only")
    with warnings.catch_warnings():  # nearly equal values: scipy warns of precision loss, the numbers stand
        warnings.simplefilter("ignore", RuntimeWarning)
        welch = stats.ttest_ind(b, a, equal_var=False)
    t, p = float(welch.statistic), float(welch.pvalue)
    df = se2 ** 2 / ((va / len(a)) ** 2 / (len(a) - 1) + (vb / len(b)) ** 2 / (len(b) - 1))
    half = float(special.stdtrit(df, 0.5 + level / 2)) * math.sqrt(se2)  # what stats.t.ppf evaluates
    direction = Verdict.HIGHER if diff > 0 else Verdict.LOWER
    note = ""
    if smallest_u_p(len(a), len(b)) >= alpha:
        verdict = direction if p < alpha else Verdict.NO_DIFFERENCE
        note = f"Welch alone: {len(a)} vs {len(b)} runs are too few for the U test"
    elif p < alpha and u_p < alpha:
        verdict = direction
    elif p < alpha or u_p < alpha:
        verdict = Verdict.TESTS_DISAGREE
    else:
        verdict = Verdict.NO_DIFFERENCE
    return Difference(diff, diff - half, diff + half, t, df, p, u, u_p, verdict, note)
