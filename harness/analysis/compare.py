"""`bench compare A B [C ...]`: every later side against the first, metric by metric.

Each side is a selection of runs (`harness.analysis.selection`). A run's numbers are its per-run
summary row - read from `bench analyze`'s runs.parquet when that analysis is fresh, else computed
with the pandas engine for the selected runs only. The metrics are the summary's own numeric
columns (`columns.NOT_METRICS` names the others), so a column added to the summary is compared
without a change here; a metric no run of any side measured is left out (SPEC and SASO where there
is no ideal, ...), and so is one that is equal on every run (a fixed target, say), listed in `left_out`.

Interrupted runs are left out, as in the per-cell means; failed runs count (failures are data).

With a fresh analysis nothing here imports pandas: the rows are read with pyarrow into one float
array per metric (`RunTable`), which is all the statistics need (issue 12: compare in under 2 s).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from harness.analysis.columns import NOT_METRICS
from harness.analysis.meta import RunMeta
from harness.analysis.selection import SelectionError, read_metas, select_side, side_folder
from harness.analysis.significance import Difference, SideStats, describe, difference
from harness.run_status import RunStatus

if TYPE_CHECKING:
    import pandas as pd

# bookkeeping columns of the summary that are not a measure of the autoscaler
NOT_COMPARED = {"repetition", "seed", "duration_s"}


@dataclass(frozen=True)
class RunTable:
    """Summary rows of some runs as columns: their ids, and one float array per metric (NaN: not measured)."""

    run_ids: list[str]
    values: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.run_ids)

    def __contains__(self, metric: object) -> bool:
        return metric in self.values

    def __getitem__(self, metric: str) -> np.ndarray:
        return self.values[metric]

    @classmethod
    def from_arrow(cls, table: pa.Table) -> RunTable:
        """Numeric and boolean columns that are not keys are metrics (as `aggregate.metric_columns`)."""
        values = {}
        for name, column in zip(table.column_names, table.columns, strict=True):
            kind = column.type
            if name in NOT_METRICS or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                                           or pa.types.is_boolean(kind)):
                continue
            # through Python values: pyarrow's to_numpy imports pandas (~0.5 s), its cast pyarrow.compute (~0.2 s)
            values[name] = np.array([math.nan if v is None else float(v) for v in column.to_pylist()], dtype=float)
        return cls([str(r) for r in table.column("run_id").to_pylist()], values)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> RunTable:
        return cls.from_arrow(pa.Table.from_pandas(frame, preserve_index=False))

    def rows(self, run_ids: list[str]) -> RunTable:
        """These runs' rows, sorted by run id."""
        where = {r: i for i, r in enumerate(self.run_ids)}
        ids = sorted(r for r in set(run_ids) if r in where)
        index = np.array([where[r] for r in ids], dtype=int)
        return RunTable(ids, {k: v[index] for k, v in self.values.items()})


@dataclass(frozen=True)
class Side:
    spec: str  # as the user wrote it
    runs: RunTable  # summary rows of the runs that count
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
        return describe(self.sides[side].runs[metric]) if metric in self.sides[side].runs else describe([])

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": str(self.results_dir),
            "source": self.source,
            "sides": [{"side": s.spec, "runs": s.n_runs, "interrupted_left_out": s.interrupted,
                       "run_ids": list(s.runs.run_ids)} for s in self.sides],
            "metrics": self.metrics,
            "left_out": self.left_out,
            "comparisons": [{"baseline": p.baseline, "other": p.other,
                             "metrics": [m.as_dict() for m in p.metrics]} for p in self.pairs],
        }


def run_summaries(results_dir: Path, metas: list[RunMeta],
                  progress: Callable[[str], Any] | None = None) -> tuple[RunTable, str]:
    """Summary rows of these runs: from a fresh `bench analyze`, else computed now with pandas."""
    import pyarrow.parquet as pq

    from harness.analysis import freshness

    out = freshness.default_out(results_dir)
    wanted = {m.run_id for m in metas}
    if (out / "runs.parquet").exists() and freshness.check(results_dir, out).fresh:
        # not read_table nor Table.filter: both import pandas (pyarrow.dataset, pandas_compat)
        every = RunTable.from_arrow(pq.ParquetFile(out / "runs.parquet").read())
        if wanted <= set(every.run_ids):
            return every.rows(sorted(wanted)), f"{out / 'runs.parquet'}"
    from harness.analysis import pandas_engine
    from harness.analysis.loader import RunRef, read_events

    if progress:
        progress(f"summarising {len(metas)} runs with pandas")
    refs = []
    for m in metas:
        ts = m.path / "timeseries.parquet"
        refs.append(RunRef(m, ts if ts.exists() else None, read_events(m.path)))
    return (RunTable.from_frame(pandas_engine.summarise(refs).summary),
            "computed now (pandas engine; no fresh `bench analyze`)")


def compared_metrics(sides: list[Side], wanted: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The summary's metric columns, minus those nobody measured or that never vary; `wanted` picks some."""
    columns = [c for c in dict.fromkeys(c for s in sides for c in s.runs.values) if c not in NOT_COMPARED]
    if wanted:
        unknown = [w for w in wanted if w not in columns]
        if unknown:
            raise SelectionError(f"--metric {', '.join(unknown)}: not a summary metric; valid: {', '.join(columns)}")
        return list(wanted), {}
    kept, left_out = [], {}
    for c in columns:
        per_side = [s.runs[c] if c in s.runs else np.full(len(s.runs), np.nan) for s in sides]
        values = np.concatenate(per_side)
        measured = values[~np.isnan(values)]
        if len(measured) == 0:
            left_out[c] = "not measured in any run"
        elif np.all(measured == measured[0]) and not any(np.isnan(v).any() for v in per_side):
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
    sides = []
    for spec, side in zip(specs, chosen, strict=True):
        ids = [m.run_id for m in side if m.status != RunStatus.INTERRUPTED]
        counted = summary.rows(ids)
        if not len(counted):
            raise SelectionError(f"side {spec!r}: all {len(side)} selected run(s) were interrupted")
        sides.append(Side(spec, counted, len(side) - len(ids)))
    names, left_out = compared_metrics(sides, metrics)
    pairs = []
    for other in sides[1:]:
        rows = [MetricComparison(m, describe(sides[0].runs[m]), describe(other.runs[m]),
                                 difference(sides[0].runs[m], other.runs[m]))
                for m in names]
        pairs.append(PairComparison(sides[0].spec, other.spec, rows))
    return Comparison(results_dir, sides, names, pairs, left_out, source)
