"""The MAPE loop, identical for every autoscaler and every backend.

Monitor (backend snapshot over the metrics window) -> Analyse + Plan (the
autoscaler's `decide`) -> Execute (scale manager limits, then the backend) ->
wait one period. After an applied action no decision is taken for the
cool-down, as in the thesis (ch. 6.6.4), counted from the end of the
rescale's downtime so a slow savepoint restart does not eat it; snapshots are
still collected so autoscalers that keep metric windows see every period.

No decision rests on a metric that was not measured: while a job-level metric
the autoscaler needs (`Autoscaler.needs`) is unknown it is not asked at all;
while an operator lacks one of its needed metrics, whatever the autoscaler
asks for that operator is dropped (the others proceed; each autoscaler also
keeps such operators as they are on its own). Either way the tick writes one
`decision_skipped` event naming the operators, the metrics and why they are
missing (e.g. the job manager was unreachable, Prometheus was down).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from autoscalers.base import UNRECORDED, AppliedAction, Autoscaler, History
from harness.backends.base import Backend, PlacesReplicas, PureSnapshots
from harness.config import LoopConfig
from harness.metrics.snapshot import JOB_SCOPE, MetricsSnapshot
from harness.record import EventLog
from harness.scaling import ScaleManager
from harness.vocabulary import EventKind, Metric

HISTORY_LENGTH = 512  # snapshots kept for autoscalers (2 h at a 15 s period)


@dataclass
class LoopResult:
    decisions: int = 0
    actions: int = 0
    iterations: int = 0
    skipped: int = 0  # decisions not taken for want of a metric


class MapeLoop:
    """Drives one run from t = 0 to `duration_s`."""

    def __init__(
        self,
        backend: Backend,
        autoscaler: Autoscaler,
        scale_manager: ScaleManager,
        loop: LoopConfig,
        events: EventLog,
        on_tick: Callable[[float], None] | None = None,
        on_snapshot: Callable[[MetricsSnapshot], object] | None = None,
    ) -> None:
        self.backend = backend
        self.autoscaler = autoscaler
        self.scale_manager = scale_manager
        self.loop = loop
        self.events = events
        self.on_tick = on_tick
        self.on_snapshot = on_snapshot  # after the step's decision: e.g. the live view
        self.snapshots: deque[MetricsSnapshot] = deque(maxlen=HISTORY_LENGTH)
        self.actions: list[AppliedAction] = []
        self.last_action_t = float("-inf")

    def run(self, duration_s: float) -> LoopResult:
        result = LoopResult()
        t_next = max(self.loop.period_s, self.loop.warmup_s)
        while True:
            t_stop = min(t_next, duration_s)
            self.backend.advance_to(t_stop)
            self._record_backend_events()
            if self.on_tick:
                self.on_tick(t_stop)
            if t_next > duration_s:
                break
            self.iterate(result)
            # after a long blocking step (a rescale, a recovery) skip the missed ticks rather than
            # firing them back to back on the same metrics
            t_next = max(t_next + self.loop.period_s, self.backend.now())
        return result

    def iterate(self, result: LoopResult) -> None:
        result.iterations += 1
        if not self._snapshot_read() and self.backend.now() - self.last_action_t < self.loop.cooldown_s:
            return  # cooling down, and no one reads this tick's snapshot later: no monitor step
        snap = self.backend.snapshot(self.loop.metrics_window_s)
        if snap.t - self.last_action_t >= self.loop.cooldown_s:
            self._decide_and_act(snap, result)
        self.snapshots.append(snap)
        if self.on_snapshot:
            self.on_snapshot(snap)

    def _snapshot_read(self) -> bool:
        """Whether a snapshot taken during a cool-down counts: for a backend whose snapshots record samples,
        for the live view, or for an autoscaler that looks at past snapshots (the sim's readout was most of
        a sim run's time, issue 13)."""
        pure = isinstance(self.backend, PureSnapshots) and self.backend.snapshot_is_pure()
        return not pure or self.on_snapshot is not None or self.autoscaler.READS_PAST_SNAPSHOTS

    def _decide_and_act(self, snap: MetricsSnapshot, result: LoopResult) -> None:
        gaps = snap.gaps(self.autoscaler.needs())
        if JOB_SCOPE in gaps:
            self._skip(snap, result, gaps, "no decision: job metrics not measured")
            return
        past = tuple(self.snapshots) if self.autoscaler.READS_PAST_SNAPSHOTS else UNRECORDED
        history = History(snapshots=past, actions=tuple(self.actions))
        started = time.perf_counter()
        decision = self.autoscaler.decide(snap, history)
        decide_ms = (time.perf_counter() - started) * 1000
        current = snap.parallelism
        if gaps:
            dropped = decision.changed_operators(current, snap.cpu_share) & set(gaps) if decision else set()
            self._skip(snap, result, gaps, f"no decision for {', '.join(sorted(gaps))}: metrics not measured",
                       dropped=sorted(dropped))
            if decision is not None and dropped:
                decision = replace(
                    decision,
                    parallelism={op: p for op, p in decision.parallelism.items() if op not in dropped},
                    cpu_share={op: c for op, c in decision.cpu_share.items() if op not in dropped},
                    reason=f"{decision.reason} (dropped for {', '.join(sorted(dropped))}: metrics not measured)",
                )
                if not decision.changed_operators(current, snap.cpu_share):
                    return
        if decision is None:
            return
        result.decisions += 1
        self.events.add(
            snap.t,
            EventKind.DECISION,
            decision.reason,
            autoscaler=self.autoscaler.name,
            current=current,
            target=decision.parallelism,
            cpu_share=decision.cpu_share,
            details=decision.details,
            decide_ms=decide_ms,
        )
        plan = self.scale_manager.plan(decision, current, snap.cpu_share)
        if not plan.changed:
            self.events.add(snap.t, EventKind.NOT_APPLIED, "no change after the scale manager's limits",
                            limits=plan.limits)
            return
        if isinstance(self.backend, PlacesReplicas):
            self.backend.choose_nodes(decision.placement)
        rescale = self.backend.rescale(plan.parallelism, plan.cpu_share)
        t_after = self.backend.now()
        if not rescale.ok:
            self.events.add(t_after, EventKind.FAULT, f"rescale failed: {rescale.error}", target=plan.parallelism)
            return
        action = AppliedAction(
            t=snap.t,
            before=current,
            after=rescale.parallelism,
            cpu_share_before=snap.cpu_share,
            cpu_share_after=rescale.cpu_share or plan.cpu_share,
            downtime_s=rescale.downtime_s,
        )
        self.actions.append(action)
        self.autoscaler.on_applied(action)
        # the cool-down starts when the job runs again, not when it was asked to rescale
        self.last_action_t = max(t_after, snap.t + rescale.downtime_s)
        result.actions += 1
        self.events.add(
            snap.t,
            EventKind.ACTION,
            decision.reason,
            autoscaler=self.autoscaler.name,
            before=current,
            after=rescale.parallelism,
            cpu_share_before=snap.cpu_share,
            cpu_share_after=action.cpu_share_after,
            limits=plan.limits,
            downtime_s=rescale.downtime_s,
            method=rescale.method,
            finished_at=t_after,
            placement=decision.placement,
        )

    def _skip(self, snap: MetricsSnapshot, result: LoopResult, gaps: Mapping[str, tuple[Metric, ...]], what: str,
              **data: object) -> None:
        result.skipped += 1
        metrics = sorted({m for ms in gaps.values() for m in ms})
        self.events.add(
            snap.t, EventKind.DECISION_SKIPPED, f"{what}: {', '.join(metrics)} ({snap.reason(metrics)})",
            autoscaler=self.autoscaler.name,
            metrics={scope or "job": list(ms) for scope, ms in gaps.items()},
            why={m: snap.reason([m]) for m in metrics},
            **data,
        )

    def _record_backend_events(self) -> None:
        for ev in self.backend.drain_events():
            self.events.add(ev.t, ev.kind, ev.reason, **ev.data)
