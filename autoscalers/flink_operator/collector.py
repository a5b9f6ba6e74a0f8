"""The metric window (the operator's ScalingMetricCollector): which samples a decision sees.

Collection starts `stabilization.interval` after the job (re)started; the window is full
`metrics.window` after the first sample collected then, and from then on it holds the samples
of the last `metrics.window`. A rescale (ours or a restart) starts it over.
"""

from __future__ import annotations

from autoscalers.base import History
from autoscalers.flink_operator.config import FlinkOperatorConfig
from autoscalers.restarts import running_since
from harness.metrics.snapshot import MetricsSnapshot


class MetricWindow:
    """Snapshots kept for the window, and when it started."""

    def __init__(self, config: FlinkOperatorConfig) -> None:
        self.config = config
        self._seen: dict[float, MetricsSnapshot] = {}
        self.applied_at: float | None = None  # job running again after our last rescale
        self._stable_since: float | None = None
        self._first_sample_t: float | None = None

    def _job_running_since(self, history: History) -> float:
        return max(running_since(history), self.applied_at or 0.0)

    def collect(self, snapshot: MetricsSnapshot, history: History) -> tuple[list[MetricsSnapshot], bool]:
        """Snapshots of the metric window and whether the window is full (collector logic).

        Collection starts `stabilization.interval` after the job (re)started; the window is
        full `metrics.window` after the first sample collected then, and from then on it
        holds the samples of the last `metrics.window`.
        """
        for s in (*history.snapshots, snapshot):
            self._seen[s.t] = s
        cfg = self.config
        now = snapshot.t
        stable = self._job_running_since(history) + cfg.stabilization_interval
        if stable != self._stable_since:
            self._stable_since, self._first_sample_t = stable, None
        after = sorted(t for t in self._seen if stable <= t <= now)
        if after and (self._first_sample_t is None or after[0] < self._first_sample_t):
            self._first_sample_t = after[0]
        self._seen = {t: s for t, s in self._seen.items() if t >= min(stable, now - cfg.metrics_window - 1e-6)}
        if self._first_sample_t is None:
            return [], False
        full = now >= self._first_sample_t + cfg.metrics_window - 1e-6
        start = now - cfg.metrics_window - 1e-6 if full else stable
        return [self._seen[t] for t in after if t >= start and t in self._seen], full
