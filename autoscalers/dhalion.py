"""Dhalion (Floratou et al. 2017) as adapted to Flink by Kanis 2023, ch. 4.2 and 6.7.1.

Every iteration: symptoms -> diagnosis -> resolution.

1. Symptom "backpressure": some operator reports isBackPressured, or the
   Kafka lag grows faster than `lag_rate_backpressure_threshold`
   (1000 rec/s; sources have no upstream to be backpressured by).
2. Diagnosis "under-provisioned": the bottleneck is found by following the
   (first, in topological order) backpressured operator downstream to the
   first operator that is not backpressured. Only that operator is scaled up,
   by Dhalion's 1 + suspended/processed (eq. 4.1). Flink's backpressure hides
   the suspended records, so the thesis reads them off the backpressured
   time b of the bottleneck's upstream operators (largest of them):
   new p = ceil(p * (1 + b/(1-b))). If nothing is backpressured but the lag
   grows, the sources are the bottleneck: new p = ceil(p * (1 + lag_rate /
   throughput)).
3. Otherwise "healthy": every operator without lag is over-provisioned and is
   scaled down: new p = max(1, floor(p / scale_down_factor)). No lag means an
   input-buffer usage below 0.2 (non-sources) or a Kafka lag below
   10,000 records (sources).

Where the thesis text and the digest disagree, and what we chose:
- Eq. 6.1 prints the factor as b/(1-b). Read literally it would shrink the
  bottleneck for b < 0.5, contradicting eq. 4.1 (1 + suspended/processed,
  8 -> 10 for 20 % suspended); we use 1 + b/(1-b) = 1/(1-b), with b capped at
  `max_backpressure` (0.9, i.e. at most x10) so b -> 1 cannot ask for infinity.
- Eq. 6.2 (source factor) is garbled in the text; we use 1 + lag_rate /
  throughput, the same "unprocessed over processed" reading of eq. 4.1. It
  uses a source's own lag rate and output rate when the backend reports them
  per source, the job's `kafka_lag_rate` / `throughput` otherwise. It is
  capped like the backpressure factor (x10 at b = 0.9), as the thesis' code
  (delftdata/espa-autoscaling) caps it at 10. With zero throughput (that code
  then jumps to x10) we leave the source alone: a job that reads nothing is
  restarting or broken, and more subtasks will not help.
- Ch. 6.7.1 says a source has no lag when the job's total Kafka lag is below
  the threshold; the thesis' code reads the source's own pending records. We
  use the source's own lag when the backend reports it, the job's otherwise.
- Ch. 4.2 quotes Dhalion's scale-down as x0.8; ch. 6.7.1 and table 6.1 use a
  factor of 1.2 that divides. We follow table 6.1 (floor(p / 1.2)).
- If the job lag grows but per-source lag rates are known, only the sources
  whose own lag grows faster than the threshold are blamed (all sources when
  none does on its own or the backend does not report them).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from autoscalers.arithmetic import ceil_p, floor_p
from autoscalers.base import Autoscaler, AutoscalerConfig, History, ScalingDecision
from autoscalers.bottleneck import find_bottleneck
from harness.metrics.snapshot import MetricsSnapshot, OperatorMetrics, measured, needs
from harness.vocabulary import Metric


class DhalionConfig(AutoscalerConfig):
    """Kanis 2023, ch. 6.7.1, table 6.1 (plus the cap on b, ours)."""

    scale_down_factor: float = Field(1.2, gt=1.0)
    lag_rate_backpressure_threshold: float = Field(1000.0, ge=0.0, description="records/s")
    buffer_usage_close_to_zero: float = Field(0.2, ge=0.0, le=1.0)
    kafka_lag_close_to_zero: float = Field(10_000.0, ge=0.0, description="records")
    max_backpressure: float = Field(
        0.9, gt=0.0, lt=1.0, description="cap on b in 1 + b/(1-b); also caps the source factor at 1/(1-b)"
    )


def _source_throughput(m: OperatorMetrics) -> float:
    """Records/s a source takes from Kafka; Flink's sources report them as output."""
    return m.records_out_per_s if m.records_out_per_s > 0 or not measured(m.records_in_per_s) else m.records_in_per_s


class Dhalion(Autoscaler):
    name = "dhalion"
    READS_PAST_SNAPSHOTS = False  # decides on the current snapshot and the applied actions
    Config: ClassVar[type[AutoscalerConfig]] = DhalionConfig
    config: DhalionConfig
    NEEDS = needs(
        job=(Metric.LAG, Metric.LAG_RATE, Metric.THROUGHPUT),
        operators=(Metric.IS_BACKPRESSURED, Metric.BACKPRESSURED),
        sources=(Metric.RECORDS_OUT,),
        inner=(Metric.BUFFER_USAGE,),
    )

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        found = find_bottleneck(snapshot)
        if found is not None:
            return self._scale_bottleneck(snapshot, *found)
        if snapshot.kafka_lag_rate > self.config.lag_rate_backpressure_threshold:
            return self._scale_sources(snapshot)
        return self._scale_down(snapshot)

    def _scale_bottleneck(self, snapshot: MetricsSnapshot, bottleneck: str, start: str) -> ScalingDecision | None:
        ops = snapshot.operators
        upstream = snapshot.topology.upstream(bottleneck) or (bottleneck,)
        fractions = [ops[u].backpressured_fraction for u in upstream]
        if not all(measured(f) for f in fractions):
            return None  # the scale-up factor rests on the upstream backpressured time
        b_raw = max(fractions)
        b = min(b_raw, self.config.max_backpressure)
        factor = 1.0 + b / (1.0 - b)
        p = ops[bottleneck].parallelism
        new_p = ceil_p(p * factor)
        if new_p == p:  # flagged backpressured, but no backpressured time upstream
            return None
        return ScalingDecision(
            parallelism={bottleneck: new_p},
            reason=f"bottleneck {bottleneck} backpressure b={b:.2f} -> x{factor:.2f} ({p}->{new_p})",
            details={
                "symptom": "backpressure",
                "backpressured": start,
                "bottleneck": bottleneck,
                "upstream_backpressure": {u: ops[u].backpressured_fraction for u in upstream},
                "b": b,
                "b_capped": b_raw > b,
                "factor": factor,
            },
        )

    def _scale_sources(self, snapshot: MetricsSnapshot) -> ScalingDecision | None:
        threshold = self.config.lag_rate_backpressure_threshold
        sources = [s.name for s in snapshot.topology.sources]
        ops = snapshot.operators
        own = {s: ops[s].lag_rate for s in sources if measured(ops[s].lag_rate)}
        blamed = [s for s, r in own.items() if r is not None and r > threshold] or sources
        target: dict[str, int] = {}
        per_source: dict[str, dict[str, Any]] = {}
        why: list[str] = []
        for s in blamed:
            m = ops[s]
            if m.lag_rate is not None and measured(m.lag_rate) and _source_throughput(m) > 0:
                lag_rate, throughput = m.lag_rate, _source_throughput(m)
            else:
                lag_rate, throughput = snapshot.kafka_lag_rate, snapshot.throughput
            if throughput <= 0:
                per_source[s] = {"lag_rate": lag_rate, "throughput": throughput, "skipped": "no throughput"}
                continue
            factor = min(1.0 + max(0.0, lag_rate) / throughput, self._max_factor)
            new_p = ceil_p(m.parallelism * factor)
            per_source[s] = {"lag_rate": lag_rate, "throughput": throughput, "factor": factor}
            if new_p != m.parallelism:
                target[s] = new_p
                why.append(
                    f"source {s} lag +{lag_rate:.0f} rec/s over {throughput:.0f} rec/s -> x{factor:.2f} "
                    f"({m.parallelism}->{new_p})"
                )
        if not target:
            return None
        return ScalingDecision(
            parallelism=target,
            reason="bottleneck " + "; ".join(why),
            details={"symptom": "lag growing", "kafka_lag_rate": snapshot.kafka_lag_rate, "sources": per_source},
        )

    @property
    def _max_factor(self) -> float:
        return 1.0 / (1.0 - self.config.max_backpressure)

    def _has_lag(self, snapshot: MetricsSnapshot, name: str) -> bool:
        """Whether the operator has lag; an unmeasured lag is not evidence of over-provisioning."""
        m = snapshot.operators[name]
        if snapshot.topology.op(name).is_source:
            own = m.lag if m.lag is not None and measured(m.lag) else None
            lag, threshold = (own if own is not None else snapshot.kafka_lag), self.config.kafka_lag_close_to_zero
        else:
            lag, threshold = m.input_buffer_usage, self.config.buffer_usage_close_to_zero
        return not measured(lag) or lag >= threshold

    def _scale_down(self, snapshot: MetricsSnapshot) -> ScalingDecision | None:
        target: dict[str, int] = {}
        no_lag: list[str] = []
        for name in snapshot.topology.names:
            if self._has_lag(snapshot, name):
                continue
            no_lag.append(name)
            p = snapshot.operators[name].parallelism
            new_p = floor_p(p / self.config.scale_down_factor)
            if new_p != p:
                target[name] = new_p
        if not target:
            return None
        changes = ", ".join(f"{n} {snapshot.operators[n].parallelism}->{p}" for n, p in target.items())
        return ScalingDecision(
            parallelism=target,
            reason=f"healthy: scale down operators without lag by /{self.config.scale_down_factor:g}: {changes}",
            details={
                "symptom": "none",
                "no_lag": no_lag,
                "kafka_lag": snapshot.kafka_lag,
                "buffer_usage": {n: m.input_buffer_usage for n, m in snapshot.operators.items()},
            },
        )
