"""Hand-built topologies and snapshots for unit tests of autoscalers and metrics."""

from __future__ import annotations

from typing import Any

from harness.metrics.snapshot import MetricsSnapshot, OperatorMetrics, SubtaskMetrics
from harness.topology import OperatorSpec, Topology, topology_from_ops


def chain(*names: str, query: str = "test", topic: str = "bids") -> Topology:
    """A linear pipeline: names[0] is the source, each next one reads the previous."""
    ops = [OperatorSpec(name=names[0], topic=topic)]
    ops += [OperatorSpec(name=n, upstream=(names[i],)) for i, n in enumerate(names[1:])]
    return topology_from_ops(query, ops)


def op(
    parallelism: int = 1,
    *,
    rin: float = 0.0,
    rout: float | None = None,
    busy: float = 0.0,
    bp: float = 0.0,
    backpressured: bool | None = None,
    buffer: float = 0.0,
    cpu: float = 0.0,
    cpu_jvm: float | None = None,
    cpu_share: float = 1.0,
    lag: float | None = None,
    lag_rate: float | None = None,
    input_rate: float | None = None,
    subtasks: list[dict[str, float]] | None = None,
) -> OperatorMetrics:
    """Operator metrics with per-subtask values spread evenly unless given."""
    rout = rin if rout is None else rout
    cpu_jvm = cpu if cpu_jvm is None else cpu_jvm
    idle = max(0.0, 1000.0 - busy - bp)
    if subtasks is None:
        subs = tuple(
            SubtaskMetrics(
                records_in_per_s=rin / parallelism,
                records_out_per_s=rout / parallelism,
                busy_ms_per_s=busy,
                idle_ms_per_s=idle,
                backpressured_ms_per_s=bp,
                input_buffer_usage=buffer,
                cpu_load=cpu,
                cpu_jvm_load=cpu_jvm,
            )
            for _ in range(parallelism)
        )
    else:
        subs = tuple(SubtaskMetrics(**s) for s in subtasks)
    return OperatorMetrics(
        parallelism=parallelism,
        records_in_per_s=rin,
        records_out_per_s=rout,
        busy_ms_per_s=busy,
        idle_ms_per_s=idle,
        backpressured_ms_per_s=bp,
        is_backpressured=(bp > 100.0) if backpressured is None else backpressured,
        input_buffer_usage=buffer,
        cpu_load=cpu,
        cpu_jvm_load=cpu_jvm,
        cpu_share=cpu_share,
        subtasks=subs,
        lag=lag,
        lag_rate=lag_rate,
        input_rate=input_rate,
    )


# Job-level values a hand-built snapshot has unless a test says otherwise: measured, and quiet.
# A test of unmeasured metrics passes NaN explicitly.
JOB_DEFAULTS: dict[str, Any] = {"kafka_lag": 0.0, "kafka_lag_rate": 0.0, "input_rate": 0.0, "throughput": 0.0,
                                "latency_s": 0.0, "cpu_load": 0.0, "cpu_jvm_load": 0.0}


def snapshot(topology: Topology, t: float = 0.0, window_s: float = 15.0, **job: Any) -> Any:
    """Returns a builder: `snapshot(topo, lag=...)(source=op(...), map=op(...))`."""
    job = {**JOB_DEFAULTS, **job}

    def build(**ops: OperatorMetrics) -> MetricsSnapshot:
        missing = set(topology.names) - set(ops)
        if missing:
            raise ValueError(f"snapshot is missing operators {sorted(missing)}")
        tms = job.pop("taskmanagers", sum(m.parallelism for m in ops.values()))
        return MetricsSnapshot(t=t, window_s=window_s, topology=topology, operators=ops, taskmanagers=tms, **job)

    return build
