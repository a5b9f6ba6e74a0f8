"""The Flink Kubernetes Operator's autoscaler (module `flink-autoscaler`), re-implemented.

Source: apache/flink-kubernetes-operator, `flink-autoscaler` (AutoScalerOptions,
ScalingMetricEvaluator, JobVertexScaler, DelayedScaleDown, alignment/*), read for its
semantics and written anew here; spec digest in FLINK-OPERATOR-AUTOSCALER.md. It is the
production descendant of DS2 (Kalavri et al. 2018).

Per job vertex, over a metric window of snapshots collected after a stabilisation
interval (both restart after every rescale):

- load = busyTimeMsPerSecond / 1000, aggregated over subtasks (MAX by default) and
  averaged over the window; true processing rate TPR = input rate / load.
- Sources catching up a backlog (lag >= `observed-true-processing-rate.lag-threshold`
  seconds of input) also measure the observed TPR = input rate / (1 - backpressure); it
  replaces the busy-time TPR when that one is more than `switch-threshold` higher and at
  least `min-observations` were made.
- Target data rate: sources = consumption + lag growth (the rate produced into Kafka; the
  growth is the snapshots' d(lag)/dt averaged over the window, else the lag difference),
  downstream vertices through the measured output/input ratio of each edge; the catch-up
  rate lag / `catch-up.duration` propagates the same way.
- target capacity = catchUp + input * restart / catchUp + input / utilisation.
  The scale-up threshold is that capacity at the band's upper utilisation (no restart
  term), the scale-down threshold at its lower one (with restart term); while any source
  processes a backlog (lag > `backlog-processing.lag-threshold` seconds of input) the band
  is [0, 1], so nothing scales down.
- scale factor = target capacity / TPR, clamped to [1 - scale-down.max-factor,
  1 + scale-up.max-factor]; p' = ceil(factor * p) within the min/max parallelism and the
  vertex max parallelism (key groups; for sources also the partition count), then aligned.
- Alignment (`scaling.parallelism-alignment.mode`): EVENLY_SPREAD scans upward from p'
  (up to the key-group/partition count on a scale-up, up to p on a scale-down) for a
  divisor of the key groups (keyed vertices) or partitions (sources); BALANCED also
  accepts any p that lowers the per-subtask share; OFF keeps p'. Flink applies it only to
  hash-partitioned (keyBy) inputs and partitioned sources. Our topologies do not carry
  ship strategies, so a non-source vertex counts as keyed when its spec says it keeps
  state (`state_bytes_per_record > 0` or `state_ttl_s`): in the Nexmark queries the
  stateful operators are exactly the keyed ones. Our default is EVENLY_SPREAD (the
  historical behaviour and the one the spec describes); the newest operator snapshot
  defaults to BALANCED, selectable here.
- Scale-downs are lazy: a vertex must ask for a lower parallelism for the whole
  `scale-down.interval`, then gets the highest parallelism recommended in that interval.
- A rescale happens only when at least one changed vertex is outside its band.
- Ineffective scale-up detection: if the last scale-up of a vertex delivered less than
  `scaling.effectiveness.threshold` of its expected TPR increase, a further scale-up is
  reported, and blocked when `scaling.effectiveness.detection.enabled`.

Option names: every field takes its documented key as an alias (with or without the
`job.autoscaler.` prefix), so experiment YAML can say `metrics.window: 10 min` or
`metrics_window: 600`. Durations are seconds, or strings such as "15 min", "30s", "1 h".
`preset: legacy` selects the older defaults (window 10 min, boundary 0.4, catch-up
5 min, restart 3 min) for every option not given explicitly; the preset and the
effective values are recorded in every decision's details.

Unmeasured metrics: a sample whose busy time or rates were not measured is left out of the
window's averages (the operator's collector has no sample then); a vertex with no measured
busy time has a NaN true processing rate and keeps its parallelism, as in the operator
(`max(0, NaN)` must not turn it into an idle vertex with infinite capacity).

Not modelled: restart-time tracking, observed scalability, memory tuning, GC pressure,
quotas, excluded periods (all off or irrelevant by default in the operator too).
Deviation: ceil() is taken after rounding the product to 9 decimals, so that
0.4 * 5 gives 2, not 3 through a floating-point residue.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from autoscalers.base import AppliedAction, Autoscaler, AutoscalerConfig, History, ScalingDecision
from autoscalers.common import mean_measured
from autoscalers.restarts import running_since
from harness.metrics.snapshot import MetricsSnapshot, OperatorMetrics, measured, needs
from harness.topology import Topology
from harness.vocabulary import Metric

KEY_PREFIX = "job.autoscaler."

# Older operator releases (before 1.8/1.9) shipped these defaults.
LEGACY_DEFAULTS: dict[str, float] = {
    "metrics_window": 600.0,
    "target_utilization_boundary": 0.4,
    "catch_up_duration": 300.0,
    "restart_time": 180.0,
}

_UNITS = {
    "ms": 0.001, "milli": 0.001, "millis": 0.001,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}  # fmt: skip


def parse_duration(value: Any) -> float:
    """Seconds from a number or a Flink-style duration string ("15 min", "30s", "1 h")."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        if m:
            unit = m.group(2).lower() or "s"
            if unit in _UNITS:
                return float(m.group(1)) * _UNITS[unit]
    raise ValueError(f"not a duration: {value!r} (use seconds or e.g. '15 min', '30s', '1 h')")


def _dur(default: float, key: str, doc: str) -> Any:
    return Field(default, alias=key, ge=0, description=f"{doc} (seconds; key {KEY_PREFIX}{key})")


class FlinkOperatorConfig(AutoscalerConfig):
    """Options of `flink-autoscaler` (AutoScalerOptions, operator 1.16-SNAPSHOT defaults).

    Field names are the documented keys in snake_case; the keys themselves are aliases.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)

    preset: Literal["current", "legacy"] = Field(
        "current", description="legacy = older defaults: window 10 min, boundary 0.4, catch-up 5 min, restart 3 min"
    )
    metrics_window: float = _dur(900.0, "metrics.window", "scaling metrics are evaluated over this window")
    stabilization_interval: float = _dur(
        300.0, "stabilization.interval", "no metrics are collected this long after the job (re)started"
    )
    utilization_target: float = Field(0.7, alias="utilization.target", gt=0, le=1)
    target_utilization_boundary: float = Field(
        0.3, alias="target.utilization.boundary", ge=0, description="band = target +- boundary"
    )
    utilization_max: float | None = Field(None, alias="utilization.max", description="overrides target + boundary")
    utilization_min: float | None = Field(None, alias="utilization.min", description="overrides target - boundary")
    scale_down_interval: float = _dur(
        3600.0, "scale-down.interval", "a scale-down must be wanted this long (0 = immediate)"
    )
    vertex_min_parallelism: int = Field(1, alias="vertex.min-parallelism", ge=1)
    vertex_max_parallelism: int = Field(200, alias="vertex.max-parallelism", ge=1)
    scale_down_max_factor: float = Field(0.6, alias="scale-down.max-factor", ge=0, le=1)
    scale_up_max_factor: float = Field(100000.0, alias="scale-up.max-factor", ge=0)
    catch_up_duration: float = _dur(1800.0, "catch-up.duration", "time to drain the lag after a rescale")
    restart_time: float = _dur(300.0, "restart.time", "expected downtime of a rescale, budgeted as extra input")
    backlog_processing_lag_threshold: float = _dur(
        300.0, "backlog-processing.lag-threshold", "lag (seconds of input) above which no scale-down happens"
    )
    observed_tpr_lag_threshold: float = _dur(
        30.0, "observed-true-processing-rate.lag-threshold", "lag (seconds of input) to measure the observed TPR"
    )
    observed_tpr_switch_threshold: float = Field(0.15, alias="observed-true-processing-rate.switch-threshold", ge=0)
    observed_tpr_min_observations: int = Field(2, alias="observed-true-processing-rate.min-observations", ge=1)
    scaling_effectiveness_detection_enabled: bool = Field(False, alias="scaling.effectiveness.detection.enabled")
    scaling_effectiveness_threshold: float = Field(0.1, alias="scaling.effectiveness.threshold", ge=0)
    busy_time_aggregator: Literal["MAX", "AVG", "MIN"] = Field("MAX", alias="metrics.busy-time.aggregator")
    parallelism_alignment_mode: Literal["EVENLY_SPREAD", "BALANCED", "OFF"] = Field(
        "EVENLY_SPREAD", alias="scaling.parallelism-alignment.mode"
    )

    @model_validator(mode="before")
    @classmethod
    def _keys_and_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {(k[len(KEY_PREFIX):] if isinstance(k, str) and k.startswith(KEY_PREFIX) else k): v
                for k, v in data.items()}  # fmt: skip
        if data.get("preset", "current") == "legacy":
            for name, value in LEGACY_DEFAULTS.items():
                alias = cls.model_fields[name].alias
                if name not in data and alias not in data:
                    data[name] = value
        return data

    @field_validator(
        "metrics_window", "stabilization_interval", "scale_down_interval", "catch_up_duration",
        "restart_time", "backlog_processing_lag_threshold", "observed_tpr_lag_threshold",
        mode="before",
    )  # fmt: skip
    @classmethod
    def _duration(cls, value: Any) -> float:
        return parse_duration(value)

    def effective(self) -> dict[str, Any]:
        """The values a run used, under their documented keys (recorded in decisions)."""
        out: dict[str, Any] = {"preset": self.preset}
        for name, info in type(self).model_fields.items():
            if name != "preset":
                out[info.alias or name] = getattr(self, name)
        return out


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


@dataclass
class _DelayedScaleDown:
    """Scale-down wishes of one vertex since `first_trigger` (DelayedScaleDown)."""

    first_trigger: float
    # (t, parallelism, outside band), parallelism strictly decreasing from oldest to newest
    wishes: list[tuple[float, int, bool]] = field(default_factory=list)

    def record(self, t: float, p: int, outside: bool) -> None:
        while self.wishes and self.wishes[-1][1] <= p:
            self.wishes.pop()
        self.wishes.append((t, p, outside))

    def max_since(self, window_start: float) -> tuple[float, int, bool]:
        while len(self.wishes) > 1 and self.wishes[0][0] < window_start:
            self.wishes.pop(0)
        return self.wishes[0]


@dataclass(frozen=True)
class _LastScaling:
    before: int
    after: int
    tpr: float
    expected_tpr: float


def _safe_ceil(x: float) -> int:
    return math.ceil(round(x, 9))


def _is_keyed(topology: Topology, name: str) -> bool:
    spec = topology.op(name)
    return not spec.is_source and (spec.state_bytes_per_record > 0 or spec.state_ttl_s is not None)


def align_parallelism(current: int, target: int, n: int, upper_limit: int, mode: str = "EVENLY_SPREAD") -> int:
    """Align `target` to `n` key groups / partitions (ParallelismAligner, built-in modes).

    Scans upward from the target: on a scale-up up to min(n, upper_limit), on a
    scale-down up to the current parallelism; EVENLY_SPREAD accepts divisors of n,
    BALANCED also any p that lowers the per-subtask share n // p. Keeps the target when
    nothing qualifies (alignment never blocks a scale).
    """
    if mode == "OFF" or n <= 0 or target == current:
        return target
    upper = min(n, upper_limit)
    end = upper if target > current else min(current, upper)
    for p in range(target, end + 1):
        if n % p == 0 or (mode == "BALANCED" and n // p < n // target):
            return p
    return target


class FlinkOperator(Autoscaler):
    """The Flink Kubernetes Operator autoscaler's algorithm (see module docstring)."""

    name = "flink-operator"
    Config = FlinkOperatorConfig
    config: FlinkOperatorConfig
    NEEDS = needs(operators=(Metric.BUSY, Metric.RECORDS_IN, Metric.RECORDS_OUT),
                  sources=(Metric.LAG, Metric.BACKPRESSURED))

    def __init__(self, config: AutoscalerConfig | None = None) -> None:
        super().__init__(config)
        self._seen: dict[float, MetricsSnapshot] = {}
        self._delayed: dict[str, _DelayedScaleDown] = {}
        self._last_scaling: dict[str, _LastScaling] = {}
        self._applied_at: float | None = None  # job running again after our last rescale
        self._stable_since: float | None = None
        self._first_sample_t: float | None = None

    # ------------------------------------------------------------ window

    def _job_running_since(self, history: History) -> float:
        return max(running_since(history), self._applied_at or 0.0)

    def window(self, snapshot: MetricsSnapshot, history: History) -> tuple[list[MetricsSnapshot], bool]:
        """Snapshots of the metric window and whether the window is full (collector logic).

        Collection starts `stabilization.interval` after the job (re)started; the window is
        full `metrics.window` after the first sample collected then, and from then on it
        holds the samples of the last `metrics.window`.
        """
        for s in (*history.snapshots, snapshot):
            self._seen[s.t] = s
        cfg = self.config
        now = snapshot.t
        stable = self._job_running_since(history) + cfg.stabilization_interval
        if stable != self._stable_since:
            self._stable_since, self._first_sample_t = stable, None
        after = sorted(t for t in self._seen if stable <= t <= now)
        if after and (self._first_sample_t is None or after[0] < self._first_sample_t):
            self._first_sample_t = after[0]
        self._seen = {t: s for t, s in self._seen.items() if t >= min(stable, now - cfg.metrics_window - 1e-6)}
        if self._first_sample_t is None:
            return [], False
        full = now >= self._first_sample_t + cfg.metrics_window - 1e-6
        start = now - cfg.metrics_window - 1e-6 if full else stable
        return [self._seen[t] for t in after if t >= start and t in self._seen], full

    # ------------------------------------------------------------ evaluate

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
                observed = self._observed_tpr(ms)
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

    # ------------------------------------------------------------ plan

    def _max_parallelism(self, topo: Topology, name: str) -> int:
        spec = topo.op(name)
        return min(spec.max_parallelism, topo.partitions) if spec.is_source else spec.max_parallelism

    def compute_parallelism(self, topo: Topology, name: str, ev: VertexEvaluation) -> tuple[int, float]:
        """New parallelism (clamped, aligned) and the raw scale factor (JobVertexScaler)."""
        cfg = self.config
        p = ev.parallelism
        factor = 0.0 if math.isinf(ev.tpr) else ev.target_capacity / ev.tpr
        factor = min(max(factor, 1.0 - cfg.scale_down_max_factor), 1.0 + cfg.scale_up_max_factor)
        lower = min(p, cfg.vertex_min_parallelism)
        upper = max(p, cfg.vertex_max_parallelism)
        max_par = self._max_parallelism(topo, name)
        new_p = min(max(lower, _safe_ceil(factor * p)), min(max_par, upper))
        if new_p == p:
            return p, factor
        spec = topo.op(name)
        if spec.is_source:
            n = topo.partitions
        elif _is_keyed(topo, name):
            n = spec.max_parallelism
        else:
            return new_p, factor
        return align_parallelism(p, new_p, n, min(max_par, upper), cfg.parallelism_alignment_mode), factor

    def _lazy_scale_down(self, name: str, now: float, new_p: int, outside: bool) -> tuple[int, bool] | None:
        """Delay a scale-down for `scale-down.interval`; then the max wish of that interval."""
        interval = self.config.scale_down_interval
        if interval <= 0:
            return new_p, outside
        info = self._delayed.setdefault(name, _DelayedScaleDown(first_trigger=now))
        info.record(now, new_p, outside)
        window_start = now - interval
        if window_start < info.first_trigger:
            return None
        _, p, out = info.max_since(window_start)
        return p, out

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
                self._delayed.pop(name, None)
                continue
            if new_p > p:
                self._delayed.pop(name, None)
                last = self._last_scaling.get(name)
                if last is not None and last.after == p and last.after > last.before:
                    expected = last.expected_tpr - last.tpr
                    actual = ev.tpr - last.tpr
                    if expected > 0 and actual / expected < cfg.scaling_effectiveness_threshold:
                        ineffective[name] = {"expected_increase": expected, "actual_increase": actual}
                        if cfg.scaling_effectiveness_detection_enabled:
                            info["blocked"] = "ineffective scaling"
                            continue
            else:
                lazy = self._lazy_scale_down(name, snapshot.t, new_p, outside)
                if lazy is None:
                    info["delayed_scale_down_until"] = self._delayed[name].first_trigger + cfg.scale_down_interval
                    continue
                new_p, outside = lazy
                if new_p >= p:
                    continue
            changes[name] = new_p
            any_outside = any_outside or outside
        if not changes or not any_outside:
            return None
        for name, new_p in changes.items():
            ev = evals[name]
            expected = ev.tpr / ev.parallelism * new_p if math.isfinite(ev.tpr) else math.inf
            self._last_scaling[name] = _LastScaling(ev.parallelism, new_p, ev.tpr, expected)
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
        self._applied_at = action.t + action.downtime_s
        self._delayed.clear()
        for name, p in action.after.items():
            last = self._last_scaling.get(name)
            if last is not None and last.after != p:
                # The scale manager capped us: expect what was really applied.
                scaled = last.expected_tpr / last.after * p if math.isfinite(last.expected_tpr) else math.inf
                self._last_scaling[name] = _LastScaling(last.before, p, last.tpr, scaled)
