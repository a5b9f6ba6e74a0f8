"""The calibrator's fitting: recorded samples of a known system in, that system's profile out.

`synthetic_measurement` plays the recorder against a ground truth (per-record CPU cost, task
manager overhead, Flink's busy-time bias and noise, 5 s meter updates, rescale timings) so the
fit can be checked against the numbers it must recover; the primitives are pinned on their own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from harness.calibrated_profile import (
    CpuModel,
    HostLoad,
    NoiseBasis,
    Provenance,
    QueryProfile,
    SharePoint,
    load_profile,
    read_profile,
)
from harness.calibration import fit
from harness.calibration.build import build_profile, plateaus
from harness.calibration.measure import Measurement, PhaseRecord
from harness.gauge_window import GAUGE_WINDOW_S, noise_overlap
from harness.topology import load_topology

QUOTA = 0.25
OVERHEAD = 0.02  # cores a task manager spends whatever it processes
K = {"bids_source": 2.0e-5, "map": 1.0e-5, "sink": 0.5e-5}  # CPU-seconds per input record
SEL = {"bids_source": 1.0, "map": 1.0, "sink": 0.0}
BUSY_OFFSET, BUSY_GAIN, BUSY_SD = 0.05, 0.9, 0.03
SPREAD_EXTRA_CORES = 0.05
WIDE_OFFSET, WIDE_GAIN = 0.3, 0.3  # a subtask of an operator at two or more subtasks (`spread`) reads this line
COLD_F0, COLD_TAU_CPU_S = 0.3, 5.0  # a fresh task manager: 30 % of its warm speed, 1/e of the rest per 5 CPU-s
COLD_DEAD_S = 12.0  # ... after 12 s of taking nothing (consumers opening, classes loading)


def warm_fraction(seconds: float, tau: float = COLD_TAU_CPU_S) -> float:
    """Of the warm speed, `seconds` after the job ran."""
    if seconds < COLD_DEAD_S:
        return 0.0
    return 1.0 - (1.0 - COLD_F0) * math.exp(-(seconds - COLD_DEAD_S) * QUOTA / tau)


def cap(op: str, cores: float) -> float:
    return (cores - OVERHEAD) / K[op]


def synthetic_measurement(seed: int = 3, backlogged_busy: float | None = None, target: str = "map",
                          upstream_bp: float | None = None, spread: tuple[float, ...] = (),
                          spread_par: dict[str, int] | None = None, limited_busy: float | None = None,
                          costs: dict[str, float] | None = None, throttled_cost: float = 0.0,
                          near_flag: Callable[[float], float] | None = None,
                          cold_taus: tuple[float, ...] = (COLD_TAU_CPU_S,),
                          cold_offered: tuple[float, ...] = (), fed_cost: float = 0.0,
                          spread_s: int = 30, busy_sd: float = BUSY_SD) -> Measurement:
    """`backlogged_busy`: add a `bottleneck` phase for `target` (a non-source target: the source at 3 subtasks;
    the source: the map and sink at 3) in which the target, with records waiting at its input, reads this busy
    level instead of the line;
    `upstream_bp` replaces the source's backpressure reading there (else 1 - its utilisation). `spread`: a
    `spread` phase per level (fractions of the source's capacity at one subtask) with every operator at 2
    subtasks (`spread_par` overrides per operator), which read the WIDE line; in a spread phase whose rate
    exceeds what the layout takes, the operator that limits reads `limited_busy` if given (a saturated reading).
    `costs` overrides K per operator; `throttled_cost`: a record costs 1 + this x (1 - share) times as much at a
    lower CPU share (a throttled task manager's JVM keeps its fixed work: q11's source at 0.1 CPU spent 5.4 CPU-us
    per record at share 0.25, at most 3.3 reading a backlog at share 1.0). `near_flag`: a subtask nothing holds
    back is flagged back-pressured in a sample with this probability of the utilisation of the operator it feeds
    (a held-back one always is). `cold_taus`: one cold start per entry, each warming up with that tau
    (CPU-seconds), the first named `coldstart`, the others `coldstart-2`, ...; `cold_offered`: each one's offered
    rate over the source's warm capacity (default 1.2: overloaded). `fed_cost`: a record costs an operator 1 + this
    times as much where the operator feeding it runs at two or more subtasks (records of a key from several
    channels: q11's session window). `spread_s`: each spread phase's length (a gauge averages the last 60 s, so
    30-s phases read a narrower range of loads than they ran). `busy_sd`: the sd of the busy gauge's noise per 5-s
    interval (a reading averages its window's, as Flink's gauge does)."""
    rng = np.random.default_rng(seed)
    ops = list(K)
    k_at = {op: (costs or {}).get(op, K[op]) for op in ops}

    def per_record(op: str, share: float, fed: bool = False) -> float:
        return k_at[op] * (1.0 + throttled_cost * (1.0 - share)) * (1.0 + fed_cost if fed else 1.0)

    def world_cap(op: str, cores: float, share: float = 1.0, fed: bool = False) -> float:
        return (cores - OVERHEAD) / per_record(op, share, fed)

    c_src = world_cap("bids_source", QUOTA)
    phases: list[PhaseRecord] = []
    plan: list[tuple[str, str, float, dict[str, float], str | None]] = [
        ("coldstart" if k == 0 else f"coldstart-{k + 1}", "coldstart",
         (cold_offered[k] if k < len(cold_offered) else 1.2) * c_src, {}, None)
        for k in range(len(cold_taus))]
    plan.append(("warmup", "warmup", 0.2 * c_src, {}, None))
    cold_tau = dict(zip([p[0] for p in plan], cold_taus, strict=False))
    plan += [(f"ladder-{i}", "ladder", f * c_src, {}, None) for i, f in enumerate((0.2, 0.45, 0.7))]
    plan += [(f"spread-{i}", "spread", f * c_src, {}, None) for i, f in enumerate(spread)]
    plan.append(("overload", "overload", 2.0 * c_src, {}, None))
    for op in ops:
        for s in (0.5, 0.25):
            plan.append((f"share-{op}-{s:g}", "share", 2.0 * c_src, {op: s}, op))
    if backlogged_busy is not None:
        plan.append((f"bottleneck-{target}", "bottleneck", 3.0 * c_src, {}, target))
    rows = []
    counters = {op: [0.0, 0.0, 0.0, 0.0] for op in ops}  # rec_in, rec_out, proc_cpu_s, jvm_time_ns
    t = 0.0
    length = 30
    pending = 0.0
    extra_subtasks: dict[tuple[str, int], list[float]] = {}  # counters of the operators' 2nd and 3rd subtasks
    # Flink's busy and backpressured gauges report the mean of the last GAUGE_WINDOW_S seconds since the task
    # started: each operator's true reading level per second since the job's latest (re)start
    levels: dict[str, list[float]] = {op: [] for op in ops}
    bp_levels: dict[str, list[float]] = {op: [] for op in ops}
    # ... and their noise likewise, per subtask: each second's own draw (sd busy_sd x sqrt(5): a 5-s interval's mean
    # has sd busy_sd where the reading is a half, less towards 0 and 1: fit.time_share_shape), a reading the mean
    # of its window's
    noise: dict[tuple[str, int], list[float]] = {}
    last_par: dict[str, int] | None = None
    for name, kind, rate, shares, target in plan:
        wide_par = {op: (spread_par or {}).get(op, 2) for op in ops}
        # a bottleneck phase scales out the source (a non-source target's upstream) or, the source's, its downstream
        scaled = ({op for op in ops if (op == "bids_source") != (target == "bids_source")} if kind == "bottleneck"
                  else set())
        par = {op: 3 if op in scaled else wide_par[op] if kind == "spread" else 1 for op in ops}
        fed = {op: j > 0 and par[ops[j - 1]] >= 2 for j, op in enumerate(ops)}  # fed by a scaled-out operator
        warm_caps = {op: par[op] * world_cap(op, QUOTA * shares.get(op, 1.0), shares.get(op, 1.0), fed[op])
                     for op in ops}  # the operator's total
        rec = PhaseRecord(name=name, kind=kind, t0=t, settle_s=0.0 if kind == "coldstart" else 5.0, rate=rate,
                          operator=target, parallelism=par,
                          shares={op: shares.get(op, 1.0) for op in ops}, state_bytes=math.nan)
        if kind == "coldstart" or (last_par is not None and par != last_par):
            # a new job (on fresh topics: its backlog starts at 0), or the job restarted in another layout: its
            # tasks' counters and gauges start afresh
            counters = {op: [0.0, 0.0, 0.0, 0.0] for op in ops}
            extra_subtasks.clear()
            levels = {op: [] for op in ops}
            bp_levels = {op: [] for op in ops}
            noise = {}
        last_par = par
        if kind == "coldstart":
            rec.extra = {"bin_s": 10.0}
            pending = 0.0
        busy_now: dict[tuple[str, int], float] = {}
        bp_now = {op: 0.0 for op in ops}
        if kind == "spread":  # the driver starts the spread layout from an empty queue (the cold start's is drained)
            pending = 0.0
        for second in range(90 if kind == "coldstart" else spread_s if kind == "spread" else length):
            f = warm_fraction(second + 0.5, cold_tau[name]) if kind == "coldstart" else 1.0
            caps = {op: c * f for op, c in warm_caps.items()}
            # a cold start's job works off what queued during its dead time once it can (elsewhere the rate is taken)
            # records/s through the pipeline (selectivity 1 until the sink)
            x = min([rate + (pending if kind == "coldstart" else 0.0)] + [caps[op] for op in ops])
            bottleneck = min(ops, key=lambda o: caps[o]) if x < rate else None
            t += 1.0
            pending += rate - x
            for j, op in enumerate(ops):
                u = x / caps[op] if caps[op] > 0 else 0.0
                cores = OVERHEAD + (per_record(op, shares.get(op, 1.0), fed[op]) * x / f if f > 0 else 0.0)
                upstream = bottleneck is not None and ops.index(op) < ops.index(bottleneck)
                level = BUSY_OFFSET + BUSY_GAIN * u if par[op] == 1 else WIDE_OFFSET + WIDE_GAIN * u
                if kind == "bottleneck" and op == bottleneck and backlogged_busy is not None:
                    level = backlogged_busy
                if kind == "spread" and op == bottleneck and limited_busy is not None:
                    level = limited_busy
                levels[op].append(min(level, 1.0))
                bp_level = (1 - u) if upstream else 0.0
                if kind == "bottleneck" and upstream and upstream_bp is not None:
                    bp_level = upstream_bp
                bp_levels[op].append(bp_level)
                window = int(GAUGE_WINDOW_S)
                for sub in range(par[op]):
                    own = noise.setdefault((op, sub), [])
                    own.append(rng.normal(0, busy_sd * math.sqrt(5 * fit.time_share_shape(levels[op][-1]))))
                    if second % 5 == 0:  # the meter updates every 5 s: the mean of its window, noise and all
                        busy_now[(op, sub)] = float(np.clip(np.mean(levels[op][-window:]) + np.mean(own[-window:]),
                                                            0, 1))
                    bp_now[op] = float(np.mean(bp_levels[op][-window:]))
                feeds = ops[j + 1] if j + 1 < len(ops) else None
                u_down = x / caps[feeds] if feeds is not None and caps[feeds] > 0 else 0.0
                bp_read = bp_now[op]
                for sub in range(par[op]):  # each subtask takes its share of the records
                    c = counters[op] if sub == 0 else extra_subtasks.setdefault((op, sub), [0.0] * 4)
                    xs, cs = x / par[op], OVERHEAD + (cores - OVERHEAD) / par[op]
                    if kind == "spread":  # a scaled-out task manager burns more (q1's source: its quota at any load)
                        cs += SPREAD_EXTRA_CORES
                    c[0] += xs
                    c[1] += xs * SEL[op]
                    c[2] += cs
                    c[3] += cs * 1e9
                    rows.append({
                        "t": t, "phase": name, "tm": f"tm-{j}-{sub}", "operator": op, "subtask": sub,
                        "busy_ms": busy_now.get((op, sub), 0.0) * 1000, "bp_ms": bp_read * 1000,
                        "idle_ms": 0.0, "is_bp": float(upstream or (near_flag is not None and feeds is not None
                                                                   and rng.random() < near_flag(u_down))),
                        "rec_in": 0.0 if op == "bids_source" else c[0],
                        "rec_out": c[1] if op != "bids_source" else c[0], "proc_cpu_s": c[2], "jvm_time_ns": c[3],
                        "jvm_load": 0.97 * cs / (QUOTA * shares.get(op, 1.0)) + rng.normal(0, 0.02),
                        "pending": pending / par[op] if op == "bids_source" else None,
                        "quota": QUOTA * shares.get(op, 1.0),
                    })
        rec.t1 = t
        if kind == "overload":
            rec.extra["throughput"] = x
        phases.append(rec)
    for method, base in (("in_place", 4.0), ("savepoint", 9.0)):
        for direction in ("up", "down"):
            extra = {"method": method, "direction": direction, "ok": True, "downtime_s": base + rng.normal(0, 0.3),
                     "state_bytes_before": 1e6}
            if direction == "up":
                extra["startup_s"] = 25.0 + rng.normal(0, 1)
            else:
                extra["stop_s"] = 2.0
            phases.append(PhaseRecord(name=f"rescale-{method}-{direction}", kind="rescale", t0=t, t1=t + 10,
                                      extra=extra))
            t += 10
    host = pd.DataFrame({"t": [0.0, t], "phase": ["warmup", "end"], "load1": [0.5, 0.7], "host_busy": [0.2, 0.3]})
    return Measurement("q1", QUOTA, phases, pd.DataFrame(rows), host, {"load_before": [0.4, 0.5, 0.6]})


def provenance() -> Provenance:
    return Provenance(date="2026-11-26T06:00:00+00:00", command="bench calibrate --query q1", cpu_model="test CPU",
                      host_cpus=2, flink_version="2.2.1", kafka_version="4.1.1", taskmanager_cpu_quota=QUOTA,
                      host_load=HostLoad(before_1m=math.nan), duration_s=300.0)


@pytest.fixture(scope="module")
def fitted() -> QueryProfile:
    return build_profile(synthetic_measurement(), load_topology("q1"), provenance())


def test_fit_recovers_capacities_at_every_share(fitted: QueryProfile) -> None:
    for op in K:
        p = fitted.operators[op]
        assert p.capacity == pytest.approx(cap(op, QUOTA), rel=0.03), op
        assert p.capacity_fit.cores_per_record == pytest.approx(K[op], rel=0.05), op
        assert p.capacity_fit.capacity(0.25 * QUOTA) == pytest.approx(cap(op, 0.25 * QUOTA), rel=0.05), op
    # the source saturates at share 1.0 and at both lower shares; the others only when throttled
    src_points = [pt for pt in fitted.operators["bids_source"].shares if pt.saturated]
    assert {pt.share for pt in src_points} == {0.25, 0.5, 1.0}
    assert not [pt for pt in fitted.operators["map"].shares if pt.saturated and pt.share == 1.0]


def test_fit_recovers_cpu_per_record_idle_cpu_and_selectivity(fitted: QueryProfile) -> None:
    for op in K:
        cpu = fitted.operators[op].cpu
        assert cpu.cores_per_record == pytest.approx(K[op], rel=0.03)
        assert cpu.idle_cores == pytest.approx(OVERHEAD, abs=0.003)
        assert cpu.saturated_fraction == pytest.approx(1.0, abs=0.02) or op == "sink"
    assert fitted.operators["map"].selectivity == pytest.approx(1.0, rel=1e-6)
    assert fitted.operators["sink"].selectivity == pytest.approx(0.0, abs=1e-9)


def test_fit_recovers_the_busy_readings_bias_noise_and_meter_interval(fitted: QueryProfile) -> None:
    busy = fitted.operators["map"].readings.busy
    assert busy.gain == pytest.approx(BUSY_GAIN, abs=0.05)
    assert busy.offset == pytest.approx(BUSY_OFFSET, abs=0.03)
    assert busy.noise_basis == NoiseBasis.INTERVAL
    assert busy.sd(0.5) == pytest.approx(BUSY_SD, rel=0.4)  # the line reads a half there
    assert busy.sd(0.0) < 0.6 * busy.sd(0.5)  # it reads about 0.05 there: a share of time near 0 scatters less
    assert fitted.meters.interval_s == pytest.approx(5.0, abs=0.5)
    # backpressure of the source while map is throttled to its bottleneck: 1 - utilisation, read exactly
    bp = fitted.operators["bids_source"].readings.backpressured
    assert bp.gain == pytest.approx(1.0, abs=0.05) and bp.offset == pytest.approx(0.0, abs=0.03)
    # the JVM's load is relative to the cgroup quota in force (JDK 17 is container-aware)
    assert fitted.operators["map"].readings.cpu_jvm.gain == pytest.approx(0.97, rel=0.05)
    assert fitted.operators["map"].readings.cpu.gain == pytest.approx(1.0, rel=0.05)


def test_a_bottleneck_with_records_at_its_input_reads_its_own_busy_level_and_the_line_stays() -> None:
    """A `bottleneck` phase (the source scaled out, the map the job's only bottleneck, the source held back by
    it) measures the map's busy reading with records waiting at its input apart from the line; the line and
    the capacities come out as without it, and a profile without such a phase leaves the level unmeasured."""
    with_phase = build_profile(synthetic_measurement(backlogged_busy=0.6), load_topology("q1"), provenance())
    without = build_profile(synthetic_measurement(), load_topology("q1"), provenance())
    busy = with_phase.operators["map"].readings.busy
    assert busy.backlogged_mean == pytest.approx(0.6, abs=0.03)
    assert busy.backlogged_n == 1
    # one plateau's few successive updates, sharing their intervals, tell its noise with a degree of freedom or
    # two: no sd of its own (the sim draws the line's at full load)
    assert math.isnan(busy.backlogged_sd)
    assert busy.gain == pytest.approx(BUSY_GAIN, abs=0.05) and busy.offset == pytest.approx(BUSY_OFFSET, abs=0.03)
    assert with_phase.operators["map"].capacity == pytest.approx(cap("map", QUOTA), rel=0.05)
    # the source reading its backlog in the overload phase (this system's bottleneck there) is one too, and
    # reads its line's level at full utilisation; its 3 subtasks held back by the map are not
    src = with_phase.operators["bids_source"].readings.busy
    assert src.backlogged_mean == pytest.approx(BUSY_OFFSET + BUSY_GAIN, abs=0.03)
    assert src.backlogged_n == without.operators["bids_source"].readings.busy.backlogged_n
    assert math.isnan(without.operators["map"].readings.busy.backlogged_mean)
    assert without.operators["map"].readings.busy.backlogged_n == 0


def test_an_operator_fed_by_a_scaled_out_one_gets_the_capacity_its_own_bottleneck_phase_measured() -> None:
    """A map slower than its source saturates at share 1.0 fed by one source subtask (overload); its bottleneck
    phase (the source at 3 subtasks) measures it fed by several. Where a record costs it 25 % more there, the
    profile says 1 / 1.25 of the capacity, which the phases fed by one subtask still give; where it costs nothing
    more, about 1. Where no phase fed by one subtask saturated it at share 1.0 (the source limited the overload),
    the fed plateaus stay out of its capacity all the same: the line through its lower shares is read at 1.0, and
    the fed fraction set against it. With no bottleneck phase, and for a source: nothing measured (None, not 1)."""
    topo = load_topology("q1")
    slow_map = {"map": 3.0e-5}  # slower than the source (2e-5): the overload phase saturates the map

    def build(**kw: Any) -> QueryProfile:
        return build_profile(synthetic_measurement(**kw), topo, provenance())

    dearer = build(backlogged_busy=0.6, fed_cost=0.25, costs=slow_map)
    fed = dearer.operators["map"].fed_scaled_out
    world = (QUOTA - OVERHEAD) / slow_map["map"]
    assert fed is not None and fed.fraction == pytest.approx(1 / 1.25, rel=0.03)
    assert fed.upstream_subtasks == [3] and fed.phases == ["bottleneck-map"]
    assert fed.rate == pytest.approx(world / 1.25, rel=0.03)
    assert dearer.operators["map"].capacity == pytest.approx(world, rel=0.05)
    same = build(backlogged_busy=0.6, costs=slow_map).operators["map"].fed_scaled_out
    assert same is not None and same.fraction == pytest.approx(1.0, rel=0.03)
    assert build(costs=slow_map).operators["map"].fed_scaled_out is None  # no bottleneck phase
    limited = build(backlogged_busy=0.6, fed_cost=0.25).operators["map"]  # the source limited the overload
    cheap = (QUOTA - OVERHEAD) / K["map"]  # the synthetic map's own cost
    assert limited.capacity == pytest.approx(cheap, rel=0.05)  # the one-channel line, not the fed rate
    assert limited.fed_scaled_out is not None and limited.fed_scaled_out.fraction == pytest.approx(1 / 1.25, rel=0.03)
    # the same for a map that keeps state: no saturation fed by one subtask to tell the channels' cost from the state's
    keyed = replace(topo, operators=tuple(
        replace(op, state_bytes_per_record=8.0) if op.name == "map" else op for op in topo.operators))
    stateful = build_profile(synthetic_measurement(backlogged_busy=0.6, fed_cost=0.25), keyed, provenance())
    assert stateful.operators["map"].fed_scaled_out is None
    assert dearer.operators["bids_source"].fed_scaled_out is None
    # the sink, fed by the map at one subtask in the map's phase, is not measured by it
    assert dearer.operators["sink"].fed_scaled_out is None


def test_a_stateful_operators_fed_capacity_counts_only_a_bottleneck_phase_within_the_state_it_was_measured_at() -> None:
    """A fed fraction sets the bottleneck phase's rate against saturations fed by one subtask: for an operator that
    keeps state, a phase holding more state per subtask than the largest of those mixes what came with the larger
    state into it (q11's window, session 27: 0.48 at 7.1 MB ten minutes in, where fixed layouts on a fresh backlog
    gave 0.82-0.93 of the one-channel rate behind 2-3 source subtasks), and is left out; one within it, or with its
    state unknown (NaN or 0: not read), counts."""
    topo = load_topology("q1")
    keyed = replace(topo, operators=tuple(
        replace(op, state_bytes_per_record=8.0) if op.name == "map" else op for op in topo.operators))

    def fed(bottleneck_state: float, overload: float = 1e6, share: float = 3e6, topology: Any = keyed) -> Any:
        """The map's one-channel saturations at share 1.0: the overload phase and the sink's share-0.5 phase."""
        m = synthetic_measurement(backlogged_busy=0.6, fed_cost=0.25, costs={"map": 3.0e-5})
        for ph in m.phases:
            ph.state_bytes = (bottleneck_state if ph.name == "bottleneck-map" else
                              overload if ph.kind == "overload" else share)
        return build_profile(m, topology, provenance()).operators["map"].fed_scaled_out

    within = fed(2.5e6)  # above the overload's state, under the share phase's: the largest one counts
    assert within is not None and within.fraction == pytest.approx(1 / 1.25, rel=0.03)
    assert fed(3e6) is not None  # as much as the largest: kept
    assert fed(3.1e6) is None  # more state than any phase fed by one subtask: not the channels' cost alone
    assert fed(7e6, overload=math.nan, share=0.0) is not None  # nothing known to compare it with: kept
    assert fed(math.nan) is not None and fed(0.0) is not None  # its own state not read: kept
    assert fed(7e6, topology=topo) is not None  # an operator keeping no state: its job's state says nothing of it


def test_a_source_behind_a_slower_operator_gets_its_full_share_capacity_from_its_own_bottleneck_phase() -> None:
    """A source cheaper than its map never saturates at share 1.0 in the overload phase (the map limits), so
    without its own bottleneck phase its capacity comes from its lower shares, where a throttled task manager
    spends more per record: the line through them falls far under its real capacity (q11's source at 0.1 CPU:
    22.1k/s fitted, 27-32k/s per subtask read from a run's backlog). Its bottleneck phase (map and sink at 3
    subtasks, a backlog) saturates it at its full share: the capacity there is measured, the map's is unchanged,
    and the source's busy reading of its backlog there is its backlogged level."""
    world = {"costs": {"bids_source": 0.8e-5}, "throttled_cost": 1.0}
    truth = (QUOTA - OVERHEAD) / 0.8e-5  # the source at share 1.0: 28.75k/s, the map 23k/s
    without = build_profile(synthetic_measurement(**world), load_topology("q1"), provenance())
    with_phase = build_profile(synthetic_measurement(backlogged_busy=0.7, target="bids_source", busy_sd=0.01,
                                                     **world), load_topology("q1"), provenance())
    src_without, src = without.operators["bids_source"], with_phase.operators["bids_source"]
    assert src_without.capacity < 0.8 * truth  # the lower shares' line: about 20k/s
    assert src.capacity == pytest.approx(truth, rel=0.03)
    assert sorted(p.share for p in src.shares if p.saturated) == [0.25, 0.5, 1.0]
    for prof in (without, with_phase):  # the map limited the overload phase in both
        assert prof.operators["map"].capacity == pytest.approx(cap("map", QUOTA), rel=0.03)
    assert src.readings.busy.backlogged_mean == pytest.approx(0.7, abs=0.03)
    assert math.isnan(src_without.readings.busy.backlogged_mean)


def test_a_scaled_out_operator_that_limited_a_sources_bottleneck_phase_stays_out_of_its_scaled_out_line() -> None:
    """A map too slow for the source even at 3 subtasks limits the source's bottleneck phase instead: its plateau
    there reads the saturated regime (here 0.95 busy), not a free scaled-out subtask's, so the map's scaled-out line
    comes from its free spread plateaus alone (the WIDE line)."""
    world = {"costs": {"bids_source": 0.8e-5, "map": 3.0e-5}, "spread": (0.15, 0.3, 0.45)}
    prof = build_profile(synthetic_measurement(backlogged_busy=0.95, target="bids_source", **world),
                         load_topology("q1"), provenance())
    wide = prof.operators["map"].readings.busy_scaled_out
    assert wide is not None
    assert wide.offset == pytest.approx(WIDE_OFFSET, abs=0.05) and wide.gain == pytest.approx(WIDE_GAIN, abs=0.08)


def test_a_saturated_operator_is_backlogged_only_when_it_holds_its_upstream_back_and_was_the_phases_target() -> None:
    """q1's map at 0.1 CPU saturated in the overload phase with its source 1-4 % backpressured: nothing queued at
    its input, so its reading stays in the line. And a bottleneck phase for the sink in which the map limited
    instead measures no one subtask of anything: the map there is neither a capacity point nor backlogged."""
    topo = load_topology("q1")
    light = build_profile(synthetic_measurement(backlogged_busy=0.6, upstream_bp=0.03), topo, provenance())
    assert math.isnan(light.operators["map"].readings.busy.backlogged_mean)
    wrong = build_profile(synthetic_measurement(backlogged_busy=0.6, target="sink"), topo, provenance())
    assert math.isnan(wrong.operators["map"].readings.busy.backlogged_mean)
    assert math.isnan(wrong.operators["sink"].readings.busy.backlogged_mean)  # the sink never saturated there
    base = build_profile(synthetic_measurement(), topo, provenance())
    assert [p for p in wrong.operators["map"].shares if p.saturated] == \
        [p for p in base.operators["map"].shares if p.saturated]


def test_the_backlogged_level_is_the_mean_of_plateau_means_and_one_updates_sd_within_a_plateau() -> None:
    """The sd pooled over the plateaus as a ratio of sums: squares about each plateau's mean over its degrees of
    freedom (2 + 4 here), so a plateau of few updates weighs as little as it tells."""
    from harness.calibrated_profile import GaugeModel

    level = fit.with_backlogged(GaugeModel(), [np.array([0.80, 0.82, 0.84]), np.array([0.90, 0.92, 0.94, 0.96, 0.98]),
                                               np.array([0.5])])  # one update: no plateau of its own
    assert level.backlogged_mean == pytest.approx((0.82 + 0.94) / 2)
    squares = 2 * 0.02**2 + 4 * np.var([0.9, 0.92, 0.94, 0.96, 0.98], ddof=1)
    assert level.backlogged_sd == pytest.approx(math.sqrt(squares / (2 + 4)))
    assert level.backlogged_n == 2
    none = fit.with_backlogged(GaugeModel(), [np.array([0.5]), np.array([math.nan, 0.7])])
    assert math.isnan(none.backlogged_mean) and math.isnan(none.backlogged_sd) and none.backlogged_n == 0


def test_scaled_out_subtasks_read_a_busy_line_of_their_own_and_one_subtask_keeps_its_line(tmp_path: Path) -> None:
    """q1's source at 0.1 CPU reads 0.5-0.7 busy at one subtask whatever its load, close to its utilisation at 2-4:
    the spread phase's plateaus (every operator at 2 subtasks) give each operator a busy line at two or more
    subtasks, the ladder's the line at one; capacities and the CPU model do not move."""
    topo = load_topology("q1")
    spread = build_profile(synthetic_measurement(spread=(0.4, 1.0, 1.6), spread_s=120), topo, provenance())
    base = build_profile(synthetic_measurement(), topo, provenance())
    for op in K:  # the spread phase's task managers each carry a part: not in the CPU model's line
        assert spread.operators[op].capacity == pytest.approx(base.operators[op].capacity, rel=0.02)
        assert spread.operators[op].cpu.cores_per_record == pytest.approx(base.operators[op].cpu.cores_per_record,
                                                                          rel=0.02)
    # the sink at 2 subtasks ran at 5-20 % busy only: too narrow a range to extrapolate, the line at one reads it
    assert spread.operators["sink"].readings.busy_scaled_out is None
    assert spread.operators["sink"].readings.busy_at(2) is spread.operators["sink"].readings.busy
    for op in ("bids_source", "map"):  # at 20-80 % and 10-40 %
        r = spread.operators[op].readings
        assert r.busy.offset == pytest.approx(BUSY_OFFSET, abs=0.03) and r.busy.gain == pytest.approx(BUSY_GAIN,
                                                                                                      abs=0.06)
        wide = r.busy_scaled_out
        assert wide is not None and r.scaled_out_subtasks == [2]
        assert wide.offset == pytest.approx(WIDE_OFFSET, abs=0.03) and wide.gain == pytest.approx(WIDE_GAIN, abs=0.1)
        assert r.busy_at(1) is r.busy and r.busy_at(2).gain == wide.gain and r.busy_at(5).offset == wide.offset
        # the backlogged level measured at one subtask holds scaled out (the sim's bottleneck reading)
        assert r.busy_at(2).backlogged_mean == pytest.approx(r.busy.backlogged_mean, nan_ok=True)
        # not measured: None, and the line at one subtask reads every parallelism (never a made-up line)
        assert base.operators[op].readings.busy_scaled_out is None
        assert base.operators[op].readings.busy_at(3) is base.operators[op].readings.busy
    # one scaled-out plateau makes no line (the source held back at 3 subtasks in a bottleneck phase), nor do
    # plateaus over too narrow a range of loads to extrapolate (the source at 2 subtasks at 20-30 % busy here)
    one = build_profile(synthetic_measurement(backlogged_busy=0.6), topo, provenance())
    assert one.operators["bids_source"].readings.busy_scaled_out is None
    narrow = build_profile(synthetic_measurement(spread=(0.4, 0.5, 0.6)), topo, provenance())
    assert narrow.operators["bids_source"].readings.busy_scaled_out is None
    assert narrow.operators["bids_source"].readings.scaled_out_subtasks == []
    # readings that fall as the load grows measured no line (their windows held more than the load did)
    from harness.calibration.build import scaled_out_line

    rising = [np.array([0.3, 0.32]), np.array([0.4, 0.42]), np.array([0.5, 0.52])]
    assert scaled_out_line(fit.Reads.independent([0.2, 0.4, 0.6], rising)) is not None
    assert scaled_out_line(fit.Reads.independent([0.2, 0.4, 0.6], rising[::-1])) is None
    # both round-trip through the profile file (not measured stays None, not a default line)
    spread.save(tmp_path / "spread")
    base.save(tmp_path / "base")
    back, back_base = load_profile("q1", tmp_path / "spread"), load_profile("q1", tmp_path / "base")
    assert back is not None and back_base is not None
    wide_back = back.operators["map"].readings.busy_scaled_out
    assert wide_back is not None and wide_back.gain == pytest.approx(
        spread.operators["map"].readings.busy_scaled_out.gain, rel=1e-4)  # type: ignore[union-attr]
    assert back_base.operators["map"].readings.busy_scaled_out is None


def test_spread_plateaus_at_three_and_two_subtasks_make_each_operator_its_line_and_a_limited_one_stays_out() -> None:
    """The spread layout gives each operator 2-3 subtasks (q1 at 0.1 CPU: 3/3/2). Each operator's scaled-out line
    comes from its own plateaus at whatever count it ran. A spread phase whose rate the layout could not take (the
    source's three subtasks at their capacity, reading a saturated 0.95 busy; the map's task managers at their CPU
    limit) measures the saturated regime, not free subtasks: it stays out of every operator's line."""
    topo = load_topology("q1")
    layout = {"bids_source": 3, "map": 2, "sink": 2}
    levels = (0.6, 1.2, 1.8, 2.4)  # the source's three subtasks at 20-80 % of what they take
    quiet = 0.01  # the layouts' lines, not the noise, are under test: a quieter world
    free = build_profile(synthetic_measurement(spread=levels, spread_par=layout, busy_sd=quiet), topo, provenance())
    limited = build_profile(synthetic_measurement(spread=(*levels, 3.5), spread_par=layout, limited_busy=0.95,
                                                  busy_sd=quiet), topo, provenance())
    base = build_profile(synthetic_measurement(), topo, provenance())
    for prof in (free, limited):
        src, mp = prof.operators["bids_source"].readings, prof.operators["map"].readings
        assert src.scaled_out_subtasks == [3] and mp.scaled_out_subtasks == [2]
        for r in (src, mp):
            assert r.busy_scaled_out is not None
            assert r.busy_scaled_out.offset == pytest.approx(WIDE_OFFSET, abs=0.03)
            assert r.busy_scaled_out.gain == pytest.approx(WIDE_GAIN, abs=0.1)
            assert r.busy_at(1).gain == pytest.approx(BUSY_GAIN, abs=0.06)  # one subtask keeps its own line
        assert prof.operators["sink"].readings.busy_scaled_out is None  # 7-30 % busy only: too narrow a range
        for op in K:
            assert prof.operators[op].capacity == pytest.approx(base.operators[op].capacity, rel=0.02)


def test_a_full_plan_spreads_every_operator_out_and_quick_does_not() -> None:
    from harness.calibration.plan import SPREAD, plan_for

    topo = load_topology("q1")
    full, quick = plan_for(topo, False), plan_for(topo, True)
    assert full.spread == SPREAD and quick.spread == ()
    without = type(full)(**{**full.__dict__, "spread": ()})
    assert full.measure_s - without.measure_s == pytest.approx(len(SPREAD) * full.durations.level_s)
    assert full.estimate_s > without.estimate_s + full.measure_s - without.measure_s


def test_a_full_plan_starts_cold_three_times_and_quick_once_each_costing_its_minute_and_a_job_start() -> None:
    from harness.calibration.plan import COLDSTARTS, plan_for

    topo = load_topology("q1")
    full, quick = plan_for(topo, False), plan_for(topo, True)
    assert full.coldstarts == COLDSTARTS == 3 and quick.coldstarts == 1
    once = replace(full, coldstarts=1)
    assert full.measure_s - once.measure_s == pytest.approx(2 * full.durations.cold_s)
    assert full.estimate_s - once.estimate_s > full.measure_s - once.measure_s  # and a job start each


def test_a_full_plan_makes_each_operator_the_bottleneck_in_turn_the_sources_last_and_quick_none() -> None:
    from harness.calibration.plan import plan_for

    topo = load_topology("q1")
    full, quick = plan_for(topo, False), plan_for(topo, True)
    assert full.bottlenecks == ("map", "sink", "bids_source") and quick.bottlenecks == ()
    assert plan_for(load_topology("q11"), False).bottlenecks == ("session_window", "sink", "bids_source")
    q8 = plan_for(load_topology("q8"), False).bottlenecks
    srcs = [op.name for op in load_topology("q8").operators if op.is_source]
    assert len(srcs) == 2 and list(q8[-2:]) == srcs and not set(srcs) & set(q8[:-2])
    without = plan_for(topo, False)
    without = type(without)(**{**without.__dict__, "bottlenecks": ()})
    assert full.measure_s > without.measure_s and full.estimate_s > without.estimate_s


def test_a_subtask_flagged_beside_an_operator_near_its_limit_gets_the_flag_model_and_held_back_plateaus_stay_out(
) -> None:
    # the map slower than the source (12.8k/s against 11.5k/s at share 1.0): the ladder runs it at 0.18, 0.40 and
    # 0.63 of its capacity, the overload (the source limits) at 0.90; where the sink or the map limits at a lower
    # share the source is held back and flagged in every sample, which must not count
    m = synthetic_measurement(costs={"map": 1.8e-5}, near_flag=lambda u: 0.2 if u >= 0.5 else 0.0, seed=5)
    prof = build_profile(m, load_topology("q1"), provenance())
    flag = prof.operators["bids_source"].readings.flagged_near
    assert flag is not None and len(flag.points) >= 4  # (0, 0) and at least three bins
    assert flag.probability(0.2) <= 0.05
    # (with the held-back share-sink-0.25 plateau, the map at 0.66 there and the source flagged throughout: ~0.5)
    assert 0.05 <= flag.probability(0.65) <= 0.35
    assert 0.05 <= flag.probability(0.9) <= 0.35
    ps = [p for _, p in flag.points]
    assert ps == sorted(ps)
    # the map feeds the sink: at 0.1 of its capacity (share 1.0) never flagged, at 0.55 (share 0.5) as the world says
    near_sink = prof.operators["map"].readings.flagged_near
    assert near_sink is not None
    assert near_sink.probability(0.1) <= 0.05 and 0.05 <= near_sink.probability(0.55) <= 0.35
    assert prof.operators["sink"].readings.flagged_near is None  # it feeds nothing
    # a plateau whose source took twice what was offered (the job working off a backlog its pending reading may
    # miss: a ladder's first step after the probe, a deployment after its restart) is no point of the model
    caught_up = replace(m, phases=[replace(p, rate=p.rate / 2) if p.name == "ladder-2" else p for p in m.phases])
    again = build_profile(caught_up, load_topology("q1"), provenance()).operators["bids_source"].readings
    assert again.flagged_near is not None
    assert not [u for u, _ in again.flagged_near.points if 0.6 <= u < 0.8]


def test_the_flag_model_pools_its_plateaus_per_utilisation_bin_and_never_falls_as_the_utilisation_rises() -> None:
    flag = fit.flag_model([(0.1, 0.0, 10), (0.3, 0.1, 10), (0.5, 0.0, 30), (0.7, 0.06, 20), (0.9, 0.3, 10),
                           (math.nan, 1.0, 10), (0.8, 1.0, 0)])
    assert flag is not None and flag.n == 80
    us, ps = zip(*flag.points, strict=True)
    assert us == pytest.approx((0.0, 0.2, 0.5, 0.7, 0.9))  # from (0, 0): an idle downstream fills no buffer
    # the first bin's 0.05 (20 samples) is above the second's 0.0 (30): pooled to 0.02 over both
    assert ps == pytest.approx((0.0, 0.02, 0.02, 0.06, 0.3))
    assert flag.probability(0.0) == 0.0 and flag.probability(0.1) == pytest.approx(0.01)
    assert flag.probability(1.5) == pytest.approx(0.3)
    assert flag.probability(0.8) == pytest.approx(0.18)
    assert fit.flag_model([(math.nan, 0.5, 3)]) is None


def test_fit_recovers_start_up_and_downtime(fitted: QueryProfile) -> None:
    assert fitted.taskmanager_startup_s.mean == pytest.approx(25.0, abs=2.0)
    assert fitted.taskmanager_startup_s.n == 2
    assert fitted.rescale_downtime["in_place"].downtime(1e6) == pytest.approx(4.0, abs=0.6)
    assert fitted.rescale_downtime["savepoint"].downtime(1e6) == pytest.approx(9.0, abs=0.6)
    assert fitted.provenance.host_load.before_1m == pytest.approx(0.4)
    assert fitted.provenance.host_load.during_mean_1m == pytest.approx(0.6)


def test_profile_round_trips_through_yaml(tmp_path: Path, fitted: QueryProfile) -> None:
    fitted.save(tmp_path)
    back = load_profile("q1", tmp_path)
    assert back is not None
    assert back.operators["map"].capacity == pytest.approx(fitted.operators["map"].capacity, rel=1e-4)
    assert back.meters.busy_lag_s == pytest.approx(fitted.meters.busy_lag_s, rel=1e-3, nan_ok=True)
    assert "bench calibrate" in (tmp_path / f"q1.cpu-{QUOTA:g}.yaml").read_text().splitlines()[0]


def test_the_measuring_hosts_speed_round_trips_and_an_older_profile_has_none(tmp_path: Path,
                                                                           fitted: QueryProfile) -> None:
    """The probe (harness.host_speed) taken when the query was measured; a profile written before it was
    recorded loads as None (not measured), never 0."""
    measured = fitted.model_copy(update={"provenance": fitted.provenance.model_copy(
        update={"host_speed_sha256_mb": 1234.5})})
    path = measured.save(tmp_path)
    back = load_profile("q1", tmp_path)
    assert back is not None and back.provenance.host_speed_sha256_mb == 1234.5
    older = "".join(line for line in path.read_text().splitlines(keepends=True) if "host_speed_sha256_mb" not in line)
    assert older != path.read_text()
    path.write_text(older)
    again = load_profile("q1", tmp_path)
    assert again is not None and again.provenance.host_speed_sha256_mb is None
    assert fitted.provenance.host_speed_sha256_mb is None  # a Provenance that was given none


def test_the_sim_carries_its_profiles_host_speed_and_none_when_the_profile_has_none(fitted: QueryProfile) -> None:
    from harness.backends.sim.config import SimConfig
    from harness.backends.sim.costs import run_costs

    measured = fitted.model_copy(update={"provenance": fitted.provenance.model_copy(
        update={"host_speed_sha256_mb": 1234.5})})
    topo = load_topology("q1")
    assert run_costs(topo, SimConfig(), QUOTA, profile=measured).host_speed_sha256_mb == 1234.5
    assert run_costs(topo, SimConfig(), QUOTA, profile=fitted).host_speed_sha256_mb is None


def test_the_sim_picks_the_profile_measured_nearest_its_cpus(tmp_path: Path, fitted: QueryProfile) -> None:
    """Profiles of one query at several quotas live side by side; capacity per CPU is not constant, so the one
    measured nearest (by ratio) the run's task-manager size is used, a tie going to the larger quota."""
    from harness.calibrated_profile import profile_path

    assert profile_path("q1", 0.1, tmp_path) is None and load_profile("q1", tmp_path, cores=0.1) is None
    for quota in (0.1, 0.4):
        fitted.model_copy(update={"cpu_quota": quota}).save(tmp_path)
    (tmp_path / "q11.cpu-0.2.yaml").write_text("not q1's")  # another query's file is never picked
    picks = {c: profile_path("q1", c, tmp_path).name for c in (0.05, 0.1, 0.15, 0.2, 0.25, 1.0, None)}  # type: ignore[union-attr]
    assert picks == {0.05: "q1.cpu-0.1.yaml", 0.1: "q1.cpu-0.1.yaml", 0.15: "q1.cpu-0.1.yaml",
                     0.2: "q1.cpu-0.4.yaml",  # the geometric middle of 0.1 and 0.4: the tie goes to the larger
                     0.25: "q1.cpu-0.4.yaml", 1.0: "q1.cpu-0.4.yaml", None: "q1.cpu-0.4.yaml"}
    assert load_profile("q1", tmp_path, cores=0.12).cpu_quota == 0.1  # type: ignore[union-attr]


def test_measurement_round_trips_and_plateaus_drop_the_settling_time(tmp_path: Path) -> None:
    m = synthetic_measurement()
    m.save(tmp_path / "q1")
    assert Measurement.complete(tmp_path / "q1")
    back = Measurement.load(tmp_path / "q1")
    assert [p.name for p in back.phases] == [p.name for p in m.phases]
    pls = plateaus(back)
    ladder0 = next(pl for pl in pls if pl.phase.name == "ladder-0" and pl.operator == "map")
    assert ladder0.samples.t.min() >= ladder0.phase.t0 + ladder0.phase.settle_s
    assert ladder0.p.rate_in == pytest.approx(0.2 * cap("bids_source", QUOTA), rel=1e-6)


# ---------------------------------------------------------------- primitives


def test_capacity_fit_uses_the_cores_really_used() -> None:
    cpu = CpuModel(idle_cores=0.02, cores_per_record=1e-5)
    pts = [SharePoint(share=1.0, capacity=23_000, saturated=True, cpu_cores=0.25),
           SharePoint(share=0.5, capacity=10_500, saturated=True, cpu_cores=0.125)]
    f = fit.capacity_fit(pts, cpu, QUOTA)
    assert f.cores_per_record == pytest.approx(1e-5, rel=0.01) and f.overhead_cores == pytest.approx(0.02, abs=1e-3)
    # a host that only granted 0.2 of the 0.25 cores: the same per-record cost, not a cheaper record
    one = fit.capacity_fit([SharePoint(share=1.0, capacity=18_000, saturated=True, cpu_cores=0.2)], cpu, QUOTA)
    assert one.cores_per_record == pytest.approx(1e-5, rel=0.01)
    none = fit.capacity_fit([], cpu, QUOTA)
    assert none.capacity(0.25) == pytest.approx(23_000) and "CPU model" in none.method


def test_an_operator_never_saturated_keeps_its_cpu_line_only_if_that_leaves_every_share_read_a_capacity() -> None:
    """q8's person source at 0.25 CPU (2026-11-29): never the bottleneck, its CPU flat, so its line's idle CPU
    (0.069 cores) was above share 0.25's 0.0625: the line gave that share no capacity although the source was
    seen running there. Unknown is not zero: the fit keeps the fastest rate seen as a lower bound instead."""
    seen = [SharePoint(share=1.0, capacity=12_600, saturated=False, cpu_cores=0.06),
            SharePoint(share=0.5, capacity=8_100, saturated=False, cpu_cores=0.047),
            SharePoint(share=0.25, capacity=2_000, saturated=False, cpu_cores=0.05)]
    flat = CpuModel(idle_cores=0.0687, cores_per_record=1.1e-7, r2=0.0001)
    f = fit.capacity_fit(seen, flat, QUOTA)
    assert "lower bound" in f.method
    for p in seen:  # every share the source was read at has at least the rate it was seen doing there
        assert f.capacity(p.share * QUOTA) >= p.capacity * (1 - 1e-9)
    # the same rates with a CPU line that leaves every share capacity: the line is kept (it already allows them)
    sloped = CpuModel(idle_cores=0.02, cores_per_record=4e-6, r2=0.8)
    g = fit.capacity_fit(seen, sloped, QUOTA)
    assert "CPU model" in g.method
    assert g.capacity(QUOTA) == pytest.approx((QUOTA - 0.02) / 4e-6, rel=0.01)


def test_gauge_model_noise_and_step_lag() -> None:
    rng = np.random.default_rng(1)
    levels = [0.2, 0.5, 0.8]
    readings = [0.1 + 0.8 * lv + rng.normal(0, 0.04, 200) for lv in levels]
    g = fit.gauge_model(levels, readings)
    assert g.offset == pytest.approx(0.1, abs=0.01) and g.gain == pytest.approx(0.8, abs=0.02)
    assert g.sd(0.5) == pytest.approx(0.04, rel=0.15)
    t = np.arange(20.0)
    reading = np.where(t < 10, 0.2, 0.8)
    assert fit.step_lag(t, reading, 5.0, 0.2, 0.8) == pytest.approx(5.0)
    assert math.isnan(fit.step_lag(t, reading, 5.0, 0.2, 0.2))
    assert list(fit.distinct_updates(np.array([1, 1, 2, 2, 2, 3, np.nan, 3]))) == [1, 2, 3]


def _windowed_updates(rng: np.random.Generator, sd: float, n: int, warm: int = 12) -> np.ndarray:
    """n successive updates of a 60-s gauge whose every 5-s interval draws its own noise (sd): each the mean of the
    last 12 intervals' (after `warm` intervals run)."""
    z = rng.normal(0, sd, warm + n)
    return np.array([z[max(0, k - 11):k + 1].mean() for k in range(warm, warm + n)])


def test_a_windowed_gauges_noise_is_fitted_per_interval_from_updates_that_share_them() -> None:
    """Four successive updates of a 60-s gauge share most of their intervals: their scatter is a small part of
    one reading's error. With their overlaps the fit recovers one interval's sd (a reading's is that / sqrt(12));
    taken as independent updates it would read about a tenth of it."""
    rng = np.random.default_rng(11)
    levels = [0.2, 0.5, 0.8] * 60
    at = np.arange(100.0, 120.0, 5.0)  # four updates 5 s apart, an hour after any restart
    overlap = noise_overlap(at, np.array([0.0]))
    readings = [0.1 + 0.8 * lv + _windowed_updates(rng, 0.2, 4) for lv in levels]
    windowed = fit.gauge_model(levels, readings, overlaps=[overlap] * len(levels))
    assert windowed.noise_basis == NoiseBasis.INTERVAL
    assert windowed.sd(0.5) == pytest.approx(0.2, rel=0.15)
    # what a reading's error is: the fit's residual sd, one interval's sd / sqrt(12)
    assert windowed.rmse == pytest.approx(0.2 / math.sqrt(12), rel=0.15)
    plain = fit.gauge_model(levels, readings)
    assert plain.noise_basis == NoiseBasis.UPDATE and plain.sd(0.5) < 0.4 * windowed.rmse
    # the error a deployment keeps, net of its updates' shared noise (which averaging four does not remove)
    ratios = []
    for _ in range(200):
        errors = rng.normal(0, 0.05, 5)
        deps = [0.5 + e + _windowed_updates(rng, 0.2, 4) for e in errors]
        g = fit.gauge_model([0.5] * 5, deps, deployments=fit.Reads([0.5] * 5, deps, [overlap] * 5),
                            overlaps=[overlap] * 5)
        ratios.append(g.held_sd ** 2 / 0.05 ** 2)
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.25)
    assert fit.noise_factors(None, 4) == (1.0, 0.25)
    spread, of_mean = fit.noise_factors(overlap, 4)
    shared = 12 * 4 + 2 * (3 * 11 + 2 * 10 + 9)  # intervals the four windows hold, pair by pair (/144: covariance)
    assert spread == pytest.approx((12 * 4 - shared / 4) / 3 / 144)  # about 0.012: a ninth of one update's variance
    assert of_mean == pytest.approx(shared / 16 / 144)


def test_the_noise_is_read_within_each_subtask_and_bounded_only_beyond_what_the_residuals_allow() -> None:
    """Two subtasks offset from each other by 0.3 (a held error, a key's skew) scatter by far more than their
    noise: taken within each subtask, the offset is no noise. A plateau whose scatter the residuals around the line
    rule out (the truth of its windows missed) is bounded; one they allow is not."""
    rng = np.random.default_rng(2)
    at = np.tile(np.arange(100.0, 130.0, 5.0), 2)
    subs = np.repeat([0, 1], 6)
    overlap = noise_overlap(at, np.array([0.0]), gauges=subs)
    ratios = []
    for _ in range(300):
        r = 0.5 + np.concatenate([_windowed_updates(rng, 0.1, 6) + 0.15, _windowed_updates(rng, 0.1, 6) - 0.15])
        squares, expected, mean_read, n = fit.Reads([0.5], [r], [overlap], None, [subs]).noise_sums(0)
        assert n == 12 and mean_read == pytest.approx(float(r.mean()))
        ratios.append(squares / expected)
    assert np.mean(ratios) == pytest.approx(0.1 ** 2, rel=0.15)  # one interval's variance, the offset left out
    rows = np.array([[0.9 * 0.1, 0.1, 0.5]] * 8)  # eight plateaus at a reading of a half telling s = 0.9
    unbounded = fit._interval_noise(rows, 0.0, 1.0, math.nan, 8, 2)
    assert max(sd for _, sd in unbounded) == pytest.approx(0.9 ** 0.5, rel=1e-6)
    allowed = fit._interval_noise(rows, 0.0, 1.0, 0.9 ** 0.5 / math.sqrt(12), 8, 2)  # residuals as large: no bound
    assert max(sd for _, sd in allowed) == pytest.approx(0.9 ** 0.5, rel=1e-6)
    ruled_out = fit._interval_noise(rows, 0.0, 1.0, 0.05, 8, 2)
    assert max(sd for _, sd in ruled_out) < 0.5
    assert fit._interval_noise(np.array([[0.1, 0.1, 0.0]]), 0.0, 1.0, 0.05, 8, 2) == []  # every reading at 0


def test_one_load_read_by_several_deployments_measures_the_error_each_keeps() -> None:
    """Deployment phases: the same moderate load before the rescales (the ladder's deployment) and after each
    restart. The ladder carries deployment 0's error, so the line sits on it; the error is still recovered."""
    rng = np.random.default_rng(5)
    levels = [0.15, 0.35, 0.55, 0.75]
    ratios = []
    for _ in range(300):
        errors = rng.normal(0, 0.1, 4)  # deployment 0 is the ladder's
        ladder = [0.1 + 0.8 * lv + errors[0] + rng.normal(0, 0.02, 3) for lv in levels]
        deps = [0.1 + 0.8 * 0.5 + e + rng.normal(0, 0.02, 2) for e in errors]
        g = fit.gauge_model(levels + [0.5] * 4, ladder + deps, deployments=([0.5] * 4, deps))
        assert g.held_n == 4
        ratios.append(g.held_sd ** 2 / 0.1 ** 2)
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.15)  # unbiased, though the line sits on deployment 0
    quiet = [0.5 + rng.normal(0, 0.02, 2) for _ in range(4)]  # update noise only: next to nothing held
    assert fit.gauge_model([0.5] * 4, quiet, deployments=([0.5] * 4, quiet)).held_sd < 0.02
    # two deployments, or plateaus of one deployment only: not calibrated (NaN), never an error of 0
    two = fit.gauge_model(levels, ladder, deployments=([0.5] * 2, deps[:2]))
    assert math.isnan(two.held_sd) and two.held_n == 2
    assert math.isnan(fit.gauge_model(levels, ladder).held_sd)


def test_downtime_slope_pooled_over_queries() -> None:
    pts = [(0.0, 5.0), (1e9, 15.0), (2e9, 25.0)]
    assert fit.pooled_slope(pts) == pytest.approx(10.0)
    m = fit.downtime_model([(1e9, 16.0)], [], 10.0, "pooled")
    assert m.base_s == pytest.approx(6.0) and m.downtime(3e9) == pytest.approx(36.0)
    assert m.down_base_s is None and m.downtime(3e9, fresh_taskmanagers=False) == pytest.approx(36.0)


def test_downtime_on_fresh_task_managers_apart_from_running_ones() -> None:
    """A scale-up restarts the job on cold JVMs, a scale-down on warm ones: two bases, one slope."""
    m = fit.downtime_model([(0.0, 5.0), (1e9, 7.0)], [(0.0, 0.5), (1e9, 2.5)], 1.0, "pooled")
    assert m.base_s == pytest.approx(5.5) and m.down_base_s == pytest.approx(1.0)
    assert m.downtime(2e9) == pytest.approx(7.5)
    assert m.downtime(2e9, fresh_taskmanagers=False) == pytest.approx(3.0)
    only_down = fit.downtime_model([], [(0.0, 2.0)], 0.0, "x")
    assert only_down.base_s == pytest.approx(2.0) and only_down.down_base_s == pytest.approx(2.0)
    with pytest.raises(ValueError):
        fit.downtime_model([], [], 0.0, "x")
    assert fit.pooled_slope([(0.0, 5.0), (1e9, 1.0)]) == 0.0  # never a negative cost of state


def test_reporter_text_is_parsed_into_one_subtask_row() -> None:
    from harness.calibration.recorder import label_operator, parse_reporter

    text = "\n".join([
        '# TYPE flink_taskmanager_job_task_busyTimeMsPerSecond gauge',
        'flink_taskmanager_job_task_busyTimeMsPerSecond{job_id="j1",task_name="Source:_bids_source",'
        'subtask_index="0",tm_id="tm_1"} 512.0',
        'flink_taskmanager_job_task_numRecordsOut{job_id="j1",task_name="Source:_bids_source",subtask_index="0"} 1e6',
        'flink_taskmanager_job_task_operator_pendingRecords{job_id="j1",task_name="Source:_bids_source",'
        'operator_name="bids_source",subtask_index="0"} 42.0',
        'flink_taskmanager_job_task_busyTimeMsPerSecond{job_id="old",task_name="map",subtask_index="3"} 999.0',
        'flink_taskmanager_Status_JVM_CPU_Load{tm_id="tm_1"} 0.93',
    ])
    row = parse_reporter(text, "j1")
    assert row == {"busy_ms": 512.0, "operator": "bids_source", "subtask": 0, "rec_out": 1e6, "pending": 42.0,
                   "jvm_load": 0.93}
    assert label_operator("Source:_auction_source") == "auction_source" and label_operator("join") == "join"


def test_recorder_reads_the_probe_reporter_and_falls_back_to_the_full_one(caplog: pytest.LogCaptureFixture) -> None:
    """Over HTTP as on the stack: the recorder scrapes a task manager's probe reporter (a tenth of the full one's
    bytes, each second), and its full one only where the probe does not answer."""
    import os
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from types import SimpleNamespace

    from harness.calibration.recorder import Recorder

    hits = {"full": 0, "probe": 0}

    def serve(kind: str, busy: float) -> ThreadingHTTPServer:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server interface
                hits[kind] += 1
                body = ('flink_taskmanager_job_task_busyTimeMsPerSecond{job_id="j1",task_name="map",'
                        f'subtask_index="0"}} {busy}\n').encode()
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    full, probe = serve("full", 111.0), serve("probe", 222.0)
    flink = SimpleNamespace(reporter_port_of=lambda tm: full.server_address[1],
                            probe_port_of=lambda tm: probe.server_address[1])
    stack = SimpleNamespace(flink=flink, taskmanager_ids=lambda: ["tm-1"], taskmanager_pid=lambda tm: os.getpid(),
                            taskmanager_cpu=lambda tm: 0.1, cgroups=SimpleNamespace(base=None))
    rec = Recorder(stack)
    rec.job_id = "j1"
    assert math.isnan(rec.probe_share)  # nothing read yet: unknown, not 0
    try:
        rec.sample()
        assert hits == {"full": 0, "probe": 1} and rec.rows[-1]["busy_ms"] == 222.0
        probe.shutdown()
        probe.server_close()
        with caplog.at_level("WARNING", logger="harness.calibration.recorder"):
            rec.sample()
            rec.sample()
        assert hits["full"] == 2 and rec.rows[-1]["busy_ms"] == 111.0
        assert caplog.text.count("no probe reporter") == 1  # once per task manager, not once a second
        assert rec.reads == {"probe": 1, "full": 2} and rec.probe_share == pytest.approx(1 / 3)  # into provenance
    finally:
        full.shutdown()
        full.server_close()


def test_the_probe_reporter_carries_every_metric_the_recorder_reads() -> None:
    """A gauge added to the recorder must be in the probe's filter, else the probe silently leaves it out."""
    from harness.backends.local.flink import PROBE_METRICS
    from harness.calibration.recorder import TASK_GAUGES, TM_GAUGES

    names = {n for f in PROBE_METRICS for n in f.split(":")[1].split(",")}
    for metric in [*TASK_GAUGES, *TM_GAUGES]:
        assert metric.rsplit("_", 1)[-1] in names, metric


def test_recorder_frame_is_consistent_while_the_sampling_thread_appends() -> None:
    """`frame()` runs while the recorder's thread appends rows: it must see a consistent copy."""
    import threading

    from harness.calibration.recorder import Recorder

    rec = Recorder(stack=None)
    started = threading.Event()

    def append() -> None:
        for i in range(300_000):
            rec.rows.append({"t": float(i), "operator": "map", "busy_ms": 1.0, **({"pending": 1.0} if i % 2 else {})})
            if i == 1000:
                started.set()

    th = threading.Thread(target=append)
    th.start()
    started.wait()
    frames = 0
    while th.is_alive():
        df = rec.frame()
        assert df.t.notna().all()
        frames += 1
    th.join()
    assert frames >= 1 and len(rec.frame()) == 300_000


def test_envelope_keeps_the_median_saturation_per_share_and_drops_a_share_that_was_no_bottleneck() -> None:
    """Repeated saturations at one share scatter (the JIT, the host's load) and a run meets the same scatter:
    the median of them is what a run gets, the fastest a best case (q11's window at 0.1 CPU, session 27:
    saturations of 14.5-19.3k, a median 17.9k per subtask at its limit in the cosine cells)."""
    pts = [SharePoint(share=1.0, capacity=20_000, saturated=True, cpu_cores=0.25, n=9),
           SharePoint(share=1.0, capacity=23_000, saturated=True, cpu_cores=0.24, n=8),  # the JVM had compiled more
           SharePoint(share=1.0, capacity=17_000, saturated=True, cpu_cores=0.23, n=8),
           SharePoint(share=0.5, capacity=9_000, saturated=True, cpu_cores=0.125),
           SharePoint(share=0.5, capacity=12_000, saturated=False, cpu_cores=0.08)]  # faster, with CPU to spare
    env = fit.envelope(pts, QUOTA)
    assert [(p.share, p.capacity, p.cpu_cores, p.n) for p in env] == [(1.0, 20_000, 0.24, 25)]
    # an even pool: the middle two's mean; and a plateau measured fed by several upstream subtasks is not pooled
    even = [*pts[:2], SharePoint(share=1.0, capacity=9_900, saturated=True, cpu_cores=0.25, fed_by_several=True)]
    assert [p.capacity for p in fit.envelope(even, QUOTA)] == [21_500]
    assert fit.envelope([pts[-1].model_copy(update={"fed_by_several": True}), pts[3]], QUOTA)[0].capacity == 9_000


def test_a_faster_plateau_on_all_its_cpu_is_the_saturation_of_its_share_not_a_reason_to_drop_it() -> None:
    """Measured at 0.1 CPU: q11's window saturated at 16.3k/s and did 18.2k/s on 0.099 cores in a ladder step
    (the job kept up, so nothing marked it saturated). Dropping share 1.0 left a line through shares 0.25 and
    0.5, read at 1.0 as 23.7k/s: faster than anything measured there."""
    q = 0.1
    pts = [SharePoint(share=1.0, capacity=16_300, saturated=True, cpu_cores=0.0999),
           SharePoint(share=1.0, capacity=18_200, saturated=False, cpu_cores=0.0987),
           SharePoint(share=0.5, capacity=7_550, saturated=True, cpu_cores=0.0457),
           SharePoint(share=0.25, capacity=1_730, saturated=True, cpu_cores=0.0267)]
    env = fit.envelope(pts, q)  # the ladder step joins the saturation's pool
    assert [(p.share, p.capacity, p.saturated) for p in env] == [
        (0.25, 1_730, True), (0.5, 7_550, True), (1.0, 17_250, True)]
    cpu = CpuModel(idle_cores=0.02, cores_per_record=4e-6, saturated_fraction=0.99)
    f = fit.capacity_fit(pts, cpu, q)
    assert f.capacity(q * 0.99) == pytest.approx(17_250, rel=0.01)  # where the sim reads it
    # a plateau that kept up slower than the saturations' median says nothing of the limit, whatever its CPU
    slower = [*pts, SharePoint(share=1.0, capacity=15_000, saturated=False, cpu_cores=0.0999)]
    assert [p.capacity for p in fit.envelope(slower, q)] == [1_730, 7_550, 17_250]
    # the same plateau with CPU to spare: share 1.0 was no bottleneck, as before
    spare = [p.model_copy(update={"cpu_cores": 0.06}) if not p.saturated else p for p in pts]
    assert [p.share for p in fit.envelope(spare, q)] == [0.25, 0.5]
    # ... and so does one faster still with CPU to spare beside the CPU-bound one: the CPU was not the limit
    faster_still = [*pts, SharePoint(share=1.0, capacity=21_000, saturated=False, cpu_cores=0.07)]
    assert [p.share for p in fit.envelope(faster_still, q)] == [0.25, 0.5]


def test_a_faster_rate_on_its_whole_cpu_joins_the_median_and_one_with_cpu_unknown_is_a_lower_bound() -> None:
    """A plateau that kept up faster than the saturations on all its CPU was at its limit too: it joins their
    median. Where the share's saturations are contradicted (a faster rate with CPU to spare or unknown), the
    share is dropped and that rate is a lower bound."""
    cpu = CpuModel(idle_cores=0.0, cores_per_record=math.nan, saturated_fraction=1.0)
    slow = [SharePoint(share=1.0, capacity=20_000, saturated=True, cpu_cores=0.25)]
    base = fit.capacity_fit(slow, cpu, QUOTA)
    assert base.capacity(QUOTA) == pytest.approx(20_000, rel=1e-6) and "lifted" not in base.method
    # on its whole CPU (0.24 of 0.25): the pool is 20k and 21.5k on 0.245 cores, read at 0.25
    seen = [*slow, SharePoint(share=1.0, capacity=21_500, saturated=False, cpu_cores=0.24)]
    pooled = fit.capacity_fit(seen, cpu, QUOTA)
    assert pooled.capacity(0.245) == pytest.approx(20_750, rel=1e-6) and "lifted" not in pooled.method
    # the top share's median where the line is read below its cores: the line is lifted to it
    under = fit.capacity_fit(seen, CpuModel(idle_cores=0.0, cores_per_record=math.nan, saturated_fraction=0.9), QUOTA)
    assert under.capacity(QUOTA * 0.9) == pytest.approx(20_750, rel=1e-6)
    assert "lifted to its median saturation where read" in under.method
    # a saturation contradicted by a much faster unsaturated rate leaves that rate as a lower bound
    only = fit.capacity_fit([*slow, SharePoint(share=1.0, capacity=30_000, saturated=False)], cpu, QUOTA)
    assert only.capacity(QUOTA) == pytest.approx(30_000, rel=1e-6) and "lower bound" in only.method
    # a slower unsaturated rate changes nothing
    assert fit.capacity_fit([*slow, SharePoint(share=1.0, capacity=5_000, saturated=False)], cpu, QUOTA) == base


def test_a_lift_turns_the_line_about_a_saturation_measured_at_fewer_cores() -> None:
    """Measured at 0.1 CPU: saturated at 2.8k rec/s on 0.05 cores, seen doing 12k unsaturated on 0.1. Keeping
    the CPU model's overhead would put the line at 6k on 0.05 cores, twice the saturation measured there."""
    cpu = CpuModel(idle_cores=0.01, cores_per_record=math.nan, saturated_fraction=1.0)
    pts = [SharePoint(share=0.5, capacity=2_800, saturated=True, cpu_cores=0.05),
           SharePoint(share=1.0, capacity=12_000, saturated=False, cpu_cores=0.1)]
    f = fit.capacity_fit(pts, cpu, 0.1)
    assert "lifted" in f.method
    assert f.capacity(0.05) == pytest.approx(2_800, rel=1e-6) and f.capacity(0.1) == pytest.approx(12_000, rel=1e-6)
    assert f.overhead_cores > 0.01  # more fixed cost than the idle task manager showed


def test_fit_recovers_the_cold_start_curve_from_the_coldstart_phase(fitted: QueryProfile) -> None:
    w = fitted.warmup
    assert w is not None and w.saturated
    assert w.cores == pytest.approx(QUOTA)
    assert w.warm_rate == pytest.approx(cap("bids_source", QUOTA), rel=0.01)
    assert w.initial_fraction == pytest.approx(COLD_F0, abs=0.03)
    assert w.tau_cpu_s == pytest.approx(COLD_TAU_CPU_S, rel=0.1)
    # the dead time, to half a sample (1 s): the middle of the last sample without a record and the first with one
    assert w.dead_s == pytest.approx(COLD_DEAD_S, abs=0.6)
    assert [round(p[0] - w.dead_s) for p in w.points] == list(range(5, 75, 10))  # 10-s bins from the first record
    for s, frac in w.points:
        assert frac == pytest.approx(warm_fraction(s), abs=0.03)
    assert w.fraction(0.0) == 0.0 and w.fraction(w.dead_cpu_s - 1e-6) == 0.0  # nothing before the first record
    assert w.fraction(w.dead_cpu_s) == pytest.approx(w.initial_fraction) and w.fraction(1e6) == pytest.approx(1.0)


def test_several_cold_starts_make_one_curve_over_all_their_bins_and_each_keeps_its_own() -> None:
    taus = (2.5, 5.0, 10.0)
    w = build_profile(synthetic_measurement(cold_taus=taus), load_topology("q1"), provenance()).warmup
    assert w is not None and w.saturated and len(w.starts) == 3
    for start, tau in zip(w.starts, taus, strict=True):
        assert start.tau_cpu_s == pytest.approx(tau, rel=0.15)
        assert start.initial_fraction == pytest.approx(COLD_F0, abs=0.05)
        assert start.dead_s == pytest.approx(COLD_DEAD_S, abs=0.6)
    assert taus[0] < w.tau_cpu_s < taus[-1]  # the pooled curve lies among them
    assert len(w.points) == 3 * 7  # every start's bins, each from its own first record
    assert [round(w.points[7 * k][0] - s.dead_s, 6) for k, s in enumerate(w.starts)] == [5.0, 5.0, 5.0]
    # a run takes start `seed` mod 3: consecutive seeds go through all of them; one start: the one curve
    assert [w.for_run(seed).tau_cpu_s for seed in (3, 4, 5)] == [s.tau_cpu_s for s in w.starts]
    assert w.for_run(1).starts == [] and w.for_run(1).warm_rate == w.warm_rate
    one = build_profile(synthetic_measurement(), load_topology("q1"), provenance()).warmup
    assert one is not None and one.starts == [] and one.for_run(7) is one
    # a start offered less than it could take measured the offered load, not a speed: it stays out of the curve
    part = build_profile(synthetic_measurement(cold_taus=taus, cold_offered=(1.2, 0.3, 1.2)), load_topology("q1"),
                         provenance()).warmup
    assert part is not None and part.saturated and len(part.starts) == 2 and len(part.points) == 2 * 7
    assert [s.tau_cpu_s for s in part.starts] == pytest.approx([taus[0], taus[2]], rel=0.15)


def test_the_cold_start_is_no_plateau_of_the_warm_fits(fitted: QueryProfile) -> None:
    """The slow cold seconds must not enter the capacity, CPU or readings fits (they describe warm JVMs)."""
    assert all(not pl.phase.kind == "coldstart" for pl in plateaus(synthetic_measurement()))
    assert fitted.operators["bids_source"].capacity == pytest.approx(cap("bids_source", QUOTA), rel=0.05)


def test_no_cold_start_curve_without_a_warm_rate_or_enough_bins_and_tau_bounded_by_what_was_measured() -> None:
    secs = [5.0, 15.0, 25.0, 35.0]
    assert fit.warmup(secs[:3], [100.0, 200.0, 300.0], 400.0, 0.25) is None
    assert fit.warmup(secs, [100.0, 200.0, 300.0, 350.0], math.nan, 0.25) is None
    assert fit.warmup(secs, [math.nan, 200.0, 300.0, math.nan], 400.0, 0.25) is None
    # still at half speed at the end: slow for longer than measured, tau no more than ten times the CPU time
    flat = fit.warmup(secs, [200.0, 200.0, 200.0, 200.0], 400.0, 0.25)
    assert flat is not None and flat.tau_cpu_s <= 10 * 35.0 * 0.25 + 1e-9 and flat.fraction(35 * 0.25) < 0.6


def test_the_mean_fraction_is_the_curves_integral() -> None:
    from harness.calibrated_profile import WarmUp

    w = WarmUp(initial_fraction=0.2, tau_cpu_s=4.0, cores=0.25, warm_rate=1.0)
    xs = np.linspace(1.0, 3.0, 20001)
    assert w.mean_fraction(1.0, 3.0) == pytest.approx(float(np.mean([w.fraction(x) for x in xs])), rel=1e-4)
    assert w.mean_fraction(-2.0, 0.0) == pytest.approx(0.2)  # before it began: the start
    # with a dead time the first 0.5 CPU-s count as 0 and the curve starts after them
    dead = WarmUp(initial_fraction=0.2, tau_cpu_s=4.0, cores=0.25, warm_rate=1.0, dead_s=2.0)
    assert dead.dead_cpu_s == pytest.approx(0.5)
    assert dead.mean_fraction(0.0, 0.5) == 0.0 and dead.fraction(0.49) == 0.0
    xs = np.linspace(0.0, 3.0, 30001)
    assert dead.mean_fraction(0.0, 3.0) == pytest.approx(float(np.mean([dead.fraction(x) for x in xs])), rel=1e-3)
    assert dead.mean_fraction(1.5, 3.5) == pytest.approx(w.mean_fraction(1.0, 3.0), rel=1e-12)  # a shifted curve


def test_a_refit_dates_the_profile_when_its_samples_were_measured_not_when_copied(tmp_path: Path) -> None:
    """The date is the measurement's own record: copying a state directory changes files' times, not it."""
    import os
    import shutil

    from harness.calibration.commands import _fit_all
    from harness.topology import load_topology

    m = synthetic_measurement()
    m.save(tmp_path / "a" / "q1")
    measured_at = Measurement.load(tmp_path / "a" / "q1").facts["measured_at"]
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    os.utime(tmp_path / "b" / "q1" / "measurement.json", (0, 0))  # 1970: what the file's time would say
    prof = _fit_all(["q1"], tmp_path / "b", QUOTA, False, tmp_path / "out", load_topology)[0]
    assert prof.provenance.date == measured_at and not prof.provenance.date.startswith("1970")


def _with_offered(m: Measurement, phase: str, fraction: float, gen: int = 7) -> Measurement:
    """The generator's acknowledged count sampled each second of `phase`, at `fraction` of its asked-for rate."""
    ph = next(p for p in m.phases if p.name == phase)
    ts = np.arange(ph.t0, ph.t1 + 1e-9, 1.0)
    rows = pd.DataFrame({"t": ts, "phase": phase, "load1": 0.5, "host_busy": 0.3,
                         "produced": fraction * ph.rate * (ts - ph.t0), "gen": gen})
    m.host = pd.concat([m.host, rows], ignore_index=True)
    return m


def test_the_cold_start_counts_as_overloaded_by_what_kafka_acknowledged_not_by_pending_records() -> None:
    """A fresh source's pendingRecords reads low for its first seconds: with the generator's count recorded,
    the backlog is what Kafka acknowledged less what the sources took."""
    from harness.calibration.build import warmup
    from harness.topology import load_topology

    m = synthetic_measurement()
    cold = m.samples.phase == "coldstart"
    m.samples.loc[cold & (m.samples.operator == "bids_source"), "pending"] = 0.0  # read low throughout
    w = warmup(m, load_topology("q1"))
    assert w is not None and not w.saturated  # by pendingRecords alone: never overloaded
    w = warmup(_with_offered(m, "coldstart", 1.0), load_topology("q1"))
    assert w is not None and w.saturated
    # a generator that got only 60 % of the asked-for rate into Kafka, below what the sources took: no overload
    w = warmup(_with_offered(synthetic_measurement(), "coldstart", 0.6, gen=8), load_topology("q1"))
    assert w is not None and not w.saturated


def test_offered_rate_is_the_last_generator_instances_count_and_unknown_without_one() -> None:
    host = pd.DataFrame({"t": [0.0, 1.0, 2.0, 3.0, 4.0], "produced": [0.0, 100.0, 200.0, 0.0, 50.0],
                         "gen": [1, 1, 1, 2, 2]})
    assert fit.offered_rate(host, 0.0, 2.0) == pytest.approx(100.0)
    assert fit.offered_rate(host, 0.0, 4.0) == pytest.approx(50.0)  # restarted at t = 3: the new count only
    assert math.isnan(fit.offered_rate(host, 10.0, 20.0))
    assert math.isnan(fit.offered_rate(host.drop(columns=["produced"]), 0.0, 4.0))


def test_a_profile_notes_phases_whose_load_the_generator_could_not_offer(tmp_path: Path) -> None:
    from harness.calibration.commands import _fit_all
    from harness.topology import load_topology

    m = _with_offered(synthetic_measurement(), "overload", 0.5)
    m.save(tmp_path / "q1")
    prof = _fit_all(["q1"], tmp_path, QUOTA, False, tmp_path / "out", load_topology)[0]
    short = [n for n in prof.provenance.notes if "the generator offered" in n]
    assert len(short) == 1 and short[0].startswith("overload: the generator offered")


def test_the_recorder_samples_the_generators_count_and_leaves_a_gap_when_it_does_not_answer() -> None:
    from harness.calibration.recorder import Recorder

    class Gen:
        def __init__(self, pid: int | None, total: int | None) -> None:
            self.pid, self._total = pid, total

        def metrics(self) -> Any:
            if self._total is None:
                raise RuntimeError("endpoint down")
            return type("M", (), {"total": self._total})()

    gen: Any = Gen(41, 1234)
    rec = Recorder(stack=None, generator=lambda: gen)
    assert rec._offered() == {"produced": 1234.0, "gen": 41}
    gen = Gen(42, None)
    assert rec._offered() == {}
    gen = None
    assert rec._offered() == {} and Recorder(stack=None)._offered() == {}


def test_a_backpressured_source_never_counts_as_the_saturated_one() -> None:
    """With no CPU-bound operator, the sources that limited a backlogged phase are the ones not held back from
    downstream; a source blocked most of the time (q3 at 0.25 CPU: 68 records/s, 0.92 backpressured while the
    join stalled) limited nothing, and when every source is blocked nothing limited the phase measurably."""
    from harness.calibration.build import OpPlateau, bottlenecks
    from harness.topology import load_topology

    topo = load_topology("q3")
    phase = PhaseRecord(name="share-person_source-0.25", kind="share", t0=0.0, t1=30.0)

    def pl(op: str, rate: float, bp: float, cores: float = 0.02, pending: float = math.nan) -> OpPlateau:
        p = fit.Plateau(phase=phase.name, share=1.0, rate_in=rate, rate_out=rate, cores=cores,
                        busy=np.array([0.1]), backpressured=np.array([bp]), idle=np.array([0.0]),
                        cpu_jvm=np.array([0.1]), flagged=bp, pending=pending, pending_growth=0.0)
        return OpPlateau(phase, op, p, np.zeros(0), pd.DataFrame())

    rest = [pl("person_filter", 400.0, 0.6), pl("join", 400.0, 0.0), pl("sink", 20.0, 0.0)]
    free = [pl("auction_source", 68.0, 0.92, pending=1e6), pl("person_source", 324.0, 0.1, pending=1e6)]
    assert bottlenecks(free + rest, topo, QUOTA) == {"person_source"}
    blocked = [pl("auction_source", 68.0, 0.92, pending=1e6), pl("person_source", 324.0, 0.54, pending=1e6)]
    assert bottlenecks(blocked + rest, topo, QUOTA) == set()
    unread = [pl("auction_source", 68.0, math.nan, pending=1e6), pl("person_source", 324.0, math.nan, pending=1e6)]
    assert bottlenecks(unread + rest, topo, QUOTA) == {"auction_source", "person_source"}  # unknown: not blocked


def test_a_source_throttled_in_a_phase_made_to_saturate_it_limited_it_though_it_reads_backpressured() -> None:
    """q11's source at 0.1 CPU, share 0.25, throttled in every CFS period: its task manager's threads all stop, so
    the stop reads as backpressured time (0.49-0.71) while the session window, well under its CPU limit, took all
    it sent. In its own share phase it limited, and in its own bottleneck phase where the window waited for input.
    Held back it stays: unthrottled or not known to be throttled, at its full share in another phase, in its
    bottleneck phase beside a window that did not wait for input (stalled), and beside a downstream operator at its
    own CPU limit (a lower bound)."""
    from harness.calibration.build import OpPlateau, bottlenecks
    from harness.topology import load_topology

    topo = load_topology("q11")

    def pl(phase: PhaseRecord, op: str, rate: float, cores: float, bp: float, throttled: float, share: float = 1.0,
           pending: float = math.nan, idle: float = 0.0) -> OpPlateau:
        p = fit.Plateau(phase=phase.name, share=share, rate_in=rate, rate_out=rate, cores=cores,
                        busy=np.array([0.2]), backpressured=np.array([bp]), idle=np.array([idle]),
                        cpu_jvm=np.array([0.1]), flagged=bp, throttled=throttled, pending=pending,
                        pending_growth=0.0)
        return OpPlateau(phase, op, p, np.zeros(0), pd.DataFrame())

    own = PhaseRecord(name="share-bids_source-0.25", kind="share", t0=0.0, t1=30.0, operator="bids_source")

    def downstream(phase: PhaseRecord, window_cores: float = 0.041, window_throttled: float = 0.10,
                   window_idle: float = 0.5) -> list[OpPlateau]:
        return [pl(phase, "session_window", 5298.0, window_cores, 0.0, window_throttled, idle=window_idle),
                pl(phase, "sink", 349.0, 0.013, 0.0, 0.0, idle=0.9)]

    def source(phase: PhaseRecord, throttled: float, share: float = 0.25) -> OpPlateau:
        return pl(phase, "bids_source", 5209.0, 0.1 * share, 0.71, throttled, share=share, pending=1.5e6)

    assert bottlenecks([source(own, 1.0), *downstream(own)], topo, 0.1) == {"bids_source"}
    for held in (0.1, math.nan):  # not throttled, or not known to be
        assert bottlenecks([source(own, held), *downstream(own)], topo, 0.1) == set()
    # at its full share in a phase not made to saturate it (another operator's, or the overload's)
    for phase in (PhaseRecord(name="bottleneck-session_window", kind="bottleneck", t0=0.0, t1=30.0,
                              operator="session_window"),
                  PhaseRecord(name="overload", kind="overload", t0=0.0, t1=30.0)):
        assert bottlenecks([source(phase, 1.0, share=1.0), *downstream(phase)], topo, 0.1) == set()
    # its own bottleneck phase (its downstream scaled out) is made to saturate it at its full share: throttled, with
    # the window waiting for input (session 18: idle 0.41-0.65), it limited; not throttled (or not known to be),
    # backpressured, it was held back after all; and so it was behind a window that stalled (busy, not idle)
    mine = PhaseRecord(name="bottleneck-bids_source", kind="bottleneck", t0=0.0, t1=30.0, operator="bids_source")
    assert bottlenecks([source(mine, 1.0, share=1.0), *downstream(mine)], topo, 0.1) == {"bids_source"}
    for held in (0.1, math.nan):
        assert bottlenecks([source(mine, held, share=1.0), *downstream(mine)], topo, 0.1) == set()
    for stalled in (0.1, math.nan):
        assert bottlenecks([source(mine, 1.0, share=1.0), *downstream(mine, window_idle=stalled)], topo, 0.1) == set()
    # the window at its CPU limit: it limited, and the throttled source beside it stays a lower bound
    assert bottlenecks([source(own, 1.0), *downstream(own, 0.091, 0.97)], topo, 0.1) == {"session_window"}


def test_the_pending_records_buffer_is_recovered_from_a_cold_starts_samples() -> None:
    """Samples made by the reading's model (backlog less buffer x arrivals / taken) give the buffer back; a
    reading stuck at 0 (nothing to learn from) or a cold start with too few informative samples gives None."""
    rng = np.random.default_rng(3)
    t = np.arange(5.0, 90.0)
    taken = np.minimum(40_000.0, 2_000.0 * t)  # a fresh job speeding up to 40k/s; 44k/s arrive
    arrived = np.full_like(t, 44_000.0)
    backlog = np.cumsum(arrived - taken) + 100_000.0
    buffer = 230_000.0
    reading = np.maximum(0.0, backlog - np.minimum(buffer, backlog) * arrived / taken)
    reading = np.where(reading > 0, reading * (1 + rng.normal(0, 0.01, len(t))), 0.0)
    model = fit.pending_buffer(t, backlog, reading, arrived, taken)
    assert model is not None and model.buffer_records == pytest.approx(buffer, rel=0.05)
    assert model.n == int((reading > 0).sum()) and 0 < len(model.points) <= 11
    assert fit.pending_buffer(t, backlog, np.zeros_like(t), arrived, taken) is None  # the reading never said
    assert fit.pending_buffer(t[:3], backlog[:3], reading[:3], arrived[:3], taken[:3]) is None


def test_the_committed_q1_profile_measured_its_pending_records_reading() -> None:
    """Measured on this machine: a bids source's reading misses about 230k records (fetch.max.bytes' worth)."""
    prof = load_profile("q1", cores=0.1)
    assert prof is not None
    pend = prof.operators["bids_source"].readings.pending
    assert pend is not None and 50_000 < pend.buffer_records < 1_000_000 and pend.n >= 20
    assert prof.operators["map"].readings.pending is None  # only a Kafka source reads a backlog


def test_a_source_at_its_own_cpu_limit_limits_beside_a_saturated_map() -> None:
    """Measured at 0.25 CPU: q1's source and map both throttled at 127k/s, the source 5 % backpressured, so both
    limited; a source that a slower map held back was throttled in under 10 % of periods: only the map."""
    from harness.calibration.build import OpPlateau, bottlenecks

    topo = load_topology("q1")
    phase = PhaseRecord(name="overload", kind="overload", t0=0.0, t1=15.0)

    def pl(op: str, rate: float, bp: float, throttled: float, pending: float = math.nan) -> OpPlateau:
        p = fit.Plateau(phase=phase.name, share=1.0, rate_in=rate, rate_out=rate, cores=0.2,
                        busy=np.array([0.2]), backpressured=np.array([bp]), idle=np.array([0.0]),
                        cpu_jvm=np.array([0.2]), flagged=bp, pending=pending, pending_growth=0.0,
                        throttled=throttled)
        return OpPlateau(phase, op, p, np.zeros(0), pd.DataFrame())

    sink = pl("sink", 127_000.0, 0.0, 0.0)
    both = [pl("bids_source", 127_000.0, 0.05, 0.93, pending=1e6), pl("map", 127_000.0, 0.0, 0.9), sink]
    assert bottlenecks(both, topo, 0.25) == {"bids_source", "map"}
    held = [pl("bids_source", 69_000.0, 0.09, 0.05, pending=1e6), pl("map", 69_000.0, 0.0, 1.0), sink]
    assert bottlenecks(held, topo, 0.25) == {"map"}
    blocked = [pl("bids_source", 69_000.0, 0.6, 0.9, pending=1e6), pl("map", 69_000.0, 0.0, 1.0), sink]
    assert bottlenecks(blocked, topo, 0.25) == {"map"}


def test_a_querys_downtime_line_goes_through_its_own_point_with_the_pooled_slope() -> None:
    """q5's in-place restart with 76 MB of state took 15.5 s; the slope pooled over the queries (732 s/GB)
    would predict 56 s there from a base clipped at 0. The line keeps the pooled slope and passes through the
    measured point (a negative base), and a point without a known state counts at face value."""
    m = fit.downtime_model([(76e6, 15.5)], [(76e6, 31.0)], 732.0, "pooled")
    assert m.base_s < 0 and m.downtime(76e6) == pytest.approx(15.5)
    assert m.downtime(76e6, fresh_taskmanagers=False) == pytest.approx(31.0)
    assert m.downtime(176e6) == pytest.approx(15.5 + 73.2) and m.downtime(0.0) == 0.0
    unknown = fit.downtime_model([(math.nan, 13.8)], [], 732.0, "pooled")
    assert unknown.base_s == pytest.approx(13.8)


def test_a_rescale_whose_state_was_not_checkpointed_counts_as_unknown_not_as_no_state(tmp_path: Path) -> None:
    """A savepoint rescale resubmits the job, which has no checkpoint until its first one: the next rescale's
    state is unknown. Counted as 0 bytes, a 20-s restart of a 100-MB job would pull the base down; unknown, the
    base comes from the points whose state was measured, and the profile keeps the point as NaN."""
    m = synthetic_measurement()
    for p in m.phases:
        if p.kind == "rescale" and p.extra["method"] == "in_place":
            up = p.extra["direction"] == "up"
            p.extra.update({"state_bytes_before": 100e6 if up else None, "downtime_s": 80.0 if up else 20.0})
    prof = build_profile(m, load_topology("q1"), provenance(), {"in_place": (500.0, "given")})
    model = prof.rescale_downtime["in_place"]
    assert model.downtime(100e6) == pytest.approx(80.0)  # 30 s base + 500 s/GB x 0.1 GB, from the known point
    assert model.down_base_s == pytest.approx(20.0)  # no known point among the scale-downs: their mean
    assert len(model.down_points) == 1 and math.isnan(model.down_points[0][0])
    again = read_profile(prof.save(tmp_path)).rescale_downtime["in_place"]  # written as null, read back as NaN
    assert math.isnan(again.down_points[0][0]) and again.down_points[0][1] == pytest.approx(20.0)


def test_a_refit_keeps_the_host_share_of_a_profile_an_older_version_wrote(tmp_path: Path) -> None:
    """The host share is measured beside a scale-up, not by calibrating: a refit must not drop it, even where
    the profile on disk has a field this version no longer knows (it then fails validation as a whole)."""
    import yaml

    from harness.calibrated_profile import load_profile, profile_file_name
    from harness.calibration.commands import _keep_host_share

    prof = load_profile("q1", cores=0.1)
    assert prof is not None and prof.host is not None
    raw = prof.model_dump(mode="json")
    raw["operators"]["map"]["readings"]["busy"]["renamed_since"] = "x"  # what an older version wrote
    (tmp_path / profile_file_name("q1", 0.1)).write_text(yaml.safe_dump(raw))
    kept = _keep_host_share(prof.model_copy(update={"host": None}), tmp_path)
    assert kept.host == prof.host
    raw["host"] = {"cpus": "two"}
    (tmp_path / profile_file_name("q1", 0.1)).write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match="host block"):
        _keep_host_share(prof.model_copy(update={"host": None}), tmp_path)


def test_every_calibration_plan_reads_a_deployment_after_its_settling() -> None:
    """The deployment phases (one load after each restart) keep at least one meter update of readings past
    their settling, even in the integration test's half-length quick run; a full run is not shortened."""
    from harness.calibration.plan import METER_S, plan_for
    from harness.topology import load_topology

    topo = load_topology("q1")
    for quick, scale in ((False, 1.0), (True, 1.0), (True, 0.5), (True, 0.1)):
        d = plan_for(topo, quick, time_scale=scale).durations
        assert d.deployment_s - d.deployment_settle_s >= METER_S, (quick, scale, d)
    assert plan_for(topo, False).durations.deployment_s == 15.0


def test_the_job_goes_back_to_its_base_layout_after_the_bottleneck_phases_or_the_calibration_stops() -> None:
    """Every phase after the bottleneck phases assumes the base layout: a rescale back that fails once is tried
    again, and one that keeps failing stops the query's calibration loudly (never measures another layout)."""
    from types import SimpleNamespace

    from harness.backends.base import RescaleResult
    from harness.calibration.measure import QueryCalibration

    class Backend:
        def __init__(self, failures: int) -> None:
            self.state = SimpleNamespace(parallelism={"bids_source": 3, "map": 1, "sink": 1}, job_id="j")
            self.failures, self.calls, self.method = failures, 0, ""

        def rescale(self, target: dict[str, int], shares: object) -> RescaleResult:
            self.calls += 1
            if self.calls <= self.failures:
                return RescaleResult(parallelism=dict(self.state.parallelism), ok=False, error="timed out")
            self.state.parallelism = dict(target)
            return RescaleResult(parallelism=dict(target))

    base = {"bids_source": 1, "map": 1, "sink": 1}
    for failures, ok in ((0, True), (1, True), (2, False)):
        cal = QueryCalibration.__new__(QueryCalibration)
        cal.backend, cal.topology = Backend(failures), load_topology("q1")
        cal.recorder, cal.say = SimpleNamespace(job_id=None), lambda _: None
        if ok:
            cal._back_to(base)
            assert cal.backend.state.parallelism == base and cal.backend.calls == failures + 1
        else:
            with pytest.raises(RuntimeError, match="back to"):
                cal._back_to(base)


def test_layouts_are_changed_by_the_method_the_rescales_measured_fastest() -> None:
    """The bottleneck and parallelism phases measure a layout, not its rescale: the job gets there by the method
    whose measured rescales (the first pair; failed ones and the grown-state repeats left out) took the least wall
    time over the directions both completed, in place until any was measured (the spread phase, before them) and
    where that method fails on a job still running. A heap-state query restores its state faster from a savepoint
    (q3 at 0.25 CPU, session 24: in place 35 s up and 68 s down, savepoint 18 s and 35 s)."""
    from types import SimpleNamespace

    from harness.backends.base import RescaleResult
    from harness.calibration.measure import PhaseRecord, QueryCalibration, fastest_relayout

    def rescale(method: str, direction: str, call_s: float, ok: bool = True, suffix: str = "") -> PhaseRecord:
        return PhaseRecord(name=f"rescale-{method}-{direction}{suffix}", kind="rescale", t0=0.0, t1=5.0,
                           extra={"method": method, "direction": direction, "ok": ok, "call_s": call_s})

    assert fastest_relayout([]) == "in_place"
    stateless = [rescale("in_place", "up", 2.1), rescale("in_place", "down", 1.2), rescale("savepoint", "up", 3.4),
                 rescale("savepoint", "down", 3.9), rescale("reactive", "up", 0.5), rescale("reactive", "down", 0.5)]
    assert fastest_relayout(stateless) == "in_place"  # reactive cannot set a layout of its own
    heap_state = [rescale("in_place", "up", 35.0), rescale("in_place", "down", 68.0),
                  rescale("savepoint", "up", 18.0), rescale("savepoint", "down", 35.0),
                  rescale("savepoint", "up", 400.0, suffix="-grown"), rescale("savepoint", "down", 1e4, ok=False)]
    assert fastest_relayout(heap_state) == "savepoint"  # the grown-state repeat and the failed call left out
    # a method whose scale-down failed is compared on the scale-ups alone, as the other is
    half = [rescale("in_place", "up", 35.0), rescale("in_place", "down", 68.0), rescale("savepoint", "up", 40.0),
            rescale("savepoint", "down", 1.0, ok=False)]
    assert fastest_relayout(half) == "in_place"
    assert fastest_relayout([rescale("in_place", "up", float("nan")), rescale("savepoint", "up", 9.0)]) == "savepoint"
    assert fastest_relayout([rescale("in_place", "down", 5.0), rescale("savepoint", "up", 1.0)]) == "in_place"

    calls: list[str] = []
    restarting = False  # the job restarting: no savepoint can be taken
    stopped = False  # the savepoint stopped the job and its resubmission failed

    class Backend:
        method = ""
        state = SimpleNamespace(parallelism={"bids_source": 1, "map": 1, "sink": 1}, job_id="j")
        rest = SimpleNamespace(active_job_ids=lambda: [] if stopped else [Backend.state.job_id])

        def rescale(self, target: dict[str, int], shares: object) -> RescaleResult:
            calls.append(self.method)
            if (restarting or stopped) and self.method == "savepoint":
                return RescaleResult(parallelism=dict(self.state.parallelism), ok=False, error="not running",
                                     method=self.method)
            if stopped:
                return RescaleResult(parallelism=dict(self.state.parallelism), ok=False, error="no job",
                                     method=self.method)
            self.state.parallelism, self.state.job_id = dict(target), f"j{len(calls)}"
            return RescaleResult(parallelism=dict(target), method=self.method)

    cal = QueryCalibration.__new__(QueryCalibration)
    cal.backend, cal.topology = Backend(), load_topology("q1")
    cal.recorder, cal.say = SimpleNamespace(job_id="j"), lambda _: None
    cal._relayout({"bids_source": 2, "map": 2, "sink": 2})
    cal.relayout_method = fastest_relayout(heap_state)
    cal._back_to({"bids_source": 1, "map": 1, "sink": 1})
    assert calls == ["in_place", "savepoint"]
    assert cal.recorder.job_id == "j2"  # the resubmitted job is the one recorded
    restarting = True  # a savepoint that cannot be taken: the layout in place instead
    res = cal._relayout({"bids_source": 2, "map": 1, "sink": 1})
    assert calls[2:] == ["savepoint", "in_place"] and res.ok and res.method == "in_place"
    assert cal.backend.state.parallelism["bids_source"] == 2 and cal.recorder.job_id == "j4"
    assert cal.relayout_method == "savepoint"  # the next layout is tried by the fastest method again
    stopped = True  # no job left to set in place: the failure stands, and going back is an error
    with pytest.raises(RuntimeError, match="back to"):
        cal._back_to({"bids_source": 1, "map": 1, "sink": 1})
    assert calls[4:] == ["savepoint", "savepoint"]


def test_the_spread_layout_brings_every_operator_high_without_saturating_any() -> None:
    """The top rate is the highest at which every operator fits in 3 subtasks at 0.8 of its capacity (capped
    where the fastest reaches 0.8 at 2), each operator gets the fewest subtasks (at least 2) that keep it at or
    under 0.8 there; an operator the pattern does not feed stays at 2; with no fed operator it is an error."""
    from harness.calibration.plan import SPREAD_SUBTASKS, SPREAD_SUBTASKS_MAX, SPREAD_TOP, spread_layout

    # q1 at 0.1 CPU (session 15's capacities): the source limits the top rate at 3 subtasks
    top, layout = spread_layout({"bids_source": 31_100.0, "map": 40_000.0, "sink": 67_000.0})
    assert top == pytest.approx(3 * 0.8 * 31_100.0)
    assert layout == {"bids_source": 3, "map": 3, "sink": 2}
    util = {"bids_source": top / 3 / 31_100.0, "map": top / 3 / 40_000.0, "sink": top / 2 / 67_000.0}
    assert util == pytest.approx({"bids_source": 0.8, "map": 0.622, "sink": 0.557}, abs=1e-3)
    # operators alike: the cap where the fastest reaches 0.8 at 2 subtasks, every one at 2
    top, layout = spread_layout({"a": 10_000.0, "b": 10_000.0, "c": math.inf})
    assert top == pytest.approx(2 * 0.8 * 10_000.0) and layout == {"a": 2, "b": 2, "c": 2}
    # whatever the capacities: every fed operator within [2, 3] subtasks and at or under 0.8 at the top rate
    for caps in ({"a": 5_000.0, "b": 60_000.0}, {"a": 9_000.0, "b": 12_000.0, "c": 7_500.0}):
        top, layout = spread_layout(caps)
        for op, r in caps.items():
            assert SPREAD_SUBTASKS <= layout[op] <= SPREAD_SUBTASKS_MAX
            assert top / layout[op] / r <= SPREAD_TOP + 1e-9
    with pytest.raises(ValueError, match="nothing to spread"):
        spread_layout({"a": math.inf})


def test_the_spread_phase_scales_every_operator_out_from_an_empty_queue_and_goes_back_after() -> None:
    """The driver's order: the generator stopped before the restart (the ladder's load would queue up during it),
    every operator scaled out to `spread_layout`'s layout for the capacities scaled to this machine (the measured
    saturated rate over the estimated one), fresh task managers rewarmed under the first level, the levels
    (fractions of the top rate) recorded in the new layout (the first read as long after the restart as a
    deployment phase), then back to the base layout and a wait as long before the overload. A failed rescale is
    recorded without a plateau and the job goes back; a quick plan has no spread phase."""
    from types import SimpleNamespace

    from harness.backends.base import RescaleResult
    from harness.calibration.measure import QueryCalibration
    from harness.calibration.plan import SPREAD, plan_for, spread_layout

    base = {"bids_source": 1, "map": 1, "sink": 1}
    estimate = {"bids_source": 10_000.0, "map": 13_000.0, "sink": 21_000.0}  # the sink fastest, the source slowest

    def run(fail: bool, quick: bool = False) -> tuple[list[tuple[Any, ...]], QueryCalibration]:
        events: list[tuple[Any, ...]] = []
        clock = [0.0]

        class Backend:
            def __init__(self) -> None:
                self.state = SimpleNamespace(parallelism=dict(base), cpu_share={}, job_id="j")
                self.method = ""

            def rescale(self, target: dict[str, int], shares: object) -> RescaleResult:
                events.append(("rescale", dict(target)))
                if fail and target != base:
                    return RescaleResult(parallelism=dict(self.state.parallelism), ok=False, error="timed out")
                self.state.parallelism = dict(target)
                return RescaleResult(parallelism=dict(target))

        def wait(seconds: float) -> None:
            clock[0] += seconds
            events.append(("wait", seconds))

        cal = QueryCalibration.__new__(QueryCalibration)
        cal.backend, cal.topology = Backend(), load_topology("q1")
        cal.plan = plan_for(cal.topology, quick)
        tms = ["tm-1", "tm-2", "tm-3"]
        cal.stack = SimpleNamespace(taskmanager_ids=lambda: tms + (["tm-4"] if any(
            e[0] == "rescale" and e[1] != base for e in events) and not fail else []))
        cal.recorder = SimpleNamespace(job_id=None, phase="", now=lambda: clock[0])
        cal.say, cal.phases = (lambda _: None), []
        cal.estimate, cal.selectivity, cal.rate_capacity = estimate, {}, 10_000.0
        cal._generate = lambda rates: events.append(("generate", rates[0], len(rates)))  # type: ignore[method-assign]
        cal._rewarm = lambda s: events.append(("rewarm",))  # type: ignore[method-assign]
        cal._wait = wait  # type: ignore[method-assign]
        cal._state_bytes = lambda: math.nan  # type: ignore[method-assign]
        cal._spread(20_000.0)  # this machine twice as fast as the estimate
        return events, cal

    events, cal = run(fail=False)
    d = cal.plan.durations
    first = max(d.settle_s, d.rescale_settle_s + d.deployment_settle_s)
    top, wide = spread_layout({op: 2 * r for op, r in estimate.items()})
    assert top == pytest.approx(2 * 3 * 0.8 * 10_000.0) and wide == {"bids_source": 3, "map": 3, "sink": 2}
    kinds = [e[0] for e in events]
    assert events[0] == ("generate", 0.0, 3600) and events[1] == ("rescale", wide)
    assert events[2] == ("generate", SPREAD[0] * top, 3600) and events[3] == ("rewarm",)
    assert events[4][:2] == ("generate", SPREAD[0] * top)
    spread = [p for p in cal.phases if p.kind == "spread"]
    assert [p.rate for p in spread] == pytest.approx([f * top for f in SPREAD])
    assert all(p.parallelism == wide for p in spread)
    assert [p.settle_s for p in spread] == [first] + [d.settle_s] * (len(SPREAD) - 1)
    assert spread[0].t1 - spread[0].t0 == pytest.approx(d.level_s + first - d.settle_s)
    assert events[-3:] == [("generate", 0.0, 3600), ("rescale", base), ("wait", first)]
    assert kinds.count("rescale") == 2 and cal.backend.state.parallelism == base

    failed, cal = run(fail=True)
    (rec,) = cal.phases
    assert rec.kind == "spread" and math.isnan(rec.t1) and rec.extra["error"] == "timed out"
    assert cal.backend.state.parallelism == base and ("rewarm",) not in failed
    assert run(fail=False, quick=True)[0] == []


def test_a_bottleneck_layout_scales_out_a_targets_upstream_and_what_a_source_feeds_as_much_as_reaches_it() -> None:
    """q11 at 0.1 CPU: the window's phase scales out its source (1.25 x the offered rate's share, at least 2); the
    source's stays at one subtask and scales out its window (session 17's capacities: 1.25 x 1.6 x 22.1k / 19.7k,
    3), the sink (fed 2 %) staying at one. With session 18's (source 35.9k, window 18.9k) the window would need 4 for
    the offered rate: held at 3 and named, and the phase still runs (3 take twice the source's capacity); a window
    of 7k/s could not take even that at 3 (the phase would not run). q8's person source: its join gets what the
    person source is offered and all the auction source delivers at one subtask by its estimate (the backlog the
    phases before left), not the auctions' offered share."""
    from harness.calibration.measure import BottleneckLayout, bottleneck_layout

    q11 = load_topology("q11")
    base = {op.name: 1 for op in q11.operators}
    est = {"bids_source": 22_100.0, "session_window": 19_700.0, "sink": 4_200.0}
    sel = {"bids_source": 1.0, "session_window": 0.02, "sink": 0.0}
    assert bottleneck_layout(q11, "session_window", 1.6 * 19_700.0, base, est, sel) == BottleneckLayout(
        {"bids_source": 2, "session_window": 1, "sink": 1}, [])
    assert bottleneck_layout(q11, "bids_source", 1.6 * 22_100.0, base, est, sel) == BottleneckLayout(
        {"bids_source": 1, "session_window": 3, "sink": 1}, [])
    s18 = {"bids_source": 35_900.0, "session_window": 18_900.0, "sink": 4_300.0}
    assert bottleneck_layout(q11, "bids_source", 1.6 * 35_900.0, base, s18, sel) == BottleneckLayout(
        {"bids_source": 1, "session_window": 3, "sink": 1}, ["session_window"], runs=True)
    slow = {**est, "session_window": 7_000.0}
    assert not bottleneck_layout(q11, "bids_source", 1.6 * 22_100.0, base, slow, sel).runs
    q8 = load_topology("q8")
    base8 = {op.name: 1 for op in q8.operators}
    est8 = {"person_source": 10_000.0, "auction_source": 60_000.0, "window_join": 30_000.0, "sink": 100_000.0}
    sel8 = {"person_source": 1.0, "auction_source": 1.0, "window_join": 0.05, "sink": 0.0}
    rate = 1.6 * 10_000.0 / 0.25  # the persons are a quarter of the events: the auctions are offered 48k/s
    # the join gets 16k + 60k: 1.25 x 76k / 30k needs 4 (held at 3); at the person source's estimate, 70k: 3 take it
    assert bottleneck_layout(q8, "person_source", rate, base8, est8, sel8) == BottleneckLayout(
        {"person_source": 1, "auction_source": 1, "window_join": 3, "sink": 1}, ["window_join"], runs=True)
    # base parallelism above the cap stays
    wide = {**base8, "sink": 4}
    assert bottleneck_layout(q8, "person_source", rate, wide, est8, sel8).layout["sink"] == 4


def test_the_bottleneck_phases_run_in_the_plans_order_skip_a_source_whose_downstream_cannot_carry_it_and_go_back(
) -> None:
    """The driver: each planned operator's phase in its layout, the backlog before and after a phase recorded; a
    source whose downstream would need more than 3 subtasks is skipped (recorded without a plateau, the reason
    said: it could not limit), and the job goes back to its base layout after."""
    from types import SimpleNamespace

    from harness.backends.base import RescaleResult
    from harness.calibration.measure import QueryCalibration
    from harness.calibration.plan import plan_for

    topo = load_topology("q11")
    base = {op.name: 1 for op in topo.operators}

    def run(window_estimate: float) -> tuple[QueryCalibration, list[dict[str, int]]]:
        rescales: list[dict[str, int]] = []

        class Backend:
            def __init__(self) -> None:
                self.state = SimpleNamespace(parallelism=dict(base), cpu_share={}, job_id="j")
                self.method = ""

            def rescale(self, target: dict[str, int], shares: object) -> RescaleResult:
                rescales.append(dict(target))
                self.state.parallelism = dict(target)
                return RescaleResult(parallelism=dict(target))

        cal = QueryCalibration.__new__(QueryCalibration)
        cal.backend, cal.topology, cal.plan = Backend(), topo, plan_for(topo, False)
        cal.stack = SimpleNamespace(taskmanager_ids=lambda: ["tm-1"])
        cal.recorder = SimpleNamespace(job_id=None, phase="", now=lambda: 0.0)
        cal.say, cal.phases, cal.offered = (lambda _: None), [], 30_000.0
        cal.estimate = {"bids_source": 22_100.0, "session_window": window_estimate, "sink": 4_200.0}
        cal.selectivity = {"bids_source": 1.0, "session_window": 0.02, "sink": 0.0}
        cal._generate = lambda rates: None  # type: ignore[method-assign]
        cal._rewarm = lambda s: None  # type: ignore[method-assign]
        cal._wait = lambda s: None  # type: ignore[method-assign]
        cal._state_bytes = lambda: math.nan  # type: ignore[method-assign]
        lags = iter(range(1_000_000, 2_000_000, 1_000))
        cal._lag = lambda: float(next(lags))  # type: ignore[method-assign]
        cal._bottleneck_phases()
        return cal, rescales

    cal, rescales = run(19_700.0)
    assert [p.operator for p in cal.phases] == ["session_window", "sink", "bids_source"]
    src = cal.phases[-1]
    assert src.parallelism == {"bids_source": 1, "session_window": 3, "sink": 1}
    assert src.rate == pytest.approx(1.6 * 22_100.0)
    assert src.extra["backlog_before"] < src.extra["backlog_after"] == cal.phases[-2].extra["backlog_after"] + 2_000
    assert rescales[-1] == base and cal.backend.state.parallelism == base
    cal, rescales = run(7_000.0)
    src = cal.phases[-1]
    assert src.operator == "bids_source" and math.isnan(src.t1) and "downstream too slow" in src.extra["error"]
    assert src.extra["capped"] == ["session_window"]
    assert {"bids_source": 1, "session_window": 3, "sink": 1} not in rescales
    assert rescales[-1] == base


def test_a_lift_never_turns_about_the_same_share_measured_at_fewer_cores() -> None:
    """CI, 2026-11-28: q1's quick calibration at 0.25 CPU; the map's share points as that profile recorded them.
    Share 1.0 saturated at 124k records/s on 0.236 cores (a contended host), then ran at 133k unsaturated on
    0.245. The old lift turned the line about that saturation: 0.132 cores of overhead, shares 0.25 and 0.5 left
    no capacity. A line through two points a hundredth of a core apart is noise: the two pool to their median
    (session 28), and every share keeps capacity, growing with its CPU."""
    q, sat_f = 0.25, 0.97264
    cpu = CpuModel(idle_cores=0.02, cores_per_record=math.nan, saturated_fraction=sat_f)
    pts = [SharePoint(share=s, capacity=c, saturated=b, cpu_cores=x) for s, c, b, x in [
        (1.0, 124_441.0, True, 0.236357), (0.5, 67_735.7, True, 0.124983), (1.0, 24_722.7, False, 0.0899806),
        (1.0, 55_633.6, False, 0.159976), (1.0, 85_931.2, False, 0.209976), (1.0, 132_586.0, False, 0.244969),
        (1.0, 50_634.7, False, 0.109984), (1.0, 88_658.1, False, 0.194932)]]
    f = fit.capacity_fit(pts, cpu, q)
    read = [f.capacity(s * q * sat_f) for s in (0.25, 0.5, 1.0)]
    assert 0 < read[0] < read[1] < read[2]
    # the saturation and the faster rate on its whole CPU pool to their median, which the line allows where read
    assert (124_441 + 132_586) / 2 <= read[2] < 132_586
    assert f.capacity(0.124983) == pytest.approx(67_735.7, rel=0.01)  # the line passes near the lower saturation
    assert 0 <= f.overhead_cores < 0.25 * q * sat_f


def test_a_turn_that_would_leave_a_measured_share_no_capacity_lowers_the_slope_instead() -> None:
    """A lower share's saturation measured above its nominal CPU (cgroup bursts) can put the turned line's
    overhead past where that share is read: the turn is refused and the CPU per record lowered instead."""
    q = 0.25
    cpu = CpuModel(idle_cores=0.0, cores_per_record=math.nan, saturated_fraction=0.97)
    pts = [SharePoint(share=0.5, capacity=5_000, saturated=True, cpu_cores=0.135),
           SharePoint(share=1.0, capacity=120_000, saturated=False, cpu_cores=0.24)]
    f = fit.capacity_fit(pts, cpu, q)
    assert f.capacity(0.5 * q * 0.97) > 0 and f.capacity(q * 0.97) == pytest.approx(120_000, rel=1e-6)
    assert f.overhead_cores == 0.0 and f.cores_per_record == pytest.approx(q * 0.97 / 120_000, rel=1e-6)


def test_a_turn_goes_about_a_lower_share_where_the_nearest_would_leave_none() -> None:
    """q3's join at 0.25 CPU (the committed profile's share points): 1.6k / 11.2k / 47.4k records/s saturated on
    0.067 / 0.125 / 0.254 cores, not on one line. Turning about share 0.5 left share 0.25 no capacity (0.086 cores
    of overhead); about share 0.25 the line passes that saturation and the median of the two at share 1.0, and
    every share keeps some."""
    q = 0.25
    cpu = CpuModel(idle_cores=0.031, cores_per_record=math.nan, saturated_fraction=0.99986)
    pts = [SharePoint(share=0.25, capacity=1_604.55, saturated=True, cpu_cores=0.0666066),
           SharePoint(share=0.5, capacity=11_188.7, saturated=True, cpu_cores=0.124982),
           SharePoint(share=1.0, capacity=47_359.4, saturated=True, cpu_cores=0.253711),
           SharePoint(share=1.0, capacity=39_696.3, saturated=True, cpu_cores=0.237109)]
    f = fit.capacity_fit(pts, cpu, q)
    assert "lifted" in f.method
    assert f.capacity(0.0666066) == pytest.approx(1_604.55, rel=1e-6)  # through the lowest saturation
    read = [f.capacity(s * q * 0.99986) for s in (0.25, 0.5, 1.0)]
    assert 0 < read[0] < read[1] < read[2] and read[2] == pytest.approx((47_359.4 + 39_696.3) / 2, rel=1e-6)


def test_a_gauge_line_reads_no_less_than_nothing_at_no_load() -> None:
    """Readings over a narrow range of loads can tilt a line below 0 at no load (a quick calibration's few
    plateaus read through the gauges' 60-s windows): the fit then goes through 0, as no gauge reads less than
    nothing; a line with a positive offset is kept as fitted."""
    levels = [0.5, 0.6, 0.7]
    steep = [np.array([0.2, 0.2]), np.array([0.45, 0.45]), np.array([0.7, 0.7])]
    g = fit.gauge_model(levels, steep, nonnegative_offset=True)
    x, y = np.array(levels), np.array([0.2, 0.45, 0.7])
    assert g.offset == 0.0 and g.gain == pytest.approx(float(x @ y / (x @ x)))
    kept = fit.gauge_model(levels, [np.array([0.3, 0.3]), np.array([0.35, 0.35]), np.array([0.4, 0.4])],
                           nonnegative_offset=True)
    assert kept.offset == pytest.approx(0.05) and kept.gain == pytest.approx(0.5)
    # only where asked (busy time): a CPU or backpressured line keeps the offset it fits
    assert fit.gauge_model(levels, steep).offset == pytest.approx(-1.05)
    # one level: no gain fits, and the offset alone would read below 0: through 0 as well
    one = fit.gauge_model([0.5], [np.array([0.2, 0.2])], nonnegative_offset=True)
    assert one.offset == 0.0 and one.gain == pytest.approx(0.4)


def test_a_cost_growth_with_state_counts_only_where_the_points_tell_its_slope_from_none() -> None:
    """cost = c0 (1 + per_gb x GB): a clear slope is fitted (and kept with its p-value); one within the points'
    scatter, or from two points, is no growth (per_gb 0) rather than noise the sim would run as a slowdown."""
    rng = np.random.default_rng(7)
    gb = np.linspace(0.001, 0.1, 10)
    c0, growth = 4e-6, 20.0  # +2 % per MB: three times the cost at 100 MB
    clear = fit.state_cost(gb, c0 * (1 + growth * gb) * (1 + rng.normal(0, 0.01, gb.size)), 10.0, 1e8)
    assert clear.slope_p < fit.STATE_SLOPE_P and clear.per_gb == pytest.approx(growth, rel=0.15) and clear.n == 10
    # q11's window at 0.1 CPU (session 27): eight phases, 0.6-3.4 MB, cost per record 3.5-4.7 us, p = 0.15
    mb = np.array([1.27, 1.41, 2.9, 2.91, 3.45, 3.42, 0.56, 1.62])
    us = np.array([3.704, 3.846, 4.748, 4.093, 4.074, 3.932, 3.549, 4.233])
    window = fit.state_cost(mb / 1e3, us / 1e6, 14.2, 3.4e6)
    assert window.slope_p == pytest.approx(0.147, abs=0.01) and window.per_gb == 0.0
    # the same points with the slope made plain: counted
    steep = fit.state_cost(mb / 1e3, (3.5 + 0.4 * mb) / 1e6, 14.2, 3.4e6)
    assert steep.slope_p < fit.STATE_SLOPE_P and steep.per_gb > 0
    # two points say nothing of their scatter; a falling cost is no growth either
    assert fit.state_cost([0.001, 0.002], [4e-6, 5e-6], 1.0, 2e6).per_gb == 0.0
    assert math.isnan(fit.state_cost([0.001, 0.002], [4e-6, 5e-6], 1.0, 2e6).slope_p)
    falling = fit.state_cost(gb, c0 * (1 - 5.0 * gb), 1.0, 1e8)
    assert falling.slope_p < fit.STATE_SLOPE_P and falling.per_gb == 0.0
    # no spread in state, or unknown points: nothing to tell a slope from
    flat = fit.state_cost([0.002] * 5, [4e-6, 5e-6, 4e-6, 5e-6, 4e-6], 1.0, 2e6)
    assert flat.per_gb == 0.0 and math.isnan(flat.slope_p)
    holes = fit.state_cost([0.001, math.nan, 0.002, 0.003], [4e-6, 9e-6, math.nan, 5e-6], 1.0, 3e6)
    assert holes.n == 2 and holes.per_gb == 0.0 and math.isnan(holes.slope_p)
