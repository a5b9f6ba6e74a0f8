"""The SPL strategy: Gedik et al.'s elastic-scaling heuristic, the third baseline of MPC's Tab. 7.

De Matteis & Mencagli (sec. 5.4) compare MPC with "the algorithm in Ref. [2] developed for the
SPL framework" (Gedik, Schneider, Hirzel, Wu: Elastic scaling for data stream processing, IEEE
TPDS 25(6), 2014) and describe it so: it "monitors whether the operator is capable of sustaining
the actual stream speed and evaluates a corresponding congestion index. A congestion is detected
if the index is over a threshold. The strategy is throughput oriented and monitors the number of
input tuples served by the operator. It changes the number of replicas based on the current
congestion index and the recent history of past actions. If a past action did not improve
throughput, the algorithm avoids executing it again. [...] the authors introduce specific
mechanisms to forget the recent history if the congestion index or the throughput change
significantly. The algorithm uses a sensitivity parameter to determine when a significant change
happens." Tab. 7 runs it at a 4 s step with congestion threshold 0.1 and sensitivity 0.9, and
its amplitude is 1: one replica per step.

Per operator, every control step (the rules below; Ref. [2] itself is not in the repository, so
its details are this description's, and the signal mapping is the harness'):

- congestion index: Ref. [2]'s splitter blocking-time fraction. Flink's analogue is the time the
  operator's upstream subtasks spend blocked sending to it (upstream backPressuredTimeMsPerSecond
  / 1000, the largest over its upstream operators). A source has no splitter in the job; its
  feeder is Kafka, whose "blocking" is the share of the input that piles up:
  max(0, d(lag)/dt) / input rate.
- throughput: the records/s the operator takes in (records_in; a source: records_out, as Flink
  reports no records in for a source).
- history: per replica count, the throughput and congestion first seen there. When a count in
  the history shows a changed congestion status or a throughput that differs significantly
  (min/max < sensitivity), the workload changed: the history is forgotten.
- congested: one replica more, unless the history says one more did not improve throughput
  significantly (congested there too, and its throughput * sensitivity <= this count's), then
  stay. A count that was not congested served its input, not its capacity: no evidence against it.
- not congested: one replica less, unless the history says one less was congested or served
  significantly less throughput, then stay.

Like the other reactive baselines it waits after a rescale until its metrics window no longer
covers the downtime, and leaves an operator alone whose signals were not measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from autoscalers.base import AppliedAction, Autoscaler, History, ScalingDecision
from autoscalers.baselines.config import SPLConfig
from autoscalers.baselines.thresholds import replica_cap
from autoscalers.config import AutoscalerConfig, RunContext
from autoscalers.restarts import window_overlaps_restart
from harness.metrics.snapshot import MetricsSnapshot, Needs, measured, needs
from harness.vocabulary import Metric


@dataclass(frozen=True)
class LevelSeen:
    """What the operator served, and whether it was congested, at one replica count."""

    throughput: float
    congested: bool


def congestion_index(snapshot: MetricsSnapshot, name: str) -> float:
    """Blocking fraction of the operator's feeder (see the module docstring); NaN when not measured."""
    spec = snapshot.topology.op(name)
    if spec.is_source:
        m = snapshot.operators[name]
        if m.lag_rate is None or m.input_rate is None or not measured(m.lag_rate) or not measured(m.input_rate):
            return math.nan
        if m.input_rate <= 0:
            return 0.0
        return min(1.0, max(0.0, float(m.lag_rate)) / float(m.input_rate))
    blocked = [snapshot.operators[u].backpressured_fraction for u in spec.upstream if u in snapshot.operators]
    if not blocked or not all(measured(b) for b in blocked):
        return math.nan
    return min(1.0, max(0.0, max(blocked)))


class SPLStrategy(Autoscaler):
    """Gedik et al.'s congestion + throughput-history heuristic, one replica per step (MPC sec. 5.4)."""

    name = "spl-strategy"
    READS_PAST_SNAPSHOTS = False  # decides on the current snapshot and the applied actions
    Config: ClassVar[type[AutoscalerConfig]] = SPLConfig
    config: SPLConfig

    def __init__(self, config: AutoscalerConfig | None = None, context: RunContext | None = None) -> None:
        super().__init__(config, context)
        self._seen: dict[str, dict[int, LevelSeen]] = {}
        self._applied: AppliedAction | None = None

    def needs(self) -> Needs:
        return needs(sources=(Metric.LAG_RATE, Metric.INPUT_RATE, Metric.RECORDS_OUT),
                     inner=(Metric.BACKPRESSURED, Metric.RECORDS_IN))

    def significantly_different(self, a: float, b: float) -> bool:
        hi = max(a, b)
        return hi > 0 and min(a, b) / hi < self.config.sensitivity

    def improves(self, better: float, than: float) -> bool:
        """`better` is a significant improvement over `than` (ratio beyond the sensitivity)."""
        return better * self.config.sensitivity > than

    def remember(self, name: str, n: int, now: LevelSeen) -> dict[int, LevelSeen]:
        """Store what count `n` served; forget the history when the workload visibly changed."""
        seen = self._seen.setdefault(name, {})
        before = seen.get(n)
        if before is not None and (before.congested != now.congested
                                   or self.significantly_different(before.throughput, now.throughput)):
            seen.clear()
        seen.setdefault(n, now)  # the first sight since the last change: slow drift adds up to a change
        return seen

    def step(self, name: str, n: int, now: LevelSeen) -> tuple[int, str]:
        """+1, -1 or 0 replicas for one operator, and why."""
        seen = self.remember(name, n, now)
        if now.congested:
            up = seen.get(n + 1)
            # only a count that was itself congested served all it could: uncongested, it served the input
            if up is not None and up.congested and not self.improves(up.throughput, now.throughput):
                return 0, f"congested, but {n + 1} replicas (congested too) served {up.throughput:.0f}/s: no better"
            return 1, "congested"
        down = seen.get(n - 1)
        if down is not None and down.congested:
            return 0, f"{n - 1} replicas were congested"
        if down is not None and self.significantly_different(down.throughput, now.throughput):
            return 0, f"{n - 1} replicas served {down.throughput:.0f}/s vs {now.throughput:.0f}/s"
        return -1, "not congested"

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        if window_overlaps_restart(snapshot, history, self._applied):
            return None  # the job is (re)starting: its blocking and throughput are the restart's
        cfg = self.config
        parallelism: dict[str, int] = {}
        why: list[str] = []
        per_op: dict[str, dict[str, Any]] = {}
        for name in snapshot.topology.names:
            m = snapshot.operators[name]
            index = congestion_index(snapshot, name)
            # a Flink source reports no records in (numRecordsIn 0): what it serves is what it emits
            served = m.records_out_per_s if snapshot.topology.op(name).is_source else m.records_in_per_s
            per_op[name] = {"congestion_index": index, "throughput": served, "parallelism": m.parallelism}
            if not measured(index) or not measured(served):
                per_op[name]["unknown"] = "congestion index or throughput not measured: left alone"
                continue
            delta, reason = self.step(name, m.parallelism, LevelSeen(float(served), index > cfg.congestion_threshold))
            per_op[name]["rule"] = reason
            target = min(replica_cap(snapshot.topology, name, cfg.n_max), max(cfg.n_min, m.parallelism + delta))
            if target != m.parallelism:
                parallelism[name] = target
                why.append(f"{name} {m.parallelism}->{target} ({reason}, index {index:.2f})")
        if not parallelism:
            return None
        return ScalingDecision(
            parallelism=parallelism,
            reason=f"{self.name}: " + "; ".join(why),
            details={"operators": per_op, "congestion_threshold": cfg.congestion_threshold,
                     "sensitivity": cfg.sensitivity},
        )

    def on_applied(self, action: AppliedAction) -> None:
        self._applied = action
