"""Fog nodes with heterogeneous network delay, and where an operator's subtasks run on them.

Gesscale (Arkian et al. 2021) scales a Flink operator over Raspberry Pi fog nodes whose
round-trip delays differ (0-300 ms, emulated with `tc`, sec. V-A) and models an operator's
Maximum Sustainable Throughput with n replicas as (sec. IV-C1, eq. 1, after Arkian et al.
2020)

    MST(n) = alpha * n^beta - gamma * ND_max

where ND_max is the greatest round-trip delay among the nodes running the replicas. Which
node a scale-up adds therefore changes the capacity it buys: a latency-aware scaler adds
the node closest to the ones in use and removes the farthest (sec. IV-E), a latency-unaware
one picks from an unsorted list (sec. V-A "THR-NLUnaware ... chooses resources randomly").

This module is that much and no more: a set of nodes, a slot count per node, the
placement of each operator's subtasks, ND_max per operator, and the capacity lost to it
(in subtasks' worth of capacity, gamma / alpha of eq. 1). The simulator core applies the
loss; the backend applies the autoscaler's node choice at every rescale. Pure and seeded.

Delays: each node has a delay d_k to the network core and RTT(i, j) = d_i + d_j for two
different nodes (a star, as `tc netem` on every node's interface gives); subtasks on one
node exchange nothing over the network (ND_max 0 for a single node).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from harness.backends.sim.config import NetworkConfig
from harness.vocabulary import NodeChoice

__all__ = ["NetworkConfig", "Placement"]


class Placement:
    """Which node each subtask of each placed operator runs on; changed one subtask at a time."""

    def __init__(self, cfg: NetworkConfig, parallelism: Mapping[str, int], rng: np.random.Generator) -> None:
        self.cfg = cfg
        self.rng = rng
        self.nodes: dict[str, list[int]] = {op: [] for op in parallelism if self.placed(op)}
        # the initial deployment is the same for every autoscaler: nearest-first
        for op, p in parallelism.items():
            if op in self.nodes:
                for _ in range(max(1, int(p))):
                    self._add(op, NodeChoice.NEAREST)

    def placed(self, op: str) -> bool:
        return self.cfg.operators is None or op in self.cfg.operators

    def used(self) -> list[int]:
        """Slots taken per node."""
        count = [0] * len(self.cfg.node_delays_ms)
        for nodes in self.nodes.values():
            for n in nodes:
                count[n] += 1
        return count

    def nd_max(self, op: str) -> float:
        return self.cfg.nd_max(self.nodes.get(op, []))

    def loss_subtasks(self, op: str) -> float:
        """Capacity lost to the network, in subtasks' worth (gamma ND_max / alpha)."""
        return self.cfg.mst_loss_per_ms * self.nd_max(op)

    def apply(self, parallelism: Mapping[str, int], choice: NodeChoice) -> None:
        """Add or remove subtasks one at a time until every placed operator has its new parallelism."""
        for op, target in parallelism.items():
            if op not in self.nodes:
                continue
            target = max(1, int(target))
            while len(self.nodes[op]) < target:
                self._add(op, choice)
            while len(self.nodes[op]) > target:
                self._remove(op, choice)

    # ------------------------------------------------------------------ choices

    def _free_nodes(self) -> list[int]:
        used = self.used()
        free = [k for k, u in enumerate(used) if u < self.cfg.slots_per_node]
        # over capacity (the scale manager should cap task managers at the slots): the least loaded node
        return free or [int(np.argmin(used))]

    def _add(self, op: str, choice: NodeChoice) -> None:
        free = self._free_nodes()
        mine = self.nodes[op]
        if choice == NodeChoice.NEAREST:
            delays = self.cfg.node_delays_ms

            def cost(k: int) -> tuple[float, float, float]:
                return (self.cfg.nd_max([*mine, k]), sum(self.cfg.rtt(k, m) for m in set(mine)), delays[k])

            node = min(free, key=cost)
        else:  # an unsorted list: any free slot is as likely as any other
            used = self.used()
            slots = [k for k in free for _ in range(max(1, self.cfg.slots_per_node - used[k]))]
            node = int(slots[int(self.rng.integers(len(slots)))])
        mine.append(node)

    def _remove(self, op: str, choice: NodeChoice) -> None:
        mine = self.nodes[op]
        if choice == NodeChoice.NEAREST:
            delays = self.cfg.node_delays_ms

            def farness(i: int) -> tuple[float, float]:
                k = mine[i]
                return (max((self.cfg.rtt(k, m) for m in mine if m != k), default=0.0), delays[k])

            idx = max(range(len(mine)), key=farness)
        else:
            idx = int(self.rng.integers(len(mine)))
        mine.pop(idx)
