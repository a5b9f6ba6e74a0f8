"""`bench compare A B [C ...]`: every later side against the first, metric by metric.

Each side is a selection of runs (`harness.analysis.selection`). A run's numbers are its per-run
summary row - read from `bench analyze`'s runs.parquet when that analysis is fresh, else computed
with the pandas engine for the selected runs only. The metrics are the summary's own numeric
columns (`aggregate.metric_columns`), so a column added to the summary is compared without a change
here; a metric no run of any side measured is left out (SPEC and SASO where there is no ideal, ...),
and so is one that is equal on every run (a fixed target, say), listed in `left_out`.

Interrupted runs are left out, as in the per-cell means; failed runs count (failures are data).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.aggregate import metric_columns
from harness.analysis.meta import RunMeta
from harness.analysis.selection import SelectionError, read_metas, select_side, side_folder
from harness.analysis.significance import Difference, SideStats, describe, difference
from harness.run_status import RunStatus

# bookkeeping columns of the summary that are not a measure of the autoscaler
NOT_COMPARED = {"repetition", "seed", "duration_s"}


@dataclass(frozen=True)
class Side:
    spec: str  # as the user wrote it
    runs: pd.DataFrame  # summary rows of the runs that count
    interrupted: int  # runs selected but left out

    @property
    def n_runs(self) -> int:
        return len(self.runs)


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    baseline: SideStats
    other: SideStats
    difference: Difference

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "baseline": self.baseline.as_dict(), "other": self.other.as_dict(),
                **self.difference.as_dict()}


@dataclass(frozen=True)
class PairComparison:
    baseline: str
    other: str
    metrics: list[MetricComparison]


@dataclass
class Comparison:
    results_dir: Path
    sides: list[Side]
    metrics: list[str]
    pairs: list[PairComparison]
    left_out: dict[str, str] = field(default_factory=dict)  # metric -> why
    source: str = ""  # where the per-run numbers came from

    def stats(self, side: int, metric: str) -> SideStats:
        return describe(self.sides[side].runs[metric].astype(float)) if metric in self.sides[side].runs \
            else describe([])

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": str(self.results_dir),
            "source": self.source,
            "sides": [{"side": s.spec, "runs": s.n_runs, "interrupted_left_out": s.interrupted,
                       "run_ids": [str(r) for r in s.runs["run_id"]]} for s in self.sides],
            "metrics": self.metrics,
            "left_out": self.left_out,
            "comparisons": [{"baseline": p.baseline, "other": p.other,
                             "metrics": [m.as_dict() for m in p.metrics]} for p in self.pairs],
        }


def run_summaries(results_dir: Path, metas: list[RunMeta],
                  progress: Callable[[str], Any] | None = None) -> tuple[pd.DataFrame, str]:
    """Summary rows of these runs: from a fresh `bench analyze`, else computed now with pandas."""
    from harness.analysis import freshness
    from harness.analysis.pipeline import default_out

    out = default_out(results_dir)
    wanted = {m.run_id for m in metas}
    if (out / "runs.parquet").exists() and freshness.check(results_dir, out).fresh:
        runs = pd.read_parquet(out / "runs.parquet")
        runs = runs[runs["run_id"].astype(str).isin(wanted)]
        if set(runs["run_id"].astype(str)) == wanted:
            return runs.reset_index(drop=True), f"{out / 'runs.parquet'}"
    from harness.analysis import pandas_engine
    from harness.analysis.loader import RunRef, read_events

    if progress:
        progress(f"summarising {len(metas)} runs with pandas")
    refs = []
    for m in metas:
        ts = m.path / "timeseries.parquet"
        refs.append(RunRef(m, ts if ts.exists() else None, read_events(m.path)))
    return pandas_engine.summarise(refs).summary, "computed now (pandas engine; no fresh `bench analyze`)"


def compared_metrics(sides: list[Side], wanted: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The summary's metric columns, minus those nobody measured or that never vary; `wanted` picks some."""
    frames = [s.runs for s in sides]
    everything = pd.concat(frames, ignore_index=True)
    columns = [c for c in metric_columns(everything) if c not in NOT_COMPARED]
    if wanted:
        unknown = [w for w in wanted if w not in columns]
        if unknown:
            raise SelectionError(f"--metric {', '.join(unknown)}: not a summary metric; valid: {', '.join(columns)}")
        return list(wanted), {}
    kept, left_out = [], {}
    for c in columns:
        values = everything[c].astype(float).to_numpy()
        measured = values[~np.isnan(values)]
        if len(measured) == 0:
            left_out[c] = "not measured in any run"
        elif np.all(measured == measured[0]) and all(s.runs[c].notna().all() for s in sides):
            left_out[c] = f"equal on every run ({_short(float(measured[0]))})"
        else:
            kept.append(c)
    return kept, left_out


def _short(v: float) -> str:
    return f"{v:.4g}" if math.isfinite(v) else str(v)


def _narrow_selection(results_dir: Path, specs: list[str]) -> list[list[RunMeta]] | None:
    """Every side selected from the run records of its own folder only (`selection.side_folder`), so two
    cells of a large results folder do not mean reading every run.yaml in it; None when a side needs the
    whole folder (a filter, a bare cell id) or is not found in its folder (the full search then gives the
    same runs or the error that names what there is)."""
    folders = [side_folder(spec, results_dir) for spec in specs]
    if any(f is None for f in folders):
        return None
    read: dict[Path, list[RunMeta]] = {}
    chosen = []
    for spec, folder in zip(specs, folders, strict=True):
        assert folder is not None
        if folder not in read:
            read[folder] = read_metas(results_dir, within=folder)[0]
        try:
            chosen.append(select_side(spec, read[folder], results_dir))
        except SelectionError:
            return None
    return chosen


def compare(results_dir: Path, specs: list[str], metrics: list[str] | None = None,
            progress: Callable[[str], Any] | None = None) -> Comparison:
    """Select every side, summarise its runs and compare each later side with the first."""
    if len(specs) < 2:
        raise SelectionError("compare needs at least two sides (A B [C ...])")
    results_dir = Path(results_dir)
    chosen = _narrow_selection(results_dir, specs)
    if chosen is None:
        metas, _unreadable = read_metas(results_dir)
        if not metas:
            raise SelectionError(f"{results_dir}: no run records (run.yaml) found")
        chosen = [select_side(spec, metas, results_dir) for spec in specs]
    union = {m.run_id: m for side in chosen for m in side}
    summary, source = run_summaries(results_dir, list(union.values()), progress)
    summary = summary.assign(run_id=summary["run_id"].astype(str))
    sides = []
    for spec, side in zip(specs, chosen, strict=True):
        ids = [m.run_id for m in side if m.status != RunStatus.INTERRUPTED]
        rows = summary[summary["run_id"].isin(ids)].sort_values("run_id").reset_index(drop=True)
        if rows.empty:
            raise SelectionError(f"side {spec!r}: all {len(side)} selected run(s) were interrupted")
        sides.append(Side(spec, rows, len(side) - len(ids)))
    names, left_out = compared_metrics(sides, metrics)
    pairs = []
    for other in sides[1:]:
        rows = [MetricComparison(m, describe(sides[0].runs[m].astype(float)), describe(other.runs[m].astype(float)),
                                 difference(sides[0].runs[m].astype(float), other.runs[m].astype(float)))
                for m in names]
        pairs.append(PairComparison(sides[0].spec, other.spec, rows))
    return Comparison(results_dir, sides, names, pairs, left_out, source)
