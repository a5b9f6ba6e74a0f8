"""From `Reductions` to the per-run rows: shared by both engines.

`finish` adds each series' last interval (it holds until the run's end), turns
the facts into `summary.RunPieces` and assembles one row per run with the
event-derived columns (`events.event_metrics`); `analyse` is the whole path for
a batch of runs - the unit of work the pandas engine runs in its process and
the Spark engine on its workers. `RunRows` collects batches and builds the
frames once, so both engines' outputs are the same whatever the batching.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.events import event_metrics
from harness.analysis.fault_recovery import FAULT_COLUMNS, fault_rows
from harness.analysis.loader import RunRef, SkippedRecord, load_refs
from harness.analysis.papers import SCORE_COLUMNS
from harness.analysis.reductions import Reductions, reduce
from harness.analysis.summary import (
    SERIES_STATS_COLUMNS,
    AnalysisResult,
    RunPieces,
    SpecFacts,
    assemble_row,
    convergence_rows,
    operator_rows,
    series_from_frame,
)


def finish_series(series: pd.DataFrame, bounds: pd.DataFrame) -> pd.DataFrame:
    """Add each series' last interval (last sample -> run end, unless the series ends in a gap):
    time-weighted sum, span and mean."""
    df = series.merge(bounds[["rid", "run_end"]], on="rid", how="left")
    held = df["tail"].astype(float)
    tail = (df["run_end"] - df["last_ts"]).clip(lower=0.0).where(held.notna(), 0.0)
    df["tw_sum"] = df["area"].astype(float).fillna(0.0) + held.fillna(0.0) * tail
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


@dataclass
class RunRows:
    """Finished per-run output of some runs; `result()` builds the frames once, whatever the batching."""

    summary: list[dict[str, Any]] = field(default_factory=list)
    convergence: list[dict[str, Any]] = field(default_factory=list)
    operators: list[dict[str, Any]] = field(default_factory=list)
    series_stats: list[pd.DataFrame] = field(default_factory=list)
    faults: list[pd.DataFrame] = field(default_factory=list)
    skipped: list[SkippedRecord] = field(default_factory=list)

    def extend(self, other: RunRows) -> None:
        self.summary.extend(other.summary)
        self.convergence.extend(other.convergence)
        self.operators.extend(other.operators)
        self.series_stats.extend(other.series_stats)
        self.faults.extend(other.faults)
        self.skipped.extend(other.skipped)

    def result(self) -> AnalysisResult:
        stats = [f for f in self.series_stats if len(f)]
        faults = [f for f in self.faults if len(f)]
        return AnalysisResult(
            pd.DataFrame(self.summary), pd.DataFrame(self.convergence), pd.DataFrame(self.operators),
            pd.concat(stats, ignore_index=True) if stats else pd.DataFrame(columns=SERIES_STATS_COLUMNS),
            pd.concat(faults, ignore_index=True) if faults else pd.DataFrame(columns=FAULT_COLUMNS),
            list(self.skipped))


def finish(refs: Sequence[RunRef], red: Reductions) -> RunRows:
    """Per-run summary, convergence and operator rows from an engine's reductions of `refs`."""
    run_ids = np.array([r.meta.run_id for r in refs], dtype=object)
    stats = finish_series(red.series, red.bounds)
    stats["run_id"] = run_ids[stats["rid"].to_numpy(int)] if len(stats) else []
    stats = stats[SERIES_STATS_COLUMNS].reset_index(drop=True)
    series = series_from_frame(stats)
    bounds_by = {int(r.rid): (float(r.run_start), float(r.run_end)) for r in red.bounds.itertuples()}
    prov_by = {int(r.rid): r for r in finish_provisioning(red.provisioning, red.bounds).itertuples()}
    scores_by = {int(r["rid"]): {c: _nan(r[c]) for c in SCORE_COLUMNS} for r in red.scores.to_dict("records")}
    out = RunRows(series_stats=[stats], faults=[fault_rows(refs)])
    for rid, ref in enumerate(refs):
        start, end = bounds_by.get(rid, (0.0, 0.0))
        pieces = RunPieces(start, end, series.get(ref.meta.run_id, {}), scores=scores_by.get(rid, {}))
        p = prov_by.get(rid)
        if p is not None and ref.meta.coefficients and _nan(p.period) > 0:
            pieces.spec = SpecFacts(_nan(p.accuracy_u), _nan(p.accuracy_o), _nan(p.timeshare_u),
                                    _nan(p.timeshare_o), _nan(p.ideal_avg))
        event_cols, stages = event_metrics(ref.meta, ref.events, end)
        out.summary.append(assemble_row(ref.meta, pieces, event_cols))
        out.convergence.extend(convergence_rows(ref.meta, stages))
        out.operators.extend(operator_rows(ref.meta, pieces))
    return out


def analyse(refs: Sequence[RunRef]) -> RunRows:
    """Finished rows of `refs`: the unit of work of both engines (Spark runs it per batch on its workers)."""
    return finish(refs, reduce(refs))


def analyse_dirs(run_dirs: Sequence[Path], results_dir: Path) -> RunRows:
    """`analyse` of run directories: run.yaml, events and timeseries read here; unreadable records skipped."""
    refs, skipped = load_refs(list(run_dirs), results_dir)
    rows = analyse(refs)
    rows.skipped.extend(skipped)
    return rows


