"""The in-process engine: `Reductions` of many runs at once with pyarrow and numpy.

Runs are read in batches (`BATCH_RUNS` files per batch, so memory stays
bounded) into flat arrays sorted by (run, metric, operator, ts) - the order
`record.write_run_record` writes, so normally no sort is needed - and every
per-series or per-run fact is one vectorised reduction over those arrays
(`np.ufunc.reduceat` at the series' boundaries), never a Python loop per run
or per sample. The definitions are those of `metrics` (its conventions: step
functions, the last sample holds until the run's end, NaN samples dropped);
`tests/analysis/test_engines.py` checks these reductions against the metric
core's functions, and the Spark jobs against these.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.analysis.loader import RunRef
from harness.analysis.metrics import CEIL_EPS
from harness.analysis.reductions import (
    BOUNDS_COLUMNS,
    EXCESS_COLUMNS,
    EXCESS_INPUT,
    EXCESS_LAG,
    PROVISIONING_COLUMNS,
    QOS_COLUMNS,
    QOS_INPUT,
    QOS_LATENCY,
    QOS_THROUGHPUT,
    SERIES_COLUMNS,
    SPEC_ACTUAL,
    SPEC_INPUT,
    Reductions,
    finish,
)
from harness.analysis.summary import PERCENTILE_METRICS, AnalysisResult

# runs per batch: ~25 k samples each for a 140-minute run at 5 s, so ~3 M samples (~150 MB) at a time
BATCH_RUNS = 128
COLUMNS = ["ts", "metric", "operator", "subtask", "value"]


def read_timeseries(ref: RunRef) -> pd.DataFrame:
    """One run's job- and operator-level samples as a frame (for notebooks and checks)."""
    if ref.timeseries_path is None:
        return pd.DataFrame({"ts": [], "metric": [], "operator": [], "subtask": [], "value": []})
    df = pq.read_table(ref.timeseries_path, columns=COLUMNS).to_pandas()
    return df[df["value"].notna()]


@dataclass(frozen=True)
class Samples:
    """A batch's samples (subtask -1, NaN dropped) as flat arrays sorted by (rid, metric, operator, ts).

    `metric` and `operator` are codes into `metric_names` / `operator_names`
    (sorted, so code order is name order). Series are the runs of equal
    (rid, metric, operator): `starts[g]`..`ends[g]` inclusive.
    """

    rid: np.ndarray
    metric: np.ndarray
    operator: np.ndarray
    ts: np.ndarray
    value: np.ndarray
    metric_names: list[str]
    operator_names: list[str]
    starts: np.ndarray
    ends: np.ndarray

    def code(self, names: list[str], name: str) -> int:
        """A name's code, or -1 when no sample of this batch has it."""
        try:
            return names.index(name)
        except ValueError:
            return -1


def _dictionary_codes(column: pa.ChunkedArray) -> list[tuple[list[str], np.ndarray]]:
    """(dictionary, indices) per chunk of a string column read as a dictionary (nulls -> "")."""
    out = []
    for chunk in column.chunks:
        if not pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_encode()
        names = [str(s) for s in chunk.dictionary.to_pylist()]
        indices = chunk.indices
        if indices.null_count:
            names.append("")
            indices = indices.fill_null(len(names) - 1)
        out.append((names, indices.to_numpy(zero_copy_only=False)))
    return out


def read_samples(paths: Sequence[tuple[int, Path]]) -> Samples:
    """Read a batch of timeseries files into `Samples` (one pass per file, columns pruned)."""
    parts: list[tuple[int, np.ndarray, list[tuple[list[str], np.ndarray]],
                      list[tuple[list[str], np.ndarray]], np.ndarray, np.ndarray]] = []
    metric_names: set[str] = set()
    op_names: set[str] = set()
    for rid, path in paths:
        table = pq.read_table(path, columns=COLUMNS, read_dictionary=["metric", "operator"], use_threads=False)
        if table.num_rows == 0:
            continue
        subtask = table.column("subtask").to_numpy()
        value = table.column("value").to_numpy()
        keep = (subtask == -1) & ~np.isnan(value)
        metrics, ops = _dictionary_codes(table.column("metric")), _dictionary_codes(table.column("operator"))
        for names, _ in metrics:
            metric_names.update(names)
        for names, _ in ops:
            op_names.update(names)
        parts.append((rid, keep, metrics, ops, table.column("ts").to_numpy(), value))
    m_sorted, o_sorted = sorted(metric_names), sorted(op_names)
    m_code = {n: i for i, n in enumerate(m_sorted)}
    o_code = {n: i for i, n in enumerate(o_sorted)}

    def recode(chunks: list[tuple[list[str], np.ndarray]], codes: dict[str, int]) -> np.ndarray:
        return np.concatenate([np.array([codes[n] for n in names], dtype=np.int32)[idx] for names, idx in chunks])

    rid_a, m_a, o_a, ts_a, v_a = [], [], [], [], []
    for rid, keep, metrics, ops, ts, value in parts:
        rid_a.append(np.full(int(keep.sum()), rid, dtype=np.int64))
        m_a.append(recode(metrics, m_code)[keep])
        o_a.append(recode(ops, o_code)[keep])
        ts_a.append(ts[keep])
        v_a.append(value[keep])
    if not parts:
        empty_i, empty_f = np.array([], dtype=np.int64), np.array([], dtype=float)
        return Samples(empty_i, empty_i, empty_i, empty_f, empty_f, [], [], empty_i, empty_i)
    rid_c, m_c, o_c = np.concatenate(rid_a), np.concatenate(m_a), np.concatenate(o_a)
    ts_c, v_c = np.concatenate(ts_a).astype(float), np.concatenate(v_a).astype(float)
    if not _is_sorted(rid_c, m_c, o_c, ts_c):
        order = np.lexsort((ts_c, o_c, m_c, rid_c))
        rid_c, m_c, o_c, ts_c, v_c = rid_c[order], m_c[order], o_c[order], ts_c[order], v_c[order]
    starts = _boundaries(rid_c, m_c, o_c)
    ends = np.append(starts[1:], len(ts_c)) - 1
    return Samples(rid_c, m_c, o_c, ts_c, v_c, m_sorted, o_sorted, starts, ends)


def _is_sorted(rid: np.ndarray, m: np.ndarray, o: np.ndarray, ts: np.ndarray) -> bool:
    if len(ts) < 2:
        return True
    d_r, d_m, d_o, d_t = np.diff(rid), np.diff(m), np.diff(o), np.diff(ts)
    ok = (d_r > 0) | ((d_r == 0) & ((d_m > 0) | ((d_m == 0) & ((d_o > 0) | ((d_o == 0) & (d_t >= 0))))))
    return bool(ok.all())


def _boundaries(*keys: np.ndarray) -> np.ndarray:
    """Indices where any of the (sorted) keys changes: the starts of the groups."""
    n = len(keys[0])
    if n == 0:
        return np.array([], dtype=np.int64)
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(new)


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


def series_reduction(s: Samples) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-series facts (area, span, max, ...) and per-run bounds."""
    starts, ends = s.starts, s.ends
    dt = _next_gap(s.ts, ends)
    n = (ends - starts + 1).astype(np.int64)
    g_metric, g_op = s.metric[starts], s.operator[starts]
    series = pd.DataFrame({
        "rid": s.rid[starts],
        "metric": np.array(s.metric_names, dtype=object)[g_metric] if len(starts) else [],
        "operator": np.array(s.operator_names, dtype=object)[g_op] if len(starts) else [],
        "area": _group_sum(s.value * dt, starts),
        "span": _group_sum(dt, starts),
        "plain_mean": np.add.reduceat(s.value, starts) / n if len(starts) else [],
        "max": np.maximum.reduceat(s.value, starts) if len(starts) else [],
        "min": np.minimum.reduceat(s.value, starts) if len(starts) else [],
        "last": s.value[ends],
        "last_ts": s.ts[ends],
        "n": n,
        "p50": np.nan,
        "p95": np.nan,
    })
    empty_op = s.code(s.operator_names, "")
    pct_codes = [s.code(s.metric_names, m) for m in PERCENTILE_METRICS]
    pct_groups = np.flatnonzero(np.isin(g_metric, pct_codes) & (g_op == empty_op))
    if len(pct_groups):
        group_of_row = np.repeat(np.arange(len(starts)), n)
        rows = np.isin(group_of_row, pct_groups)
        local = np.searchsorted(pct_groups, group_of_row[rows])
        pct = _percentiles(s.value[rows], local, len(pct_groups), (0.5, 0.95))
        series.loc[pct_groups, "p50"] = pct[:, 0]
        series.loc[pct_groups, "p95"] = pct[:, 1]
    run_starts = _boundaries(s.rid)
    bounds = pd.DataFrame({
        "rid": s.rid[run_starts],
        "run_start": np.minimum.reduceat(s.ts, run_starts) if len(run_starts) else [],
        "run_end": np.maximum.reduceat(s.ts, run_starts) if len(run_starts) else [],
    })
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
    starts = _boundaries(rid)
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
    """QoS violations per control step of one loop period (runs with input and throughput series)."""
    rows = _job_rows(s, QOS_INPUT, QOS_THROUGHPUT, QOS_LATENCY)
    if len(rows) == 0:
        return pd.DataFrame(columns=QOS_COLUMNS)
    run_start = pd.Series(bounds["run_start"].to_numpy(float), index=bounds["rid"].to_numpy())
    rid, code = s.rid[rows], s.metric[rows]
    inp_code, thr_code, lat_code = (s.code(s.metric_names, m) for m in (QOS_INPUT, QOS_THROUGHPUT, QOS_LATENCY))
    # the metric core's rule: no input or no throughput series, no control steps
    complete = np.intersect1d(rid[code == inp_code], rid[code == thr_code])
    keep = np.isin(rid, complete)
    rid, code, ts, value = rid[keep], code[keep], s.ts[rows][keep], s.value[rows][keep]
    if len(rid) == 0:
        return pd.DataFrame(columns=QOS_COLUMNS)
    bucket = np.floor((ts - run_start.reindex(rid).to_numpy()) / consts.period_s[rid]).astype(np.int64)
    frame = pd.DataFrame({"rid": rid, "bucket": bucket, "metric": code, "value": value})
    means = frame.groupby(["rid", "bucket", "metric"], sort=True)["value"].mean().unstack("metric")
    step_rid = means.index.get_level_values("rid").to_numpy()
    nan = np.full(len(means), np.nan)
    inp, thr = means[inp_code].to_numpy(float), means[thr_code].to_numpy(float)
    lat = means[lat_code].to_numpy(float) if lat_code in means else nan
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio_bad = (inp > 0) & ~np.isnan(thr) & (thr / inp < consts.slo_ratio[step_rid])
    lat_bad = ~np.isnan(lat) & (lat > consts.slo_latency_s[step_rid])
    per_run = pd.DataFrame({"rid": step_rid, "bad": (ratio_bad | lat_bad).astype(np.int64)}).groupby("rid")["bad"]
    out = pd.DataFrame({"violations": per_run.sum(), "steps": per_run.size()}).reset_index()
    return out[QOS_COLUMNS]


def excess_reduction(s: Samples) -> pd.DataFrame:
    """When the input stopped (first sample after the last with input > 0) and the lag was drained after that."""
    lag_code, inp_code = s.code(s.metric_names, EXCESS_LAG), s.code(s.metric_names, EXCESS_INPUT)
    empty_op = s.code(s.operator_names, "")
    g_metric, g_op, g_rid = s.metric[s.starts], s.operator[s.starts], s.rid[s.starts]
    lag_groups = np.flatnonzero((g_metric == lag_code) & (g_op == empty_op)) if lag_code >= 0 else []
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
    series, bounds = series_reduction(s)
    return Reductions(bounds, series, provisioning_reduction(s, consts), qos_reduction(s, consts, bounds),
                      excess_reduction(s))


def reduce(refs: Sequence[RunRef], progress: Callable[[int], Any] | None = None,
           batch_runs: int = BATCH_RUNS) -> Reductions:
    """`Reductions` of every run, `batch_runs` timeseries files at a time."""
    consts = RunConstants.of(refs)
    paths = [(i, r.timeseries_path) for i, r in enumerate(refs) if r.timeseries_path is not None]
    parts = []
    for b in range(0, len(paths), batch_runs):
        batch = paths[b:b + batch_runs]
        parts.append(reduce_batch(read_samples(batch), consts))
        if progress is not None:
            progress(len(batch))
    if progress is not None and len(paths) < len(refs):
        progress(len(refs) - len(paths))
    return Reductions.concat(parts)


def summarise(refs: list[RunRef], progress: Callable[[int], Any] | None = None) -> AnalysisResult:
    """The per-run summary of every run, computed in this process."""
    return finish(refs, reduce(refs, progress))
