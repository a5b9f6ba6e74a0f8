"""The seam between the engines and the per-run summary: five small tables of per-run facts.

An engine (pandas or Spark) reads the long-format samples of many runs and
reduces them to `Reductions` - a few rows per run, keyed by `rid` (the run's
index in the list of `RunRef`s). Everything after that is shared:
`finish` adds each series' last interval (it holds until the run's end),
turns the facts into `summary.RunPieces`, and assembles rows with the
event-derived columns. So a new per-run metric that is a function of these
facts (a series' time-weighted mean, max, last value, percentiles, ...) is
added once, in `summary.assemble_row`; only a new kind of reduction over the
samples needs both engines (`pandas_engine.reduce`, `spark_jobs.reduce`) and
a column here, and `tests/analysis/test_engines.py` checks they agree.

Tables (NaN where a fact does not exist):
  bounds        rid, run_start, run_end: first and last job-level sample of the run
  series        rid, metric, operator, area (sum of value x time to the next sample, up to the
                series' last sample), span (seconds from first to last sample), plain_mean, max,
                min, last, last_ts, n, p50, p95 (p50/p95 only for `PERCENTILE_METRICS`)
  provisioning  rid, under, over, t_under, t_over, period, ideal_area, ideal_span, ideal_plain,
                i_last, a_last, last_ts: SPEC sums of ideal vs actual task managers up to the
                run's last input/TM sample (runs with demand coefficients only)
  qos           rid, violations, steps: control steps and QoS violations
  excess        rid, stop_ts, drained_ts, last_lag_ts (runs with a lag series only)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.events import event_metrics
from harness.analysis.loader import RunRef
from harness.analysis.summary import (
    SERIES_STATS_COLUMNS,
    AnalysisResult,
    ExcessFacts,
    RunPieces,
    SpecFacts,
    assemble_row,
    convergence_rows,
    operator_rows,
    series_from_frame,
)
from harness.vocabulary import Metric

# the series each reduction reads (job level, operator ""): named once for both engines
SPEC_INPUT, SPEC_ACTUAL = Metric.INPUT_RATE, Metric.TASKMANAGERS  # ideal(t) from the input rate vs actual TMs
QOS_INPUT, QOS_THROUGHPUT, QOS_LATENCY = Metric.INPUT_RATE, Metric.THROUGHPUT, Metric.LATENCY_KAFKA
EXCESS_INPUT, EXCESS_LAG = Metric.INPUT_RATE, Metric.LAG

BOUNDS_COLUMNS = ["rid", "run_start", "run_end"]
SERIES_COLUMNS = ["rid", "metric", "operator", "area", "span", "plain_mean", "max", "min", "last", "last_ts", "n",
                  "p50", "p95"]
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

    @staticmethod
    def concat(parts: list[Reductions]) -> Reductions:
        """One `Reductions` from engines' batches (each batch's rids are already global)."""
        if not parts:
            return Reductions.empty()

        def cat(frames: list[pd.DataFrame]) -> pd.DataFrame:
            frames = [f for f in frames if len(f)] or frames[:1]
            return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)

        return Reductions(cat([p.bounds for p in parts]), cat([p.series for p in parts]),
                          cat([p.provisioning for p in parts]), cat([p.qos for p in parts]),
                          cat([p.excess for p in parts]))


def finish_series(series: pd.DataFrame, bounds: pd.DataFrame) -> pd.DataFrame:
    """Add each series' last interval (last sample -> run end): time-weighted sum, span and mean."""
    df = series.merge(bounds[["rid", "run_end"]], on="rid", how="left")
    tail = (df["run_end"] - df["last_ts"]).clip(lower=0.0)
    df["tw_sum"] = df["area"].astype(float).fillna(0.0) + df["last"] * tail
    df["span"] = df["span"].astype(float).fillna(0.0) + tail
    df["tw_mean"] = (df["tw_sum"] / df["span"]).where(df["span"] > 0, df["plain_mean"])
    return df


def finish_provisioning(prov: pd.DataFrame, bounds: pd.DataFrame) -> pd.DataFrame:
    """Add the last interval (last sample -> run end) and normalise by the period."""
    df = prov.merge(bounds[["rid", "run_end"]], on="rid", how="left")
    tail = (df["run_end"] - df["last_ts"]).clip(lower=0.0)
    i, a = df["i_last"].astype(float), df["a_last"].astype(float)
    has_both = i.notna() & a.notna()
    zero = 0.0

    def add(col: str, extra: pd.Series) -> pd.Series:
        return df[col].astype(float).fillna(zero) + extra.where(has_both, zero).fillna(zero)

    period = add("period", tail)
    out = pd.DataFrame({"rid": df["rid"]})
    out["accuracy_u"] = add("under", (i - a).clip(lower=0.0) * tail) / period
    out["accuracy_o"] = add("over", (a - i).clip(lower=0.0) * tail) / period
    out["timeshare_u"] = 100.0 * add("t_under", tail.where(i > a, zero)) / period
    out["timeshare_o"] = 100.0 * add("t_over", tail.where(a > i, zero)) / period
    ideal_span = df["ideal_span"].astype(float).fillna(zero) + tail.where(i.notna(), zero)
    ideal_area = df["ideal_area"].astype(float).fillna(zero) + (i * tail).where(i.notna(), zero)
    out["ideal_avg"] = (ideal_area / ideal_span).where(ideal_span > 0, df["ideal_plain"])
    out["period"] = period
    return out


def _nan(v: Any) -> float:
    return math.nan if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def finish(refs: list[RunRef], red: Reductions) -> AnalysisResult:
    """Per-run summary, convergence and operator rows from an engine's reductions (shared by both engines)."""
    run_ids = np.array([r.meta.run_id for r in refs], dtype=object)
    stats = finish_series(red.series, red.bounds)
    stats["run_id"] = run_ids[stats["rid"].to_numpy(int)] if len(stats) else []
    stats = stats[SERIES_STATS_COLUMNS].reset_index(drop=True)
    series = series_from_frame(stats)
    bounds_by = {int(r.rid): (float(r.run_start), float(r.run_end)) for r in red.bounds.itertuples()}
    prov_by = {int(r.rid): r for r in finish_provisioning(red.provisioning, red.bounds).itertuples()}
    qos_by = {int(r.rid): (int(r.violations), int(r.steps)) for r in red.qos.itertuples()}
    excess_by = {int(r.rid): ExcessFacts(_nan(r.stop_ts), _nan(r.drained_ts), _nan(r.last_lag_ts))
                 for r in red.excess.itertuples()}
    rows, conv, ops = [], [], []
    for rid, ref in enumerate(refs):
        start, end = bounds_by.get(rid, (0.0, 0.0))
        pieces = RunPieces(start, end, series.get(ref.meta.run_id, {}), qos=qos_by.get(rid, (0, 0)),
                           excess=excess_by.get(rid))
        p = prov_by.get(rid)
        if p is not None and ref.meta.coefficients and _nan(p.period) > 0:
            pieces.spec = SpecFacts(_nan(p.accuracy_u), _nan(p.accuracy_o), _nan(p.timeshare_u),
                                    _nan(p.timeshare_o), _nan(p.ideal_avg))
        event_cols, stages = event_metrics(ref.meta, ref.events, end)
        rows.append(assemble_row(ref.meta, pieces, event_cols))
        conv.extend(convergence_rows(ref.meta, stages))
        ops.extend(operator_rows(ref.meta, pieces))
    return AnalysisResult(pd.DataFrame(rows), pd.DataFrame(conv), pd.DataFrame(ops), stats)
