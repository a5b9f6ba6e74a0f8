"""Build a `MetricsSnapshot` from Prometheus, the same shape the simulator builds.

Monitor step of the MAPE loop for the real backends (thesis ch. 6.5: metrics come from
Prometheus, the topology and parallelism from the job manager). Three parts:

- `fetch`: run every catalogue query (harness.metrics.promql) for the job, widening the window
  x2 then x4 when a result is empty or partial (fewer series than the job has subtasks, sources
  or topics - the thesis hit such gaps right after rescaling), and name what is still missing;
- `build_snapshot`: pure - join the per-subtask series to operators through the Flink REST
  vertex ids (`task_id` label), aggregate (rates summed, times averaged) and fill job metrics;
- `PrometheusMonitor`: the I/O edge (prometheus-api-client) tying both together.

A query that errors is treated like an empty one: the loop must never crash on monitoring.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.metrics.promql import CATALOGUE, SUBTASK, Query
from harness.metrics.snapshot import MetricsSnapshot, OperatorMetrics, SubtaskMetrics
from harness.topology import Topology

Series = dict[str, Any]  # one instant-vector element: {"metric": {labels}, "value": [ts, "v"]}
QueryFn = Callable[[str], list[Series]]

WIDEN = (1, 2, 4)
# Only asked for when the primary entry stays incomplete; never reported missing themselves.
FALLBACKS = {"tm_cpu_cores": "tm_cpu_load"}
IS_BACKPRESSURED_SHARE = 0.5  # flagged for at least half the window


def prom_label(value: str) -> str:
    """How Flink's Prometheus reporter writes label values: [^a-zA-Z0-9:_] -> '_'."""
    return "".join(c if (c.isascii() and (c.isalnum() or c in ":_")) else "_" for c in value)


@dataclass(frozen=True)
class JobView:
    """What the job manager says about the running job (REST), used to join Prometheus series."""

    job_id: str
    topology: Topology
    vertex_ids: dict[str, str]  # operator -> job-vertex id (= `task_id` label)
    parallelism: dict[str, int]
    taskmanagers: int
    tm_quota: dict[str, float] = field(default_factory=dict)  # Flink TM resource id -> CPUs it may use
    cpu_share: dict[str, float] = field(default_factory=dict)  # per operator (vertical scaling)
    host_cpus: int = 1

    def expected_subtasks(self, operators: Sequence[str] | None = None) -> set[tuple[str, str]]:
        ops = self.topology.names if operators is None else operators
        return {
            (self.vertex_ids[op], str(i))
            for op in ops
            if op in self.vertex_ids
            for i in range(self.parallelism.get(op, 1))
        }

    @property
    def source_names(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.topology.sources)


@dataclass
class Fetched:
    """Catalogue results (by query name), the window each needed, and what stayed incomplete."""

    results: dict[str, list[Series]] = field(default_factory=dict)
    window_s: dict[str, float] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


def _key(series: Series, labels: Sequence[str]) -> tuple[str, ...]:
    m = series.get("metric", {})
    return tuple(str(m.get(lb, "")) for lb in labels)


def _value(series: Series) -> float | None:
    try:
        v = float(series["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def completeness(q: Query, result: list[Series], view: JobView) -> tuple[int, int]:
    """(series we expected and got, series we expected) for one query's result."""
    good = [s for s in result if _value(s) is not None]
    if q.by[:2] == SUBTASK:
        ops = view.source_names if q.name == "event_time_lag" else None
        expected = view.expected_subtasks(ops)
        got = {_key(s, SUBTASK) for s in good} & expected
        return len(got), len(expected)
    if q.by == ("task_id",):
        expected_v = {view.vertex_ids[op] for op in view.source_names if op in view.vertex_ids}
        return len({_key(s, ("task_id",))[0] for s in good} & expected_v), len(expected_v)
    if q.by == ("topic",):
        topics = set(view.topology.topics)
        return len({_key(s, ("topic",))[0] for s in good} & topics), len(topics)
    if q.by == ("tm_id",):
        want = max(1, view.taskmanagers)
        return min(len(good), want), want
    return min(len(good), 1), 1


def fetch(query_fn: QueryFn, view: JobView, window_s: float, step_s: float = 5.0,
          catalogue: Sequence[Query] = CATALOGUE, widen: Sequence[int] = WIDEN) -> Fetched:
    """Run each catalogue query, widening the window until its result is complete.

    For every factor in `widen` each alternative expression is tried; the first complete result
    wins, otherwise the most complete partial one is kept and the query is named in `missing`.
    """
    out = Fetched()
    by_name = {q.name: q for q in catalogue}
    for q in catalogue:
        if q.name in FALLBACKS.values():
            continue
        _fetch_one(q, query_fn, view, window_s, step_s, widen, out)
        fb = FALLBACKS.get(q.name)
        if fb and q.name in out.missing and fb in by_name:
            _fetch_one(by_name[fb], query_fn, view, window_s, step_s, widen, out)
            if fb not in out.missing:
                out.missing.remove(q.name)
            else:
                out.missing.remove(fb)
    return out


def _fetch_one(q: Query, query_fn: QueryFn, view: JobView, window_s: float, step_s: float,
               widen: Sequence[int], out: Fetched) -> None:
    best: list[Series] = []
    best_got, best_window = -1, window_s
    for factor in widen:
        w = window_s * factor
        for alt in range(len(q.exprs)):
            try:
                result = list(query_fn(q.render(alt, view.job_id, w, step_s)) or [])
            except Exception as exc:  # noqa: BLE001 - monitoring must never crash the loop
                out.errors[q.name] = f"{type(exc).__name__}: {exc}"
                result = []
            got, expected = completeness(q, result, view)
            if got > best_got:
                best, best_got, best_window = result, got, w
            if expected == 0 or got >= expected:
                out.results[q.name] = result
                out.window_s[q.name] = w
                return
    out.results[q.name] = best
    out.window_s[q.name] = best_window
    out.missing.append(q.name)


# ------------------------------------------------------------------ joining (pure)


def _index(results: list[Series], labels: Sequence[str]) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for s in results:
        v = _value(s)
        if v is not None:
            out[_key(s, labels)] = v
    return out


def _tm_cpu(fetched: Fetched, view: JobView) -> dict[str, float]:
    """Prometheus tm_id -> utilisation of the CPUs the task manager may use (0..1).

    CPU time used / cgroup quota when the quota is known (what HPA-CPU targets); otherwise the
    share of the host. `Status.JVM.CPU.Load` is host-relative too, hence the same scaling.
    """
    quota = {prom_label(tm): q for tm, q in view.tm_quota.items()}
    out: dict[str, float] = {}
    if fetched.results.get("tm_cpu_cores"):
        for (tm,), cores in _index(fetched.results["tm_cpu_cores"], ("tm_id",)).items():
            out[tm] = cores / quota.get(tm, float(view.host_cpus))
    elif fetched.results.get("tm_cpu_load"):
        for (tm,), load in _index(fetched.results["tm_cpu_load"], ("tm_id",)).items():
            out[tm] = load * view.host_cpus / quota.get(tm, float(view.host_cpus))
    return {tm: float(min(1.0, max(0.0, v))) for tm, v in out.items()}


def build_snapshot(fetched: Fetched, view: JobView, t: float, window_s: float,
                   interarrival_s: np.ndarray | None = None) -> MetricsSnapshot:
    """Join catalogue results to the topology's operators and aggregate (pure)."""
    r = fetched.results
    idx = {name: _index(r.get(name, []), SUBTASK) for name in (
        "records_in", "records_out", "busy", "idle", "backpressured", "is_backpressured", "input_buffer",
        "event_time_lag")}
    host = {(k[0], k[1]): s.get("metric", {}).get("tm_id", "") for s in r.get("subtask_tm", [])
            for k in [_key(s, SUBTASK)]}
    tm_cpu = _tm_cpu(fetched, view)
    pending = _index(r.get("pending_records", []), ("task_id",))
    pending_d = _index(r.get("pending_records_deriv", []), ("task_id",))
    topic_rate = _index(r.get("input_rate", []), ("topic",))

    operators: dict[str, OperatorMetrics] = {}
    lags_ms: list[float] = []
    for spec in view.topology.operators:
        vid = view.vertex_ids.get(spec.name, "")
        p = max(1, view.parallelism.get(spec.name, 1))
        subs = []
        for i in range(p):
            k = (vid, str(i))

            def get(name: str, default: float, k: tuple[str, str] = k) -> float:
                return idx[name].get(k, default)

            rout = get("records_out", 0.0)
            # a source task reads from Kafka, not from an input gate: its input is what it emits
            rin = rout if spec.is_source else get("records_in", 0.0)
            busy, bp = get("busy", 0.0), get("backpressured", 0.0)
            subs.append(SubtaskMetrics(
                records_in_per_s=rin,
                records_out_per_s=rout,
                busy_ms_per_s=busy,
                idle_ms_per_s=get("idle", max(0.0, 1000.0 - busy - bp)),
                backpressured_ms_per_s=bp,
                input_buffer_usage=get("input_buffer", 0.0),
                cpu_load=tm_cpu.get(host.get(k, ""), 0.0),
            ))
            if spec.is_source and k in idx["event_time_lag"]:
                lags_ms.append(idx["event_time_lag"][k])
        flagged = [idx["is_backpressured"].get((vid, str(i)), 0.0) for i in range(p)]
        lag = pending.get((vid,)) if spec.is_source else None
        operators[spec.name] = OperatorMetrics(
            parallelism=p,
            records_in_per_s=sum(s.records_in_per_s for s in subs),
            records_out_per_s=sum(s.records_out_per_s for s in subs),
            busy_ms_per_s=float(np.mean([s.busy_ms_per_s for s in subs])),
            idle_ms_per_s=float(np.mean([s.idle_ms_per_s for s in subs])),
            backpressured_ms_per_s=float(np.mean([s.backpressured_ms_per_s for s in subs])),
            is_backpressured=any(f >= IS_BACKPRESSURED_SHARE for f in flagged),
            input_buffer_usage=float(np.mean([s.input_buffer_usage for s in subs])),
            cpu_load=float(np.mean([s.cpu_load for s in subs])),
            cpu_share=view.cpu_share.get(spec.name, 1.0),
            subtasks=tuple(subs),
            lag=lag,
            lag_rate=pending_d.get((vid,)) if spec.is_source else None,
            input_rate=topic_rate.get((spec.topic,)) if spec.is_source and spec.topic else None,
        )

    sources = [operators[s.name] for s in view.topology.sources]
    return MetricsSnapshot(
        t=t,
        window_s=window_s,
        topology=view.topology,
        operators=operators,
        kafka_lag=float(sum(o.lag or 0.0 for o in sources)),
        kafka_lag_rate=float(sum(o.lag_rate or 0.0 for o in sources)),
        input_rate=float(sum(topic_rate.get((tp,), 0.0) for tp in view.topology.topics)),
        throughput=float(sum(o.records_out_per_s for o in sources)),
        latency_s=float(np.mean(lags_ms)) / 1000.0 if lags_ms else 0.0,
        taskmanagers=view.taskmanagers,
        cpu_load=float(np.mean(list(tm_cpu.values()))) if tm_cpu else 0.0,
        interarrival_s=interarrival_s,
        missing=tuple(fetched.missing),
    )


# ------------------------------------------------------------------ the I/O edge


class PrometheusMonitor:
    """Queries a Prometheus server (prometheus-api-client) and builds snapshots."""

    def __init__(self, url: str, step_s: float = 5.0, timeout_s: float = 10.0) -> None:
        from prometheus_api_client import PrometheusConnect

        self.url = url
        self.step_s = step_s
        self._prom = PrometheusConnect(url=url, disable_ssl=True)
        self._timeout = timeout_s

    def query(self, promql: str) -> list[Series]:
        t = max(1, int(self._timeout))  # Prometheus durations take no fractions ("10s", not "10.0s")
        return list(self._prom.custom_query(promql, params={"timeout": f"{t}s"}, timeout=t + 2))

    def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[dict[str, Any]]:
        """Matrix result: [{"metric": {...}, "values": [[ts, "v"], ...]}]."""
        import datetime as dt

        return list(self._prom.custom_query_range(
            promql,
            start_time=dt.datetime.fromtimestamp(start, dt.UTC),
            end_time=dt.datetime.fromtimestamp(end, dt.UTC),
            step=f"{step_s:g}s",
        ))

    def snapshot(self, view: JobView, t: float, window_s: float,
                 interarrival_s: np.ndarray | None = None) -> MetricsSnapshot:
        fetched = fetch(self.query, view, window_s, self.step_s)
        return build_snapshot(fetched, view, t, window_s, interarrival_s)
