"""The seed papers' scores (harness.analysis.papers) against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis import papers
from harness.analysis.papers import PaperSpec
from harness.vocabulary import Metric


def spec(**kw) -> PaperSpec:
    return PaperSpec(**{"run_start": 0.0, "run_end": 100.0, "control_step_s": 10.0, **kw})


# ---------------------------------------------------------------- MEAD: per-record response time


def test_record_mean_weighs_intervals_by_their_records():
    assert papers.record_mean(np.array([100.0, 300.0]), np.array([1.0, 3.0])) == pytest.approx(2.5)
    # an interval with no records or no measurement does not count; none at all is unknown, not 0
    assert papers.record_mean(np.array([100.0, 0.0, 50.0]), np.array([1.0, 9.0, np.nan])) == 1.0
    assert math.isnan(papers.record_mean(np.array([0.0]), np.array([1.0])))


def knots(p50, p95, p99, pmax):
    return {0.5: np.asarray(p50, float), 0.95: np.asarray(p95, float), 0.99: np.asarray(p99, float),
            1.0: np.asarray(pmax, float)}


def test_mixture_quantile_of_one_interval_is_its_own_quantile():
    k = knots([1.0], [2.0], [3.0], [4.0])
    assert papers.mixture_quantile(0.95, np.array([7.0]), k) == pytest.approx(2.0)
    assert papers.mixture_quantile(0.5, np.array([7.0]), k) == pytest.approx(1.0)
    # between knots the distribution is linear: F(2.5) = 0.95 + 0.04 / 2 = 0.97
    assert papers.mixture_quantile(0.97, np.array([7.0]), k) == pytest.approx(2.5)


def test_mixture_quantile_mixes_intervals_by_weight():
    # A: 0 -> 1 s carries 50 %, 1 -> 2 s the rest; B the same shifted by 2 s. Equal weights:
    # F(1) = (0.5 + 1/6) / 2, F(2) = (1 + 1/3) / 2, so the median is 1.5 s
    k = {0.5: np.array([1.0, 3.0]), 1.0: np.array([2.0, 4.0])}
    assert papers.mixture_quantile(0.5, np.array([1.0, 1.0]), k) == pytest.approx(1.5)
    # B three times as heavy: F(3) = (1 + 3 x 0.5) / 4 = 0.625 > 0.5 > F(2) = (1 + 3 / 3) / 4 = 0.5: exactly 2 s
    assert papers.mixture_quantile(0.5, np.array([1.0, 3.0]), k) == pytest.approx(2.0)


def test_a_p95_target_is_missed_by_a_burst_the_mean_hides():
    # 19 calm intervals (p95 0.2 s) and one burst (p95 30 s), equal records: the mean is 1.6 s, but
    # 5 % of the records are in the burst and its upper half (p50 20 s) lies above 20 s
    w = np.ones(20)
    k = knots([0.1] * 19 + [20.0], [0.2] * 19 + [30.0], [0.3] * 19 + [35.0], [0.5] * 19 + [40.0])
    means = np.array([0.1] * 19 + [30.0])
    assert papers.record_mean(w, means) == pytest.approx((19 * 0.1 + 30) / 20)
    # between the calm p99 (0.3 s) and max (0.5 s): F(x) = (19 (0.99 + 0.05 (x - 0.3)) + x / 40) / 20
    f03 = (19 * 0.99 + 0.3 / 40) / 20
    assert papers.mixture_quantile(0.95, w, k) == pytest.approx(0.3 + (0.95 - f03) / ((19 * 0.05 + 1 / 40) / 20))
    assert papers.mixture_quantile(0.96, w, k) > 2.0


def test_repeated_quantiles_are_an_atom_and_a_missing_max_ends_the_tail():
    # p95 = p99 = max = 2 s: F rises linearly from 0.5 at 1 s to 0.95 at 2 s, where 5 % of the records sit
    k = knots([1.0], [2.0], [2.0], [2.0])
    assert papers.mixture_quantile(0.95, np.array([1.0]), k) == pytest.approx(2.0)
    assert papers.mixture_quantile(0.97, np.array([1.0]), k) == pytest.approx(2.0)
    assert papers.mixture_quantile(0.75, np.array([1.0]), k) == pytest.approx(1.0 + 0.25 / 0.45)
    k = knots([1.0], [2.0], [np.nan], [np.nan])
    assert papers.mixture_quantile(0.99, np.array([1.0]), k) == pytest.approx(2.0)
    # no interval with a measured p95: unknown
    assert math.isnan(papers.mixture_quantile(0.95, np.array([1.0]), knots([1.0], [np.nan], [3.0], [4.0])))


# ---------------------------------------------------------------- MPC: QoS violations per control step


def steps_table(inp, thr, lat, processing=None, dt=5.0) -> pd.DataFrame:
    n = len(inp)
    return pd.DataFrame({"input": inp, "throughput": thr, "latency": lat,
                         "processing": processing if processing is not None else [np.nan] * n},
                        index=np.arange(n) * dt)


def test_the_strategys_own_test_decides_a_control_step():
    # 4 steps of 10 s (2 samples each): step 1 processes 90 %, step 3 has a 9 s mean latency
    table = steps_table([100.0] * 8, [100, 100, 90, 90, 100, 100, 100, 100.0], [1, 1, 1, 1, 1, 1, 9, 9.0])
    assert papers.control_step_accuracy(table, spec(qos="throughput", latency_slo_s=5.0)).violations == 1
    assert papers.control_step_accuracy(table, spec(qos="latency", latency_slo_s=5.0)).violations == 1
    both = papers.control_step_accuracy(table, spec(qos="both", latency_slo_s=5.0))
    assert (both.violations, both.steps) == (2, 4)


def test_a_catch_up_step_is_no_violation_and_rescale_steps_are_counted_apart():
    # step 1: down for half of it (ratio 0.5); step 2: catching up at 1.5 x the input (the paper's zig-zag)
    table = steps_table([100.0] * 6, [100, 100, 0, 100, 150, 150.0], [0.1] * 6, processing=[1, 1, 0, 1, 1, 1.0])
    acc = papers.control_step_accuracy(table, spec(qos="throughput"))
    assert (acc.violations, acc.steps, acc.in_rescale_steps) == (1, 3, 1)


def test_a_step_whose_test_was_not_measured_is_not_judged():
    table = steps_table([100.0] * 4, [100.0] * 4, [np.nan, np.nan, 9.0, 9.0])
    acc = papers.control_step_accuracy(table, spec(qos="latency", latency_slo_s=5.0))
    assert (acc.violations, acc.steps) == (1, 1)
    idle = steps_table([0.0] * 4, [0.0] * 4, [np.nan] * 4)  # no input: no ratio to test
    assert papers.control_step_accuracy(idle, spec(qos="throughput")).steps == 0


# ---------------------------------------------------------------- Gesscale: excess time and cost


def test_excess_time_counts_from_the_end_of_the_trace_to_the_last_record():
    ts = np.arange(10.0, 160.0, 10.0)  # samples at 10 .. 150 s
    inp = (ts, np.where(ts <= 100, 100.0, 0.0))  # the trace ends after the sample at 100 s
    lag = (ts, np.where(ts < 130, 500.0, 0.0))  # drained at 130 s
    exe = papers.execution(inp, lag, spec(run_start=10.0, run_end=150.0))
    # T = 110 - 10 (the first sample after the input stopped is at 110 s); Pt - It = 130 - 110
    assert (exe.trace_s, exe.excess_s, exe.end_s) == (100.0, 20.0, 130.0)


def test_a_backlog_left_at_the_end_is_worked_off_at_the_final_capacity():
    ts = np.arange(10.0, 110.0, 10.0)
    never_stops = (ts, np.full(10, 100.0))
    lag = (ts, np.full(10, 1000.0))
    exe = papers.execution(never_stops, lag, spec(run_start=10.0, run_end=100.0, drain_rate=50.0))
    assert (exe.trace_s, exe.excess_s, exe.end_s) == (90.0, 20.0, 120.0)
    stops = (ts, np.where(ts <= 60, 100.0, 0.0))
    exe = papers.execution(stops, lag, spec(run_start=10.0, run_end=100.0, drain_rate=50.0))
    assert (exe.trace_s, exe.excess_s) == (60.0, 30.0 + 20.0)  # 70 -> 100 s in the run, then 1000 / 50 s
    assert math.isnan(papers.execution(stops, lag, spec(run_start=10.0, run_end=100.0)).excess_s)


def test_cost_is_replica_minutes_up_to_the_last_record():
    tm = (np.array([0.0, 60.0, 120.0]), np.array([2.0, 4.0, 1.0]))
    # Pt inside the run: 2 x 60 + 4 x 30 replica-seconds
    assert papers.cost_replica_minutes(tm, 90.0, run_end=180.0) == pytest.approx((120 + 120) / 60)
    # Pt past the run's end: the whole run (2 x 60 + 4 x 60 + 1 x 60) plus 1 replica for 120 s more
    assert papers.cost_replica_minutes(tm, 300.0, run_end=180.0) == pytest.approx((420 + 120) / 60)


def run_frame(tm: list[float], thr: list[float], lag: list[float]) -> pd.DataFrame:
    """A 6-sample run (10 s apart); the input of 100 rec/s stops after the 4th sample."""
    ts = np.arange(10.0, 70.0, 10.0)
    series = {Metric.INPUT_RATE: [100, 100, 100, 100, 0, 0], Metric.THROUGHPUT: thr, Metric.LAG: lag,
              Metric.TASKMANAGERS: tm}
    rows = [{"ts": t, "metric": m, "operator": "", "value": float(v)}
            for m, values in series.items() for t, v in zip(ts, values, strict=True)]
    return pd.DataFrame(rows)


def test_an_underprovisioned_scaler_pays_for_its_backlog():
    s = spec(run_start=10.0, run_end=60.0, control_step_s=10.0, drain_rate=50.0)
    keeps_up = papers.score_run(run_frame([2] * 6, [100, 100, 100, 100, 0, 0], [0] * 6), s)
    behind = papers.score_run(run_frame([1] * 6, [50, 50, 50, 50, 50, 50], [500, 1000, 1500, 2000, 1500, 1000]), s)
    # T = 50 - 10; keeps_up drained when the input stopped: no excess, 2 replicas from 10 s to Pt = 50 s
    assert (keeps_up["spec_trace_s"], keeps_up["spec_excess_time"]) == (40.0, 0.0)
    assert keeps_up["spec_cost_replica_min"] == pytest.approx(2 * 40 / 60)
    assert keeps_up["spec_processed_in_trace"] == pytest.approx(1.0)
    # behind: 1000 records left at 60 s take 20 s more: Pt - It = (60 - 50) + 20 s; 1 replica until 80 s
    assert behind["spec_excess_time"] == pytest.approx(30.0 / 40.0)
    assert behind["spec_cost_replica_min"] == pytest.approx(1 * 70 / 60)
    assert behind["spec_processed_in_trace"] == pytest.approx(0.5)
    # steps of 10 s: every step of the trace processed half its input
    assert (behind["saso_qos_violations"], keeps_up["saso_qos_violations"]) == (4.0, 0.0)
    # nothing measured the per-record latency: MEAD's scores are unknown, not met and not missed
    assert math.isnan(behind["mead_rt_mean"]) and math.isnan(behind["mead_target_met"])


def test_allocated_cores_are_parallelism_times_cpu_share():
    rows = [(0.0, Metric.PARALLELISM, "a", 2), (0.0, Metric.PARALLELISM, "b", 1), (0.0, Metric.CPU_SHARE, "a", 0.5),
            (0.0, Metric.CPU_SHARE, "b", 1.0), (50.0, Metric.PARALLELISM, "a", 4), (50.0, Metric.PARALLELISM, "b", 1),
            (50.0, Metric.CPU_SHARE, "a", 0.5), (50.0, Metric.CPU_SHARE, "b", 0.4)]
    frame = pd.DataFrame(rows, columns=["ts", "metric", "operator", "value"])
    # 0-50 s: 2 x 0.5 + 1 = 2 cores; 50-100 s: 4 x 0.5 + 0.4 = 2.4 cores
    assert papers.allocated_cores(frame, 100.0) == pytest.approx(2.2)
