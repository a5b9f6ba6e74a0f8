"""Small helpers for simulator tests: a constant-rate pattern and a started backend."""

from __future__ import annotations

import numpy as np
import pytest

from harness.backends.sim.backend import SimBackend
from harness.backends.sim.config import SimConfig
from harness.topology import OperatorSpec, Topology, topology_from_ops
from workloads.arrivals import ArrivalConfig
from workloads.patterns import LoadPattern


def constant(rate: float, seconds: int) -> LoadPattern:
    return LoadPattern(name="constant", step_rates=np.full(seconds, float(rate)), step_s=1.0)


def pipeline(source_cap: float = 10_000, mid_cap: float = 5_000, sink_cap: float = 100_000,
             state_bytes: float = 0.0, ttl: float | None = None) -> Topology:
    """source (1 partition unit per subtask) -> mid -> sink, selectivity 1."""
    ops = [
        OperatorSpec(name="src", topic="bids", capacity=source_cap),
        OperatorSpec(name="mid", upstream=("src",), capacity=mid_cap, state_bytes_per_record=state_bytes,
                     state_ttl_s=ttl),
        OperatorSpec(name="sink", upstream=("mid",), capacity=sink_cap, selectivity=0.0),
    ]
    topo = topology_from_ops("test", ops, partitions=24)
    return Topology(query=topo.query, operators=topo.operators, partitions=24,
                    rescale_downtime={"in_place_base_s": 5.0, "savepoint_base_s": 10.0, "savepoint_s_per_gb": 20.0})


def start(topo: Topology, pattern: LoadPattern, parallelism: dict[str, int] | int = 1, *,
          kind: str = "deterministic", method: str = "in_place", seed: int = 1, **cfg: object) -> SimBackend:
    """A started sim backend; exact readings and 1-CPU task managers unless `cfg` says otherwise
    (the invariants below are about the model, not about Flink's meters)."""
    cfg = {"readings": "exact", "taskmanager_cpu": 1.0, **cfg}
    b = SimBackend()
    b.start_with(topo, pattern, SimConfig(**cfg), parallelism, seed=seed, method=method,  # type: ignore[arg-type]
                 arrivals=ArrivalConfig(kind=kind))  # type: ignore[arg-type]
    return b


@pytest.fixture
def linear() -> Topology:
    return pipeline()
