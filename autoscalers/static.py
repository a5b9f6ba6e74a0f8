"""A baseline that never scales: the job keeps its initial parallelism.

The seed papers' fixed allocations: MEAD's "static allocation" (Russo et al. 2021, abstract and
sec. VII-A: every operator at 100 % CPU), the MPC paper's "static peak-load configuration" (De Matteis
and Mencagli, sec. 5.3.2: the maximum replicas throughout) and Flink-ER's "Original Flink" (sec. 4.2:
the initial 6 task managers, no elastic scheduling). The experiment file sets the allocation
(`initial_parallelism`, CPU share).
"""

from __future__ import annotations

from autoscalers.base import Autoscaler, AutoscalerConfig, History, ScalingDecision
from harness.metrics.snapshot import MetricsSnapshot


class StaticConfig(AutoscalerConfig):
    """No parameters: the allocation is the experiment's initial one (MEAD sec. VII-A, MPC sec. 5.3.2,
    Flink-ER sec. 4.2)."""


class Static(Autoscaler):
    name = "static"
    READS_PAST_SNAPSHOTS = False  # decides on the current snapshot and the applied actions
    Config = StaticConfig

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        return None
