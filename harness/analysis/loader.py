"""Find run records under a results directory and read their small parts (run.yaml, events)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from harness.analysis.meta import RunMeta, load_meta
from harness.record import EVENTS_SCHEMA, find_run_dirs


@dataclass(frozen=True)
class RunRef:
    meta: RunMeta
    timeseries_path: Path | None  # None when the run wrote no timeseries
    events: list[dict[str, Any]]  # events.parquet's rows (ts, kind, reason, data as JSON text)


def read_events(run_dir: Path) -> pd.DataFrame:
    """A run's events as a frame (for figures and notebooks)."""
    path = Path(run_dir) / "events.parquet"
    if not path.exists():
        return EVENTS_SCHEMA.empty_table().to_pandas()
    return pq.read_table(path).to_pandas()


def read_event_rows(run_dir: Path) -> list[dict[str, Any]]:
    """A run's events as plain rows: thousands of runs are read per analysis, and a frame each costs more
    than the few dozen events in it."""
    path = Path(run_dir) / "events.parquet"
    if not path.exists():
        return []
    return pq.ParquetFile(path, pre_buffer=False).read(use_threads=False).to_pylist()


def load_ref(run_dir: Path, results_dir: Path | None) -> RunRef:
    """One run record's metadata, events and the path of its samples."""
    run_dir = Path(run_dir)
    ts = run_dir / "timeseries.parquet"
    return RunRef(load_meta(run_dir, results_dir), ts if ts.exists() else None, read_event_rows(run_dir))


def discover(results_dir: Path) -> list[RunRef]:
    """Every run record under `results_dir`, completed or not (failures are data)."""
    return [load_ref(d, results_dir) for d in find_run_dirs(Path(results_dir))]
