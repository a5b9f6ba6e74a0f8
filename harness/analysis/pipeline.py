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
  analysis.log              what ran and how long it took; Spark's and the JVM's log lines

Interrupted runs are summarised (runs.csv) but left out of cells, intervals and crash
rates; cells.csv counts them in `interrupted`.

Engines: both compute the same `reductions.Reductions` (and fault recoveries) per batch of
runs and share everything after them; `engine.choose_engine` picks one for `auto`.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis import freshness, pandas_engine
from harness.analysis.aggregate import aggregate_cells, attach_interrupted, crash_rates, split_interrupted
from harness.analysis.engine import DEFAULT_MASTER, LOG_NAME, SPARK_MIN_RUNS, Engine, EngineChoice, choose_engine
from harness.analysis.fault_recovery import recovery_summary
from harness.analysis.freshness import default_out as default_out  # defined beside the manifest check
from harness.analysis.loader import SkippedRecord
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
    skipped: list[SkippedRecord] = field(default_factory=list)
    fault_recovery: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def interrupted(self) -> int:
        s = self.result.summary
        return int((s["status"] == "interrupted").sum()) if "status" in s else 0


def summarise(run_dirs: Sequence[Path], results_dir: Path, engine: Engine = "pandas",
              master: str = DEFAULT_MASTER, progress: Callable[[str], Any] | None = None,
              log_file: Path | None = None) -> tuple[AnalysisResult, pd.DataFrame]:
    """Per-run summary (by the chosen engine) and per-cell aggregates of the run directories.

    Interrupted runs are left out of the cells and counted in their `interrupted` column.
    """
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
    kept, stopped = split_interrupted(result.summary)
    return result, attach_interrupted(aggregate_cells(kept), stopped)


def write_outputs(out_dir: Path, result: AnalysisResult, cells: pd.DataFrame) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result.summary.to_csv(out_dir / "runs.csv", index=False)
    result.summary.to_parquet(out_dir / "runs.parquet", index=False)
    cells.to_csv(out_dir / "cells.csv", index=False)
    result.convergence.to_csv(out_dir / "convergence.csv", index=False)
    result.operators.to_csv(out_dir / "operators.csv", index=False)
    crash_rates(result.summary).to_csv(out_dir / "crash_rates.csv", index=False)
    result.faults.to_csv(out_dir / "faults.csv", index=False)
    recovery_summary(result.faults).to_csv(out_dir / "fault_recovery.csv", index=False)
    pd.DataFrame([{"path": str(s.path), "why": s.why} for s in result.skipped],
                 columns=["path", "why"]).to_csv(out_dir / "skipped.csv", index=False)
    return write_tables(build_tables(cells, result.convergence), out_dir / "tables")


class NoRunRecords(FileNotFoundError):
    """A results directory without any (readable) run record."""


def analyze(results_dir: Path, out_dir: Path | None = None, engine: EngineChoice = "auto",
            master: str | None = None, progress: Callable[[str], Any] | None = None,
            warn: Callable[[SkippedRecord], Any] | None = None) -> AnalysisOutputs:
    """Find the run records, summarise them with the engine `engine` picks, write every output.

    Log lines (ours, Spark's, the JVM's) go to `<out>/analysis.log`, not the console. An
    unreadable run record is skipped (`warn` is told, skipped.csv lists it); a directory
    without a readable record raises `NoRunRecords` and leaves nothing behind.
    """
    run_dirs = find_run_dirs(Path(results_dir))
    if not run_dirs:
        raise NoRunRecords(f"{results_dir}: no run records (run.yaml) found")
    out = Path(out_dir) if out_dir else default_out(results_dir)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    log_file = out / LOG_NAME
    log_file.unlink(missing_ok=True)
    with log_to(log_file):
        started = time.perf_counter()
        chosen = choose_engine(engine, len(run_dirs), master)
        log.info("%d run records under %s; engine %s (asked: %s, master %s; auto uses Spark from %d runs)",
                 len(run_dirs), results_dir, chosen, engine, master, SPARK_MIN_RUNS)
        result, cells = summarise(run_dirs, results_dir, chosen, master or DEFAULT_MASTER, progress, log_file)
        log.info("summaries and cell aggregates with %s in %.1f s", chosen, time.perf_counter() - started)
        for s in result.skipped:
            log.warning("%s", s.line())
            if warn is not None:
                warn(s)
        if result.summary.empty:
            if created:
                shutil.rmtree(out, ignore_errors=True)
            raise NoRunRecords(f"{results_dir}: no run records (run.yaml) found "
                               f"({len(result.skipped)} unreadable, skipped)")
        if progress:
            progress("writing tables")
        tables = write_outputs(out, result, cells)
        freshness.write_manifest(out, results_dir, {"engine": chosen, "skipped": len(result.skipped)})
        log.info("%d table files written; %.1f s in all", len(tables), time.perf_counter() - started)
    return AnalysisOutputs(out, result, cells, tables, chosen, result.skipped, recovery_summary(result.faults))


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
