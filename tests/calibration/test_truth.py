"""A calibration's truth per second (harness.calibration.truth) and what a reading averaged over
(harness.gauge_window): Flink's TimerGauge reports the mean of its last 60 s, or since its task started, so
restarts are found in the samples and each reading's truth is the mean over its own window."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.calibration.truth import per_second, restarts
from harness.gauge_window import GAUGE_WINDOW_S, noise_overlap, window_mask, window_means


def samples() -> pd.DataFrame:
    """One subtask taking 100 records/s for 100 s, its task restarted at t = 60 (its counter from 0 again), and a
    second subtask whose task first reports at t = 80."""
    rows = []
    for t in range(1, 101):
        count = 100.0 * t if t < 60 else 100.0 * (t - 60)
        rows.append({"t": float(t), "tm": "tm-1", "operator": "map", "subtask": 0, "rec_in": count})
        if t >= 80:
            rows.append({"t": float(t), "tm": "tm-2", "operator": "map", "subtask": 1, "rec_in": 50.0 * (t - 80)})
    return pd.DataFrame(rows)


def test_restarts_are_a_counter_that_fell_or_a_task_that_first_reported() -> None:
    assert restarts(samples()).tolist() == [1.0, 60.0, 80.0]


def test_rates_per_second_sum_the_subtasks_and_skip_the_reset() -> None:
    seconds, total, seen = per_second(samples(), "rec_in")
    at = {float(s): (float(r), int(n)) for s, r, n in zip(seconds, total, seen, strict=True)}
    assert at[30.0] == (100.0, 1)
    assert at[60.0] == (0.0, 0)  # the sample at which the counter fell adds nothing
    assert at[90.0] == (150.0, 2)


def test_a_reading_averages_its_last_60_s_or_since_the_restart() -> None:
    ends = np.arange(1.0, 201.0)  # each value covers the second before it
    level = np.where(ends <= 100, 0.2, 0.8)
    starts = np.array([0.0, 150.0])
    # 30 s after the step: half of its window at each level; 80 s after: only the new one
    got = window_means(ends, level, starts, [130.0, 180.0, 160.0])
    assert got[0] == pytest.approx(0.2 + 0.6 * 30 / GAUGE_WINDOW_S)
    assert got[1] == pytest.approx(0.8)
    assert got[2] == pytest.approx(0.8)  # restarted at 150: the minute before does not count
    assert window_mask(ends, starts, 160.0).sum() == 10
    nan = np.full(200, np.nan)
    assert np.isnan(window_means(ends, nan, starts, [130.0])[0])  # nothing known: unknown, not 0
    # a window known for less than the share asked stands for nothing
    half = np.where(ends <= 100, np.nan, 0.8)
    assert window_means(ends, half, starts, [130.0])[0] == pytest.approx(0.8)
    assert np.isnan(window_means(ends, half, starts, [130.0], known_share=0.8)[0])
    # window 0: each reading is the value at its own time
    assert window_means(ends, level, starts, [100.0, 101.0], window_s=0.0).tolist() == [0.2, 0.8]


def test_the_noise_of_successive_readings_overlaps_as_their_windows_do() -> None:
    """Each reading is the mean of independent per-interval noise over its window: 5 s apart two full windows share
    11 of their 12 intervals; after a restart a reading holds only the intervals since it."""
    v = noise_overlap([100.0, 105.0, 160.0, 165.0], np.array([0.0, 150.0]))
    assert v[0, 0] == pytest.approx(1 / 12) and v[0, 1] == pytest.approx(11 / 144)
    assert v[2, 2] == pytest.approx(1 / 2) and v[3, 3] == pytest.approx(1 / 3)  # 10 and 15 s since the restart
    assert v[2, 3] == pytest.approx(2 / 6) and v[1, 2] == 0.0  # the restart's windows share nothing before it
    assert np.allclose(noise_overlap([5.0, 10.0], np.array([0.0]), window_s=0.0), np.eye(2))


def test_the_simulator_reads_through_the_same_window_by_default() -> None:
    from harness.backends.sim.config import SimConfig

    assert SimConfig().meter_window_s == GAUGE_WINDOW_S
