"""Metric evaluation (the operator's ScalingMetricEvaluator): per-vertex rates over the window.

- load = busyTimeMsPerSecond / 1000, aggregated over subtasks (MAX by default) and averaged over
  the window; true processing rate TPR = input rate / load.
- Sources catching up a backlog (lag >= `observed-true-processing-rate.lag-threshold` seconds of
  input) also measure the observed TPR = input rate / (1 - backpressure); it replaces the
  busy-time TPR when that one is more than `switch-threshold` higher and at least
  `min-observations` were made.
- Target data rate: sources = consumption + lag growth (the rate produced into Kafka; the growth
  is the snapshots' d(lag)/dt averaged over the window, else the lag difference), downstream
  vertices through the measured output/input ratio of each edge; the catch-up rate
  lag / `catch-up.duration` propagates the same way.
- target capacity = catchUp + input * restart / catchUp + input / utilisation (AutoScalerUtils).
  The scale-up threshold is that capacity at the band's upper utilisation (no restart term), the
  scale-down threshold at its lower one (with restart term); while any source processes a
  backlog (lag > `backlog-processing.lag-threshold` seconds of input) the band is [0, 1].

Unmeasured metrics: a sample whose busy time or rates were not measured is left out of the
window's averages; a vertex with no measured busy time has a NaN true processing rate (the
scaler then keeps its parallelism, as the operator does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from autoscalers.arithmetic import mean_measured
from autoscalers.flink_operator.config import FlinkOperatorConfig
from harness.metrics.snapshot import MetricsSnapshot, OperatorMetrics, measured
from harness.topology import Topology


@dataclass
class VertexEvaluation:
    """What ScalingMetricEvaluator computes for one vertex (rates in records/s)."""

    parallelism: int
    load: float
    input_rate: float
    output_rate: float
    tpr: float
    tpr_source: str  # "busy-time" or "observed"
    target_rate: float
    catch_up_rate: float
    lag: float
    target_capacity: float = math.nan
    scale_up_threshold: float = math.nan
    scale_down_threshold: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) and math.isfinite(v) else v) for k, v in self.__dict__.items()}


class ScalingMetricEvaluator:
    """Evaluates a metric window into per-vertex `VertexEvaluation`s."""

    def __init__(self, config: FlinkOperatorConfig) -> None:
        self.config = config

    def _load(self, m: OperatorMetrics) -> float:
        agg = self.config.busy_time_aggregator
        if agg == "AVG" or not m.subtasks:
            busy = m.busy_ms_per_s
        elif agg == "MAX":
            busy = max(s.busy_ms_per_s for s in m.subtasks)
        else:
            busy = min(s.busy_ms_per_s for s in m.subtasks)
        return max(0.0, busy) / 1000.0 if measured(busy) else math.nan

    @staticmethod
    def _lag(m: OperatorMetrics) -> float:
        if m.lag is not None:
            return m.lag  # NaN when not measured
        subs = [s.lag for s in m.subtasks if s.lag is not None]
        return float(sum(subs)) if subs else 0.0

    def _observed_tpr(self, samples: list[OperatorMetrics]) -> float:
        """Average observed TPR of a source over the samples where it was catching up."""
        cfg = self.config
        values: list[float] = []
        for m in samples:
            rate = m.records_in_per_s
            if not (measured(rate) and measured(m.backpressured_ms_per_s) and measured(self._lag(m))):
                continue  # not measured in this sample
            if rate <= 0:
                values.append(math.inf)  # nothing comes in: allow scale-down
                continue
            if self._lag(m) < cfg.observed_tpr_lag_threshold * rate:
                continue
            if m.backpressured_ms_per_s >= 1000:
                continue
            values.append(rate / (1.0 - m.backpressured_ms_per_s / 1000.0))
        finite = [v for v in values if math.isfinite(v)]
        if len(values) < cfg.observed_tpr_min_observations:
            return math.nan
        if not finite:
            return math.inf
        return sum(finite) / len(finite)

    def _select_tpr(self, busy_tpr: float, observed: float) -> tuple[float, str]:
        if math.isnan(observed):
            return busy_tpr, "busy-time"
        if not math.isfinite(busy_tpr):
            return observed, "observed"
        if busy_tpr > observed * (1 + self.config.observed_tpr_switch_threshold):
            return observed, "observed"
        return busy_tpr, "busy-time"

    def target_capacity(self, ev: VertexEvaluation, utilization: float, with_restart: bool) -> float:
        """catchUp + input * restart / catchUp + input / utilisation (AutoScalerUtils)."""
        cfg = self.config
        utilization = min(1.0, max(0.0, utilization))
        if utilization == 0:
            return math.inf
        restart = (
            ev.target_rate * cfg.restart_time / cfg.catch_up_duration
            if with_restart and cfg.catch_up_duration > 0
            else 0.0
        )
        capacity = ev.catch_up_rate + restart + ev.target_rate / utilization
        return float(round(capacity)) if math.isfinite(capacity) else capacity

    def evaluate(self, samples: list[MetricsSnapshot]) -> tuple[dict[str, VertexEvaluation], bool]:
        """Per-vertex metrics over the window and whether any source processes a backlog."""
        cfg = self.config
        latest = samples[-1]
        topo = latest.topology
        out: dict[str, VertexEvaluation] = {}

        avg = mean_measured

        per_op = {name: [s.operators[name] for s in samples if name in s.operators] for name in topo.names}
        for name in topo.names:
            ms = per_op[name]
            if not ms:
                continue
            cur = latest.operators.get(name, ms[-1])
            rin = avg([m.records_in_per_s for m in ms])
            rout = avg([m.records_out_per_s for m in ms])
            load = avg([self._load(m) for m in ms])
            busy_tpr = math.inf if rin <= 0 or load <= 0 else rin / load
            lag = self._lag(cur)
            spec = topo.op(name)
            if spec.is_source:
                observed = self._observed_tpr(ms) if cfg.observed_true_processing_rate else math.nan
                lag_rate = self._lag_rate(name, samples)
                target = max(0.0, rin + lag_rate)
                catch = lag / cfg.catch_up_duration if cfg.catch_up_duration > 0 else 0.0
            else:
                observed = math.nan
                target = catch = 0.0
                for u in spec.upstream:
                    if u not in out:
                        continue
                    ratio = self._edge_ratio(topo, per_op, u, name)
                    target += out[u].target_rate * ratio
                    catch += out[u].catch_up_rate * ratio
            tpr, how = self._select_tpr(busy_tpr, observed)
            out[name] = VertexEvaluation(
                parallelism=cur.parallelism, load=load, input_rate=rin, output_rate=rout, tpr=tpr,
                tpr_source=how, target_rate=target, catch_up_rate=catch, lag=lag,
            )  # fmt: skip

        backlog = any(
            topo.op(n).is_source and ev.input_rate > 0 and ev.lag / ev.input_rate > cfg.backlog_processing_lag_threshold
            for n, ev in out.items()
        )
        if backlog:
            upper, lower = 1.0, 0.0
        else:
            target_u, band = cfg.utilization_target, cfg.target_utilization_boundary
            upper = cfg.utilization_max if cfg.utilization_max is not None else target_u + band
            lower = cfg.utilization_min if cfg.utilization_min is not None else target_u - band
        for ev in out.values():
            ev.target_capacity = self.target_capacity(ev, cfg.utilization_target, with_restart=True)
            ev.scale_up_threshold = self.target_capacity(ev, upper, with_restart=False)
            ev.scale_down_threshold = self.target_capacity(ev, lower, with_restart=True)
        return out, backlog

    def _lag_rate(self, name: str, samples: list[MetricsSnapshot]) -> float:
        """Lag growth over the window: the snapshots' own d(lag)/dt, else from lag differences."""
        rates = [s.operators[name].lag_rate for s in samples if name in s.operators]
        known = [r for r in rates if r is not None and measured(r)]
        if known:
            return sum(known) / len(known)
        lags = [(s.t, lag) for s in samples if name in s.operators and measured(lag := self._lag(s.operators[name]))]
        if len(lags) >= 2 and lags[-1][0] > lags[0][0]:
            return (lags[-1][1] - lags[0][1]) / (lags[-1][0] - lags[0][0])
        return 0.0

    @staticmethod
    def _edge_ratio(topo: Topology, per_op: dict[str, list[OperatorMetrics]], u: str, v: str) -> float:
        """Output/input ratio of edge u -> v from measured rates (computeEdgeOutputRatio)."""

        def avg_rate(name: str, attr: str) -> float:
            return mean_measured(getattr(m, attr) for m in per_op.get(name) or [])

        rin_u = avg_rate(u, "records_in_per_s")
        if rin_u <= 0:
            return 0.0
        inputs = topo.upstream(v)
        if len(inputs) == 1:
            edge = avg_rate(v, "records_in_per_s")
        elif all(len(topo.downstream(w)) == 1 for w in inputs if w != u):
            edge = avg_rate(v, "records_in_per_s") - sum(avg_rate(w, "records_out_per_s") for w in inputs if w != u)
        else:
            edge = avg_rate(u, "records_out_per_s")
        if not (measured(edge) and measured(rin_u)):
            return math.nan  # unknown, not zero: a zero ratio would ask the vertex to shrink to nothing
        return edge / rin_u if edge > 0 else 0.0
