"""Build a `MetricsSnapshot` from Prometheus, the same shape the simulator builds.

Monitor step of the MAPE loop for the real backends (thesis ch. 6.5: metrics come from
Prometheus, the topology and parallelism from the job manager). Three parts:

- `fetch`: run every catalogue query (harness.metrics.promql) for the job, widening the window
  x2 then x4 when a result is empty or partial (fewer series than the job has subtasks, sources
  or topics - the thesis hit such gaps right after rescaling), and name what is still missing;
- `build_snapshot`: pure - join the per-subtask series to operators through the Flink REST
  vertex ids (`task_id` label), aggregate (rates summed, times averaged) and fill job metrics;
  whatever stayed missing is NaN (never a default such as 0 or 1000 - busy), and the snapshot's
  `why_missing` names the catalogue query and what happened to it;
- `PrometheusMonitor`: the I/O edge (prometheus-api-client) tying both together.

A query that errors is treated like an empty one: the loop must never crash on monitoring, and
the MAPE loop then skips the decisions that need the metric (`harness.mape`).
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
    widest_s: dict[str, float] = field(default_factory=dict)  # the widest window tried for a missing query


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
    for q in catalogue:
        _fetch_one(q, query_fn, view, window_s, step_s, widen, out)
    return out


def missing_reasons(fetched: Fetched, catalogue: Sequence[Query] = CATALOGUE) -> dict[str, str]:
    """Metric name -> why it is unknown, for every metric fed by an incomplete catalogue query."""
    by_name = {q.name: q for q in catalogue}
    out: dict[str, str] = {}
    for name in fetched.missing:
        q = by_name.get(name)
        if q is None:
            continue
        if name in fetched.errors:
            why = f"query {name} failed: {fetched.errors[name]}"
        else:
            got = "no series" if not fetched.results.get(name) else "incomplete series"
            why = f"query {name}: {got} even over {fetched.widest_s.get(name, 0):g} s"
        for metric in q.feeds:
            out.setdefault(str(metric), why)
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
    out.widest_s[q.name] = window_s * max(widen)
    out.missing.append(q.name)


# ------------------------------------------------------------------ joining (pure)


def _index(results: list[Series], labels: Sequence[str]) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for s in results:
        v = _value(s)
        if v is not None:
            out[_key(s, labels)] = v
    return out


def _tm_cpu(fetched: Fetched, view: JobView) -> tuple[dict[str, float], dict[str, float]]:
    """Prometheus tm_id -> (CPU of its quota, JVM CPU load of the host), both 0..1.

    The quota-relative load is CPU time used / the task manager's cgroup quota (the share of
    what it may use); without a known quota it is relative to the host. The JVM's
    `Status.JVM.CPU.Load` is host-relative (process CPU / all the host's cores): a task manager
    held to a quarter core reads at most 1/(4 x cores) there. When CPU time is missing the
    quota-relative load is derived from the JVM load (load x cores / quota), never assumed.
    """
    quota = {prom_label(tm): q for tm, q in view.tm_quota.items()}
    host = float(view.host_cpus)
    cores = _index(fetched.results.get("tm_cpu_cores", []), ("tm_id",))
    jvm = {tm: min(1.0, max(0.0, v)) for (tm,), v in
           _index(fetched.results.get("tm_cpu_load", []), ("tm_id",)).items()}
    rel: dict[str, float] = {}
    for (tm,), c in cores.items():
        rel[tm] = c / quota.get(tm, host)
    for tm, load in jvm.items():
        rel.setdefault(tm, load * host / quota.get(tm, host))
    return {tm: min(1.0, max(0.0, v)) for tm, v in rel.items()}, jvm


def _nanmean(values: Sequence[float]) -> float:
    """Mean, NaN when any value is NaN (a partial average is not a measurement) or none given."""
    return float(np.mean(values)) if values and not any(math.isnan(v) for v in values) else math.nan


def build_snapshot(fetched: Fetched, view: JobView, t: float, window_s: float,
                   interarrival_s: np.ndarray | None = None) -> MetricsSnapshot:
    """Join catalogue results to the topology's operators and aggregate (pure).

    Nothing is filled in: a subtask without a series has NaN there, an operator aggregate over
    it is NaN, a job total over a missing source or topic is NaN.
    """
    r = fetched.results
    nan = math.nan
    idx = {name: _index(r.get(name, []), SUBTASK) for name in (
        "records_in", "records_out", "busy", "idle", "backpressured", "is_backpressured", "input_buffer",
        "event_time_lag")}
    host = {(k[0], k[1]): s.get("metric", {}).get("tm_id", "") for s in r.get("subtask_tm", [])
            for k in [_key(s, SUBTASK)]}
    tm_cpu, tm_jvm = _tm_cpu(fetched, view)
    e2e = {name: _index(r.get(name, []), ()).get((), nan) for name in ("latency_e2e", "latency_e2e_p95")}
    pending = _index(r.get("pending_records", []), ("task_id",))
    pending_d = _index(r.get("pending_records_deriv", []), ("task_id",))
    topic_rate = _index(r.get("input_rate", []), ("topic",))

    operators: dict[str, OperatorMetrics] = {}
    lags_ms: list[float] = []
    lag_complete = True
    for spec in view.topology.operators:
        vid = view.vertex_ids.get(spec.name, "")
        p = max(1, view.parallelism.get(spec.name, 1))
        subs = []
        flagged: list[float] = []
        for i in range(p):
            k = (vid, str(i))

            def get(name: str, k: tuple[str, str] = k) -> float:
                return idx[name].get(k, nan)

            rout = get("records_out")
            # a source task reads from Kafka, not from an input gate: its input is what it emits
            rin = rout if spec.is_source else get("records_in")
            busy, bp = get("busy"), get("backpressured")
            idle = get("idle")
            if math.isnan(idle):  # Flink's three times add up to 1000 ms/s: derive, from measured ones only
                idle = max(0.0, 1000.0 - busy - bp) if not (math.isnan(busy) or math.isnan(bp)) else nan
            tm = host.get(k)
            subs.append(SubtaskMetrics(
                records_in_per_s=rin,
                records_out_per_s=rout,
                busy_ms_per_s=busy,
                idle_ms_per_s=idle,
                backpressured_ms_per_s=bp,
                input_buffer_usage=get("input_buffer"),
                cpu_load=tm_cpu.get(tm, nan) if tm else nan,
                cpu_jvm_load=tm_jvm.get(tm, nan) if tm else nan,
            ))
            flagged.append(get("is_backpressured"))
            if spec.is_source:
                if k in idx["event_time_lag"]:
                    lags_ms.append(idx["event_time_lag"][k])
        if spec.is_source and not any(s[0] == vid for s in idx["event_time_lag"]):
            lag_complete = False
        lag = pending.get((vid,), nan) if spec.is_source else None
        operators[spec.name] = OperatorMetrics(
            parallelism=p,
            records_in_per_s=_sum([s.records_in_per_s for s in subs]),
            records_out_per_s=_sum([s.records_out_per_s for s in subs]),
            busy_ms_per_s=_nanmean([s.busy_ms_per_s for s in subs]),
            idle_ms_per_s=_nanmean([s.idle_ms_per_s for s in subs]),
            backpressured_ms_per_s=_nanmean([s.backpressured_ms_per_s for s in subs]),
            is_backpressured=None if any(math.isnan(f) for f in flagged) else any(f > 0 for f in flagged),
            input_buffer_usage=_nanmean([s.input_buffer_usage for s in subs]),
            cpu_load=_nanmean([s.cpu_load for s in subs]),
            cpu_jvm_load=_nanmean([s.cpu_jvm_load for s in subs]),
            cpu_share=view.cpu_share.get(spec.name, 1.0),
            subtasks=tuple(subs),
            lag=lag,
            lag_rate=pending_d.get((vid,), nan) if spec.is_source else None,
            input_rate=topic_rate.get((spec.topic,), nan) if spec.is_source and spec.topic else None,
        )

    sources = [operators[s.name] for s in view.topology.sources]
    return MetricsSnapshot(
        t=t,
        window_s=window_s,
        topology=view.topology,
        operators=operators,
        kafka_lag=_sum([o.lag if o.lag is not None else nan for o in sources]),
        kafka_lag_rate=_sum([o.lag_rate if o.lag_rate is not None else nan for o in sources]),
        input_rate=_sum([topic_rate.get((tp,), nan) for tp in view.topology.topics]),
        throughput=_sum([o.records_out_per_s for o in sources]),
        # every source subtask that emitted in the window counts; one that emitted nothing has no lag
        latency_s=float(np.mean(lags_ms)) / 1000.0 if lags_ms and lag_complete else nan,
        latency_e2e_s=e2e["latency_e2e"],
        latency_e2e_p95_s=e2e["latency_e2e_p95"],
        taskmanagers=view.taskmanagers,
        cpu_load=float(np.mean(list(tm_cpu.values()))) if tm_cpu else nan,
        cpu_jvm_load=float(np.mean(list(tm_jvm.values()))) if tm_jvm else nan,
        interarrival_s=interarrival_s,
        why_missing=missing_reasons(fetched),
    )


def _sum(values: Sequence[float]) -> float:
    """Sum, NaN when any part is unknown (a total over a missing part would understate)."""
    return float(sum(values)) if values and not any(math.isnan(v) for v in values) else math.nan


# ------------------------------------------------------------------ the I/O edge


class PrometheusUnreachable(ConnectionError):
    """Prometheus refused or dropped the connection; the rest of this snapshot's queries are not sent."""


class PrometheusMonitor:
    """Queries a Prometheus server (prometheus-api-client) and builds snapshots.

    A server that cannot be reached fails fast: the client does not retry a refused connection (its
    default retries with backoff would hold a snapshot for minutes), and once one query of a snapshot
    found it unreachable the others are not sent; every metric is then unknown, with that reason.
    """

    def __init__(self, url: str, step_s: float = 5.0, timeout_s: float = 10.0) -> None:
        from prometheus_api_client import PrometheusConnect
        from urllib3.util.retry import Retry

        self.url = url
        self.step_s = step_s
        # answers with 5xx while starting up are retried briefly; a refused connection is not
        retry = Retry(total=2, connect=0, backoff_factor=0.2, status_forcelist=[429, 502, 503, 504])
        self._prom = PrometheusConnect(url=url, disable_ssl=True, retry=retry)
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
        import requests

        unreachable: list[str] = []

        def query(promql: str) -> list[Series]:
            if unreachable:
                raise PrometheusUnreachable(unreachable[0])
            try:
                return self.query(promql)
            except requests.ConnectionError as exc:
                unreachable.append(f"Prometheus at {self.url} unreachable ({type(exc).__name__})")
                raise PrometheusUnreachable(unreachable[0]) from exc

        fetched = fetch(query, view, window_s, self.step_s)
        return build_snapshot(fetched, view, t, window_s, interarrival_s)
