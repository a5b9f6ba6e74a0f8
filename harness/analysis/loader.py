"""Find run records under a results directory and read their small parts (run.yaml, events).

A record that cannot be read (a garbled run.yaml, a truncated Parquet file) is skipped with a
one-line reason, never allowed to stop the analysis of the others; the caller reports the count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from harness.analysis.meta import RunMeta, load_meta
from harness.record import EVENTS_SCHEMA, TIMESERIES_SCHEMA, find_run_dirs


@dataclass(frozen=True)
class RunRef:
    meta: RunMeta
    timeseries_path: Path | None  # None when the run wrote no timeseries
    events: list[dict[str, Any]]  # events.parquet's rows (ts, kind, reason, data as JSON text)


@dataclass(frozen=True)
class SkippedRecord:
    path: Path
    why: str

    def line(self) -> str:
        return f"skipped corrupt run record {self.path}: {self.why}"


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
    table = pq.ParquetFile(path, pre_buffer=False).read(use_threads=False)
    missing = [n for n in EVENTS_SCHEMA.names if n not in table.schema.names]
    if missing:
        raise ValueError(f"events.parquet lacks columns {missing}")
    return table.to_pylist()


def _check_timeseries(path: Path) -> None:
    """The footer and schema are readable (a truncated file fails here, before any engine reads it)."""
    schema = pq.read_schema(path)
    missing = [n for n in TIMESERIES_SCHEMA.names if n not in schema.names]
    if missing:
        raise ValueError(f"timeseries.parquet lacks columns {missing}")


def load_ref(run_dir: Path, results_dir: Path | None) -> RunRef:
    """One run record's metadata, events and the path of its samples (raises if any part is unreadable)."""
    run_dir = Path(run_dir)
    meta = load_meta(run_dir, results_dir)
    ts = run_dir / "timeseries.parquet"
    if ts.exists():
        _check_timeseries(ts)
    return RunRef(meta, ts if ts.exists() else None, read_event_rows(run_dir))


def _why(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def load_refs(run_dirs: list[Path], results_dir: Path | None,
              warn: Callable[[SkippedRecord], None] | None = None) -> tuple[list[RunRef], list[SkippedRecord]]:
    """The readable run records among `run_dirs` (in order) and the skipped ones."""
    refs: list[RunRef] = []
    skipped: list[SkippedRecord] = []
    for run_dir in run_dirs:
        try:
            refs.append(load_ref(run_dir, results_dir))
        except Exception as exc:  # noqa: BLE001 - one unreadable record must not stop the rest
            s = SkippedRecord(Path(run_dir), _why(exc))
            skipped.append(s)
            if warn is not None:
                warn(s)
    return refs, skipped


def discover_checked(results_dir: Path,
                     warn: Callable[[SkippedRecord], None] | None = None) -> tuple[list[RunRef], list[SkippedRecord]]:
    """Every readable run record under `results_dir` (completed or not: failures are data) and the skipped ones."""
    return load_refs(find_run_dirs(Path(results_dir)), Path(results_dir), warn)


def discover(results_dir: Path) -> list[RunRef]:
    """The readable run records (see `discover_checked` for the skipped ones)."""
    return discover_checked(results_dir)[0]
