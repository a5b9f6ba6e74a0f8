"""What one of Flink's busy, idle or backpressured readings averages over (pure).

Flink's TimerGauge (Flink 1.17+, FLINK-30090; the local stack runs 2.2.1, whose jar shows it) updates every 5 s
and reports the mean of its last 60 s, or of the time since its task started when that is shorter: a (re)started
job's tasks build new gauges. The simulator reads its truth through this window, and the calibration and the
fidelity report set each reading against the truth over the same window. CPU signals are not TimerGauges.
The noise of a reading is the mean of its window's intervals' noise too (`noise_overlap`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

GAUGE_WINDOW_S = 60.0  # TimerGauge's default time span


def window_mask(times: np.ndarray, starts: np.ndarray, at: float, window_s: float = GAUGE_WINDOW_S) -> np.ndarray:
    """Which of `times` (each the end of the span a value covers) a reading at `at` averages: those in
    (at - window_s, at] after the latest (re)start in `starts` at or before `at`."""
    lo = window_start(at, starts, window_s)
    return (times > lo) & (times <= at)


def window_start(at: float, starts: np.ndarray, window_s: float = GAUGE_WINDOW_S) -> float:
    """Where the window of a reading at `at` begins: `window_s` back, or the latest (re)start in `starts` at or
    before `at` if that is later."""
    k = int(np.searchsorted(starts, at, side="right")) - 1
    return max(at - window_s, float(starts[k]) if k >= 0 else -math.inf)


def window_means(times: np.ndarray, values: np.ndarray, starts: np.ndarray, at: Sequence[float] | np.ndarray,
                 window_s: float = GAUGE_WINDOW_S, known_share: float = 0.0) -> np.ndarray:
    """What a reading at each of `at` averaged: the mean of `values` (NaN unknown) over its window
    (`window_mask`); NaN where no value in it is known, or fewer than `known_share` of them (the mean of the rest
    would stand for a window whose other part is not known), or where `at` is NaN. window_s 0: the value at `at`
    itself."""
    out = np.full(len(at), np.nan)
    for i, a in enumerate(at):
        if not math.isfinite(a):  # a reading made at an unknown time: its window is not known
            continue
        if window_s <= 0.0:
            hit = values[times == a]
            out[i] = float(hit[-1]) if len(hit) else math.nan
            continue
        inside = values[window_mask(times, starts, float(a), window_s)]
        known = inside[np.isfinite(inside)]
        if len(known) and len(known) >= known_share * len(inside):
            out[i] = float(known.mean())
    return out


METER_INTERVAL_S = 5.0  # a TimerGauge's slot: its window is twelve of them


def noise_overlap(at: Sequence[float] | np.ndarray, starts: np.ndarray, window_s: float = GAUGE_WINDOW_S,
                  interval_s: float = METER_INTERVAL_S, gauges: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """How the noise of readings at `at` covaries, in units of one meter interval's variance, when each reading is
    the mean over its window of noise independent from one moment to the next: the seconds two windows share x
    the interval / (their lengths' product), so a full 60-s window carries 1/12 of one interval's variance and two
    windows 5 s apart share 11/12 of it. A window shorter than an interval (a reading right after a restart) counts
    as one: the meter's first update after a restart averages over what the task ran by then. `gauges` names
    whose reading each is (a subtask's): two gauges share no noise (None: all one gauge's).

    Why: successive updates share 11 of their 12 intervals, so their errors move together (the calibration's
    residuals against the windowed truth: benchmarks/bench_gauge_noise.py), and the scatter of a few successive updates
    shows a small part of one reading's error. window_s 0: each reading its own interval (the identity)."""
    n = len(at)
    if window_s <= 0.0:
        return np.eye(n)
    owner = np.zeros(n, dtype=int) if gauges is None else np.asarray(gauges)
    end = np.asarray(at, dtype=float)
    lo = np.array([window_start(float(a), starts, window_s) for a in end])
    length = np.maximum(end - lo, interval_s)
    lo = end - length
    shared = np.clip(np.minimum.outer(end, end) - np.maximum.outer(lo, lo), 0.0, None)
    shared[owner[:, None] != owner[None, :]] = 0.0
    return shared * interval_s / np.outer(length, length)
