"""Inter-arrival sample for MEAD from the generator's sampled send times, read incrementally.

The generator writes `t_us,topic,producer` for each record it samples independently with
probability 1/`timestamps_every` (`--timestamps-out`), so the file is already a thinned copy of
the send process. `TimestampTail` reads only what was appended since the last call, keeps the
last `window_s` seconds of the job's topics, and thins once more to at most `size` gaps, so
the sample has the simulator's semantics (`workloads.arrivals.interarrival_sample`): gaps of
a thinned process in real time, covering the whole window, so burst durations survive for
MEAD's MAP fit (Russo Russo et al. 2021, sec. IV-C; MEAD rescales to the measured rate).

Producer threads flush their samples separately (at least once a second), so the window ends
at the earliest "latest sample" over the producers seen: before that point every thread's
samples are in the file and the sample has no artificial gap at its end.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

READ_CHUNK = 8 << 20  # bytes per poll at most (a backlog is read over several snapshots)


def timestamps_every(mean_rate: float, window_s: float, size: int, oversample: float = 2.0) -> int:
    """Sampling divisor so a window holds about `oversample` x `size` samples at the mean rate."""
    if mean_rate <= 0 or size <= 0:
        return 1
    return max(1, int(mean_rate * window_s / (oversample * size)))


def thinned_gaps(times_s: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Gaps of a random subset of at most `size` + 1 of the (unsorted) times: an independent thinning."""
    t = np.asarray(times_s, dtype=float)
    if len(t) > size + 1:
        t = t[rng.choice(len(t), size + 1, replace=False)]
    t = np.sort(t)
    return np.diff(t)


class TimestampTail:
    """Incremental reader of the generator's timestamp file; `sample()` gives the recent gaps (s)."""

    def __init__(self, path: Path, topics: Iterable[str], window_s: float = 60.0, size: int = 5000,
                 seed: int = 0) -> None:
        self.path = Path(path)
        self.topics = set(topics)
        self.window_s = window_s
        self.size = size
        self._rng = np.random.default_rng([seed, 0x1A7])
        self._offset = 0
        self._header = True
        self._times = np.zeros(0)  # seconds (epoch), job topics only, within the window
        self._latest: dict[str, float] = {}  # producer -> its newest sample (s)
        self.lines_read = 0

    def poll(self) -> int:
        """Read the complete lines appended since the last poll; returns how many were new."""
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read(READ_CHUNK)
        except OSError:
            return 0
        end = chunk.rfind(b"\n")
        if end < 0:
            return 0
        self._offset += end + 1
        lines = chunk[:end].decode("utf-8", errors="replace").splitlines()
        if self._header and lines and lines[0].startswith("t_us"):
            lines = lines[1:]
        self._header = False
        new: list[float] = []
        for line in lines:
            parts = line.split(",")
            if len(parts) < 3:
                continue
            try:
                t = int(parts[0]) / 1e6
            except ValueError:
                continue
            prod = parts[2]
            if t > self._latest.get(prod, -np.inf):
                self._latest[prod] = t
            if parts[1] in self.topics:
                new.append(t)
        self.lines_read += len(lines)
        if new:
            self._times = np.concatenate([self._times, np.asarray(new)])
        self._trim()
        return len(lines)

    def _end(self) -> float | None:
        return min(self._latest.values()) if self._latest else None

    def _trim(self) -> None:
        end = self._end()
        if end is not None and len(self._times):
            self._times = self._times[self._times >= end - self.window_s]

    def sample(self) -> np.ndarray | None:
        """Thinned inter-arrival times over the last `window_s` s (None when fewer than 2 samples)."""
        self.poll()
        end = self._end()
        if end is None:
            return None
        t = self._times[(self._times >= end - self.window_s) & (self._times <= end)]
        if len(t) < 2 or self.size <= 0:
            return None
        gaps = thinned_gaps(t, self.size, self._rng)
        return gaps if len(gaps) else None
