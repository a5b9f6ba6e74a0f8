"""What one of Flink's busy, idle or backpressured readings averages over (pure).

Flink's TimerGauge (Flink 1.17+, FLINK-30090; the local stack runs 2.2.1, whose jar shows it) updates every 5 s
and reports the mean of its last 60 s, or of the time since its task started when that is shorter: a (re)started
job's tasks build new gauges. The simulator reads its truth through this window, and the calibration and the
fidelity report set each reading against the truth over the same window. CPU signals are not TimerGauges.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

GAUGE_WINDOW_S = 60.0  # TimerGauge's default time span


def window_mask(times: np.ndarray, starts: np.ndarray, at: float, window_s: float = GAUGE_WINDOW_S) -> np.ndarray:
    """Which of `times` (each the end of the span a value covers) a reading at `at` averages: those in
    (at - window_s, at] after the latest (re)start in `starts` at or before `at`."""
    k = int(np.searchsorted(starts, at, side="right")) - 1
    lo = max(at - window_s, float(starts[k]) if k >= 0 else -math.inf)
    return (times > lo) & (times <= at)


def window_means(times: np.ndarray, values: np.ndarray, starts: np.ndarray, at: Sequence[float] | np.ndarray,
                 window_s: float = GAUGE_WINDOW_S, known_share: float = 0.0) -> np.ndarray:
    """What a reading at each of `at` averaged: the mean of `values` (NaN unknown) over its window
    (`window_mask`); NaN where no value in it is known, or fewer than `known_share` of them (the mean of the rest
    would stand for a window whose other part is not known). window_s 0: the value at `at` itself."""
    out = np.full(len(at), np.nan)
    for i, a in enumerate(at):
        if window_s <= 0.0:
            hit = values[times == a]
            out[i] = float(hit[-1]) if len(hit) else math.nan
            continue
        inside = values[window_mask(times, starts, float(a), window_s)]
        known = inside[np.isfinite(inside)]
        if len(known) and len(known) >= known_share * len(inside):
            out[i] = float(known.mean())
    return out
