"""Fitting the calibrated profile from recorded samples (pure: arrays in, profile parts out).

The recorder (`harness.calibration.measure`) keeps, once a second and per task manager, the raw
Flink readings (busy / idle / backpressured ms per second, isBackPressured, JVM CPU load), the
counters that are exact (records in / out, JVM CPU time) and the process' CPU time from /proc, all
labelled with the phase that was running. A *plateau* is a phase after its settling time. From
plateaus this module fits:

- `cpu_model`: cores a task manager uses against the records/s its subtask processes (least
  squares over plateaus: intercept = idle CPU, slope = CPU-seconds per record);
- `capacity_fit`: saturated throughput against the cores the task manager actually used,
  capacity = (cores - overhead) / cores_per_record; one point falls back to the CPU model's
  overhead, none to the CPU model alone;
- `gauge_model`: a reading against the true value it stands for (reading = offset + gain x true,
  least squares over plateau means) and the standard deviation of its noise at each level: of one meter update,
  or, for a reading averaged over a window of 5-s intervals, of one interval (`noise_factors`, pooled over the
  plateaus and shaped by the level read, `time_share_shape`);
- `step_lag`: how long a reading takes to cover 63 % of a step of the true load (meter lag);
- `flag_model`: how often a subtask nothing holds back is flagged isBackPressured against the utilisation of
  the operator it feeds (binned, isotonic);
- `state_cost`: relative per-record cost growth with the state a subtask holds;
- `downtime_model`: rescale downtime = base + slope x state GB, the base apart for scale-ups (fresh task
  managers) and scale-downs, the slope pooled over queries' scale-ups;
- `warmup`: a fresh task manager's rate against the CPU time it has had, as a fraction of the warm rate
  (saturating exponential, least squares with scipy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from harness import gauge_window
from harness.calibrated_profile import (
    CapacityFit,
    CpuModel,
    DowntimeModel,
    FlagModel,
    GaugeModel,
    NoiseBasis,
    PendingModel,
    SaturationPool,
    SharePoint,
    StateCost,
    WarmUp,
)

if TYPE_CHECKING:
    import pandas as pd


CPU_BOUND = 0.85  # fraction of its quota a task manager uses when its subtask runs at its CPU limit


@dataclass(frozen=True)
class Line:
    slope: float
    intercept: float
    r2: float
    n: int


def fit_line(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> Line:
    """Least-squares y = intercept + slope x over the finite pairs (NaN fit with fewer than two)."""
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    keep = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[keep], ya[keep]
    n = len(xa)
    if n < 2 or np.ptp(xa) == 0.0:
        return Line(math.nan, float(ya.mean()) if n else math.nan, math.nan, n)
    slope, intercept = np.polyfit(xa, ya, 1)
    resid = ya - (intercept + slope * xa)
    ss = float(((ya - ya.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / ss if ss > 0 else 1.0
    return Line(float(slope), float(intercept), r2, n)


# ---------------------------------------------------------------- plateaus


@dataclass(frozen=True)
class Plateau:
    """One subtask over the settled part of a phase: true rates and readings."""

    phase: str
    share: float  # CPU share of the quota in force
    rate_in: float  # records/s into the subtask (sources: records taken from Kafka)
    rate_out: float
    cores: float  # CPU the task manager process used (/proc), cores
    busy: np.ndarray  # distinct meter updates of busyTimeMsPerSecond / 1000
    backpressured: np.ndarray
    idle: np.ndarray
    cpu_jvm: np.ndarray  # Status.JVM.CPU.Load samples
    flagged: float  # fraction of samples with isBackPressured set
    state_bytes: float = math.nan  # checkpointed state of the subtask (last known)
    throttled: float = math.nan  # fraction of CFS periods in which the cgroup ran out of quota
    pending: float = math.nan  # sources: mean records waiting in Kafka for this subtask
    pending_growth: float = math.nan  # sources: records/s the backlog grew by over the plateau

    @property
    def busy_mean(self) -> float:
        return float(np.mean(self.busy)) if len(self.busy) else math.nan

    @property
    def backpressured_mean(self) -> float:
        return float(np.mean(self.backpressured)) if len(self.backpressured) else math.nan


def counter_rate(t: np.ndarray, counter: np.ndarray) -> float:
    """Records/s from a cumulative counter sampled over a plateau (first to last sample)."""
    keep = np.isfinite(t) & np.isfinite(counter)
    t, counter = t[keep], counter[keep]
    if len(t) < 2 or t[-1] <= t[0]:
        return math.nan
    return float((counter[-1] - counter[0]) / (t[-1] - t[0]))


def sources_rate(samples: pd.DataFrame, sources: Sequence[str], t0: float, t1: float) -> float:
    """Records/s the sources took from Kafka between t0 and t1: every source subtask's `rec_out` counter rate,
    summed (NaN when no subtask had two samples in the span)."""
    seg = samples[(samples.t >= t0) & (samples.t <= t1) & samples.operator.isin(list(sources))]
    rates = [counter_rate(g.t.to_numpy(dtype=float), g.rec_out.to_numpy(dtype=float))
             for _, g in seg.sort_values("t").groupby(["operator", "subtask"])]
    finite = [r for r in rates if math.isfinite(r)]
    return float(sum(finite)) if finite else math.nan


def generator_count(host: pd.DataFrame, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(t, records Kafka acknowledged) of the last load-generator instance sampled between t0 and t1 (a phase
    restarts the generator, and its count with it); None when the generator's count was not recorded there
    (older measurements, or an endpoint that did not answer)."""
    if "produced" not in host or "gen" not in host:
        return None
    seg = host[(host.t >= t0) & (host.t <= t1)].dropna(subset=["produced", "gen"])
    if seg.empty:
        return None
    last = seg[seg.gen == seg.sort_values("t").gen.iloc[-1]].sort_values("t")
    return last.t.to_numpy(dtype=float), last.produced.to_numpy(dtype=float)


def offered_rate(host: pd.DataFrame, t0: float, t1: float) -> float:
    """Records/s Kafka acknowledged from the load generator between t0 and t1 (`generator_count`); NaN where
    its count was not recorded."""
    count = generator_count(host, t0, t1)
    return math.nan if count is None else counter_rate(*count)


def first_record_delay(samples: pd.DataFrame, sources: Sequence[str], t0: float) -> float:
    """Seconds from t0 until the job's sources took their first record: for each source subtask, the middle of
    the last sample before its `rec_out` counter left 0 (or t0) and the first one after; the earliest subtask
    counts. NaN when no source took a record in the samples."""
    seg = samples[(samples.t >= t0) & samples.operator.isin(list(sources))].sort_values("t")
    best = math.nan
    for _, g in seg.groupby(["operator", "subtask"]):
        t = g.t.to_numpy(dtype=float)
        out = g.rec_out.to_numpy(dtype=float)
        moved = np.flatnonzero(np.isfinite(out) & (out > 0))
        if len(moved) == 0:
            continue
        k = int(moved[0])
        before = float(t[k - 1]) if k > 0 else t0
        delay = 0.5 * (before + float(t[k])) - t0
        best = delay if not math.isfinite(best) else min(best, delay)
    return best


def distinct_update_index(values: np.ndarray) -> np.ndarray:
    """A gauge polled faster than it updates repeats itself: the index of each update's first sample (its value
    known and not the one before it)."""
    v = np.asarray(values, dtype=float)
    known = np.flatnonzero(np.isfinite(v))
    if len(known) == 0:
        return known
    return known[np.concatenate([[True], np.diff(v[known]) != 0.0])]


def distinct_updates(values: np.ndarray) -> np.ndarray:
    """One value per update of a gauge polled faster than it updates (`distinct_update_index`)."""
    v = np.asarray(values, dtype=float)
    return v[distinct_update_index(v)]


# ---------------------------------------------------------------- CPU and capacity


def cpu_model(rates: Sequence[float], cores: Sequence[float], quota: float,
              saturated_cores: Sequence[float] = ()) -> CpuModel:
    """Cores against records/s over unsaturated plateaus; `saturated_cores` give the CPU a saturated
    task manager reached (as a fraction of its quota)."""
    line = fit_line(rates, cores)
    idle = line.intercept if math.isfinite(line.intercept) else math.nan
    per_record = line.slope if math.isfinite(line.slope) and line.slope > 0 else math.nan  # no CPU for free
    if math.isfinite(idle) and idle < 0.0:  # a negative intercept is noise around zero
        idle = 0.0
    # a task manager cannot use more than its quota: readings above it are sampling jitter
    sat = [min(1.0, c / quota) for c in saturated_cores if math.isfinite(c)]
    return CpuModel(idle_cores=idle, cores_per_record=per_record,
                    saturated_fraction=float(np.median(sat)) if sat else 1.0, n=line.n, r2=line.r2)


def envelope(points: Sequence[SharePoint], quota: float = math.nan, tolerance: float = 0.1) -> list[SharePoint]:
    """One saturated point per share: the median of what the operator did at its limit there, which is what a
    run gets from it. Repeated saturations at one share scatter (the JIT keeps compiling, the host's load
    varies) and a run meets the same scatter: q11's window at 0.1 CPU (session 27) saturated at 14.5-19.3k
    records/s fed by one source subtask in its calibration, and in fixed layouts the same hour took 17.5k fed by
    one after its first 45 s (19.1k at first, 15.8k at 180 s; `experiments/layout-q11.yaml`). The fastest, kept
    before session 28, is a best case a run does not hold.

    The pool: the share's saturations, and every plateau at that share that kept up faster than their median on
    its whole CPU (`CPU_BOUND` of share x `quota`): it was at its limit too, the phase only kept up (q11's window
    at 0.1 CPU did 18.2k/s on 0.099 cores in a ladder step beside 16.3k/s saturations). One that kept up slower
    is a lower bound below what the saturations show, and adds nothing. Where the fastest plateau more than
    `tolerance` above the fastest saturation had CPU to spare, the CPU was not the limit there and the share is
    dropped (it was not the bottleneck after all). Plateaus measured fed by several upstream subtasks
    (`SharePoint.fed_by_several`) are another layout's (`fed_scaled_out`) and stay out. CPU-bound is judged from
    the cores used alone (a share point keeps no throttling count)."""
    out = []
    for share in sorted({p.share for p in points}):
        at = [p for p in points if p.share == share and not p.fed_by_several
              and math.isfinite(p.capacity) and p.capacity > 0]
        sat = [p for p in at if p.saturated]
        if not sat:
            continue
        mid = float(np.median([p.capacity for p in sat]))
        faster = [p for p in at if not p.saturated and p.capacity > mid]
        fastest_saturation = max(p.capacity for p in sat)
        beyond = [p for p in faster if p.capacity > fastest_saturation * (1 + tolerance)]
        if beyond and not _cpu_bound(max(beyond, key=lambda p: p.capacity), quota):
            continue
        out.append(_pooled(share, sat + [p for p in faster if _cpu_bound(p, quota)]))
    return out


def _cpu_bound(p: SharePoint, quota: float) -> bool:
    """Whether a plateau used its whole CPU share (an unknown CPU is not)."""
    return math.isfinite(p.cpu_cores) and p.cpu_cores >= CPU_BOUND * p.share * quota


def _pooled(share: float, pool: Sequence[SharePoint]) -> SharePoint:
    """The median saturation of `pool` (capacity, cores used and busy reading each their own median)."""
    def median(values: Sequence[float]) -> float:
        known = [v for v in values if math.isfinite(v)]
        return float(np.median(known)) if known else math.nan
    if len(pool) == 1:
        return pool[0].model_copy(update={"saturated": True})
    return SharePoint(share=share, capacity=median([p.capacity for p in pool]), saturated=True,
                      cpu_cores=median([p.cpu_cores for p in pool]), busy_ms=median([p.busy_ms for p in pool]),
                      n=sum(p.n for p in pool))


def capacity_fit(points: Sequence[SharePoint], cpu: CpuModel, quota: float) -> CapacityFit:
    """capacity = (cores - overhead) / cores_per_record from the saturated share points.

    The x axis is the CPU the task manager really used at saturation (a host too busy to grant the
    quota shows as fewer cores, not as a cheaper record); two or more points fit both parameters,
    one point takes the CPU model's idle CPU as the overhead (none if that would leave no capacity),
    none takes the CPU model's line where it leaves every share read a capacity, else the fastest rate seen
    (a lower bound). Finally the line is lifted where the operator was seen to run faster than the line says it
    could at a share without a saturation kept, or where the line reads the top share's below its median
    saturation (`lower_bounds`).
    """
    sat = envelope(points, quota)
    used = [(_cores_used(p, quota), p.capacity) for p in sat]
    idle = cpu.idle_cores if math.isfinite(cpu.idle_cores) else 0.0
    result: CapacityFit | None = None
    if len(used) >= 2 and np.ptp([u[0] for u in used]) > 0.02 * quota:
        # capacity = a x cores + c through the saturation at the highest share (the one runs use; a plain
        # least-squares line through three shares passed 6 % below it: q1's source at 0.25 CPU), its slope
        # from the lower shares
        top = max(sat, key=lambda p: p.share)
        x1, y1 = used[sat.index(top)]
        dx = np.array([u[0] - x1 for u in used])
        dy = np.array([u[1] - y1 for u in used])
        slope = float(dx @ dy / (dx @ dx)) if float(dx @ dx) > 0 else math.nan
        line = Line(slope=slope, intercept=y1 - slope * x1, r2=math.nan, n=len(used))
        if line.slope > 0 and line.intercept <= 0:
            k = 1.0 / line.slope
            overhead = -line.intercept * k
            # a fit that would leave no capacity at a share measured (at its cores, or where it is read) is not kept
            if overhead < _lowest_cores(sat, points, cpu, quota):
                result = CapacityFit(cores_per_record=k, overhead_cores=overhead, points=len(used),
                                     method=f"saturation at {len(used)} CPU shares")
        if result is None:  # no overhead to be seen (the line crosses above the origin): proportional
            k = float(np.median([c / cap for c, cap in used]))
            result = CapacityFit(cores_per_record=k, overhead_cores=0.0, points=len(used),
                                 method=f"saturation at {len(used)} CPU shares, no overhead to be seen")
    if result is None and used:
        ks = []
        for c, cap in used:
            overhead = idle if idle < 0.5 * c else 0.0
            ks.append(((c - overhead) / cap, overhead))
        k, overhead = float(np.median([x[0] for x in ks])), float(np.median([x[1] for x in ks]))
        result = CapacityFit(cores_per_record=k, overhead_cores=overhead, points=len(used),
                             method=f"saturation at {len(used)} share(s), overhead from the CPU model")
    if result is None and _cpu_model_extrapolates(cpu, points, quota):
        result = CapacityFit(cores_per_record=cpu.cores_per_record, overhead_cores=idle, points=0,
                             method="CPU model (never the bottleneck: capacity = spare CPU / CPU per record)")
    seen = [p for p in points if not p.saturated and not p.fed_by_several and math.isfinite(p.capacity)
            and p.capacity > 0]
    if result is None and seen:  # no saturation kept and no CPU line to extend: only a lower bound is known
        best = max(seen, key=lambda p: p.capacity / p.share)
        result = CapacityFit(cores_per_record=best.share * quota / best.capacity, overhead_cores=0.0, points=0,
                             method="no saturation kept: the fastest rate seen (a lower bound)")
    if result is None:
        raise ValueError("no saturated share point, no CPU line that leaves every share read a capacity, and no "
                         "rate seen: the operator cannot be calibrated")
    return lower_bounds(result, points, cpu, quota, anchors=sat).model_copy(update={"pool": SaturationPool.MEDIAN})


def _cpu_model_extrapolates(cpu: CpuModel, points: Sequence[SharePoint], quota: float) -> bool:
    """Whether an operator that never saturated may take its capacity from its CPU line: only a line that leaves
    capacity at every share it was read at (the guard a line through saturations has too). Else its capacity is
    unknown beyond the fastest rate seen, and that lower bound is what the profile keeps. Measured: q8's person
    source at 0.25 CPU (2026-11-29) ran at most 12.6k records/s with its CPU flat at 0.05-0.13 cores; its line's
    0.069 cores of idle CPU left share 0.25 (0.0625 cores) no capacity at all, an invented zero. No stricter test
    (a minimum r2) is made: a lightly loaded operator's fastest rate can be far below what it could take (q5's
    sink saw 1.3k records/s), and a line that says more is the better guess there."""
    if not (math.isfinite(cpu.cores_per_record) and cpu.cores_per_record > 0):
        return False
    idle = cpu.idle_cores if math.isfinite(cpu.idle_cores) else 0.0
    return idle < _lowest_cores((), points, cpu, quota)


def _cores_used(p: SharePoint, quota: float) -> float:
    """The CPU a saturated share point really used (its nominal share where that was not measured)."""
    return p.cpu_cores if math.isfinite(p.cpu_cores) else p.share * quota


def _lowest_cores(anchors: Sequence[SharePoint], points: Sequence[SharePoint], cpu: CpuModel, quota: float) -> float:
    """The fewest cores a measured share is known at: a saturation's cores as used, or the lowest share where the
    simulator reads it (share x quota x saturated fraction). A line's overhead must stay below it, else that share
    has no capacity."""
    sat_f = cpu.saturated_fraction if math.isfinite(cpu.saturated_fraction) else 1.0
    read = [p.share * quota * sat_f for p in points]
    return min([_cores_used(a, quota) for a in anchors] + read, default=math.inf)


def lower_bounds(f: CapacityFit, points: Sequence[SharePoint], cpu: CpuModel, quota: float,
                 anchors: Sequence[SharePoint] = ()) -> CapacityFit:
    """An operator that processed r records/s unsaturated at share s can do at least r there, and at the highest
    share it does its median saturation where the line is read: raise the line until it agrees with every such
    observation. At a share with a saturation kept (`anchors`, the envelope's) that median stands for every
    plateau there: a single faster one, even with CPU to spare, is the scatter the median absorbs, not a bound
    (so the line can pass below a rate once sustained there). Where a saturation was
    measured at a lower share (`anchors`, at the cores they used), the line turns about the nearest one below,
    so it still passes that measurement (a small task manager's fixed overhead makes capacity grow faster than
    its CPU); else the CPU per record is lowered with the overhead kept.

    A turn is kept only about a lower share, and only if it leaves capacity at every share measured (read
    where the simulator reads it, share x quota x saturated fraction); where the nearest would not, the turn goes
    about the next one down (a stateful operator's saturations need not lie on one line: q3's join at 0.25 CPU,
    1.6k / 11.2k / 47.4k records/s on 0.067 / 0.125 / 0.254 cores: about share 0.25 the line reads 16.2k at share
    0.5, 45 % over its saturation, where lowering the slope instead would read 23.7k). A saturation at the same
    share measured at fewer cores (a contended host) is the same CPU level read twice: a line through it and a
    point a few thousandths of a core away is all noise (CI, 2026-11-28: q1's quick calibration turned about one to 0.13
    cores of overhead on a 0.25 quota, leaving its 0.0625 and 0.125 shares no capacity)."""
    sat_f = cpu.saturated_fraction if math.isfinite(cpu.saturated_fraction) else 1.0
    k, overhead = f.cores_per_record, f.overhead_cores
    top = max((p.share for p in points), default=1.0)
    lowest = _lowest_cores(anchors, points, cpu, quota)
    anchored = {a.share for a in anchors}
    # the top share's median saturation is a lower bound too, where the line is read: at the CPU a saturated task
    # manager gets (measured: q1's source saturated at 125k/s on 0.257 cores of a 0.25 quota)
    bounds = [a for a in anchors if a.share == top] + [
        p for p in points if p.share not in anchored and not p.fed_by_several and not (p.saturated and p.share < top)]
    reasons: list[str] = []  # what each lift went to, in order
    for p in sorted(bounds, key=lambda p: p.share):
        if not math.isfinite(p.capacity) or p.capacity <= 0:
            continue
        cores = p.share * quota * sat_f
        if (cores - overhead) / k >= p.capacity:  # the line already allows it
            continue
        before = (k, overhead)
        below = [(c, a.capacity) for a, c in ((a, _cores_used(a, quota)) for a in anchors)
                 if a.share < p.share and c < cores and a.capacity < p.capacity]
        turned = False
        for c1, cap1 in sorted(below, reverse=True):  # the nearest first; farther down where it leaves none
            k_turned = (cores - c1) / (p.capacity - cap1)
            overhead_turned = c1 - cap1 * k_turned
            if 0.0 <= overhead_turned < lowest:
                k, overhead, turned = k_turned, overhead_turned, True
                break
        if not turned and cores - overhead > 0:
            k = (cores - overhead) / p.capacity
        if (k, overhead) != before:
            reason = "its median saturation where read" if p.share in anchored else "the fastest rate seen"
            if reason not in reasons:
                reasons.append(reason)
    if not reasons:
        return f
    return CapacityFit(cores_per_record=k, overhead_cores=overhead, points=f.points,
                       method=f"{f.method}, lifted to {' and '.join(reasons)}")


# ---------------------------------------------------------------- readings


MIN_DEPLOYMENTS = 3  # deployments at one load that measure the held error (fewer: not calibrated)


@dataclass(frozen=True)
class Reads:
    """One gauge's readings per plateau: the true levels, the distinct meter updates, and how the updates' noise
    covaries (`gauge_window.noise_overlap`, per plateau; None: each update its own noise, a CPU reading)."""

    levels: list[float]
    readings: list[np.ndarray]
    overlaps: list[np.ndarray | None]
    noise_masks: list[np.ndarray | None] | None = None  # per plateau, the updates that tell its noise (None: all)
    subtasks: list[np.ndarray | None] | None = None  # per plateau, whose each update is (None: one subtask's)

    @staticmethod
    def independent(levels: Sequence[float], readings: Sequence[np.ndarray]) -> Reads:
        return Reads(list(levels), list(readings), [None] * len(readings))

    def noise_sums(self, i: int) -> tuple[float, float, float, int]:
        """Plateau i's scatter: (sum of squares about each subtask's own mean, what one unit of noise variance
        makes of it in expectation, the mean reading, updates) over the updates that tell its noise. Each subtask
        apart: a subtask's offset from another (its held error, a key's skew) is no noise."""
        r, v = np.asarray(self.readings[i], dtype=float), self.overlaps[i]
        mask = self.noise_masks[i] if self.noise_masks is not None else None
        subs = self.subtasks[i] if self.subtasks is not None else None
        keep = np.isfinite(r) if mask is None else (np.asarray(mask, dtype=bool) & np.isfinite(r))
        owner = np.zeros(len(r), dtype=int) if subs is None else np.asarray(subs)
        squares = expected = 0.0
        for sub in np.unique(owner[keep]):
            idx = np.flatnonzero(keep & (owner == sub))
            if len(idx) < 2:
                continue
            e = r[idx] - r[idx].mean()
            squares += float(e @ e)
            expected += (len(idx) - 1) * noise_factors(None if v is None else v[np.ix_(idx, idx)], len(idx))[0]
        return squares, expected, float(r[keep].mean()) if keep.any() else math.nan, int(keep.sum())

    def usable(self) -> bool:
        """Whether some plateau has a known level and readings to fit a line through."""
        return any(math.isfinite(lv) and len(r) for lv, r in zip(self.levels, self.readings, strict=True))


def noise_factors(overlap: np.ndarray | None, n: int) -> tuple[float, float]:
    """(expected sample variance of n updates, variance of their mean), in units of the variance the noise sd
    stands for: one interval's (`overlap`, from `gauge_window.noise_overlap`), or one update's (None: 1, 1/n)."""
    if overlap is None:
        return 1.0, 1.0 / n
    total = float(overlap.sum())
    return (float(np.trace(overlap)) - total / n) / (n - 1) if n > 1 else math.nan, total / (n * n)


def line_of(reads: Reads, deployments: Reads | None = None, nonnegative_offset: bool = False) -> GaugeModel:
    """`gauge_model` over `reads` (and the deployments'), their updates' overlaps saying what the noise is of."""
    return gauge_model(reads.levels, reads.readings, deployments=deployments, nonnegative_offset=nonnegative_offset,
                       overlaps=reads.overlaps, noise_masks=reads.noise_masks, subtasks=reads.subtasks)


def gauge_model(true_levels: Sequence[float], readings: Sequence[np.ndarray], min_updates: int = 2,
                deployments: Reads | tuple[Sequence[float], Sequence[np.ndarray]] | None = None,
                nonnegative_offset: bool = False, overlaps: Sequence[np.ndarray | None] | None = None,
                noise_masks: Sequence[np.ndarray | None] | None = None,
                subtasks: Sequence[np.ndarray | None] | None = None) -> GaugeModel:
    """reading = offset + gain x true over plateau means; noise = sd per level of one meter update, or, where
    `overlaps` say how a plateau's updates share their windows' intervals, of one interval (NoiseBasis.INTERVAL:
    the scatter of successive updates that share 11 of 12 intervals is a small part of one reading's error; one sd
    pooled over the plateaus, shaped by the level read: `_interval_noise`). Scatter is taken within each subtask
    (`subtasks`).
    `nonnegative_offset` (busy time, which no subtask reads below 0 at no load): a line whose offset would come
    out below 0 goes through 0 instead.

    `readings[i]` are the distinct meter updates seen on plateau i (fractions). Levels with fewer
    than `min_updates` updates add to the line but not to the noise. `deployments` (true levels,
    readings) are plateaus at one load in different deployments of the job: the error each keeps
    (`held_error`). Plateaus of one deployment cannot measure it: its error sits in the line's offset.
    `noise_masks` (per plateau, None: all) pick the updates whose scatter tells the noise: an error in the truth
    of a window (a part of it not known) moves successive updates apart by as much as their shared noise does.
    """
    windowed = overlaps is not None and any(v is not None for v in overlaps)
    reads = Reads(list(true_levels), list(readings), list(overlaps) if overlaps is not None else [None] * len(readings),
                  list(noise_masks) if noise_masks is not None else None,
                  list(subtasks) if subtasks is not None else None)
    lv = np.asarray(true_levels, dtype=float)
    means = np.array([np.mean(r) if len(r) else math.nan for r in readings])
    line = fit_line(lv, means)
    if not math.isfinite(line.slope):  # one level: no gain to fit; keep the offset only
        offset = float(np.nanmean(means - lv)) if np.isfinite(means - lv).any() else 0.0
        gain = 1.0
    else:
        offset, gain = line.intercept, line.slope
    known = np.isfinite(lv) & np.isfinite(means)
    if nonnegative_offset and offset < 0.0 and float(lv[known] @ lv[known]) > 0.0:
        offset, gain = 0.0, float(lv[known] @ means[known] / (lv[known] @ lv[known]))  # least squares through 0
    points: dict[float, list[tuple[float, float]]] = {}  # per level: each plateau's (squares, expected)
    told: list[tuple[float, float, float]] = []  # windowed: each plateau's (squares, expected, mean reading)
    resid: list[float] = []
    for i, (level, r) in enumerate(zip(lv, readings, strict=True)):
        if not math.isfinite(level) or len(r) == 0:
            continue
        resid.extend((np.asarray(r) - (offset + gain * level)).tolist())
        if windowed and reads.overlaps[i] is None:  # its updates' noise in another unit: not pooled with these
            continue
        squares, expected, mean_read, n_told = reads.noise_sums(i)
        if n_told >= min_updates and expected > 1e-12:  # updates that share every interval say nothing of it
            points.setdefault(round(float(level), 2), []).append((squares, expected))
            told.append((squares, expected, mean_read))
    rmse = float(np.sqrt(np.mean(np.square(resid)))) if resid else math.nan
    if windowed and told:
        through_zero = nonnegative_offset and offset == 0.0
        noise = _interval_noise(np.asarray(told), offset, gain, rmse,
                                int(np.sum(known & np.array([len(r) > 0 for r in readings]))),
                                1 if through_zero or not math.isfinite(line.slope) else 2)
    else:  # pooled per level as a ratio of sums (an sd of few updates alone would come out low)
        noise = sorted((lvl, math.sqrt(sum(a for a, _ in ab) / sum(b for _, b in ab))) for lvl, ab in points.items())
    n = int(sum(len(r) for r in readings))
    model = GaugeModel(offset=float(offset), gain=float(gain), noise_sd=noise, n=n, rmse=rmse,
                       noise_basis=NoiseBasis.INTERVAL if windowed else NoiseBasis.UPDATE)
    if deployments is None:
        return model
    deps = deployments if isinstance(deployments, Reads) else Reads.independent(*deployments)
    held, used = held_error(np.asarray(deps.levels, dtype=float), deps.readings, model, deps.overlaps, deps.subtasks)
    return model.model_copy(update={"held_sd": held, "held_n": used})


def time_share_shape(reading: float | np.ndarray) -> float | np.ndarray:
    """How a share of time's noise varies with the share read: 4 r (1 - r), 1 at a half, 0 where a subtask is never
    or always busy (or blocked), whose time cannot scatter. Calibration's plateaus agree: q1's readings at 0.1 CPU
    near 0 scattered by 0.005-0.05 per interval, those at 0.1-0.8 by 0.1-0.55."""
    r = np.clip(reading, 0.0, 1.0)
    return 4.0 * r * (1.0 - r)


def _interval_noise(plateaus: np.ndarray, offset: float, gain: float, rmse: float, n_plateaus: int,
                    line_params: int) -> list[tuple[float, float]]:
    """A windowed gauge's noise per 5-s interval, as (true level, sd) points: s x sqrt(`time_share_shape`) of the
    line's reading there. s from the plateaus' (squares, expected, mean reading) rows, as a ratio of sums (a
    plateau of two updates that share 11 of 12 intervals tells little and would multiply its squares by 144 as a
    ratio of its own). Bounded by the readings' scatter around the line: a full window's reading carries 1/12 of
    one interval's variance and no more error than the residuals show (a plateau's few updates, their shared noise
    taken out, also carry what the truth of their windows misses, magnified as much); most of a reading's noise is
    its plateau's, so the residuals' variance is over the plateaus less the line's parameters, and it bounds only
    beyond what those few degrees of freedom allow (its one-sided 90 % limit: a hard minimum of two noisy
    estimates would read low)."""
    squares, expected, readings = plateaus[:, 0], plateaus[:, 1], plateaus[:, 2]
    shape = np.asarray(time_share_shape(readings))
    if float(expected @ shape) <= 0.0:  # every reading at 0 or 1: the shape leaves nothing to measure
        return []
    s2 = float(squares.sum() / (expected @ shape))
    if math.isfinite(rmse) and n_plateaus > line_params:
        per_window = gauge_window.GAUGE_WINDOW_S / gauge_window.METER_INTERVAL_S  # intervals a full window holds
        dof = n_plateaus - line_params
        bound2 = rmse * rmse * n_plateaus * per_window / float(stats.chi2.ppf(0.1, dof))
        s2 = min(s2, bound2 / max(float(shape.mean()), 1e-9))
    # dense near the ends, where the shape bends: interpolated between points it stays within a few per cent
    grid = np.unique(np.concatenate([np.linspace(0.0, 1.0, 21), [0.01, 0.02, 0.03, 0.97, 0.98, 0.99]]))
    return [(float(u), math.sqrt(s2 * float(time_share_shape(offset + gain * u)))) for u in grid]


MIN_BACKLOGGED_PLATEAUS = 2  # plateaus whose scatter measures the backlogged reading's noise (fewer: the line's)


def with_backlogged(model: GaugeModel, plateaus: Sequence[Reads | np.ndarray], min_updates: int = 2) -> GaugeModel:
    """`model` with the reading of a saturated subtask whose input holds records, from the meter updates of such
    plateaus (each its own `Reads`, or its updates alone: each its own noise): the mean of the plateaus' means, and
    the sd of the noise within a plateau as the line's is (pooled as a ratio of sums: one update's, or with
    overlaps one interval's, in the line's unit, `noise_basis`; the error a deployment keeps is `held_sd`'s, drawn
    on top), from MIN_BACKLOGGED_PLATEAUS of them or NaN (the sim draws the line's). No plateau with `min_updates`:
    not measured (NaN), never a guess."""
    interval = model.noise_basis == NoiseBasis.INTERVAL
    means: list[float] = []
    told = 0  # plateaus whose scatter went into the sd
    squares = expected = 0.0
    for x in plateaus:
        reads = x if isinstance(x, Reads) else Reads.independent([math.nan], [np.asarray(x, dtype=float)])
        r = np.asarray(reads.readings[0], dtype=float)
        if np.isfinite(r).sum() < min_updates:
            continue
        means.append(float(np.nanmean(r)))
        if (reads.overlaps[0] is not None) != interval:  # its noise in another unit than the line's: not pooled
            continue
        a, b, _, _ = reads.noise_sums(0)
        squares, expected = squares + a, expected + b
        told += b > 1e-12
    if not means:
        return model
    # one plateau's few successive updates tell their noise with a degree of freedom or two: the line's then
    sd = math.sqrt(squares / expected) if told >= MIN_BACKLOGGED_PLATEAUS else math.nan
    return model.model_copy(update={"backlogged_mean": float(np.mean(means)), "backlogged_sd": sd,
                                    "backlogged_n": len(means)})


def held_error(true_levels: np.ndarray, readings: Sequence[np.ndarray], model: GaugeModel,
               overlaps: Sequence[np.ndarray | None] | None = None,
               subtasks: Sequence[np.ndarray | None] | None = None) -> tuple[float, int]:
    """(sd of the error a deployment keeps, deployments used) from one load read in several deployments.

    Each deployment's mean residual against the line carries its held error plus the noise of its updates' mean
    (one update's variance / their number, or, with `overlaps`, what their shared intervals leave of it; the
    noise from the scatter of each subtask's own updates); the residuals are centred on their own mean first (the
    line's bias at that load is no deployment's own, and the line sits on the ladder's deployment, one of these).
    NaN with fewer than MIN_DEPLOYMENTS: not calibrated, never 0."""
    resid: list[float] = []
    of_means: list[float] = []
    line_vars: list[float] = []
    ov: Sequence[np.ndarray | None] = overlaps if overlaps is not None else [None] * len(readings)
    reads = Reads(list(true_levels), list(readings), list(ov), None,
                  list(subtasks) if subtasks is not None else None)
    squares = expected = 0.0
    interval = model.noise_basis == NoiseBasis.INTERVAL
    for i, (level, r, v) in enumerate(zip(true_levels, readings, ov, strict=True)):
        if not math.isfinite(level) or len(r) == 0 or (v is not None) != interval:  # its noise in another unit
            continue
        resid.append(float(np.mean(r)) - float(model.mean(level)))
        of_means.append(noise_factors(v, len(r))[1])
        line_vars.append(float(model.sd(level)) ** 2)
        a, b, _, _ = reads.noise_sums(i)
        squares, expected = squares + a, expected + b
    if len(resid) < MIN_DEPLOYMENTS:
        return math.nan, len(resid)
    # the deployments' noise pooled as a ratio of sums (each tells it with a degree of freedom or two), or the
    # line's (one update's, or with `overlaps` one interval's, as it was fitted)
    unit = [squares / expected] * len(resid) if expected > 1e-12 else line_vars
    var = float(np.var(resid, ddof=1)) - float(np.mean([u * k for u, k in zip(unit, of_means, strict=True)]))
    return math.sqrt(max(0.0, var)), len(resid)


def step_lag(t: np.ndarray, reading: np.ndarray, t_step: float, before: float, after: float,
             fraction: float = 0.63) -> float:
    """Seconds from a load step at `t_step` until `reading` covered `fraction` of its way from the
    level `before` to the level `after` (NaN when it never did within the samples)."""
    if not (math.isfinite(before) and math.isfinite(after)) or abs(after - before) < 1e-6:
        return math.nan
    target = before + fraction * (after - before)
    rising = after > before
    for ti, v in zip(t, reading, strict=True):
        if ti < t_step or not math.isfinite(v):
            continue
        if (v >= target) if rising else (v <= target):
            return float(ti - t_step)
    return math.nan


FLAG_BINS = (0.4, 0.6, 0.8)  # downstream utilisation bins of the flag model (edges between them)


def flag_model(points: Sequence[tuple[float, float, int]]) -> FlagModel | None:
    """The isBackPressured flag of a subtask nothing held back, from (its downstream's utilisation, share of its
    samples flagged, samples) per plateau: pooled per utilisation bin (weighted by samples), made non-decreasing
    (isotonic: a downstream nearer its limit never fills its buffers less often), from 0 at utilisation 0; None
    without a point."""
    from scipy.optimize import isotonic_regression  # calibration only, as `warmup`'s curve_fit

    pts = [(u, f, n) for u, f, n in points if math.isfinite(u) and math.isfinite(f) and n > 0]
    if not pts:
        return None
    binned: dict[int, list[tuple[float, float, int]]] = {}
    for u, f, n in pts:
        binned.setdefault(int(np.searchsorted(FLAG_BINS, u, side="right")), []).append((u, f, n))
    us, ps, ws = [], [], []
    for b in sorted(binned):
        rows = binned[b]
        w = sum(n for _, _, n in rows)
        us.append(sum(u * n for u, _, n in rows) / w)
        ps.append(sum(f * n for _, f, n in rows) / w)
        ws.append(w)
    mono = isotonic_regression(ps, weights=ws).x
    curve = [(round(float(u), 4), round(float(p), 4)) for u, p in zip(us, mono, strict=True)]
    if curve[0][0] > 0.0:  # an idle downstream fills no buffer: from (0, 0) up to the lowest bin
        curve.insert(0, (0.0, 0.0))
    return FlagModel(points=curve, n=int(sum(ws)))


# ---------------------------------------------------------------- state and downtime


STATE_SLOPE_P = 0.05  # a cost-versus-state slope whose two-sided p-value is at least this is not told from none


def state_cost(state_gb: Sequence[float], cost_per_record: Sequence[float], bytes_per_record: float,
               max_state_bytes: float) -> StateCost:
    """Per-record cost against the state a subtask holds: cost = c0 (1 + per_gb x GB), c0 the intercept.

    A slope the points cannot tell from none (p >= `STATE_SLOPE_P`, or fewer than three points, or no spread in
    state) is no growth: q11's window at 0.1 CPU (session 27) read +5 % per MB over 0.6-3.4 MB of state at p = 0.15
    (r2 0.32, eight phases), which the sim would have run about 27 % slower at the 7 MB a backlog can leave.
    `slope_p` keeps the p-value either way. The phases' points are not independent draws (the state grows with the
    time the calibration has run, and the slope mixes the two), so the p-value is a guard, not a test of a cause."""
    xa, ya = np.asarray(state_gb, dtype=float), np.asarray(cost_per_record, dtype=float)
    keep = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[keep], ya[keep]
    per_gb, p_value = 0.0, math.nan
    if len(xa) >= 3 and np.ptp(xa) > 0.0:
        line = stats.linregress(xa, ya)
        p_value = float(line.pvalue)
        if line.intercept > 0 and p_value < STATE_SLOPE_P:
            per_gb = max(0.0, float(line.slope) / float(line.intercept))
    return StateCost(bytes_per_record=bytes_per_record, per_gb=per_gb, max_state_bytes=max_state_bytes, n=len(xa),
                     slope_p=p_value)


def pooled_slope(points: Sequence[tuple[float, float]], min_spread_bytes: float = 50e6) -> float:
    """Downtime seconds per GB of state over every (state bytes, downtime) point; never negative, and
    0 unless the states span at least `min_spread_bytes` (noise over a few bytes is no slope)."""
    points = [p for p in points if math.isfinite(p[0]) and math.isfinite(p[1])]
    if len(points) < 2 or max(p[0] for p in points) - min(p[0] for p in points) < min_spread_bytes:
        return 0.0
    line = fit_line([p[0] / 1e9 for p in points], [p[1] for p in points])
    return max(0.0, line.slope) if math.isfinite(line.slope) else 0.0


def downtime_model(up: Sequence[tuple[float, float]], down: Sequence[tuple[float, float]], slope_s_per_gb: float,
                   slope_from: str) -> DowntimeModel:
    """This query's base downtimes given a slope: mean of downtime - slope x GB over the scale-ups' points
    (restarts on fresh task managers) and, apart, over the scale-downs' (on running ones). The line goes
    through this query's own points: its base may be negative where the pooled slope is steeper than its
    restart cost per GB (measured: q5's in-place restart with 76 MB took 15.5 s, where the slope pooled over
    q1-q11 gives 56 s); the downtime itself is never below 0 (`DowntimeModel.downtime`)."""
    if not up and not down:
        raise ValueError("no rescale measured for this method")

    def base(points: Sequence[tuple[float, float]]) -> float:
        known = [(s, d) for s, d in points if math.isfinite(s)]  # no checkpoint yet: the state is unknown
        if not known:
            return float(np.mean([d for _, d in points]))
        return float(np.mean([d - slope_s_per_gb * s / 1e9 for s, d in known]))

    b_up = base(up) if up else base(down)
    return DowntimeModel(base_s=b_up, down_base_s=base(down) if down else None, s_per_gb=slope_s_per_gb,
                         points=[(float(s), float(d)) for s, d in up],
                         down_points=[(float(s), float(d)) for s, d in down], slope_from=slope_from)


def warmup(seconds: Sequence[float], rates: Sequence[float], warm_rate: float, cores: float,
           saturated: bool = True, dead_s: float = 0.0) -> WarmUp | None:
    """Fit fraction(c) = 1 - (1 - f0) exp(-c / tau) to the rates of fresh task managers (`seconds` since their
    first record, which came `dead_s` after the job ran; c = seconds x `cores`) over their warm rate. tau is
    held below ten times the CPU time measured (a curve still flat at its end says "slow for longer than
    measured", not how long). None without a warm rate or with fewer than four bins."""
    from scipy.optimize import curve_fit  # calibration only: keep it off the simulator's import path

    t = np.asarray(seconds, dtype=float)
    r = np.asarray(rates, dtype=float)
    keep = np.isfinite(t) & np.isfinite(r)
    t, r = t[keep], r[keep]
    if len(t) < 4 or cores <= 0 or not math.isfinite(warm_rate) or warm_rate <= 0:
        return None
    c = t * cores
    f = r / warm_rate

    def curve(x: np.ndarray, f0: float, tau: float) -> np.ndarray:
        return 1.0 - (1.0 - f0) * np.exp(-x / tau)

    longest = 10.0 * float(c.max())
    (f0, tau), _ = curve_fit(curve, c, f, p0=(float(np.clip(f[0], 0.0, 1.0)), min(float(c.max()) / 3, longest / 2)),
                             bounds=([0.0, 1e-3], [1.0, longest]))
    rmse = float(np.sqrt(np.mean((curve(c, f0, tau) - f) ** 2)))
    return WarmUp(initial_fraction=float(f0), tau_cpu_s=float(tau), cores=cores, warm_rate=warm_rate,
                  points=[(float(x + dead_s), float(y)) for x, y in zip(t, f, strict=True)], rmse=rmse,
                  saturated=saturated, dead_s=float(dead_s))


def pending_buffer(seconds: np.ndarray, backlog: np.ndarray, reading: np.ndarray, arrived: np.ndarray,
                   taken: np.ndarray, min_points: int = 5) -> PendingModel | None:
    """The records a Kafka source's pendingRecords does not count (`PendingModel`), per sample:
    (backlog - reading) x taken / arrived, where the reading says something (above 0, below the backlog) and
    the source took and received records; the median over them. None with fewer than `min_points` such
    samples (a cold start that was not overloaded, or no reading)."""
    t, b, r, a, k = (np.asarray(x, dtype=float) for x in (seconds, backlog, reading, arrived, taken))
    ok = np.isfinite(t) & np.isfinite(b) & np.isfinite(r) & np.isfinite(a) & np.isfinite(k)
    ok &= (r > 0) & (b > r) & (a > 0) & (k > 0)
    if int(ok.sum()) < min_points:
        return None
    est = (b[ok] - r[ok]) * k[ok] / a[ok]
    every = max(1, len(est) // 10)  # about ten of them kept with the profile, to see how steady it was
    return PendingModel(buffer_records=float(np.median(est)), n=int(ok.sum()),
                        points=[(round(float(x), 1), round(float(y))) for x, y in zip(t[ok][::every], est[::every],
                                                                                      strict=True)])
