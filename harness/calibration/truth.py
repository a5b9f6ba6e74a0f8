"""A calibration's truth per second: when its job (re)started and what each operator took (pure).

The busy and backpressured readings average the last 60 s since the latest restart (harness.gauge_window), and
the calibration's phases last 15-25 s, so a phase's readings still hold the phases before it in the same
deployment. Each reading is set against its operator's true level per second over its own window: this module
finds the restarts in the samples and the per-second rates; `harness.calibration.build` turns them into levels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd


def restarts(samples: pd.DataFrame, counters: Sequence[str] = ("rec_in", "rec_out")) -> np.ndarray:
    """When the job's tasks (re)started, from the samples of every operator: a subtask's first sample (a new
    task), or a sample at which one of its record counters fell (a restarted task counts from 0)."""
    times: list[float] = []
    keys = [k for k in ("tm", "operator", "subtask") if k in samples]
    for _, g in samples.groupby(keys, dropna=False):
        t = g.t.to_numpy(dtype=float)
        order = np.argsort(t)
        t = t[order]
        if not len(t):
            continue
        times.append(float(t[0]))
        for col in counters:
            if col not in g:
                continue
            c = g[col].to_numpy(dtype=float)[order]
            fell = np.flatnonzero(np.diff(c) < 0) + 1
            times += [float(t[i]) for i in fell]
    return np.unique(np.round(np.asarray(times, dtype=float), 3))


def per_second(samples: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(second starts, records/s summed over the subtasks, subtasks that reported) per whole second of the
    samples of one operator; a counter that fell (a restart) adds nothing for that sample."""
    if samples.empty or col not in samples:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    t0 = math.floor(float(samples.t.min()))
    n = int(math.ceil(float(samples.t.max()))) - t0 + 1
    total, seen = np.zeros(n), np.zeros(n)
    keys = [k for k in ("tm", "subtask") if k in samples]
    for _, g in samples.groupby(keys, dropna=False):
        g = g.sort_values("t")
        t, c = g.t.to_numpy(dtype=float), g[col].to_numpy(dtype=float)
        dt, dc = np.diff(t), np.diff(c)
        ok = (dt > 0) & (dc >= 0) & np.isfinite(dc)
        idx = np.clip(np.floor(t[1:][ok]).astype(int) - t0, 0, n - 1)
        np.add.at(total, idx, dc[ok] / dt[ok])
        np.add.at(seen, idx, 1.0)
    return t0 + np.arange(n, dtype=float), total, seen


def utilisation_per_second(samples: pd.DataFrame, col: str, capacity_at: Callable[[float], float],
                           share_at: Callable[[float], float], full: Callable[[float], bool]) -> tuple[
                               np.ndarray, np.ndarray]:
    """(second starts, true utilisation per subtask): records/s per reporting subtask / the capacity at the
    CPU share then, capped at 1; 1 where `full(second)` (it limited a saturating phase then); NaN where no
    subtask reported."""
    seconds, total, seen = per_second(samples, col)
    u = np.full(len(seconds), np.nan)
    for i, s in enumerate(seconds):
        if full(s):
            u[i] = 1.0
        elif seen[i] > 0:
            cap = capacity_at(share_at(s))
            u[i] = min(1.0, total[i] / seen[i] / cap) if cap > 0 else math.nan
    return seconds, u
