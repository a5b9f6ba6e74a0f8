"""`bench compare`'s statistics against values worked out by hand (not the same scipy call again)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from harness.analysis.rounding import with_ci
from harness.analysis.significance import Verdict, describe, difference, smallest_u_p

# Student-t quantiles from printed tables (two-sided 95 %): df 4 -> 2.776, df 8 -> 2.306
T_975_DF4 = 2.776445
T_975_DF8 = 2.306004


def t_two_sided_p(t: float, df: int) -> float:
    """2 * P(T > |t|) by integrating the Student-t density with the trapezoid rule (no scipy)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    x = np.linspace(abs(t), 2000.0, 2_000_001)
    density = c * (1 + x * x / df) ** (-(df + 1) / 2)
    return float(2 * np.trapezoid(density, x))


def exact_u_p(a: list[float], b: list[float]) -> tuple[float, float]:
    """(U of b, exact two-sided p) by enumerating every way to split the pooled values (no ties)."""
    def u_of(bs: tuple[float, ...], as_: tuple[float, ...]) -> float:
        return sum(1.0 for y in bs for x in as_ if y > x)

    pooled = a + b
    u_b = u_of(tuple(b), tuple(a))
    mean_u = len(a) * len(b) / 2
    us = []
    for idx in itertools.combinations(range(len(pooled)), len(b)):
        bs = tuple(pooled[i] for i in idx)
        as_ = tuple(pooled[i] for i in range(len(pooled)) if i not in idx)
        us.append(u_of(bs, as_))
    extreme = sum(1 for u in us if abs(u - mean_u) >= abs(u_b - mean_u))
    return u_b, extreme / len(us)


def test_describe_mean_sd_and_t_interval():
    s = describe([1, 2, 3, 4, 5, float("nan")])  # NaN: not measured, not counted
    assert s.n == 5 and s.mean == 3.0
    assert s.sd == pytest.approx(math.sqrt(2.5))
    assert s.ci == pytest.approx(T_975_DF4 * math.sqrt(2.5) / math.sqrt(5), rel=1e-5)  # 1.9632
    assert math.isnan(describe([7.0]).ci) and describe([]).n == 0


def test_welch_difference_interval_and_p_by_hand():
    # means 3 and 5, variances 2.5 each: se = sqrt(2.5/5 + 2.5/5) = 1, t = 2, Welch df = 1 / (2 * 0.25 / 4) = 8
    d = difference([1, 2, 3, 4, 5], [3, 4, 5, 6, 7])
    assert d.diff == 2.0
    assert d.welch_t == pytest.approx(2.0) and d.welch_df == pytest.approx(8.0)
    assert (d.ci_low, d.ci_high) == (pytest.approx(2 - T_975_DF8, rel=1e-5), pytest.approx(2 + T_975_DF8, rel=1e-5))
    assert d.welch_p == pytest.approx(t_two_sided_p(2.0, 8), abs=1e-5)  # 0.0805
    assert d.verdict == Verdict.NO_DIFFERENCE


def test_welch_degrees_of_freedom_with_unequal_variances():
    a, b = [10.0, 12.0, 14.0], [20.0, 30.0, 40.0, 50.0]  # var 4 (n 3) and 166.67 (n 4)
    va, vb = 4.0, 500.0 / 3
    se2 = va / 3 + vb / 4
    df = se2 ** 2 / ((va / 3) ** 2 / 2 + (vb / 4) ** 2 / 3)
    d = difference(a, b)
    assert d.welch_df == pytest.approx(df) and d.welch_t == pytest.approx((35 - 12) / math.sqrt(se2))


def test_mann_whitney_u_and_exact_p_by_enumeration():
    a, b = [1.0, 3.0, 5.0, 7.0, 9.0], [2.0, 4.0, 6.0, 8.0, 10.0]
    u, p = exact_u_p(a, b)
    d = difference(a, b)
    assert u == 15 and d.mwu_u == 15
    assert d.mwu_p == pytest.approx(p)
    # all of B above all of A: U = 25, p = 2 / C(10, 5) = 2 / 252
    d = difference([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert d.mwu_u == 25 and d.mwu_p == pytest.approx(2 / 252)
    assert d.verdict == Verdict.HIGHER
    assert difference([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]).verdict == Verdict.LOWER


def test_verdicts_for_the_awkward_cases():
    # an outlier: the ranks separate the sides (U p = 0.008), the means' test does not (t ~ 1.1)
    assert difference([1, 2, 3, 4, 5], [6, 7, 8, 9, 100]).verdict == Verdict.TESTS_DISAGREE
    # 3 runs a side: the U test cannot reach 0.05 (smallest p 0.1), so Welch decides and the verdict says so
    assert smallest_u_p(3, 3) == pytest.approx(0.1)
    d = difference([1.0, 1.1, 0.9], [5.0, 5.1, 4.9])
    assert d.verdict == Verdict.HIGHER and "Welch alone" in d.note
    assert difference([2, 2, 2, 2], [2, 2, 2, 2]).verdict == Verdict.IDENTICAL
    d = difference([2, 2, 2, 2, 2], [3, 3, 3, 3, 3])  # no spread: only the ranks can speak
    assert d.verdict == Verdict.HIGHER and "U test" in d.note and math.isnan(d.welch_p)
    assert difference([1, 2], [float("nan")]).verdict == Verdict.NOT_MEASURED
    assert difference([1.0], [2.0, 3.0]).verdict == Verdict.TOO_FEW


def test_as_dict_has_no_nan():
    d = difference([2, 2, 2], [2, 2, 2]).as_dict()
    assert d["welch_p"] is None and d["verdict"] == "identical"


@pytest.mark.parametrize(("value", "ci", "shown"), [
    (1.0, 1.41e-15, "1"),  # floating-point noise is no interval
    (12.3456, 0.0123, "12.346 ± 0.012"),
    (25432.0, 1234.0, "25,400 ± 1,200"),
    (0.5, 1.2, "0.5 ± 1.2"),
    (6.58, float("nan"), "6.58"),
    (float("nan"), 0.3, "-"),
    (134400.0, 180.0, "134,400 ± 180"),
])
def test_plus_minus_is_rounded_to_the_interval(value, ci, shown):
    assert with_ci(value, ci) == shown


def test_a_zero_second_figure_is_dropped():
    assert with_ci(10.0, 1.0) == "10 ± 1" and with_ci(12.5, 1.25) == "12.5 ± 1.2" and with_ci(3.0, 0.2) == "3.0 ± 0.2"
