"""The simulator's Flink-like measurement model and the calibrated effects it adds.

Readings are sampled and averaged like Flink's meters and Prometheus (noise statistics, bias, meter
lag); partitions are an experiment field; Kafka retention drops and counts expired records;
task managers take their start-up time before a scale-up takes effect; capacity follows the
task manager's CPU and the state a subtask holds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.backends.sim.backend import SimBackend
from harness.backends.sim.config import SimConfig
from harness.calibrated_profile import (
    CapacityFit,
    CpuModel,
    DowntimeModel,
    FedScaledOut,
    FlagModel,
    GaugeModel,
    HostLoad,
    Meters,
    NoiseBasis,
    OperatorProfile,
    OperatorReadings,
    PendingModel,
    Provenance,
    QueryProfile,
    Stat,
    StateCost,
)
from harness.config import Experiment
from harness.kafka_settings import KafkaSettings
from harness.metrics.snapshot import MetricsSnapshot
from harness.topology import Topology
from harness.vocabulary import Metric
from tests.sim.conftest import constant, pipeline
from workloads.arrivals import ArrivalConfig
from workloads.patterns import LoadPattern

QUOTA = 0.25


def profile(busy: GaugeModel | None = None, startup_s: float = 20.0, mid_state_per_gb: float = 0.0,
            downtime: float = 5.0, caps: tuple[float, float] = (8_000, 4_000),
            down_downtime: float | None = None, scaled_out: GaugeModel | None = None) -> QueryProfile:
    """A calibrated profile of tests.sim.conftest.pipeline(): src 8k/s, mid 4k/s at 0.25 CPU (no overhead);
    `scaled_out`: every operator's busy line at two or more subtasks (measured at 2)."""
    def op(cap: float, sel: float = 1.0, state: StateCost | None = None) -> OperatorProfile:
        fit = CapacityFit(cores_per_record=QUOTA / cap, overhead_cores=0.0, points=2, method="test")
        return OperatorProfile(
            capacity=cap, capacity_fit=fit, selectivity=sel,
            cpu=CpuModel(idle_cores=0.01, cores_per_record=QUOTA / cap, saturated_fraction=1.0),
            state=state,
            readings=OperatorReadings(busy=busy or GaugeModel(), cpu_jvm=GaugeModel(gain=0.9),
                                      busy_scaled_out=scaled_out, scaled_out_subtasks=[2] if scaled_out else []),
        )
    prov = Provenance(date="2026-11-26T00:00:00+00:00", command="test", cpu_model="test", host_cpus=2,
                      flink_version="2.2.1", kafka_version="4.1.1", taskmanager_cpu_quota=QUOTA,
                      host_load=HostLoad(before_1m=0.0), duration_s=1.0)
    state = StateCost(bytes_per_record=1000.0, per_gb=mid_state_per_gb) if mid_state_per_gb else None
    return QueryProfile(
        query="test", provenance=prov, cpu_quota=QUOTA,
        operators={"src": op(caps[0]), "mid": op(caps[1], state=state), "sink": op(100_000, 0.0)},
        meters=Meters(interval_s=5.0), taskmanager_startup_s=Stat(mean=startup_s, n=1),
        rescale_downtime={"in_place": DowntimeModel(base_s=downtime, down_base_s=down_downtime),
                          "savepoint": DowntimeModel(base_s=2 * downtime)},
    )


def start(pattern: LoadPattern, par: dict[str, int] | int = 1, prof: QueryProfile | None = None,
          topo: Topology | None = None, seed: int = 1, kafka: KafkaSettings | None = None,
          partitions: int | None = None, cpu_share: dict[str, float] | None = None, **cfg: object) -> SimBackend:
    b = SimBackend()
    b.start_with(topo or pipeline(), pattern, SimConfig(**cfg), par, seed=seed,  # type: ignore[arg-type]
                 arrivals=ArrivalConfig(kind="deterministic"), tm_cores=QUOTA, profile=prof or profile(),
                 kafka=kafka, partitions=partitions, cpu_share=cpu_share)
    return b


# ---------------------------------------------------------------- readings


def test_busy_reading_carries_the_calibrated_bias_and_noise() -> None:
    # mid at 50 % of its 4k/s capacity; the reading's bias: 0.1 + 0.8 x true; one update's sd 0.05
    g = GaugeModel(offset=0.1, gain=0.8, noise_sd=[(0.0, 0.05), (1.0, 0.05)])
    b = start(constant(2_000, 3_000), prof=profile(busy=g))
    readings = []
    for t in range(60, 3_000, 15):
        b.advance_to(t)
        readings.append(b.snapshot(15).op("mid").busy_ms_per_s / 1000.0)
    r = np.array(readings)
    # the window averages the updates of its scrapes (3 here): sd / sqrt(3)
    assert r.mean() == pytest.approx(0.1 + 0.8 * 0.5, abs=0.01)
    assert r.std() == pytest.approx(0.05 / math.sqrt(3), rel=0.25)
    # exact readings: the true utilisation, no noise and no bias (at 75 %: the biased reading would be 0.70)
    e = start(constant(3_000, 600), prof=profile(busy=g), readings="exact")
    e.advance_to(300)
    assert e.snapshot(15).op("mid").busy_ms_per_s == pytest.approx(750.0, rel=1e-6)


def test_a_held_error_stays_for_a_deployment_and_is_drawn_again_at_each_restart() -> None:
    # mid at 50 % of its capacity throughout; the sink's rescales restart the whole job (in place)
    g = GaugeModel(offset=0.0, gain=1.0, noise_sd=[(0.0, 0.01)], held_sd=0.1)
    b = start(constant(2_000, 20_000), prof=profile(busy=g))
    within, between = [], []
    t = 60
    for k in range(60):
        # both readings a minute and more after the restart and the backlog it left worked off (a scale-up waits
        # 20 s for its task manager): their windows hold the deployment's steady load alone
        b.advance_to(t + 40)
        first = b.snapshot(15).op("mid").busy_ms_per_s / 1000.0
        b.advance_to(t + 100)
        second = b.snapshot(15).op("mid").busy_ms_per_s / 1000.0
        within.append(second - first)
        between.append(second)
        b.rescale({"src": 1, "mid": 1, "sink": 1 + (k + 1) % 2}, None)
        t += 180
    assert np.std(within) < 0.02  # one deployment keeps its error
    assert np.std(between) == pytest.approx(0.1, rel=0.3)  # a restart draws it again
    assert np.mean(between) == pytest.approx(0.5, abs=0.05)
    # NaN (a profile calibrated before the held error was measured): none is drawn, only the updates' noise
    u = start(constant(2_000, 20_000), prof=profile(busy=g.model_copy(update={"held_sd": math.nan})))
    seen = []
    for k in range(20):
        u.advance_to(60 + 150 * k)
        seen.append(u.snapshot(15).op("mid").busy_ms_per_s / 1000.0)
        u.rescale({"src": 1, "mid": 1, "sink": 1 + (k + 1) % 2}, None)
    assert np.std(seen) < 0.02


def test_a_subtask_with_records_waiting_at_its_input_reads_the_calibrated_backlogged_level() -> None:
    # the line reads 0.2 + 0.1 x true busy (q1's map at 0.1 CPU reads little busy time when nothing queues)
    g = GaugeModel(offset=0.2, gain=0.1, noise_sd=[(0.0, 0.01)], backlogged_mean=0.9, backlogged_sd=0.02)
    over = start(constant(6_000, 900), prof=profile(busy=g))  # mid's 4k/s: records wait at its input
    under = start(constant(2_000, 900), prof=profile(busy=g))  # half its capacity: nothing waits
    over.advance_to(600)
    under.advance_to(600)
    assert over.snapshot(15).op("mid").busy_ms_per_s / 1000.0 == pytest.approx(0.9, abs=0.03)
    assert under.snapshot(15).op("mid").busy_ms_per_s / 1000.0 == pytest.approx(0.2 + 0.1 * 0.5, abs=0.03)
    # src is held back by mid (it takes what mid takes, 4k of its 8k): the line, not the backlogged level
    assert over.snapshot(15).op("src").busy_ms_per_s / 1000.0 == pytest.approx(0.2 + 0.1 * 0.5, abs=0.03)
    # not measured (NaN): the line at full utilisation, as before the level was calibrated
    nan = start(constant(6_000, 900), prof=profile(busy=g.model_copy(update={"backlogged_mean": math.nan})))
    nan.advance_to(600)
    assert nan.snapshot(15).op("mid").busy_ms_per_s / 1000.0 == pytest.approx(0.3, abs=0.03)
    # measured at share 1.0 only: mid throttled to half its quota and overloaded reads the line there
    half = start(constant(6_000, 900), prof=profile(busy=g), cpu_share={"mid": 0.5})
    half.advance_to(600)
    assert half.snapshot(15).op("mid").busy_ms_per_s / 1000.0 == pytest.approx(0.3, abs=0.03)


def test_an_operator_at_two_or_more_subtasks_reads_its_scaled_out_line_and_at_one_the_line() -> None:
    """q1's source at 0.1 CPU read 0.5-0.7 busy at one subtask whatever its load and close to its utilisation at 2-4:
    the sim reads a scaled-out operator's subtasks from the line calibrated for it, run.yaml records that line,
    and a profile without one reads the line at one subtask everywhere."""
    one = GaugeModel(offset=0.5, gain=0.1, noise_sd=[(0.0, 0.01)])
    wide = GaugeModel(offset=0.0, gain=1.0, noise_sd=[(0.0, 0.01)])
    prof = profile(busy=one, scaled_out=wide)

    def busy(par: dict[str, int], rate: float, op: str, p: QueryProfile = prof) -> float:
        b = start(constant(rate, 600), par=par, prof=p)
        b.advance_to(400)
        return b.snapshot(15).op(op).busy_ms_per_s / 1000.0

    # src at 25 % of its 8k/s per subtask, mid at 50 % of its 4k/s per subtask, in both layouts
    assert busy({"src": 1, "mid": 1, "sink": 1}, 2_000, "src") == pytest.approx(0.5 + 0.1 * 0.25, abs=0.02)
    assert busy({"src": 1, "mid": 1, "sink": 1}, 2_000, "mid") == pytest.approx(0.5 + 0.1 * 0.5, abs=0.02)
    assert busy({"src": 2, "mid": 2, "sink": 1}, 4_000, "src") == pytest.approx(0.25, abs=0.02)
    assert busy({"src": 2, "mid": 3, "sink": 1}, 6_000, "mid") == pytest.approx(0.5, abs=0.02)
    assert busy({"src": 2, "mid": 2, "sink": 1}, 4_000, "src", profile(busy=one)) == pytest.approx(0.525, abs=0.02)
    # per operator: the source at one subtask reads its line beside the mid at two reading the scaled-out one
    assert busy({"src": 1, "mid": 2, "sink": 1}, 4_000, "src") == pytest.approx(0.5 + 0.1 * 0.5, abs=0.02)
    assert busy({"src": 1, "mid": 2, "sink": 1}, 4_000, "mid") == pytest.approx(0.5, abs=0.02)
    # a scaled-out bottleneck with records queued at its input reads the backlogged level measured at one subtask
    queued = profile(busy=one.model_copy(update={"backlogged_mean": 0.9, "backlogged_sd": 0.01}), scaled_out=wide)
    assert busy({"src": 2, "mid": 2, "sink": 1}, 12_000, "mid", queued) == pytest.approx(0.9, abs=0.03)
    b = start(constant(2_000, 60), prof=prof)
    b.advance_to(30)
    rec = b.facts()["costs"]["busy_reading"]
    assert rec["src"]["scaled_out"] == {"offset": 0.0, "gain": 1.0, "subtasks": [2]}
    b = start(constant(2_000, 60), prof=profile(busy=one))
    b.advance_to(30)
    assert b.facts()["costs"]["busy_reading"]["src"]["scaled_out"] is None


def test_a_held_back_subtask_reads_its_not_busy_time_as_backpressured_not_idle() -> None:
    """Flink derives busy from measured idle and backpressured time, so a held-back subtask that never waits for
    input (a Kafka source with a backlog) reads almost no idle time whatever its busy reading (locally: idle
    0.03-0.04 at 3 subtasks behind q1's map); a free one reads the same busy line with the rest idle. Seen through
    HPA-Varga, which reads utilisation as 1 - idle: the held-back source is fully used, the free one is not."""
    from autoscalers.hpa.scaler import HPAVarga

    low = GaugeModel(offset=0.1, gain=0.3, noise_sd=[(0.0, 0.01)])  # busy reads well under the truth
    held = start(constant(6_000, 900), prof=profile(busy=low))  # src (8k/s) held back by mid (4k/s): 0.5 busy
    free = start(constant(4_000, 900), par={"src": 1, "mid": 2, "sink": 1}, prof=profile(busy=low))  # src 0.5
    for b in (held, free):
        b.advance_to(600)
    h, f = held.snapshot(15), free.snapshot(15)
    for snap in (h, f):  # the same true busy, the same busy reading
        assert snap.op("src").busy_ms_per_s / 1000.0 == pytest.approx(0.1 + 0.3 * 0.5, abs=0.03)
    assert h.op("src").idle_ms_per_s / 1000.0 == pytest.approx(0.0, abs=0.03)
    assert h.op("src").backpressured_ms_per_s / 1000.0 == pytest.approx(0.75, abs=0.03)
    assert f.op("src").idle_ms_per_s / 1000.0 == pytest.approx(0.75, abs=0.03)
    assert f.op("src").backpressured_ms_per_s / 1000.0 == pytest.approx(0.0, abs=0.01)
    # the bottleneck itself has no not-busy time to split (records wait at its input): its reading as before
    assert h.op("mid").busy_ms_per_s / 1000.0 == pytest.approx(0.4, abs=0.03)
    varga = HPAVarga()

    def utilisation(snap: MetricsSnapshot) -> float | None:
        return {r.metric: r.value for r in varga.readings(snap)[0]["src"]}["utilisation"]

    assert utilisation(h) == pytest.approx(1.0, abs=0.03)
    assert utilisation(f) == pytest.approx(0.25, abs=0.03)


def test_a_meter_interval_partly_queued_mixes_the_backlogged_level_with_the_line() -> None:
    from harness.backends.sim.readout import _busy_gauge

    g = GaugeModel(offset=0.2, gain=0.1, noise_sd=[(0.0, 0.01), (1.0, 0.03)], backlogged_mean=0.9, backlogged_sd=0.02)
    # 40 % of the interval queued (true busy 1.0 then), the rest at true busy 0.5: mean true busy 0.7
    mean, sd = _busy_gauge(g, 0.4 * 1.0 + 0.6 * 0.5, 0.4)
    line_mean, line_sd = 0.2 + 0.1 * 0.5, 0.01 + (0.03 - 0.01) * 0.5
    assert mean == pytest.approx(0.6 * line_mean + 0.4 * 0.9)
    assert sd == pytest.approx(math.sqrt(0.6 * line_sd**2 + 0.4 * 0.02**2))
    assert _busy_gauge(g, 1.0, 1.0) == pytest.approx((0.9, 0.02))
    # an unmeasured sd of the level: the line's at full load, not 0
    assert _busy_gauge(g.model_copy(update={"backlogged_sd": math.nan}), 1.0, 1.0) == pytest.approx((0.9, 0.03))


def _lag_corr(x: np.ndarray, k: int) -> float:
    return float(np.corrcoef(x[:-k], x[k:])[0, 1])


def test_a_windowed_readings_noise_is_its_intervals_mean_so_successive_updates_share_it() -> None:
    """Flink's busy gauge averages its last 12 meter intervals, noise and all: a reading's noise is one interval's
    sd / sqrt(12), and updates 5 s apart share 11 of 12 intervals (correlation 11/12), a minute apart none. A
    profile whose noise is per update (fitted before) draws each update afresh, as before."""
    g = GaugeModel(noise_sd=[(0.0, 0.12)], noise_basis=NoiseBasis.INTERVAL)
    runs = []
    for seed in range(6):  # each seed's table repeats after 512 intervals: several seeds for independent windows
        b = start(constant(2_000, 2_700), prof=profile(busy=g), meter_window_s=60.0, seed=seed)
        reads = []
        for t in range(120, 2_680, 5):
            b.advance_to(t)
            reads.append(b.snapshot(5).op("mid").busy_ms_per_s / 1000.0)  # one update per snapshot
        runs.append(np.array(reads))
    assert np.mean([r.std() for r in runs]) == pytest.approx(0.12 / math.sqrt(12), rel=0.2)
    assert np.mean([_lag_corr(r, 1) for r in runs]) == pytest.approx(11 / 12, abs=0.05)
    assert np.mean([_lag_corr(r, 6) for r in runs]) == pytest.approx(6 / 12, abs=0.12)
    assert abs(np.mean([_lag_corr(r, 12) for r in runs])) < 0.2  # 0: a minute apart they share no interval
    b = start(constant(2_000, 6_000), prof=profile(busy=g), meter_window_s=60.0)
    # the monitor's 15-s window averages three updates that share most of their noise: hardly less noisy
    slow = []
    for t in range(120, 3_000, 15):
        b.advance_to(t)
        slow.append(b.snapshot(15).op("mid").busy_ms_per_s / 1000.0)
    assert np.std(slow) > 0.8 * 0.12 / math.sqrt(12)  # 0.96 x one update's; independent updates: 0.58
    per_update = start(constant(2_000, 3_000), prof=profile(busy=g.model_copy(update={
        "noise_basis": NoiseBasis.UPDATE})), meter_window_s=60.0)
    own = []
    for t in range(120, 3_000, 5):
        per_update.advance_to(t)
        own.append(per_update.snapshot(5).op("mid").busy_ms_per_s / 1000.0)
    assert np.std(own) == pytest.approx(0.12, rel=0.2) and abs(_lag_corr(np.array(own), 1)) < 0.15


def test_right_after_a_restart_a_windowed_reading_averages_few_intervals_and_is_noisier() -> None:
    """A restarted task's gauge holds only the intervals since it started: 16 s after a restart its noise is the
    mean of about three intervals', a minute on of twelve. The CPU signal's noise stays one interval's throughout."""
    g = GaugeModel(noise_sd=[(0.0, 0.12)], noise_basis=NoiseBasis.INTERVAL)
    cpu = GaugeModel(gain=1.0, noise_sd=[(0.0, 0.05)], noise_basis=NoiseBasis.INTERVAL)
    prof = profile(busy=g, startup_s=0.0)
    prof.operators["mid"].readings.cpu = cpu
    b = start(constant(2_000, 20_000), prof=prof, meter_window_s=60.0)
    early, late, cpu_early, cpu_late = [], [], [], []
    t = 60.0
    for k in range(80):
        assert b.rescale({"src": 1, "mid": 1, "sink": 1 + (k + 1) % 2}, None).ok
        restarted = b.now()
        b.advance_to(restarted + 16.0)
        snap = b.snapshot(5).op("mid")
        early.append(snap.busy_ms_per_s / 1000.0)
        cpu_early.append(snap.cpu_load)
        b.advance_to(restarted + 96.0)
        snap = b.snapshot(5).op("mid")
        late.append(snap.busy_ms_per_s / 1000.0)
        cpu_late.append(snap.cpu_load)
        t = b.now() + 5.0
        b.advance_to(t)
    assert np.std(early) > 1.8 * np.std(late)
    assert np.std(late) == pytest.approx(0.12 / math.sqrt(12), rel=0.3)
    assert np.std(cpu_early) == pytest.approx(np.std(cpu_late), rel=0.35)


def test_noise_is_seeded_per_subtask_and_deterministic() -> None:
    g = GaugeModel(noise_sd=[(0.0, 0.1)])
    a = start(constant(6_000, 600), {"src": 1, "mid": 3, "sink": 1}, prof=profile(busy=g), seed=7)
    b = start(constant(6_000, 600), {"src": 1, "mid": 3, "sink": 1}, prof=profile(busy=g), seed=7)
    c = start(constant(6_000, 600), {"src": 1, "mid": 3, "sink": 1}, prof=profile(busy=g), seed=8)
    for x in (a, b, c):
        x.advance_to(300)
    sa, sb, sc = (x.snapshot(15).op("mid") for x in (a, b, c))
    busy = [s.busy_ms_per_s for s in sa.subtasks]
    assert busy == [s.busy_ms_per_s for s in sb.subtasks]
    assert busy != [s.busy_ms_per_s for s in sc.subtasks]
    assert len(set(busy)) == 3  # three subtasks, three draws


def test_meters_lag_a_load_step_by_their_update_interval_and_their_60_s_window() -> None:
    """Flink's busy/idle/backpressured gauges (TimerGauge, Flink 1.17+) update every 5 s and report the mean of
    the last 60 s of updates: a load step shows at the next update, and in full once the window has passed it."""
    # 1k/s for 300 s, then 3k/s: mid's true utilisation steps from 0.25 to 0.75 at t = 300
    rates = np.concatenate([np.full(300, 1_000.0), np.full(400, 3_000.0)])
    # at t = 330 the three updates read (their last 5 s before the scrapes at 320-330, less the meters' delay)
    # hold 17-32 s of the new load: a 60-s window is that share of the way up, a 5-s one all of it
    for window_s, lo, hi in ((60.0, 0.25 + 0.5 * 17 / 60, 0.25 + 0.5 * 32 / 60), (5.0, 0.74, 0.76)):
        b = start(LoadPattern("step", rates, 1.0), meter_window_s=window_s)
        b.advance_to(299)
        before = b.snapshot(15).op("mid").busy_ms_per_s
        b.advance_to(302)  # the step happened, but no meter update has covered it yet
        just_after = b.snapshot(15).op("mid")
        b.advance_to(330)
        after = b.snapshot(15).op("mid").busy_ms_per_s
        b.advance_to(390)  # 60 s later every window is past the step
        late = b.snapshot(15).op("mid").busy_ms_per_s
        assert before == pytest.approx(250.0, rel=0.02)
        assert just_after.busy_ms_per_s == pytest.approx(before, rel=0.02)
        assert 1000.0 * lo <= after <= 1000.0 * hi, window_s
        assert late == pytest.approx(750.0, rel=0.02)
    # counters are exact: the rate over the window's scrapes already moved (they end at t = 300 here)
    b.advance_to(311)
    assert b.snapshot(15).op("mid").records_in_per_s > 1_500


def test_the_cpu_signal_is_no_timergauge_it_follows_a_load_step_within_an_update() -> None:
    """Only busy, idle and backpressured average their last 60 s: the CPU reading (cgroup CPU time over the
    meter interval) shows a load step at once, while busy is still part of the way up."""
    rates = np.concatenate([np.full(300, 1_000.0), np.full(400, 3_000.0)])
    b = start(LoadPattern("step", rates, 1.0), meter_window_s=60.0)
    b.advance_to(330)
    mid = b.snapshot(15).op("mid")
    idle = 0.01 / QUOTA  # the profile's idle cores over the quota
    assert mid.cpu_load == pytest.approx(idle + (1.0 - idle) * 0.75, abs=0.03)
    assert mid.busy_ms_per_s < 600.0  # the gauge still holds half a minute of the old load


def test_a_window_partly_queued_reads_the_backlogged_level_for_that_part() -> None:
    """mid at 0.75 of its capacity, then overloaded from t = 300 (records wait at its input): 35 s later its
    60-s window is queued for 35 of its seconds, so the reading mixes the backlogged level (0.9) and the line
    (0.2 x 0.75) in about that proportion, neither the line alone nor the backlogged level alone."""
    g = GaugeModel(offset=0.0, gain=0.2, backlogged_mean=0.9, backlogged_sd=0.0)
    rates = np.concatenate([np.full(300, 3_000.0), np.full(400, 6_000.0)])
    b = start(LoadPattern("step", rates, 1.0), prof=profile(busy=g), meter_window_s=60.0)
    b.advance_to(335)
    read = b.snapshot(15).op("mid").busy_ms_per_s / 1000.0
    # the three updates read hold 20-35 s queued of their 60
    assert 0.15 + (0.9 - 0.15) * 20 / 60 - 0.02 <= read <= 0.15 + (0.9 - 0.15) * 35 / 60 + 0.02


def test_a_restarted_tasks_gauges_average_only_since_it_started() -> None:
    """A rescale restarts the job's tasks and with them their gauges: 30 s after the restart the busy reading
    holds only the new deployment's load, not the minute before it."""
    rates = np.concatenate([np.full(300, 3_000.0), np.full(400, 1_000.0)])  # mid: 0.75, then 0.25 of its capacity
    b = start(LoadPattern("step", rates, 1.0), prof=profile(startup_s=0.0), meter_window_s=60.0)
    b.advance_to(300)
    assert b.snapshot(15).op("mid").busy_ms_per_s == pytest.approx(750.0, rel=0.02)
    assert b.rescale({"sink": 2}, None).ok  # mid keeps its one subtask; the whole job restarts (5 s down)
    b.advance_to(b.now() + 40.0)
    restarted = b.snapshot(15).op("mid").busy_ms_per_s
    assert restarted == pytest.approx(250.0, rel=0.25)  # the new load, and the 5 s of records it caught up on
    quiet = start(LoadPattern("step", rates, 1.0), prof=profile(startup_s=0.0), meter_window_s=60.0)
    quiet.advance_to(b.now())  # no restart: its windows still hold 15-25 s of the load before the step
    assert quiet.snapshot(15).op("mid").busy_ms_per_s > restarted + 80.0


def test_a_restarted_tasks_gauges_read_busy_1000_through_their_first_update() -> None:
    """Flink's fresh idle and backpressure TimerGauges read 0 through their first update, so busy, what they leave,
    reads 1000: the local runs read 1000 for a scrape or two after each restart (q1 DS2, HPA-CPU and q11 DS2 cells
    of session 20, every operator). The sim reads the same at a scrape whose latest update is the tasks' first (or
    none yet); a monitor window holding such scrapes among regular ones mixes them; a minute on, the true load."""
    # a scrape finds the meters' latest update 2 s old (a delay of 2.5 s rounds to 2 steps: updates at 303, 308,
    # ...); the job, down 4.5 s from 300, runs again half way into the step before the scrape at 305
    prof = profile(startup_s=0.0, downtime=4.5)
    prof = prof.model_copy(update={"meters": Meters(interval_s=5.0, busy_lag_s=2.0)})
    b = start(constant(2_000, 20_000), prof=prof, meter_window_s=60.0)
    b.advance_to(300)
    assert b.snapshot(5).op("mid").busy_ms_per_s == pytest.approx(500.0, rel=0.02)
    assert b.rescale({"sink": 2}, None).ok  # the whole job restarts, down until 304.5
    b.advance_to(305.0)
    first = b.snapshot(5)  # the scrape at 305: the job answers, its gauges' latest update (303) came before it
    mid = first.op("mid")
    assert (mid.busy_ms_per_s, mid.idle_ms_per_s, mid.backpressured_ms_per_s) == (1000.0, 0.0, 0.0)
    assert math.isnan(mid.cpu_load) and "cpu" in first.why_missing  # nor has the CPU a reading yet
    b.advance_to(310.0)  # the update at 308 is the new tasks' first (its interval holds their start): still fresh
    second = b.snapshot(5).op("mid")
    assert (second.busy_ms_per_s, second.idle_ms_per_s, second.backpressured_ms_per_s) == (1000.0, 0.0, 0.0)
    b.advance_to(315.0)  # the update at 313: what they did, the 4.5 s of records queued while down worked off
    regular = b.snapshot(5).op("mid").busy_ms_per_s
    assert 500.0 < regular < 1000.0
    mixed = b.snapshot(15).op("mid").busy_ms_per_s  # two fresh scrapes among three
    assert mixed == pytest.approx((2000.0 + regular) / 3, rel=0.02)
    b.advance_to(b.now() + 80.0)
    assert b.snapshot(15).op("mid").busy_ms_per_s == pytest.approx(500.0, rel=0.02)

    def restarted_at_300(down_s: float) -> SimBackend:
        run = start(constant(2_000, 20_000), prof=prof.model_copy(update={"rescale_downtime": {
            "in_place": DowntimeModel(base_s=down_s)}}), meter_window_s=60.0)
        run.advance_to(300)
        assert run.rescale({"sink": 2}, None).ok
        return run

    # back 3.5 s after 300 (the first step run: 303), the update at 308 averages 303-307: still the first
    early = restarted_at_300(3.5)
    early.advance_to(310.0)
    assert early.snapshot(5).op("mid").busy_ms_per_s == 1000.0
    # down two minutes (longer than the gauge's window): the first scrapes after it read the fresh gauges, and the
    # next ones the tasks' own time since they began, not the downtime as idle time
    long = restarted_at_300(120.0)
    long.advance_to(425.0)
    assert long.snapshot(5).op("mid").busy_ms_per_s == 1000.0
    long.advance_to(440.0)  # working off two minutes of records: busy, not idle
    assert long.snapshot(5).op("mid").busy_ms_per_s > 900.0


def test_is_backpressured_is_a_sampled_flag_and_the_upstream_of_a_bottleneck_is_blocked() -> None:
    b = start(constant(6_000, 900), prof=profile())  # mid (4k/s) is the bottleneck, src (8k/s) is blocked
    flags = []
    for t in range(120, 900, 15):
        b.advance_to(t)
        snap = b.snapshot(15)
        flags.append(snap.op("src").is_backpressured)
        assert not snap.op("sink").is_backpressured
    # src is blocked half of its time: a window of 3 scrapes sees the flag with P = 1 - 0.5^3 = 0.875
    assert 0.65 * len(flags) <= sum(flags) < len(flags)
    src = b.snapshot(15).op("src")
    assert src.backpressured_ms_per_s == pytest.approx(500.0, rel=0.05)
    assert src.busy_ms_per_s == pytest.approx(500.0, rel=0.05)


def with_flag_near(prof: QueryProfile, flag: FlagModel) -> QueryProfile:
    ops = dict(prof.operators)
    src = ops["src"]
    ops["src"] = src.model_copy(update={"readings": src.readings.model_copy(update={"flagged_near": flag})})
    return prof.model_copy(update={"operators": ops})


def test_a_source_feeding_an_operator_near_its_limit_is_flagged_at_the_calibrated_rate_though_never_blocked() -> None:
    # src (8k/s) feeds mid (4k/s): at 3.4k/s mid runs at 0.85 and nothing is held back; at 1.2k/s at 0.3
    flag = FlagModel(points=[(0.4, 0.0), (0.8, 0.2)])
    windows = []
    for seed in range(4):
        b = start(constant(3_400, 1_200), prof=with_flag_near(profile(), flag), seed=seed)
        for t in range(120, 1_200, 15):
            b.advance_to(t)
            snap = b.snapshot(15)
            assert snap.op("src").backpressured_ms_per_s < 50.0  # not held back
            windows.append(snap.op("src").is_backpressured)
    # P = 0.2 per scrape at 0.85 (held beyond the last point): a window of 3 scrapes sees it with 1 - 0.8^3 = 0.49
    assert 0.38 * len(windows) <= sum(windows) <= 0.60 * len(windows)
    low = start(constant(1_200, 600), prof=with_flag_near(profile(), flag))
    never = []
    for t in range(120, 600, 15):
        low.advance_to(t)
        never.append(low.snapshot(15).op("src").is_backpressured)
    assert not any(never)
    # without the model (not calibrated) a source that is never blocked is never flagged
    plain = start(constant(3_400, 600))
    flags = []
    for t in range(120, 600, 15):
        plain.advance_to(t)
        flags.append(plain.snapshot(15).op("src").is_backpressured)
    assert not any(flags)


def test_the_near_limit_flag_is_drawn_per_subtask_so_a_scaled_out_source_is_flagged_more_often() -> None:
    """The calibrated probability is per subtask and scrape: a scrape sees the operator flagged when any subtask
    is, so at 2 subtasks a window of 3 scrapes sees it with 1 - 0.8^(3 x 2) = 0.74, against 0.49 at one."""
    flag = FlagModel(points=[(0.4, 0.0), (0.8, 0.2)])

    def share_flagged(src_subtasks: int) -> float:
        windows = []
        for seed in range(4):
            b = start(constant(3_400, 1_200), par={"src": src_subtasks, "mid": 1, "sink": 1},
                      prof=with_flag_near(profile(), flag), seed=seed)
            for t in range(120, 1_200, 15):
                b.advance_to(t)
                snap = b.snapshot(15)
                assert snap.op("src").backpressured_ms_per_s < 50.0  # mid at 0.85 holds nothing back
                windows.append(snap.op("src").is_backpressured)
        return sum(windows) / len(windows)

    one, two = share_flagged(1), share_flagged(2)
    assert 0.38 <= one <= 0.60
    assert 0.63 <= two <= 0.85


def test_an_operator_fed_by_a_scaled_out_one_runs_at_its_calibrated_fraction_and_at_its_capacity_otherwise() -> None:
    """mid (4k/s) measured at 0.8 of its capacity fed by several source subtasks: overloaded at 6k/s it takes
    3.2k/s behind 2 source subtasks, 4k/s behind one, and the run records the fraction it used."""
    prof = profile()
    mid = prof.operators["mid"]
    fed = FedScaledOut(fraction=0.8, rate=3_200.0, upstream_subtasks=[2], phases=["bottleneck-mid"])
    prof = prof.model_copy(update={"operators": {**prof.operators, "mid": mid.model_copy(
        update={"fed_scaled_out": fed})}})

    def took(src_subtasks: int) -> float:
        b = start(constant(6_000, 600), par={"src": src_subtasks, "mid": 1, "sink": 1}, prof=prof)
        b.advance_to(300)
        return b.snapshot(15).op("mid").records_in_per_s

    assert took(2) == pytest.approx(3_200, rel=0.03)
    assert took(1) == pytest.approx(4_000, rel=0.03)
    # a forward pair (mid at the source's parallelism, not keyed) has one channel per subtask: not the layout
    # measured, so 2 x 4k/s at 12k/s offered
    b = start(constant(12_000, 600), par={"src": 2, "mid": 2, "sink": 1}, prof=prof)
    b.advance_to(300)
    assert b.snapshot(15).op("mid").records_in_per_s == pytest.approx(8_000, rel=0.03)
    b = start(constant(6_000, 60), par={"src": 2, "mid": 1, "sink": 1}, prof=prof)
    b.advance_to(30)
    assert b.facts()["costs"]["fed_scaled_out"] == {"mid": 0.8}


def test_cpu_signals_follow_the_calibrated_cpu_model() -> None:
    b = start(constant(2_000, 600))
    b.advance_to(300)
    mid = b.snapshot(15).op("mid")
    idle = 0.01 / QUOTA
    assert mid.cpu_load == pytest.approx(idle + (1 - idle) * 0.5, rel=0.02)  # CPU time / quota
    assert mid.cpu_jvm_load == pytest.approx(0.9 * mid.cpu_load, rel=0.02)  # the calibrated gain of the JVM's load


def test_lag_rate_is_taken_over_the_metrics_window_like_the_catalogue() -> None:
    b = start(constant(6_000, 900))  # the job takes 4k/s: lag grows 2k/s
    b.advance_to(600)
    assert b.snapshot(15).kafka_lag_rate == pytest.approx(2_000, rel=0.05)
    assert b.snapshot(60).kafka_lag_rate == pytest.approx(2_000, rel=0.05)


def with_pending(prof: QueryProfile, buffer: float) -> QueryProfile:
    src = prof.operators["src"]
    readings = src.readings.model_copy(update={"pending": PendingModel(buffer_records=buffer)})
    ops = {**prof.operators, "src": src.model_copy(update={"readings": readings})}
    return prof.model_copy(update={"operators": ops})


def test_pending_records_miss_the_consumers_buffer_and_what_arrived_while_it_drained() -> None:
    """Measured on the local stack (`bench calibrate`'s cold start): a saturated source's pendingRecords reads
    its backlog less about 230k records x arrivals / records taken; a source that keeps up reads about 0."""
    caps = (8_000, 500)  # the mid operator takes 500/s: the source is held back to 500/s, 6k/s arrive
    truth = start(constant(6_000, 900), prof=profile(caps=caps))
    read = start(constant(6_000, 900), prof=with_pending(profile(caps=caps), 50_000))
    truth.advance_to(60)
    read.advance_to(60)
    true_lag = truth.snapshot(15).kafka_lag
    assert true_lag > 250_000  # about 5.5k/s for a minute
    early = read.snapshot(15)
    # the reading misses min(50k, backlog) x 6000 / 500 = 600k: nothing to read yet, nor any growth
    assert early.kafka_lag == 0.0 and early.kafka_lag_rate == 0.0
    assert early.operators["src"].lag == 0.0
    truth.advance_to(600)
    read.advance_to(600)
    t, r = truth.snapshot(15), read.snapshot(15)
    assert r.kafka_lag == pytest.approx(t.kafka_lag - 600_000, rel=0.01)
    assert r.kafka_lag_rate == pytest.approx(t.kafka_lag_rate, rel=0.02)  # grown past the buffer: same slope
    # a source that keeps up reads about nothing, as Flink's gauge does (session 9's ladder phases: < 1k)
    calm = start(constant(300, 300), prof=with_pending(profile(caps=caps), 50_000))
    calm.advance_to(200)
    assert calm.snapshot(15).kafka_lag < 1.0


def test_exact_readings_keep_the_true_backlog() -> None:
    caps = (8_000, 500)
    truth = start(constant(6_000, 300), prof=profile(caps=caps), readings="exact")
    exact = start(constant(6_000, 300), prof=with_pending(profile(caps=caps), 50_000), readings="exact")
    truth.advance_to(120)
    exact.advance_to(120)
    assert exact.snapshot(15).kafka_lag == truth.snapshot(15).kafka_lag > 500_000


# ---------------------------------------------------------------- partitions, retention, start-up


def test_partitions_are_an_experiment_field_defaulting_to_the_most_consumers() -> None:
    exp = Experiment.model_validate({"name": "x", "backend": "sim", "query": "q1", "pattern": {"name": "cosine"},
                                     "autoscaler": {"name": "ds2"}, "scale_manager": {"max_taskmanagers": 12}})
    assert exp.partitions == 12  # thesis ch. 6.3.1
    assert Experiment.model_validate({**exp.model_dump(), "kafka": {"partitions": 5}}).partitions == 5


def test_sources_get_whole_partitions() -> None:
    # 8 partitions on 5 source subtasks of 1k/s: 3 read 2 partitions, 2 read 1. At 6k/s each partition
    # gets 750/s: the 2-partition subtasks saturate (1k of 1.5k), the others keep up (750)
    b = start(constant(6_000, 600), {"src": 5, "mid": 1, "sink": 1}, partitions=8,
              prof=profile(caps=(1_000, 1e6)), readings="exact")
    b.advance_to(400)
    snap = b.snapshot(30)
    assert snap.throughput == pytest.approx(3 * 1_000 + 2 * 750, rel=0.01)
    lags = sorted(s.lag or 0.0 for s in snap.op("src").subtasks)
    assert lags[:2] == pytest.approx([0.0, 0.0], abs=1e-6) and min(lags[2:]) > 0
    assert b.facts()["kafka"]["partitions"] == 8


def test_retention_drops_records_and_counts_them_as_lost_load() -> None:
    kafka = KafkaSettings(retention_s=60, retention_check_s=5, segment_s=10)
    b = start(constant(6_000, 900), kafka=kafka)  # 2k/s more than the job takes
    for t in range(15, 901, 15):
        b.advance_to(t)
        m = b.model
        assert m is not None
        assert m.produced == pytest.approx(m.processed + m.lag + m.expired, rel=1e-9)
    assert m.expired > 0
    # nothing older than retention + a segment + a check interval is ever taken
    ts = b.timeseries().to_pandas()
    oldest = ts[ts.metric == Metric.LATENCY_KAFKA_MAX]["value"].max()
    assert oldest <= 60 + 10 + 5 + 1
    expired = ts[(ts.metric == Metric.EXPIRED_TOTAL)].sort_values("ts")["value"].to_numpy()
    assert expired[-1] == pytest.approx(m.expired) and np.all(np.diff(expired) >= 0)
    # the backlog stops growing: only the records of the last retention (+ segment + check) are kept
    assert m.lag <= 6_000 * (60 + 10 + 5 + 1)
    assert m.expired == pytest.approx(m.produced - m.processed - m.lag)


def test_no_retention_keeps_everything() -> None:
    b = start(constant(6_000, 600))
    b.advance_to(600)
    assert b.model is not None and b.model.expired == 0.0


def test_a_scale_up_waits_for_task_manager_start_up_and_the_call_blocks_like_local() -> None:
    b = start(constant(2_000, 900), prof=profile(startup_s=20.0, downtime=5.0))
    b.advance_to(300)
    res = b.rescale({"mid": 2}, None)
    assert res.ok and res.downtime_s == pytest.approx(5.0)
    assert b.now() == pytest.approx(325.0)  # 20 s start-up (job runs on) + 5 s downtime
    ts = b.timeseries().to_pandas()
    proc = ts[(ts.metric == Metric.PROCESSING)].set_index("ts")["value"]
    assert proc.loc[320.0] == pytest.approx(1.0)  # still processing during the start-up
    assert proc.loc[325.0] == pytest.approx(0.0)  # down for the restart
    tms = ts[(ts.metric == Metric.TASKMANAGERS)].set_index("ts")["value"]
    assert tms.loc[315.0] == 3 and tms.loc[325.0] == 4
    # a scale-down needs no start-up
    b.rescale({"mid": 1}, None)
    assert b.now() == pytest.approx(330.0)


def test_a_restart_on_running_task_managers_takes_the_scale_downs_measured_downtime() -> None:
    """Calibrated apart: 5 s onto a fresh (cold) task manager, 1.5 s onto running ones."""
    b = start(constant(2_000, 900), par={"src": 1, "mid": 2, "sink": 1},
              prof=profile(startup_s=20.0, downtime=5.0, down_downtime=1.5))
    b.advance_to(300)
    up = b.rescale({"mid": 3}, None)
    assert up.downtime_s == pytest.approx(5.0) and b.now() == pytest.approx(325.0)
    down = b.rescale({"mid": 1}, None)
    assert down.downtime_s == pytest.approx(1.5) and 326.0 <= b.now() <= 327.0  # at the sim's 1-s step
    # without a scale-down's measurement (older profiles) both restarts take the one base
    b = start(constant(2_000, 900), par={"src": 1, "mid": 2, "sink": 1}, prof=profile(startup_s=20.0, downtime=5.0))
    b.advance_to(300)
    assert b.rescale({"mid": 1}, None).downtime_s == pytest.approx(5.0)


def test_the_thesis_redeploy_puts_start_up_inside_the_downtime() -> None:
    b = start(constant(2_000, 900), prof=profile(startup_s=20.0, downtime=5.0), startup_inside_downtime=True,
              jobmanager_redeploy_s=None)
    b.advance_to(300)
    res = b.rescale({"mid": 2}, None)
    assert res.downtime_s == pytest.approx(5.0 + 20.0 + 20.0)  # savepoint/restart + TM start + JM redeploy


def test_capacity_follows_the_task_manager_cpu_and_share() -> None:
    fast = SimBackend()
    fast.start_with(pipeline(), constant(20_000, 400), SimConfig(), 1, arrivals=ArrivalConfig(kind="deterministic"),
                    tm_cores=1.0, profile=profile())
    fast.advance_to(300)
    assert fast.snapshot(30).throughput == pytest.approx(4 * 4_000, rel=0.01)  # 4x the CPU, 4x the records
    half = start(constant(20_000, 400), cpu_share={"mid": 0.5})
    half.advance_to(300)
    assert half.snapshot(30).throughput == pytest.approx(2_000, rel=0.01)


def test_per_record_cost_grows_with_state() -> None:
    # mid keeps 1000 B per record forever: after 600 s at 2k/s it holds 1.2 GB; with cost +50 % per GB
    topo = pipeline(state_bytes=1000.0, ttl=None)
    b = start(constant(8_000, 1_200), topo=topo, prof=profile(mid_state_per_gb=0.5))
    b.advance_to(30)
    early = b.snapshot(15).throughput
    assert early == pytest.approx(4_000, rel=0.05)
    b.advance_to(1_200)
    late = b.snapshot(15).throughput
    gb = b.model.state_bytes / 1e9  # type: ignore[union-attr]
    assert gb > 1.0
    assert late == pytest.approx(4_000 / (1 + 0.5 * gb), rel=0.05)
    assert late < 0.8 * early


def test_a_local_experiment_runs_on_the_sim_with_the_local_quota() -> None:
    exp = Experiment.model_validate({
        "name": "x", "backend": "sim", "query": "q1", "pattern": {"name": "constant", "params": {"rate": 1000}},
        "autoscaler": {"name": "ds2"}, "local": {"taskmanager_cpu_quota": 0.5}})
    b = SimBackend()
    from harness.topology import load_topology
    from workloads.patterns import build_pattern

    b.start(exp, build_pattern(exp.pattern, 1, "q1"), load_topology("q1"))
    assert b.facts()["costs"]["taskmanager_cpu"] == 0.5
    exp2 = exp.model_copy(update={"sim": SimConfig(taskmanager_cpu=2.0)})
    b.start(exp2, build_pattern(exp.pattern, 1, "q1"), load_topology("q1"))
    assert b.facts()["costs"]["taskmanager_cpu"] == 2.0



def test_end_to_end_latency_reads_the_sink_histogram_over_the_answered_scrapes() -> None:
    # mid keeps up (2k/s of 4k/s): records flow through within a step; a 30 s downtime at t = 320 .. 350
    b = start(constant(2_000, 900), prof=profile(startup_s=20.0, downtime=30.0))
    b.advance_to(300)
    before = b.snapshot(15)
    assert before.latency_e2e_s == 0.0 and before.latency_e2e_p95_s == 0.0
    assert b.rescale({"mid": 2}, None).downtime_s == 30.0
    down = b.snapshot(15)  # every scrape of the window fell in the downtime: nothing measured, not 0
    assert math.isnan(down.latency_e2e_s) and math.isnan(down.latency_e2e_p95_s) and "*" in down.why_missing
    b.advance_to(355)
    after = b.snapshot(15)  # the records that sat through the downtime come out with its length
    assert 1.0 < after.latency_e2e_s <= 30.0 and after.latency_e2e_p95_s == pytest.approx(30.0)
    b.advance_to(400)
    assert b.snapshot(15).latency_e2e_s == 0.0  # drained
