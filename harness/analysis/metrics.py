"""The metric core: pure functions over numpy arrays, no I/O.

Every engine (the pandas cross-check and the PySpark jobs) implements the same
definitions; this module is the reference and the tests pin it down with
hand-made series. Conventions shared by all engines:

- A series is a step function: each measured sample holds until the next
  sample, the last until the run's end (the latest timestamp of the run).
- A gap is a gap: a NaN sample marks the series as unknown from its time to the
  next sample. That time counts in neither the area nor the span of the
  time-weighted statistics (mean, sum, span), so an outage is never covered by
  the value from before it (METRICS.md: "a gap in the samples is a gap, never
  the last value held"). The backends write such markers where a measurement
  was missing (a Prometheus range query without a point at a step, a snapshot
  that could not be measured, an interval without records for a latency).
  Max, min, last and percentiles are over the measured samples.
- SPEC provisioning, control-step QoS and excess time take the measured
  samples only (an unmeasured resource count holds its last value there: it
  does not change without an action).
- Percentiles are over samples (linear interpolation, numpy's default and
  Spark's exact `percentile`), as the thesis aggregated equally spaced
  Prometheus samples (Kanis 2023, ch. 5.3, after Cardellini et al.).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# ceil() of a demand that is an exact multiple of a capacity must not round up on float noise
CEIL_EPS = 1e-9


def step_widths(ts: np.ndarray, end: float | None = None) -> np.ndarray:
    """Duration each sample holds: up to the next sample (measured or a gap marker), the last one up to `end`."""
    ts = np.asarray(ts, dtype=float)
    if len(ts) == 0:
        return ts
    stop = ts[-1] if end is None else max(float(end), float(ts[-1]))
    return np.diff(np.append(ts, stop))


def _clean(ts: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t_arr = np.asarray(ts, dtype=float)
    v_arr = np.asarray(values, dtype=float)
    keep = ~np.isnan(v_arr)
    t_arr, v_arr = t_arr[keep], v_arr[keep]
    order = np.argsort(t_arr, kind="stable")
    return t_arr[order], v_arr[order]


def _sorted(ts: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    t_arr = np.asarray(ts, dtype=float)
    v_arr = np.asarray(values, dtype=float)
    order = np.argsort(t_arr, kind="stable")
    return t_arr[order], v_arr[order]


def held_area(ts: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
              end: float | None = None) -> tuple[float, float]:
    """(area, span) of a step function with gaps: value x duration and the duration, summed over the
    measured samples; a NaN sample's duration (a gap) counts in neither."""
    ts_s, v = _sorted(ts, values)
    if len(ts_s) == 0:
        return 0.0, 0.0
    widths = step_widths(ts_s, end)
    ok = ~np.isnan(v)
    return float((widths[ok] * v[ok]).sum()), float(widths[ok].sum())


def time_weighted_mean(ts: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
                       end: float | None = None) -> float:
    """Mean of a step function over the time it was measured, from its first sample to `end`
    (thesis ch. 5.3: avg(TM) over time).

    Irregular steps weigh by their duration, so a value held for a minute counts
    twelve times as much as one held for five seconds; a gap (from a NaN sample to
    the next sample) counts for nothing. Without any measured duration (a single
    sample, or all at one instant) the plain mean of the measured values is returned.
    """
    _, v = _sorted(ts, values)
    measured_v = v[~np.isnan(v)]
    if len(measured_v) == 0:
        return math.nan
    area, span = held_area(ts, values, end)
    if span <= 0:
        return float(measured_v.mean())
    return area / span


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """Sample percentile, q in [0, 100], linear interpolation; NaN for no samples."""
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    if len(arr) == 0:
        return math.nan
    return float(np.percentile(arr, q))


# ---------------------------------------------------------------- convergence


@dataclass(frozen=True)
class Stage:
    """One stage of the convergence pattern (scaled seconds since the run started)."""

    name: str
    start_s: float
    end_s: float

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class StageConvergence:
    """Convergence in one stage (Kanis 2023, ch. 5.3 "Convergence time")."""

    stage: str
    start_s: float
    end_s: float
    actions: int
    converged: bool
    time_s: float  # stage start -> last action in the stage; NaN when not converged
    last_action_s: float  # absolute time of the stage's last action; NaN without actions


def convergence(stage: Stage, action_ts: Iterable[float], settle_s: float) -> StageConvergence:
    """Time from the stage's start to its last scaling action, if the autoscaler then stays put.

    "Stays put" needs evidence: the stage must go on for at least `settle_s`
    after the last action (by default one cool-down plus one loop period, so the
    autoscaler had at least one chance to act again and did not). An autoscaler
    still acting within `settle_s` of the stage's end is "not converged" (the
    thesis prints "40+" for its 40-minute stages). One that never acts in the
    stage converged at once: time 0, 0 actions.
    """
    inside = sorted(t for t in action_ts if stage.start_s <= t < stage.end_s)
    if not inside:
        return StageConvergence(stage.name, stage.start_s, stage.end_s, 0, True, 0.0, math.nan)
    last = inside[-1]
    converged = stage.end_s - last >= settle_s
    return StageConvergence(
        stage.name, stage.start_s, stage.end_s, len(inside), converged,
        (last - stage.start_s) if converged else math.nan, last,
    )


# ---------------------------------------------------------------- SPEC (Gesscale sec. V)


def ideal_resources(rate: np.ndarray, coefficients: Mapping[str, float], min_parallelism: int = 1) -> np.ndarray:
    """Least task managers that carry `rate` source records/s (Gesscale sec. V's "ideal" scaler).

    `coefficients[op]` is the operator's demand per source record divided by the
    per-subtask capacity (see `profile.demand_coefficients`); each operator needs
    ceil(rate * coefficient) subtasks, at least `min_parallelism`.
    """
    rate = np.asarray(rate, dtype=float)
    total = np.zeros_like(rate)
    for coef in coefficients.values():
        total += np.maximum(float(min_parallelism), np.ceil(rate * coef - CEIL_EPS))
    return total


@dataclass(frozen=True)
class Provisioning:
    """SPEC RG's elasticity metrics as Gesscale reports them (sec. V, Table III)."""

    accuracy_u: float  # sum of under-provisioned area / T  (resources)
    accuracy_o: float  # sum of over-provisioned area / T
    timeshare_u: float  # % of T under-provisioned
    timeshare_o: float  # % of T over-provisioned
    period_s: float  # T


def merge_steps(ts_a: np.ndarray, a: np.ndarray, ts_b: np.ndarray, b: np.ndarray,
                end: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two step functions on the union of their sample times, from the first time both are known.

    Returns (ts, a(ts), b(ts), widths) with widths up to `end` for the last point.
    """
    ts_a, a = _clean(ts_a, a)
    ts_b, b = _clean(ts_b, b)
    if len(ts_a) == 0 or len(ts_b) == 0:
        empty = np.array([], dtype=float)
        return empty, empty, empty, empty
    grid = np.union1d(ts_a, ts_b)
    grid = grid[grid >= max(ts_a[0], ts_b[0])]
    ia = np.searchsorted(ts_a, grid, side="right") - 1
    ib = np.searchsorted(ts_b, grid, side="right") - 1
    return grid, a[ia], b[ib], step_widths(grid, end)


def provisioning(ts_ideal: np.ndarray, ideal: np.ndarray, ts_actual: np.ndarray, actual: np.ndarray,
                 end: float | None = None) -> Provisioning:
    """accuracyU/O = area where demand exceeds supply (or vice versa) / T; timeshare = time share in %."""
    _, i, a, w = merge_steps(ts_ideal, ideal, ts_actual, actual, end)
    period = float(w.sum())
    if period <= 0:
        return Provisioning(math.nan, math.nan, math.nan, math.nan, 0.0)
    under = np.maximum(0.0, i - a)
    over = np.maximum(0.0, a - i)
    return Provisioning(
        accuracy_u=float((under * w).sum() / period),
        accuracy_o=float((over * w).sum() / period),
        timeshare_u=float(100.0 * w[i > a].sum() / period),
        timeshare_o=float(100.0 * w[a > i].sum() / period),
        period_s=period,
    )


def replica_minutes(ts: np.ndarray, resources: np.ndarray, end: float | None = None) -> float:
    """Gesscale's cost: one unit per replica per minute (area under the measured resource curve / 60)."""
    if not (~np.isnan(np.asarray(resources, dtype=float))).any():
        return math.nan
    return held_area(ts, resources, end)[0] / 60.0


# ---------------------------------------------------------------- SASO (De Matteis & Mencagli, sec. 5.3)
# QoS violations, excess time and cost up to Pt are the papers' own scores: harness.analysis.papers


def amplitude(changes: Iterable[tuple[Mapping[str, float], Mapping[str, float]]]) -> float:
    """Mean Euclidean distance between the configuration vectors before and after each reconfiguration.

    De Matteis & Mencagli sec. 5.3.4 (settling time): u(tau) vs u(tau-1); an
    operator missing on one side counts as unchanged.
    """
    dists = []
    for before, after in changes:
        keys = set(before) | set(after)
        d2 = sum((float(after.get(k, before.get(k, 0.0))) - float(before.get(k, after.get(k, 0.0)))) ** 2
                 for k in keys)
        dists.append(math.sqrt(d2))
    return float(np.mean(dists)) if dists else math.nan


# ---------------------------------------------------------------- repetitions


@dataclass(frozen=True)
class MeanCI:
    mean: float
    half_width: float  # of the confidence interval; NaN for n < 2
    n: int

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width


def t_factor(n: int, level: float = 0.95) -> float:
    """Student-t quantile for a two-sided `level` interval with n - 1 degrees of freedom."""
    if n < 2:
        return math.nan
    # here, not at the top: `bench run` summarises with this module without scipy. The t quantile from
    # scipy.special (the function scipy.stats.t.ppf evaluates, so the same number): importing
    # scipy.stats costs seconds of docstring processing per process (an analysis worker, `bench compare`)
    from scipy import special

    return float(special.stdtrit(n - 1, 0.5 + level / 2.0))


def mean_ci(values: Iterable[float], level: float = 0.95) -> MeanCI:
    """Mean and t-distribution confidence interval over repetitions (NaN values ignored)."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    arr = arr[~np.isnan(arr)]
    n = len(arr)
    if n == 0:
        return MeanCI(math.nan, math.nan, 0)
    if n == 1:
        return MeanCI(float(arr[0]), math.nan, 1)
    sd = float(arr.std(ddof=1))
    return MeanCI(float(arr.mean()), t_factor(n, level) * sd / math.sqrt(n), n)


# A run that could not offer more than this fraction of its pattern's records is flagged (summary, report).
SHORTFALL_FLAG = 0.01


def load_shortfall(skipped: float, expired: float, pattern_records: float | None) -> float:
    """Share of the pattern's records never offered to the job: generator skips + records expired unread.

    NaN when either count or the pattern's total is unknown (unknown is not zero)."""
    total = pattern_records if pattern_records is not None else math.nan
    return (skipped + expired) / total if total > 0 else math.nan


def fmt_latency(seconds: float, ci: float = math.nan) -> str:
    """A latency in ms below 1 s, else in s (three significant figures; '+- ci' in the same unit)."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    scale, unit = (1000.0, "ms") if abs(float(seconds)) < 1.0 else (1.0, "s")
    text = f"{float(seconds) * scale:.3g} {unit}"
    if ci is not None and not math.isnan(ci) and ci > 0:
        text += f" ± {float(ci) * scale:.3g} {unit}"
    return text


def fmt_share(value: float, ci: float = math.nan) -> str:
    """A fraction as a percentage ("0.52 %")."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    text = f"{100.0 * float(value):.3g} %"
    if ci is not None and not math.isnan(ci) and ci > 0:
        text += f" ± {100.0 * float(ci):.3g} %"
    return text
