"""The table `bench run` prints: both latencies labelled, ms below 1 s, lost load flagged, skipped decisions."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.tables import fmt_latency, fmt_share
from harness.record import EventLog, read_run_record, write_run_record
from harness.summary import summarise
from harness.vocabulary import EventKind, Metric

NAN = math.nan


def record(tmp_path: Path, skipped: float, records: float | None = 10_000.0) -> Path:
    ts = [0.0, 10.0, 20.0, 30.0]
    rows = []
    for metric, values in {
        Metric.TASKMANAGERS: [3, 3, 3, 3],
        Metric.LATENCY_KAFKA: [0.004, 0.006, NAN, 0.008],
        Metric.LATENCY_E2E_MEAN: [0.02, 0.03, NAN, 35.0],
        Metric.LATENCY_E2E_P50: [0.015, 0.025, NAN, 34.0],
        Metric.LATENCY_E2E_P95: [0.05, 0.06, NAN, 40.0],
        Metric.LATENCY_E2E_MAX: [0.08, 0.09, NAN, 41.5],
        Metric.INPUT_RATE: [100, 100, 100, 100],
        Metric.THROUGHPUT: [100, 100, NAN, 100],
        Metric.SKIPPED_TOTAL: [0, 0, skipped, skipped],
        Metric.EXPIRED_TOTAL: [0, 0, 0, 0],
    }.items():
        rows += [{"ts": t, "metric": metric, "value": float(v)} for t, v in zip(ts, values, strict=True)]
    events = EventLog()
    for t in (20.0, 25.0):
        events.add(t, EventKind.DECISION_SKIPPED, "no decision: job metrics not measured: input_rate")
    run_yaml = {"duration_s": 40.0, "pattern": {"records": records} if records is not None else {}}
    return write_run_record(tmp_path / "run", run_yaml, pd.DataFrame(rows), events, "completed")


def test_latencies_below_a_second_are_shown_in_ms() -> None:
    assert fmt_latency(0.0) == "0 ms" and fmt_latency(0.00412) == "4.12 ms" and fmt_latency(0.999) == "999 ms"
    assert fmt_latency(1.0) == "1 s" and fmt_latency(35.25) == "35.2 s" and fmt_latency(NAN) == "-"
    assert fmt_share(0.0123) == "1.23 %"


def test_both_latencies_lost_load_and_skipped_decisions(tmp_path: Path) -> None:
    s = summarise(read_run_record(record(tmp_path, skipped=150.0)))
    rows = dict(s.rows())
    # time in Kafka: (0.004 x 10 + 0.006 x 10 + 0.008 x 10) / 30, the gap from 20 to 30 s left out
    assert s.latency_kafka.avg == pytest.approx(0.006)
    assert rows["latency_kafka avg/p50/p95/max"] == "6 ms / 6 ms / 7.8 ms / 8 ms"
    # end to end: the 35 s after the outage counts; the max is the oldest record
    assert s.latency_e2e.avg == pytest.approx((0.02 * 10 + 0.03 * 10 + 35.0 * 10) / 30)
    assert s.latency_e2e.max == 41.5
    assert rows["latency_e2e avg/p50/p95/max"].endswith("/ 41.5 s")
    assert s.load_shortfall == pytest.approx(0.015) and s.shortfall_flagged
    assert rows["load shortfall"] == "1.5 % (150 skipped + 0 expired of 10,000) FLAGGED: > 1% never offered"
    assert rows["decisions skipped"] == "2"


def test_shortfall_within_one_percent_is_not_flagged_and_unknown_is_not_zero(tmp_path: Path) -> None:
    ok = summarise(read_run_record(record(tmp_path / "a", skipped=50.0)))
    assert ok.load_shortfall == pytest.approx(0.005) and not ok.shortfall_flagged
    assert "FLAGGED" not in dict(ok.rows())["load shortfall"]
    unknown = summarise(read_run_record(record(tmp_path / "b", skipped=50.0, records=None)))
    assert math.isnan(unknown.load_shortfall) and dict(unknown.rows())["load shortfall"] == "not measured"


def cpu_record(tmp_path: Path, autoscaler: dict, jvm: list[float] | None) -> Path:
    ts = [0.0, 10.0, 20.0]
    series = {Metric.TASKMANAGERS: [2, 2, 2], Metric.CPU: [0.5, 0.7, 0.6]}
    if jvm is not None:
        series[Metric.CPU_JVM] = jvm
    rows = [{"ts": t, "metric": m, "value": float(v)} for m, vs in series.items() for t, v in zip(ts, vs, strict=True)]
    meta = {"duration_s": 30.0, "config": {"autoscaler": autoscaler}}
    return write_run_record(tmp_path / "run", meta, pd.DataFrame(rows), EventLog(), "completed")


@pytest.mark.parametrize(("autoscaler", "signal"), [
    ({"name": "hpa-cpu", "params": {}}, "jvm"),  # the default: the thesis' Status.JVM.CPU.Load
    ({"name": "hpa-cpu", "params": {"cpu_signal": "quota"}}, "quota"),
    ({"name": "ds2", "params": {}}, None),  # reads no CPU signal: nothing to say
])
def test_summary_keeps_both_cpu_signals_and_names_the_one_the_autoscaler_used(tmp_path: Path, autoscaler: dict,
                                                                               signal: str | None) -> None:
    s = summarise(read_run_record(cpu_record(tmp_path, autoscaler, jvm=[0.2, 0.3, NAN])))
    rows = dict(s.rows())
    assert s.cpu == pytest.approx(0.6) and rows["avg task manager CPU load"] == "0.60"
    assert s.cpu_jvm == pytest.approx(0.25) and rows["avg task manager JVM CPU load"] == "0.25"  # the gap left out
    assert s.cpu_signal == signal
    if signal is None:
        assert "autoscaler's CPU signal" not in rows
    else:
        assert rows["autoscaler's CPU signal"].startswith(f"{signal}: ")
        assert ("Status.JVM.CPU.Load" in rows["autoscaler's CPU signal"]) == (signal == "jvm")


def test_an_unmeasured_jvm_cpu_load_reads_not_measured(tmp_path: Path) -> None:
    s = summarise(read_run_record(cpu_record(tmp_path, {"name": "hpa-cpu"}, jvm=None)))
    assert math.isnan(s.cpu_jvm) and dict(s.rows())["avg task manager JVM CPU load"] == "not measured"
