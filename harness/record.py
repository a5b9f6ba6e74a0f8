"""Run records: the one format every backend writes and analysis reads.

`results/<experiment>/<run-id>/` holds
- `run.yaml`: the fully resolved experiment config, versions, seed, host facts;
- `timeseries.parquet`: long format (ts, metric, operator, subtask, value);
- `events.parquet`: decisions, applied actions, faults, phases (ts, kind, reason, data);
- backend artifacts (e.g. `prometheus-snapshot/`, `prometheus-series.parquet`);
- `status`: `completed`, or `failed: <why>`, written last.

The record is assembled in a sibling temp directory and renamed into place,
so a killed run never leaves a directory that looks finished.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from harness.vocabulary import EventKind

# The timeseries' `metric` column holds `harness.vocabulary.Metric` names; operator "" and
# subtask -1 mean job level. The events' `kind` column holds `harness.vocabulary.EventKind` names.
TIMESERIES_SCHEMA = pa.schema(
    [
        ("ts", pa.float64()),
        ("metric", pa.string()),
        ("operator", pa.string()),
        ("subtask", pa.int32()),
        ("value", pa.float64()),
    ]
)

EVENTS_SCHEMA = pa.schema(
    [
        ("ts", pa.float64()),
        ("kind", pa.string()),
        ("reason", pa.string()),
        ("data", pa.string()),  # JSON
    ]
)

STATUS_COMPLETED = "completed"


@dataclass
class EventLog:
    """Append-only list of run events; `data` is kept as a dict until written."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, ts: float, kind: EventKind, reason: str = "", **data: Any) -> None:
        self.rows.append({"ts": float(ts), "kind": EventKind(kind), "reason": reason, "data": data})

    def of_kind(self, kind: EventKind) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["kind"] == kind]

    def to_table(self) -> pa.Table:
        return pa.Table.from_pylist(
            [{**r, "data": json.dumps(r["data"], default=_json_default, sort_keys=True)} for r in self.rows],
            schema=EVENTS_SCHEMA,
        )


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def normalise_timeseries(df: pd.DataFrame) -> pa.Table:
    """Coerce a long-format frame into the record's schema (fills job-level defaults)."""
    df = df.copy()
    if "operator" not in df:
        df["operator"] = ""
    if "subtask" not in df:
        df["subtask"] = -1
    df["operator"] = df["operator"].fillna("").astype(str)
    df["subtask"] = df["subtask"].fillna(-1).astype("int32")
    df["ts"] = df["ts"].astype("float64")
    df["value"] = df["value"].astype("float64")
    df = df[["ts", "metric", "operator", "subtask", "value"]].sort_values(["metric", "operator", "subtask", "ts"])
    return pa.Table.from_pandas(df, schema=TIMESERIES_SCHEMA, preserve_index=False)


def host_facts() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }


def is_complete(run_dir: Path) -> bool:
    status = run_dir / "status"
    return status.exists() and status.read_text().strip() == STATUS_COMPLETED


def write_run_record(
    run_dir: Path,
    run_yaml: dict[str, Any],
    timeseries: pd.DataFrame,
    events: EventLog,
    status: str,
    artifacts: Callable[[Path], dict[str, Any]] | None = None,
) -> Path:
    """Write the whole record into a temp sibling, then rename it into place.

    `artifacts(tmp_dir)` lets a backend add files (e.g. a Prometheus snapshot)
    and returns facts merged into run.yaml under `artifacts`.
    """
    run_dir = Path(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = run_dir.parent / f".{run_dir.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        if artifacts is not None:
            run_yaml = {**run_yaml, "artifacts": artifacts(tmp)}
        with (tmp / "run.yaml").open("w") as fh:
            yaml.safe_dump(_plain(run_yaml), fh, sort_keys=False)
        pq.write_table(normalise_timeseries(timeseries), tmp / "timeseries.parquet")
        pq.write_table(events.to_table(), tmp / "events.parquet")
        (tmp / "status").write_text(status + "\n")
        if run_dir.exists():
            shutil.rmtree(run_dir)
        os.replace(tmp, run_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return run_dir


def _plain(obj: Any) -> Any:
    """YAML-safe copy: numpy scalars, Paths and tuples become plain values."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item") and not isinstance(obj, str | bytes):
        return obj.item()
    return obj


@dataclass(frozen=True)
class RunRecord:
    """A run record read back from disk."""

    path: Path
    meta: dict[str, Any]
    timeseries: pd.DataFrame
    events: pd.DataFrame
    status: str

    @property
    def completed(self) -> bool:
        return self.status == STATUS_COMPLETED

    def series(self, metric: str, operator: str = "", subtask: int = -1) -> pd.Series:
        ts = self.timeseries
        sel = ts[(ts.metric == metric) & (ts.operator == operator) & (ts.subtask == subtask)]
        return pd.Series(sel["value"].to_numpy(), index=sel["ts"].to_numpy(), name=metric)

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        ev = self.events[self.events.kind == kind]
        return [{"ts": r.ts, "reason": r.reason, **json.loads(r.data)} for r in ev.itertuples()]


def read_run_record(run_dir: Path) -> RunRecord:
    run_dir = Path(run_dir)
    status = (run_dir / "status").read_text().strip() if (run_dir / "status").exists() else "missing"
    with (run_dir / "run.yaml").open() as fh:
        meta = yaml.safe_load(fh)
    return RunRecord(
        path=run_dir,
        meta=meta,
        timeseries=pq.read_table(run_dir / "timeseries.parquet").to_pandas(),
        events=pq.read_table(run_dir / "events.parquet").to_pandas(),
        status=status,
    )


def find_run_dirs(results_dir: Path) -> list[Path]:
    """Every run record under a results directory (temp dirs skipped)."""
    return sorted(p.parent for p in Path(results_dir).rglob("run.yaml") if not p.parent.name.startswith("."))
