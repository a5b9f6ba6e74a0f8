"""Run records: the one format every backend writes and analysis reads.

`results/<experiment>/<run-id>/` holds
- `run.yaml`: the fully resolved experiment config, versions, seed, host facts;
- `timeseries.parquet`: long format (ts, metric, operator, subtask, value);
- `events.parquet`: decisions, applied actions, faults, phases (ts, kind, reason, data);
- backend artifacts (e.g. `prometheus-snapshot/`, `prometheus-series.parquet`);
- `status`: `completed`, or `failed: <why>`, written last.

The record is assembled in a sibling temp directory and renamed into place,
so a killed run never leaves a directory that looks finished.

Writing and summarising a record needs pyarrow only: pandas is imported when a caller asks a
`RunRecord` for a DataFrame (analysis, figures), so a `sim` run does not pay for it.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness import arrow, yamlio
from harness.host_speed import sha256_mb_per_cpu_s
from harness.vocabulary import EventKind

if TYPE_CHECKING:
    import pandas as pd

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

# a table `timeseries_table` built is in order already: writing it does not sort it again
_SORTED = {b"harness.sorted_by": b"metric,operator,subtask,ts"}


@dataclass
class EventLog:
    """Append-only list of run events; `data` is kept as a dict until written."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, ts: float, kind: EventKind, reason: str = "", **data: Any) -> None:
        self.rows.append({"ts": float(ts), "kind": EventKind(kind), "reason": reason, "data": data})

    def of_kind(self, kind: EventKind) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["kind"] == kind]

    def to_table(self) -> pa.Table:
        return pa.Table.from_arrays(
            [
                arrow.floats([r["ts"] for r in self.rows]),
                arrow.strings(str(r["kind"]) for r in self.rows),
                arrow.strings(r["reason"] for r in self.rows),
                arrow.strings(json.dumps(r["data"], default=_json_default, sort_keys=True) for r in self.rows),
            ],
            schema=EVENTS_SCHEMA,
        )


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def empty_timeseries() -> pa.Table:
    return timeseries_table([], [], [], [], [])


Names = Sequence[str] | tuple[np.ndarray, Sequence[str]]


def timeseries_table(ts: Any, metric: Names, operator: Names, subtask: Any, value: Any) -> pa.Table:
    """Five equally long columns as a table in the record's schema, sorted by (metric, operator, subtask, ts).

    Numbers come as sequences or numpy arrays; names as sequences of str or, for a long column of a few
    names, as (codes, categories) with row i = categories[codes[i]]. Built from numpy buffers (see
    harness.arrow: no pandas, no pyarrow.compute)."""
    m_codes, m_cats = _coded(metric)
    o_codes, o_cats = _coded(operator)
    ts_a = np.asarray(ts, dtype=np.float64)
    sub_a = np.asarray(subtask, dtype=np.int64)
    val_a = np.asarray(value, dtype=np.float64)
    m_rank, o_rank = _ranks(m_cats)[m_codes], _ranks(o_cats)[o_codes]
    order = np.lexsort((ts_a, sub_a, o_rank, m_rank))
    return pa.Table.from_arrays(
        [arrow.floats(ts_a[order]), arrow.strings_from_codes(m_codes[order], m_cats),
         arrow.strings_from_codes(o_codes[order], o_cats), arrow.int32s(sub_a[order]), arrow.floats(val_a[order])],
        schema=TIMESERIES_SCHEMA.with_metadata(_SORTED),
    )


def _coded(names: Names) -> tuple[np.ndarray, list[str]]:
    if isinstance(names, tuple) and len(names) == 2 and isinstance(names[0], np.ndarray):
        return np.asarray(names[0], dtype=np.int64), [str(c) for c in names[1]]
    return arrow.encode(names)  # type: ignore[arg-type]


def _ranks(categories: list[str]) -> np.ndarray:
    """Position of each category in sorted order (sorting by rank = sorting by the strings)."""
    ranks = np.empty(len(categories), dtype=np.int64)
    ranks[sorted(range(len(categories)), key=categories.__getitem__)] = np.arange(len(categories))
    return ranks


def normalise_timeseries(df: pa.Table | pd.DataFrame) -> pa.Table:
    """Coerce a long-format table or frame into the record's schema (fills job-level defaults), sorted."""
    if isinstance(df, pa.Table):
        return _normalise_table(df)
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


def _normalise_table(table: pa.Table) -> pa.Table:
    """The table's columns in the record's schema, sorted (without pandas: see harness.arrow)."""
    if table.schema.equals(TIMESERIES_SCHEMA) and (table.schema.metadata or {}).get(b"harness.sorted_by") == \
            _SORTED[b"harness.sorted_by"]:
        return table
    n = table.num_rows
    missing = [c for c in ("ts", "metric", "value") if c not in table.column_names]
    if missing:
        raise KeyError(f"timeseries table has no {', '.join(missing)} column(s)")
    operator = (arrow.codes(table.column("operator")) if "operator" in table.column_names
                else (np.zeros(n, dtype=np.int64), [""]))
    subtask = (arrow.numbers(table.column("subtask")) if "subtask" in table.column_names else np.full(n, -1.0))
    return timeseries_table(arrow.numbers(table.column("ts")), arrow.codes(table.column("metric")), operator,
                            np.where(np.isnan(subtask), -1, subtask), arrow.numbers(table.column("value")))


def host_facts(speed: bool = False) -> dict[str, Any]:
    """The host a run ran on; with `speed` (runs that measure this host: local, k8s) its CPU speed per
    CPU-second (harness.host_speed, ~0.3 s), so a comparison with a calibrated profile can tell whether both came
    from machines of the same speed. A sim run measures no host and leaves it out (and stays fast)."""
    out: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }
    if speed:
        out["speed_sha256_mb"] = sha256_mb_per_cpu_s()
    return out


def is_complete(run_dir: Path) -> bool:
    status = run_dir / "status"
    return status.exists() and status.read_text().strip() == STATUS_COMPLETED


RUN_LOG = "bench.log"  # the run's log lines: the harness's, librdkafka's (never on the console)


def install_dir(tmp: Path, dest: Path) -> None:
    """Rename the finished directory `tmp` to `dest`. A directory already there is moved aside first and removed
    after: a kill between the two renames leaves no record (the run is redone), never a mix of two."""
    old = dest.parent / f".{dest.name}.old-{os.getpid()}"
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)


def write_run_record(
    run_dir: Path,
    run_yaml: dict[str, Any],
    timeseries: pa.Table | pd.DataFrame,
    events: EventLog,
    status: str,
    artifacts: Callable[[Path], dict[str, Any]] | None = None,
    log_file: Path | None = None,
) -> Path:
    """Write the whole record into a temp sibling, then rename it into place.

    `artifacts(tmp_dir)` lets a backend add files (e.g. a Prometheus snapshot)
    and returns facts merged into run.yaml under `artifacts`; `log_file` (the
    run's log lines so far) is copied in as `RUN_LOG`.
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
            yamlio.dump(_plain(run_yaml), fh, sort_keys=False)
        pq.write_table(normalise_timeseries(timeseries), tmp / "timeseries.parquet")
        pq.write_table(events.to_table(), tmp / "events.parquet")
        if log_file is not None and Path(log_file).exists():
            shutil.copyfile(log_file, tmp / RUN_LOG)
        (tmp / "status").write_text(status + "\n")
        install_dir(tmp, run_dir)
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
    """A run record read back from disk (as pyarrow tables; pandas views on first use)."""

    path: Path
    meta: dict[str, Any]
    table: pa.Table  # timeseries.parquet (metric, operator dictionary-encoded when read from disk)
    events_table: pa.Table  # events.parquet
    status: str

    @property
    def completed(self) -> bool:
        return self.status == STATUS_COMPLETED

    @cached_property
    def timeseries(self) -> pd.DataFrame:
        return arrow.plain_strings(self.table).to_pandas()

    @cached_property
    def events(self) -> pd.DataFrame:
        return self.events_table.to_pandas()

    @cached_property
    def _columns(self) -> dict[str, Any]:
        t = self.table
        metric, metrics = arrow.codes(t.column("metric"))
        operator, operators = arrow.codes(t.column("operator"))
        return {"metric": metric, "metrics": {m: i for i, m in enumerate(metrics)},
                "operator": operator, "operators": {o: i for i, o in enumerate(operators)},
                "subtask": arrow.numbers(t.column("subtask"), np.int64),
                "ts": arrow.numbers(t.column("ts")), "value": arrow.numbers(t.column("value"))}

    def _mask(self, metric: str, operator: str | None, subtask: int) -> np.ndarray:
        c = self._columns
        m = c["metrics"].get(str(metric), -1)
        mask = (c["metric"] == m) & (c["subtask"] == subtask)
        if operator is None:  # every operator, the job level ("") left out
            return mask & (c["operator"] != c["operators"].get("", -1))
        return mask & (c["operator"] == c["operators"].get(operator, -1))

    def arrays(self, metric: str, operator: str = "", subtask: int = -1) -> tuple[np.ndarray, np.ndarray]:
        """(ts, value) of one series, as float arrays in time order (no pandas)."""
        c = self._columns
        mask = self._mask(metric, operator, subtask)
        ts, values = c["ts"][mask], c["value"][mask]
        order = np.argsort(ts, kind="stable")
        return ts[order], values[order]

    def operator_values(self, metric: str) -> np.ndarray:
        """Every operator-level value of `metric` (job level and per-subtask rows left out)."""
        return self._columns["value"][self._mask(metric, None, -1)]

    def series(self, metric: str, operator: str = "", subtask: int = -1) -> pd.Series:
        import pandas as pd

        ts, values = self.arrays(metric, operator, subtask)
        return pd.Series(values, index=ts, name=metric)

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        ev = self.events_table.to_pydict()
        return [{"ts": ts, "reason": reason, **json.loads(data)}
                for ts, k, reason, data in zip(ev["ts"], ev["kind"], ev["reason"], ev["data"], strict=True)
                if k == kind]


def read_run_record(run_dir: Path) -> RunRecord:
    run_dir = Path(run_dir)
    status = (run_dir / "status").read_text().strip() if (run_dir / "status").exists() else "missing"
    with (run_dir / "run.yaml").open() as fh:
        meta = yamlio.load(fh)
    return RunRecord(
        path=run_dir,
        meta=meta,
        # metric and operator dictionary-encoded: `arrays` reads them as codes without building 100k strings
        table=arrow.read_parquet(run_dir / "timeseries.parquet", dictionary=("metric", "operator")),
        events_table=arrow.read_parquet(run_dir / "events.parquet"),
        status=status,
    )


def find_run_dirs(results_dir: Path) -> list[Path]:
    """Every run record under a results directory (temp dirs skipped).

    Safe while a matrix writes into it: a temp run directory renamed into place between listing and
    entering it is skipped, not an error (os.walk ignores directories that vanished)."""
    return sorted(Path(d) for d, _dirs, files in os.walk(results_dir)
                  if "run.yaml" in files and not Path(d).name.startswith("."))
