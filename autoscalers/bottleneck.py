"""The bottleneck walk of Dhalion and HPA-Varga (Kanis 2023, ch. 6.7.1 and 6.7.4).

Start at a backpressured operator and follow the graph downstream until the
first operator that is not backpressured; that one is too slow.
"""

from __future__ import annotations

from harness.metrics.snapshot import MetricsSnapshot


def walk_to_bottleneck(snapshot: MetricsSnapshot, start: str) -> str:
    """Follow `start` downstream through backpressured operators to the first one that is not.

    Where an operator feeds several non-backpressured operators (no Nexmark
    query here does), the busiest of them is taken: it is the one most
    likely to be too slow. A backpressured sink (should not happen) is its
    own bottleneck.
    """
    topo = snapshot.topology
    ops = snapshot.operators
    current = start
    while True:
        downstream = topo.downstream(current)
        if not downstream:
            return current
        still_bp = [d for d in downstream if ops[d].is_backpressured]
        if still_bp:
            current = still_bp[0]
            continue
        return max(downstream, key=lambda d: ops[d].busy_ms_per_s)


def find_bottleneck(snapshot: MetricsSnapshot) -> tuple[str, str] | None:
    """(bottleneck, backpressured operator the walk started from), or None if nothing is backpressured.

    The walk starts at the first backpressured operator in topological order,
    so the answer is deterministic and, as in the thesis, a single operator.
    """
    for name in snapshot.topology.names:
        if snapshot.operators[name].is_backpressured:
            return walk_to_bottleneck(snapshot, name), name
    return None
