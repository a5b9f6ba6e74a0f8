"""How a local experiment's rate scale relates to the calibrated capacity (WORKLOADS-AND-QUERIES.md,
"Scaling a thesis experiment down to one machine").

An experiment tests an autoscaler only if its load makes it scale: the pattern's peak should need
most of the task-manager budget and its trough only a few. `needed_taskmanagers` is the least
number of task managers (one subtask each, operator by operator) that carries a rate with the
calibrated capacities at the experiment's task-manager quota; `scale_for` the pattern scale at which
the peak needs a given share of the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.backends.sim.costs import run_costs
from harness.backends.sim.model import topic_shares
from harness.config import Experiment
from harness.topology import load_topology
from workloads.patterns import build_pattern


def _per_record(exp: Experiment) -> dict[str, tuple[float, float]]:
    """operator -> (input records per pattern record, capacity of one subtask at the experiment's quota)."""
    topo = load_topology(exp.query)
    cores = exp.sim.taskmanager_cpu or exp.local.taskmanager_cpu_quota
    costs = run_costs(topo, exp.sim, cores)
    shares = topic_shares(topo)
    frac: dict[str, float] = {}
    out = {}
    for spec, c in zip(topo.operators, costs.ops, strict=True):
        if spec.is_source:
            frac[spec.name] = shares.get(spec.topic or "", 0.0)
        else:
            frac[spec.name] = sum(frac[u] * costs.ops[topo.names.index(u)].selectivity for u in spec.upstream)
        out[spec.name] = (frac[spec.name], c.capacity(cores))
    return out


def needed_taskmanagers(exp: Experiment, rate: float) -> int:
    """Task managers that carry `rate` (records/s into Kafka) with the calibrated capacities."""
    return sum(max(1, math.ceil(rate * f / cap - 1e-9)) for f, cap in _per_record(exp).values())


@dataclass(frozen=True)
class ScaleChoice:
    scale: float
    peak_rate: float
    trough_rate: float
    peak_tms: int
    trough_tms: int
    budget: int
    costs_from: str = "the calibrated capacities"  # or the first-guess profile's, when none is calibrated

    def describe(self) -> str:
        return (f"scale {self.scale:g}: the pattern's peak ({self.peak_rate:,.0f} rec/s) needs {self.peak_tms} and "
                f"its trough ({self.trough_rate:,.0f} rec/s) {self.trough_tms} of at most {self.budget} task "
                f"managers at {self.costs_from}")


def describe_scale(exp: Experiment) -> ScaleChoice:
    pat = build_pattern(exp.pattern, exp.seed, exp.query)
    peak, trough = float(max(pat.step_rates)), float(min(pat.step_rates))
    costs = run_costs(load_topology(exp.query), exp.sim, exp.sim.taskmanager_cpu or exp.local.taskmanager_cpu_quota)
    source = "the calibrated capacities" if costs.calibrated else f"the first-guess capacities ({costs.source})"
    return ScaleChoice(exp.pattern.scale, peak, trough, needed_taskmanagers(exp, peak),
                       needed_taskmanagers(exp, trough), exp.scale_manager.max_taskmanagers, source)


def scale_for(exp: Experiment, peak_share: float = 0.85) -> float:
    """The pattern scale at which the peak needs about `peak_share` of the task-manager budget
    (bisection on the scale; the rate -> task managers map is a step function)."""
    unit = exp.model_copy(update={"pattern": exp.pattern.model_copy(update={"scale": 1.0})})
    peak1 = float(max(build_pattern(unit.pattern, exp.seed, exp.query).step_rates))
    target = max(1, int(peak_share * exp.scale_manager.max_taskmanagers))
    lo, hi = 0.0, 1.0
    while needed_taskmanagers(exp, hi * peak1) <= target and hi < 1e6:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if needed_taskmanagers(exp, mid * peak1) <= target:
            lo = mid
        else:
            hi = mid
    return lo
