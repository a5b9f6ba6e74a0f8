"""Claims of `bench reproduce`: paired relative differences, verdicts and shares, worked out by hand."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from scipy import stats

from harness.reproduce.claims import Direction, Holds, Relative, Select, Verdict, flat_config, wilson


def runs(rows: list[tuple[str, dict, int, float]], metric: str = "m") -> pd.DataFrame:
    return pd.DataFrame([{"matrix": "x", "autoscaler": a, "params": json.dumps(p), "repetition": r, metric: v,
                          "config.loop.period_s": 4.0} for a, p, r, v in rows])


A, B = Select("A", "x", "a"), Select("B", "x", "b")


def test_relative_change_is_the_mean_paired_difference_over_the_baselines_mean():
    frame = runs([("a", {}, 0, 11.0), ("a", {}, 1, 9.0), ("a", {}, 2, 15.0),
                  ("b", {}, 0, 12.0), ("b", {}, 1, 12.0), ("b", {}, 2, 14.0)])
    out = Relative("c", "s", "p", "m", A, B, Direction.LOWER).evaluate(frame)
    # differences -1, -3, +1: mean -1 over the baseline's mean 38/3; sd 2, t(2) half-width 4.303 x 2 / sqrt(3)
    half = stats.t.ppf(0.975, 2) * 2.0 / math.sqrt(3)
    assert out.mean == pytest.approx(-100 / (38 / 3))
    assert (out.low, out.high) == (pytest.approx(100 * (-1 - half) / (38 / 3)),
                                   pytest.approx(100 * (-1 + half) / (38 / 3)))
    assert out.verdict == Verdict.PARTLY and out.n == 3  # the mean is lower, the interval reaches above 0
    tight = runs([("a", {}, r, 9.0 + 0.1 * r) for r in range(3)] + [("b", {}, r, 12.0 + 0.1 * r) for r in range(3)])
    assert Relative("c", "s", "p", "m", A, B, Direction.LOWER).evaluate(tight).verdict == Verdict.YES
    assert Relative("c", "s", "p", "m", A, B, Direction.HIGHER).evaluate(tight).verdict == Verdict.NO


def test_a_zero_baseline_gives_the_difference_and_one_repetition_decides_by_its_sign():
    frame = runs([("a", {}, 0, 0.02), ("b", {}, 0, 0.0)])
    out = Relative("c", "s", "p", "m", A, B, Direction.LOWER).evaluate(frame)
    assert out.mean == pytest.approx(0.02) and math.isnan(out.low) and out.verdict == Verdict.NO
    assert out.harness.startswith("+0.02 ")


def test_unmeasured_metrics_are_not_a_verdict():
    frame = runs([("a", {}, 0, float("nan")), ("b", {}, 0, 1.0)])
    out = Relative("c", "s", "p", "m", A, B, Direction.LOWER).evaluate(frame)
    assert out.verdict == Verdict.UNKNOWN and out.n == 0


def test_selection_by_params_and_config():
    frame = runs([("a", {"h": 2}, 0, 1.0), ("a", {"h": 1}, 0, 5.0), ("b", {}, 0, 2.0)])
    h2 = Select("A h=2", "x", "a", {"h": 2}, {"loop.period_s": 4})
    assert Relative("c", "s", "p", "m", h2, B, Direction.LOWER).evaluate(frame).mean == pytest.approx(-50.0)
    other_step = Select("A", "x", "a", {"h": 2}, {"loop.period_s": 60})
    assert Relative("c", "s", "p", "m", other_step, B, Direction.LOWER).evaluate(frame).verdict == Verdict.UNKNOWN
    assert flat_config({"loop": {"period_s": 4}, "levels": [1, 2]}) == {"config.loop.period_s": 4,
                                                                        "config.levels": "[1, 2]"}


def test_holds_counts_runs_with_a_wilson_interval():
    frame = runs([("a", {}, r, v) for r, v in enumerate([1.0, 1.0, 0.0, 1.0])], metric="met")
    out = Holds("c", "s", "p", "met", (A,), True).evaluate(frame)
    low, high = wilson(3, 4)
    assert out.mean == 75.0 and (out.low, out.high) == (pytest.approx(100 * low), pytest.approx(100 * high))
    assert out.verdict == Verdict.PARTLY
    assert Holds("c", "s", "p", "met", (A,), False).evaluate(frame).verdict == Verdict.PARTLY
    all_met = runs([("a", {}, r, 1.0) for r in range(3)], metric="met")
    assert Holds("c", "s", "p", "met", (A,), True).evaluate(all_met).verdict == Verdict.YES
    assert Holds("c", "s", "p", "met", (A,), False).evaluate(all_met).verdict == Verdict.NO
    # Wilson for 3/4 at 95 %: centre (0.75 + 1.92/4) / (1 + 3.84/4)
    z = stats.norm.ppf(0.975)
    assert (low + high) / 2 == pytest.approx((0.75 + z * z / 8) / (1 + z * z / 4))


def test_a_claim_not_measured_names_the_series_no_run_recorded(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.analysis.papers import JOB_METRICS
    from harness.reproduce.run import _why_unknown, unrecorded_series
    from harness.vocabulary import LATENCY_E2E, Metric

    kept = [m for m in JOB_METRICS if m not in LATENCY_E2E]
    for k, metrics in enumerate((kept[:3], kept[3:])):  # together the runs hold every series but the e2e latency
        run = tmp_path / f"r{k}"
        run.mkdir()
        pq.write_table(pa.table({"ts": [0.0] * len(metrics), "metric": [str(m) for m in metrics],
                                 "operator": [""] * len(metrics), "value": [1.0] * len(metrics)}),
                       run / "timeseries.parquet")
    (tmp_path / "r2").mkdir()  # a run that left no record adds nothing
    missing = unrecorded_series([tmp_path / "r0", tmp_path / "r1", tmp_path / "r2"])
    assert missing == [str(m) for m in LATENCY_E2E] and str(Metric.LATENCY_E2E_P95) in missing
    frame = runs([("a", {}, 0, math.nan), ("b", {}, 0, 1.0)])
    unknown = Holds("c", "s", "p", "m", [A], True).evaluate(frame)
    assert unknown.verdict == Verdict.UNKNOWN
    told = _why_unknown(unknown, missing, "sim")
    assert told.verdict == Verdict.UNKNOWN and "the sim records hold no latency_e2e_mean" in told.harness
    scored = Holds("c", "s", "p", "m", [B], True).evaluate(frame)
    assert _why_unknown(scored, missing, "sim") == scored  # a scored claim is left as it is
    assert unrecorded_series([tmp_path / "r2"]) == []  # nothing recorded at all: nothing to say
