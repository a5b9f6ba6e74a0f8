"""When the job last (re)started, as an autoscaler can tell from the applied actions.

A rescale stops the job for `downtime_s` (seconds, minutes with a savepoint of a large
state); the loop's cooldown may end before the job runs again. Metrics of that time say
nothing about capacity (zero throughput, growing lag), so the autoscalers that learn
from them (Gesscale's calibration, Flink-ER's capacities, the operator's windows) wait
until the job is back and their metrics window no longer overlaps the downtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autoscalers.base import AppliedAction, History

if TYPE_CHECKING:
    from harness.metrics.snapshot import MetricsSnapshot


def running_since(history: History, applied: AppliedAction | None = None) -> float:
    """End of the last rescale's downtime (0.0 when the job never rescaled)."""
    ends = [0.0]
    if history.last_action is not None:
        ends.append(history.last_action.t + history.last_action.downtime_s)
    if applied is not None:
        ends.append(applied.t + applied.downtime_s)
    return max(ends)


def window_overlaps_restart(snapshot: MetricsSnapshot, history: History, applied: AppliedAction | None = None) -> bool:
    """True while the snapshot's metrics window still covers the last rescale's downtime."""
    restarted = running_since(history, applied)
    return restarted > 0 and snapshot.t - snapshot.window_s < restarted - 1e-9
