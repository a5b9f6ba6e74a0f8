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
  scores        rid + `papers.SCORE_COLUMNS`: the seed papers' scores (SASO QoS violations per control
                step, SPEC excess time and cost up to Pt, MEAD per-record response time, ...), from
                `papers.score_run` on each run's measured samples of the series it reads (runs with
                samples only)

The papers' scores are the one table not reduced with numpy over the whole batch: each
run's few series go through `papers.score_run`, the single definition of those scores.

A new reduction over the samples is a function here plus a table (or columns) in
`Reductions`; a metric computed from these facts goes into `summary.assemble_row`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.analysis import papers
from harness.analysis.loader import RunRef
from harness.analysis.meta import RunMeta
from harness.analysis.metrics import CEIL_EPS
from harness.analysis.samples import Samples, boundaries, read_samples
from harness.analysis.summary import PERCENTILE_METRICS, paper_spec
from harness.vocabulary import Metric

# the series each reduction reads (job level, operator "")
SPEC_INPUT, SPEC_ACTUAL = Metric.INPUT_RATE, Metric.TASKMANAGERS  # ideal(t) from the input rate vs actual TMs

BOUNDS_COLUMNS = ["rid", "run_start", "run_end"]
SERIES_COLUMNS = ["rid", "metric", "operator", "area", "span", "plain_mean", "max", "min", "last", "tail", "last_ts",
                  "n", "p50", "p95"]
PROVISIONING_COLUMNS = ["rid", "under", "over", "t_under", "t_over", "period", "ideal_area", "ideal_span",
                        "ideal_plain", "i_last", "a_last", "last_ts"]
SCORES_COLUMNS = ["rid", *papers.SCORE_COLUMNS]


@dataclass(frozen=True)
class Reductions:
    """What an engine computes from the samples; every table is keyed by `rid`."""

    bounds: pd.DataFrame
    series: pd.DataFrame
    provisioning: pd.DataFrame
    scores: pd.DataFrame

    @staticmethod
    def empty() -> Reductions:
        return Reductions(*(pd.DataFrame(columns=c) for c in (BOUNDS_COLUMNS, SERIES_COLUMNS, PROVISIONING_COLUMNS,
                                                               SCORES_COLUMNS)))


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
    metas: tuple[RunMeta, ...] = ()  # the runs' metadata: what `summary.paper_spec` reads (SLO, topology)

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
            tuple(r.meta for r in refs),
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


def scores_reduction(s: Samples, consts: RunConstants, bounds: pd.DataFrame, series: pd.DataFrame) -> pd.DataFrame:
    """`papers.score_run` per run of the batch, on a frame (ts, metric, operator, value) of its measured
    samples of `papers.JOB_METRICS` (job level) and `papers.OPERATOR_METRICS` (per operator).

    The spec is the run's (`summary.paper_spec`): its bounds, and the final parallelism (each operator's
    last measured parallelism sample, from `series`) for the drain rate.
    """
    if bounds.empty:
        return pd.DataFrame(columns=SCORES_COLUMNS)
    empty_op = s.code(s.operator_names, "")
    job_codes = [c for c in (s.code(s.metric_names, m) for m in papers.JOB_METRICS) if c >= 0]
    op_codes = [c for c in (s.code(s.metric_names, m) for m in papers.OPERATOR_METRICS) if c >= 0]
    is_job = s.operator == empty_op
    rows = np.flatnonzero((np.isin(s.metric, job_codes) & is_job) | (np.isin(s.metric, op_codes) & ~is_job))
    frame = pd.DataFrame({
        "rid": s.rid[rows], "ts": s.ts[rows],
        "metric": np.array(s.metric_names, dtype=object)[s.metric[rows]] if len(rows) else [],
        "operator": np.array(s.operator_names, dtype=object)[s.operator[rows]] if len(rows) else [],
        "value": s.value[rows],
    })
    by_rid = {int(rid): g.drop(columns="rid") for rid, g in frame.groupby("rid", sort=False)}
    no_samples = frame.iloc[:0].drop(columns="rid")
    par = series[(series["metric"] == Metric.PARALLELISM) & (series["operator"] != "")]
    final_by_rid: dict[int, dict[str, float]] = {}
    for r in par.itertuples(index=False):
        final_by_rid.setdefault(int(r.rid), {})[str(r.operator)] = float(r.last)
    out = []
    for b in bounds.itertuples(index=False):
        rid = int(b.rid)
        spec = paper_spec(consts.metas[rid], float(b.run_start), float(b.run_end), final_by_rid.get(rid, {}))
        out.append({"rid": rid, **papers.score_run(by_rid.get(rid, no_samples), spec)})
    return pd.DataFrame(out, columns=SCORES_COLUMNS)


def reduce_batch(s: Samples, consts: RunConstants) -> Reductions:
    """Every reduction of one batch's samples."""
    series, bounds = series_reduction(s)  # sees the gaps
    m = s.measured()
    return Reductions(bounds, series, provisioning_reduction(m, consts), scores_reduction(m, consts, bounds, series))


def reduce(refs: Sequence[RunRef]) -> Reductions:
    """`Reductions` of `refs` (rid = index in `refs`), their samples read at once."""
    paths = [(i, r.timeseries_path) for i, r in enumerate(refs) if r.timeseries_path is not None]
    return reduce_batch(read_samples(paths), RunConstants.of(refs))


