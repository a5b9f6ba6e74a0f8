"""The Flink Kubernetes Operator's autoscaler (module `flink-autoscaler`), re-implemented.

Source: apache/flink-kubernetes-operator, `flink-autoscaler` (AutoScalerOptions,
ScalingMetricEvaluator, JobVertexScaler, DelayedScaleDown, alignment/*), read for its
semantics and written anew here; spec digest in FLINK-OPERATOR-AUTOSCALER.md. It is the
production descendant of DS2 (Kalavri et al. 2018).

The package follows the operator's own seams:
- `config`: AutoScalerOptions (keys, defaults, the `current` and `legacy` presets);
- `collector`: the metric window after the stabilisation interval (ScalingMetricCollector);
- `evaluator`: per-vertex load, true processing rate, target rates and the utilisation band
  (ScalingMetricEvaluator);
- `vertex_scaler`: scale factor, clamping, key-group/partition alignment, ineffective-scaling
  detection (JobVertexScaler, ParallelismAligner);
- `delayed_scale_down`: lazy scale-downs (DelayedScaleDown);
- this module: the decision per job (ScalingExecutor): a rescale happens only when at least one
  changed vertex is outside its band.

Presets: `current` follows operator 1.16-SNAPSHOT (the newest snapshot read); `legacy`
follows operator release 1.6.1 (defaults window 10 min, boundary 0.4, catch-up 5 min, restart
3 min; a one-hour scale-up grace period instead of lazy scale-down; no observed true processing
rate; alignment of every vertex to divisors of its key groups up to half of them). Read in
apache/flink-kubernetes-operator: flink-autoscaler/ (AutoScalerOptions, JobVertexScaler,
ScalingMetricEvaluator, DelayedScaleDown, alignment/ParallelismAligner, BuiltInAlignmentMode,
KeyGroupOrPartitionsAdjustMode) at 1.16-SNAPSHOT, and flink-kubernetes-operator-autoscaler/
(AutoScalerOptions, JobVertexScaler) at tag release-1.6.1.

Option names: every field takes its documented key as an alias (with or without the
`job.autoscaler.` prefix), so experiment YAML can say `metrics.window: 10 min` or
`metrics_window: 600`. Durations are seconds, or strings such as "15 min", "30s", "1 h".
`preset: legacy` selects release 1.6.1's defaults and behaviour for every option not given
explicitly; the preset, its release and the effective values are recorded in every
decision's details.

Unmeasured metrics: a sample whose busy time or rates were not measured is left out of the
window's averages (the operator's collector has no sample then); a vertex with no measured
busy time has a NaN true processing rate and keeps its parallelism, as in the operator
(`max(0, NaN)` must not turn it into an idle vertex with infinite capacity).

Not modelled: restart-time tracking, observed scalability, memory tuning, GC pressure,
quotas, excluded periods (all off or irrelevant by default in the operator too).
Not modelled from release 1.6.1: its TPR as the window average of per-sample TPRs (we average
rates and load, as the current release does).
"""

from __future__ import annotations

import math
from typing import Any

from autoscalers.base import AppliedAction, Autoscaler, AutoscalerConfig, History, RunContext, ScalingDecision
from autoscalers.flink_operator.collector import MetricWindow
from autoscalers.flink_operator.config import FlinkOperatorConfig
from autoscalers.flink_operator.delayed_scale_down import DelayedScaleDown
from autoscalers.flink_operator.evaluator import ScalingMetricEvaluator, VertexEvaluation
from autoscalers.flink_operator.vertex_scaler import JobVertexScaler
from harness.metrics.snapshot import MetricsSnapshot, needs
from harness.topology import Topology
from harness.vocabulary import Metric


class FlinkOperator(Autoscaler):
    """The Flink Kubernetes Operator autoscaler's algorithm (see the module docstring)."""

    name = "flink-operator"
    Config = FlinkOperatorConfig
    config: FlinkOperatorConfig
    NEEDS = needs(operators=(Metric.BUSY, Metric.RECORDS_IN, Metric.RECORDS_OUT),
                  sources=(Metric.LAG, Metric.BACKPRESSURED))  # fmt: skip

    def __init__(self, config: AutoscalerConfig | None = None, context: RunContext | None = None) -> None:
        super().__init__(config, context)
        self.collector = MetricWindow(self.config)
        self.evaluator = ScalingMetricEvaluator(self.config)
        self.vertex_scaler = JobVertexScaler(self.config)
        self.delayed = DelayedScaleDown(self.config.scale_down_interval)

    def window(self, snapshot: MetricsSnapshot, history: History) -> tuple[list[MetricsSnapshot], bool]:
        return self.collector.collect(snapshot, history)

    def evaluate(self, samples: list[MetricsSnapshot]) -> tuple[dict[str, VertexEvaluation], bool]:
        return self.evaluator.evaluate(samples)

    def compute_parallelism(self, topo: Topology, name: str, ev: VertexEvaluation) -> tuple[int, float]:
        return self.vertex_scaler.compute_parallelism(topo, name, ev)

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        cfg = self.config
        samples, full = self.window(snapshot, history)
        if not full or not samples:
            return None
        evals, backlog = self.evaluate(samples)
        topo = snapshot.topology
        changes: dict[str, int] = {}
        per_vertex: dict[str, dict[str, Any]] = {}
        ineffective: dict[str, dict[str, float]] = {}
        any_outside = False
        for name, ev in evals.items():
            if math.isnan(ev.tpr) or math.isnan(ev.target_capacity):
                per_vertex[name] = ev.as_dict() | {"skipped": "true processing rate or target rate not measured"}
                continue
            new_p, factor = self.compute_parallelism(topo, name, ev)
            outside = ev.tpr < ev.scale_up_threshold or ev.tpr > ev.scale_down_threshold
            info = ev.as_dict() | {"scale_factor": round(factor, 4), "wanted": new_p, "outside_band": outside}
            per_vertex[name] = info
            p = ev.parallelism
            if new_p == p:
                self.delayed.cancel(name)
                continue
            if new_p > p:
                self.delayed.cancel(name)
                found = self.vertex_scaler.ineffective(name, ev)
                if found is not None:
                    ineffective[name] = found
                    if cfg.scaling_effectiveness_detection_enabled:
                        info["blocked"] = "ineffective scaling"
                        continue
            else:
                if self.vertex_scaler.in_grace_period(name, ev, snapshot.t):
                    info["blocked"] = "scale-down within the scale-up grace period"
                    continue
                lazy = self.delayed.wish(name, snapshot.t, new_p, outside)
                if lazy is None:
                    info["delayed_scale_down_until"] = self.delayed.due(name)
                    continue
                new_p, outside = lazy
                if new_p >= p:
                    continue
            changes[name] = new_p
            any_outside = any_outside or outside
        if not changes or not any_outside:
            return None
        for name, new_p in changes.items():
            self.vertex_scaler.record(name, snapshot.t, evals[name], new_p)
        parts = [
            f"{n} {evals[n].parallelism}->{p} (TPR {evals[n].tpr:,.0f} rec/s, band "
            f"[{evals[n].scale_up_threshold:,.0f}, {evals[n].scale_down_threshold:,.0f}], "
            f"target {evals[n].target_capacity:,.0f})"
            for n, p in changes.items()
        ]
        details: dict[str, Any] = {
            "config": cfg.effective(),
            "backlog": backlog,
            "window_samples": len(samples),
            "window_start": samples[0].t,
            "vertices": per_vertex,
        }
        if ineffective:
            details["ineffective_scaling"] = ineffective
        return ScalingDecision(parallelism=changes, reason="flink-operator: " + "; ".join(parts), details=details)

    def on_applied(self, action: AppliedAction) -> None:
        # A rescale restarts the job: metrics and pending scale-down wishes start over.
        self.collector.applied_at = action.t + action.downtime_s
        self.delayed.clear()
        for name, p in action.after.items():
            self.vertex_scaler.applied(name, p)
