"""From one query's recorded samples to its calibrated profile (pure: no stack, no clock).

Every phase is cut to its plateau (the samples after its settling time); per operator and plateau
the true quantities come from exact counters (records in and out, the process' CPU time) and the
readings from Flink's gauges. What is saturated is decided from CPU (and, for a throttled source in a
phase made to saturate it, from its downstream's idle time), not from the readings being calibrated:
an operator whose task manager used at least `SATURATED_CPU` of its quota is the bottleneck there (a
host too busy to grant the quota is caught by the busy reading as a fallback, and the profile records
the fraction of the quota saturated task managers really got).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from harness import gauge_window
from harness.calibrated_profile import (
    HELD_BACK,
    ColdStart,
    DowntimeModel,
    FedScaledOut,
    GaugeModel,
    HostLoad,
    Meters,
    OperatorProfile,
    OperatorReadings,
    PendingModel,
    Provenance,
    QueryProfile,
    SharePoint,
    Stat,
    WarmUp,
)
from harness.calibration import fit, truth
from harness.calibration.measure import Measurement, PhaseRecord
from harness.topology import OperatorSpec, Topology, fed_by_several_channels

SATURATED_CPU = fit.CPU_BOUND  # fraction of its quota a task manager uses when its subtask is the bottleneck
SATURATED_BUSY = 0.9  # fallback when the host did not grant the quota: busy time near a full second
MIN_STEP = 0.05  # a ladder step smaller than this (busy fraction) is not used for the meter lag


@dataclass(frozen=True)
class OpPlateau:
    phase: PhaseRecord
    operator: str
    p: fit.Plateau
    cpu_reading: np.ndarray  # CPU time / quota over 5 s spans (the `cpu` signal's raw material)
    samples: pd.DataFrame  # the plateau's rows of this operator (all subtasks)
    # when each of p.busy's and p.backpressured's updates was made (empty: not known; `update_times`), and by which
    # subtask
    busy_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    backpressured_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    busy_sub: np.ndarray = field(default_factory=lambda: np.zeros(0))
    backpressured_sub: np.ndarray = field(default_factory=lambda: np.zeros(0))


def _share(phase: PhaseRecord, op: str) -> float:
    return float(phase.shares.get(op, 1.0))


def normalised(m: Measurement) -> Measurement:
    """Samples without a subtask (a task manager between jobs) dropped; operator names as the topology's
    (samples recorded before `recorder.label_operator` kept the reporter's leading '_')."""
    df = m.samples
    if df.empty or "operator" not in df:
        return m
    df = df[df.operator.notna()].copy()
    df["operator"] = df.operator.astype(str).str.lstrip("_")
    return replace(m, samples=df)


def plateaus(m: Measurement) -> list[OpPlateau]:
    """Every (phase, operator) plateau with one subtask's worth of truth and readings.

    Rates are per subtask (an operator at parallelism p divides its total by p)."""
    out: list[OpPlateau] = []
    df = m.samples
    if df.empty or "operator" not in df:
        return out

    for ph in m.phases:
        if ph.kind in ("rescale", "coldstart", "warmup", "drain") or not math.isfinite(ph.t1):
            continue
        seg = df[(df.phase == ph.name) & (df.t >= ph.t0 + ph.settle_s) & (df.t <= ph.t1)]
        for op, g in seg.groupby("operator"):
            op = str(op)
            subs = []
            for _, gs in g.groupby("subtask"):
                gs = gs.sort_values("t")
                t = gs.t.to_numpy(dtype=float)
                col_in = "rec_out" if _is_source(m, op) else "rec_in"
                subs.append((
                    fit.counter_rate(t, gs[col_in].to_numpy(dtype=float)) if col_in in gs else math.nan,
                    fit.counter_rate(t, gs.rec_out.to_numpy(dtype=float)) if "rec_out" in gs else math.nan,
                    fit.counter_rate(t, gs.proc_cpu_s.to_numpy(dtype=float)) if "proc_cpu_s" in gs else math.nan,
                    gs,
                ))
            if not subs:
                continue
            rate_in, rate_out, cores = (_mean_known([s[i] for s in subs]) for i in range(3))
            rows = pd.concat([s[3] for s in subs])
            quota = m.quota * _share(ph, op)

            def updates(col: str, scale: float = 1.0, rows: pd.DataFrame = rows) -> np.ndarray:
                if col not in rows:
                    return np.zeros(0)
                parts = [fit.distinct_updates(gs.sort_values("t")[col].to_numpy(dtype=float)) * scale
                         for _, gs in rows.groupby("subtask")]
                return np.concatenate(parts) if parts else np.zeros(0)

            def update_times(col: str, rows: pd.DataFrame = rows) -> tuple[np.ndarray, np.ndarray]:
                """When each of `updates(col)` was made, in the same order, and by which subtask: when it was first
                seen, but a value already showing at the plateau's first sample was made before, at the meter's
                update before the next one seen (the gauge updates every interval), or when first seen if that is
                earlier; NaN if none was seen after it (`_line_times`)."""
                if col not in rows:
                    return np.zeros(0), np.zeros(0)
                parts, subs = [], []
                for sub, gs in ((k, g.sort_values("t")) for k, g in rows.groupby("subtask")):
                    index = fit.distinct_update_index(gs[col].to_numpy(dtype=float))
                    at = gs.t.to_numpy(dtype=float)[index]
                    if len(index) and index[0] == 0:
                        # (no later than seen: a repeated value or a missed sample can hide the update between)
                        at[0] = min(at[0], at[1] - gauge_window.METER_INTERVAL_S) if len(at) > 1 else math.nan
                    parts.append(at)
                    subs.append(np.full(len(at), int(sub)))
                return (np.concatenate(parts), np.concatenate(subs)) if parts else (np.zeros(0), np.zeros(0))

            cpu_r: list[float] = []
            for _, gs in rows.groupby("subtask"):
                gs = gs.sort_values("t")
                if "jvm_time_ns" not in gs:
                    continue
                tt, ns = gs.t.to_numpy(dtype=float), gs.jvm_time_ns.to_numpy(dtype=float)
                for a in range(0, len(tt) - 5, 5):
                    if tt[a + 5] > tt[a] and np.isfinite(ns[a]) and np.isfinite(ns[a + 5]):
                        cpu_r.append((ns[a + 5] - ns[a]) / 1e9 / (tt[a + 5] - tt[a]) / quota)
            flagged = float((rows.is_bp > 0).mean()) if "is_bp" in rows and rows.is_bp.notna().any() else math.nan
            thr = []
            for _, gs in rows.groupby("subtask"):
                gs = gs.sort_values("t")
                if "periods" in gs and gs.periods.notna().sum() >= 2:
                    per = gs.periods.dropna()
                    dp = per.iloc[-1] - per.iloc[0]
                    dt_ = gs.throttled.dropna().iloc[-1] - gs.throttled.dropna().iloc[0]
                    if dp > 0:
                        thr.append(dt_ / dp)
            pending = growth = math.nan
            if "pending" in rows and rows.pending.notna().sum() >= 2:
                pend = rows.sort_values("t")[["t", "pending"]].dropna()
                pending = float(pend.pending.mean())
                span = pend.t.iloc[-1] - pend.t.iloc[0]
                growth = float((pend.pending.iloc[-1] - pend.pending.iloc[0]) / span) if span > 0 else math.nan
            p = fit.Plateau(
                phase=ph.name, share=_share(ph, op), rate_in=rate_in, rate_out=rate_out, cores=cores,
                busy=updates("busy_ms", 1e-3), backpressured=updates("bp_ms", 1e-3), idle=updates("idle_ms", 1e-3),
                cpu_jvm=updates("jvm_load"), flagged=flagged, state_bytes=ph.state_bytes,
                throttled=float(np.mean(thr)) if thr else math.nan, pending=pending, pending_growth=growth,
            )
            (busy_t, busy_sub), (bp_t, bp_sub) = update_times("busy_ms"), update_times("bp_ms")
            out.append(OpPlateau(ph, op, p, np.asarray(cpu_r), rows, busy_t, bp_t, busy_sub, bp_sub))
    return out


def _line_times(pl: OpPlateau, t: np.ndarray) -> np.ndarray:
    """The update times to set a line's readings by: a value the plateau showed throughout (its time unknown, NaN)
    at the plateau's start, up to a meter interval after it was made. Near enough for a line; not for the noise
    (successive updates differ by 1/12 of a load step per interval, as much as their shared noise moves them), which
    takes the updates whose times are known only."""
    start = float(pl.samples.t.min()) if len(pl.samples) else math.nan
    return np.where(np.isfinite(t), t, start)


def _mean_known(xs: Sequence[float]) -> float:
    """The mean of the values measured; NaN when none was (a throttled task manager answered once in a
    short plateau: no rate), without numpy's empty-slice warning."""
    known = [x for x in xs if math.isfinite(x)]
    return float(np.mean(known)) if known else math.nan


def _is_source(m: Measurement, op: str) -> bool:
    return op.endswith("_source")


SATURATING = ("overload", "share", "bottleneck")  # phases that overload the job: its bottleneck saturates
THROTTLED = 0.5  # a task manager throttled in at least this share of CFS periods is CPU-bound
BACKLOG_S = 2.0  # a phase is saturated when the sources hold more than this many seconds of records
BACKLOG_GROWTH = 0.05  # ... or their backlog grows by more than this share of their rate


def _cpu_bound(pl: OpPlateau, quota: float) -> bool:
    if math.isfinite(pl.p.throttled):
        return pl.p.throttled >= THROTTLED
    cap = quota * pl.p.share
    if math.isfinite(pl.p.cores) and pl.p.cores >= SATURATED_CPU * cap:
        return True
    return pl.phase.kind in (*SATURATING, "parallelism") and pl.p.busy_mean >= SATURATED_BUSY


def backlogged(phase_plateaus: Sequence[OpPlateau], topology: Topology) -> bool:
    """Records queued in Kafka beyond `BACKLOG_S` seconds of the sources' rate: the job ran saturated."""
    srcs = {s.name for s in topology.sources}
    pend = sum(pl.p.pending for pl in phase_plateaus if pl.operator in srcs and math.isfinite(pl.p.pending))
    rate = sum(pl.p.rate_in for pl in phase_plateaus if pl.operator in srcs and math.isfinite(pl.p.rate_in))
    growth = sum(pl.p.pending_growth for pl in phase_plateaus
                 if pl.operator in srcs and math.isfinite(pl.p.pending_growth))
    return rate > 0 and (pend > BACKLOG_S * rate or growth > BACKLOG_GROWTH * rate)


def bottlenecks(phase_plateaus: Sequence[OpPlateau], topology: Topology, quota: float) -> set[str]:
    """The operators that limited a phase. Only a phase with a backlog in Kafka was limited at all; then
    the bottleneck is the most downstream CPU-bound operator (one upstream of it may run hot too, but
    it is blocked, not saturated) and any source at its own CPU limit that it did not hold back, else the
    sources themselves that were not held back (backpressured, unless throttled in a phase made to saturate them:
    see `_throttled_in_its_own_phase`; none: nothing limited the phase measurably). A source is
    not judged by its CPU alone: a KafkaSource reader used its task manager's quota while reading little
    (measured with the tiered JIT)."""
    if not backlogged(phase_plateaus, topology):
        return set()
    srcs = {s.name for s in topology.sources}
    hot = {pl.operator for pl in phase_plateaus if pl.operator not in srcs and _cpu_bound(pl, quota)}
    if not hot:  # the sources limited, except those held back from downstream (blocked, not saturated)
        return {pl.operator for pl in phase_plateaus
                if pl.operator in srcs
                and (not _blocked(pl) or _throttled_in_its_own_phase(pl, phase_plateaus, topology))}
    # a source at its own CPU limit with its own backlog, not held back from downstream, limited itself too
    # (measured: q1 at 0.25 CPU, source and map both throttled at 127k/s, the source backpressured 5 % of its
    # time; a source held back by a slower map was throttled in under 10 % of periods). At full shares, or
    # where the source is the one given a lower share: with another operator throttled by a lower share, that
    # one limited (a source at 100k/s of its 125k was throttled in half the periods there)
    co = {pl.operator for pl in phase_plateaus if pl.operator in srcs
          and (pl.phase.kind == "overload" or pl.phase.operator == pl.operator)
          and _cpu_bound(pl, quota) and not _blocked(pl) and backlogged([pl], topology)}
    return {op for op in hot if not (hot & topology.descendants(op))} | co


BLOCKED = 0.5  # a subtask backpressured at least this share of its time is held back from downstream


MIN_SCALED_OUT = 2  # plateaus at two or more subtasks that make a busy line of their own (fewer: `busy` reads them)
# ... over at least this range of true busy levels: q1's sink at 2 subtasks was read at 0.07-0.19 only, where a
# line falls by 0.48 per unit, and at 0.3 it would read 0
MIN_SCALED_SPAN = 0.25


def scaled_out_line(reads: fit.Reads) -> GaugeModel | None:
    """The busy line of scaled-out subtasks, or None where too few plateaus (with a known level and a reading) or
    too narrow a range of levels measured it to extrapolate, or its readings fell as the load grew: the line at one
    subtask then reads them."""
    n = len(reads.readings)
    keep = [i for i in range(n) if math.isfinite(reads.levels[i]) and len(reads.readings[i])]
    lv = [reads.levels[i] for i in keep]
    if len(keep) < MIN_SCALED_OUT or max(lv) - min(lv) < MIN_SCALED_SPAN:
        return None
    masks, subs = reads.noise_masks or [None] * n, reads.subtasks or [None] * n
    line = fit.line_of(fit.Reads(lv, [reads.readings[i] for i in keep], [reads.overlaps[i] for i in keep],
                                 [masks[i] for i in keep], [subs[i] for i in keep]), nonnegative_offset=True)
    # a busy reading that falls as the load grows measured no line (what the readings' windows held varied more
    # than the load did): the line at one subtask reads them
    return line if line.gain > 0.0 else None


def _subtasks(pl: OpPlateau) -> int:
    """The operator's subtasks in the plateau's phase."""
    return int(pl.phase.parallelism.get(pl.operator, 1))


def _blocked(pl: OpPlateau) -> bool:
    """Backpressured most of the time: measured in q3 at 0.25 CPU, an auction source taking 68 records/s at
    0.92 backpressured while its join stalled; taking it for saturated made its capacity 0."""
    bp = pl.p.backpressured_mean
    return math.isfinite(bp) and bp >= BLOCKED


STARVED = 0.3  # an operator idle (waiting for input) at least this share of its time took all it was given


def _throttled_in_its_own_phase(pl: OpPlateau, phase_plateaus: Sequence[OpPlateau], topology: Topology) -> bool:
    """Throttled in most CFS periods in a phase made to saturate it: at the lower CPU share its share phase gave
    it, or in its own bottleneck phase (its downstream scaled out), there only where what it feeds waited for input
    (`STARVED`; a join stalled on its state reads busy or backpressured, not idle: then the source was held back,
    however throttled). A throttled task manager's threads all stop, the network threads sending its output too,
    and backpressured time is wall-clock time: so the throttling reads as backpressure. Measured: q11's source at
    0.1 CPU, share 0.25, throttled in every period, read 0.49-0.71 backpressured while no downstream operator was
    at its CPU limit; taken for held back, its capacity became the CPU model's extrapolation (32.8k/s; its share
    phases give 27.4k). In its own bottleneck phase (session 18) it read 0.19, throttled in every period, its window
    at 3 subtasks idle 0.41-0.65. Only where nothing downstream is CPU-bound: beside a saturated operator, a
    held-back source stays a lower bound."""
    if pl.phase.operator != pl.operator or not (math.isfinite(pl.p.throttled) and pl.p.throttled >= THROTTLED):
        return False
    if pl.phase.kind == "share":
        return pl.p.share < 1.0
    if pl.phase.kind != "bottleneck":
        return False
    idle = {o.operator: _mean_known(list(o.p.idle)) for o in phase_plateaus}
    fed = topology.downstream(pl.operator)
    return bool(fed) and all(math.isfinite(idle.get(f, math.nan)) and idle[f] >= STARVED for f in fed)


def _host_load(m: Measurement) -> HostLoad:
    h = m.host
    before = float(m.facts.get("load_before", [math.nan])[0]) if m.facts.get("load_before") else math.nan
    before5 = float(m.facts.get("load_before", [math.nan, math.nan])[1]) if m.facts.get("load_before") else math.nan
    if h.empty:
        return HostLoad(before_1m=before, before_5m=before5)
    return HostLoad(before_1m=before, before_5m=before5, during_mean_1m=float(h.load1.mean()),
                    during_max_1m=float(h.load1.max()), host_cpu_busy=float(h.host_busy.mean()))


def _meter_lag(m: Measurement, pls: list[OpPlateau], topology: Topology) -> tuple[float, float, int]:
    """(meter update interval, busy reading lag behind the true rate, transitions used)."""
    df = m.samples
    # steps of the offered load between consecutive phases in one layout (a rescale between two is no step)
    steps = [(a, b) for a, b in zip(m.phases, m.phases[1:], strict=False)
             if a.kind in ("warmup", "ladder", "spread") and b.kind in ("ladder", "spread", "overload")
             and a.parallelism == b.parallelism]
    lags: list[float] = []
    intervals: list[float] = []
    by = {(pl.phase.name, pl.operator): pl for pl in pls}
    for prev, nxt in steps:
        for op in topology.names:
            a, b = by.get((prev.name, op)), by.get((nxt.name, op))
            if a is None or b is None or abs(b.p.busy_mean - a.p.busy_mean) < MIN_STEP:
                continue
            g = df[(df.operator == op) & (df.t >= nxt.t0 - 2) & (df.t <= nxt.t1)].sort_values("t")
            g = g[g.subtask == g.subtask.min()]
            if len(g) < 4 or "busy_ms" not in g:
                continue
            t = g.t.to_numpy(dtype=float)
            col = "rec_out" if _is_source(m, op) else "rec_in"
            rate = np.diff(g[col].to_numpy(dtype=float)) / np.maximum(np.diff(t), 1e-6)
            t_true = fit.step_lag(t[1:], rate, nxt.t0 - 2, a.p.rate_in, b.p.rate_in)
            t_read = fit.step_lag(t, g.busy_ms.to_numpy(dtype=float) / 1000.0, nxt.t0 - 2, a.p.busy_mean,
                                  b.p.busy_mean)
            if math.isfinite(t_true) and math.isfinite(t_read):
                lags.append(max(0.0, t_read - t_true))
            busy = g.busy_ms.to_numpy(dtype=float)
            changes = t[1:][np.diff(busy) != 0]
            if len(changes) >= 3:
                intervals.append(float(np.median(np.diff(changes))))
    interval = float(np.median(intervals)) if intervals else 5.0
    return interval, float(np.median(lags)) if lags else math.nan, len(lags)


KNOWN_WINDOW = 0.7  # a reading counts toward a line where its window's truth is known for this share of it


def _levels_per_second(m: Measurement, spec: OperatorSpec, pls: Sequence[OpPlateau],
                       capacity_at: Callable[[float], float], limiting: dict[str, set[str]], topology: Topology,
                       full: Callable[[OpPlateau], bool], queued_phases: set[str]) -> tuple[
                           np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(second ends, true busy, true backpressured, records queued at its input) of one operator per second of
    the measurement. Known only in the phases it has a plateau in, where the phase says what limited: its records
    per subtask / its capacity at the phase's CPU share (1 in a phase it limited: `full`), and, where an operator
    downstream of it limited, the rest of the second held back. Elsewhere (a drain, a warm-up, a rescale, between
    phases) NaN: a drain's backlog holds it back or queues at its input without a plateau saying so."""
    phases = sorted((p for p in m.phases if math.isfinite(p.t1)), key=lambda p: p.t0)
    t0s = np.array([p.t0 for p in phases])
    mine = {pl.phase.name for pl in pls if pl.operator == spec.name}
    full_in = {pl.phase.name for pl in pls if pl.operator == spec.name and full(pl)}

    def phase_at(t: float) -> PhaseRecord | None:
        k = int(np.searchsorted(t0s, t, side="right")) - 1
        return phases[k] if k >= 0 and t < phases[k].t1 else None

    def share_at(t: float) -> float:
        ph = phase_at(t)
        return _share(ph, spec.name) if ph is not None else 1.0

    def is_full(t: float) -> bool:
        ph = phase_at(t)
        return ph is not None and ph.name in full_in

    rows = m.samples[m.samples.operator == spec.name]
    col = "rec_out" if spec.is_source else "rec_in"
    seconds, u = truth.utilisation_per_second(rows, col, capacity_at, share_at, is_full)
    bp = np.full(len(seconds), np.nan)
    queued = np.zeros(len(seconds), dtype=bool)
    for i, t in enumerate(seconds):
        ph = phase_at(t)
        if ph is None or ph.name not in mine:
            u[i] = math.nan
            continue
        queued[i] = ph.name in queued_phases
        held = any(spec.name in topology.ancestors(b) for b in limiting.get(ph.name, ()))
        bp[i] = (max(0.0, 1.0 - u[i]) if math.isfinite(u[i]) else math.nan) if held else 0.0
    return seconds + 1.0, u, bp, queued  # each second's value, at the end of the second it was binned in


# (operator, gauge, phase, its subtasks in the plateau, update times, readings, their subtasks, the truth each one's
# window saw): the windowed readings a line is fitted through, as read (benchmarks/bench_gauge_noise.py sets them
# against the fitted line)
ReadingTrace = Callable[[str, str, str, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


def build_profile(m: Measurement, topology: Topology, provenance: Provenance,
                  downtime_slopes: dict[str, tuple[float, str]] | None = None,
                  trace: ReadingTrace | None = None) -> QueryProfile:
    """The calibrated profile of `m.query` (see module docstring); `downtime_slopes[method]` = (s per GB,
    where it came from), pooled over the calibrated queries by the caller; `trace` sees the windowed readings."""
    m = normalised(m)
    pls = plateaus(m)
    q = m.quota
    limiting: dict[str, set[str]] = {}
    for pl in pls:
        limiting.setdefault(pl.phase.name, set())
    for name in limiting:
        limiting[name] = bottlenecks([pl for pl in pls if pl.phase.name == name], topology, q)

    def saturated(pl: OpPlateau, _q: float = q) -> bool:
        """It limited its phase. In a bottleneck phase only the operator made the bottleneck counts: another that
        limited instead (scaled out but capped, or slower than estimated) is no measure of one subtask (as the
        parallelism phases are not)."""
        if pl.phase.kind == "bottleneck" and pl.operator != pl.phase.operator:
            return False
        return pl.operator in limiting.get(pl.phase.name, set())

    def backlogged_input(pl: OpPlateau) -> bool:
        """Saturated at share 1.0 with records waiting at its input: a source reading a backlog, or an operator
        holding back an upstream one (backpressured `HELD_BACK` of its time or more), as the bottleneck of a run
        is. q1's map at 0.1 CPU saturated in the overload phase with its source 1-4 % backpressured: not one."""
        if not (saturated(pl) and pl.p.share == 1.0 and pl.phase.kind in SATURATING):
            return False
        if topology.op(pl.operator).is_source:
            return True
        ups = topology.ancestors(pl.operator)
        return any(o.p.backpressured_mean >= HELD_BACK for o in pls
                   if o.phase.name == pl.phase.name and o.operator in ups and math.isfinite(o.p.backpressured_mean))

    starts = truth.restarts(m.samples)  # each restart begins the gauges' windows afresh
    ops: dict[str, OperatorProfile] = {}
    capacities: dict[str, Callable[[float], float]] = {}  # operator -> its capacity at a CPU share
    for spec in topology.operators:
        mine = [pl for pl in pls if pl.operator == spec.name]
        if not mine:
            raise ValueError(f"{m.query}: no samples of operator {spec.name}")
        # deployment phases measure only the error a restart leaves in the readings: right after a restart the
        # CPU also does the restart's own work (q11's source at 0.1 CPU: 6.6 CPU-us per record after an in-place
        # restart, 3.8-4.5 on the ladder before), which would tilt the CPU model: they stay out of every other fit
        redeployed = [pl for pl in mine if pl.phase.kind == "deployment" and pl.p.share == 1.0]
        mine = [pl for pl in mine if pl.phase.kind != "deployment"]
        # the CPU line from the plateaus at parallelism 1 (the bottleneck and spread phases' scaled-out task managers
        # each carry a part)
        unsat = [pl for pl in mine if not saturated(pl, q) and pl.p.share == 1.0 and _subtasks(pl) == 1
                 and pl.phase.kind not in ("parallelism", "bottleneck")]
        sat = [pl for pl in mine if saturated(pl, q) and pl.phase.kind in SATURATING]
        cpu = fit.cpu_model([pl.p.rate_in for pl in unsat], [pl.p.cores for pl in unsat], q,
                            [pl.p.cores / pl.p.share for pl in sat])
        points = [SharePoint(share=pl.p.share, capacity=pl.p.rate_in, saturated=True, cpu_cores=pl.p.cores,
                             busy_ms=pl.p.busy_mean * 1000.0, n=len(pl.samples),
                             fed_by_several=_fed_by_several(spec, pl)) for pl in sat]
        # plateaus where it was not the bottleneck: lower bounds of its capacity at that share, kept as data
        points += [SharePoint(share=pl.p.share, capacity=pl.p.rate_in, saturated=False, cpu_cores=pl.p.cores,
                              busy_ms=pl.p.busy_mean * 1000.0, n=len(pl.samples),
                              fed_by_several=_fed_by_several(spec, pl))
                   for pl in mine if pl.phase.kind != "parallelism" and not saturated(pl, q)
                   and math.isfinite(pl.p.rate_in)]
        cfit = fit.capacity_fit(points, cpu, q)
        sat_f = cpu.saturated_fraction

        def capacity_at(share: float, cfit: fit.CapacityFit = cfit, sat_f: float = sat_f) -> float:
            return cfit.capacity(share * q * sat_f)

        ins = sum(pl.p.rate_in for pl in unsat if math.isfinite(pl.p.rate_in) and math.isfinite(pl.p.rate_out))
        outs = sum(pl.p.rate_out for pl in unsat if math.isfinite(pl.p.rate_in) and math.isfinite(pl.p.rate_out))
        selectivity = outs / ins if ins > 0 else spec.selectivity
        lined = [pl for pl in mine if pl.phase.kind != "parallelism"]  # the plateaus the readings' lines go through
        # the busy reading of a subtask with records waiting at its input is its own level (the map of q1 at 0.1
        # CPU read 0.10 busy at its capacity with nothing queued, 0.8-0.98 as a run's bottleneck): measured
        # apart; and it depends on the operator's subtasks (q1's source at 0.1 CPU: 0.55-0.64 at one subtask
        # whatever its load, its task manager at its full quota; 0.08-0.14 at two): the busy line at one subtask,
        # and one of its own from the scaled-out plateaus, free (spread, a source's downstream in its bottleneck
        # phase) or held back (a bottleneck's upstream), both as a run's scaled-out operators are
        queued = [pl for pl in lined if backlogged_input(pl)]
        unqueued = [pl for pl in lined if all(pl is not x for x in queued)]
        # readings against the truth: the busy and backpressured gauges average over their window (harness.
        # gauge_window), so each update is set against its operator's true level per second over its own window
        seconds, u_s, bp_s, queued_s = _levels_per_second(
            m, spec, pls, capacity_at, limiting, topology,
            lambda pl: saturated(pl, q) and pl.phase.kind in SATURATING, {pl.phase.name for pl in queued})

        def truth_of(pl: OpPlateau, cap_at: Callable[[float], float] = capacity_at,
                     spec: OperatorSpec = spec) -> tuple[float, float, float]:
            """(true busy, true backpressured, true CPU / quota) over one plateau's own samples."""
            cap = cap_at(pl.p.share)
            u = min(1.0, pl.p.rate_in / cap) if cap > 0 and math.isfinite(pl.p.rate_in) else math.nan
            if saturated(pl, q) and pl.phase.kind in SATURATING:
                u = 1.0
            upstream_of_bottleneck = any(spec.name in topology.ancestors(b) for b in limiting[pl.phase.name])
            # the JVM (container-aware) divides by the cgroup quota now in force, as the CPU reading does
            return u, (max(0.0, 1.0 - u) if upstream_of_bottleneck else 0.0), pl.p.cores / (q * pl.p.share)

        def windowed(plateaus_: Sequence[OpPlateau], plain: Sequence[float], level: np.ndarray, gauge: str,
                     free_only: bool, seconds: np.ndarray = seconds, queued_s: np.ndarray = queued_s) -> fit.Reads:
            """A windowed gauge's true levels, readings and their noise's overlaps per plateau: each update set
            against the truth over its own window, kept where KNOWN_WINDOW of that truth is known (and, `free_only`,
            no second of it had records queued at the input: those read the backlogged level, not the line); the
            plateau's level is their mean, and each is moved by the line's gain by as much as its window's truth
            differs from that mean, so that the spread within a plateau is the gauge's noise, not the window sliding
            over a load step. A plateau whose updates' times are unknown keeps its own samples' truth and readings
            (each update's noise its own)."""
            levels: list[float] = []
            kept: list[np.ndarray] = []
            per: list[np.ndarray | None] = []
            overlaps: list[np.ndarray | None] = []
            masks: list[np.ndarray | None] = []
            subs: list[np.ndarray | None] = []
            for pl, lv in zip(plateaus_, plain, strict=True):
                r, t_known = getattr(pl.p, gauge), getattr(pl, f"{gauge}_t")
                if len(t_known) != len(r) or not len(r):
                    levels.append(lv)
                    kept.append(r)
                    per.append(None)
                    overlaps.append(None)
                    masks.append(None)
                    subs.append(None)
                    continue
                t = _line_times(pl, t_known)
                u = gauge_window.window_means(seconds, level, starts, t, known_share=KNOWN_WINDOW)
                ok = np.isfinite(u)
                if free_only:  # a window with any queued second read the backlogged level in part
                    ok &= gauge_window.window_means(seconds, queued_s.astype(float), starts, t) == 0.0
                sub = getattr(pl, f"{gauge}_sub")
                if trace is not None:
                    trace(pl.operator, gauge, pl.phase.name, _subtasks(pl), t[ok], r[ok], sub[ok], u[ok])
                levels.append(float(u[ok].mean()) if ok.any() else math.nan)
                kept.append(r[ok])
                per.append(u[ok])
                overlaps.append(gauge_window.noise_overlap(t[ok], starts, gauges=sub[ok]))
                masks.append(np.isfinite(t_known[ok]))  # the noise from updates whose times are known
                subs.append(sub[ok])
            slope = fit.fit_line(np.asarray(levels, dtype=float),
                                 np.array([np.mean(r) if len(r) else math.nan for r in kept])).slope
            if not math.isfinite(slope):  # one level: no gain to move the updates by
                return fit.Reads(levels, kept, overlaps, masks, subs)
            gain = fit.gauge_model(levels, kept, nonnegative_offset=gauge == "busy").gain
            return fit.Reads(levels, [r if u is None else r - gain * (u - lv)
                                      for r, u, lv in zip(kept, per, levels, strict=True)], overlaps, masks, subs)

        def own_windows(plateaus_: Sequence[OpPlateau], levels: list[float], gauge: str) -> fit.Reads:
            """A windowed gauge's readings against their phases' own truth (phases whose windows hold nothing
            else), with their noise's overlaps where the updates' times are known."""
            readings = [getattr(pl.p, gauge) for pl in plateaus_]
            times = [getattr(pl, f"{gauge}_t") for pl in plateaus_]
            timed = [len(t) == len(r) and len(r) > 0 for r, t in zip(readings, times, strict=True)]
            return fit.Reads(levels, readings,
                             [gauge_window.noise_overlap(_line_times(pl, t), starts, gauges=getattr(pl, f"{gauge}_sub"))
                              if ok else None for pl, t, ok in zip(plateaus_, times, timed, strict=True)],
                             [np.isfinite(t) if ok else None for t, ok in zip(times, timed, strict=True)],
                             [getattr(pl, f"{gauge}_sub") if ok else None
                              for pl, ok in zip(plateaus_, timed, strict=True)])

        def gauges(plateaus_: Sequence[OpPlateau], u_s: np.ndarray = u_s, bp_s: np.ndarray = bp_s,
                   own_phase: bool = False) -> dict[str, fit.Reads]:
            """Per gauge: the plateaus' true levels and their readings (busy and backpressured as their windows
            saw them; `own_phase`: as their phase ran, for phases whose window holds nothing else)."""
            t = [truth_of(pl) for pl in plateaus_]
            busy_lv, bp_lv = [x[0] for x in t], [x[1] for x in t]
            if own_phase:
                busy, bp = own_windows(plateaus_, busy_lv, "busy"), own_windows(plateaus_, bp_lv, "backpressured")
            else:
                busy = windowed(plateaus_, busy_lv, u_s, "busy", free_only=True)
                bp = windowed(plateaus_, bp_lv, bp_s, "backpressured", free_only=False)
            return {"busy": busy, "backpressured": bp,
                    "cpu": fit.Reads.independent([x[2] for x in t], [pl.cpu_reading for pl in plateaus_]),
                    "cpu_jvm": fit.Reads.independent([x[2] for x in t], [pl.p.cpu_jvm for pl in plateaus_])}

        def backlogged_updates(pl: OpPlateau, line_: GaugeModel, seconds: np.ndarray = seconds,
                               u_s: np.ndarray = u_s, queued_s: np.ndarray = queued_s
                               ) -> fit.Reads:
            """The busy level B of a subtask with records queued at its input, from one plateau's updates: each is
            the mean over its window of B in the queued seconds (share q) and of the line elsewhere (its part L),
            r = (1 - q) L + q B; B by least squares over the updates, returned with the updates' scatter around
            that fit (the gauge's noise) as stand-ins for the updates. Only a window's known seconds count, however
            few: the settling after a restart, before a bottleneck or overload phase at the load the driver already
            offers, is taken to be like the phase (requiring KNOWN_WINDOW there left q11's source without a level).
            Times unknown: the updates as read. With them, how the updates' noise overlaps."""
            r, t = pl.p.busy, pl.busy_t
            if len(t) != len(r):
                return fit.Reads.independent([math.nan], [r])  # one plateau's updates (no line level: NaN)
            qs, rest, at, subs = [], [], [], []
            for value, ti, sub in zip(r, t, pl.busy_sub, strict=True):
                mask = gauge_window.window_mask(seconds, starts, float(ti)) & np.isfinite(u_s)
                if not mask.any():
                    continue
                share = float(queued_s[mask].mean())
                free = u_s[mask & ~queued_s]
                line_part = line_.offset + line_.gain * float(free.mean()) if len(free) else 0.0
                if share > 0.0:
                    qs.append(share)
                    rest.append(value - (1.0 - share) * line_part)
                    at.append(float(ti))
                    subs.append(int(sub))
            if not qs:
                return fit.Reads.independent([math.nan], [np.zeros(0)])
            q_a, y = np.asarray(qs), np.asarray(rest)
            level = float(q_a @ y / (q_a @ q_a))
            scatter = y - q_a * level
            # the stand-ins are the updates' noise less its part along q (the fitted level) and its mean: their
            # covariance is that projection of the updates' (`fit.noise_factors` then reads the noise through it)
            n = len(q_a)
            keep = (np.eye(n) - np.full((n, n), 1.0 / n)) @ (np.eye(n) - np.outer(q_a, q_a) / (q_a @ q_a))
            overlap = gauge_window.noise_overlap(np.asarray(at), starts, gauges=subs)
            return fit.Reads([math.nan], [level + scatter - scatter.mean()], [keep @ overlap @ keep.T])

        line = gauges(lined)
        # a spread phase measures free subtasks: one in which an operator limited (a capacity over-estimated, a
        # source's busiest subtask of 3 at 9/8 of the mean) reads the saturated or held-back regime instead
        # likewise a bottleneck phase's scaled-out operator that limited it instead (a source's downstream capped)
        scaled = [pl for pl in unqueued if _subtasks(pl) > 1
                  and not (pl.phase.kind == "spread" and limiting.get(pl.phase.name))
                  and not (pl.phase.kind == "bottleneck" and pl.operator in limiting.get(pl.phase.name, set()))]
        single = [pl for pl in unqueued if _subtasks(pl) == 1]
        busy_line = gauges(single)["busy"]
        if not busy_line.usable():  # no window known enough: the phases' own truth, the best there is
            busy_line = gauges(single, own_phase=True)["busy"]
        if not line["backpressured"].usable():
            line = {**line, "backpressured": gauges(lined, own_phase=True)["backpressured"]}
        wide = scaled_out_line(gauges(scaled)["busy"])
        # the same load in several deployments (the job restarted in between): the error each one keeps. Each is
        # read right after its restart at the load the driver kept through it, so its window holds that load alone
        held = gauges(redeployed, own_phase=True)
        busy = fit.line_of(busy_line, deployments=held["busy"], nonnegative_offset=True)
        backlogged = [backlogged_updates(pl, busy if _subtasks(pl) == 1 or wide is None else wide) for pl in queued]
        readings = OperatorReadings(
            busy=fit.with_backlogged(busy, backlogged),
            backpressured=fit.line_of(line["backpressured"], deployments=held["backpressured"]),
            cpu=fit.line_of(line["cpu"], deployments=held["cpu"]),
            cpu_jvm=fit.line_of(line["cpu_jvm"], deployments=held["cpu_jvm"]),
            pending=pending(m, topology, spec.name) if spec.is_source else None,
            busy_scaled_out=wide,
            scaled_out_subtasks=sorted({_subtasks(pl) for pl in scaled}) if wide is not None else [],
        )
        state = None
        if _keeps_state(spec):
            state = _state(m, spec.name, spec.state_ttl_s, mine, cpu)
        par_eff = {}
        for pl in mine:
            if pl.phase.kind == "parallelism":
                p = pl.phase.parallelism.get(spec.name, 1)
                cap1 = capacity_at(1.0)
                if cap1 > 0 and math.isfinite(pl.p.rate_in):
                    par_eff[str(p)] = round(pl.p.rate_in / cap1, 3)  # per subtask: 1.0 = linear scaling
        ops[spec.name] = OperatorProfile(
            capacity=capacity_at(1.0), capacity_fit=cfit, shares=points, selectivity=selectivity, cpu=cpu,
            state=state, readings=readings, parallel_efficiency=par_eff,
            fed_scaled_out=fed_scaled_out(spec, sat, capacity_at(1.0)),
        )
        capacities[spec.name] = capacity_at
    by_phase: dict[str, dict[str, OpPlateau]] = {}  # phase -> operator -> its plateau
    for pl in pls:
        by_phase.setdefault(pl.phase.name, {})[pl.operator] = pl
    for spec in topology.operators:  # every capacity is known now
        flag = fit.flag_model(_flag_points(by_phase, spec.name, topology, limiting, capacities))
        if flag is not None:
            prof = ops[spec.name]
            ops[spec.name] = prof.model_copy(
                update={"readings": prof.readings.model_copy(update={"flagged_near": flag})})
    interval, lag, n_lag = _meter_lag(m, pls, topology)
    resc = [p for p in m.phases if p.kind == "rescale"]
    startup = Stat.of([float(p.extra["startup_s"]) for p in resc if p.extra.get("startup_s") is not None
                       and p.extra.get("method") != "reactive"])
    stop = Stat.of([float(p.extra["stop_s"]) for p in resc if p.extra.get("stop_s") is not None])
    downtime: dict[str, DowntimeModel] = {}
    for method in sorted({str(p.extra.get("method")) for p in resc if p.extra.get("ok")}):
        by_dir: dict[str, list[tuple[float, float]]] = {"up": [], "down": []}
        for r in resc:
            if r.extra.get("method") == method and r.extra.get("ok"):
                state_b = r.extra.get("state_bytes_before")  # no checkpoint yet: unknown, kept NaN (not 0 bytes)
                state_b = math.nan if state_b is None else float(state_b)
                side = "down" if r.extra.get("direction") == "down" else "up"
                by_dir[side].append((state_b, float(r.extra["downtime_s"])))
        slope, source = (downtime_slopes or {}).get(method, (fit.pooled_slope(by_dir["up"] or by_dir["down"]),
                                                             f"{m.query} alone"))
        downtime[method] = fit.downtime_model(by_dir["up"], by_dir["down"], slope, source)
    prov = provenance.model_copy(update={"host_load": _host_load(m)})
    return QueryProfile(
        query=m.query, provenance=prov, cpu_quota=q, operators=ops,
        meters=Meters(interval_s=interval, busy_lag_s=lag, n=n_lag),
        taskmanager_startup_s=startup, taskmanager_stop_s=stop if stop.n else None, rescale_downtime=downtime,
        warmup=warmup(m, topology),
    )


CATCHING_UP = 1.1  # sources that took this many times the offered rate worked off a backlog


def _flag_points(by_phase: dict[str, dict[str, OpPlateau]], op: str, topology: Topology, limiting: dict[str, set[str]],
                 capacities: dict[str, Callable[[float], float]]) -> list[tuple[float, float, int]]:
    """(utilisation of the busiest operator `op` feeds, share of `op`'s samples flagged back-pressured, samples)
    per plateau in which nothing downstream of `op` limited the phase: flags that no held-back second explains
    (a held-back subtask is flagged by its blocking, which the simulator models itself). Nor a plateau in which
    the sources took more than was offered (`CATCHING_UP`): the job was working off a backlog (a ladder's first
    step after the probe, a deployment after its restart) that the sources' pending reading misses (their
    prefetch), so it was held back unseen (q11's source flagged at 0.44-1.0 of the instants there, at 0 in
    every other ladder step), or where that is unknown (a source's rate or the offered rate not measured); nor one
    whose downstream ran at its capacity or above."""
    feeds = topology.downstream(op)
    if not feeds:
        return []
    below = topology.descendants(op)
    out = []
    for name, at in by_phase.items():
        mine = at.get(op)
        if mine is None or not math.isfinite(mine.p.flagged) or limiting.get(name, set()) & below:
            continue
        srcs = [at.get(s.name) for s in topology.sources]  # a source not sampled: unknown, not 0
        took = sum(s.p.rate_out * s.phase.parallelism.get(s.operator, 1) if s is not None else math.nan for s in srcs)
        if not (math.isfinite(took) and math.isfinite(mine.phase.rate)) or took > CATCHING_UP * mine.phase.rate:
            continue  # caught up a backlog, or unknown whether it did: no point
        us = []
        for d in feeds:
            if d in at and math.isfinite(at[d].p.rate_in):
                cap = capacities[d](at[d].p.share)
                if cap > 0:
                    us.append(at[d].p.rate_in / cap)
        if us and max(us) < 1.0:
            out.append((max(us), mine.p.flagged, len(mine.samples)))
    return out


def _grew(p: PhaseRecord) -> bool:
    """An overload phase whose backlog grew (as the driver judged it; unknown counts): its rate is the warm
    job's saturated rate. A probe that did not saturate took what was offered (measured: 61k of a 127k job)."""
    g = p.extra.get("backlog_growth")
    return g is None or not math.isfinite(p.rate) or float(g) > 0.02 * p.rate * (p.t1 - p.t0)


def warmup(m: Measurement, topology: Topology) -> WarmUp | None:
    """The cold-start curve: the sources' records/s per bin of the `coldstart` phases (fresh task managers at
    share 1.0, overloaded) over the warm job's saturated rate at the same share: the mean of the phases that
    saturated (probe and overload; they differ by 10-20 % on a shared host, more than one would trust alone).
    With several cold starts, the curve is fitted to all their bins, and each one that saturated keeps its own
    (`WarmUp.starts`), which a sim run draws from."""
    colds = _coldstarts(m)
    warm = [float(p.extra["throughput"]) for p in m.phases if p.kind == "overload" and _grew(p)
            and p.extra.get("throughput") is not None and math.isfinite(float(p.extra["throughput"]))]
    if not colds or not warm or m.samples.empty:
        return None
    warm_rate = float(np.mean(warm))
    cores = m.quota * float(colds[0].shares.get(topology.names[0], 1.0))
    measured = [b for b in (_coldstart_bins(m, topology, c) for c in colds) if b is not None]
    # the curve is a speed only where the backlog grew: the saturated starts, else (none) all, marked unsaturated
    used = [b for b in measured if b[3]] or measured
    if not used:
        return None
    mids = [x for b in used for x in b[0]]
    rates = [x for b in used for x in b[1]]
    pooled = fit.warmup(mids, rates, warm_rate, cores, used[0][3], dead_s=float(np.median([b[2] for b in used])))
    if pooled is None or len(used) < 2:
        return pooled
    starts, points = [], []
    for b_mids, b_rates, dead, grew in used:
        points += [(x + dead, r / warm_rate) for x, r in zip(b_mids, b_rates, strict=True) if math.isfinite(r)]
        one = fit.warmup(b_mids, b_rates, warm_rate, cores, grew, dead_s=dead)
        if one is not None:
            starts.append(ColdStart(initial_fraction=one.initial_fraction, tau_cpu_s=one.tau_cpu_s,
                                    dead_s=one.dead_s, rmse=one.rmse))
    # each start's bins at its own dead time (seconds since its job ran), not the pooled median's
    return pooled.model_copy(update={"starts": starts if len(starts) >= 2 and pooled.saturated else [],
                                     "points": points})


def _coldstart_bins(m: Measurement, topology: Topology,
                    cold: PhaseRecord) -> tuple[list[float], list[float], float, bool] | None:
    """One cold start: (seconds since its first record per bin, the sources' records/s per bin, its dead time,
    whether it was saturated); None without a record in the whole phase."""
    bin_s = float(cold.extra.get("bin_s") or 10.0)
    srcs = [s.name for s in topology.sources]
    cold_samples = m.samples[m.samples.phase == cold.name]
    # the job's dead time (running, but no record taken yet: consumers opening, classes loading at the quota)
    # is measured on its own; the curve's bins start at the first record
    dead = fit.first_record_delay(cold_samples, srcs, cold.t0)
    if not math.isfinite(dead):  # no record in the whole phase: no curve to fit
        return None
    mids, rates = [], []
    t = cold.t0 + dead
    while t + bin_s <= cold.t1 + 1e-6:
        mids.append(t + bin_s / 2 - cold.t0 - dead)
        rates.append(fit.sources_rate(cold_samples, srcs, t, t + bin_s))
        t += bin_s
    # saturated: the sources' backlog grew by a tenth of the offered load at least, from each source subtask's
    # first to its last backlog sample in the phase (the job's first second may have none: unknown, not zero)
    # From what Kafka acknowledged less what the sources took where the generator's count was recorded: the
    # sources' pendingRecords reads low for their first seconds (measured: 2k where 66k waited, 9 s in)
    span = cold.t1 - cold.t0
    offered = fit.offered_rate(m.host, cold.t0, cold.t1)
    if math.isfinite(offered):  # rates over the same span: the backlog grew by a tenth of the offered load
        took = fit.sources_rate(cold_samples, srcs, cold.t0, cold.t1)
        grew = math.isfinite(took) and offered - took > 0.1 * offered
    else:
        growth = 0.0
        pend = cold_samples[cold_samples.operator.isin(srcs)].dropna(subset=["pending"]).sort_values("t")
        for _, g in pend.groupby(["operator", "subtask"]):
            growth += float(g.pending.iloc[-1] - g.pending.iloc[0])
        grew = not pend.empty and growth > 0.1 * cold.rate * span
    return mids, rates, dead, grew


def pending(m: Measurement, topology: Topology, source: str, rate_s: float = 5.0) -> PendingModel | None:
    """A source's pendingRecords against its true backlog in the first `coldstart` phase (one subtask, fresh
    topics, overloaded; the later ones repeat it for the warm-up's spread): the backlog is what Kafka
    acknowledged into its topic (the generator's count x the topic's share of the load) less what it took;
    rates over the trailing `rate_s`. None where the generator's count was not recorded (measurements before
    session 9)."""
    from workloads.generator import expected_shares

    cold = next(iter(_coldstarts(m)), None)
    count = fit.generator_count(m.host, cold.t0, cold.t1) if cold is not None else None
    if cold is None or count is None or m.samples.empty:
        return None
    spec = topology.op(source)
    share = expected_shares(list(topology.topics)).get(spec.topic or "", 0.0)
    g = m.samples[(m.samples.phase == cold.name) & (m.samples.operator == source)].dropna(subset=["rec_out"])
    g = g[g.subtask == 0].sort_values("t") if "subtask" in g else g.sort_values("t")
    if len(g) < 2 or share <= 0:
        return None
    t = g.t.to_numpy(dtype=float)
    took = g.rec_out.to_numpy(dtype=float)
    earlier = t - rate_s
    produced, prod0 = (share * np.interp(x, *count, left=np.nan, right=np.nan) for x in (t, earlier))
    took0 = np.interp(earlier, t, took, left=np.nan)
    reading = g.pending.to_numpy(dtype=float) if "pending" in g else np.full(len(t), np.nan)
    return fit.pending_buffer(t - cold.t0, produced - took, reading, (produced - prod0) / rate_s,
                              (took - took0) / rate_s)


def fed_scaled_out(spec: OperatorSpec, saturations: Sequence[OpPlateau], capacity: float) -> FedScaledOut | None:
    """The operator's capacity where an operator feeding it ran at several subtasks, from its own bottleneck
    phases (`saturations`: the plateaus where it limited): at share 1.0, itself at one subtask, an upstream one at
    two or more, over `capacity`, which is fed by one subtask (`SharePoint.fed_by_several` keeps the fed
    plateaus out of it; where no saturation fed by one was measured at share 1.0 it is the line through the lower
    shares read there: q1's sink, measured at its limit only behind 3 map subtasks). None for a source, where no
    such phase was measured, and for an operator that keeps state with no saturation fed by one subtask at share
    1.0 to compare the phase's state with (below).

    For an operator that keeps state, a bottleneck phase counts only with no more state per subtask than the
    largest of the saturations fed by one subtask: beyond it the ratio mixes what the channels do with what came
    with the larger state (its cost, or, as the state grows with it, how long the overload has run: the window
    below slows down the longer it runs overloaded). A state unknown or 0 (not read) on either side compares
    nothing: a bottleneck phase whose state is unknown is kept, and with no known state fed by one subtask, all are.
    Measured (session 27, q11's window at 0.1 CPU): its bottleneck phase behind 3 source subtasks, ten minutes
    into the calibration at 7.1 MB of state and a 9-million-record backlog, took 9.9k records/s (0.48 of its
    capacity), while fixed layouts on a fresh backlog in the same hour (`experiments/layout-q11.yaml`) had it take
    16.2k behind 3, 14.4k behind 2 and 17.5k behind 1, and slow down the longer the overload went on."""
    if not spec.upstream or capacity <= 0:
        return None

    def state(pl: OpPlateau) -> float:  # the job's checkpointed state over the operator's one subtask (at_one)
        s = pl.phase.state_bytes
        return s if math.isfinite(s) and s > 0 else math.nan

    at_one = [pl for pl in saturations if pl.p.share == 1.0 and _subtasks(pl) == 1 and math.isfinite(pl.p.rate_in)
              and pl.p.rate_in > 0]
    fed = [pl for pl in at_one if pl.phase.kind == "bottleneck" and pl.phase.operator == spec.name
           and _feeding(spec, pl) >= 2]
    by_one = [pl for pl in at_one if _feeding(spec, pl) == 1]
    if _keeps_state(spec):
        if not by_one:  # nothing to tell the channels' cost from what came with the state
            return None
        known = [state(pl) for pl in by_one if math.isfinite(state(pl))]
        if known:
            fed = [pl for pl in fed if math.isnan(state(pl)) or state(pl) <= max(known)]
    if not fed:
        return None
    rate = float(np.mean([pl.p.rate_in for pl in fed]))
    return FedScaledOut(fraction=rate / capacity, rate=rate, upstream_subtasks=[_feeding(spec, pl) for pl in fed],
                        phases=[pl.phase.name for pl in fed])


def _feeding(spec: OperatorSpec, pl: OpPlateau) -> int:
    """The most subtasks an operator feeding `spec` ran at in the plateau's phase (1 for a source)."""
    return max((int(pl.phase.parallelism.get(u, 1)) for u in spec.upstream), default=1)


def _fed_by_several(spec: OperatorSpec, pl: OpPlateau) -> bool:
    """Each of its subtasks took records over several channels in the plateau's phase, by the sim's rule."""
    ups = [int(pl.phase.parallelism.get(u, 1)) for u in spec.upstream]
    return bool(ups) and fed_by_several_channels(spec.keyed, _subtasks(pl), ups)


def _keeps_state(spec: OperatorSpec) -> bool:
    """The operator holds keyed state (a TTL or bytes per record in its topology)."""
    return spec.state_ttl_s is not None or spec.state_bytes_per_record > 0


def _coldstarts(m: Measurement) -> list[PhaseRecord]:
    """The measurement's finished `coldstart` phases, in the order they ran."""
    return [p for p in m.phases if p.kind == "coldstart" and math.isfinite(p.t1)]


def _state(m: Measurement, op: str, ttl: float | None, mine: Sequence[OpPlateau], cpu: fit.CpuModel) -> fit.StateCost:
    """Bytes per record within the TTL, and per-record cost against the subtask's state."""
    df = m.samples
    g = df[(df.operator == op)].sort_values("t")
    bprs, gbs, costs = [], [], []
    max_state = 0.0
    idle = cpu.idle_cores if math.isfinite(cpu.idle_cores) else 0.0
    for pl in mine:
        s = pl.phase.state_bytes
        if not math.isfinite(s) or s <= 0 or pl.phase.kind not in ("ladder", "overload"):
            continue
        span = ttl if ttl is not None else math.inf
        t1 = pl.phase.t1
        win = g[(g.t <= t1) & (g.t >= t1 - span)] if math.isfinite(span) else g[g.t <= t1]
        col = "rec_in"
        if len(win) >= 2 and col in win:
            per_sub = win.groupby("subtask")[col].agg(lambda c: c.max() - c.min()).sum()
            if per_sub > 0:
                bprs.append(s / per_sub)
        p = max(1, pl.phase.parallelism.get(op, 1))
        if pl.p.rate_in > 0 and math.isfinite(pl.p.cores):
            gbs.append(s / p / 1e9)
            costs.append((pl.p.cores - idle) / pl.p.rate_in)
        max_state = max(max_state, s / p)
    bpr = float(np.median(bprs)) if bprs else math.nan
    return fit.state_cost(gbs, costs, bpr, max_state)
