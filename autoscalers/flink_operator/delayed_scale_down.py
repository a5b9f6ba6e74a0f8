"""Lazy scale-down (the operator's DelayedScaleDown): a vertex must want to shrink for a while.

A vertex must ask for a lower parallelism for the whole `scale-down.interval`; it then gets
the highest parallelism it asked for within that interval. Asking for its current parallelism
or more forgets the wishes (the caller clears it); so does a rescale.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Wishes:
    """Scale-down wishes of one vertex since `first_trigger`."""

    first_trigger: float
    # (t, parallelism, outside band), parallelism strictly decreasing from oldest to newest
    wishes: list[tuple[float, int, bool]] = field(default_factory=list)

    def record(self, t: float, p: int, outside: bool) -> None:
        while self.wishes and self.wishes[-1][1] <= p:
            self.wishes.pop()
        self.wishes.append((t, p, outside))

    def max_since(self, window_start: float) -> tuple[float, int, bool]:
        while len(self.wishes) > 1 and self.wishes[0][0] < window_start:
            self.wishes.pop(0)
        return self.wishes[0]


class DelayedScaleDown:
    """Pending scale-downs per vertex."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._pending: dict[str, _Wishes] = {}

    def wish(self, vertex: str, now: float, new_p: int, outside: bool) -> tuple[int, bool] | None:
        """(parallelism, outside band) to apply now, or None while the scale-down is still delayed."""
        if self.interval_s <= 0:
            return new_p, outside
        info = self._pending.setdefault(vertex, _Wishes(first_trigger=now))
        info.record(now, new_p, outside)
        window_start = now - self.interval_s
        if window_start < info.first_trigger:
            return None
        _, p, out = info.max_since(window_start)
        return p, out

    def due(self, vertex: str) -> float | None:
        """When the pending scale-down of `vertex` may happen first."""
        info = self._pending.get(vertex)
        return None if info is None else info.first_trigger + self.interval_s

    def cancel(self, vertex: str) -> None:
        self._pending.pop(vertex, None)

    def clear(self) -> None:
        self._pending.clear()
