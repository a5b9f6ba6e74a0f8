"""Per-run summaries of a hand-made run record, the engines' reductions against the metric core, and
per-cell aggregates over repetitions."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from harness.analysis import metrics as mx
from harness.analysis import pandas_engine, papers
from harness.analysis.aggregate import CELL_KEYS, aggregate_cells, compare_frames, crash_rates
from harness.analysis.loader import RunRef, discover
from harness.analysis.samples import read_timeseries
from harness.analysis.summary import paper_spec
from harness.vocabulary import Metric


@pytest.fixture
def row(hand_results: Path) -> pd.Series:
    result = pandas_engine.summarise(discover(hand_results))
    assert len(result.summary) == 1
    return result.summary.iloc[0]


def test_identity_comes_from_run_yaml_and_the_directory(row: pd.Series):
    assert (row.run_id, row.matrix, row.cell_id, row.repetition) == ("m/hand-r0", "m", "hand", 0)
    assert (row.query, row.autoscaler, row.params) == ("q1", "ds2", '{"overprovisioning": 1.2}')


def test_thesis_metrics(row: pd.Series):
    assert row.tm_avg == pytest.approx((3 * 10 + 3 * 20 + 6 * 30) / 60)
    assert row.tm_max == 6
    assert row.latency_kafka_avg == pytest.approx((1 * 10 + 2 * 20 + 3 * 30) / 60)
    assert row.latency_kafka_p50 == pytest.approx(2.5)
    assert row.latency_kafka_p95 == pytest.approx(3 + 0.85 * 7)
    assert row.latency_kafka_max == 10
    assert row.throughput_avg == pytest.approx((100 * 10 + 90 * 20 + 100 * 30) / 60)
    assert row.throughput_ratio == pytest.approx(row.throughput_avg / 100)
    assert row.scale_count == 2 and row.duration_s == 60


def test_saso_and_mead(row: pd.Series):
    # control steps of 10 s: [0,10) ok; [10,20) ratio 0.9 < 0.95; [30,40) e2e 4 > 2.5; [60,70) e2e 2 <= 2.5
    assert (row.saso_qos_violations, row.saso_control_steps) == (2, 4)
    assert row.saso_violations_in_rescale_steps == 0  # no processing series: no step is known to be down
    # (1,1,1)->(2,3,1): sqrt(1+4); (2,3,1)->(2,2,1): 1
    assert row.saso_amplitude == pytest.approx((math.sqrt(5) + 1) / 2)
    # records per interval = throughput x width: 1000, 1800 (no latency measured: a gap), 3000 (the last
    # sample holds for 0 s)
    assert row.mead_rt_mean == pytest.approx((1000 * 0.5 + 3000 * 4) / 4000)
    # the mixture of the measured intervals' distributions (weights 1/4, 3/4): its 0.95 point lies
    # between the second interval's p50 (3 s, F = 1/4 + 3/4 x .5) and p95 (8 s, F = 1/4 + 3/4 x .95)
    a, c = 0.25, 0.75
    assert row.mead_rt_p95 == pytest.approx(3 + (0.95 - (a + c * 0.5)) / (c * 0.45 / 5))
    assert row.mead_rt_target == 2.5 and row.mead_target_met == 0.0  # the mean (the named statistic) misses it
    assert row.mead_rt_ratio == pytest.approx(row.mead_rt_mean / 2.5)


def test_end_to_end_latency_with_a_gap(row: pd.Series):
    # interval means 0.5, unknown (a gap from 10 to 30 s), 4, 2: the gap is left out, not held at 0.5
    assert row.latency_e2e_avg == pytest.approx((0.5 * 10 + 4 * 30) / 40)
    assert row.latency_e2e_p50 == pytest.approx(1.5)  # median of the interval medians 0.4, 3, 1.5
    assert row.latency_e2e_p95 == pytest.approx(3 + 0.9 * 5)  # p95 of the interval p95s 0.9, 3, 8
    assert row.latency_e2e_max == 31
    assert row.cpu_avg == pytest.approx((0.5 * 10 + 0.7 * 30) / 40)  # the CPU gap is a gap too


def test_lost_load_and_skipped_decisions(row: pd.Series):
    # 50 skipped by the generator + 20 expired in Kafka, of the pattern's 100/s x 60 s
    assert (row.load_skipped, row.load_expired) == (50, 20)
    assert row.load_shortfall == pytest.approx(70 / 6000)
    assert row.shortfall_flagged  # above 1 %
    assert row.decisions_skipped == 2


def test_spec_cost_and_ideal(row: pd.Series):
    # the input never stops and the lag is 0 at the end: Pt = the run's end, no excess time
    assert row.spec_excess_time == 0 and row.spec_trace_s == 60
    assert row.spec_cost_replica_min == pytest.approx((3 * 30 + 6 * 30) / 60)
    assert row.spec_processed_in_trace == pytest.approx((100 * 10 + 90 * 20 + 100 * 30) / 6000)
    # 100 records/s is far below one subtask's capacity: ideal = 1 per operator = 3
    assert row.spec_ideal_avg == 3
    assert row.spec_accuracy_o == pytest.approx(((3 - 3) * 30 + (6 - 3) * 30) / 60)
    assert row.spec_accuracy_u == 0 and row.spec_timeshare_o == pytest.approx(50)


def test_convergence_per_stage_from_phase_events(row: pd.Series):
    # settle = cooldown 5 + period 10 = 15 s; stage1 [0,40): last action at 5 -> converged after 5 s
    assert row.conv_stage1_converged and row.conv_stage1_s == 5 and row.conv_stage1_actions == 1
    # stage2 [40,60): action at 50, only 10 s before the end -> not converged
    assert not row.conv_stage2_converged and math.isnan(row.conv_stage2_s)


def test_failures_are_flagged_not_dropped(row: pd.Series):
    assert row.faults == 1 and row.failed_rescales == 1 and row.flagged and not row.failed


def test_failed_run_is_kept(hand_results: Path):
    (hand_results / "m" / "hand-r0" / "status").write_text("failed: crashed\n")
    summary = pandas_engine.summarise(discover(hand_results)).summary
    assert summary.iloc[0].failed and summary.iloc[0].flagged
    assert crash_rates(summary).iloc[0].crash_rate == 1.0


def _summary(values: list[float], autoscaler: str = "ds2") -> pd.DataFrame:
    return pd.DataFrame({
        "run_id": [f"{autoscaler}{i}" for i in range(len(values))], "matrix": "m", "query": "q1",
        "pattern": "cosine", "autoscaler": autoscaler, "params": "{}", "cell_id": autoscaler, "config_hash": "h",
        "repetition": list(range(len(values))), "tm_avg": values, "flagged": [False] * len(values),
    })


def test_aggregate_over_repetitions():
    agg = aggregate_cells(pd.concat([_summary([10, 12, 14]), _summary([5.0], "hpa")]))
    ds2 = agg[agg.autoscaler == "ds2"].iloc[0]
    assert ds2.tm_avg == 12 and ds2.tm_avg_n == 3 and ds2.runs == 3
    assert ds2.tm_avg_ci == pytest.approx(4.303 * 2 / math.sqrt(3), rel=1e-3)  # t(0.975, 2) = 4.303, sd = 2
    hpa = agg[agg.autoscaler == "hpa"].iloc[0]
    assert hpa.tm_avg == 5 and hpa.tm_avg_n == 1 and math.isnan(hpa.tm_avg_ci)


def test_aggregate_ignores_nan_repetitions():
    agg = aggregate_cells(_summary([10, math.nan, 14]))
    assert agg.iloc[0].tm_avg == 12 and agg.iloc[0].tm_avg_n == 2 and agg.iloc[0].runs == 3


def test_compare_frames_reports_differences():
    a = _summary([1.0, 2.0])
    b = a.copy()
    assert compare_frames(a, b, ["run_id"]) == []
    b.loc[1, "tm_avg"] = 2.1
    assert any("tm_avg" in p for p in compare_frames(a, b, ["run_id"]))
    assert set(CELL_KEYS) <= set(a.columns)


def _reference(ref: RunRef) -> dict[str, float]:
    """A run's metrics straight from the metric core's functions, one series at a time (no engine code);
    the papers' scores from `papers.score_run` on the run's own frame (what the reductions must feed it)."""
    df = read_timeseries(ref)
    df = df[df["subtask"] == -1]
    end = float(df["ts"].max())
    start = float(df["ts"].min())

    def job(metric: str) -> tuple[np.ndarray, np.ndarray]:
        s = df[(df["metric"] == metric) & (df["operator"] == "")].sort_values("ts", kind="stable")
        return s["ts"].to_numpy(float), s["value"].to_numpy(float)

    tm, lat, inp = (job(m) for m in (Metric.TASKMANAGERS, Metric.LATENCY_KAFKA, Metric.INPUT_RATE))
    out = {"tm_avg": mx.time_weighted_mean(*tm, end), "latency_kafka_p50": mx.percentile(lat[1], 50),
           "latency_kafka_p95": mx.percentile(lat[1], 95)}
    meta = ref.meta
    ideal = mx.ideal_resources(inp[1], meta.coefficients, meta.min_parallelism)
    prov = mx.provisioning(inp[0], ideal, *tm, end)
    out.update(spec_accuracy_u=prov.accuracy_u, spec_accuracy_o=prov.accuracy_o, spec_timeshare_u=prov.timeshare_u,
               spec_timeshare_o=prov.timeshare_o, spec_ideal_avg=mx.time_weighted_mean(inp[0], ideal, end))
    par = df[(df["metric"] == Metric.PARALLELISM) & (df["operator"] != "")].sort_values("ts", kind="stable")
    final = {op: float(g["value"].iloc[-1]) for op, g in par.groupby("operator")}
    out.update(papers.score_run(df[["ts", "metric", "operator", "value"]], paper_spec(meta, start, end, final)))
    return out


def test_engine_reductions_match_the_metric_core(small_matrix: Path):
    """The vectorised reductions over many runs at once give what the metric core's functions give per run."""
    refs = [r for r in discover(small_matrix) if r.meta.matrix == "synthetic"]
    summary = pandas_engine.summarise(refs).summary.set_index("run_id")
    checked = 0
    for ref in refs:
        row = summary.loc[ref.meta.run_id]
        for col, want in _reference(ref).items():
            assert row[col] == pytest.approx(want, rel=1e-9, abs=1e-12, nan_ok=True), (ref.meta.run_id, col)
            checked += 1
    assert checked == len(refs) * (8 + len(papers.SCORE_COLUMNS)) and len(refs) == 12
    assert summary["saso_qos_violations"].sum() > 0 and summary["spec_timeshare_u"].max() > 0  # not all trivial


def test_batches_do_not_change_the_numbers(small_matrix: Path):
    """A run's numbers do not depend on which other runs share its batch (nor on the batch's size)."""
    refs = discover(small_matrix)
    one_by_one = pandas_engine.summarise(refs, batch_runs=1)
    all_at_once = pandas_engine.summarise(refs, batch_runs=len(refs))
    for a, b, keys in ((one_by_one.summary, all_at_once.summary, ["run_id"]),
                       (one_by_one.series_stats, all_at_once.series_stats, ["run_id", "metric", "operator"]),
                       (one_by_one.convergence, all_at_once.convergence, ["run_id", "stage"])):
        assert compare_frames(a, b, keys, rtol=1e-12) == []


def test_unsorted_samples_give_the_same_numbers(tmp_path: Path, hand_results: Path):
    """Records written in another order (not by `write_run_record`) are sorted before reducing."""
    path = hand_results / "m" / "hand-r0" / "timeseries.parquet"
    before = pandas_engine.summarise(discover(hand_results)).summary
    table = pq.read_table(path)
    pq.write_table(table.take(np.random.default_rng(3).permutation(table.num_rows)), path)
    after = pandas_engine.summarise(discover(hand_results)).summary
    assert compare_frames(before, after, ["run_id"]) == []


def test_two_configurations_of_one_cell_never_share_a_row():
    """Issue 10.1: analysis groups by cell *and* config hash, so an edited cell's old runs stay apart."""
    old = _summary([10.0, 12.0]).assign(config_hash="old")
    new = _summary([20.0]).assign(config_hash="new", run_id="ds2-new")
    agg = aggregate_cells(pd.concat([old, new], ignore_index=True)).set_index("config_hash")
    assert len(agg) == 2 and set(agg["cell_id"]) == {"ds2"}
    assert agg.loc["old", "tm_avg"] == 11 and agg.loc["old", "runs"] == 2
    assert agg.loc["new", "tm_avg"] == 20 and agg.loc["new", "runs"] == 1
