"""Per-vertex scaling (the operator's JobVertexScaler and ParallelismAligner).

scale factor = target capacity / true processing rate, clamped to [1 - scale-down.max-factor,
1 + scale-up.max-factor]; p' = ceil(factor * p) within the min/max parallelism and the vertex's
max parallelism (key groups; for sources also the partition count), then aligned.

Alignment (current release, ParallelismAligner + BuiltInAlignmentMode): only for vertices
behind a hash (keyBy) edge and partitioned sources (`isApplicable`); N = the source's partitions,
else the key groups (max parallelism). The region scanned upward from p' is [p', min(N, upper)]
on a scale-up and [p', min(p, N, upper)] on a scale-down. EVENLY_SPREAD accepts divisors of N,
BALANCED (the default) also any p with a lower per-subtask share N // p; when nothing in the
region qualifies both keep p' (they never block). The deprecated
`scaling.key-group.partitions.adjust.mode` (EVENLY_SPREAD, MAXIMIZE_UTILISATION = accept a
lower share) keeps its old behaviour: when the region has nothing, search downward from p' for
the boundary where the per-subtask share grows, snap up to a divisor there, clamp to the lower
limit - and if that inverts the scaling direction, keep the current parallelism (block).

Release 1.6.1 (`DIVISORS_UP_TO_HALF`, the legacy preset): every vertex, N = its max
parallelism; scan p' up to min(N / 2, upper) for a divisor of N, else keep p'.

Our topologies carry no ship strategies, so a non-source vertex counts as keyed when its spec
keeps state (`state_bytes_per_record > 0` or `state_ttl_s`): in the Nexmark queries the
stateful operators are exactly the keyed ones.

Deviation: ceil() is taken after rounding the product to 9 decimals, so that 0.4 * 5 gives 2,
not 3 through a floating-point residue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscalers.flink_operator.config import FlinkOperatorConfig
from autoscalers.flink_operator.evaluator import VertexEvaluation
from harness.topology import Topology


def safe_ceil(x: float) -> int:
    return math.ceil(round(x, 9))


def is_keyed(topology: Topology, name: str) -> bool:
    spec = topology.op(name)
    return not spec.is_source and (spec.state_bytes_per_record > 0 or spec.state_ttl_s is not None)


def first_aligned_in_region(current: int, target: int, n: int, upper_limit: int, accept_lower_share: bool) -> int:
    """First p scanned upward from `target` in the direction's region that divides n (or lowers
    the per-subtask share n // p when `accept_lower_share`); 0 when none."""
    upper = min(n, upper_limit)
    end = upper if target > current else min(current, upper)
    for p in range(target, end + 1):
        if n % p == 0 or (accept_lower_share and n // p < n // target):
            return p
    return 0


def relaxed_downward_fallback(target: int, n: int, lower_limit: int) -> int:
    """The deprecated modes' fallback: down from target to where the per-subtask share grows,
    snapped up to a divisor there, at least `lower_limit`."""
    p = target
    while p > 0:
        if n // p > n // target:
            if n % p != 0:
                p += 1
            break
        p -= 1
    return max(p, lower_limit)


def align_parallelism(
    current: int, target: int, n: int, upper_limit: int, mode: str = "BALANCED", lower_limit: int = 1
) -> int:
    """Align `target` to `n` key groups / partitions with the given rule (see the module docstring)."""
    if mode == "OFF" or n <= 0 or target == current:
        return target
    if mode == "DIVISORS_UP_TO_HALF":
        upper = min(n, upper_limit)
        for p in range(target, min(n // 2, upper) + 1):
            if n % p == 0:
                return p
        return target
    if mode in ("BALANCED", "EVENLY_SPREAD"):
        aligned = first_aligned_in_region(current, target, n, upper_limit, mode == "BALANCED")
        return aligned or target
    if mode in ("LEGACY_EVENLY_SPREAD", "LEGACY_MAXIMIZE_UTILISATION"):
        aligned = first_aligned_in_region(current, target, n, upper_limit, mode == "LEGACY_MAXIMIZE_UTILISATION")
        if aligned:
            return aligned
        candidate = relaxed_downward_fallback(target, n, lower_limit)
        inverted = candidate <= current if target > current else candidate >= current
        return current if inverted else candidate
    raise ValueError(f"unknown alignment mode {mode!r}")


@dataclass(frozen=True)
class LastScaling:
    """A vertex's last rescale, for ineffective-scaling detection and the 1.6 grace period."""

    t: float
    before: int
    after: int
    tpr: float
    expected_tpr: float


class JobVertexScaler:
    """New parallelism per vertex, and the checks against past rescales of that vertex."""

    def __init__(self, config: FlinkOperatorConfig) -> None:
        self.config = config
        self.last: dict[str, LastScaling] = {}

    def max_parallelism(self, topo: Topology, name: str) -> int:
        spec = topo.op(name)
        if spec.is_source and self.config.alignment() != "DIVISORS_UP_TO_HALF":
            return min(spec.max_parallelism, topo.partitions)
        return spec.max_parallelism

    def compute_parallelism(self, topo: Topology, name: str, ev: VertexEvaluation) -> tuple[int, float]:
        """New parallelism (clamped, aligned) and the raw scale factor."""
        cfg = self.config
        p = ev.parallelism
        factor = 0.0 if math.isinf(ev.tpr) else ev.target_capacity / ev.tpr
        factor = min(max(factor, 1.0 - cfg.scale_down_max_factor), 1.0 + cfg.scale_up_max_factor)
        lower = min(p, cfg.vertex_min_parallelism)
        upper = max(p, cfg.vertex_max_parallelism)
        max_par = self.max_parallelism(topo, name)
        new_p = min(max(lower, safe_ceil(factor * p)), min(max_par, upper))
        if new_p == p:
            return p, factor
        mode = cfg.alignment()
        spec = topo.op(name)
        if mode == "DIVISORS_UP_TO_HALF":
            n = spec.max_parallelism  # release 1.6: every vertex, to its key groups
        elif spec.is_source:
            n = topo.partitions
        elif is_keyed(topo, name):
            n = spec.max_parallelism
        else:
            return new_p, factor
        return align_parallelism(p, new_p, n, min(max_par, upper), mode, lower), factor

    def ineffective(self, name: str, ev: VertexEvaluation) -> dict[str, float] | None:
        """The last scale-up of this vertex delivered < threshold of its expected TPR increase."""
        last = self.last.get(name)
        p = ev.parallelism
        if last is None or last.after != p or last.after <= last.before:
            return None
        expected = last.expected_tpr - last.tpr
        actual = ev.tpr - last.tpr
        if expected > 0 and actual / expected < self.config.scaling_effectiveness_threshold:
            return {"expected_increase": expected, "actual_increase": actual}
        return None

    def in_grace_period(self, name: str, ev: VertexEvaluation, now: float) -> bool:
        """Release 1.6: no scale-down within `scale-up.grace-period` of this vertex's scale-up."""
        last = self.last.get(name)
        grace = self.config.scale_up_grace_period
        return (
            grace > 0 and last is not None and last.after == ev.parallelism and last.after > last.before
            and now < last.t + grace
        )  # fmt: skip

    def record(self, name: str, t: float, ev: VertexEvaluation, new_p: int) -> None:
        expected = ev.tpr / ev.parallelism * new_p if math.isfinite(ev.tpr) else math.inf
        self.last[name] = LastScaling(t, ev.parallelism, new_p, ev.tpr, expected)

    def applied(self, name: str, p: int) -> None:
        """The scale manager capped us: expect what was really applied."""
        last = self.last.get(name)
        if last is not None and last.after != p:
            scaled = last.expected_tpr / last.after * p if math.isfinite(last.expected_tpr) else math.inf
            self.last[name] = LastScaling(last.t, last.before, p, last.tpr, scaled)
