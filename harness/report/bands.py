"""All repetitions of a cell as one line over time: the median and a 5-95 % band.

Each repetition's series is read on a common time grid as the value it held at that instant (a
sample holds until the next one, as the time-weighted means treat it); a gap longer than
`gap_factor` sampling periods is left a gap (NaN), never bridged, and a run contributes nothing
past its last sample. At every grid instant the median and the 5th and 95th percentiles are over
the repetitions that have a value there; `n` says how many did.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

LOW, HIGH = 5.0, 95.0


@dataclass(frozen=True)
class Band:
    t: np.ndarray  # grid, same unit as the series' index (minutes in the report)
    median: np.ndarray
    low: np.ndarray  # 5th percentile
    high: np.ndarray  # 95th percentile
    n: np.ndarray  # repetitions with a value at each instant
    runs: int

    @property
    def empty(self) -> bool:
        return len(self.t) == 0


def _step(series: pd.Series) -> float:
    idx = np.asarray(series.index, dtype=float)
    if len(idx) < 2:
        return 1.0
    d = np.diff(np.sort(idx))
    d = d[d > 0]
    return float(np.median(d)) if len(d) else 1.0


def held_on_grid(series: pd.Series, grid: np.ndarray, gap_factor: float = 3.0) -> np.ndarray:
    """The series' held (previous-sample) value at each grid point; NaN before, after, and in gaps."""
    out = np.full(len(grid), np.nan)
    s = series.dropna().sort_index()
    if s.empty:
        return out
    t = np.asarray(s.index, dtype=float)
    v = s.to_numpy(dtype=float)
    pos = np.searchsorted(t, grid, side="right") - 1
    inside = (pos >= 0) & (grid <= t[-1])
    step = _step(s)
    held = np.where(inside, grid - t[np.clip(pos, 0, len(t) - 1)], np.inf)
    ok = inside & (held <= gap_factor * step)
    out[ok] = v[pos[ok]]
    return out


def band(series: list[pd.Series], points: int = 400) -> Band:
    """Median and 5-95 % band over the repetitions' series (see the module docstring)."""
    present = [s.dropna() for s in series if not s.dropna().empty]
    if not present:
        empty = np.array([], dtype=float)
        return Band(empty, empty, empty, empty, np.array([], dtype=int), 0)
    start = min(float(s.index.min()) for s in present)
    end = max(float(s.index.max()) for s in present)
    finest = min(_step(s) for s in present)
    count = int(min(points, max(2, round((end - start) / finest) + 1)))
    grid = np.linspace(start, end, count)
    values = np.vstack([held_on_grid(s, grid) for s in present])
    n = (~np.isnan(values)).sum(axis=0)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: NaN, as wanted
            median = np.nanmedian(values, axis=0)
            low = np.nanpercentile(values, LOW, axis=0)
            high = np.nanpercentile(values, HIGH, axis=0)
    return Band(grid, median, low, high, n, len(present))
