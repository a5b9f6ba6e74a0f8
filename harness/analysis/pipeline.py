"""`bench analyze`: results directory in, summaries and comparison tables out.

Output layout (default `<results>/analysis/`):
  runs.csv / runs.parquet   per-run summary (one row per run record)
  cells.csv                 per-cell mean, `_ci` (95 % t half-width), `_n`
  convergence.csv           per run and stage: actions, converged, time
  operators.csv             per run and operator: time-weighted parallelism, rates, ...
  crash_rates.csv           flagged runs per autoscaler
  tables/<matrix>/<query>-<pattern>-<kind>.{csv,md,tex}, tables/index.md
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from harness.analysis import pandas_engine
from harness.analysis.aggregate import aggregate_cells, crash_rates
from harness.analysis.loader import RunRef, discover
from harness.analysis.summary import AnalysisResult
from harness.analysis.tables import build_tables, write_tables

Engine = Literal["spark", "pandas"]


@dataclass(frozen=True)
class AnalysisOutputs:
    out_dir: Path
    result: AnalysisResult
    cells: pd.DataFrame
    tables: list[Path]


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
        return result, aggregate_cells(result.summary)
    from harness.analysis import spark_jobs

    if progress:
        progress("starting Spark")
    spark = spark_jobs.build_session(master)
    try:
        result = spark_jobs.summarise(spark, refs, progress=progress)
        if progress:
            progress("aggregating cells")
        cells = spark_jobs.aggregate_cells(spark, result.summary)
    finally:
        spark.stop()
    return result, cells


def write_outputs(out_dir: Path, result: AnalysisResult, cells: pd.DataFrame) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result.summary.to_csv(out_dir / "runs.csv", index=False)
    result.summary.to_parquet(out_dir / "runs.parquet", index=False)
    cells.to_csv(out_dir / "cells.csv", index=False)
    result.convergence.to_csv(out_dir / "convergence.csv", index=False)
    result.operators.to_csv(out_dir / "operators.csv", index=False)
    crash_rates(result.summary).to_csv(out_dir / "crash_rates.csv", index=False)
    return write_tables(build_tables(cells, result.convergence), out_dir / "tables")


def analyze(results_dir: Path, out_dir: Path | None = None, engine: Engine = "spark", master: str = "local[*]",
            progress: Callable[[str], Any] | None = None) -> AnalysisOutputs:
    refs = discover(Path(results_dir))
    if not refs:
        raise FileNotFoundError(f"no run records (run.yaml) under {results_dir}")
    result, cells = summarise(refs, engine, master, progress)
    out = Path(out_dir) if out_dir else default_out(results_dir)
    if progress:
        progress("writing tables")
    tables = write_outputs(out, result, cells)
    return AnalysisOutputs(out, result, cells, tables)


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
