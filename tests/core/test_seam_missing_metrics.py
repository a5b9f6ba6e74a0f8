"""Monitor -> snapshot -> autoscaler -> loop: a metric that was not measured never drives a decision.

The monitor is the real one of the `local`/`k8s` backends (`harness.metrics.prometheus.fetch` and
`build_snapshot` over the PromQL catalogue); only Prometheus' HTTP answers come from a job state
(`tests.metrics.prom_state`). The job is overloaded, so every autoscaler wants to act. Then, for
every autoscaler and every metric it declares it needs, the catalogue queries that feed that
metric answer nothing: the loop must not apply anything that rests on it, and must say so with a
`decision_skipped` event naming the metric.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import autoscalers
from harness.backends.base import BackendEvent, RescaleResult
from harness.config import LoopConfig, ScaleManagerConfig
from harness.mape import MapeLoop
from harness.metrics.prometheus import JobView, build_snapshot, fetch
from harness.metrics.snapshot import MetricsSnapshot, Needs
from harness.record import EventLog
from harness.scaling import ScaleManager
from harness.topology import load_topology
from harness.vocabulary import EventKind, Metric
from tests.metrics.prom_state import JobState, OperatorState, PromState, queries_feeding

TOPOLOGY = load_topology("q1")
WINDOW_S = 15.0

# An overloaded q1: the map is the bottleneck, the source is back-pressured, Kafka's lag grows.
OVERLOADED = {
    "bids_source": OperatorState(records_in=0.0, records_out=8000.0, busy_ms=350.0, idle_ms=50.0,
                                 backpressured_ms=600.0, is_backpressured=True, buffer_usage=0.1, cpu_cores=0.24,
                                 cpu_jvm=0.93, pending=400_000.0, pending_deriv=2500.0, event_lag_ms=38_000.0),
    "map": OperatorState(records_in=8000.0, records_out=8000.0, busy_ms=990.0, idle_ms=5.0, backpressured_ms=5.0,
                         is_backpressured=False, buffer_usage=1.0, cpu_cores=0.245, cpu_jvm=0.95),
    "sink": OperatorState(records_in=16_000.0, records_out=0.0, busy_ms=400.0, idle_ms=600.0, backpressured_ms=0.0,
                          is_backpressured=False, buffer_usage=0.3, cpu_cores=0.1, cpu_jvm=0.4),
}

# Parameters that let each autoscaler act within a short run (windows and periods shortened).
PARAMS: dict[str, dict[str, Any]] = {
    "flink-operator": {"metrics.window": 30, "stabilization.interval": 0, "scale-down.interval": 0},
    "gesscale": {"period_s": 15},
    "flink-er": {"period_s": 15},
    "mead": {"period_s": 15},
    "mead-mg1": {"period_s": 15},
    "mead-gig1": {"period_s": 15},
    "mdl-nlunaware": {"period_s": 15},
    "thr-nlunaware": {"period_s": 15},
    "thr-nlaware": {"period_s": 15},
}
SCALERS = [name for name in autoscalers.REGISTRY if name != "static"]
# Options that change what an autoscaler needs: each such configuration goes through the seam too
# (MPC's latency objective reads the time in Kafka; HPA-CPU on the quota signal reads `cpu`, not `cpu_jvm`).
VARIANTS: dict[str, dict[str, Any]] = {
    "mpc[latency]": {"objective": "latency"},
    "hpa-cpu[quota]": {"cpu_signal": "quota"},
}
CONFIGS = SCALERS + list(VARIANTS)


def scaler_of(config: str) -> tuple[str, dict[str, Any] | None]:
    """Registry name and parameters of a configuration (`name` or `name[variant]`)."""
    if config in VARIANTS:
        name = config.split("[")[0]
        return name, {**PARAMS.get(name, {}), **VARIANTS[config]}
    return config, PARAMS.get(config)
# Vertical scalers start low so that the overloaded job makes them raise the CPU share.
VERTICAL = {"mead", "mead-mg1", "mead-gig1", "mead-threshold"}


class PromBackend:
    """Backend protocol over the real monitor and a Prometheus answering from `JobState`."""

    name = "prom-state"

    def __init__(self, state: JobState, interarrivals: bool = True, share: float = 1.0) -> None:
        self.state = state
        self.t = 0.0
        self.parallelism = {"bids_source": 2, "map": 2, "sink": 1}
        self.share = dict.fromkeys(self.parallelism, share)
        self.rescales: list[tuple[dict[str, int], dict[str, float]]] = []
        rng = np.random.default_rng(1)
        self.gaps = rng.exponential(1 / 21_000.0, 5000) if interarrivals else None

    def now(self) -> float:
        return self.t

    def advance_to(self, t: float) -> None:
        self.t = max(self.t, t)

    def view(self) -> JobView:
        vids = {op: f"v{i:031d}" for i, op in enumerate(TOPOLOGY.names)}
        tms = {f"tm_{op}_{i}": 0.25 for op, p in self.parallelism.items() for i in range(p)}
        return JobView(job_id="j" * 32, topology=TOPOLOGY, vertex_ids=vids, parallelism=dict(self.parallelism),
                       taskmanagers=len(tms), tm_quota=tms, cpu_share=dict(self.share), host_cpus=2)

    def snapshot(self, window_s: float) -> MetricsSnapshot:
        view = self.view()
        fetched = fetch(PromState(view, self.state, window_s), view, window_s)
        return build_snapshot(fetched, view, self.t, window_s, self.gaps)

    def rescale(self, parallelism: dict[str, int], cpu_share: dict[str, float] | None) -> RescaleResult:
        self.rescales.append((dict(parallelism), dict(cpu_share or {})))
        self.parallelism = dict(parallelism)
        self.share.update(cpu_share or {})
        return RescaleResult(parallelism=dict(parallelism), cpu_share=dict(self.share), downtime_s=1.0,
                             method="test")

    def drain_events(self) -> list[BackendEvent]:
        return []

    def timeseries(self) -> pd.DataFrame:
        return pd.DataFrame()


def run(config: str, drop: set[str] = frozenset(), interarrivals: bool = True) -> tuple[PromBackend, EventLog]:
    scaler, params = scaler_of(config)
    share = 0.4 if scaler in VERTICAL else 1.0
    backend = PromBackend(JobState(dict(OVERLOADED), {"bids": 21_000.0}, set(drop)), interarrivals, share)
    events = EventLog()
    loop = MapeLoop(backend, autoscalers.create(scaler, params),  # type: ignore[arg-type]
                    ScaleManager(ScaleManagerConfig(max_taskmanagers=200)),
                    LoopConfig(period_s=15, metrics_window_s=WINDOW_S, cooldown_s=0), events)
    loop.run(150.0)
    return backend, events


def needed_by(wanted: Needs, metric: Metric) -> set[str]:
    """Operators (and "job") that need `metric`."""
    out = {"job"} if metric in wanted.job else set()
    for spec in TOPOLOGY.operators:
        if metric in wanted.for_operator(spec.is_source):
            out.add(spec.name)
    return out


def changed(before: dict[str, int], after: tuple[dict[str, int], dict[str, float]],
            shares: dict[str, float]) -> set[str]:
    par, share = after
    out = {op for op, p in par.items() if before.get(op) != p}
    return out | {op for op, s in share.items() if abs(shares.get(op, 1.0) - s) > 1e-9}


@pytest.mark.parametrize("scaler", CONFIGS)
def test_every_autoscaler_acts_on_the_overloaded_job(scaler):
    backend, events = run(scaler)
    assert backend.rescales, f"{scaler} took no action on an overloaded job: {events.rows[-3:]}"
    assert not events.of_kind(EventKind.DECISION_SKIPPED)


def _cases() -> list[tuple[str, Metric]]:
    out = []
    for scaler in CONFIGS:
        for metric in sorted(autoscalers.create(*scaler_of(scaler)).needs().all()):
            out.append((scaler, metric))
    return out


@pytest.mark.parametrize(("scaler", "metric"), _cases(), ids=lambda v: str(v))
def test_a_missing_needed_metric_never_drives_a_decision(scaler, metric):
    scaler_obj = autoscalers.create(*scaler_of(scaler))
    blocked = needed_by(scaler_obj.needs(), metric)
    if metric == Metric.INTERARRIVAL:
        backend, events = run(scaler, interarrivals=False)
    else:
        drop = queries_feeding([metric])
        assert drop, f"no catalogue query feeds {metric}"
        backend, events = run(scaler, drop)
    skipped = events.of_kind(EventKind.DECISION_SKIPPED)
    assert skipped, f"{scaler} without {metric}: no decision_skipped event"
    named = [e for e in skipped if str(metric) in e["reason"]]
    assert named, [e["reason"] for e in skipped]
    assert all(metric in sum(e["data"]["metrics"].values(), []) for e in named)
    # nothing applied touches an operator (or the job) that needed the metric
    initial = {"bids_source": 2, "map": 2, "sink": 1}
    shares = dict.fromkeys(initial, 0.4 if scaler_of(scaler)[0] in VERTICAL else 1.0)
    before = initial
    for applied in backend.rescales:
        touched = changed(before, applied, shares)
        assert "job" not in blocked or not touched, f"{scaler} acted without job metric {metric}"
        assert not (touched & blocked), f"{scaler} changed {touched & blocked} without {metric}"
        before = applied[0]
        shares.update(applied[1])


def test_the_variants_need_what_their_option_says():
    """The variants above are worth their run time only while their needs differ from the defaults'."""
    for config in VARIANTS:
        name, params = scaler_of(config)
        default = autoscalers.create(name, PARAMS.get(name)).needs().all()
        assert autoscalers.create(name, params).needs().all() != default
    assert Metric.LATENCY_KAFKA in autoscalers.create(*scaler_of("mpc[latency]")).needs().all()
    assert autoscalers.create(*scaler_of("hpa-cpu[quota]")).needs().all() == {Metric.CPU}


class OutageBackend(PromBackend):
    """The job manager answers nothing from 45 s to 105 s: the backend's all-unknown snapshot, with why."""

    def snapshot(self, window_s: float) -> MetricsSnapshot:
        if 45.0 <= self.t < 105.0:
            return MetricsSnapshot.unmeasured(self.t, window_s, TOPOLOGY, dict(self.parallelism), dict(self.share),
                                              "job manager unreachable: connection refused")
        return super().snapshot(window_s)


@pytest.mark.parametrize("scaler", ["dhalion", "hpa-cpu", "ds2"])
def test_a_job_manager_outage_is_skipped_with_its_reason_not_decided_on(scaler):
    """Issue 8.1/8.2: on the all-unknown snapshot of an outage Dhalion must not see "healthy" and scale
    down, nor HPA-CPU propose 1: no decision, `decision_skipped` naming the reason."""
    backend = OutageBackend(JobState(dict(OVERLOADED), {"bids": 21_000.0}, set()))
    events = EventLog()
    actions: list[float] = []
    rescale = backend.rescale

    def timed(parallelism: dict[str, int], cpu_share: dict[str, float] | None) -> RescaleResult:
        actions.append(backend.t)
        return rescale(parallelism, cpu_share)

    backend.rescale = timed  # type: ignore[method-assign]
    loop = MapeLoop(backend, autoscalers.create(scaler, PARAMS.get(scaler)),  # type: ignore[arg-type]
                    ScaleManager(ScaleManagerConfig(max_taskmanagers=200)),
                    LoopConfig(period_s=15, metrics_window_s=WINDOW_S, cooldown_s=0), events)
    loop.run(150.0)
    skipped = [e for e in events.of_kind(EventKind.DECISION_SKIPPED) if 45.0 <= e["ts"] < 105.0]
    assert len(skipped) >= 3 and all("job manager unreachable" in e["reason"] for e in skipped), skipped
    assert not [t for t in actions if 45.0 <= t < 105.0], actions
    assert not [e for e in events.of_kind(EventKind.DECISION) if 45.0 <= e["ts"] < 105.0]
    assert actions, f"{scaler} never acted on the overloaded job outside the outage"
