"""The k8s run's series in the run record's long format (pure: no Prometheus calls here).

Two sources, like the local backend: what the backend itself knows at each loop tick (parallelism,
CPU share, task managers, whether a rescale kept the job down) and range queries over the whole run
against Prometheus (input rate, lag, latency, per-operator rates), which the backend runs and hands
in as raw matrix results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from harness.record import (
    BACKPRESSURED,
    BUSY,
    CPU,
    CPU_SHARE,
    INPUT_RATE,
    LAG,
    LATENCY,
    PARALLELISM,
    PROCESSING,
    RECORDS_IN,
    RECORDS_OUT,
    TASKMANAGERS,
    THROUGHPUT,
)
from harness.topology import Topology

COLUMNS = ["ts", "metric", "operator", "subtask", "value"]
T = "flink_taskmanager_job_task_"


@dataclass(frozen=True)
class Sample:
    """What the backend knew at time t (seconds since the run started)."""

    t: float
    processing: bool
    parallelism: Mapping[str, int]
    cpu_share: Mapping[str, float]
    taskmanagers: int
    cpu: Mapping[str, float] = field(default_factory=dict)  # per operator, from the snapshot
    cpu_job: float | None = None


def export_queries(topology: Topology, vertex_ids_seen: Mapping[str, Iterable[str]],
                   step_s: float) -> dict[tuple[str, str], str]:
    """(record metric, operator or '') -> PromQL evaluated over the whole run at the scrape step.

    Vertex ids of every job the run saw are matched, so series survive a resubmission (operator path).
    """
    w = f"{max(2 * step_s, 10):g}s"
    q: dict[tuple[str, str], str] = {
        (INPUT_RATE, ""): f"sum(rate(generator_records_produced_total[{w}]))",
        (TASKMANAGERS, ""): "max(flink_jobmanager_numRegisteredTaskManagers)",
        (LAG, ""): f"sum(max by (task_id, subtask_index) ({T}operator_pendingRecords))",
        (LATENCY, ""): f"avg(max by (task_id, subtask_index) ({T}operator_deserializer_recordLag)) / 1000",
    }
    for op in topology.names:
        ids = "|".join(sorted(set(vertex_ids_seen.get(op, ())))) or "none"
        sel = f'{{task_id=~"{ids}"}}'
        q[(RECORDS_OUT, op)] = f"sum(max by (subtask_index) ({T}numRecordsOutPerSecond{sel}))"
        q[(RECORDS_IN, op)] = f"sum(max by (subtask_index) ({T}numRecordsInPerSecond{sel}))"
        q[(BUSY, op)] = f"avg(max by (subtask_index) ({T}busyTimeMsPerSecond{sel}))"
        q[(BACKPRESSURED, op)] = f"avg(max by (subtask_index) ({T}backPressuredTimeMsPerSecond{sel}))"
    srcs = "|".join(sorted({v for s in topology.sources for v in vertex_ids_seen.get(s.name, ())})) or "none"
    q[(THROUGHPUT, "")] = f'sum(max by (task_id, subtask_index) ({T}numRecordsOutPerSecond{{task_id=~"{srcs}"}}))'
    return q


def range_rows(metric: str, operator: str, result: Iterable[Mapping[str, Any]], wall0: float) -> list[dict[str, Any]]:
    """Prometheus matrix result -> long rows with ts relative to the run start (wall clock `wall0`)."""
    rows = []
    for series in result:
        for ts, v in series.get("values", []):
            rows.append({"ts": float(ts) - wall0, "metric": metric, "operator": operator, "subtask": -1,
                         "value": float(v)})
    return rows


def sample_rows(samples: Iterable[Sample], with_taskmanagers: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(t: float, metric: str, op: str, v: float) -> None:
        rows.append({"ts": t, "metric": metric, "operator": op, "subtask": -1, "value": float(v)})

    for s in samples:
        add(s.t, PROCESSING, "", 1.0 if s.processing else 0.0)
        for op, p in s.parallelism.items():
            add(s.t, PARALLELISM, op, p)
        for op, c in s.cpu_share.items():
            add(s.t, CPU_SHARE, op, c)
        for op, c in s.cpu.items():
            add(s.t, CPU, op, c)
        if s.cpu_job is not None:
            add(s.t, CPU, "", s.cpu_job)
        if with_taskmanagers:
            add(s.t, TASKMANAGERS, "", s.taskmanagers)
    return rows


def timeseries(samples: Iterable[Sample], exported: list[dict[str, Any]]) -> pd.DataFrame:
    """Exported Prometheus rows plus the backend's own samples; the TM count comes from Prometheus when
    it answered, else from the samples (never both: one series per metric)."""
    has_tms = any(r["metric"] == TASKMANAGERS for r in exported)
    rows = [*exported, *sample_rows(samples, with_taskmanagers=not has_tms)]
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.DataFrame(rows, columns=COLUMNS)
    df = df[np.isfinite(df["value"].astype(float))]
    return df.sort_values(["metric", "operator", "ts"], kind="stable").reset_index(drop=True)
