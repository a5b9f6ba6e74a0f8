"""PromQL for exporting a whole run's series into the run record (local and k8s alike).

Pure: (record metric, operator or '') -> PromQL, evaluated by the backend as range queries at
the scrape step. Gauges are read through `held` (their latest sample of the last rate window, never
Prometheus' 5-minute lookback), so a monitoring outage is a gap in the record, not the last
value. Rates come from counters over the window (Flink's *PerSecond meters average 60 s and lag
every rate step); source lag gauges are NaN until a restarted subtask emits, and
`>= 0` drops those samples so a restart never reads as zero latency. Vertex ids of every job
the run saw are matched, so series survive a resubmission (savepoint rescale, recovery).

End-to-end latency per interval comes from the sinks' histogram (`harness.metrics.latency`): over
the rate window every point covers (two scrapes), mean = rate(sum) / rate(count), p50/p95/p99 =
histogram_quantile over all sink subtasks' buckets (capped at the max), max = the largest value of
the sinks' max gauges. An interval without records has no latency: NaN, a gap in the record.

Lost load: the generator's skips (`generator_records_skipped_total`) and the records Kafka retention
deleted before the job read them: per partition, how far the log start offset has moved past the
job's source offset (`EXPIRED_QUERY`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from harness.metrics.promql import e2e_max, e2e_mean, e2e_quantile
from harness.topology import Topology
from harness.vocabulary import Metric

T = "flink_taskmanager_job_task_"
# the same alternatives the snapshot catalogue tries (harness.metrics.promql), first with data wins
LATENCY_GAUGES = ("deserializer_recordLag", "KafkaSourceReader_deserializer_recordLag", "currentEmitEventTimeLag")


# Kafka's first retained offset per partition (the local stack's JMX exporter rule names it so).
LOG_START_OFFSET = "kafka_log_start_offset"
# The Kafka source's read position per partition (Flink's KafkaSourceReader metric group: topic and
# partition are key groups, so labels), and records deleted by retention that it had not read yet.
SOURCE_OFFSET = T + "operator_KafkaSourceReader_topic_partition_currentOffset"


def held(selector: str, window: str) -> str:
    """A gauge's latest sample within `window` only. A plain selector would return a sample up to
    Prometheus' 5-minute lookback old: while Prometheus itself is down nothing marks the series stale,
    so its last value would fill the outage. Bounded, an outage is a gap."""
    return f"last_over_time({selector}[{window}])"


def expired_query(sources: str, window: str) -> str:
    """Records Kafka retention deleted before the job's sources read them: per partition, how far the
    log start offset is past the source's current offset (0 while the job keeps ahead of retention)."""
    position = held(f'{SOURCE_OFFSET}{{task_id=~"{sources}"}}', window)
    # a partition the reader has not positioned yet reports -1: it is not behind anything
    return (f"sum(clamp_min(max by (topic, partition) ({held(LOG_START_OFFSET, window)}) - on (topic, partition) "
            f"max by (topic, partition) ({position} >= 0), 0))")


def export_queries(topology: Topology, vertex_ids_seen: Mapping[str, Iterable[str]],
                   step_s: float) -> dict[tuple[str, str], str]:
    w = f"{max(2 * step_s, 10):g}s"
    q: dict[tuple[str, str], str] = {
        (Metric.INPUT_RATE, ""): f"sum(rate(generator_records_produced_total[{w}]))",
        (Metric.TASKMANAGERS, ""): f"max({held('flink_jobmanager_numRegisteredTaskManagers', w)})",
        (Metric.LAG, ""): f"sum(max by (task_id, subtask_index) ({held(T + 'operator_pendingRecords', w)}))",
        (Metric.LATENCY_KAFKA, ""): " or ".join(
            f"(avg(max by (task_id, subtask_index) ({held(T + 'operator_' + m, w)} >= 0)) / 1000)"
            for m in LATENCY_GAUGES),
    }
    for op in topology.names:
        ids = "|".join(sorted(set(vertex_ids_seen.get(op, ())))) or "none"
        sel = f'{{task_id=~"{ids}"}}'
        q[(Metric.RECORDS_OUT, op)] = f"sum(avg by (subtask_index) (rate({T}numRecordsOut{sel}[{w}])))"
        q[(Metric.RECORDS_IN, op)] = f"sum(avg by (subtask_index) (rate({T}numRecordsIn{sel}[{w}])))"
        q[(Metric.BUSY, op)] = f"avg(max by (subtask_index) ({held(T + 'busyTimeMsPerSecond' + sel, w)}))"
        q[(Metric.BACKPRESSURED, op)] = (
            f"avg(max by (subtask_index) ({held(T + 'backPressuredTimeMsPerSecond' + sel, w)}))")
    srcs = "|".join(sorted({v for s in topology.sources for v in vertex_ids_seen.get(s.name, ())})) or "none"
    q[(Metric.THROUGHPUT, "")] = (
        f'sum(avg by (task_id, subtask_index) (rate({T}numRecordsOut{{task_id=~"{srcs}"}}[{w}])))')
    sinks = "|".join(sorted({v for s in topology.sinks for v in vertex_ids_seen.get(s.name, ())})) or "none"
    at_sinks = f'{{task_id=~"{sinks}"}}'
    q[(Metric.LATENCY_E2E_MEAN, "")] = e2e_mean(at_sinks, w)
    q[(Metric.LATENCY_E2E_P50, "")] = e2e_quantile(0.50, at_sinks, w)
    q[(Metric.LATENCY_E2E_P95, "")] = e2e_quantile(0.95, at_sinks, w)
    q[(Metric.LATENCY_E2E_P99, "")] = e2e_quantile(0.99, at_sinks, w)
    q[(Metric.LATENCY_E2E_MAX, "")] = e2e_max(at_sinks, w)
    q[(Metric.PRODUCED_TOTAL, "")] = f"sum({held('generator_records_produced_total', w)})"
    q[(Metric.SKIPPED_TOTAL, "")] = f"sum({held('generator_records_skipped_total', w)})"
    q[(Metric.EXPIRED_TOTAL, "")] = expired_query(srcs, w)
    return q


def fill_gaps(series: pd.DataFrame, start: float, end: float, step_s: float) -> pd.DataFrame:
    """Add a NaN row (a gap marker, see `harness.analysis.metrics`) at every step of a range query where a
    series had no point: while Prometheus was down, a target was not scraped or the job had no vertex.

    `series` has columns ts, metric, operator, value (ts relative like `start`/`end`); the grid is the one
    Prometheus evaluates a range query on (start, start + step, ... <= end). A series that never had a
    point gets no markers: it was not measured at all, which its absence already says. A point within
    half a step of a grid time stands for it: Prometheus keeps times in whole milliseconds, so the
    points of a range query started at a sub-millisecond wall-clock time sit just off the exact grid.
    """
    if series.empty or step_s <= 0:
        return series
    grid = start + step_s * np.arange(int(np.floor((end - start) / step_s + 1e-9)) + 1)
    parts = [series]
    for (metric, op), g in series.groupby(["metric", "operator"], sort=False):
        have = np.sort(g["ts"].to_numpy(dtype=float))
        i = np.clip(np.searchsorted(have, grid), 1, len(have) - 1) if len(have) > 1 else np.zeros(len(grid), int)
        nearest = np.minimum(np.abs(have[i] - grid), np.abs(have[np.maximum(i - 1, 0)] - grid))
        missing = grid[nearest >= step_s / 2]
        if len(missing):
            parts.append(pd.DataFrame({"ts": missing, "metric": metric, "operator": op, "value": np.nan}))
    return pd.concat(parts, ignore_index=True)
