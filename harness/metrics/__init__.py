"""Metric snapshots (the monitor's output) and their sources."""

from harness.metrics.snapshot import MetricsSnapshot, OperatorMetrics, SubtaskMetrics

__all__ = ["MetricsSnapshot", "OperatorMetrics", "SubtaskMetrics"]
