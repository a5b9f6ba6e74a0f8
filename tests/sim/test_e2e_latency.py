"""The simulator's end-to-end latency: time in Kafka + queueing in every buffer + downtime, at the sink.

Also what it says about lost load (its generator skips nothing; records Kafka retention deleted unread are
expired, counted as lost load up to the run summary), and that an interval without records to measure is a
gap, never the last value held.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.backends.sim.backend import SimBackend
from harness.backends.sim.config import SimConfig
from harness.backends.sim.model import J_E2E_COUNT, J_E2E_SUM, J_LATENCY
from harness.kafka_settings import KafkaSettings
from harness.record import EventLog, read_run_record, write_run_record
from harness.summary import summarise
from harness.topology import OperatorSpec, Topology, topology_from_ops
from harness.vocabulary import Metric
from tests.sim.conftest import constant, pipeline, start
from workloads.arrivals import ArrivalConfig


def job_series(ts: pd.DataFrame, metric: str) -> pd.Series:
    sel = ts[(ts.metric == metric) & (ts.operator == "")]
    return pd.Series(sel["value"].to_numpy(), index=sel["ts"].to_numpy())


def test_a_pipeline_that_keeps_up_has_end_to_end_latency_below_one_step() -> None:
    b = start(pipeline(), constant(4_000, 120), 1)  # source 10k/s, mid 5k/s: everything keeps up
    b.advance_to(120)
    ts = b.timeseries().to_pandas()
    assert job_series(ts, Metric.LATENCY_E2E_MAX).max() == 0.0  # flow-through within a step
    snap = b.snapshot(15)
    assert snap.latency_e2e_s == 0.0 and snap.latency_e2e_p95_s == 0.0


def test_queueing_in_a_slow_operator_adds_to_the_time_in_kafka() -> None:
    # input 8k/s, mid takes 5k/s: backpressure fills mid's input buffer (buffer_s = 2 s of its capacity)
    b = start(pipeline(), constant(8_000, 200), 1)
    b.advance_to(200)
    m = b.model
    assert m is not None
    rows = m.rows_array()
    per_step = rows[:, J_E2E_SUM] / np.maximum(rows[:, J_E2E_COUNT], 1e-12)
    # a record the source took at step k reaches the sink at k + 4 (two hops, three steps of mid's full buffer
    # ahead of it) and carries its time in Kafka plus the 2 s it queued in that buffer
    k = np.arange(100, 190)
    np.testing.assert_allclose(per_step[k + 4], rows[k, J_LATENCY] + 2.0, atol=1e-9)
    ts = b.timeseries().to_pandas()
    late = job_series(ts, Metric.LATENCY_E2E_MAX).index > 100
    assert (job_series(ts, Metric.LATENCY_E2E_P95)[late] <= job_series(ts, Metric.LATENCY_E2E_MAX)[late]).all()
    assert job_series(ts, Metric.LATENCY_E2E_MAX)[late].iloc[-1] > 50  # the backlog keeps growing


def test_records_that_waited_through_a_downtime_carry_the_wait() -> None:
    b = start(pipeline(), constant(4_000, 200), 1)  # in-place rescale downtime: 5 s
    b.advance_to(50)
    res = b.rescale({"mid": 2}, None)
    assert res.downtime_s == 5.0
    b.advance_to(100)
    ts = b.timeseries().to_pandas()
    e2e_max, e2e_mean = job_series(ts, Metric.LATENCY_E2E_MAX), job_series(ts, Metric.LATENCY_E2E_MEAN)
    # the interval of the outage has no record at the sink: a gap, not the 0 s held from before
    assert math.isnan(e2e_mean.loc[55.0]) and math.isnan(e2e_max.loc[55.0])
    assert math.isnan(job_series(ts, Metric.LATENCY_KAFKA).loc[55.0])
    # right after, the records that arrived when processing stopped show the whole downtime
    assert e2e_max.loc[60.0] == pytest.approx(res.downtime_s)
    assert e2e_mean.loc[60.0] > 1.0
    assert e2e_max.loc[80.0] == 0.0  # drained


def test_every_record_reaching_the_sink_is_counted_once() -> None:
    b = start(pipeline(), constant(3_000, 100), 1)
    b.advance_to(50)
    b.rescale({"mid": 3}, None)
    b.advance_to(100)
    m = b.model
    assert m is not None
    counted = m.e2e_array().sum()
    in_flight = sum(q.pending for q in m.inbox if q is not None)  # in the buffers of mid and sink
    assert counted + in_flight == pytest.approx(m.processed, rel=1e-9)  # selectivity 1 up to the sink
    assert counted == pytest.approx(m.rows_array()[:, J_E2E_COUNT].sum(), rel=1e-12)


def test_the_sim_offers_all_its_load_and_says_so() -> None:
    # far over capacity, but shorter than the retention time: Kafka queues, nothing is dropped
    b = start(pipeline(), constant(20_000, 60), 1)
    b.advance_to(60)
    ts = b.timeseries().to_pandas()
    for metric in (Metric.SKIPPED_TOTAL, Metric.EXPIRED_TOTAL):
        s = job_series(ts, metric)
        assert len(s) == 12 and (s == 0.0).all()  # measured zeros at every interval, not absent



def test_records_expired_by_retention_are_lost_load_in_the_summary(tmp_path: Path) -> None:
    # 8k/s into a job that takes 5k/s with 60 s retention: the backlog's oldest segments are deleted unread
    pattern = constant(8_000, 600)
    b = SimBackend()
    b.start_with(pipeline(), pattern, SimConfig(readings="exact", taskmanager_cpu=1.0), 1, seed=1,
                 arrivals=ArrivalConfig(kind="deterministic"),
                 kafka=KafkaSettings(retention_s=60, retention_check_s=5, segment_s=10))
    b.advance_to(600)
    m = b.model
    assert m is not None and m.expired > 0
    assert m.produced == pytest.approx(m.processed + m.lag + m.expired, rel=1e-9)
    ts = b.timeseries().to_pandas()
    assert job_series(ts, Metric.EXPIRED_TOTAL).iloc[-1] == pytest.approx(m.expired)
    # an expired record never reaches the sink: every sink record is one the job read (selectivity 1)
    in_flight = sum(q.pending for q in m.inbox if q is not None)
    assert m.e2e_array().sum() + in_flight == pytest.approx(m.processed, rel=1e-9)
    records = pattern.records_between(0.0, 600.0)
    run_dir = write_run_record(tmp_path / "run", {"duration_s": 600.0, "pattern": {"records": records}},
                               ts, EventLog(), "completed")
    s = summarise(read_run_record(run_dir))
    assert s.load_skipped == 0.0 and s.load_expired == pytest.approx(m.expired)
    assert s.load_shortfall == pytest.approx(m.expired / records) and s.shortfall_flagged


def windowed(fires_on_watermark: bool) -> Topology:
    """source -> keyed window (1 subtask, slower than the input) -> sink over 8 partitions."""
    ops = [OperatorSpec(name="src", topic="bids", capacity=20_000),
           OperatorSpec(name="win", upstream=("src",), capacity=9_000, state_ttl_s=10.0,
                        fires_on_watermark=fires_on_watermark),
           OperatorSpec(name="sink", upstream=("win",), capacity=100_000, selectivity=0.0)]
    return topology_from_ops("test", ops, partitions=8)


def test_an_event_time_windows_results_wait_for_the_slowest_partition_group() -> None:
    """Held back by its window, each of 3 source subtasks takes as much as the others whatever its partitions
    (3, 3 and 2 of 8), so the two with three each fall behind the third; the window's watermark is the slowest
    partition's event time, and a window's result carries about that (measured, q11 at 0.1 CPU: source lags 82,
    85 and 41 s, the window's watermark 98-100 s behind). A window that emitted its inputs' own event time would
    show the mean time in Kafka instead, which is what the sink sees without `fires_on_watermark`."""
    runs = {}
    for fires in (True, False):
        b = start(windowed(fires), constant(12_000, 300), {"src": 3, "win": 1, "sink": 1})
        b.advance_to(300)
        runs[fires] = b.timeseries().to_pandas()
    def late(series: pd.Series) -> pd.Series:  # a backlog of 3k records/s for 200 s by then
        return series[series.index >= 200]

    kafka = late(job_series(runs[True], Metric.LATENCY_KAFKA))
    held = late(job_series(runs[True], Metric.LATENCY_E2E_MEAN))
    own = late(job_series(runs[False], Metric.LATENCY_E2E_MEAN))
    assert (late(job_series(runs[False], Metric.LATENCY_KAFKA)) == kafka).all()  # the sources' side is the same
    # without a watermark the results carry their records' own time in Kafka (within a step or two of queueing)
    assert (own - kafka).abs().max() < 5.0
    # with it, the slowest group's. Each subtask takes 9k / 3 = 3k records/s: over 3 partitions 1k/s each of the
    # 1.5k/s arriving (its records age by 1/3 s per s), over 2 partitions all 1.5k/s (no lag). The sources' gauge
    # is their subtasks' mean, 2/3 of the slow groups' age; the watermark is that age itself: 1.5 times the gauge
    assert ((held - kafka) > 5.0).all()
    assert (held / kafka).median() == pytest.approx(1.5, abs=0.06)


def test_a_source_group_without_partitions_does_not_hold_the_watermark() -> None:
    """Scaled out past its partitions, a source has subtasks that read nothing: Flink's readers there go idle and
    stop counting for the watermark. Left in, the group a rescale made would pin it at the step of the rescale and
    every later result would age by a second per second."""
    topo = windowed(True)
    b = start(topo, constant(6_000, 200), {"src": 3, "win": 1, "sink": 1})  # keeps up: no backlog
    b.advance_to(60)
    b.rescale({"src": 10}, None)  # 8 partitions: 8 subtasks with one, 2 with none
    b.advance_to(200)
    m = b.model
    assert m is not None and 0.0 in m.lane_w[0]
    e2e = job_series(b.timeseries().to_pandas(), Metric.LATENCY_E2E_MAX)
    assert e2e[e2e.index >= 120].max() < 3.0
