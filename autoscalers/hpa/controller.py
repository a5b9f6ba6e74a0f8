"""Kubernetes' HPA normalisation of a desired size, per operator (pkg/controller/podautoscaler).

What the controller does with the size the metrics propose, written from the Kubernetes source
(horizontal.go) and the `autoscaling/v2` documentation:

- The first reconcile of a target records its current size as a recommendation
  (`recordInitialRecommendation`), so the stabilisation window starts out holding the current
  size: a scale-down has to wait a window even right after start.
- Without `behavior` (the thesis' setting and Kubernetes' legacy path): the size is the
  highest recommendation of the last `scale_down_window_s`, the current one included (an entry
  exactly a window old still counts, in Kubernetes and the thesis' code alike), clamped to
  min/max replicas. Kubernetes' legacy path also caps a scale-up at max(2 x current, 4); the
  thesis' code did not, and neither does this (its scale manager caps growth instead).
- With `behavior`: a proposal at or above the current size is stabilised over the scale-up
  window with the lowest recommendation winning, one below it over the scale-down window with
  the highest winning (entries strictly newer than the window's start). Then the rate policies
  of that direction: each policy allows, from the size at the start of its period (the current
  size minus what was added within the period, or plus what was removed), `value` more or fewer
  pods, or `value` percent more (rounded up) or fewer (rounded down); `selectPolicy` Max takes
  the policy allowing the largest change, Min the smallest, Disabled allows none. Finally
  min/max replicas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autoscalers.hpa.config import HPAConfig, HPAScalingPolicy


@dataclass
class _Target:
    """What the controller remembers about one operator."""

    recommendations: list[tuple[float, int]] = field(default_factory=list)
    up_events: list[tuple[float, int]] = field(default_factory=list)  # (t, pods added)
    down_events: list[tuple[float, int]] = field(default_factory=list)  # (t, pods removed)


def _changed_within(events: list[tuple[float, int]], t: float, period_s: float) -> int:
    return sum(n for ts, n in events if ts > t - period_s)


def scale_up_limit(current: int, events: list[tuple[float, int]], t: float,
                   policies: tuple[HPAScalingPolicy, ...], select: str) -> int:  # fmt: skip
    """Largest size the scale-up policies allow now (calculateScaleUpLimitWithScalingRules)."""
    if select == "Disabled":
        return current
    pick = min if select == "Min" else max
    result: float = math.inf if select == "Min" else -math.inf
    for policy in policies:
        start = current - _changed_within(events, t, policy.period_seconds)
        if policy.type == "Pods":
            proposed = start + policy.value
        else:
            proposed = math.ceil(start * (1 + policy.value / 100))
        result = pick(result, proposed)
    return int(result) if math.isfinite(result) else current


def scale_down_limit(current: int, events: list[tuple[float, int]], t: float,
                     policies: tuple[HPAScalingPolicy, ...], select: str) -> int:  # fmt: skip
    """Smallest size the scale-down policies allow now (calculateScaleDownLimitWithBehaviors)."""
    if select == "Disabled":
        return current
    pick = max if select == "Min" else min
    result: float = -math.inf if select == "Min" else math.inf
    for policy in policies:
        start = current + _changed_within(events, t, policy.period_seconds)
        if policy.type == "Pods":
            proposed = start - policy.value
        else:
            proposed = int(start * (1 - policy.value / 100))
        result = pick(result, proposed)
    return int(result) if math.isfinite(result) else current


class HPAController:
    """Seeding, stabilisation, rate policies and min/max for every operator of a job."""

    def __init__(self, config: HPAConfig) -> None:
        self.config = config
        self._targets: dict[str, _Target] = {}

    def seed(self, name: str, t: float, current: int) -> None:
        """First reconcile: the window starts with the current size."""
        if name not in self._targets:
            self._targets[name] = _Target(recommendations=[(t, current)])

    def normalise(self, name: str, t: float, current: int, desired: int) -> tuple[int, str]:
        """The size to apply and what limited it ("" when the proposal stands)."""
        self.seed(name, t, current)
        if self.config.behavior is None:
            size, why = self._stabilise_legacy(name, t, desired), "max of last {w:.0f} s"
            why = why.format(w=self.config.scale_down_window_s) if size != desired else ""
        else:
            size, why = self._stabilise_behavior(name, t, current, desired)
            size, limit_why = self._rate_limit(name, t, current, size)
            why = why or limit_why
        lo, hi = self.config.min_replicas, self.config.max_replicas or math.inf
        clamped = int(min(max(size, lo), hi))
        if clamped != size:
            why = f"{'min' if clamped == lo else 'max'} replicas {clamped}"
        return clamped, why

    def _stabilise_legacy(self, name: str, t: float, desired: int) -> int:
        w = self.config.scale_down_window_s
        target = self._targets[name]
        kept = [(ts, d) for ts, d in target.recommendations if t - w <= ts <= t] if w > 0 else []
        target.recommendations = [*kept, (t, desired)]
        return max([d for _, d in kept] + [desired])

    def _stabilise_behavior(self, name: str, t: float, current: int, desired: int) -> tuple[int, str]:
        b = self.config.behavior
        assert b is not None
        up_w = b.scale_up.stabilization_window_seconds or 0.0
        down_w = b.scale_down.stabilization_window_seconds
        if down_w is None:
            down_w = self.config.scale_down_window_s
        target = self._targets[name]
        if desired >= current:
            window, pick, why = up_w, min, "scale-up stabilised over {w:.0f} s"
        else:
            window, pick, why = down_w, max, "scale-down stabilised over {w:.0f} s"
        size = desired
        for ts, d in target.recommendations:
            if ts > t - window:
                size = pick(size, d)
        keep_from = t - max(up_w, down_w)
        target.recommendations = [(ts, d) for ts, d in target.recommendations if ts >= keep_from] + [(t, desired)]
        return size, (why.format(w=window) if size != desired else "")

    def _rate_limit(self, name: str, t: float, current: int, size: int) -> tuple[int, str]:
        b = self.config.behavior
        assert b is not None
        target = self._targets[name]
        if size > current:
            allowed = scale_up_limit(current, target.up_events, t, b.up_policies(), b.scale_up.select_policy)
            limit = max(current, allowed)
            if size > limit:
                return limit, f"scale-up policy allows {limit}"
        elif size < current:
            limit = min(current, scale_down_limit(
                current, target.down_events, t, b.down_policies(), b.scale_down.select_policy))
            if size < limit:
                return limit, f"scale-down policy allows {limit}"
        return size, ""

    def scaled(self, name: str, t: float, before: int, after: int) -> None:
        """A rescale happened (storeScaleEvent): it counts against the policies' periods."""
        target = self._targets.setdefault(name, _Target())
        longest = 1800.0
        if after > before:
            target.up_events = [e for e in target.up_events if e[0] > t - longest] + [(t, after - before)]
        elif after < before:
            target.down_events = [e for e in target.down_events if e[0] > t - longest] + [(t, before - after)]
