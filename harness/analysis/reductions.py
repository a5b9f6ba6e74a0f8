"""The per-run facts the summary is built from, computed once for both engines with numpy.

`reduce(refs)` reads a batch of runs (`samples.read_samples`) and reduces its
samples to `Reductions` - a few rows per run, keyed by `rid` (the run's index in
the batch). Every fact is one vectorised reduction over the batch's flat arrays
(`np.ufunc.reduceat` at the series' boundaries), never a Python loop per sample.
The pandas engine runs it batch after batch in its own process, the Spark engine
on its workers; `assembly.finish` turns the facts into rows.

The definitions are those of `metrics` (its conventions: step functions, the
last sample holds until the run's end, a NaN sample marks a gap that holds nothing:
the series statistics see the gaps, the other reductions the measured samples only);
`tests/analysis/test_engines.py` checks these reductions against the metric
core's functions on hand-made and synthetic runs.

Tables (NaN where a fact does not exist):
  bounds        rid, run_start, run_end: first and last job-level sample of the run
  series        rid, metric, operator, area (sum of value x time to the next sample, up to the
                series' last sample, gaps excluded), span (measured seconds from first to last
                sample), plain_mean, max, min, last (of the measured samples), tail (the last
                sample's value: NaN when the series ends in a gap), last_ts, n (measured samples),
                p50, p95 (p50/p95 only for `PERCENTILE_METRICS`); series never measured are left out
  provisioning  rid, under, over, t_under, t_over, period, ideal_area, ideal_span, ideal_plain,
                i_last, a_last, last_ts: SPEC sums of ideal vs actual task managers up to the
                run's last input/TM sample (runs with demand coefficients only)
  qos           rid, violations, steps: control steps and QoS violations
  excess        rid, stop_ts, drained_ts, last_lag_ts (runs with a lag series only)

A new reduction over the samples is a function here plus a table (or columns) in
`Reductions`; a metric computed from these facts goes into `summary.assemble_row`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.analysis.loader import RunRef
from harness.analysis.metrics import CEIL_EPS
from harness.analysis.samples import Samples, boundaries, read_samples
from harness.analysis.summary import PERCENTILE_METRICS
from harness.vocabulary import Metric

# the series each reduction reads (job level, operator "")
SPEC_INPUT, SPEC_ACTUAL = Metric.INPUT_RATE, Metric.TASKMANAGERS  # ideal(t) from the input rate vs actual TMs
QOS_INPUT, QOS_THROUGHPUT, QOS_LATENCY = Metric.INPUT_RATE, Metric.THROUGHPUT, Metric.LATENCY_KAFKA
EXCESS_INPUT, EXCESS_LAG = Metric.INPUT_RATE, Metric.LAG

BOUNDS_COLUMNS = ["rid", "run_start", "run_end"]
SERIES_COLUMNS = ["rid", "metric", "operator", "area", "span", "plain_mean", "max", "min", "last", "tail", "last_ts",
                  "n", "p50", "p95"]
PROVISIONING_COLUMNS = ["rid", "under", "over", "t_under", "t_over", "period", "ideal_area", "ideal_span",
                        "ideal_plain", "i_last", "a_last", "last_ts"]
QOS_COLUMNS = ["rid", "violations", "steps"]
EXCESS_COLUMNS = ["rid", "stop_ts", "drained_ts", "last_lag_ts"]


@dataclass(frozen=True)
class Reductions:
    """What an engine computes from the samples; every table is keyed by `rid`."""

    bounds: pd.DataFrame
    series: pd.DataFrame
    provisioning: pd.DataFrame
    qos: pd.DataFrame
    excess: pd.DataFrame

    @staticmethod
    def empty() -> Reductions:
        return Reductions(*(pd.DataFrame(columns=c) for c in (BOUNDS_COLUMNS, SERIES_COLUMNS, PROVISIONING_COLUMNS,
                                                               QOS_COLUMNS, EXCESS_COLUMNS)))


def _next_gap(ts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Time to the next sample of the same group; NaN for each group's last sample."""
    dt = np.empty_like(ts)
    dt[:-1] = ts[1:] - ts[:-1]
    dt[ends] = np.nan
    return dt


def _group_sum(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sum per group, NaN terms skipped (SQL's sum; 0 for a group of NaN only)."""
    return np.add.reduceat(np.where(np.isnan(values), 0.0, values), starts) if len(starts) else values[:0]


def _percentiles(values: np.ndarray, group: np.ndarray, n_groups: int, qs: tuple[float, ...]) -> np.ndarray:
    """Exact linear-interpolation percentiles (numpy's and Spark's) of `values` per group id -> (groups, qs)."""
    order = np.lexsort((values, group))
    v, g = values[order], group[order]
    counts = np.bincount(g, minlength=n_groups)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    out = np.full((n_groups, len(qs)), np.nan)
    has = counts > 0
    for j, q in enumerate(qs):
        pos = q * (counts[has] - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, counts[has] - 1)
        frac = pos - lo
        a, b = v[offsets[has] + lo], v[offsets[has] + hi]
        out[has, j] = a + (b - a) * frac
    return out


def _last_measured(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per group, the last non-NaN value (NaN for a group without one)."""
    if not len(starts):
        return values[:0]
    idx = np.where(np.isnan(values), -1, np.arange(len(values)))
    last = np.maximum.reduceat(idx, starts)
    return np.where(last >= starts, values[np.maximum(last, 0)], np.nan)


def series_reduction(s: Samples) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-series facts (area, span, max, ...) and per-run bounds; gap markers hold nothing."""
    starts, ends = s.starts, s.ends
    measured = ~np.isnan(s.value)
    dt = np.where(measured, _next_gap(s.ts, ends), np.nan)
    n = np.add.reduceat(measured.astype(np.int64), starts) if len(starts) else np.array([], dtype=np.int64)
    g_metric, g_op = s.metric[starts], s.operator[starts]
    series = pd.DataFrame({
        "rid": s.rid[starts],
        "metric": np.array(s.metric_names, dtype=object)[g_metric] if len(starts) else [],
        "operator": np.array(s.operator_names, dtype=object)[g_op] if len(starts) else [],
        "area": _group_sum(s.value * dt, starts),
        "span": _group_sum(dt, starts),
        "plain_mean": _group_sum(s.value, starts) / np.maximum(n, 1) if len(starts) else [],
        "max": np.fmax.reduceat(s.value, starts) if len(starts) else [],
        "min": np.fmin.reduceat(s.value, starts) if len(starts) else [],
        "last": _last_measured(s.value, starts, ends),
        "tail": s.value[ends],
        "last_ts": s.ts[ends],
        "n": n,
        "p50": np.nan,
        "p95": np.nan,
    })
    empty_op = s.code(s.operator_names, "")
    pct_codes = [s.code(s.metric_names, m) for m in PERCENTILE_METRICS]
    pct_groups = np.flatnonzero(np.isin(g_metric, pct_codes) & (g_op == empty_op))
    if len(pct_groups):
        group_of_row = np.repeat(np.arange(len(starts)), ends - starts + 1)
        rows = np.isin(group_of_row, pct_groups) & measured
        local = np.searchsorted(pct_groups, group_of_row[rows])
        pct = _percentiles(s.value[rows], local, len(pct_groups), (0.5, 0.95))
        series.loc[pct_groups, "p50"] = pct[:, 0]
        series.loc[pct_groups, "p95"] = pct[:, 1]
    run_starts = boundaries(s.rid)
    bounds = pd.DataFrame({
        "rid": s.rid[run_starts],
        "run_start": np.minimum.reduceat(s.ts, run_starts) if len(run_starts) else [],
        "run_end": np.maximum.reduceat(s.ts, run_starts) if len(run_starts) else [],
    })
    series = series[series["n"] > 0].reset_index(drop=True)  # never measured: absent, not a row of NaNs
    return series[SERIES_COLUMNS], bounds[BOUNDS_COLUMNS]


def _job_rows(s: Samples, *metrics: str) -> np.ndarray:
    """Indices of the job-level (operator "") samples of `metrics`, in (rid, metric, ts) order."""
    codes = [c for c in (s.code(s.metric_names, m) for m in metrics) if c >= 0]
    empty_op = s.code(s.operator_names, "")
    if not codes or empty_op < 0:
        return np.array([], dtype=np.int64)
    return np.flatnonzero(np.isin(s.metric, codes) & (s.operator == empty_op))


@dataclass(frozen=True)
class RunConstants:
    """Per-run parameters the reductions need, indexed by rid."""

    period_s: np.ndarray
    slo_latency_s: np.ndarray
    slo_ratio: np.ndarray
    min_parallelism: np.ndarray
    coefficients: np.ndarray  # (runs, max operators), NaN-padded, in the topology's operator order

    @staticmethod
    def of(refs: Sequence[RunRef]) -> RunConstants:
        coefs = [list(r.meta.coefficients.values()) for r in refs]
        width = max((len(c) for c in coefs), default=0)
        matrix = np.full((len(refs), width), np.nan)
        for i, c in enumerate(coefs):
            matrix[i, :len(c)] = c
        return RunConstants(
            np.array([r.meta.period_s for r in refs], dtype=float),
            np.array([r.meta.slo_latency_s for r in refs], dtype=float),
            np.array([r.meta.slo_throughput_ratio for r in refs], dtype=float),
            np.array([r.meta.min_parallelism for r in refs], dtype=float),
            matrix,
        )


def provisioning_reduction(s: Samples, consts: RunConstants) -> pd.DataFrame:
    """SPEC sums of ideal(t) vs actual task managers, both forward-filled on their merged timeline.

    Rows sharing a timestamp get dt = 0 except the last, which has seen every
    value at that time; the last row's values are kept for `finish_provisioning`.
    """
    rows = _job_rows(s, SPEC_INPUT, SPEC_ACTUAL)
    if len(rows) == 0 or consts.coefficients.shape[1] == 0:
        return pd.DataFrame(columns=PROVISIONING_COLUMNS)
    has_coefs = ~np.isnan(consts.coefficients).all(axis=1)
    rows = rows[has_coefs[s.rid[rows]]]
    if len(rows) == 0:
        return pd.DataFrame(columns=PROVISIONING_COLUMNS)
    rid, ts, value = s.rid[rows], s.ts[rows], s.value[rows]
    is_inp = s.metric[rows] == s.code(s.metric_names, SPEC_INPUT)
    order = np.lexsort((ts, rid))  # stable: ties keep (metric, file) order; only the last of a tie counts
    rid, ts, value, is_inp = rid[order], ts[order], value[order], is_inp[order]
    coefs, min_p = consts.coefficients[rid], consts.min_parallelism[rid]
    need = np.where(np.isnan(coefs), 0.0,
                    np.maximum(min_p[:, None], np.ceil(value[:, None] * coefs - CEIL_EPS)))
    ideal = np.where(is_inp, need.sum(axis=1) if need.shape[1] else 0.0, np.nan)
    actual = np.where(is_inp, np.nan, value)
    starts = boundaries(rid)
    ends = np.append(starts[1:], len(rid)) - 1
    first_of_row = np.repeat(starts, np.diff(np.append(starts, len(rid))))
    i = _ffill(ideal, first_of_row)
    a = _ffill(actual, first_of_row)
    dt = _next_gap(ts, ends)
    both = ~np.isnan(i) & ~np.isnan(a) & ~np.isnan(dt)
    has_i = ~np.isnan(i) & ~np.isnan(dt)
    zero = np.zeros_like(dt)
    n_ideal = np.add.reduceat(is_inp.astype(np.int64), starts)
    out = pd.DataFrame({
        "rid": rid[starts],
        "under": np.add.reduceat(np.where(both, np.maximum(0.0, i - a) * dt, zero), starts),
        "over": np.add.reduceat(np.where(both, np.maximum(0.0, a - i) * dt, zero), starts),
        "t_under": np.add.reduceat(np.where(both & (i > a), dt, zero), starts),
        "t_over": np.add.reduceat(np.where(both & (a > i), dt, zero), starts),
        "period": np.add.reduceat(np.where(both, dt, zero), starts),
        "ideal_area": np.add.reduceat(np.where(has_i, i * dt, zero), starts),
        "ideal_span": np.add.reduceat(np.where(has_i, dt, zero), starts),
        "ideal_plain": np.where(n_ideal > 0, _group_sum(ideal, starts) / np.maximum(n_ideal, 1), np.nan),
        "i_last": i[ends],
        "a_last": a[ends],
        "last_ts": ts[ends],
    })
    return out[PROVISIONING_COLUMNS]


def _ffill(values: np.ndarray, first_of_row: np.ndarray) -> np.ndarray:
    """Forward-fill NaN within groups (`first_of_row[k]`: index of row k's group start)."""
    idx = np.where(np.isnan(values), -1, np.arange(len(values)))
    last = np.maximum.accumulate(idx)
    ok = last >= first_of_row
    return np.where(ok, values[np.maximum(last, 0)], np.nan)


def qos_reduction(s: Samples, consts: RunConstants, bounds: pd.DataFrame) -> pd.DataFrame:
    """QoS violations per control step of one loop period (runs with input and throughput series).

    A step's input, throughput and latency are the means of the samples in it;
    steps are numbered from the run's first sample.
    """
    rows = _job_rows(s, QOS_INPUT, QOS_THROUGHPUT, QOS_LATENCY)
    if len(rows) == 0:
        return pd.DataFrame(columns=QOS_COLUMNS)
    inp_code, thr_code, lat_code = (s.code(s.metric_names, m) for m in (QOS_INPUT, QOS_THROUGHPUT, QOS_LATENCY))
    rid, code = s.rid[rows], s.metric[rows]
    # the metric core's rule: no input or no throughput series, no control steps
    complete = np.intersect1d(rid[code == inp_code], rid[code == thr_code])
    keep = np.isin(rid, complete)
    rid, code, ts, value = rid[keep], code[keep], s.ts[rows][keep], s.value[rows][keep]
    if len(rid) == 0:
        return pd.DataFrame(columns=QOS_COLUMNS)
    run_start = np.full(len(consts.period_s), np.nan)
    run_start[bounds["rid"].to_numpy(np.int64)] = bounds["run_start"].to_numpy(float)
    bucket = np.floor((ts - run_start[rid]) / consts.period_s[rid]).astype(np.int64)
    steps, step_of_row = np.unique(rid * (int(bucket.max()) + 1) + bucket, return_inverse=True)
    step_rid = rid[np.unique(step_of_row, return_index=True)[1]]

    def step_mean(c: int) -> np.ndarray:
        sel = code == c
        n = np.bincount(step_of_row[sel], minlength=len(steps))
        total = np.bincount(step_of_row[sel], weights=value[sel], minlength=len(steps))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, total / np.maximum(n, 1), np.nan)

    inp, thr, lat = step_mean(inp_code), step_mean(thr_code), step_mean(lat_code)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio_bad = (inp > 0) & ~np.isnan(thr) & (thr / inp < consts.slo_ratio[step_rid])
    lat_bad = ~np.isnan(lat) & (lat > consts.slo_latency_s[step_rid])
    runs, step_count = np.unique(step_rid, return_counts=True)
    bad = np.bincount(np.searchsorted(runs, step_rid), weights=(ratio_bad | lat_bad).astype(float),
                      minlength=len(runs))
    return pd.DataFrame({"rid": runs, "violations": bad.astype(np.int64), "steps": step_count})


def excess_reduction(s: Samples) -> pd.DataFrame:
    """When the input stopped (first sample after the last with input > 0) and the lag was drained after that."""
    lag_code, inp_code = s.code(s.metric_names, EXCESS_LAG), s.code(s.metric_names, EXCESS_INPUT)
    empty_op = s.code(s.operator_names, "")
    g_metric, g_op, g_rid = s.metric[s.starts], s.operator[s.starts], s.rid[s.starts]
    lag_groups = (np.flatnonzero((g_metric == lag_code) & (g_op == empty_op)) if lag_code >= 0
                  else np.array([], dtype=np.int64))
    if len(lag_groups) == 0:
        return pd.DataFrame(columns=EXCESS_COLUMNS)
    stop_by_rid: dict[int, float] = {}
    if inp_code >= 0:
        for g in np.flatnonzero((g_metric == inp_code) & (g_op == empty_op)):
            ts, v = s.ts[s.starts[g]:s.ends[g] + 1], s.value[s.starts[g]:s.ends[g] + 1]
            busy = np.flatnonzero(v > 0)
            if len(busy):
                after = ts[ts > ts[busy[-1]]]
                if len(after):
                    stop_by_rid[int(g_rid[g])] = float(after.min())
    out = []
    for g in lag_groups:
        ts, v = s.ts[s.starts[g]:s.ends[g] + 1], s.value[s.starts[g]:s.ends[g] + 1]
        rid = int(g_rid[g])
        stop = stop_by_rid.get(rid, math.nan)
        drained = math.nan
        if not math.isnan(stop):
            ok = (ts >= stop) & (v <= 1.0)
            if ok.any():
                drained = float(ts[ok].min())
        out.append((rid, stop, drained, float(ts.max())))
    return pd.DataFrame(out, columns=EXCESS_COLUMNS)


def reduce_batch(s: Samples, consts: RunConstants) -> Reductions:
    """Every reduction of one batch's samples."""
    series, bounds = series_reduction(s)  # sees the gaps
    m = s.measured()
    return Reductions(bounds, series, provisioning_reduction(m, consts), qos_reduction(m, consts, bounds),
                      excess_reduction(m))


def reduce(refs: Sequence[RunRef]) -> Reductions:
    """`Reductions` of `refs` (rid = index in `refs`), their samples read at once."""
    paths = [(i, r.timeseries_path) for i, r in enumerate(refs) if r.timeseries_path is not None]
    return reduce_batch(read_samples(paths), RunConstants.of(refs))


