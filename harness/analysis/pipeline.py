"""`bench analyze`: results directory in, summaries and comparison tables out.

Output layout (default `<results>/analysis/`):
  runs.csv / runs.parquet   per-run summary (one row per run record)
  cells.csv                 per-cell mean, `_ci` (95 % t half-width), `_n`
  convergence.csv           per run and stage: actions, converged, time
  operators.csv             per run and operator: time-weighted parallelism, rates, ...
  crash_rates.csv           flagged runs per autoscaler
  tables/<matrix>/<query>-<pattern>-<kind>.{csv,md,tex}, tables/index.md
  analysis.log              what ran and how long it took; Spark's and the JVM's log lines

Engines: both compute the same `reductions.Reductions` and share everything after
them; `engine.choose_engine` picks one for `auto`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis import pandas_engine
from harness.analysis.aggregate import aggregate_cells, crash_rates
from harness.analysis.engine import DEFAULT_MASTER, LOG_NAME, SPARK_MIN_RUNS, Engine, EngineChoice, choose_engine
from harness.analysis.summary import AnalysisResult
from harness.analysis.tables import build_tables, write_tables
from harness.logs import log_to
from harness.record import find_run_dirs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnalysisOutputs:
    out_dir: Path
    result: AnalysisResult
    cells: pd.DataFrame
    tables: list[Path]
    engine: Engine


def default_out(results_dir: Path) -> Path:
    return Path(results_dir) / "analysis"


def summarise(run_dirs: Sequence[Path], results_dir: Path, engine: Engine = "pandas",
              master: str = DEFAULT_MASTER, progress: Callable[[str], Any] | None = None,
              log_file: Path | None = None) -> tuple[AnalysisResult, pd.DataFrame]:
    """Per-run summary (by the chosen engine) and per-cell aggregates of the run directories."""
    if engine == "pandas":
        done = [0]

        def tick(n: int) -> None:
            done[0] += n
            if progress:
                progress(f"run {done[0]}/{len(run_dirs)}")

        result = pandas_engine.summarise_dirs(run_dirs, results_dir, progress=tick)
    else:
        from harness.analysis import spark_jobs

        result = spark_jobs.summarise_dirs(run_dirs, results_dir, master, progress=progress, log_file=log_file)
    return result, aggregate_cells(result.summary)


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


def analyze(results_dir: Path, out_dir: Path | None = None, engine: EngineChoice = "auto",
            master: str | None = None, progress: Callable[[str], Any] | None = None) -> AnalysisOutputs:
    """Discover the run records, summarise them with the engine `engine` picks, write every output.

    Log lines (ours, Spark's, the JVM's) go to `<out>/analysis.log`, not the console.
    """
    out = Path(out_dir) if out_dir else default_out(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    log_file = out / LOG_NAME
    log_file.unlink(missing_ok=True)
    with log_to(log_file):
        started = time.perf_counter()
        run_dirs = find_run_dirs(Path(results_dir))
        if not run_dirs:
            raise FileNotFoundError(f"no run records (run.yaml) under {results_dir}")
        chosen = choose_engine(engine, len(run_dirs), master)
        log.info("%d run records under %s; engine %s (asked: %s, master %s; auto uses Spark from %d runs)",
                 len(run_dirs), results_dir, chosen, engine, master, SPARK_MIN_RUNS)
        result, cells = summarise(run_dirs, results_dir, chosen, master or DEFAULT_MASTER, progress, log_file)
        log.info("summaries and cell aggregates with %s in %.1f s", chosen, time.perf_counter() - started)
        if progress:
            progress("writing tables")
        tables = write_outputs(out, result, cells)
        log.info("%d table files written; %.1f s in all", len(tables), time.perf_counter() - started)
    return AnalysisOutputs(out, result, cells, tables, chosen)


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
