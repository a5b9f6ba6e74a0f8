"""Per-run summaries computed run by run with pandas and the metric core.

This is the reference the Spark jobs are checked against: it calls the pure
functions of `metrics` directly, one run at a time. NaN samples are kept: they
mark gaps for the time-weighted statistics (`metrics` conventions); everything
else is computed from the measured samples (`run_pieces`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from harness.analysis import metrics as mx
from harness.analysis.events import event_metrics
from harness.analysis.loader import RunRef
from harness.analysis.summary import (
    PERCENTILE_METRICS,
    SERIES_STATS_COLUMNS,
    AnalysisResult,
    ExcessFacts,
    RunPieces,
    SeriesStats,
    SpecFacts,
    assemble_row,
    convergence_rows,
    operator_rows,
)
from harness.vocabulary import Metric


def read_timeseries(ref: RunRef) -> pd.DataFrame:
    if ref.timeseries_path is None:
        return pd.DataFrame({"ts": [], "metric": [], "operator": [], "subtask": [], "value": []})
    return pq.read_table(ref.timeseries_path, columns=["ts", "metric", "operator", "subtask", "value"]).to_pandas()


def series_stats(ts: np.ndarray, values: np.ndarray, end: float, percentiles: bool) -> SeriesStats:
    """Statistics of one series whose NaN samples mark gaps; it must hold at least one measured sample."""
    order = np.argsort(ts, kind="stable")
    ts, values = ts[order], values[order]
    area, span = mx.held_area(ts, values, end)
    measured = values[~np.isnan(values)]
    return SeriesStats(
        tw_mean=mx.time_weighted_mean(ts, values, end),
        tw_sum=area,
        span=span,
        max=float(measured.max()),
        min=float(measured.min()),
        last=float(measured[-1]),
        n=len(measured),
        p50=mx.percentile(measured, 50) if percentiles else math.nan,
        p95=mx.percentile(measured, 95) if percentiles else math.nan,
    )


def run_pieces(ref: RunRef, df: pd.DataFrame) -> RunPieces:
    meta = ref.meta
    if df.empty:
        return RunPieces(0.0, 0.0)
    df = df[df["subtask"] == -1]  # per-subtask series are not summarised; the run spans the rest
    if df.empty:
        return RunPieces(0.0, 0.0)
    start, end = float(df["ts"].min()), float(df["ts"].max())
    pieces = RunPieces(start, end)
    arrays: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}  # measured samples only
    for (metric, op), g in df.groupby(["metric", "operator"], sort=True):
        ts, values = g["ts"].to_numpy(float), g["value"].to_numpy(float)
        measured = ~np.isnan(values)
        if not measured.any():
            continue  # never measured: the series is absent, not a row of NaNs
        arrays[(metric, op)] = (ts[measured], values[measured])
        pieces.series[(metric, op)] = series_stats(ts, values, end, metric in PERCENTILE_METRICS and op == "")

    def job(metric: str) -> tuple[np.ndarray, np.ndarray] | None:
        got = arrays.get((metric, ""))
        if got is None:
            return None
        order = np.argsort(got[0], kind="stable")
        return got[0][order], got[1][order]

    inp, tm, lag = job(Metric.INPUT_RATE), job(Metric.TASKMANAGERS), job(Metric.LAG)
    if inp is not None and tm is not None and meta.coefficients:
        ideal = mx.ideal_resources(inp[1], meta.coefficients, meta.min_parallelism)
        prov = mx.provisioning(inp[0], ideal, tm[0], tm[1], end)
        pieces.spec = SpecFacts(prov.accuracy_u, prov.accuracy_o, prov.timeshare_u, prov.timeshare_o,
                                mx.time_weighted_mean(inp[0], ideal, end))
    if lag is not None:
        pieces.excess = _excess_facts(inp, lag)
    pieces.qos = _qos(arrays, start, meta.period_s, meta.slo_latency_s, meta.slo_throughput_ratio)
    return pieces


def _excess_facts(inp: tuple[np.ndarray, np.ndarray] | None, lag: tuple[np.ndarray, np.ndarray]) -> ExcessFacts:
    busy = np.nonzero(inp[1] > 0)[0] if inp is not None else np.array([], dtype=int)
    stop = math.nan
    if inp is not None and len(busy) and busy[-1] + 1 < len(inp[0]):
        stop = float(inp[0][busy[-1] + 1])
    drained = math.nan
    if not math.isnan(stop):
        ok = (lag[0] >= stop) & (lag[1] <= 1.0)
        if ok.any():
            drained = float(lag[0][ok][0])
    return ExcessFacts(stop, drained, float(lag[0][-1]))


def _qos(arrays: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]], start: float, period_s: float,
         slo_latency_s: float, ratio: float) -> tuple[int, int]:
    """Align input, throughput and latency on their union of timestamps (NaN where a series has no sample)."""
    series = {m: arrays.get((m, "")) for m in (Metric.INPUT_RATE, Metric.THROUGHPUT, Metric.LATENCY_KAFKA)}
    if series[Metric.INPUT_RATE] is None or series[Metric.THROUGHPUT] is None:
        return 0, 0
    frames = [pd.Series(v[1], index=v[0], name=m).groupby(level=0).mean() for m, v in series.items() if v is not None]
    table = pd.concat(frames, axis=1).sort_index()
    lat = table[Metric.LATENCY_KAFKA].to_numpy(float) if Metric.LATENCY_KAFKA in table else None
    return mx.control_step_violations(table.index.to_numpy(float), table[Metric.INPUT_RATE].to_numpy(float),
                                      table[Metric.THROUGHPUT].to_numpy(float), lat, period_s, start,
                                      slo_latency_s, ratio)


def summarise(refs: list[RunRef], progress: Callable[[int], Any] | None = None) -> AnalysisResult:
    """The per-run summary of every run, computed with pandas."""
    rows: list[dict[str, Any]] = []
    conv: list[dict[str, Any]] = []
    ops: list[dict[str, Any]] = []
    stats: list[dict[str, Any]] = []
    for ref in refs:
        df = read_timeseries(ref)
        pieces = run_pieces(ref, df)
        event_cols, stages = event_metrics(ref.meta, ref.events, pieces.run_end)
        rows.append(assemble_row(ref.meta, pieces, event_cols))
        conv.extend(convergence_rows(ref.meta, stages))
        ops.extend(operator_rows(ref.meta, pieces))
        stats.extend({"run_id": ref.meta.run_id, "metric": m, "operator": op, **vars(st)}
                     for (m, op), st in pieces.series.items())
        if progress is not None:
            progress(1)
    return AnalysisResult(
        summary=pd.DataFrame(rows),
        convergence=pd.DataFrame(conv),
        operators=pd.DataFrame(ops),
        series_stats=pd.DataFrame(stats, columns=SERIES_STATS_COLUMNS),
    )
