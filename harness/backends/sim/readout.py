"""Turn the simulator's per-step rows into what autoscalers and the run record read.

Readings are produced the way the local stack produces them (METRICS.md, harness.metrics.promql):
- Flink's busy / idle / backpressured time gauges (TimerGauge) update every meter interval (Flink's metric
  view: 5 s), at a phase against the scrapes that reproduces the calibrated lag of the reading behind the
  truth, and report the mean over their last `meter_window_s` (Flink 1.17+: 60 s, twelve updates), or
  since their task started when that is shorter: a (re)started job's tasks begin new gauges, so right
  after a rescale a reading holds the new deployment alone and a minute later a whole minute of it (the
  truth is averaged over the processing steps in that span); each meter update carries the calibrated bias and noise of
  the reading against the true load (`harness.calibrated_profile.GaugeModel`): the noise is drawn per subtask and
  5-s meter interval from a seeded table and averaged over the same window as the truth, so successive updates
  share most of it, as a 60-s mean must (a profile whose noise is per update draws it per update),
  plus its held error: drawn per subtask once per deployment (a
  restarted job on the local stack reads the same load differently until its next restart). A
  subtask that takes all it can (records wait at its input: the bottleneck) at CPU share 1.0 reads
  busy at the calibrated backlogged level for that part of the gauge's window, where measured: at a low
  CPU quota busy time tells queued input apart more than load (q1's map at 0.1 CPU: 0.10 at its
  capacity with nothing queued, 0.8-0.98 as a run's bottleneck). Flink derives busy as 1000 - idle -
  backpressured, so a busy reading's error moves into idle and backpressured as the true not-busy time splits
  (at least): the backpressured reading is raised to that share of what the busy reading leaves, so a held-back
  subtask that never waits for input reads no idle time, and its backpressured reading carries the busy
  reading's error instead of its own gauge's (locally, such a source read idle 0.03-0.04). The true
  busy fraction of a subtask is records / its capacity, the true backpressured fraction the records
  it could not hand downstream / its capacity.
- A scrape whose latest meter update is the restarted tasks' first (its interval holds their start) or earlier
  reads busy 1000, idle and backpressured 0 (`_began`): Flink's fresh idle and backpressure TimerGauges read 0
  through their first update, and busy is what they leave; the local runs read 1000 for one scrape, sometimes
  two, after restarts and at the cold start. Such scrapes give no CPU reading and no isBackPressured flag either
  (a simplification: a window of them only says why they are missing).
- Prometheus scrapes every `scrape_interval_s`; the monitor averages the scraped gauges over the
  loop's metrics window (`avg_over_time`), takes rates from counters over the window (`rate`: from
  the first to the last scrape inside it) and the lag's slope with `deriv` over the same samples.
- isBackPressured is Flink's instantaneous flag, so a scrape sees it set with the probability that
  the subtask is blocked (its backpressured fraction); the window's max_over_time is what counts.
- CPU, two signals (harness.vocabulary): `cpu` = CPU time / the task manager's quota, with the
  calibrated idle CPU and the fraction of its quota a saturated task manager reaches, linear in the
  subtask's utilisation; `cpu_jvm` = Status.JVM.CPU.Load as the calibrated function of the same (the
  JVM reads the cgroup quota in force, so both signals are relative to it).
- A Kafka source's pendingRecords misses what its consumers prefetched (the calibrated buffer) and what
  arrived while that buffer drained (`pending_reading`), so a fresh or slow job reads a small backlog
  that barely grows; the sum over sources is the job's lag, and its slope the lag rate.
- The sources' event-time lag gauge (the thesis' latency, ch. 5.3) is the age of the last record
  each subtask emitted, averaged over subtasks; a subtask that has not emitted since a restart has
  no value (NaN), and while the job is down no gauge answers at all.
- End-to-end latency: the sink's per-step histogram (the real sink's buckets), its counters read like
  the local monitor's `rate()` over the same scrapes: mean = summed age / records, p95 by Prometheus'
  histogram_quantile, capped at the oldest record of the interval (max); NaN for an interval in which
  no record reached the sink (a gap, never the last value held).
With `readings: exact` (or a first-guess profile) the same code reads the model's true values:
one sample per step, no bias, no noise, over the window.
Pure functions over arrays; no I/O.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from functools import partial

import numpy as np
import pyarrow as pa

from harness.backends.sim.model import (
    J_ARRIVED,
    J_E2E_COUNT,
    J_E2E_MAX,
    J_E2E_SUM,
    J_EXPIRED,
    J_LAG,
    J_LATENCY_MAX,
    J_PROCESSED,
    J_PROCESSING,
    J_PRODUCED,
    J_TAKEN,
    J_TMS,
    JOB_COLS,
    O_ARRIVED,
    O_BLOCKED,
    O_BLOCKED_LANE0,
    O_BUFFER,
    O_BUSY_F,
    O_CAP,
    O_IN,
    O_IN_LANE0,
    O_LAG,
    O_LAG_LANE0,
    O_NDMAX,
    O_NET,
    O_OUT,
    O_PAR,
    O_RECLAG,
    O_SHARE,
    O_STATE,
    OP_COLS,
    SimModel,
)
from harness.calibrated_profile import GaugeModel, NoiseBasis, OperatorReadings
from harness.metrics.latency import histogram_quantile, histogram_quantiles
from harness.metrics.snapshot import LazySubtasksOperatorMetrics, MetricsSnapshot, OperatorMetrics, SubtaskMetrics
from harness.record import empty_timeseries, timeseries_table
from harness.vocabulary import Metric

NOISE_UPDATES = 512  # rows of the pre-drawn noise table (meter intervals; reused cyclically)
NOISE_SUBTASKS = 128  # columns: Flink's default max parallelism
_GAUGES = ("busy", "backpressured", "cpu", "cpu_jvm")
_WINDOWED = ("busy", "backpressured")  # TimerGauges: their noise, like their truth, is their window's mean
FULL = 1.0 - 1e-9  # a subtask that took this share of its capacity in a step had records waiting at its input

# Series the harness knows itself (not scraped by Prometheus): kept through a Prometheus outage.
HARNESS_SERIES = (Metric.PARALLELISM, Metric.CPU_SHARE, Metric.PROCESSING)
# Load the pattern asked for that the simulator did not offer. Its generator never falls behind: every
# record the arrival process draws enters Kafka (skipped = 0, measured). Records Kafka retention deleted
# unread are the model's own count (J_EXPIRED, cumulative).
SIM_SKIPPED_TOTAL = 0.0


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def _nanmax(col: np.ndarray) -> float:
    ok = ~np.isnan(col)
    return float(col[ok].max()) if ok.any() else math.nan


_CENTRED: dict[int, tuple[np.ndarray, float]] = {}  # n -> (centred sample times, their sum of squares)


def slope(y: np.ndarray, dt: float) -> float:
    """Least-squares slope of equally spaced samples (records/s), 0 with fewer than 2."""
    n = len(y)
    if n < 2:
        return 0.0
    centred = _CENTRED.get(n)
    if centred is None:  # two per snapshot, always of the same few lengths
        t = np.arange(n) - (n - 1) / 2.0
        centred = _CENTRED[n] = (t, float(t @ t))
    t, tt = centred
    return float(t @ y) / (tt * dt)


class NoiseTable:
    """Seeded noise per operator, gauge, meter interval and subtask, stored as running sums over intervals so the
    mean over a reading's window is one subtraction (`window_mean_all`)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._draws: dict[int, np.ndarray] = {}
        self._cum: dict[int, np.ndarray] = {}
        self._flags: dict[int, np.ndarray] = {}
        self._held: dict[tuple[int, int], np.ndarray] = {}

    def window_mean_all(self, op: int, updates: Sequence[int], intervals: Sequence[int], windowed: np.ndarray,
                        subtasks: int) -> np.ndarray:
        """The noise of the mean of several updates, per gauge and subtask: (gauges, subtasks). Update k is the
        meter interval `updates[k]` (cyclic). A gauge that is `windowed` (a TimerGauge whose noise is one
        interval's) reads at each update the mean of the draws of its window's `intervals[k]` intervals, up to and
        including its own, so successive updates share most of it; the others read each update's own draw."""
        cum = self._cum.get(op)
        if cum is None or cum.shape[2] < subtasks:
            cum = self._cum[op] = self._running_sums(op, subtasks)
        hi = np.asarray(updates, dtype=np.intp) % NOISE_UPDATES + NOISE_UPDATES + 1  # in the table's second copy
        top = cum[hi, :, :subtasks]
        own = (top - cum[hi - 1, :, :subtasks]).mean(axis=0)
        if not windowed.any():
            return own
        m = np.minimum(np.asarray(intervals, dtype=np.intp), NOISE_UPDATES)  # a window within the table's copy
        spans = ((top - cum[hi - m, :, :subtasks]) / m[:, None, None]).mean(axis=0)
        return np.where(windowed[:, None], spans, own)

    def _running_sums(self, op: int, subtasks: int) -> np.ndarray:
        """The running sums (over the table twice, so that a window reaches back across its start) of the first
        subtasks' columns only (a power of two of them): each column is
        summed on its own, so they equal the whole table's, at a fraction of the cost for the few subtasks
        a job has. All draws are made, in the same order, whatever the columns summed."""
        z = self._draws.get(op)
        if z is None:
            rng = np.random.default_rng([self.seed, 0x5EED, op])
            z = self._draws[op] = rng.standard_normal((NOISE_UPDATES, len(_GAUGES), NOISE_SUBTASKS))
        cols = min(NOISE_SUBTASKS, 1 << max(3, (subtasks - 1).bit_length()))
        part = z[:, :, :cols]
        zeros = np.zeros((1, len(_GAUGES), cols))
        return np.concatenate([zeros, np.cumsum(np.concatenate([part, part]), axis=0)])

    def held(self, op: int, deployment: int, subtasks: int) -> np.ndarray:
        """Standard-normal draws of every gauge's held error, per subtask, for one deployment (a restart
        begins the next): (gauges, subtasks)."""
        key = (op, deployment)
        z = self._held.get(key)
        if z is None or z.shape[1] < subtasks:
            rng = np.random.default_rng([self.seed, 0x4E1D, op, deployment])
            z = self._held[key] = rng.standard_normal((len(_GAUGES), max(subtasks, NOISE_SUBTASKS)))
        return z[:, :subtasks]

    def uniform(self, op: int, index: int) -> float:
        u = self._flags.get(op)
        if u is None:
            u = self._flags[op] = np.random.default_rng([self.seed, 0xF1A6, op]).random(NOISE_UPDATES)
        return float(u[index % NOISE_UPDATES])


def _noise(model: SimModel, seed: int) -> NoiseTable:
    tab = getattr(model, "_noise_table", None)
    if tab is None or tab.seed != seed:
        tab = NoiseTable(seed)
        model._noise_table = tab  # type: ignore[attr-defined]
    return tab


_new = object.__new__


def _gauge_start(model: SimModel, rows: np.ndarray, base: int, u: int, span: int) -> int | None:
    """The first step a gauge's update at step `u` averages over: `span` steps back (Flink's TimerGauge keeps
    the last 60 s of 5-s updates), or the first step its task processed in after the job's latest (re)start, if
    that is later (a restarted task's gauge starts afresh: its first updates average over what it ran so far, not
    over a downtime longer than the window); None where nothing ran since that restart (no reading yet)."""
    lo = max(base, u - span)
    restart = _restart_before(model, u)
    if restart <= lo and rows[lo - base, J_PROCESSING] > 0.0:  # running since before the window: all of it
        return lo
    began = _first_running(rows, base, max(restart, base), u)
    return max(lo, began) if began is not None else None


def _first_running(rows: np.ndarray, base: int, start: int, end: int) -> int | None:
    """The first step in [start, end) the job processed in (steps absolute, `rows` from `base`); None if none."""
    running = np.flatnonzero(rows[start - base:end - base, J_PROCESSING] > 0.0)
    return start + int(running[0]) if len(running) else None


def _began(model: SimModel, rows: np.ndarray, base: int, s: int) -> int:
    """The step at which the tasks a scrape at step `s` reads began: the first step processed in since the job's
    latest restart before `s` (within the rows kept). A scrape whose latest meter update came at most an interval
    after that reads Flink's fresh gauges: idle and backpressured time 0 and busy, what they leave, 1000 (the
    local runs read 1000 for a scrape or two after each restart)."""
    began = _first_running(rows, base, max(_restart_before(model, s), base), s)
    return began if began is not None else s


def _restart_before(model: SimModel, u: int) -> int:
    """The step at which the deployment that ran step u - 1 began (the job's latest restart before update u)."""
    return model.restart_steps[bisect_right(model.restart_steps, u - 1) - 1]


def _busy_steps(rows: np.ndarray, o: int, kinds: _Kinds, dt: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per kind of subtask, each step's true busy and backpressured fractions in `rows`: records / capacity (the
    warm subtasks beside a slower fresh one waiting for input the rest: O_BUSY_F), and the records it could not
    hand downstream / capacity, at most what busy leaves."""
    cap = np.maximum(rows[:, o + O_CAP] * dt, 1e-12)
    busy_f = rows[:, o + O_BUSY_F]
    busy = [np.minimum(1.0, x / cap) * busy_f for x in kinds.split_rows(rows, o, O_IN, O_IN_LANE0)]
    bp = [np.minimum(1.0 - b, x / cap) for b, x in zip(busy, kinds.split_rows(rows, o, O_BLOCKED, O_BLOCKED_LANE0),
                                                      strict=True)]
    return busy, bp


def _utilisation(row: list[float], downstream: tuple[int, ...], dt: float) -> float:
    """The true utilisation of the busiest of these operators in one step: records taken / what its subtasks
    could take (as the calibration's flag model measured it, per subtask of the operator fed)."""
    u = 0.0
    for j in downstream:
        o = JOB_COLS + j * OP_COLS
        room = row[o + O_CAP] * dt * row[o + O_PAR]
        if room > 0.0:
            u = max(u, row[o + O_IN] / room)
    return u


def _blocked_share(busy: float, backpressured: float) -> float:
    """The part of a subtask's true not-busy time it spends blocked on output rather than waiting for input.

    Flink measures idle (waiting for input) and backpressured (waiting for output buffers) time and derives busy
    as what they leave, so whatever the busy reading misses lands in one of the two as the truth splits them, at
    least: a held-back source with a Kafka backlog never waits for input (locally, at 3 subtasks behind q1's map:
    idle 0.03-0.04 whatever its busy reading), and its not-busy reading is backpressured time."""
    idle = max(0.0, 1.0 - busy - backpressured)
    return backpressured / (backpressured + idle) if backpressured + idle > 1e-9 else 0.0


def _backpressured_reading(busy: float | np.ndarray, backpressured: float | np.ndarray,
                           blocked_share: float | np.ndarray) -> float | np.ndarray:
    """The backpressured reading beside a busy reading: no more than what busy leaves, and at least the blocked
    share of it (`_blocked_share`). Scalars or arrays alike (the exact and the noisy readout)."""
    left = 1.0 - busy
    return np.maximum(np.minimum(backpressured, left), left * blocked_share)


def _subtask(rin: float, rout: float, busy: float, idle: float, bp: float, buffer: float, cpu: float, jvm: float,
             lag: float | None) -> SubtaskMetrics:
    """SubtaskMetrics without the frozen dataclass' per-field __setattr__ (hundreds per snapshot)."""
    o = _new(SubtaskMetrics)
    o.__dict__.update(records_in_per_s=rin, records_out_per_s=rout, busy_ms_per_s=busy, idle_ms_per_s=idle,
                      backpressured_ms_per_s=bp, input_buffer_usage=buffer, cpu_load=cpu, cpu_jvm_load=jvm, lag=lag)
    return o


def _noisy_subtasks(x_rate: list[float], sel: float, busy_l: list[float], idle_l: list[float], bp_l: list[float],
                    buffer: float, cpu_l: list[float], jvm_l: list[float], lag_sub: list[float | None],
                    kind_list: list[int]) -> tuple[SubtaskMetrics, ...]:
    """Every subtask's own readings (its kind's rates, its own noisy gauges), in subtask order."""
    return tuple(
        _subtask(x_rate[kk], x_rate[kk] * sel, busy_l[j], idle_l[j], bp_l[j], buffer, cpu_l[j], jvm_l[j], lag_sub[kk])
        for j, kk in enumerate(kind_list)
    )


def _exact_subtasks(x_rate: list[float], sel: float, busy_l: list[float], idle_l: list[float], bp_l: list[float],
                    buffer: float, cpu_l: list[float], jvm_l: list[float], lag_sub: list[float | None],
                    kind_list: list[int]) -> tuple[SubtaskMetrics, ...]:
    """Exact readings: equal subtasks of a kind share one (immutable) reading."""
    nk = len(lag_sub)
    shared = [SubtaskMetrics(x_rate[kk], x_rate[kk] * sel, busy_l[j], idle_l[j], bp_l[j], buffer,
                             cpu_l[j], jvm_l[j], lag_sub[kk])
              for kk, j in ((kk, kind_list.index(kk)) for kk in range(nk))]
    return tuple([shared[kk] for kk in kind_list]) if nk > 1 else (shared[0],) * len(kind_list)


def _interp(points: list[tuple[float, float]], x: float) -> float:
    """np.interp for a handful of points, in plain Python (called per kind per snapshot)."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return points[-1][1]


def _clip01(v: float) -> float:
    return 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)


class _Kinds:
    """Per-configuration layout of an operator's subtasks: kinds of equally loaded subtasks."""

    __slots__ = ("counts", "kind_of", "kind_list", "fractions")

    def __init__(self, model: SimModel, i: int) -> None:
        if model.is_src[i]:
            self.counts = tuple(model.lane_n[i])
            self.fractions: tuple[float, ...] = ()  # sources: from the partition groups' own columns
            self.kind_list = [kk for kk, cnt in enumerate(self.counts) for _ in range(cnt)]
        else:
            kinds = model.share_kinds[i]
            self.counts = tuple(cnt for _, cnt in kinds)
            self.fractions = tuple(sh for sh, _ in kinds)
            index = {sh: j for j, (sh, _) in enumerate(kinds)}
            self.kind_list = [index[sh] for sh in model.shares[i]]
        self.kind_of = np.array(self.kind_list, dtype=np.intp)

    def split_rows(self, rows: np.ndarray, o: int, col: int, lane0: int) -> list[np.ndarray]:
        """`split` for each of `rows` at once: one subtask's amount of `col` per step, for each kind."""
        if not self.fractions:
            first = rows[:, o + lane0]
            out = [first / self.counts[0]]
            if len(self.counts) > 1:
                out.append((rows[:, o + col] - first) / self.counts[1])
            return out
        total = rows[:, o + col]
        return [total * f for f in self.fractions]

    def split(self, row: list[float], o: int, col: int, lane0: int) -> list[float]:
        """One subtask's amount of `col` for each kind, from one row."""
        if not self.fractions:
            first = row[o + lane0]
            out = [first / self.counts[0]]
            if len(self.counts) > 1:
                out.append((row[o + col] - first) / self.counts[1])
            return out
        total = row[o + col]
        return [total * f for f in self.fractions]


def _kinds(model: SimModel, i: int) -> _Kinds:
    cache: tuple[int, dict[int, _Kinds]] | None = getattr(model, "_kinds_cache", None)
    if cache is None or cache[0] != model.version:
        cache = (model.version, {})
        model._kinds_cache = cache  # type: ignore[attr-defined]
    kinds = cache[1].get(i)
    if kinds is None:
        kinds = cache[1][i] = _Kinds(model, i)
    return kinds


def pending_reading(backlog: np.ndarray, arrived: np.ndarray, taken: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """A Kafka source's pendingRecords as Flink reads it (`harness.calibrated_profile.PendingModel`): the records
    its consumers prefetched (up to `buffer`, over its subtasks) are not counted, nor those that arrived while
    the reading aged by as long as that buffer takes to drain: max(0, backlog - min(buffer, backlog) x
    arrived / taken). A source that takes nothing reads 0 while records arrive (a job that just started)."""
    missing = np.minimum(buffer, backlog) * arrived / np.maximum(taken, 1e-9)
    return np.maximum(0.0, backlog - missing)


def _held_sd(r: OperatorReadings) -> np.ndarray | None:
    """Each gauge's held error sd (0 where not calibrated); None when no gauge has one."""
    sds = np.array([getattr(r, g).held_sd for g in _GAUGES], dtype=float)
    sds = np.where(np.isfinite(sds), sds, 0.0)
    return sds if sds.any() else None


def _gauge(g: GaugeModel, level: float) -> tuple[float, float]:
    """(bias-corrected mean, noise sd) of a gauge at a true level."""
    mean = _clip01(g.offset + g.gain * level)
    return mean, (_interp(g.noise_sd, level) if g.noise_sd else 0.0)


def _busy_gauge(g: GaugeModel, level: float, queued: float) -> tuple[float, float]:
    """(mean, noise sd) of the busy gauge over a window in which the subtask had records waiting at its
    input (took all it could) for the fraction `queued` of the time: the calibrated backlogged reading then,
    the line the rest of the time. Without a measured backlogged reading: the line throughout."""
    if queued <= 0.0 or not math.isfinite(g.backlogged_mean):
        return _gauge(g, level)
    q_sd = g.backlogged_sd if math.isfinite(g.backlogged_sd) else _gauge(g, 1.0)[1]
    if queued >= 1.0:
        return _clip01(g.backlogged_mean), q_sd
    mean, sd = _gauge(g, (level - queued) / (1.0 - queued))  # the true busy of the other rows
    return ((1.0 - queued) * mean + queued * _clip01(g.backlogged_mean),
            math.sqrt((1.0 - queued) * sd * sd + queued * q_sd * q_sd))


def snapshot(model: SimModel, window_s: float, interarrival: np.ndarray | None = None,
             seed: int = 0) -> MetricsSnapshot:
    """Metrics over the last `window_s` seconds, as the local monitor would read them now."""
    cfg = model.cfg
    dt = model.dt
    k = model.k
    topo = model.topology
    costs = model.costs
    noisy = costs.noisy
    t = model.now
    if k == 0:
        ops = {nm: OperatorMetrics(parallelism=p, cpu_share=s) for nm, p, s in
               zip(model.names, model.par, model.share, strict=True)}
        return MetricsSnapshot(t=t, window_s=window_s, topology=topo, operators=ops,
                               taskmanagers=sum(model.par), why_missing={"*": "no step simulated yet"})
    # sample instants (as step counts): scrapes every scrape_s inside (t - window, t]; exact: one sample
    # now whose "meter" is the whole window (the plain mean of the true values)
    win = max(1, int(round(window_s / dt)))
    scrape = max(1, int(round(cfg.scrape_interval_s / dt))) if noisy else 1
    meter = max(1, int(round(costs.meter_interval_s / dt))) if noisy else min(win, k)
    if noisy:
        last = (k // scrape) * scrape
        inst = [s for s in range(last, max(0, k - win), -scrape)[::-1] if s >= 1] or [k]
    else:
        inst = [k]
    der_win = max(2, int(round((cfg.lag_deriv_window_s or window_s) / dt)))
    # a gauge's update reports the mean over its last `span` steps, or since its task started if that is later
    span = max(meter, int(round(cfg.meter_window_s / dt))) if noisy else meter
    back = max(win, der_win) + span + meter + scrape + 1
    rows = model.rows_array(back)
    base = k - len(rows)  # absolute step of rows[0]
    ii = rows[[s - 1 - base for s in inst]]  # (n_inst, width): the rows scraped
    ii_l = ii.tolist()
    up = [r[J_PROCESSING] > 0.0 for r in ii_l] if noisy else [True]  # the job answered at that scrape
    # the gauge at scrape s shows the latest meter update u <= s (updates every `meter` steps, the last
    # one `meter_delay_s` before a scrape: the calibrated lag), which averaged the busy/idle/backpressured truth
    # over its window (`_gauge_start` .. u-1) and the CPU over rows u-meter .. u-1
    phase = (meter - int(round(costs.meter_delay_s / dt))) % meter if noisy else 0
    n_fresh = 0  # answered scrapes whose latest update is the tasks' first or none yet: Flink's fresh gauges
    if noisy:
        scraped = [(s, ((s - phase) // meter) * meter + phase) for s, ok in zip(inst, up, strict=True) if ok]
        fresh = [_began(model, rows, base, s) + meter >= u for s, u in scraped]  # rows < u hold its start
        n_fresh = sum(fresh)
        upd_v = [u for (_, u), new in zip(scraped, fresh, strict=True) if not new and u >= meter and u - meter >= base]
    else:
        upd_v = [k]
    # each update's rows: the busy/idle/backpressured gauges' window, and the CPU's last meter interval (the CPU
    # signals are no TimerGauges)
    if not noisy:
        spans = [(len(rows) - meter, len(rows), len(rows) - meter)]  # (window from, to, CPU from) as row indexes
    else:
        starts = [(u, _gauge_start(model, rows, base, u, span)) for u in upd_v]
        # the CPU over the last meter interval, but not from before the latest restart (another layout's rows)
        spans = [(lo - base, u - base, max(u - meter, _restart_before(model, u)) - base) for u, lo in starts
                 if lo is not None]
        upd_v = [u for u, lo in starts if lo is not None]
    n_valid = len(upd_v)
    # the rows all of them cover, read once per operator (windows of neighbouring updates overlap)
    cover = (min(min(w, c) for w, _, c in spans), max(t for _, t, _ in spans)) if spans else (0, 0)
    # rate(): from the first to the last scrape of the window (exact: the whole window)
    if noisy:
        r_lo, r_hi = inst[0] - base, inst[-1] - base  # rows of steps ending in (first, last]
    else:
        r_lo, r_hi = max(0, len(rows) - win), len(rows)
    has_rate = r_hi > r_lo
    rr = (rows[r_lo:r_hi].sum(axis=0) / ((r_hi - r_lo) * dt)).tolist() if has_rate else None
    noise = _noise(model, seed) if noisy else None
    first_upd = upd_v[0] // meter if n_valid else 0
    upd_slots = [u // meter for u in upd_v]  # each update's meter interval (its noise draw)
    # the intervals each update's busy / idle / backpressured window holds (12, or fewer since a restart)
    upd_intervals = [max(1, int(round((hi - lo) / meter))) for lo, hi, _ in spans]
    ii_up = [r for r, ok in zip(ii_l, up, strict=True) if ok]
    nan = math.nan
    now_l = ii_l[-1] if not noisy else rows[-1].tolist()  # exact: the only scrape is the newest row

    def gauge_mean(col: int) -> float:
        """avg_over_time of a gauge sampled at the scrapes the job answered (exact: the value now)."""
        if not noisy:
            return now_l[col]
        vals = [r[col] for r in ii_up if r[col] == r[col]]
        return sum(vals) / len(vals) if vals else nan

    def mean_up(values: np.ndarray) -> float:
        """avg_over_time of per-scrape readings (one per scraped row) at the scrapes the job answered."""
        vals = [v for v, ok in zip(values.tolist(), up, strict=True) if ok and v == v]
        return sum(vals) / len(vals) if vals else nan

    unread: np.ndarray | None = None  # records the sources' pending-records readings miss, at each scrape
    operators: dict[str, OperatorMetrics] = {}
    cpu_sum = jvm_sum = 0.0
    n_tm = 0
    src_lags: list[float] = []
    tm_cores = costs.tm_cores
    for i, name in enumerate(model.names):
        o = JOB_COLS + i * OP_COLS
        c = costs.ops[i]
        share = model.share[i]
        is_src = model.is_src[i]
        sel = model.sel[i]
        kinds = _kinds(model, i)
        counts = kinds.counts
        nk = len(counts)
        n_sub = len(kinds.kind_list)
        flagged: bool | None = None
        if n_valid:
            r = c.readings
            quota = max(share, 1e-9) * tm_cores
            idle_f = min(1.0, c.idle_fraction * tm_cores / quota)
            lv_busy = [0.0] * nk
            lv_bp = [0.0] * nk
            lv_work = [0.0] * nk  # busy less the network's waiting (= busy unless the loss burns no CPU)
            lv_queued = [0.0] * nk  # per update, the share of its window's steps in which it took all it could
            # per step, then averaged over each update's rows (a window partly queued reads the backlogged level for
            # that part): running sums over the rows all updates cover
            covered = rows[cover[0]:cover[1]]
            busy_s, bp_s = _busy_steps(covered, o, kinds, dt)
            net = np.ones(len(covered)) if model.net_loss_burns_cpu else covered[:, o + O_NET]
            for kk in range(nk):
                sums = [np.concatenate([[0.0], np.cumsum(x)]) for x in
                        (busy_s[kk], (busy_s[kk] >= FULL).astype(float), bp_s[kk], busy_s[kk] * net)]
                for w_from, w_to, cpu_from in spans:
                    lo_, hi_, c_lo = w_from - cover[0], w_to - cover[0], cpu_from - cover[0]
                    lv_busy[kk] += (sums[0][hi_] - sums[0][lo_]) / (hi_ - lo_)
                    lv_queued[kk] += (sums[1][hi_] - sums[1][lo_]) / (hi_ - lo_)
                    lv_bp[kk] += (sums[2][hi_] - sums[2][lo_]) / (hi_ - lo_)
                    lv_work[kk] += (sums[3][hi_] - sums[3][c_lo]) / (hi_ - c_lo)
            lv_busy = [v / n_valid for v in lv_busy]
            lv_bp = [v / n_valid for v in lv_bp]
            blocked_share = [_blocked_share(b, p) for b, p in zip(lv_busy, lv_bp, strict=True)]
            lv_cpu = [idle_f + (c.saturated_fraction - idle_f) * w / n_valid for w in lv_work]
            # the backlogged level was measured at share 1.0; at a lower share the line (fitted with its saturated
            # share plateaus) reads it
            at_full = share == 1.0
            busy_model = c.busy_at(model.par[i])  # at one subtask, or scaled out (a source reads differently)
            g_busy = [_busy_gauge(busy_model, v, f / n_valid if at_full else 0.0)
                      for v, f in zip(lv_busy, lv_queued, strict=True)]
            g_bp = [_gauge(r.backpressured, v) for v in lv_bp]
            g_cpu = [_gauge(r.cpu, v) for v in lv_cpu]
            g_jvm = [_gauge(r.cpu_jvm, v) for v in lv_cpu]
            if noise is None or n_sub == 0:
                per_kind = [(gb[0] * 1000.0, float(_backpressured_reading(gb[0], gp[0], sh)) * 1000.0, gc[0], gj[0])
                            for gb, gp, gc, gj, sh in zip(g_busy, g_bp, g_cpu, g_jvm, blocked_share,
                                                          strict=True)]
                # each subtask's reading is its kind's (one list per gauge, subtasks in order)
                busy_l, bp_l, cpu_l, jvm_l = ([kind_vals[kk] for kk in kinds.kind_list] if nk > 1 else
                                              [kind_vals[0]] * n_sub for kind_vals in zip(*per_kind, strict=True))
                flagged = max(lv_bp) > cfg.backpressure_threshold
            else:
                ko = kinds.kind_of
                g_all = (g_busy, g_bp, g_cpu, g_jvm)
                means = np.array([[v[0] for v in g] for g in g_all])[:, ko]  # (4 gauges, subtasks)
                sds = np.array([[v[1] for v in g] for g in g_all])[:, ko]
                windowed = np.array([gm.noise_basis == NoiseBasis.INTERVAL and g in _WINDOWED
                                     for g, gm in zip(_GAUGES, (busy_model, r.backpressured, r.cpu, r.cpu_jvm),
                                                      strict=True)])
                z = noise.window_mean_all(i, upd_slots, upd_intervals, windowed, n_sub)  # (4, subtasks)
                read = means + sds * z
                held_sd = _held_sd(r)
                # the error this deployment keeps (NaN in the profile: not calibrated); in the first window after a
                # restart it also lands on the updates from before it, for at most one window
                if held_sd is not None:
                    read += held_sd[:, None] * noise.held(i, model.deployment, n_sub)
                read = np.clip(read, 0.0, 1.0)
                read[1] = _backpressured_reading(read[0], read[1], np.asarray(blocked_share)[ko])
                read[:2] *= 1000.0
                busy_l, bp_l, cpu_l, jvm_l = read.tolist()
                # isBackPressured is instantaneous: each scrape sees a subtask flagged with P(blocked), or, not
                # blocked, with the calibrated probability that the operator it feeds, near its limit, has no
                # buffer free at that instant (`flagged_near`)
                near = r.flagged_near
                p_none = 1.0
                for s, ok, row in zip(inst, up, ii_l, strict=True):
                    if not ok:
                        continue
                    cap = max(row[o + O_CAP] * dt, 1e-12)
                    for kk, b in enumerate(kinds.split(row, o, O_BLOCKED, O_BLOCKED_LANE0)):
                        p_none *= (1.0 - min(1.0, b / cap)) ** counts[kk]
                    if near is not None and model.down[i]:
                        p_none *= (1.0 - near.probability(_utilisation(row, model.down[i], dt))) ** n_sub
                    del s
                flagged = noise.uniform(i, first_upd) < 1.0 - p_none
        else:  # no meter update the job answered with: nothing measured
            busy_l = bp_l = cpu_l = jvm_l = [nan] * n_sub
        if n_fresh:  # Flink's fresh idle and backpressure gauges read 0 through their first update: busy 1000
            w = n_fresh / (n_fresh + n_valid)
            busy_l = [1000.0 if b != b else (1.0 - w) * b + w * 1000.0 for b in busy_l]
            bp_l = [0.0 if p != p else (1.0 - w) * p for p in bp_l]
        idle_l = [max(0.0, 1000.0 - b - p) for b, p in zip(busy_l, bp_l, strict=True)]
        if rr is not None:
            x_rate = kinds.split(rr, o, O_IN, O_IN_LANE0)
            rin = rr[o + O_IN]
        else:
            x_rate = [nan] * nk
            rin = nan
        buffer = gauge_mean(o + O_BUFFER)
        lag_sub: list[float | None] = [None] * nk
        pend = c.readings.pending if noisy and is_src else None
        if pend is not None:  # Flink's reading of the pending records at each scrape, not the true backlog
            lag_read = pending_reading(ii[:, o + O_LAG], ii[:, o + O_ARRIVED], ii[:, o + O_IN],
                                       pend.buffer_records * ii[:, o + O_PAR])
            unread = ii[:, o + O_LAG] - lag_read if unread is None else unread + ii[:, o + O_LAG] - lag_read
        if is_src:  # each subtask's pending records: its partition group's, split evenly
            if pend is not None:
                true_all = ii[:, o + O_LAG]
                read_frac = np.divide(lag_read, true_all, out=np.ones_like(true_all), where=true_all > 0)
                lag0, lag_all = mean_up(ii[:, o + O_LAG_LANE0] * read_frac), mean_up(lag_read)
            else:
                lag0, lag_all = gauge_mean(o + O_LAG_LANE0), gauge_mean(o + O_LAG)
            per = [lag0 / counts[0]] + ([(lag_all - lag0) / counts[1]] if nk > 1 else [])
            lag_sub = [max(0.0, v) if v == v else None for v in per]
        cpu_sum += sum(cpu_l)
        jvm_sum += sum(jvm_l)
        n_tm += n_sub
        lag_rate = None
        if is_src:
            src_lags.append(gauge_mean(o + O_RECLAG))
            if noisy:
                lag_rate = slope(lag_read if pend is not None else ii[:, o + O_LAG], scrape * dt) \
                    if len(ii_l) >= 2 else nan
            else:
                lag_rate = slope(rows[-der_win:, o + O_LAG], dt)
        # each subtask's reading, built when an autoscaler first reads them (most snapshots nobody does)
        build = partial(_exact_subtasks if noise is None else _noisy_subtasks, x_rate, sel, busy_l, idle_l, bp_l,
                        buffer, cpu_l, jvm_l, lag_sub, kinds.kind_list)
        operators[name] = LazySubtasksOperatorMetrics.create(
            build,
            parallelism=model.par[i],
            records_in_per_s=rin,
            records_out_per_s=rin * sel,
            busy_ms_per_s=sum(busy_l) / n_sub,
            idle_ms_per_s=sum(idle_l) / n_sub,
            backpressured_ms_per_s=sum(bp_l) / n_sub,
            is_backpressured=flagged,
            input_buffer_usage=buffer,
            cpu_load=sum(cpu_l) / n_sub,
            cpu_jvm_load=sum(jvm_l) / n_sub,
            cpu_share=share,
            lag=(lag_all if pend is not None else gauge_mean(o + O_LAG)) if is_src else None,
            lag_rate=lag_rate,
            input_rate=(rr[o + O_ARRIVED] if rr is not None else nan) if is_src else None,
            # ND_max is where the subtasks run now (a placement fact, not a sampled Flink gauge)
            network_delay_max_ms=now_l[o + O_NDMAX] if model.network else nan,
        )
    if noisy:
        job_lag_read = ii[:, J_LAG] if unread is None else ii[:, J_LAG] - unread
        job_lag_rate = slope(job_lag_read, scrape * dt) if len(ii_l) >= 2 else nan
    else:
        job_lag_rate = slope(rows[-der_win:, J_LAG], dt)
    why: dict[str, str] = {}
    if not any(up):
        why = {"*": "job not running (rescale or restart) at every scrape of the window"}
    elif not has_rate:
        why = {str(m): "fewer than two scrapes in the window" for m in (
            Metric.RECORDS_IN, Metric.RECORDS_OUT, Metric.THROUGHPUT, Metric.INPUT_RATE)}
    if not n_valid and "*" not in why:  # the job answered, but no meter update of its tasks is in the window yet
        gone = (Metric.CPU, Metric.CPU_JVM, Metric.IS_BACKPRESSURED) if n_fresh else (
            Metric.BUSY, Metric.BACKPRESSURED, Metric.CPU, Metric.CPU_JVM, Metric.IS_BACKPRESSURED)
        for m in gone:
            why[str(m)] = "no meter update of the running tasks past their first in the window yet"
    known = [v for v in src_lags if v == v]
    if len(known) < len(src_lags):
        why[str(Metric.LATENCY_KAFKA)] = "a source has not emitted since its restart"
    # the sink's histogram counters: rate() over the scrapes the job answered (exact: the whole window)
    e2e_rows = slice(r_lo, r_hi) if any(up) and has_rate else slice(0, 0)
    e2e_mean = _ratio(float(rows[e2e_rows, J_E2E_SUM].sum()), float(rows[e2e_rows, J_E2E_COUNT].sum()))
    e2e_hist = model.e2e_array(len(rows))[e2e_rows].sum(axis=0)
    e2e_p95 = min(histogram_quantile(0.95, e2e_hist), _nanmax(rows[e2e_rows, J_E2E_MAX]))
    if math.isnan(e2e_mean) and "*" not in why:
        why[str(Metric.LATENCY_E2E_MEAN)] = why[str(Metric.LATENCY_E2E_P95)] = \
            "no record reached the sink in the window"
    return MetricsSnapshot(
        t=t,
        window_s=window_s,
        topology=topo,
        operators=operators,
        kafka_lag=mean_up(ii[:, J_LAG] - unread) if unread is not None else gauge_mean(J_LAG),
        kafka_lag_rate=job_lag_rate,
        input_rate=rr[J_ARRIVED] if rr is not None else nan,
        throughput=rr[J_TAKEN] if rr is not None else nan,
        latency_s=sum(known) / len(known) if known and len(known) == len(src_lags) else nan,
        latency_e2e_s=e2e_mean,
        latency_e2e_p95_s=e2e_p95,
        taskmanagers=int(now_l[J_TMS]),
        cpu_load=cpu_sum / n_tm if n_tm else nan,
        cpu_jvm_load=jvm_sum / n_tm if n_tm else nan,
        interarrival_s=interarrival,
        why_missing=why,
    )


def timeseries(model: SimModel, blind: Sequence[tuple[float, float]] = ()) -> pa.Table:
    """The run's series in the run record's long format, one point per `record_every_s`.

    Rates, busy/backpressured time and CPU are interval means of the true values; lag, totals,
    parallelism, registered task managers, CPU share and state are the values at the interval's end;
    latency_kafka is the sources' event-time lag gauge at the interval's end (as the local export
    reads it, NaN while no source subtask has emitted since a restart), latency_kafka_max the
    interval's oldest record taken (or waiting, while nothing is taken). The end-to-end latencies
    come from the sink's histogram over the interval and are NaN (a gap) in an interval in which no
    record reached the sink.
    """
    rows = model.rows_array()
    if len(rows) == 0:
        return empty_timeseries()
    dt = model.dt
    cfg = model.cfg
    costs = model.costs
    g = max(1, int(round(cfg.record_every_s / dt)))
    starts = np.arange(0, len(rows), g)
    ends = np.minimum(starts + g, len(rows)) - 1
    counts = (ends - starts + 1).astype(float)
    ts = (ends + 1) * dt

    def mean(col: np.ndarray) -> np.ndarray:
        return np.add.reduceat(col, starts) / counts

    def last(col: np.ndarray) -> np.ndarray:
        return col[ends]

    e2e_n = np.add.reduceat(rows[:, J_E2E_COUNT], starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        e2e_mean = np.where(e2e_n > 0, np.add.reduceat(rows[:, J_E2E_SUM], starts) / e2e_n, np.nan)
    e2e_hist = np.add.reduceat(model.e2e_array(), starts, axis=0)
    # interpolating inside a bucket may overshoot the interval's oldest record: a quantile is at most the max
    e2e_max = np.fmax.reduceat(rows[:, J_E2E_MAX], starts)
    zeros = np.zeros(len(ts))
    src_cols = [JOB_COLS + i * OP_COLS + O_RECLAG for i in range(model.n) if model.is_src[i]]
    # the mean over sources; NaN while any source has not emitted since a restart
    reclag = rows[:, src_cols].mean(axis=1) if src_cols else np.full(len(rows), np.nan)
    parts: list[tuple[str, str, np.ndarray]] = [
        (Metric.INPUT_RATE, "", mean(rows[:, J_ARRIVED]) / dt),
        (Metric.THROUGHPUT, "", mean(rows[:, J_TAKEN]) / dt),
        (Metric.LAG, "", last(rows[:, J_LAG])),
        (Metric.LATENCY_KAFKA, "", last(reclag)),
        (Metric.LATENCY_KAFKA_MAX, "", np.maximum.reduceat(rows[:, J_LATENCY_MAX], starts)),
        (Metric.LATENCY_E2E_MEAN, "", e2e_mean),
        (Metric.LATENCY_E2E_P50, "", np.minimum(histogram_quantiles(0.50, e2e_hist), e2e_max)),
        (Metric.LATENCY_E2E_P95, "", np.minimum(histogram_quantiles(0.95, e2e_hist), e2e_max)),
        (Metric.LATENCY_E2E_P99, "", np.minimum(histogram_quantiles(0.99, e2e_hist), e2e_max)),
        (Metric.LATENCY_E2E_MAX, "", e2e_max),
        (Metric.PROCESSING, "", mean(rows[:, J_PROCESSING])),
        (Metric.PRODUCED_TOTAL, "", last(rows[:, J_PRODUCED])),
        (Metric.PROCESSED_TOTAL, "", last(rows[:, J_PROCESSED])),
        (Metric.SKIPPED_TOTAL, "", zeros + SIM_SKIPPED_TOTAL),
        (Metric.EXPIRED_TOTAL, "", last(rows[:, J_EXPIRED])),
        (Metric.TASKMANAGERS, "", last(rows[:, J_TMS])),
    ]
    tm_total = np.zeros(len(rows))
    cpu_total = np.zeros(len(rows))
    jvm_total = np.zeros(len(rows))
    tm_cores = costs.tm_cores
    for i, name in enumerate(model.names):
        o = JOB_COLS + i * OP_COLS
        c = costs.ops[i]
        par = rows[:, o + O_PAR]
        share = rows[:, o + O_SHARE]
        # mean subtask busy fraction; the busiest subtask's extra load from skew is ignored here
        cap = np.maximum(rows[:, o + O_CAP] * dt * par, 1e-12)
        busy = np.minimum(1.0, rows[:, o + O_IN] / cap) * rows[:, o + O_BUSY_F]
        bp = np.minimum(1.0 - busy, rows[:, o + O_BLOCKED] / cap)
        quota = np.maximum(share, 1e-9) * tm_cores
        idle_f = np.minimum(1.0, c.idle_fraction * tm_cores / quota)
        work = busy if model.net_loss_burns_cpu else busy * rows[:, o + O_NET]  # waiting on the network: no CPU
        cpu = idle_f + (c.saturated_fraction - idle_f) * work
        jvm = np.clip(c.readings.cpu_jvm.offset + c.readings.cpu_jvm.gain * cpu, 0.0, 1.0)
        tm_total += par
        cpu_total += cpu * par
        jvm_total += jvm * par
        parts += [
            (Metric.PARALLELISM, name, last(par)),
            (Metric.CPU_SHARE, name, last(share)),
            (Metric.RECORDS_IN, name, mean(rows[:, o + O_IN]) / dt),
            (Metric.RECORDS_OUT, name, mean(rows[:, o + O_OUT]) / dt),
            (Metric.BUSY, name, mean(busy) * 1000.0),
            (Metric.BACKPRESSURED, name, mean(bp) * 1000.0),
            (Metric.CPU, name, mean(cpu)),
            (Metric.CPU_JVM, name, mean(jvm)),
            (Metric.BUFFER_USAGE, name, mean(rows[:, o + O_BUFFER])),
            (Metric.STATE_BYTES, name, last(rows[:, o + O_STATE])),
        ]
        if model.is_src[i]:
            parts.append((Metric.LAG, name, last(rows[:, o + O_LAG])))
        if model.network:
            parts.append((Metric.NETWORK_DELAY_MAX, name, last(rows[:, o + O_NDMAX])))
    parts += [
        (Metric.CPU, "", mean(cpu_total / tm_total)),
        (Metric.CPU_JVM, "", mean(jvm_total / tm_total)),
    ]
    m = len(ts)
    metrics = list(dict.fromkeys(str(p[0]) for p in parts))
    operators = list(dict.fromkeys(p[1] for p in parts))
    all_ts = np.tile(ts, len(parts))
    metric_codes = np.repeat([metrics.index(str(p[0])) for p in parts], m)
    values = np.concatenate([p[2] for p in parts]).astype(float)
    # a NaN inside a series is a gap marker (harness.analysis.metrics: the time-weighted statistics treat it
    # as a gap, never holding the value from before it, like the local export's `fill_gaps`); a series
    # never measured at all is absent from the record, not zero
    measured = np.isfinite(values).reshape(len(parts), m).any(axis=1)
    keep = np.repeat(measured, m)
    if blind:  # what Prometheus did not scrape is absent, not zero (the harness' own series stay)
        scraped = ~np.isin(metric_codes, [metrics.index(str(h)) for h in HARNESS_SERIES if str(h) in metrics])
        for a, b in blind:
            keep &= ~(scraped & (all_ts > a) & (all_ts <= b))
    return timeseries_table(
        ts=all_ts[keep],
        metric=(metric_codes[keep], metrics),
        operator=(np.repeat([operators.index(p[1]) for p in parts], m)[keep], operators),
        subtask=np.full(int(keep.sum()), -1, dtype=np.int32),
        value=values[keep],
    )
