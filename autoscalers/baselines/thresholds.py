"""Threshold rules: the reactive baselines the seed papers compared their autoscalers against.

One rule, three papers. Per operator, every `period_s`, a utilisation signal averaged over
the period is compared with two thresholds: above `scale_up_above` the operator gets one
more unit, below `scale_down_below` one less; in between nothing happens. The unit is a
replica (horizontal) or one CPU-share level (vertical).

- THR-NLUnaware and THR-NLAware (Arkian et al. 2021, Gesscale, sec. V-A c): CPU utilisation
  > 90 % adds one resource, < 50 % removes one. NLUnaware picks the node from an unsorted
  list (random), NLAware adds the node with the lowest latency to the others and removes the
  one with the greatest (`placement`). The paper states no period; Gesscale's own monitoring
  period (1 min, sec. IV-B) is the default, so both scalers see the system as often.
- Rule-based (De Matteis & Mencagli, sec. 5.4 and Tab. 7): the operator's utilisation factor
  over theta_max adds a replica, under theta_min removes one; Tab. 7 uses (0.9, 0.8) and
  (0.95, 0.8). Its control step is the loop's (the paper runs it at MPC's 4 s step).
- MEAD's threshold policy (Russo Russo et al. 2021, sec. VII): operator CPU utilisation over
  U_H = 0.7 raises its CPU share by one level, under U_L = 0.5 lowers it by one; five levels
  40..100 %, activated every T_A = 10 s ("as this policy is purely reactive").

Signals: CPU is the operator's task managers' CPU time over their quota (`Metric.CPU`, the
utilisation of what is allocated, as a container's CPU utilisation is); the utilisation
factor rho = lambda T / n of the MPC paper is, per replica, the busy fraction
(busyTimeMsPerSecond / 1000). The signal is averaged over the snapshots of the last period
taken while the job ran: a restart's zero load is not low utilisation (the papers' scalers
block while they reconfigure, sec. IV-E of Gesscale), so after a rescale the rule waits until
its metrics window no longer overlaps the downtime. An operator whose signal was not measured
is left alone.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from autoscalers.arithmetic import mean_measured
from autoscalers.base import AppliedAction, Autoscaler, History, ScalingDecision
from autoscalers.baselines.config import MEADThresholdConfig, RuleBasedConfig, THRConfig, ThresholdConfig
from autoscalers.config import AutoscalerConfig, RunContext
from autoscalers.restarts import running_since, window_overlaps_restart
from harness.metrics.snapshot import MetricsSnapshot, Needs, measured, needs
from harness.topology import Topology
from harness.vocabulary import Metric, NodeChoice


def replica_cap(topo: Topology, name: str, n_max: int | None) -> int:
    """Most replicas an operator can use: its key groups (a source: also its topic's partitions)."""
    spec = topo.op(name)
    cap = min(spec.max_parallelism, topo.partitions) if spec.is_source else spec.max_parallelism
    return min(cap, n_max) if n_max is not None else cap


def level_of(share: float, levels: tuple[float, ...]) -> int:
    """Index of the level closest to `share` (a job started at 1.0 is at the top level)."""
    return min(range(len(levels)), key=lambda k: abs(levels[k] - share))


class ThresholdScaler(Autoscaler):
    """Per operator: signal over the period vs two thresholds, one unit per step."""

    Config: ClassVar[type[AutoscalerConfig]] = ThresholdConfig
    config: ThresholdConfig
    placement: ClassVar[NodeChoice] = NodeChoice.ANY
    vertical: ClassVar[bool] = False

    def __init__(self, config: AutoscalerConfig | None = None, context: RunContext | None = None) -> None:
        super().__init__(config, context)
        self._last_eval_t: float | None = None
        self._applied: AppliedAction | None = None

    @property
    def metric(self) -> Metric:
        return Metric.CPU if self.config.signal == "cpu" else Metric.BUSY

    def needs(self) -> Needs:
        return needs(operators=(self.metric,))

    def signal(self, snapshot: MetricsSnapshot, name: str) -> float:
        value = snapshot.value(self.metric, name)
        if not measured(value):
            return math.nan
        return float(value) / 1000.0 if self.metric == Metric.BUSY else float(value)

    def signals(self, snapshot: MetricsSnapshot, history: History) -> dict[str, float]:
        """Each operator's signal averaged over the last period's snapshots taken while the job ran."""
        restarted = running_since(history, self._applied)
        start = snapshot.t - max(self.config.period_s, snapshot.window_s)
        snaps = [s for s in history.snapshots
                 if s.t > start + 1e-9 and s.t - s.window_s >= restarted - 1e-9]
        snaps.append(snapshot)
        return {name: mean_measured(self.signal(s, name) for s in snaps if name in s.operators)
                for name in snapshot.topology.names}

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        cfg = self.config
        if self._last_eval_t is not None and snapshot.t - self._last_eval_t < cfg.period_s - 1e-9:
            return None
        if window_overlaps_restart(snapshot, history, self._applied):
            return None  # the job is (re)starting: its load says nothing about its utilisation
        self._last_eval_t = snapshot.t
        values = self.signals(snapshot, history)
        parallelism: dict[str, int] = {}
        shares: dict[str, float] = {}
        why: list[str] = []
        per_op: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            m = snapshot.operators[name]
            per_op[name] = {"signal": value, "parallelism": m.parallelism, "cpu_share": m.cpu_share}
            if not measured(value):
                per_op[name]["unknown"] = f"{self.metric} not measured: left alone"
                continue
            step = 1 if value > cfg.scale_up_above else -1 if value < cfg.scale_down_below else 0
            if step == 0:
                continue
            if self.vertical:
                new_share = self.step_share(m.cpu_share, step)
                if abs(new_share - m.cpu_share) > 1e-9:
                    shares[name] = new_share
                    why.append(f"{name} share {m.cpu_share:.2f}->{new_share:.2f} ({cfg.signal} {value:.2f})")
                continue
            target = min(replica_cap(snapshot.topology, name, cfg.n_max), max(cfg.n_min, m.parallelism + step))
            if target != m.parallelism:
                parallelism[name] = target
                why.append(f"{name} {m.parallelism}->{target} ({cfg.signal} {value:.2f})")
        if not parallelism and not shares:
            return None
        return ScalingDecision(
            parallelism=parallelism,
            cpu_share=shares,
            reason=f"{self.name}: " + "; ".join(why),
            details={"operators": per_op, "scale_up_above": cfg.scale_up_above,
                     "scale_down_below": cfg.scale_down_below, "signal": cfg.signal},
            placement=self.placement,
        )

    def step_share(self, share: float, step: int) -> float:
        raise NotImplementedError(f"{self.name} scales horizontally")

    def on_applied(self, action: AppliedAction) -> None:
        self._applied = action


class THRNLUnaware(ThresholdScaler):
    """Gesscale's THR-NLUnaware: CPU thresholds, nodes from an unsorted list."""

    name = "thr-nlunaware"
    Config = THRConfig
    placement = NodeChoice.ANY


class THRNLAware(ThresholdScaler):
    """Gesscale's THR-NLAware: the same thresholds, the nearest node added and the farthest removed."""

    name = "thr-nlaware"
    Config = THRConfig
    placement = NodeChoice.NEAREST


class RuleBased(ThresholdScaler):
    """The MPC paper's reactive rule on the utilisation factor (sec. 5.4)."""

    name = "rule-based"
    Config = RuleBasedConfig


class MEADThreshold(ThresholdScaler):
    """MEAD's threshold-based vertical policy: one CPU-share level per step (sec. VII)."""

    name = "mead-threshold"
    Config = MEADThresholdConfig
    config: MEADThresholdConfig
    vertical = True

    def step_share(self, share: float, step: int) -> float:
        levels = self.config.levels
        return levels[min(len(levels) - 1, max(0, level_of(share, levels) + step))]
