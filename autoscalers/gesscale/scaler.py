"""Gesscale (Arkian, Pierre, Tordsson, Elmroth, ICFEC 2021; `arkian-2021-gesscale.txt`).

A MAPE auto-scaler around a per-operator performance model (sec. IV-C1, eq. 1):

    MST(n) = alpha * n^beta - gamma * ND_max

the Maximum Sustainable Throughput with n replicas whose largest network round-trip
delay is ND_max. Every `period_s` (paper: 1 min, sec. IV-B), per operator i with
backpressure level BP_i, current throughput CT_i and input rate IR_i:

- Overload (Alg. 1): an upstream operator has BP > 0.5 while BP_i <= 0.5 - i is the
  root of the backpressure and works at its maximum, so CT_i is a calibration sample
  MST(n) = CT_i. Sources have no upstream in Flink's sense: for them the Kafka lag
  growing (faster than `source_lag_growth` x CT_i, a noise margin) plays that role.
- Calibration (sec. IV-C1, eqs. 2-3): 1 sample fits alpha (beta = 1, gamma = 0); 2 fit
  alpha and gamma (beta = 1); >= 3 fit all three by least squares (scipy). One sample is
  kept per replica count (the latest), since the model needs distinct configurations.
- Scale-up (Alg. 3): n + 1, one replica per cycle, up to n_max.
- Scale-down (Alg. 2 and 4): with DT(n) = 100 (MST(n) - CT_i) / MST(n), go down to the
  smallest n' >= n_min such that every step keeps MST(n') >= IR_i and DT(n') > the
  headroom threshold - possibly several replicas at once. Alg. 4 as printed tests the
  condition on the current n and then decrements, which ends one replica below the last
  n' that satisfies it; we test the candidate before taking it (the intent stated in
  sec. IV-D2: "remove as many resource units as possible without reducing the MST
  below the current throughput"). The paper gives no threshold value: default 20 %.
  Without any calibration sample an operator is never scaled down (the model is the only
  scale-down signal in the paper).

Adaptations: the paper scales a single operator per job; here every operator is
analysed and the changes go out as one decision (one restart). BP_i is Flink's
backPressuredTimeMsPerSecond / 1000 averaged over subtasks and over the period; CT_i is
the operator's records-in rate; IR_i is the records its upstreams send (sources: the
rate produced into Kafka). ND_max (ms) is the operator's measured `network_delay_max_ms`
where the backend models nodes with network delays (`sim.network`), else the configured
`nd_max_ms` (0 on one machine). Node choice (sec. IV-E): a scale-up asks for the available
node closest to the ones in use, a scale-down frees the farthest (`NodeChoice.NEAREST`); the
prediction for a scale-down keeps the current ND_max, which removing the farthest node can
only lower. Our loop runs every 15 s; Gesscale acts at
most every `period_s`, averaging the snapshots of the last period taken while the job
ran: during a restart (a savepoint restart can outlast the loop's cooldown) it waits,
and an operator with zero throughput yields no calibration sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.optimize import least_squares

from autoscalers.arithmetic import mean_measured
from autoscalers.base import AppliedAction, Autoscaler, AutoscalerConfig, History, RunContext, ScalingDecision
from autoscalers.gesscale.config import GesscaleConfig
from autoscalers.restarts import running_since, window_overlaps_restart
from harness.metrics.snapshot import MetricsSnapshot, measured, needs
from harness.topology import Topology
from harness.vocabulary import Metric, NodeChoice


@dataclass(frozen=True)
class CalibrationSample:
    """One observed saturation point: MST at n replicas with delay ND_max (records/s)."""

    n: int
    nd_max: float
    mst: float


@dataclass(frozen=True)
class MSTModel:
    """MST(n) = alpha * n^beta - gamma * ND_max (eq. 1)."""

    alpha: float
    beta: float = 1.0
    gamma: float = 0.0
    samples: int = 1

    def mst(self, n: int, nd_max: float = 0.0) -> float:
        return self.alpha * n**self.beta - self.gamma * nd_max

    def as_dict(self) -> dict[str, float]:
        return {"alpha": self.alpha, "beta": self.beta, "gamma": self.gamma, "samples": self.samples}


def fit_mst(samples: Sequence[CalibrationSample]) -> MSTModel | None:
    """Calibrate the model from saturation samples (sec. IV-C1): eq. 2, eq. 3 or eq. 1."""
    if not samples:
        return None
    n = np.array([s.n for s in samples], dtype=float)
    nd = np.array([s.nd_max for s in samples], dtype=float)
    ct = np.array([s.mst for s in samples], dtype=float)
    if len(samples) == 1:
        return MSTModel(alpha=float(ct[0] / n[0]), samples=1)
    alpha0 = float(np.sum(n * ct) / np.sum(n * n))
    if len(samples) == 2:

        def residual2(x: np.ndarray) -> np.ndarray:
            return x[0] * n - x[1] * nd - ct

        res = least_squares(residual2, [alpha0, 0.0], bounds=([0.0, 0.0], [np.inf, np.inf]), x_scale="jac")
        return MSTModel(alpha=float(res.x[0]), gamma=float(res.x[1]), samples=2)

    def residual3(x: np.ndarray) -> np.ndarray:
        return x[0] * n ** x[1] - x[2] * nd - ct

    res = least_squares(
        residual3,
        [alpha0, 1.0, 0.0],
        bounds=([0.0, 0.05, 0.0], [np.inf, 2.0, np.inf]),
        x_scale="jac",
        xtol=1e-12,
        ftol=1e-12,
    )
    return MSTModel(alpha=float(res.x[0]), beta=float(res.x[1]), gamma=float(res.x[2]), samples=len(samples))


@dataclass(frozen=True)
class OperatorState:
    """What Gesscale monitors of one operator over a period."""

    parallelism: int
    bp: float  # backpressure level 0..1
    ct: float  # current throughput, records/s
    ir: float  # input rate, records/s
    lag_rate: float = 0.0
    nd_max: float = 0.0  # ms, measured where the backend knows the nodes, else the configured ND_max


class Gesscale(Autoscaler):
    """Model-based horizontal scaler: +1 on overload, multi-step model-based scale-down."""

    name = "gesscale"
    Config = GesscaleConfig
    config: GesscaleConfig
    placement: ClassVar[NodeChoice] = NodeChoice.NEAREST  # latency-aware node choice (sec. IV-E)
    NEEDS = needs(operators=(Metric.RECORDS_IN, Metric.RECORDS_OUT, Metric.BACKPRESSURED),
                  sources=(Metric.LAG_RATE, Metric.INPUT_RATE))

    def __init__(self, config: AutoscalerConfig | None = None, context: RunContext | None = None) -> None:
        super().__init__(config, context)
        self.samples: dict[str, dict[int, CalibrationSample]] = {}
        self._last_eval_t: float | None = None
        self._applied: AppliedAction | None = None

    # ------------------------------------------------------------ monitor

    def monitor(self, snapshot: MetricsSnapshot, history: History) -> dict[str, OperatorState]:
        """Per-operator BP, CT and IR averaged over the snapshots of the last period.

        A snapshot in which a value was not measured is left out of that value's average;
        a value measured in none of them is NaN (and the operator is then left alone).
        """
        start = snapshot.t - self.config.period_s
        restarted = running_since(history, self._applied)
        snaps = [
            s
            for s in history.snapshots
            if s.t > start + 1e-9 and (restarted <= 0 or s.t - s.window_s >= restarted - 1e-9)
        ]
        snaps.append(snapshot)
        topo = snapshot.topology
        out: dict[str, OperatorState] = {}
        for spec in topo.operators:
            ms = [s.operators[spec.name] for s in snaps if spec.name in s.operators]
            if not ms:
                continue
            ct = mean_measured(m.records_in_per_s for m in ms)
            lag_rate = mean_measured(m.lag_rate for m in ms)
            if spec.is_source:
                ir = mean_measured(m.input_rate for m in ms)
                if not measured(ir):
                    ir = max(0.0, ct + lag_rate) if measured(ct + lag_rate) else math.nan
            else:
                ir = mean_measured(sum(s.operators[u].records_out_per_s for u in spec.upstream if u in s.operators)
                                   for s in snaps)
            nd = snapshot.operators[spec.name].network_delay_max_ms
            out[spec.name] = OperatorState(
                parallelism=snapshot.operators[spec.name].parallelism,
                bp=mean_measured(m.backpressured_fraction for m in ms),
                ct=ct,
                ir=ir,
                lag_rate=lag_rate,
                nd_max=nd if measured(nd) else self.config.nd_max_ms,
            )
        return out

    # ------------------------------------------------------------ analyse

    def overloaded(self, topo: Topology, name: str, states: dict[str, OperatorState]) -> bool:
        """Alg. 1: the root of backpressure (sources: lag growing while not backpressured)."""
        cfg = self.config
        st = states[name]
        if st.bp > cfg.bp_threshold:
            return False
        spec = topo.op(name)
        if spec.is_source:
            return st.lag_rate > cfg.source_lag_growth * max(st.ct, 1.0)
        return any(states[u].bp > cfg.bp_threshold for u in spec.upstream if u in states)

    def model(self, name: str) -> MSTModel | None:
        return fit_mst(sorted(self.samples.get(name, {}).values(), key=lambda s: s.n))

    def headroom(self, model: MSTModel, n: int, ct: float, nd_max: float | None = None) -> float:
        """DT = 100 (MST(n) - CT) / MST(n) (Alg. 2)."""
        mst = model.mst(n, self.config.nd_max_ms if nd_max is None else nd_max)
        return -math.inf if mst <= 0 else 100.0 * (mst - ct) / mst

    # ------------------------------------------------------------ plan

    def n_max(self, topo: Topology, name: str) -> int:
        spec = topo.op(name)
        cap = min(spec.max_parallelism, topo.partitions) if spec.is_source else spec.max_parallelism
        return min(cap, self.config.n_max) if self.config.n_max is not None else cap

    def scale_down_target(self, model: MSTModel, st: OperatorState) -> int:
        """Alg. 4: the fewest replicas that still sustain IR with the headroom threshold."""
        cfg = self.config
        n = st.parallelism
        while n - 1 >= cfg.n_min:
            cand = n - 1
            # removing the farthest node never raises ND_max: the current one is the safe prediction
            if (model.mst(cand, st.nd_max) >= st.ir
                    and self.headroom(model, cand, st.ct, st.nd_max) > cfg.headroom_threshold):
                n = cand
            else:
                break
        return n

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        cfg = self.config
        if self._last_eval_t is not None and snapshot.t - self._last_eval_t < cfg.period_s - 1e-9:
            return None
        if window_overlaps_restart(snapshot, history, self._applied):
            return None  # the job is restarting: nothing to learn from these metrics
        self._last_eval_t = snapshot.t
        topo = snapshot.topology
        states = self.monitor(snapshot, history)
        changes: dict[str, int] = {}
        reasons: list[str] = []
        per_op: dict[str, dict[str, Any]] = {}
        for name, st in states.items():
            info: dict[str, Any] = {"n": st.parallelism, "bp": st.bp, "ct": st.ct, "ir": st.ir}
            per_op[name] = info
            if not (measured(st.bp) and measured(st.ct) and measured(st.ir)):
                info["unknown"] = "backpressure, throughput or input rate not measured: left alone"
                continue
            if st.ct > 0 and self.overloaded(topo, name, states):
                sample = CalibrationSample(st.parallelism, st.nd_max, st.ct)
                self.samples.setdefault(name, {})[st.parallelism] = sample
                info["overloaded"] = True
                if st.parallelism + 1 <= self.n_max(topo, name):
                    changes[name] = st.parallelism + 1
                    reasons.append(f"{name} overloaded (MST({st.parallelism}) = {st.ct:,.0f} rec/s) -> +1")
                model = self.model(name)
                if model is not None:
                    info["model"] = model.as_dict()
                continue
            model = self.model(name)
            if model is None:
                continue
            info["model"] = model.as_dict()
            info["headroom"] = self.headroom(model, st.parallelism, st.ct, st.nd_max)
            if st.bp > cfg.bp_threshold:
                continue  # backpressured by a downstream bottleneck: its throughput is not its demand
            target = self.scale_down_target(model, st)
            if target < st.parallelism:
                changes[name] = target
                mst = model.mst(target, st.nd_max)
                reasons.append(
                    f"{name} {st.parallelism}->{target} (MST({target}) = {mst:,.0f} >= IR {st.ir:,.0f} rec/s, "
                    f"headroom {self.headroom(model, target, st.ct, st.nd_max):.1f} % > {cfg.headroom_threshold:g} %)"
                )
        if not changes:
            return None
        return ScalingDecision(
            parallelism=changes,
            reason="gesscale: " + "; ".join(reasons),
            details={"operators": per_op, "headroom_threshold": cfg.headroom_threshold, "nd_max_ms": cfg.nd_max_ms},
            placement=self.placement,
        )

    def on_applied(self, action: AppliedAction) -> None:
        self._applied = action
