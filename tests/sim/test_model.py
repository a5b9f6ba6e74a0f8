"""Simulator invariants: conservation, backpressure, draining, downtime, determinism, vertical scaling."""

from __future__ import annotations

import numpy as np
import pytest

from harness.backends.sim.model import NEXMARK_SHARES
from harness.topology import load_topology
from harness.vocabulary import Metric
from tests.sim.conftest import constant, pipeline, start
from workloads.patterns import PatternConfig, build_pattern


def test_records_are_conserved_through_rescales_and_downtime() -> None:
    topo = load_topology("q11")
    pattern = build_pattern(PatternConfig(name="cosine", params={"duration_min": 30}), seed=3, query="q11")
    b = start(topo, pattern, 4, kind="poisson", method="savepoint")
    plan = {300: 12, 600: 30, 900: 3, 1200: 20}
    for t in range(15, int(pattern.duration_s) + 1, 15):
        b.advance_to(t)
        m = b.model
        assert m is not None
        assert m.produced == pytest.approx(m.processed + m.lag, rel=1e-9)
        snap = b.snapshot(15)
        assert snap.kafka_lag == pytest.approx(m.lag, rel=1e-9, abs=1e-6)
        if t in plan:
            b.rescale({"session_window": plan[t], "bids_source": plan[t]}, None)
    ts = b.timeseries().to_pandas()

    def series(metric: str) -> np.ndarray:
        return ts[(ts.metric == metric) & (ts.operator == "")].sort_values("ts")["value"].to_numpy()

    produced, processed, lag = series(Metric.PRODUCED_TOTAL), series(Metric.PROCESSED_TOTAL), series(Metric.LAG)
    assert produced[-1] > 0
    np.testing.assert_allclose(produced, processed + lag, rtol=1e-9, atol=1e-3)


def test_underprovisioned_operator_backpressures_upstream_and_lag_and_latency_grow() -> None:
    # source can do 10k/s, mid only 5k/s, input 8k/s
    b = start(pipeline(), constant(8_000, 600), 1)
    b.advance_to(60)
    early = b.snapshot(15)
    b.advance_to(240)
    late = b.snapshot(15)
    mid, src = late.op("mid"), late.op("src")
    assert mid.busy_ms_per_s == pytest.approx(1000.0, rel=0.01)
    assert mid.input_buffer_usage > 0.9
    assert not mid.is_backpressured  # its own downstream keeps up
    assert src.is_backpressured and src.backpressured_ms_per_s > 100
    assert late.throughput == pytest.approx(5_000, rel=0.01)
    assert late.kafka_lag_rate == pytest.approx(3_000, rel=0.05)
    assert src.lag_rate == pytest.approx(3_000, rel=0.05)
    assert late.kafka_lag > early.kafka_lag > 0
    assert late.latency_s > early.latency_s > 0


def test_adding_capacity_drains_the_lag() -> None:
    b = start(pipeline(), constant(8_000, 900), 1)
    b.advance_to(120)
    assert b.snapshot(15).kafka_lag > 100_000
    res = b.rescale({"mid": 2}, None)
    assert res.ok and res.parallelism["mid"] == 2 and res.downtime_s == pytest.approx(5.0)
    b.advance_to(400)
    snap = b.snapshot(15)
    assert snap.kafka_lag == pytest.approx(0.0, abs=1e-6)
    assert snap.latency_s == pytest.approx(0.0, abs=1e-9)
    assert snap.throughput == pytest.approx(8_000, rel=1e-6)
    assert not snap.op("src").is_backpressured


def test_downtime_stops_processing_and_lag_piles_up() -> None:
    b = start(pipeline(), constant(4_000, 300), 1)
    b.advance_to(50)
    m = b.model
    assert m is not None
    before, lag_before = m.processed, m.lag
    res = b.rescale({"mid": 2}, None)
    b.advance_to(50 + res.downtime_s)
    assert m.processed == before  # flat during downtime
    assert m.lag == pytest.approx(lag_before + 4_000 * res.downtime_s)
    b.advance_to(50 + res.downtime_s + 1)
    assert m.processed > before
    ts = b.timeseries().to_pandas()
    proc = ts[ts.metric == Metric.PROCESSING].set_index("ts")["value"]
    assert proc.loc[55.0] == 0.0 and proc.loc[50.0] == 1.0


def test_savepoint_downtime_grows_with_state() -> None:
    topo = pipeline(state_bytes=1_000.0, ttl=None)  # 1 kB per record, never expires
    small = start(topo, constant(4_000, 400), 1, method="savepoint")
    small.advance_to(10)
    big = start(topo, constant(4_000, 400), 1, method="savepoint")
    big.advance_to(300)
    inplace = start(topo, constant(4_000, 400), 1, method="in_place")
    inplace.advance_to(300)
    d_small = small.rescale({"mid": 2}, None).downtime_s
    d_big = big.rescale({"mid": 2}, None).downtime_s
    d_inplace = inplace.rescale({"mid": 2}, None).downtime_s
    assert d_small == pytest.approx(10.0 + 4_000 * 10 * 1_000 / 1e9 * 20.0, rel=0.01)
    assert d_big > d_small > d_inplace == pytest.approx(5.0)


def test_state_is_bounded_by_its_ttl() -> None:
    b = start(pipeline(state_bytes=100.0, ttl=10.0), constant(4_000, 200), 1)
    b.advance_to(100)
    assert b.model is not None
    assert b.model.state_bytes == pytest.approx(4_000 * 10 * 100.0, rel=0.01)


def test_same_seed_same_run_other_seed_other_run() -> None:
    topo = load_topology("q11")
    pattern = build_pattern(PatternConfig(name="cosine", params={"duration_min": 10}), seed=1, query="q11")

    def run(seed: int) -> tuple[object, np.ndarray]:
        b = start(topo, pattern, 10, kind="map", seed=seed)
        for t in range(15, 601, 15):
            b.advance_to(t)
            snap = b.snapshot(15)
            if t == 300:
                b.rescale({"session_window": 40}, {"sink": 0.5})
        return b.timeseries().to_pandas(), snap.interarrival_s  # type: ignore[return-value]

    (a, ia), (b2, ib), (c, _) = run(7), run(7), run(8)
    assert a.equals(b2)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(ia, ib)
    assert not a.equals(c)  # type: ignore[attr-defined]


def test_half_cpu_share_halves_capacity_and_doubles_busy_time() -> None:
    topo = pipeline()
    full = start(topo, constant(20_000, 300), 1)
    half = start(topo, constant(20_000, 300), 1)
    half.rescale({}, {"mid": 0.5})
    for b in (full, half):
        b.advance_to(200)
    assert half.snapshot(30).throughput == pytest.approx(full.snapshot(30).throughput / 2, rel=0.01)
    # unsaturated: same records, twice the busy time
    light_full = start(topo, constant(1_000, 300), 1)
    light_half = start(topo, constant(1_000, 300), 1)
    res = light_half.rescale({}, {"mid": 0.5})
    assert res.downtime_s == 0.0 and res.method == "sim:vertical"
    for b in (light_full, light_half):
        b.advance_to(100)
    busy_full = light_full.snapshot(30).op("mid").busy_ms_per_s
    busy_half = light_half.snapshot(30).op("mid").busy_ms_per_s
    assert busy_half == pytest.approx(2 * busy_full, rel=0.01)
    assert light_half.snapshot(30).op("mid").cpu_share == 0.5


def test_jvm_cpu_load_saturates_below_one() -> None:
    b = start(pipeline(), constant(50_000, 200), 1)
    b.advance_to(100)
    snap = b.snapshot(30)
    assert snap.op("mid").busy_ms_per_s == pytest.approx(1000.0)
    # the JVM's reading tops out near 0.9 (thesis ch. 6.7.1); the share of the quota reaches 1
    assert 0.85 <= snap.op("mid").cpu_jvm_load <= 0.9
    assert all(0.0 <= m.cpu_jvm_load <= 0.9 for m in snap.operators.values())
    assert snap.op("mid").cpu_load == pytest.approx(1.0)


def test_uneven_partitions_lag_only_on_the_busiest_subtasks() -> None:
    # 24 partitions on 5 subtasks: four read 5 partitions, one reads 4. At 5,000 rec/s a
    # partition brings 208.3/s: the four need 1,041.7/s of 1,000 and lag, the fifth keeps up.
    b = start(pipeline(source_cap=1_000, mid_cap=1e6), constant(5_000, 300), {"src": 5, "mid": 1, "sink": 1})
    b.advance_to(200)
    snap = b.snapshot(30)
    per_partition = 5_000 / 24
    assert snap.throughput == pytest.approx(4 * 1_000 + 4 * per_partition, rel=1e-3)
    assert snap.kafka_lag_rate == pytest.approx(4 * (5 * per_partition - 1_000), rel=0.02)
    src = snap.op("src")
    assert len(src.subtasks) == 5
    busy = sorted(s.busy_ms_per_s for s in src.subtasks)
    assert busy[0] == pytest.approx(4 * per_partition, rel=1e-3)
    assert busy[1:] == pytest.approx([1000.0] * 4)
    lags = sorted(s.lag or 0.0 for s in src.subtasks)
    assert lags[0] == pytest.approx(0.0, abs=1e-6) and lags[1] > 0
    assert sum(lags) == pytest.approx(snap.kafka_lag)
    # when every partition is backlogged, all five subtasks work flat out
    full = start(pipeline(source_cap=1_000, mid_cap=1e6), constant(10_000, 300), {"src": 5, "mid": 1, "sink": 1})
    full.advance_to(200)
    assert full.snapshot(30).throughput == pytest.approx(5_000, rel=1e-3)


def test_join_query_reads_its_topics_at_nexmark_shares() -> None:
    # like the local generator: the pattern's rate is what goes into the query's topics, split 1:3
    topo = load_topology("q3")
    b = start(topo, constant(50_000, 300), 8)
    b.advance_to(120)
    snap = b.snapshot(30)
    persons, auctions = NEXMARK_SHARES["persons"], NEXMARK_SHARES["auctions"]
    assert snap.op("person_source").input_rate == pytest.approx(50_000 * persons / (persons + auctions))
    assert snap.op("auction_source").input_rate == pytest.approx(50_000 * auctions / (persons + auctions))
    assert snap.input_rate == pytest.approx(50_000)
    assert snap.interarrival_s is not None
    # deterministic thinned gaps in real time: equal, and spanning the 60 s sample window
    assert np.std(snap.interarrival_s) == pytest.approx(0, abs=1e-9)
    assert np.sum(snap.interarrival_s) == pytest.approx(60, rel=0.01)
    assert snap.op("join").records_in_per_s > 0


def test_snapshot_and_timeseries_shape() -> None:
    topo = load_topology("q11")
    b = start(topo, constant(100_000, 120), 2, kind="poisson")
    b.advance_to(120)
    snap = b.snapshot(15)
    assert snap.taskmanagers == 6 and snap.t == 120.0
    assert snap.interarrival_s is not None and 0 < len(snap.interarrival_s) <= 5000
    assert np.sum(snap.interarrival_s) == pytest.approx(60, rel=0.05)  # spans the 60 s sample window
    for m in snap.operators.values():
        assert len(m.subtasks) == m.parallelism
        assert m.busy_ms_per_s + m.backpressured_ms_per_s + m.idle_ms_per_s == pytest.approx(1000.0)
    ts = b.timeseries().to_pandas()
    assert list(ts.columns) == ["ts", "metric", "operator", "subtask", "value"]
    lat = ts[(ts.metric == Metric.LATENCY_KAFKA) & (ts.operator == "")]
    assert np.diff(lat.ts.to_numpy()).tolist() == [5.0] * (len(lat) - 1)
    per_op = {Metric.PARALLELISM, Metric.CPU_SHARE, Metric.RECORDS_IN, Metric.RECORDS_OUT, Metric.BUSY,
              Metric.BACKPRESSURED,               Metric.STATE_BYTES}
    for name in topo.names:
        assert per_op <= set(ts[ts.operator == name].metric)
    job = {Metric.INPUT_RATE, Metric.THROUGHPUT, Metric.LAG, Metric.LATENCY_KAFKA, Metric.TASKMANAGERS, Metric.CPU,
           Metric.PROCESSING,            Metric.PRODUCED_TOTAL, Metric.PROCESSED_TOTAL}
    assert job <= set(ts[ts.operator == ""].metric)


def test_start_from_an_experiment_uses_its_settings() -> None:
    from harness.backends.sim.backend import SimBackend
    from harness.config import Experiment

    exp = Experiment.model_validate({
        "name": "t", "backend": "sim", "query": "q1", "autoscaler": {"name": "ds2"}, "seed": 4,
        "pattern": {"name": "constant", "params": {"rate": 60_000, "duration_min": 2}, "time_scale": 2.0,
                    "arrivals": {"kind": "map"}},
        "initial_parallelism": {"map": 3}, "rescale_method": "savepoint", "sim": {"buffer_s": 3.0},
    })
    pattern = build_pattern(exp.pattern, exp.seed, exp.query)
    b = SimBackend()
    b.start(exp, pattern, load_topology("q1"))
    b.advance_to(pattern.duration_s)
    assert b.now() == pytest.approx(60.0)  # 2 pattern minutes at time_scale 2
    snap = b.snapshot(60)
    assert snap.parallelism == {"bids_source": 1, "map": 3, "sink": 1}
    quiet, burst = exp.pattern.arrivals.multipliers()  # type: ignore[union-attr]
    assert 0.9 * quiet * 60_000 <= snap.input_rate <= 1.1 * burst * 60_000
    assert b.rescale({"map": 4}, None).method == "sim:savepoint"
    assert b.facts()["arrivals"]["kind"] == "map" and b.facts()["sim"]["buffer_s"] == 3.0
