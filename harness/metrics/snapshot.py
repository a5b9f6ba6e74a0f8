"""`MetricsSnapshot`: what every autoscaler sees, whatever the backend.

The simulator and the Prometheus catalogue of the `local`/`k8s` backends both
build this one shape, averaged over the loop's metrics window. Rates are
records per second; times are Flink's ms-per-second gauges (0..1000).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.topology import Topology


@dataclass(frozen=True)
class SubtaskMetrics:
    """One parallel instance of an operator."""

    records_in_per_s: float = 0.0
    records_out_per_s: float = 0.0
    busy_ms_per_s: float = 0.0
    idle_ms_per_s: float = 1000.0
    backpressured_ms_per_s: float = 0.0
    input_buffer_usage: float = 0.0  # 0..1 (Flink inPoolUsage)
    cpu_load: float = 0.0  # 0..1 of the hosting task manager (Status.JVM.CPU.Load)
    lag: float | None = None  # sources: pending records of the partitions it reads


@dataclass(frozen=True)
class OperatorMetrics:
    """One job vertex, aggregated over its subtasks (rates summed, times averaged)."""

    parallelism: int
    records_in_per_s: float = 0.0
    records_out_per_s: float = 0.0
    busy_ms_per_s: float = 0.0
    idle_ms_per_s: float = 1000.0
    backpressured_ms_per_s: float = 0.0
    is_backpressured: bool = False
    input_buffer_usage: float = 0.0
    cpu_load: float = 0.0
    cpu_share: float = 1.0  # vertical scaling: fraction of a CPU each task manager may use
    subtasks: tuple[SubtaskMetrics, ...] = ()
    # Sources only: the topic they read.
    lag: float | None = None  # pending records in Kafka for this source's topic
    lag_rate: float | None = None  # d(lag)/dt, records/s
    input_rate: float | None = None  # records/s produced into this source's topic

    @property
    def busy_fraction(self) -> float:
        return self.busy_ms_per_s / 1000.0

    @property
    def max_busy_ms_per_s(self) -> float:
        if not self.subtasks:
            return self.busy_ms_per_s
        return max(s.busy_ms_per_s for s in self.subtasks)

    @property
    def backpressured_fraction(self) -> float:
        return self.backpressured_ms_per_s / 1000.0


@dataclass(frozen=True)
class MetricsSnapshot:
    """The monitored state of one job at time `t` (seconds since the run started)."""

    t: float
    window_s: float
    topology: Topology
    operators: dict[str, OperatorMetrics]
    kafka_lag: float = 0.0  # total pending records over the job's topics
    kafka_lag_rate: float = 0.0  # d(kafka_lag)/dt over the window, records/s
    input_rate: float = 0.0  # records/s produced into Kafka
    throughput: float = 0.0  # records/s the job's sources take from Kafka
    latency_s: float = 0.0  # event-time lag at the sources (time spent in Kafka)
    taskmanagers: int = 0
    cpu_load: float = 0.0  # mean over task managers
    # MEAD needs inter-arrival times of the input (seconds); None when unavailable.
    interarrival_s: np.ndarray | None = None
    # Names of metrics that came back empty or partial even after widening the window.
    missing: tuple[str, ...] = field(default_factory=tuple)

    def op(self, name: str) -> OperatorMetrics:
        return self.operators[name]

    @property
    def parallelism(self) -> dict[str, int]:
        return {name: m.parallelism for name, m in self.operators.items()}

    @property
    def cpu_share(self) -> dict[str, float]:
        return {name: m.cpu_share for name, m in self.operators.items()}
