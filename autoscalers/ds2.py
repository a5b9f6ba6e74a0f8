"""DS2 (Kalavri et al. 2018) as used by Kanis 2023, ch. 4.3 and 6.7.2.

True rates (ch. 4.3, 6.7.2): per subtask, true processing rate = records-in
rate / busy fraction and true output rate = records-out rate / busy fraction
(busy fraction = busyTimeMsPerSecond / 1000, Flink's "useful time"). They are
what a subtask would do if it were busy all the time. Per operator the
subtasks' true rates are summed; the per-instance true processing rate is
their mean.

One pass in topological order (eq. 4.2): a source's target input rate is the
external rate of its Kafka topic; every other operator's target input rate is
the sum over its upstream operators u of target_input(u) * true_output(u) /
true_input(u). Optimal parallelism = ceil(target_input / true processing
rate per instance). DS2 assumes records it cannot take are dropped, so it
never budgets for draining a Kafka backlog; the thesis multiplies its answer
by an over-provisioning factor (1.2 by default, swept 1.0/1.2/1.4):
p = ceil(p_ds2 * factor), rounded after DS2's own integer answer as in the
thesis (DS2's module returns integers, the factor is applied on top).

Choices where the thesis is silent:
- Busy-time guard: a subtask whose busy fraction is below `min_busy_fraction`
  gives no true rate (the thesis' q5 run divided by ~0 and asked for 62 sink
  subtasks). If no subtask of an operator passes, the operator keeps its
  parallelism; its output/input ratio for the pass is then the observed one
  (records out / records in), or the topology's selectivity if it saw no
  input.
- Sources: Flink reports what a source reads from Kafka as its output, so a
  source subtask's input rate is its records-in rate, or its records-out rate
  when records-in is zero.
- A source's external rate is `OperatorMetrics.input_rate` (rate produced
  into its topic). Sources without it share what is left of the job's
  `snapshot.input_rate` (after the known topics) in proportion to what they
  read (evenly if they read nothing).
- Unknown inputs: an operator whose rates, busy time or target input rate were
  not measured (NaN) keeps its parallelism, and so does everything downstream
  of it whose target input rate depends on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field

from autoscalers.arithmetic import ceil_p
from autoscalers.base import Autoscaler, AutoscalerConfig, History, ScalingDecision
from harness.metrics.snapshot import MetricsSnapshot, OperatorMetrics, SubtaskMetrics, measured, needs
from harness.vocabulary import Metric


class DS2Config(AutoscalerConfig):
    """Kanis 2023, ch. 6.7.2, table 6.2: over-provisioning factor 1.2 (plus our busy-time floor)."""

    overprovisioning_factor: float = Field(1.2, gt=0.0)
    min_busy_fraction: float = Field(
        0.01, ge=0.0, lt=1.0, description="subtasks busier than this give a true rate (guard against /0)"
    )


@dataclass(frozen=True)
class TrueRates:
    """An operator's true rates summed over the subtasks that passed the busy floor."""

    true_input: float  # records/s the measured subtasks could take if always busy
    true_output: float
    instances: int  # subtasks that contributed

    @property
    def per_instance(self) -> float:
        return self.true_input / self.instances

    @property
    def ratio(self) -> float:
        return self.true_output / self.true_input


def _subtasks(m: OperatorMetrics) -> tuple[SubtaskMetrics, ...]:
    """Per-subtask metrics; a backend without them gets `p` identical averages."""
    if m.subtasks:
        return m.subtasks
    p = max(1, m.parallelism)
    one = SubtaskMetrics(
        records_in_per_s=m.records_in_per_s / p,
        records_out_per_s=m.records_out_per_s / p,
        busy_ms_per_s=m.busy_ms_per_s,
    )
    return (one,) * p


def true_rates(m: OperatorMetrics, is_source: bool, min_busy_fraction: float) -> TrueRates | None:
    """DS2's true rates (ch. 6.7.2), or None when no subtask was busy enough to measure them."""
    tin = tout = 0.0
    n = 0
    for s in _subtasks(m):
        busy = s.busy_ms_per_s / 1000.0
        rin = s.records_in_per_s
        if is_source and not rin > 0:
            rin = s.records_out_per_s
        if not (measured(busy) and measured(rin) and measured(s.records_out_per_s)):
            return None  # one unmeasured subtask: the operator's true rate is unknown
        if busy < min_busy_fraction or busy <= 0 or rin <= 0:
            continue
        tin += rin / busy
        tout += s.records_out_per_s / busy
        n += 1
    return TrueRates(tin, tout, n) if n else None


def _external_rates(snapshot: MetricsSnapshot) -> dict[str, float]:
    """Per-source external input rate; the job's rate, less what is known per topic, fills the gaps.

    NaN where it cannot be known (the job's input rate was not measured either).
    """
    ops = snapshot.operators
    sources = [s.name for s in snapshot.topology.sources]
    known: dict[str, float] = {}
    for s in sources:
        rate = ops[s].input_rate
        if rate is not None and measured(rate):
            known[s] = rate
    unknown = [s for s in sources if s not in known]
    rest = snapshot.input_rate - sum(known.values())
    rest = max(0.0, rest) if measured(rest) else math.nan
    read = {s: max(ops[s].records_in_per_s, ops[s].records_out_per_s) for s in unknown}
    total = sum(read.values())
    out = dict(known)
    for s in unknown:
        out[s] = rest * (read[s] / total if total > 0 else 1.0 / len(unknown))
    return out


class DS2(Autoscaler):
    name = "ds2"
    READS_PAST_SNAPSHOTS = False  # decides on the current snapshot and the applied actions
    Config: ClassVar[type[AutoscalerConfig]] = DS2Config
    config: DS2Config
    NEEDS = needs(job=(Metric.INPUT_RATE,), operators=(Metric.RECORDS_IN, Metric.RECORDS_OUT, Metric.BUSY))

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        topo = snapshot.topology
        ops = snapshot.operators
        factor = self.config.overprovisioning_factor
        external = _external_rates(snapshot)
        target_in: dict[str, float] = {}
        ratio: dict[str, float] = {}
        new_p: dict[str, int] = {}
        per_op: dict[str, dict[str, Any]] = {}
        guarded: list[str] = []
        unknown: list[str] = []
        for spec in topo.operators:
            name = spec.name
            m = ops[name]
            if spec.is_source:
                target_in[name] = external[name]
            else:
                target_in[name] = sum(target_in[u] * ratio[u] for u in spec.upstream)
            rates = true_rates(m, spec.is_source, self.config.min_busy_fraction)
            info: dict[str, Any] = {"current": m.parallelism, "target_input": target_in[name]}
            if not (math.isfinite(target_in[name]) and measured(m.records_in_per_s)
                    and measured(m.records_out_per_s) and measured(m.busy_ms_per_s)):
                ratio[name] = math.nan
                new_p[name] = m.parallelism
                unknown.append(name)
                info.update(unknown="rates or target input not measured: keep parallelism")
            elif rates is None:
                observed_in = m.records_in_per_s or (m.records_out_per_s if spec.is_source else 0.0)
                ratio[name] = m.records_out_per_s / observed_in if observed_in > 0 else spec.selectivity
                new_p[name] = m.parallelism
                guarded.append(name)
                info.update(guard="busy time below floor: keep parallelism", ratio=ratio[name])
            else:
                ratio[name] = rates.ratio
                optimal = ceil_p(target_in[name] / rates.per_instance)
                new_p[name] = ceil_p(optimal * factor)
                info.update(
                    true_rate_per_instance=rates.per_instance,
                    true_output=rates.true_output,
                    ratio=rates.ratio,
                    measured_instances=rates.instances,
                    optimal=optimal,
                    with_factor=new_p[name],
                )
            per_op[name] = info
        target = {n: p for n, p in new_p.items() if p != ops[n].parallelism}
        if not target:
            return None
        changes = ", ".join(f"{n} {ops[n].parallelism}->{p}" for n, p in target.items())
        reason = f"ds2 x{factor:g}: {changes}"
        if guarded:
            reason += f" (kept {', '.join(guarded)}: busy time too low)"
        return ScalingDecision(
            parallelism=target,
            reason=reason,
            details={"overprovisioning_factor": factor, "external_rates": external, "operators": per_op},
        )
