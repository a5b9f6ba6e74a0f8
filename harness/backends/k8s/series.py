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

from harness.metrics.export import export_queries  # noqa: F401 - the backend's range queries, shared with local
from harness.vocabulary import Metric

COLUMNS = ["ts", "metric", "operator", "subtask", "value"]


@dataclass(frozen=True)
class Sample:
    """What the backend knew at time t (seconds since the run started)."""

    t: float
    processing: bool
    parallelism: Mapping[str, int]
    cpu_share: Mapping[str, float]
    taskmanagers: int
    cpu: Mapping[str, float] = field(default_factory=dict)  # per operator, from the snapshot (of the quota)
    cpu_job: float | None = None
    # the JVM's Status.JVM.CPU.Load, kept next to the quota-relative load (HPA-CPU's `cpu_signal`)
    cpu_jvm: Mapping[str, float] = field(default_factory=dict)
    cpu_jvm_job: float | None = None


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
        add(s.t, Metric.PROCESSING, "", 1.0 if s.processing else 0.0)
        for op, p in s.parallelism.items():
            add(s.t, Metric.PARALLELISM, op, p)
        for op, c in s.cpu_share.items():
            add(s.t, Metric.CPU_SHARE, op, c)
        for op, c in s.cpu.items():
            add(s.t, Metric.CPU, op, c)
        for op, c in s.cpu_jvm.items():
            add(s.t, Metric.CPU_JVM, op, c)
        if s.cpu_job is not None:
            add(s.t, Metric.CPU, "", s.cpu_job)
        if s.cpu_jvm_job is not None:
            add(s.t, Metric.CPU_JVM, "", s.cpu_jvm_job)
        if with_taskmanagers:
            add(s.t, Metric.TASKMANAGERS, "", s.taskmanagers)
    return rows


def timeseries(samples: Iterable[Sample], exported: list[dict[str, Any]]) -> pd.DataFrame:
    """Exported Prometheus rows plus the backend's own samples; the TM count comes from Prometheus when
    it answered, else from the samples (never both: one series per metric)."""
    has_tms = any(r["metric"] == Metric.TASKMANAGERS for r in exported)
    rows = [*exported, *sample_rows(samples, with_taskmanagers=not has_tms)]
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.DataFrame(rows, columns=COLUMNS)
    df = df[np.isfinite(df["value"].astype(float))]
    return df.sort_values(["metric", "operator", "ts"], kind="stable").reset_index(drop=True)
