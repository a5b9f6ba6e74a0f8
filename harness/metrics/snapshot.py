"""`MetricsSnapshot`: what every autoscaler sees, whatever the backend.

The simulator and the Prometheus catalogue of the `local`/`k8s` backends both
build this one shape, averaged over the loop's metrics window. Rates are
records per second; times are Flink's ms-per-second gauges (0..1000).

Unknown is not zero: a value the monitor could not measure is NaN (None for
the optional and boolean fields), and `why_missing` says why. The names of the
fields are tied to `harness.vocabulary.Metric` by `JOB_FIELDS` / `OPERATOR_FIELDS`,
so an autoscaler's declared `Needs` can be checked against any snapshot
(`MetricsSnapshot.gaps`) before a decision is taken on it.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.topology import Topology
from harness.vocabulary import Metric

if TYPE_CHECKING:  # numpy only for the type: validating a config loads this module, and needs no numpy
    import numpy as np

NAN = math.nan


def measured(value: Any) -> bool:
    """True for a value that was measured: not None, not NaN, and (arrays) not empty."""
    if value is None:
        return False
    numpy = sys.modules.get("numpy")  # an array exists only once numpy is loaded
    if numpy is not None and isinstance(value, numpy.ndarray):
        return bool(value.size > 0)
    if isinstance(value, bool):
        return True
    try:
        return not math.isnan(value)
    except TypeError:
        return True


@dataclass(frozen=True)
class SubtaskMetrics:
    """One parallel instance of an operator."""

    records_in_per_s: float = NAN
    records_out_per_s: float = NAN
    busy_ms_per_s: float = NAN
    idle_ms_per_s: float = NAN
    backpressured_ms_per_s: float = NAN
    input_buffer_usage: float = NAN  # 0..1 (Flink inPoolUsage)
    cpu_load: float = NAN  # 0..1 of the hosting task manager's CPU quota
    cpu_jvm_load: float = NAN  # 0..1 of the host (Status.JVM.CPU.Load of the hosting task manager)
    lag: float | None = None  # sources: pending records of the partitions it reads


@dataclass(frozen=True)
class OperatorMetrics:
    """One job vertex, aggregated over its subtasks (rates summed, times averaged).

    An aggregate is NaN when any of its subtasks' values is: a sum over a missing
    subtask would understate the operator, so it is not offered as a measurement.
    """

    parallelism: int
    records_in_per_s: float = NAN
    records_out_per_s: float = NAN
    busy_ms_per_s: float = NAN
    idle_ms_per_s: float = NAN
    backpressured_ms_per_s: float = NAN
    is_backpressured: bool | None = None
    input_buffer_usage: float = NAN
    cpu_load: float = NAN
    cpu_jvm_load: float = NAN
    cpu_share: float = 1.0  # vertical scaling: fraction of a task manager's CPU quota (set, not measured)
    subtasks: tuple[SubtaskMetrics, ...] = ()
    # Sources only: the topic they read.
    lag: float | None = None  # pending records in Kafka for this source's topic
    lag_rate: float | None = None  # d(lag)/dt, records/s
    input_rate: float | None = None  # records/s produced into this source's topic
    # Largest round-trip delay among the nodes hosting the subtasks (ms); NaN where not known.
    network_delay_max_ms: float = NAN

    @property
    def busy_fraction(self) -> float:
        return self.busy_ms_per_s / 1000.0

    @property
    def max_busy_ms_per_s(self) -> float:
        if not self.subtasks:
            return self.busy_ms_per_s
        return max(s.busy_ms_per_s for s in self.subtasks)

    @property
    def backpressured_fraction(self) -> float:
        return self.backpressured_ms_per_s / 1000.0



class _BuiltOnFirstRead:
    """The `subtasks` of a `LazySubtasksOperatorMetrics`: built by its builder on first read, then kept."""

    def __get__(self, obj: LazySubtasksOperatorMetrics | None, owner: type) -> Any:
        if obj is None:
            return ()  # the class attribute: the field's default
        d = obj.__dict__
        subtasks = d["subtasks"] = d["_build_subtasks"]()
        del d["_build_subtasks"]  # what it held (the snapshot's lists) can go
        return subtasks


class LazySubtasksOperatorMetrics(OperatorMetrics):
    """OperatorMetrics whose per-subtask readings are built the first time `subtasks` is read.

    A backend that derives the readings from arrays (the sim: one object per subtask per snapshot, most of a
    snapshot's cost) pays for them only in the snapshots an autoscaler looks into; the values are the ones
    it would have built at once. Equal to, hashing as and printing as the `OperatorMetrics` of the same
    values; a copy or a pickle is that plain `OperatorMetrics`."""

    subtasks = _BuiltOnFirstRead()  # type: ignore[assignment]

    @classmethod
    def create(cls, build_subtasks: Callable[[], tuple[SubtaskMetrics, ...]], **values: Any) -> OperatorMetrics:
        """`values` as OperatorMetrics(**values) takes them (all but `subtasks`); `build_subtasks()` gives the
        subtasks when they are first read (what it reads must not change afterwards)."""
        obj = object.__new__(cls)  # not the frozen __init__: no per-field __setattr__
        obj.__dict__.update(_OPERATOR_DEFAULTS)
        obj.__dict__.update(values)
        obj.__dict__["_build_subtasks"] = build_subtasks
        return obj

    def plain(self) -> OperatorMetrics:
        """The same values as a plain `OperatorMetrics` (the subtasks built)."""
        return OperatorMetrics(**{f.name: getattr(self, f.name) for f in dataclasses.fields(OperatorMetrics)})

    def __eq__(self, other: object) -> bool:
        return self.plain() == other if isinstance(other, OperatorMetrics) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.plain())

    def __repr__(self) -> str:
        return repr(self.plain())

    def __reduce__(self) -> str | tuple[Any, ...]:
        return self.plain().__reduce__()


_OPERATOR_DEFAULTS = {f.name: f.default for f in dataclasses.fields(OperatorMetrics) if f.name != "subtasks"}

# Metric -> attribute, for the job and for an operator (the vocabulary's link to this shape).
JOB_FIELDS: dict[Metric, str] = {
    Metric.INPUT_RATE: "input_rate",
    Metric.THROUGHPUT: "throughput",
    Metric.LAG: "kafka_lag",
    Metric.LAG_RATE: "kafka_lag_rate",
    Metric.LATENCY_KAFKA: "latency_s",
    Metric.LATENCY_E2E_MEAN: "latency_e2e_s",
    Metric.LATENCY_E2E_P95: "latency_e2e_p95_s",
    Metric.TASKMANAGERS: "taskmanagers",
    Metric.CPU: "cpu_load",
    Metric.CPU_JVM: "cpu_jvm_load",
    Metric.INTERARRIVAL: "interarrival_s",
}
OPERATOR_FIELDS: dict[Metric, str] = {
    Metric.RECORDS_IN: "records_in_per_s",
    Metric.RECORDS_OUT: "records_out_per_s",
    Metric.BUSY: "busy_ms_per_s",
    Metric.IDLE: "idle_ms_per_s",
    Metric.BACKPRESSURED: "backpressured_ms_per_s",
    Metric.IS_BACKPRESSURED: "is_backpressured",
    Metric.BUFFER_USAGE: "input_buffer_usage",
    Metric.CPU: "cpu_load",
    Metric.CPU_JVM: "cpu_jvm_load",
    Metric.LAG: "lag",
    Metric.LAG_RATE: "lag_rate",
    Metric.INPUT_RATE: "input_rate",
    Metric.NETWORK_DELAY_MAX: "network_delay_max_ms",
}


@dataclass(frozen=True)
class Needs:
    """The metrics an autoscaler's decision rests on, by where they must be measured.

    `job`: job-level values; `operators`: every operator; `sources` / `inner`: only the
    source operators / only the others. The MAPE loop takes no decision on a snapshot that
    lacks a job-level need, and none that changes an operator lacking one of its needs.
    """

    job: frozenset[Metric] = frozenset()
    operators: frozenset[Metric] = frozenset()
    sources: frozenset[Metric] = frozenset()
    inner: frozenset[Metric] = frozenset()

    def __post_init__(self) -> None:
        for scope, fields in (("job", JOB_FIELDS), ("operators", OPERATOR_FIELDS), ("sources", OPERATOR_FIELDS),
                              ("inner", OPERATOR_FIELDS)):
            unknown = [m for m in getattr(self, scope) if m not in fields]
            if unknown:
                raise ValueError(f"Needs.{scope}: {unknown} is not a {scope} metric of the snapshot")

    def for_operator(self, is_source: bool) -> frozenset[Metric]:
        return self.operators | (self.sources if is_source else self.inner)

    def all(self) -> frozenset[Metric]:
        return self.job | self.operators | self.sources | self.inner


def needs(job: tuple[Metric, ...] = (), operators: tuple[Metric, ...] = (), sources: tuple[Metric, ...] = (),
          inner: tuple[Metric, ...] = ()) -> Needs:
    """`Needs` from plain tuples (reads better in a class body)."""
    return Needs(frozenset(job), frozenset(operators), frozenset(sources), frozenset(inner))


JOB_SCOPE = ""  # key of the job-level entry in `MetricsSnapshot.gaps`


@dataclass(frozen=True)
class MetricsSnapshot:
    """The monitored state of one job at time `t` (seconds since the run started)."""

    t: float
    window_s: float
    topology: Topology
    operators: dict[str, OperatorMetrics]
    kafka_lag: float = NAN  # total pending records over the job's topics
    kafka_lag_rate: float = NAN  # d(kafka_lag)/dt over the window, records/s
    input_rate: float = NAN  # records/s produced into Kafka
    throughput: float = NAN  # records/s the job's sources take from Kafka
    latency_s: float = NAN  # event-time lag at the sources (time spent in Kafka)
    latency_e2e_s: float = NAN  # sink processing time - event time, mean over the window's records
    latency_e2e_p95_s: float = NAN
    taskmanagers: int | None = None
    cpu_load: float = NAN  # mean over task managers, of their CPU quota
    cpu_jvm_load: float = NAN  # mean over task managers, JVM CPU load (of the host)
    # MEAD needs inter-arrival times of the input (seconds); None when unavailable.
    interarrival_s: np.ndarray | None = None
    # Why values are missing: metric name (or "*" for everything) -> reason.
    why_missing: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def unmeasured(cls, t: float, window_s: float, topology: Topology, parallelism: Mapping[str, int],
                   cpu_share: Mapping[str, float], reason: str) -> MetricsSnapshot:
        """A snapshot in which nothing could be measured (e.g. the job manager is unreachable)."""
        return cls(t=t, window_s=window_s, topology=topology,
                   operators={op: OperatorMetrics(parallelism=parallelism.get(op, 1), cpu_share=cpu_share.get(op, 1.0))
                              for op in topology.names},
                   why_missing={"*": reason})

    def op(self, name: str) -> OperatorMetrics:
        return self.operators[name]

    @property
    def parallelism(self) -> dict[str, int]:
        return {name: m.parallelism for name, m in self.operators.items()}

    @property
    def cpu_share(self) -> dict[str, float]:
        return {name: m.cpu_share for name, m in self.operators.items()}

    def value(self, metric: Metric, operator: str | None = None) -> Any:
        """The value of `metric` for the job (operator None) or one operator."""
        if operator is None:
            return getattr(self, JOB_FIELDS[metric])
        return getattr(self.operators[operator], OPERATOR_FIELDS[metric])

    def gaps(self, wanted: Needs) -> dict[str, tuple[Metric, ...]]:
        """Needed metrics that were not measured: {"" (job) or operator: metrics}; empty when none."""
        out: dict[str, tuple[Metric, ...]] = {}
        job = tuple(sorted(m for m in wanted.job if not measured(self.value(m))))
        if job:
            out[JOB_SCOPE] = job
        for spec in self.topology.operators:
            if spec.name not in self.operators:
                continue
            missing = tuple(sorted(m for m in wanted.for_operator(spec.is_source)
                                   if not measured(self.value(m, spec.name))))
            if missing:
                out[spec.name] = missing
        return out

    def reason(self, metrics: tuple[Metric, ...] | list[Metric] = ()) -> str:
        """Why these metrics are missing, from `why_missing` (one line)."""
        if "*" in self.why_missing:
            return self.why_missing["*"]
        reasons = sorted({self.why_missing[m] for m in metrics if m in self.why_missing})
        return "; ".join(reasons) if reasons else "not measured"
