"""The scale manager: the limits every autoscaler's request passes through.

Thesis ch. 6.6.4: an over-provisioning factor multiplies every scale-up target
(a request above the current parallelism; a scale-down or a kept size is taken
as asked - multiplying a scale-down would shrink it or cancel it); no operator
grows by more than `max_increase_per_action` in one action; when the total
exceeds `max_taskmanagers` the available task managers are divided in
proportion to the request (10/30/20 with 30 available -> 5/15/10). Under
operator-based scaling one task manager runs one subtask, so
#task managers = sum of parallelism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autoscalers.base import ScalingDecision
from harness.config import ScaleManagerConfig


@dataclass(frozen=True)
class ScalingPlan:
    """What will be applied, and which limits changed the request."""

    parallelism: dict[str, int]
    cpu_share: dict[str, float]
    limits: list[str] = field(default_factory=list)
    changed: bool = False


def proportional_cap(request: dict[str, int], available: int, minimum: int = 1) -> dict[str, int]:
    """Divide `available` slots in proportion to `request` (largest remainder, each >= minimum)."""
    total = sum(request.values())
    if total <= available:
        return dict(request)
    if available < minimum * len(request):
        raise ValueError(f"{available} task managers cannot give {len(request)} operators {minimum} each")
    exact = {op: p * available / total for op, p in request.items()}
    out = {op: max(minimum, math.floor(v)) for op, v in exact.items()}
    spare = available - sum(out.values())
    for op in sorted(exact, key=lambda o: exact[o] - math.floor(exact[o]), reverse=True):
        if spare <= 0:
            break
        if out[op] < request[op]:
            out[op] += 1
            spare -= 1
    while sum(out.values()) > available:  # minimums pushed us over: take from the largest
        biggest = max(out, key=lambda o: out[o])
        out[biggest] -= 1
    return out


class ScaleManager:
    """Turns a decision into a plan within the configured limits."""

    def __init__(self, config: ScaleManagerConfig) -> None:
        self.config = config

    def plan(
        self,
        decision: ScalingDecision,
        current: dict[str, int],
        current_share: dict[str, float] | None = None,
    ) -> ScalingPlan:
        cfg = self.config
        limits: list[str] = []
        unknown = sorted(set(decision.parallelism) - set(current))
        if unknown:
            raise ValueError(f"decision names operators {unknown} not in the job ({sorted(current)})")
        target = {op: decision.parallelism.get(op, p) for op, p in current.items()}

        if cfg.overprovisioning != 1.0:
            scaled_up = {op for op, p in target.items() if op in decision.parallelism and p > current[op]}
            if scaled_up:
                target = {op: math.ceil(p * cfg.overprovisioning - 1e-9) if op in scaled_up else p
                          for op, p in target.items()}  # fmt: skip
                limits.append(f"overprovisioning x{cfg.overprovisioning} on {', '.join(sorted(scaled_up))}")

        capped = {op: min(p, current[op] + cfg.max_increase_per_action) for op, p in target.items()}
        if capped != target:
            grown = [op for op in target if capped[op] != target[op]]
            limits.append(f"max increase {cfg.max_increase_per_action} per action on {', '.join(grown)}")
        target = {op: max(cfg.min_parallelism, p) for op, p in capped.items()}

        if sum(target.values()) > cfg.max_taskmanagers:
            asked = sum(target.values())
            target = proportional_cap(target, cfg.max_taskmanagers, cfg.min_parallelism)
            limits.append(f"{asked} task managers requested, {cfg.max_taskmanagers} available: proportional")

        share_now = dict(current_share or {op: 1.0 for op in current})
        share = {**share_now, **{op: min(1.0, max(0.01, s)) for op, s in decision.cpu_share.items()}}
        changed = target != current or any(abs(share[op] - share_now.get(op, 1.0)) > 1e-9 for op in share)
        return ScalingPlan(parallelism=target, cpu_share=share, limits=limits, changed=changed)
