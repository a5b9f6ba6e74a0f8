"""A Prometheus stand-in that answers the monitor's own catalogue queries from a job state.

The real monitor code runs unchanged (`fetch` renders every catalogue query, widens windows,
`build_snapshot` joins the series to operators); only the HTTP answer comes from here, in the
instant-vector shape Prometheus returns. Any query the catalogue does not hold is an error, so a
test cannot pass by asking for something the real monitor would never send. `drop` names
catalogue queries that come back empty, as they do when a metric is not exported or Prometheus
missed its scrapes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.metrics.prometheus import WIDEN, JobView, Series
from harness.metrics.promql import CATALOGUE, SUBTASK
from harness.vocabulary import Metric

T0 = 1_795_643_115.0


@dataclass(frozen=True)
class OperatorState:
    """What every subtask of one operator reports (per subtask; rates in records/s)."""

    records_in: float
    records_out: float
    busy_ms: float
    idle_ms: float
    backpressured_ms: float
    is_backpressured: bool
    buffer_usage: float
    cpu_cores: float  # CPU cores its task manager uses
    cpu_jvm: float  # Status.JVM.CPU.Load of its task manager
    pending: float = 0.0  # sources: pending records of the vertex
    pending_deriv: float = 0.0  # sources: d(pending)/dt
    event_lag_ms: float = 0.0  # sources: time in Kafka


@dataclass
class JobState:
    operators: dict[str, OperatorState]
    topic_rate: dict[str, float]  # records/s produced into each topic
    drop: set[str] = field(default_factory=set)  # catalogue queries that answer nothing


def queries_feeding(metrics: Iterable[Metric]) -> set[str]:
    """Catalogue queries whose absence leaves one of `metrics` unmeasured."""
    wanted = set(metrics)
    return {q.name for q in CATALOGUE if wanted & set(q.feeds)}


class PromState:
    """Callable `promql -> [series]` for `harness.metrics.prometheus.fetch`."""

    def __init__(self, view: JobView, state: JobState, window_s: float, step_s: float = 5.0) -> None:
        self.view, self.state = view, state
        self.table: dict[str, tuple[str, int]] = {}
        for q in CATALOGUE:
            for factor in WIDEN:
                for alt in range(len(q.exprs)):
                    self.table[q.render(alt, view.job_id, window_s * factor, step_s)] = (q.name, alt)
        self.asked: list[str] = []

    def __call__(self, promql: str) -> list[Series]:
        if promql not in self.table:
            raise AssertionError(f"not a catalogue query: {promql}")
        name, alt = self.table[promql]
        self.asked.append(name)
        if name in self.state.drop or alt > 0:  # the primary expression answers, or nothing does
            return []
        return self.results(name)

    def _tm(self, op: str, i: int) -> str:
        return f"tm_{op}_{i}"

    def results(self, name: str) -> list[Series]:
        v, st = self.view, self.state
        out: list[Series] = []

        def series(value: float, **labels: str) -> None:
            out.append({"metric": labels, "value": [T0, repr(float(value))]})

        per_subtask = {
            "records_in": lambda o: o.records_in, "records_out": lambda o: o.records_out,
            "busy": lambda o: o.busy_ms, "idle": lambda o: o.idle_ms, "backpressured": lambda o: o.backpressured_ms,
            "is_backpressured": lambda o: 1.0 if o.is_backpressured else 0.0,
            "input_buffer": lambda o: o.buffer_usage,
        }
        for spec in v.topology.operators:
            o = st.operators[spec.name]
            vid = v.vertex_ids[spec.name]
            p = v.parallelism[spec.name]
            for i in range(p):
                labels = dict(zip(SUBTASK, (vid, str(i)), strict=True))
                if name in per_subtask:
                    series(per_subtask[name](o), **labels)
                elif name == "subtask_tm":
                    series(o.busy_ms, **labels, tm_id=self._tm(spec.name, i))
                elif name == "tm_cpu_cores":
                    series(o.cpu_cores, tm_id=self._tm(spec.name, i))
                elif name == "tm_cpu_load":
                    series(o.cpu_jvm, tm_id=self._tm(spec.name, i))
                elif name == "event_time_lag" and spec.is_source:
                    series(o.event_lag_ms, **labels)
            if spec.is_source and name == "pending_records":
                series(o.pending * p, task_id=vid)
            if spec.is_source and name == "pending_records_deriv":
                series(o.pending_deriv * p, task_id=vid)
        if name == "input_rate":
            for topic, rate in st.topic_rate.items():
                series(rate, topic=topic)
        if name == "registered_taskmanagers":
            series(sum(v.parallelism.values()))
        return out
