"""The seed papers' scores of one run, defined once for both analysis engines.

Pure functions over one run's job-level series (plus per-operator parallelism and CPU share);
`score_run` is what the pandas engine calls per run and what the Spark engine runs per run
group (`applyInPandas`), so the two cannot define a paper's metric differently.

- MEAD (Russo Russo et al. 2021, sec. VII): the response time is the per-record end-to-end
  latency (`Metric.LATENCY_E2E_*`); its mean over the run is the record-weighted mean of the
  per-interval means, its p95 the 95th percentile of the mixture of the per-interval
  distributions (`mixture_quantile`). A target is met by the statistic it names
  (`slo.latency_statistic`: Tab. I is the mean, Tab. II the p95) and is unknown (NaN) when
  the response time was not measured.
- MPC's SASO accuracy (De Matteis & Mencagli sec. 5.3.3): QoS violations per control step
  (the loop period). A throughput-based strategy violates when the step's records processed /
  records received < theta_th (0.95), a latency-based one when the step's mean response time
  exceeds theta_lat (`slo.qos` says which; "both" applies both). A step with a rescale's
  downtime is judged like any other, as the paper's steps with a migration are (its Fig. 10
  and 15 count the throughput drop, and the catch-up after it is the zig-zag above 1 that is
  no violation); how many violations fall on such steps is reported apart
  (`saso_violations_in_rescale_steps`), since Flink stops where FastFlow's migration does not.
  A step whose test has no measured input is not judged.
- Gesscale (Arkian et al. 2021, sec. V-A d): excess computation time (Pt - It) / T, with T the
  trace's length (input start to the moment it stops), It = T and Pt the time the last record
  was processed (lag drained; past the run's end, the final backlog at the final
  configuration's capacity). Cost is one unit per replica per minute of execution, i.e. up to
  Pt: a scaler that ends the trace with a backlog pays for the replicas that still work it off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from harness.analysis import metrics as mx
from harness.vocabulary import LATENCY_E2E, Metric

QosTest = Literal["throughput", "latency", "both"]
LatencyStatistic = Literal["mean", "p95"]

# The series `score_run` reads: job level, then per operator.
JOB_METRICS: tuple[Metric, ...] = (Metric.INPUT_RATE, Metric.THROUGHPUT, Metric.LAG, Metric.TASKMANAGERS,
                                   Metric.PROCESSING, *LATENCY_E2E)
OPERATOR_METRICS: tuple[Metric, ...] = (Metric.PARALLELISM, Metric.CPU_SHARE)

# Per-interval quantiles of the e2e latency and the probability each one stands for.
E2E_KNOTS: tuple[tuple[float, Metric], ...] = (
    (0.5, Metric.LATENCY_E2E_P50), (0.95, Metric.LATENCY_E2E_P95), (0.99, Metric.LATENCY_E2E_P99),
    (1.0, Metric.LATENCY_E2E_MAX),
)

SCORE_COLUMNS = [
    "mead_rt_mean", "mead_rt_p95", "mead_rt_target", "mead_rt_ratio", "mead_target_met",
    "saso_qos_violations", "saso_control_steps", "saso_qos_violation_pct", "saso_violations_in_rescale_steps",
    "alloc_cores_avg", "spec_excess_time", "spec_cost_replica_min", "spec_processed_in_trace",
    "spec_trace_s",
]


@dataclass(frozen=True)
class PaperSpec:
    """What scoring needs to know about a run besides its series."""

    run_start: float
    run_end: float
    control_step_s: float  # the loop period: MPC's control step
    qos: QosTest = "both"
    throughput_ratio: float = 0.95  # theta_th
    latency_slo_s: float = 5.0  # theta_lat, MEAD's R_max
    latency_statistic: LatencyStatistic = "mean"
    drain_rate: float = math.nan  # source records/s the final configuration processes


# ---------------------------------------------------------------- per-record response time


def record_mean(weights: np.ndarray, means: np.ndarray) -> float:
    """Mean over records of per-interval means: intervals weigh by the records they hold."""
    w, m = np.asarray(weights, dtype=float), np.asarray(means, dtype=float)
    keep = np.isfinite(w) & np.isfinite(m) & (w > 0)
    return float((w[keep] * m[keep]).sum() / w[keep].sum()) if keep.any() else math.nan


def mixture_quantile(q: float, weights: np.ndarray, knots: Mapping[float, np.ndarray]) -> float:
    """The q-quantile over all records, from each interval's weight and quantiles.

    Each interval's latency distribution is taken as piecewise linear through (0, 0) and its
    known quantiles {probability: value} (p50, p95, p99, max); the run's distribution is
    their mixture weighted by records. Exact when every interval's distribution is; an
    interval without a measured p95 is left out.
    """
    w = np.asarray(weights, dtype=float)
    probs = sorted(knots)
    values = np.column_stack([np.asarray(knots[p], dtype=float) for p in probs])
    p95 = min(range(len(probs)), key=lambda k: abs(probs[k] - 0.95))
    keep = np.isfinite(w) & (w > 0) & np.isfinite(values[:, p95])
    if not keep.any():
        return math.nan
    w, values = w[keep] / w[keep].sum(), values[keep]
    mix = _Mixture.of(w, values, np.asarray(probs, dtype=float))
    grid = np.unique(mix.x[np.isfinite(mix.x)])
    # F(g) only where a binary search over the grid needs it (F is non-decreasing: the first k with
    # F(grid[k]) >= q is found with ~log2(len(grid)) evaluations, not len(grid) x intervals)
    lo_k, hi_k = 0, len(grid)
    while lo_k < hi_k:
        mid = (lo_k + hi_k) // 2
        if mix.cdf(float(grid[mid]), "right") < q - 1e-12:
            lo_k = mid + 1
        else:
            hi_k = mid
    k = min(lo_k, len(grid) - 1)
    left_k = mix.cdf(float(grid[k]), "left")  # F(g-): differs from F(g) where an interval has an atom at g
    if k == 0 or left_k < q - 1e-12:  # the first point, or an atom reaching past q
        return float(grid[k])
    lo, hi = mix.cdf(float(grid[k - 1]), "right"), left_k
    return float(grid[k - 1] + (q - lo) / (hi - lo) * (grid[k] - grid[k - 1])) if hi > lo else float(grid[k])


class _Mixture:
    """The record-weighted mixture of the intervals' piecewise-linear CDFs through (x, p).

    Each interval's x may repeat (an atom: several quantiles at one value); p[0] = 0 at x[0] and
    p[-1] = 1. The knots are held padded in one matrix so that F at a point is a few array operations
    over all intervals; the terms are added in interval order (`np.add.accumulate` is sequential), so F
    is the same number as summing the intervals' CDFs one by one.
    """

    def __init__(self, weights: np.ndarray, x: np.ndarray, p: np.ndarray, n: np.ndarray):
        self.w, self.x, self.p, self.n = weights, x, p, n  # x padded with +inf, p with 1; n knots per row
        self.rows = np.arange(len(x))

    @staticmethod
    def of(weights: np.ndarray, values: np.ndarray, probs: np.ndarray) -> _Mixture:
        """Each row's knots: (0, 0), then its measured quantiles (values made non-decreasing, negatives
        clipped to 0) in probability order, and - when no max was measured - (last value, 1): the tail
        ends at the last known quantile."""
        rows, k = values.shape
        ok = np.isfinite(values)
        running = np.fmax.accumulate(np.where(ok, np.maximum(values, 0.0), np.nan), axis=1)  # NaN: not a knot
        order = np.argsort(~ok, axis=1, kind="stable")  # each row's measured quantiles first, in order
        count = ok.sum(axis=1)
        body = np.arange(k)[None, :] < count[:, None]
        x = np.full((rows, k + 2), np.inf)
        p = np.ones((rows, k + 2))
        x[:, 0], p[:, 0] = 0.0, 0.0
        x[:, 1:k + 1] = np.where(body, np.take_along_axis(running, order, axis=1), np.inf)
        p[:, 1:k + 1] = np.where(body, probs[order], 1.0)
        r = np.arange(rows)
        tail = p[r, count] < 1.0
        x[r[tail], count[tail] + 1] = x[r[tail], count[tail]]
        return _Mixture(weights, x, p, count + 1 + tail)

    def cdf(self, g: float, side: Literal["left", "right"]) -> float:
        """F(g) (right) or its left limit F(g-)."""
        # last x_j <= g (right) or < g (left): the last of repeats (the padding is +inf, never counted)
        j = ((self.x <= g) if side == "right" else (self.x < g)).sum(axis=1) - 1
        below = j < 0
        j = np.clip(j, 0, self.n - 1)
        nxt = np.minimum(j + 1, self.n - 1)
        xj, xn = self.x[self.rows, j], self.x[self.rows, nxt]
        pj, pn = self.p[self.rows, j], self.p[self.rows, nxt]
        rising = (nxt > j) & (xn > xj)
        frac = np.where(rising, (g - xj) / np.where(rising, xn - xj, 1.0), 0.0)
        each = np.where(below, 0.0, pj + np.clip(frac, 0.0, 1.0) * (pn - pj))
        return float(np.add.accumulate(self.w * each)[-1])


# ---------------------------------------------------------------- MPC's SASO accuracy


@dataclass(frozen=True)
class Accuracy:
    violations: int
    steps: int  # control steps judged
    in_rescale_steps: int  # violations on steps during which the job was down for a rescale


def control_step_accuracy(table: pd.DataFrame, spec: PaperSpec) -> Accuracy:
    """QoS violations over control steps (sec. 5.3.3); `table` is indexed by sample time with
    columns input, throughput, latency (per-record mean) and processing (1 up, 0 down)."""
    if table.empty:
        return Accuracy(0, 0, 0)
    step = np.floor((table.index.to_numpy(float) - spec.run_start) / spec.control_step_s)
    steps = table.groupby(step).mean()
    inp, thr = steps["input"], steps["throughput"]
    ratio_known = (inp > 0) & thr.notna()
    ratio_bad = ratio_known & (thr / inp.where(inp > 0) < spec.throughput_ratio)
    lat_known = steps["latency"].notna()
    lat_bad = lat_known & (steps["latency"] > spec.latency_slo_s)
    if spec.qos == "throughput":
        judged, bad = ratio_known, ratio_bad
    elif spec.qos == "latency":
        judged, bad = lat_known, lat_bad
    else:
        judged, bad = ratio_known | lat_known, ratio_bad | lat_bad
    down = steps["processing"].notna() & (steps["processing"] < 1.0 - 1e-9)
    return Accuracy(int((bad & judged).sum()), int(judged.sum()), int((bad & judged & down).sum()))


# ---------------------------------------------------------------- Gesscale's excess time and cost


@dataclass(frozen=True)
class Execution:
    trace_s: float  # T: from the first sample to the moment the input stops (the run, if it never does)
    excess_s: float  # Pt - It
    end_s: float  # Pt, absolute: when the last record was (or would be) processed


def execution(inp: tuple[np.ndarray, np.ndarray] | None, lag: tuple[np.ndarray, np.ndarray] | None,
              spec: PaperSpec, drained_below: float = 1.0) -> Execution:
    """When the input stopped, and when its last record was processed (sec. V-A d)."""
    if lag is None or len(lag[0]) == 0:
        return Execution(math.nan, math.nan, math.nan)
    ts_l, lag_v = lag
    stop = math.nan
    if inp is not None and len(inp[0]):
        busy = np.nonzero(inp[1] > 0)[0]
        if len(busy) and busy[-1] + 1 < len(inp[0]):
            stop = float(inp[0][busy[-1] + 1])
    trace_end = spec.run_end if math.isnan(stop) else stop
    trace_s = trace_end - spec.run_start
    if not math.isnan(stop):
        drained = (ts_l >= stop) & (lag_v <= drained_below)
        if drained.any():
            done = float(ts_l[drained][0])
            return Execution(trace_s, done - stop, done)
    lag_end = float(lag_v[-1])
    tail = 0.0 if lag_end <= drained_below else (lag_end / spec.drain_rate if spec.drain_rate > 0 else math.nan)
    end = spec.run_end + tail
    return Execution(trace_s, end - trace_end, end)


def cost_replica_minutes(tm: tuple[np.ndarray, np.ndarray] | None, end_s: float, run_end: float) -> float:
    """Replica-minutes up to `end_s` (Pt); past the run's end at the final number of replicas."""
    if tm is None or len(tm[0]) == 0 or math.isnan(end_s):
        return math.nan
    ts, values = tm
    stop = min(end_s, run_end)
    widths = mx.step_widths(ts, run_end)
    upto = np.clip(stop - ts, 0.0, widths)
    area = float((values * upto).sum())
    return (area + float(values[-1]) * max(0.0, end_s - run_end)) / 60.0


# ---------------------------------------------------------------- one run


class _JobSeries:
    """A run's job-level (operator "") samples split by metric once: `score_run` reads a dozen series,
    and selecting each from the whole frame compared every row's strings a dozen times."""

    def __init__(self, samples: pd.DataFrame):
        job = samples[samples["operator"] == ""]
        self.by_metric = {str(m): g for m, g in job.groupby("metric", sort=False)}  # groups keep row order

    def get(self, metric: Metric) -> tuple[np.ndarray, np.ndarray] | None:
        """(sample times, values) of a job-level series, repeated times averaged; None when never measured."""
        g = self.by_metric.get(str(metric))
        if g is None:
            return None
        g = g[np.isfinite(g["value"].to_numpy(float))]
        if g.empty:
            return None
        g = g.groupby("ts", sort=True)["value"].mean()
        return g.index.to_numpy(float), g.to_numpy(float)


def _aligned(job: _JobSeries, columns: Mapping[str, Metric]) -> pd.DataFrame:
    """Job-level series side by side on their union of sample times (NaN where one has no sample)."""
    frames = []
    for name, metric in columns.items():
        got = job.get(metric)
        frames.append(pd.Series(got[1] if got else [], index=got[0] if got else [], name=name, dtype=float))
    return pd.concat(frames, axis=1).sort_index()


def allocated_cores(samples: pd.DataFrame, run_end: float) -> float:
    """Time-weighted sum over operators of parallelism x CPU share (MPC's *-Power resources, MEAD's CPU)."""
    ops = samples[samples["operator"] != ""]
    par = ops[ops["metric"] == Metric.PARALLELISM].pivot_table(index="ts", columns="operator", values="value")
    if par.empty:
        return math.nan
    share = ops[ops["metric"] == Metric.CPU_SHARE].pivot_table(index="ts", columns="operator", values="value")
    share = share.reindex(index=par.index, columns=par.columns).ffill().fillna(1.0)
    cores = (par.ffill() * share).sum(axis=1, min_count=1).dropna()
    return mx.time_weighted_mean(cores.index.to_numpy(float), cores.to_numpy(float), run_end)


def score_run(samples: pd.DataFrame, spec: PaperSpec) -> dict[str, float]:
    """Every paper score of one run from its samples (columns ts, metric, operator, value)."""
    out: dict[str, float] = dict.fromkeys(SCORE_COLUMNS, math.nan)
    out["mead_rt_target"] = spec.latency_slo_s
    samples = samples[samples["value"].notna()]
    job = _JobSeries(samples)
    table = _aligned(job, {"input": Metric.INPUT_RATE, "throughput": Metric.THROUGHPUT,
                               "latency": Metric.LATENCY_E2E_MEAN, "processing": Metric.PROCESSING,
                               **{f"q{p}": m for p, m in E2E_KNOTS}})
    if not table.empty:
        ts = table.index.to_numpy(float)
        records = table["throughput"].to_numpy(float) * mx.step_widths(ts, spec.run_end)
        out["mead_rt_mean"] = record_mean(records, table["latency"].to_numpy(float))
        out["mead_rt_p95"] = mixture_quantile(0.95, records, {p: table[f"q{p}"].to_numpy(float) for p, _ in E2E_KNOTS})
        named = out["mead_rt_mean"] if spec.latency_statistic == "mean" else out["mead_rt_p95"]
        if not math.isnan(named):
            out["mead_rt_ratio"] = named / spec.latency_slo_s
            out["mead_target_met"] = float(named <= spec.latency_slo_s)
        acc = control_step_accuracy(table[["input", "throughput", "latency", "processing"]], spec)
        out["saso_qos_violations"] = float(acc.violations)
        out["saso_control_steps"] = float(acc.steps)
        out["saso_qos_violation_pct"] = 100.0 * acc.violations / acc.steps if acc.steps else math.nan
        out["saso_violations_in_rescale_steps"] = float(acc.in_rescale_steps)
        inp, thr = table["input"], table["throughput"]
        exe = execution(job.get(Metric.INPUT_RATE), job.get(Metric.LAG), spec)
        # the sample at the stop holds the first interval without input: not part of the trace
        in_trace = (ts < spec.run_start + exe.trace_s - 1e-9 if not math.isnan(exe.trace_s)
                    else np.ones(len(ts), dtype=bool))
        both = in_trace & inp.notna().to_numpy() & thr.notna().to_numpy()
        widths = mx.step_widths(ts, spec.run_end)
        offered = float((inp.to_numpy(float) * widths)[both].sum())
        if offered > 0:
            out["spec_processed_in_trace"] = float((thr.to_numpy(float) * widths)[both].sum()) / offered
        out["spec_trace_s"] = exe.trace_s
        if exe.trace_s and exe.trace_s > 0:
            out["spec_excess_time"] = exe.excess_s / exe.trace_s
        out["spec_cost_replica_min"] = cost_replica_minutes(job.get(Metric.TASKMANAGERS), exe.end_s,
                                                            spec.run_end)
    out["alloc_cores_avg"] = allocated_cores(samples, spec.run_end)
    return out
