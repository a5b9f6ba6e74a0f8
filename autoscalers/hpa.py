"""Kubernetes' Horizontal Pod Autoscaler, made operator-based (Kanis 2023, ch. 4.4, 4.5, 6.7.3, 6.7.4).

The HPA core (ch. 4.4, eq. 4.3) runs per operator every iteration:

    desired = ceil(p * current_value / target_value)

With several metrics the largest desired value wins. Every desired value is
kept with its timestamp (`snapshot.t`) and the operator is set to the
largest one seen in the last `scale_down_window_s` (the stabilisation
window), so scale-up is immediate and scale-down waits until the window has
forgotten the higher values. Like Kubernetes (not mentioned in the thesis,
but on by default there) a metric whose ratio is within `tolerance` of 1
proposes the current parallelism.

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
- An operator whose metric was not measured (NaN) gets no recommendation (and
  keeps its parallelism) rather than one computed from a zero.
- The window lives in the autoscaler (decisions are not asked for during the
  scale manager's cool-down, so it only holds decision-time values). An entry
  exactly `scale_down_window_s` old still counts, as in the thesis' code
  (delftdata/espa-autoscaling); that code had no tolerance, so
  `tolerance: 0` reproduces it exactly.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field

from autoscalers.base import Autoscaler, AutoscalerConfig, History, ScalingDecision
from autoscalers.common import ceil_p, find_bottleneck
from harness.metrics.snapshot import MetricsSnapshot, Needs, measured, needs
from harness.vocabulary import Metric

NOT_BOTTLENECK = -1.0  # HPA-Varga's relative lag change for operators it does not blame (ch. 6.7.4)


class HPAConfig(AutoscalerConfig):
    """HPA core (ch. 4.4, table 6.3/6.4): stabilisation window and Kubernetes' tolerance."""

    scale_down_window_s: float = Field(300.0, ge=0.0, description="stabilisation window (s)")
    tolerance: float = Field(0.1, ge=0.0, description="skip when |current/target - 1| <= tolerance")


class HPACPUConfig(HPAConfig):
    """HPA-CPU (Kanis 2023, ch. 6.7.3, table 6.3): CPU-utilisation target 0.7, window 300 s.

    `cpu_signal` picks the CPU reading: `jvm` is Flink's `Status.JVM.CPU.Load`, the gauge the
    thesis' HPA-CPU read from Prometheus (ch. 6.7.3). The JVM computes it against the CPUs it
    may use - inside a CPU-limited container or cgroup that is the limit, so it reads like a
    utilisation of the task manager's allotment and tops out near 0.9 under load. `quota` is
    CPU time used divided by the task manager's CPU quota, computed by the harness.
    """

    cpu_target: float = Field(0.7, gt=0.0, description="target mean CPU load of an operator's TMs")
    cpu_signal: Literal["jvm", "quota"] = Field(
        "jvm", description="jvm: Status.JVM.CPU.Load (the thesis); quota: CPU time / task-manager CPU quota")


class HPAVargaConfig(HPAConfig):
    """HPA-Varga (Kanis 2023, ch. 4.5, 6.7.4, table 6.4; Varga et al. 2021).

    Utilisation target 0.7, relative-lag-change target 1.0, lag counts as
    growing (backpressure) above 1000 rec/s, window 300 s.
    """

    utilisation_target: float = Field(0.7, gt=0.0)
    relative_lag_change_target: float = Field(1.0, gt=0.0)
    lag_rate_backpressure_threshold: float = Field(1000.0, ge=0.0, description="records/s")


@dataclass(frozen=True)
class Reading:
    """One controlled variable of one operator; value None = not available this time."""

    metric: str
    value: float | None
    target: float


class HPA(Autoscaler):
    """The shared HPA loop; subclasses say which metrics each operator is controlled by."""

    Config: ClassVar[type[AutoscalerConfig]] = HPAConfig
    config: HPAConfig

    def __init__(self, config: AutoscalerConfig | None = None) -> None:
        super().__init__(config)
        self._window: dict[str, list[tuple[float, int]]] = {}

    @abstractmethod
    def readings(self, snapshot: MetricsSnapshot) -> tuple[dict[str, list[Reading]], dict[str, Any]]:
        """Readings per operator, plus job-level details for the decision record."""

    def propose(self, parallelism: int, reading: Reading) -> int:
        """Eq. 4.3 with Kubernetes' tolerance; negative values propose the minimum."""
        assert reading.value is not None
        ratio = reading.value / reading.target
        if abs(ratio - 1.0) <= self.config.tolerance:
            return parallelism
        return ceil_p(parallelism * ratio)

    def _stabilise(self, name: str, t: float, desired: int) -> int:
        oldest = t - self.config.scale_down_window_s
        window = [(ts, d) for ts, d in self._window.get(name, []) if oldest <= ts <= t]
        window.append((t, desired))
        self._window[name] = window
        return max(d for _, d in window)

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        readings, job_details = self.readings(snapshot)
        target: dict[str, int] = {}
        per_op: dict[str, dict[str, Any]] = {}
        why: list[str] = []
        for name in snapshot.topology.names:
            p = snapshot.operators[name].parallelism
            usable = [r for r in readings.get(name, []) if r.value is not None]
            if not usable:
                per_op[name] = {"current": p, "skipped": "no metric"}
                continue
            proposals = {r.metric: self.propose(p, r) for r in usable}
            driver = max(usable, key=lambda r: proposals[r.metric])
            desired = proposals[driver.metric]
            stable = self._stabilise(name, snapshot.t, desired)
            per_op[name] = {
                "current": p,
                "values": {r.metric: r.value for r in usable},
                "targets": {r.metric: r.target for r in usable},
                "proposals": proposals,
                "desired": desired,
                "stabilised": stable,
            }
            if stable == p:
                continue
            target[name] = stable
            if stable == desired:
                why.append(f"{name} {p}->{stable} ({driver.metric} {driver.value:.2f}/{driver.target:.2f})")
            else:
                why.append(f"{name} {p}->{stable} (max of last {self.config.scale_down_window_s:.0f} s)")
        if not target:
            return None
        return ScalingDecision(
            parallelism=target,
            reason=f"{self.name}: " + "; ".join(why),
            details={**job_details, "operators": per_op},
        )


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

    def relative_lag_change(self, snapshot: MetricsSnapshot) -> tuple[dict[str, float], dict[str, Any]]:
        """Per-operator relative lag change (eq. 4.5), -1 where the operator is not to blame."""
        cfg = self.config
        names = snapshot.topology.names
        lag_rate = snapshot.kafka_lag_rate
        details: dict[str, Any] = {"kafka_lag_rate": lag_rate, "throughput": snapshot.throughput}
        if not (measured(lag_rate) and measured(snapshot.throughput)):
            details["lag"] = "not measured"
            return dict.fromkeys(names, NOT_BOTTLENECK), details
        if lag_rate < cfg.lag_rate_backpressure_threshold:
            details["lag"] = f"growing slower than {cfg.lag_rate_backpressure_threshold:.0f} rec/s"
            return dict.fromkeys(names, NOT_BOTTLENECK), details
        if snapshot.throughput <= 0.0:
            details["lag"] = "no throughput: relative lag change undefined"
            return dict.fromkeys(names, NOT_BOTTLENECK), details
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
