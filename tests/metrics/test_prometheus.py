"""Joining Prometheus series to operators and widening the window, on hand-made responses.

The label sets are those Flink 2.2's Prometheus reporter exposes (recorded from a real cluster):
`task_id` is the job-vertex id the REST API returns, `tm_id` the task manager's resource id with
'-' and '.' replaced by '_'.
"""

from __future__ import annotations

import math
import re

import pytest

from harness.metrics.prometheus import (
    JobView,
    build_snapshot,
    fetch,
    prom_label,
)
from harness.metrics.snapshot import needs
from harness.topology import load_topology
from harness.vocabulary import Metric

SRC, MAP, SINK = (
    "590c5e1a5fc04d230c6fec7456f75288", "23ab3a59b17e9c45f95cff4c728611fc", "2e588ce1c86a9d46e2e85186773ce4fd"
)
JOB = "838cfce8e5872f40ee387f012d5b6272"


def view(par: dict[str, int] | None = None, **kw) -> JobView:
    par = par or {"bids_source": 1, "map": 2, "sink": 1}
    return JobView(
        job_id=JOB,
        topology=load_topology("q1"),
        vertex_ids={"bids_source": SRC, "map": MAP, "sink": SINK},
        parallelism=par,
        taskmanagers=sum(par.values()),
        tm_quota={"tm-1": 0.5, "tm-2": 0.5, "tm-3": 0.5, "tm-4": 0.5},
        host_cpus=2,
        **kw,
    )


def sub(task: str, i: int, v: float, **labels: str) -> dict:
    return {"metric": {"task_id": task, "subtask_index": str(i), **labels}, "value": [1795643115.0, str(v)]}


class FakeProm:
    """Answers by (substring of the query, window seconds); records every query it sees."""

    def __init__(self, answers: dict[tuple[str, int | None], list[dict]], fail: set[str] = frozenset()):
        self.answers = answers
        self.fail = fail
        self.seen: list[str] = []

    def __call__(self, promql: str) -> list[dict]:
        self.seen.append(promql)
        windows = re.findall(r"\[(\d+)s", promql)
        w = int(windows[0]) if windows else None
        # shortest key first: 'deriv' / 'last_over_time' wrap the metric names they also contain
        for (metric, win), result in sorted(self.answers.items(), key=lambda kv: len(kv[0][0])):
            if metric in promql and (win is None or win == w):
                if metric in self.fail:
                    raise ConnectionError("prometheus unreachable")
                return result
        return []


def full_answers() -> dict[tuple[str, int | None], list[dict]]:
    tm = {SRC: ["tm_1"], MAP: ["tm_2", "tm_3"], SINK: ["tm_4"]}
    return {
        ("flink_taskmanager_job_task_numRecordsOut{", None): [
            sub(SRC, 0, 1000.0), sub(MAP, 0, 480.0), sub(MAP, 1, 520.0), sub(SINK, 0, 0.0)],
        ("flink_taskmanager_job_task_numRecordsIn{", None): [
            sub(SRC, 0, 0.0), sub(MAP, 0, 480.0), sub(MAP, 1, 520.0), sub(SINK, 0, 1000.0)],
        ("flink_taskmanager_job_task_busyTimeMsPerSecond", None): [
            sub(SRC, 0, 300.0), sub(MAP, 0, 600.0), sub(MAP, 1, 800.0), sub(SINK, 0, 100.0)],
        ("flink_taskmanager_job_task_idleTimeMsPerSecond", None): [
            sub(SRC, 0, 200.0), sub(MAP, 0, 400.0), sub(MAP, 1, 200.0), sub(SINK, 0, 900.0)],
        ("flink_taskmanager_job_task_backPressuredTimeMsPerSecond", None): [
            sub(SRC, 0, 500.0), sub(MAP, 0, 0.0), sub(MAP, 1, 0.0), sub(SINK, 0, 0.0)],
        ("flink_taskmanager_job_task_isBackPressured", None): [
            sub(SRC, 0, 0.8), sub(MAP, 0, 0.0), sub(MAP, 1, 0.0), sub(SINK, 0, 0.0)],
        ("flink_taskmanager_job_task_Shuffle_Netty_Input_Buffers_inPoolUsage", None): [
            sub(MAP, 0, 0.2), sub(MAP, 1, 0.6), sub(SINK, 0, 0.1), sub(SRC, 0, 0.0)],
        # subtask -> task manager (the last_over_time(...busy...) query carries tm_id)
        ("last_over_time", None): [
            sub(task, i, 1.0, tm_id=t) for task, tms in tm.items() for i, t in enumerate(tms)],
        ("flink_taskmanager_Status_JVM_CPU_Time", None): [
            {"metric": {"tm_id": t}, "value": [0, str(c)]}
            for t, c in [("tm_1", 0.25), ("tm_2", 0.4), ("tm_3", 0.5), ("tm_4", 0.05)]],
        ("flink_taskmanager_Status_JVM_CPU_Load", None): [
            {"metric": {"tm_id": t}, "value": [0, str(c)]}
            for t, c in [("tm_1", 0.125), ("tm_2", 0.2), ("tm_3", 0.25), ("tm_4", 0.025)]],
        ("pendingRecords", None): [{"metric": {"task_id": SRC}, "value": [0, "12000"]}],
        ("deriv", None): [{"metric": {"task_id": SRC}, "value": [0, "-150.5"]}],
        ("flink_taskmanager_job_task_operator_deserializer_recordLag", None): [sub(SRC, 0, 1500.0)],
        ("generator_records_produced_total", None): [{"metric": {"topic": "bids"}, "value": [0, "1100"]}],
        ("flink_jobmanager_numRegisteredTaskManagers", None): [{"metric": {}, "value": [0, "4"]}],
        # the sinks' end-to-end latency: mean = rate(sumMs) / rate(count), p95 from the buckets
        ("latencyE2e_sumMs", None): [{"metric": {}, "value": [0, "0.042"]}],
        ("histogram_quantile(0.95", None): [{"metric": {}, "value": [0, "0.125"]}],
    }


def test_prom_label_matches_flink_reporter() -> None:
    assert prom_label("Source: bids_source") == "Source:_bids_source"
    assert prom_label("127.0.0.1:45011-f7ed64") == "127_0_0_1:45011_f7ed64"
    assert prom_label("tm-3") == "tm_3"


def test_join_aggregates_per_operator_and_job() -> None:
    v = view()
    fetched = fetch(FakeProm(full_answers()), v, 15.0)
    assert fetched.missing == []
    snap = build_snapshot(fetched, v, t=42.0, window_s=15.0)

    assert snap.parallelism == {"bids_source": 1, "map": 2, "sink": 1}
    m = snap.op("map")
    assert m.records_in_per_s == pytest.approx(1000.0)  # summed over subtasks
    assert m.busy_ms_per_s == pytest.approx(700.0)  # averaged
    assert m.max_busy_ms_per_s == pytest.approx(800.0)
    assert m.input_buffer_usage == pytest.approx(0.4)
    # CPU: cores used / quota of the TM hosting each subtask (0.4/0.5, 0.5/0.5)
    assert [s.cpu_load for s in m.subtasks] == pytest.approx([0.8, 1.0])
    assert m.cpu_load == pytest.approx(0.9)

    src = snap.op("bids_source")
    assert src.records_in_per_s == pytest.approx(1000.0)  # source input = what it emits
    assert src.is_backpressured and not m.is_backpressured
    assert src.lag == pytest.approx(12000.0) and src.lag_rate == pytest.approx(-150.5)
    assert src.input_rate == pytest.approx(1100.0)

    assert snap.throughput == pytest.approx(1000.0)
    assert snap.input_rate == pytest.approx(1100.0)
    assert snap.kafka_lag == pytest.approx(12000.0)
    assert snap.kafka_lag_rate == pytest.approx(-150.5)
    assert snap.latency_s == pytest.approx(1.5)
    assert snap.latency_e2e_s == pytest.approx(0.042) and snap.latency_e2e_p95_s == pytest.approx(0.125)
    assert snap.taskmanagers == 4
    assert snap.cpu_load == pytest.approx((0.5 + 0.8 + 1.0 + 0.1) / 4)
    assert snap.t == 42.0 and snap.why_missing == {}


def test_partial_result_widens_the_window() -> None:
    answers = full_answers()
    busy = answers.pop(("flink_taskmanager_job_task_busyTimeMsPerSecond", None))
    answers[("flink_taskmanager_job_task_busyTimeMsPerSecond", 15)] = busy[:2]  # map subtask 1 not yet scraped
    answers[("flink_taskmanager_job_task_busyTimeMsPerSecond", 30)] = busy
    prom = FakeProm(answers)
    fetched = fetch(prom, view(), 15.0)
    assert fetched.window_s["busy"] == 30.0
    assert "busy" not in fetched.missing
    assert fetched.window_s["records_in"] == 15.0
    assert build_snapshot(fetched, view(), 0.0, 15.0).op("map").subtasks[1].busy_ms_per_s == 800.0


def test_empty_after_widening_is_reported_not_raised() -> None:
    answers = full_answers()
    del answers[("pendingRecords", None)]
    prom = FakeProm(answers)
    fetched = fetch(prom, view(), 10.0)
    assert "pending_records" in fetched.missing
    tried = [q for q in prom.seen if "pendingRecords" in q and "deriv" not in q]
    assert [re.findall(r"\[(\d+)s", q)[0] for q in tried] == ["10", "20", "40"]
    snap = build_snapshot(fetched, view(), 0.0, 10.0)
    # unknown, not zero: the lag is NaN wherever it travels, and the snapshot says why
    assert math.isnan(snap.kafka_lag) and math.isnan(snap.op("bids_source").lag)
    assert "pending_records: no series even over 40 s" in snap.why_missing["lag"]
    assert snap.gaps(needs(job=(Metric.LAG,), sources=(Metric.LAG,))) == {"": (Metric.LAG,),
                                                                         "bids_source": (Metric.LAG,)}


def test_failing_query_counts_as_empty() -> None:
    prom = FakeProm(full_answers(), fail={"flink_taskmanager_job_task_idleTimeMsPerSecond"})
    fetched = fetch(prom, view(), 15.0)
    assert "idle" in fetched.missing
    assert "ConnectionError" in fetched.errors["idle"]
    snap = build_snapshot(fetched, view(), 0.0, 15.0)
    # idle falls back to what busy and backpressure leave
    assert snap.op("bids_source").subtasks[0].idle_ms_per_s == pytest.approx(200.0)


def test_records_rate_falls_back_to_flink_meters() -> None:
    answers = full_answers()
    answers[("numRecordsOutPerSecond", None)] = answers.pop(("flink_taskmanager_job_task_numRecordsOut{", None))
    prom = FakeProm(answers)
    fetched = fetch(prom, view(), 15.0)
    assert "records_out" not in fetched.missing
    assert any("rate(flink_taskmanager_job_task_numRecordsOut{" in q for q in prom.seen)
    assert build_snapshot(fetched, view(), 0.0, 15.0).throughput == pytest.approx(1000.0)


def test_alternative_expression_used_when_first_is_empty() -> None:
    answers = full_answers()
    lag = answers.pop(("flink_taskmanager_job_task_operator_deserializer_recordLag", None))
    answers[("currentEmitEventTimeLag", None)] = lag
    fetched = fetch(FakeProm(answers), view(), 15.0)
    assert "event_time_lag" not in fetched.missing
    assert build_snapshot(fetched, view(), 0.0, 15.0).latency_s == pytest.approx(1.5)


def test_cpu_load_fallback_scaled_by_quota() -> None:
    answers = full_answers()
    del answers[("flink_taskmanager_Status_JVM_CPU_Time", None)]
    answers[("flink_taskmanager_Status_JVM_CPU_Load", None)] = [
        {"metric": {"tm_id": t}, "value": [0, "0.125"]} for t in ("tm_1", "tm_2", "tm_3", "tm_4")]
    fetched = fetch(FakeProm(answers), view(), 15.0)
    assert fetched.missing == ["tm_cpu_cores"]
    snap = build_snapshot(fetched, view(), 0.0, 15.0)
    # 0.125 of a 2-core host = 0.25 cores = half of a 0.5-CPU quota; the JVM's own reading is kept as is
    assert snap.cpu_load == pytest.approx(0.5)
    assert snap.cpu_jvm_load == pytest.approx(0.125)


def test_both_cpu_signals_are_kept_and_a_missing_one_is_nan() -> None:
    v = view()
    fetched = fetch(FakeProm(full_answers()), v, 15.0)
    snap = build_snapshot(fetched, v, 0.0, 15.0)
    assert [s.cpu_jvm_load for s in snap.op("map").subtasks] == pytest.approx([0.2, 0.25])
    answers = full_answers()
    del answers[("flink_taskmanager_Status_JVM_CPU_Load", None)]
    snap = build_snapshot(fetch(FakeProm(answers), v, 15.0), v, 0.0, 15.0)
    assert math.isnan(snap.op("map").cpu_jvm_load) and math.isnan(snap.cpu_jvm_load)
    assert snap.op("map").cpu_load == pytest.approx(0.9)


def test_series_of_removed_subtasks_are_ignored_after_scale_down() -> None:
    answers = full_answers()
    v = view({"bids_source": 1, "map": 1, "sink": 1})
    snap = build_snapshot(fetch(FakeProm(answers), v, 15.0), v, 0.0, 15.0)
    assert snap.op("map").parallelism == 1
    assert snap.op("map").records_in_per_s == pytest.approx(480.0)
    assert len(snap.op("map").subtasks) == 1


def test_no_record_at_the_sinks_leaves_end_to_end_latency_unknown() -> None:
    """rate(sum) / rate(count) is NaN while no record arrives (a stopped job): unknown, never 0."""
    answers = full_answers()
    answers[("latencyE2e_sumMs", None)] = [{"metric": {}, "value": [0, "NaN"]}]
    v = view()
    fetched = fetch(FakeProm(answers), v, 15.0)
    snap = build_snapshot(fetched, v, t=42.0, window_s=15.0)
    assert math.isnan(snap.latency_e2e_s) and snap.latency_e2e_p95_s == pytest.approx(0.125)
    assert "latency_e2e" in fetched.missing and Metric.LATENCY_E2E_MEAN in snap.why_missing
    assert snap.gaps(needs(job=(Metric.LATENCY_E2E_MEAN,))) == {"": (Metric.LATENCY_E2E_MEAN,)}


def test_unreachable_prometheus_is_asked_once_per_snapshot_and_everything_is_unknown(monkeypatch) -> None:
    """A stopped Prometheus must not hold the loop: one refused query, then the rest are not sent."""
    import requests

    from harness.metrics.prometheus import PrometheusMonitor

    monitor = PrometheusMonitor("http://127.0.0.1:9")
    sent: list[str] = []

    def refuse(promql: str) -> list[dict]:
        sent.append(promql)
        raise requests.ConnectionError("connection refused")

    monkeypatch.setattr(monitor, "query", refuse)
    snap = monitor.snapshot(view(), t=10.0, window_s=15.0)
    assert len(sent) == 1
    assert math.isnan(snap.input_rate) and math.isnan(snap.throughput) and math.isnan(snap.op("map").busy_ms_per_s)
    assert "Prometheus at http://127.0.0.1:9 unreachable" in snap.reason([Metric.INPUT_RATE])
    assert snap.gaps(needs(job=(Metric.INPUT_RATE,), operators=(Metric.BUSY,))).keys() == {"", "bids_source", "map",
                                                                                            "sink"}


def test_backpressure_flag_is_any_scrape_of_the_window_as_in_the_thesis_code() -> None:
    """Issue 8.9: the thesis' code took `max_over_time(isBackPressured[window])` (flagged at any point of
    the window), not "flagged for at least half the window"."""
    from harness.metrics.promql import CATALOGUE

    (query,) = [q for q in CATALOGUE if q.name == "is_backpressured"]
    promql = query.render(0, JOB, 30.0)
    assert re.search(r"max_over_time\(flink_taskmanager_job_task_isBackPressured\{[^}]*\}\[30s\]\)", promql), promql
    assert "avg_over_time" not in promql and ">= 0.5" not in promql
    # one subtask flagged at one scrape (max over the window 1) flags its operator
    answers = full_answers()
    answers[("flink_taskmanager_job_task_isBackPressured", None)] = [
        sub(SRC, 0, 0.0), sub(MAP, 0, 0.0), sub(MAP, 1, 1.0), sub(SINK, 0, 0.0)]
    v = view()
    snap = build_snapshot(fetch(FakeProm(answers), v, 30.0), v, t=42.0, window_s=30.0)
    assert snap.op("map").is_backpressured and not snap.op("bids_source").is_backpressured
