"""The query profile the SPEC "ideal" scaler needs: demand per source record and capacity per operator.

Gesscale (sec. V) compares every autoscaler with an ideal one that instantly
runs the least resources able to carry the input. With a topology's
per-subtask capacity (records/s at a full CPU) and selectivities, the demand
on each operator is linear in the input rate, so one coefficient per
operator - (records it receives per source record) / capacity - turns an
input-rate series into ideal parallelism.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

# Nexmark's event mix (1 person : 3 auctions : 46 bids per 50 events); the
# generator emits only the topics a query reads, in these proportions.
NEXMARK_TOPIC_WEIGHTS: dict[str, float] = {"persons": 1.0, "auctions": 3.0, "bids": 46.0}


@dataclass(frozen=True)
class OperatorProfile:
    name: str
    upstream: tuple[str, ...]
    topic: str | None
    capacity: float  # records/s per subtask, at the run's scale
    selectivity: float


def topic_shares(topics: list[str]) -> dict[str, float]:
    """Share of the total input rate each topic carries."""
    weights = {t: NEXMARK_TOPIC_WEIGHTS.get(t, 1.0) for t in topics}
    total = sum(weights.values())
    return {t: w / total for t, w in weights.items()} if total > 0 else {}


def demand_per_source_record(ops: list[OperatorProfile], shares: Mapping[str, float] | None = None
                             ) -> dict[str, float]:
    """Records each operator receives per record produced into Kafka (ops in topological order).

    `shares` (topic -> fraction of the input rate) as the backend recorded it;
    by default Nexmark's mix over the topics the query reads.
    """
    if shares is None:
        shares = topic_shares(sorted({o.topic for o in ops if not o.upstream and o.topic}))
    sources = [o for o in ops if not o.upstream]
    rate_in: dict[str, float] = {}
    by_name = {o.name: o for o in ops}
    for o in ops:
        if not o.upstream:
            rate_in[o.name] = shares.get(o.topic or "", 1.0 / max(1, len(sources)))
        else:
            rate_in[o.name] = sum(rate_in[u] * by_name[u].selectivity for u in o.upstream)
    return rate_in


def demand_coefficients(ops: list[OperatorProfile], shares: Mapping[str, float] | None = None
                        ) -> dict[str, float]:
    """Subtasks each operator needs per source record/s: demand / capacity."""
    demand = demand_per_source_record(ops, shares)
    return {o.name: (demand[o.name] / o.capacity if o.capacity > 0 else 0.0) for o in ops}


def drain_rate(ops: list[OperatorProfile], parallelism: Mapping[str, float],
               shares: Mapping[str, float] | None = None) -> float:
    """Source records/s the configuration `parallelism` can process: its bottleneck's capacity."""
    demand = demand_per_source_record(ops, shares)
    rates = [
        parallelism.get(o.name, 1.0) * o.capacity / demand[o.name]
        for o in ops
        if demand[o.name] > 0 and o.capacity > 0
    ]
    return min(rates) if rates else math.nan
