"""One vocabulary for what a run measures and what happens in it.

The monitors (the Prometheus catalogue of `local` and `k8s`, the simulator), the
`MetricsSnapshot`, the autoscalers' declared needs, the run record's timeseries and events,
and the analysis all use these names. A metric the monitor could not read is therefore
recognised as missing wherever it travels, instead of each side checking its own spelling
(a check that never fired, because the monitor said `tm_cpu_cores` and HPA-CPU asked for `cpu`).

The enums are `StrEnum`s: their members are the strings written into the run record, so
pandas filters and Parquet files stay plain strings. `TaskManagerJit` is here because two sides
record it, the local stack's config and the calibrated profiles measured with it.
"""

from __future__ import annotations

from enum import StrEnum


class Metric(StrEnum):
    """A measured quantity; the value is its name in the run record (`timeseries.metric`).

    Job level (operator "" in the record) unless marked per operator. Units in the comment.
    """

    # ---- load and progress (job level; LAG, LAG_RATE and INPUT_RATE also per source) ----
    INPUT_RATE = "input_rate"  # records/s produced into Kafka
    THROUGHPUT = "throughput"  # records/s the job's sources take from Kafka
    LAG = "lag"  # records waiting in Kafka (pending records)
    LAG_RATE = "lag_rate"  # d(lag)/dt, records/s
    PRODUCED_TOTAL = "produced_total"  # cumulative records produced into Kafka
    PROCESSED_TOTAL = "processed_total"  # cumulative records taken from Kafka
    # Load the pattern asked for but that never reached the job (coordinated omission shows here):
    SKIPPED_TOTAL = "skipped_total"  # cumulative records the generator could not offer (backlog skips)
    EXPIRED_TOTAL = "expired_total"  # cumulative records Kafka retention deleted before they were read
    # ---- latency ----
    LATENCY_KAFKA = "latency_kafka"  # s, time a record waited in Kafka (thesis ch. 5.3: event-time lag at the source)
    LATENCY_KAFKA_MAX = "latency_kafka_max"  # s, the oldest record taken from Kafka in the interval
    LATENCY_E2E_MEAN = "latency_e2e_mean"  # s, sink processing time - event time, mean over the interval's records
    LATENCY_E2E_P50 = "latency_e2e_p50"  # s, per-interval percentiles of the same per-record quantity
    LATENCY_E2E_P95 = "latency_e2e_p95"
    LATENCY_E2E_P99 = "latency_e2e_p99"
    LATENCY_E2E_MAX = "latency_e2e_max"
    # ---- resources ----
    TASKMANAGERS = "taskmanagers"  # count (= sum of parallelism under operator-based scaling)
    CPU = "cpu"  # 0..1, CPU time / the task manager's CPU quota (job: mean over TMs; operator: its TMs)
    CPU_JVM = "cpu_jvm"  # 0..1, the JVM's Status.JVM.CPU.Load: process CPU relative to the whole host
    PARALLELISM = "parallelism"  # per operator
    CPU_SHARE = "cpu_share"  # per operator, vertical scaling: fraction of a task manager's quota
    PROCESSING = "processing"  # 1 while the job processes, 0 during rescale or fault downtime
    # ---- per operator (Flink task metrics) ----
    RECORDS_IN = "records_in"  # records/s
    RECORDS_OUT = "records_out"  # records/s
    BUSY = "busy_ms"  # ms/s (busyTimeMsPerSecond)
    IDLE = "idle_ms"  # ms/s (idleTimeMsPerSecond)
    BACKPRESSURED = "backpressured_ms"  # ms/s (backPressuredTimeMsPerSecond)
    IS_BACKPRESSURED = "is_backpressured"  # 0/1 (isBackPressured at any point of the window)
    BUFFER_USAGE = "buffer_usage"  # 0..1, input-buffer pool usage
    STATE_BYTES = "state_bytes"
    NETWORK_DELAY_MAX = "network_delay_max_ms"  # ms, largest round-trip delay among the nodes hosting the operator
    # ---- input process ----
    INTERARRIVAL = "interarrival_s"  # s, recent gaps between records produced (MEAD's MAP fitting)


#: The end-to-end latency statistics recorded per interval.
LATENCY_E2E: tuple[Metric, ...] = (
    Metric.LATENCY_E2E_MEAN, Metric.LATENCY_E2E_P50, Metric.LATENCY_E2E_P95, Metric.LATENCY_E2E_P99,
    Metric.LATENCY_E2E_MAX,
)


class NodeChoice(StrEnum):
    """Which node a scale-up adds (or a scale-down frees), where nodes differ in network delay.

    Gesscale (Arkian et al. 2021, sec. IV-E / V-A): a latency-aware scaler adds the available
    node with the lowest latency to the nodes already used and removes the one with the
    greatest; a latency-unaware one picks from an unsorted list. A backend with one kind of
    node (one machine, a homogeneous cluster) has nothing to choose and ignores it.
    """

    ANY = "any"  # the backend's own choice (an unsorted list: random among the free nodes)
    NEAREST = "nearest"  # add the node closest to the ones in use, remove the farthest


class EventKind(StrEnum):
    """What an entry of the run record's events is (`events.kind`)."""

    DECISION = "decision"  # an autoscaler asked for something (data: target, current, details)
    ACTION = "action"  # the scale manager applied it (data: before, after, downtime_s, method, capped)
    NOT_APPLIED = "not_applied"  # a decision that changed nothing after the scale manager's limits
    DECISION_SKIPPED = "decision_skipped"  # no decision taken: metrics it needs were not measured (data: metrics)
    FAULT = "fault"  # a crash, a failed rescale
    RECOVERY = "recovery"  # the harness recovered from a fault
    PHASE = "phase"  # run phases: start, stage changes (convergence), end
    WARNING = "warning"  # e.g. metrics empty even after widening the window


class TaskManagerJit(StrEnum):
    """Which JIT compilers the task managers' JVMs run.

    Measured on q1 at 0.1 CPU per task manager (benchmarks/bench_jit_threads.py): a minute after a
    start or a rescale, HotSpot's C2 compiler threads used 33-56 % of each source task manager's quota
    and the task thread 7-15 %, so the job's capacity kept changing for minutes; C1's threads used a few
    per cent. On a real node C2 takes seconds of a whole core; on a fraction of one it is a transient
    that dominates short experiments, hence C1 by default here. The calibrated profiles record which
    one they were measured with (`provenance.taskmanager_jit`).
    """

    TIERED = "tiered"
    C1 = "c1"
