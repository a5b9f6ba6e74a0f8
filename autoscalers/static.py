"""A baseline that never scales: the job keeps its initial parallelism."""

from __future__ import annotations

from autoscalers.base import Autoscaler, AutoscalerConfig, History, ScalingDecision
from harness.metrics.snapshot import MetricsSnapshot


class StaticConfig(AutoscalerConfig):
    """No parameters."""


class Static(Autoscaler):
    name = "static"
    READS_PAST_SNAPSHOTS = False  # decides on the current snapshot and the applied actions
    Config = StaticConfig

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        return None
