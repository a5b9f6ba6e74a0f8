"""PromQL for exporting a whole run's series into the run record (local and k8s alike).

Pure: (record metric, operator or '') -> PromQL, evaluated by the backend as range queries at
the scrape step. Rates come from counters over the window (Flink's *PerSecond meters average
60 s and lag every rate step); source lag gauges are NaN until a restarted subtask emits, and
`>= 0` drops those samples so a restart never reads as zero latency. Vertex ids of every job
the run saw are matched, so series survive a resubmission (savepoint rescale, recovery).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from harness.topology import Topology
from harness.vocabulary import Metric

T = "flink_taskmanager_job_task_"
# the same alternatives the snapshot catalogue tries (harness.metrics.promql), first with data wins
LATENCY_GAUGES = ("deserializer_recordLag", "KafkaSourceReader_deserializer_recordLag", "currentEmitEventTimeLag")


def export_queries(topology: Topology, vertex_ids_seen: Mapping[str, Iterable[str]],
                   step_s: float) -> dict[tuple[str, str], str]:
    w = f"{max(2 * step_s, 10):g}s"
    q: dict[tuple[str, str], str] = {
        (Metric.INPUT_RATE, ""): f"sum(rate(generator_records_produced_total[{w}]))",
        (Metric.TASKMANAGERS, ""): "max(flink_jobmanager_numRegisteredTaskManagers)",
        (Metric.LAG, ""): f"sum(max by (task_id, subtask_index) ({T}operator_pendingRecords))",
        (Metric.LATENCY_KAFKA, ""): " or ".join(
            f"(avg(max by (task_id, subtask_index) ({T}operator_{m} >= 0)) / 1000)" for m in LATENCY_GAUGES),
    }
    for op in topology.names:
        ids = "|".join(sorted(set(vertex_ids_seen.get(op, ())))) or "none"
        sel = f'{{task_id=~"{ids}"}}'
        q[(Metric.RECORDS_OUT, op)] = f"sum(avg by (subtask_index) (rate({T}numRecordsOut{sel}[{w}])))"
        q[(Metric.RECORDS_IN, op)] = f"sum(avg by (subtask_index) (rate({T}numRecordsIn{sel}[{w}])))"
        q[(Metric.BUSY, op)] = f"avg(max by (subtask_index) ({T}busyTimeMsPerSecond{sel}))"
        q[(Metric.BACKPRESSURED, op)] = f"avg(max by (subtask_index) ({T}backPressuredTimeMsPerSecond{sel}))"
    srcs = "|".join(sorted({v for s in topology.sources for v in vertex_ids_seen.get(s.name, ())})) or "none"
    q[(Metric.THROUGHPUT, "")] = (
        f'sum(avg by (task_id, subtask_index) (rate({T}numRecordsOut{{task_id=~"{srcs}"}}[{w}])))')
    return q
