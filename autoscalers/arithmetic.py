"""Arithmetic the autoscalers share.

- Rounding of parallelism that is robust to float noise: `5 * 1.2` is
  `6.000000000000001` and a plain `ceil` would ask for 7.
- The mean over a window of snapshots that leaves unmeasured samples out
  (unknown is not zero).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from harness.metrics.snapshot import measured

_EPS = 1e-9


def ceil_p(x: float) -> int:
    """ceil(x) ignoring float noise, clamped to >= 1 (a job vertex needs one subtask)."""
    return max(1, math.ceil(x - _EPS))


def floor_p(x: float) -> int:
    """floor(x) ignoring float noise, clamped to >= 1."""
    return max(1, math.floor(x + _EPS))


def mean_measured(values: Iterable[float | None]) -> float:
    """Mean of the measured values (None and NaN left out); NaN when none was measured.

    For averages over a window of snapshots: a snapshot taken while a metric was unreadable
    is a missing sample, not a zero.
    """
    kept = [float(v) for v in values if v is not None and measured(v)]
    return sum(kept) / len(kept) if kept else math.nan
