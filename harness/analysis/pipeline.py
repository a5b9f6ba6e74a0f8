"""`bench analyze`: results directory in, summaries and comparison tables out.

Output layout (default `<results>/analysis/`):
  runs.csv / runs.parquet   per-run summary (one row per run record)
  cells.csv                 per-cell mean, `_ci` (95 % t half-width), `_n`
  convergence.csv           per run and stage: actions, converged, time
  operators.csv             per run and operator: time-weighted parallelism, rates, ...
  crash_rates.csv           per autoscaler: runs, flagged, crashed, crash rate, interrupted
  faults.csv                per injected fault: kind, time, recovered, recovery time
  fault_recovery.csv        per autoscaler and fault kind: mean recovery time (+- CI), recovered
  skipped.csv               run records that could not be read (path, why)
  manifest.json             the run records analysed (for `harness.analysis.freshness`)
  tables/<matrix>/<query>-<pattern>-<kind>.{csv,md,tex}, tables/index.md

Interrupted runs are summarised (runs.csv) but left out of cells, intervals and crash
rates; cells.csv counts them in `interrupted`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from harness.analysis import freshness, pandas_engine
from harness.analysis.aggregate import aggregate_cells, attach_interrupted, crash_rates, split_interrupted
from harness.analysis.fault_recovery import fault_rows, recovery_summary
from harness.analysis.loader import RunRef, SkippedRecord, discover_checked
from harness.analysis.summary import AnalysisResult
from harness.analysis.tables import build_tables, write_tables

Engine = Literal["spark", "pandas"]


@dataclass(frozen=True)
class AnalysisOutputs:
    out_dir: Path
    result: AnalysisResult
    cells: pd.DataFrame
    tables: list[Path]
    skipped: list[SkippedRecord] = field(default_factory=list)
    fault_recovery: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def interrupted(self) -> int:
        s = self.result.summary
        return int((s["status"] == "interrupted").sum()) if "status" in s else 0


def default_out(results_dir: Path) -> Path:
    return Path(results_dir) / "analysis"


def summarise(refs: list[RunRef], engine: Engine = "spark", master: str = "local[*]",
              progress: Callable[[str], Any] | None = None) -> tuple[AnalysisResult, pd.DataFrame]:
    """Per-run summary and per-cell aggregates with the chosen engine."""
    if engine == "pandas":
        done = [0]

        def tick(n: int) -> None:
            done[0] += n
            if progress:
                progress(f"run {done[0]}/{len(refs)}")

        result = pandas_engine.summarise(refs, progress=tick)
        kept, stopped = split_interrupted(result.summary)
        return result, attach_interrupted(aggregate_cells(kept), stopped)
    from harness.analysis import spark_jobs

    if progress:
        progress("starting Spark")
    spark = spark_jobs.build_session(master)
    try:
        result = spark_jobs.summarise(spark, refs, progress=progress)
        if progress:
            progress("aggregating cells")
        kept, stopped = split_interrupted(result.summary)
        cells = attach_interrupted(spark_jobs.aggregate_cells(spark, kept), stopped)
    finally:
        spark.stop()
    return result, cells


def write_outputs(out_dir: Path, result: AnalysisResult, cells: pd.DataFrame,
                  faults: pd.DataFrame | None = None, skipped: list[SkippedRecord] | None = None) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result.summary.to_csv(out_dir / "runs.csv", index=False)
    result.summary.to_parquet(out_dir / "runs.parquet", index=False)
    cells.to_csv(out_dir / "cells.csv", index=False)
    result.convergence.to_csv(out_dir / "convergence.csv", index=False)
    result.operators.to_csv(out_dir / "operators.csv", index=False)
    crash_rates(result.summary).to_csv(out_dir / "crash_rates.csv", index=False)
    faults = faults if faults is not None else pd.DataFrame()
    faults.to_csv(out_dir / "faults.csv", index=False)
    recovery_summary(faults).to_csv(out_dir / "fault_recovery.csv", index=False)
    pd.DataFrame([{"path": str(s.path), "why": s.why} for s in skipped or []],
                 columns=["path", "why"]).to_csv(out_dir / "skipped.csv", index=False)
    return write_tables(build_tables(cells, result.convergence), out_dir / "tables")


class NoRunRecords(FileNotFoundError):
    """A results directory without any (readable) run record."""


def analyze(results_dir: Path, out_dir: Path | None = None, engine: Engine = "spark", master: str = "local[*]",
            progress: Callable[[str], Any] | None = None,
            warn: Callable[[SkippedRecord], Any] | None = None) -> AnalysisOutputs:
    refs, skipped = discover_checked(Path(results_dir), warn)
    if not refs:
        extra = f" ({len(skipped)} unreadable, skipped)" if skipped else ""
        raise NoRunRecords(f"{results_dir}: no run records (run.yaml) found{extra}")
    result, cells = summarise(refs, engine, master, progress)
    out = Path(out_dir) if out_dir else default_out(results_dir)
    if progress:
        progress("writing tables")
    faults = fault_rows(refs)
    tables = write_outputs(out, result, cells, faults, skipped)
    freshness.write_manifest(out, results_dir, {"engine": engine, "skipped": len(skipped)})
    return AnalysisOutputs(out, result, cells, tables, skipped, recovery_summary(faults))


def load_outputs(out_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(runs, cells, convergence, operators) as written by `analyze`."""
    out_dir = Path(out_dir)

    def read(name: str) -> pd.DataFrame:
        path = out_dir / name
        try:
            return pd.read_csv(path) if path.exists() else pd.DataFrame()
        except pd.errors.EmptyDataError:
            return pd.DataFrame()

    runs = pd.read_parquet(out_dir / "runs.parquet") if (out_dir / "runs.parquet").exists() else read("runs.csv")
    return runs, read("cells.csv"), read("convergence.csv"), read("operators.csv")
