"""Kubernetes' Horizontal Pod Autoscaler, made operator-based (Kanis 2023, ch. 4.4, 4.5, 6.7.3, 6.7.4).

The HPA core (ch. 4.4, eq. 4.3) runs per operator every iteration:

    desired = ceil(p * current_value / target_value)

With several metrics the largest desired value wins. Every desired value is
kept with its timestamp (`snapshot.t`) and the operator is set to the
largest one seen in the last `scale_down_window_s` (the stabilisation
window), so scale-up is immediate and scale-down waits until the window has
forgotten the higher values.

Kubernetes' rules the harness follows (written from the Kubernetes source, `controller.py`):
- tolerance: a metric whose ratio value/target lies in [1 - tolerance, 1 + tolerance] (both
  ends included; per direction with `behavior`) proposes the current size. Default 0, the
  thesis' (see `HPAConfig`); Kubernetes' default is 0.1.
- a metric that could not be computed (NaN) proposes nothing; if any metric failed and the
  best proposal of the others is below the current size, the size is kept (a scale-up is
  still allowed) and nothing enters the window;
- the first decision seeds the window with the current size;
- `behavior` (scale-up/scale-down policies, per-direction windows, `selectPolicy`),
  min/max replicas, as `autoscaling/v2` users configure them.

- `HPACPU` (ch. 6.7.3): metric = mean CPU load of the operator's task
  managers, target 0.7. A task manager's CPU load tops out near 0.9, so a
  target of 0.9 or more never scales up (ratio <= 1, or within tolerance).
- `HPAVarga` (ch. 4.5, 6.7.4): utilisation = 1 - avg(idle ms/s)/1000,
  target 0.7, and relative lag change = 1 + deriv(total lag) / throughput,
  target 1.0. Total lag is a job-wide signal, so under operator-based
  scaling only the bottleneck gets it: if the lag grows slower than
  1000 rec/s every operator's value is -1 (the metric then proposes the
  minimum and utilisation decides); otherwise the bottleneck (a
  backpressured operator followed downstream to the first one that is not;
  the sources if nothing is backpressured) gets it and the others -1.

Choices where the thesis is silent:
- The derivative of the lag is `snapshot.kafka_lag_rate`, i.e. taken over
  the backend's metrics window; the thesis used Prometheus `deriv` over 60 s.
- "Throughput" in the relative lag change is `snapshot.throughput` (records/s
  the sources take from Kafka). With zero throughput (a stopped job) the
  ratio is undefined and every operator gets -1.
- An operator whose metrics were all not measured (NaN) gets no recommendation (and
  keeps its parallelism) rather than one computed from a zero. HPA-Varga's relative lag
  change is a failed metric when the lag or the throughput was not measured, or the
  throughput is 0 (the ratio is undefined); utilisation then decides a scale-up alone.
- The window lives in the autoscaler (decisions are not asked for during the
  scale manager's cool-down, so it only holds decision-time values). An entry
  exactly `scale_down_window_s` old still counts, as in the thesis' code
  (delftdata/espa-autoscaling) and Kubernetes' legacy path.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from autoscalers.arithmetic import ceil_p
from autoscalers.base import AppliedAction, Autoscaler, AutoscalerConfig, History, RunContext, ScalingDecision
from autoscalers.bottleneck import find_bottleneck
from autoscalers.hpa.config import HPAConfig, HPACPUConfig, HPAVargaConfig
from autoscalers.hpa.controller import HPAController
from harness.metrics.snapshot import MetricsSnapshot, Needs, measured, needs
from harness.vocabulary import Metric

NOT_BOTTLENECK = -1.0  # HPA-Varga's relative lag change for operators it does not blame (ch. 6.7.4)


@dataclass(frozen=True)
class Reading:
    """One controlled variable of one operator; value None = not available this time."""

    metric: str
    value: float | None
    target: float


class HPA(Autoscaler):
    """The shared HPA loop; subclasses say which metrics each operator is controlled by."""

    Config: ClassVar[type[AutoscalerConfig]] = HPAConfig
    READS_PAST_SNAPSHOTS = False  # decides on the current snapshot and the applied actions
    config: HPAConfig

    def __init__(self, config: AutoscalerConfig | None = None, context: RunContext | None = None) -> None:
        super().__init__(config, context)
        self.controller = HPAController(self.config)

    @abstractmethod
    def readings(self, snapshot: MetricsSnapshot) -> tuple[dict[str, list[Reading]], dict[str, Any]]:
        """Readings per operator, plus job-level details for the decision record."""

    def propose(self, parallelism: int, reading: Reading) -> int:
        """Eq. 4.3 with Kubernetes' tolerance band (ends included); negative values propose the minimum."""
        assert reading.value is not None
        ratio = reading.value / reading.target
        down, up = self.config.tolerances()
        if 1.0 - down <= ratio <= 1.0 + up:
            return parallelism
        return ceil_p(parallelism * ratio)

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        readings, job_details = self.readings(snapshot)
        target: dict[str, int] = {}
        per_op: dict[str, dict[str, Any]] = {}
        why: list[str] = []
        for name in snapshot.topology.names:
            p = snapshot.operators[name].parallelism
            self.controller.seed(name, snapshot.t, p)
            usable = [r for r in readings.get(name, []) if r.value is not None]
            failed = [r.metric for r in readings.get(name, []) if r.value is None]
            if not usable:
                per_op[name] = {"current": p, "skipped": "no metric", "failed": failed}
                continue
            proposals = {r.metric: self.propose(p, r) for r in usable}
            driver = max(usable, key=lambda r: proposals[r.metric])
            desired = proposals[driver.metric]
            info: dict[str, Any] = {
                "current": p,
                "values": {r.metric: r.value for r in usable},
                "targets": {r.metric: r.target for r in usable},
                "proposals": proposals,
                "desired": desired,
            }
            per_op[name] = info
            if failed and desired < p:
                info |= {"skipped": "a metric failed: no scale-down", "failed": failed}
                continue
            size, limited = self.controller.normalise(name, snapshot.t, p, desired)
            info["stabilised"] = size
            if size == p:
                continue
            target[name] = size
            if not limited:
                why.append(f"{name} {p}->{size} ({driver.metric} {driver.value:.2f}/{driver.target:.2f})")
            else:
                why.append(f"{name} {p}->{size} ({limited})")
        if not target:
            return None
        return ScalingDecision(
            parallelism=target,
            reason=f"{self.name}: " + "; ".join(why),
            details={**job_details, "operators": per_op},
        )

    def on_applied(self, action: AppliedAction) -> None:
        for name, after in action.after.items():
            before = action.before.get(name, after)
            if before != after:
                self.controller.scaled(name, action.t, before, after)


class HPACPU(HPA):
    """HPA-CPU: each operator's task managers kept at `cpu_target` mean CPU load (ch. 6.7.3)."""

    name = "hpa-cpu"
    Config = HPACPUConfig
    config: HPACPUConfig

    @property
    def signal(self) -> Metric:
        return Metric.CPU_JVM if self.config.cpu_signal == "jvm" else Metric.CPU

    def needs(self) -> Needs:
        return needs(operators=(self.signal,))

    def readings(self, snapshot: MetricsSnapshot) -> tuple[dict[str, list[Reading]], dict[str, Any]]:
        out: dict[str, list[Reading]] = {}
        for name in snapshot.operators:
            value = snapshot.value(self.signal, name)
            out[name] = [Reading("cpu", value if measured(value) else None, self.config.cpu_target)]
        return out, {"cpu_signal": str(self.signal)}


class HPAVarga(HPA):
    """HPA-Varga: utilisation and relative lag change, the latter on the bottleneck only (ch. 6.7.4)."""

    name = "hpa-varga"
    Config = HPAVargaConfig
    config: HPAVargaConfig
    NEEDS = needs(job=(Metric.LAG_RATE, Metric.THROUGHPUT), operators=(Metric.IDLE, Metric.IS_BACKPRESSURED))

    def relative_lag_change(self, snapshot: MetricsSnapshot) -> tuple[dict[str, float | None], dict[str, Any]]:
        """Per-operator relative lag change (eq. 4.5), -1 where the operator is not to blame, None if undefined."""
        cfg = self.config
        names = snapshot.topology.names
        lag_rate = snapshot.kafka_lag_rate
        details: dict[str, Any] = {"kafka_lag_rate": lag_rate, "throughput": snapshot.throughput}
        if not (measured(lag_rate) and measured(snapshot.throughput)):
            details["lag"] = "not measured"
            return dict.fromkeys(names, None), details
        if lag_rate < cfg.lag_rate_backpressure_threshold:
            details["lag"] = f"growing slower than {cfg.lag_rate_backpressure_threshold:.0f} rec/s"
            return dict.fromkeys(names, NOT_BOTTLENECK), details
        if snapshot.throughput <= 0.0:
            details["lag"] = "no throughput: relative lag change undefined"
            return dict.fromkeys(names, None), details
        value = 1.0 + lag_rate / snapshot.throughput
        found = find_bottleneck(snapshot)
        if found is not None:
            blamed: tuple[str, ...] = (found[0],)
            details["backpressured"] = found[1]
        else:
            blamed = tuple(s.name for s in snapshot.topology.sources)
        details["bottleneck"] = list(blamed)
        details["relative_lag_change"] = value
        return {n: (value if n in blamed else NOT_BOTTLENECK) for n in names}, details

    def readings(self, snapshot: MetricsSnapshot) -> tuple[dict[str, list[Reading]], dict[str, Any]]:
        cfg = self.config
        rlc, details = self.relative_lag_change(snapshot)
        out = {
            name: [
                Reading("utilisation", 1.0 - m.idle_ms_per_s / 1000.0 if measured(m.idle_ms_per_s) else None,
                        cfg.utilisation_target),
                Reading("relative_lag_change", rlc[name], cfg.relative_lag_change_target),
            ]
            for name, m in snapshot.operators.items()
        }
        return out, details
