"""MPC: predictive elasticity with a horizon (De Matteis & Mencagli, "Keep calm and react with foresight").

Per control step (one MAPE-loop iteration) and per operator:
- Disturbances (sec. 3.1, 5.3): the job's input rate is forecast h steps
  ahead with Holt-Winters (statsmodels; additive trend, optional additive
  season) on the series of input rates of the loop's snapshots; with fewer
  than `min_history` points the last value is repeated. An operator's
  arrival rate is the forecast times its share of the input (records in /
  records the sources consume; the topic's share for a source).
- Service time (Expr. 1, 5): per-record computation time T at CPU share 1 =
  busy fraction x share / records per subtask (CPU-bound work slows down by
  1/share under a quota, as the paper's T = C / f). Fallbacks: last good
  estimate, then the topology's capacity profile.
- Models (sec. 3.2): utilisation rho = lambda T / (n s); throughput-based QoS
  uses the effective service time T_S = max(T_A, T / (n s)) (Expr. 4);
  latency uses Kingman's G/G/1 approximation (Expr. 7)
  W = rho/(1-rho) (ca^2 + cs^2)/2 T/(n s), response R = r W + T/s, with the
  correction r (Expr. 8) = measured / Kingman-predicted wait of the step
  that just ended.
- Cost (Expr. 10-15): L = Q + beta n s + gamma ||du||^2, summed over the
  horizon; Q = alpha T_S / T_A (throughput; Expr. 11 divided by the predicted
  inter-arrival time so alpha is dimensionless: alpha max(1, rho)) or
  alpha exp(R / delta) (latency; Expr. 12). u = (replicas, CPU level index)
  (the paper normalises frequencies to integers for the amplitude, 5.3.4).
- Search (sec. 3.3.2): branch & bound over the evolution tree
  (`autoscalers/mpc/search.py`); only the first step is applied (receding
  horizon).

Two things the paper's setting does not have and ours does, handled so that the paper's
intent holds:
- Cool-down. The paper may reconfigure at every control step; our loop asks for no decision
  for `loop.cooldown_s` after it applied one, so a configuration chosen now stays in force
  for k = ceil(cooldown / period) steps. The controller plans over
  H = max(h, k) steps of the loop's period and, in the evolution tree, a configuration that
  changes at step i is held for the next k - 1 steps (no decision is possible then). With no
  cool-down (k <= 1) this is exactly the paper's tree of height h. Period and cool-down come
  from the run (`RunContext`), so a matrix that sets a cool-down is planned for it.
- Backlog. In the paper every tuple reaches the operator's own queue as it arrives, so the
  measured arrival rate is the load to serve and queued tuples are served as soon as
  resources allow (sec. 5.3.3: "the enqueued tuples can be processed when more resources
  are allocated", the ratio peaks above 1). Here records wait in Kafka, in front of the
  sources, and the consumed rate hides them: a throughput cost on the forecast input alone
  is minimised by the smallest configuration with utilisation <= 1 (Expr. 11 is flat below
  1, and so is ours), which never drains a backlog. With `backlog: horizon` (default) the
  records waiting in Kafka are part of the load over the planning horizon: each step's rate
  is the forecast plus lag / (H x period). `backlog: ignore` plans for the forecast alone.
- alpha. Expr. 11 costs alpha T_S; we divide by the predicted inter-arrival time T_A so the
  term is dimensionless: alpha max(1, rho). Like Expr. 11 it is flat for rho <= 1, so alpha
  does not set a utilisation target (no value of alpha would give headroom: that is the
  backlog's job above); it sets how much overload is tolerated to save a replica or a
  switch: an overload rho = 1 + e costs alpha e against beta + gamma for one more replica,
  so alpha = 200 (Tab. 6) reacts from e = 0.45 %, the paper's priority of QoS over resources.

Choices where the paper (one operator on one multicore) does not fit a job graph:
- Decomposition: one controller per operator, as the paper controls one
  operator; every operator is forecast from the same input series. For the
  latency variant each operator gets delta = the experiment's latency SLO (`slo.latency_s`)
  / (number of operators on the longest path), so a path's latencies add up to the SLO.
- Correction r: the measured wait is the job's event-time lag at the sources
  (`snapshot.latency_s`: records waiting in Kafka are the entry queue of the
  job); the predicted wait is Kingman's along the slowest path at the measured
  rate and the configuration in force during that step. r is clipped to
  `correction_bounds`: with no lag the measured wait is ~0 and an unclipped
  r would make every configuration look free of queueing.
- CPU shares are the paper's CPU frequencies (vertical dimension), off unless
  `cpu_levels` is set; the resource cost is then beta x cores (n s), the
  per-core cost of Expr. 13 with fractional cores.
- Overload in the latency variant (rho >= 1, R infinite) costs
  alpha exp(cap + ln(1 + rho)), so among overloaded options the larger one wins (and the cost
  stays finite however large the overload, e.g. with a big backlog to drain).
- Defaults: beta 0.5, gamma 0.4 (sec. 5.3); alpha 200 (throughput) or 2
  (latency), the random-walk values of Tab. 6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autoscalers.base import Autoscaler, History, RunContext, ScalingDecision
from autoscalers.mpc.config import MPCConfig
from autoscalers.mpc.forecast import Smoothing, holt_winters_forecast
from autoscalers.mpc.search import SearchResult, branch_and_bound, exhaustive
from harness.metrics.snapshot import MetricsSnapshot, Needs, needs
from harness.vocabulary import Metric

EXP_CAP = 50.0


@dataclass(frozen=True)
class OperatorModel:
    """Inputs of one operator's controller."""

    name: str
    rates: np.ndarray  # forecast arrival rate per step of the horizon, records/s
    demand_s: float  # computation time per record at CPU share 1
    current: tuple[int, float]  # (parallelism, CPU share) in force
    max_parallelism: int
    delta_s: float  # latency threshold for this operator


@dataclass(frozen=True)
class Plan:
    """One decision's inputs and per-operator search results."""

    operators: dict[str, tuple[OperatorModel, SearchResult]]
    forecast: np.ndarray  # job input rate per step of the horizon
    arrival_scv: float
    correction: float


def kingman_wait(rho: float, ca2: float, cs2: float, service_s: float) -> float:
    """Expr. 7: W ~ rho/(1-rho) (ca^2 + cs^2)/2 T_S^id; infinite at rho >= 1."""
    if rho >= 1.0:
        return math.inf
    return rho / (1.0 - rho) * (ca2 + cs2) / 2.0 * service_s


class MPC(Autoscaler):
    name = "mpc"
    Config = MPCConfig
    config: MPCConfig

    def __init__(self, config: MPCConfig | None = None, context: RunContext | None = None) -> None:
        super().__init__(config, context)
        self._demand: dict[str, float] = {}
        self._smoothing: Smoothing | None = None
        self._since_refit = 0

    def needs(self) -> Needs:
        job = [Metric.INPUT_RATE] + ([Metric.LAG] if self.config.backlog == "horizon" else [])
        if self.config.objective == "latency":
            job.append(Metric.LATENCY_KAFKA)
        return needs(job=tuple(job), operators=(Metric.BUSY, Metric.RECORDS_IN, Metric.RECORDS_OUT))

    def reads(self) -> frozenset[Metric]:
        """The inter-arrival sample too, for the arrivals' SCV when none is configured (`_arrival_scv`)."""
        extra = {Metric.INTERARRIVAL} if self.config.arrival_scv is None else set()
        return self.needs().all() | extra

    # ------------------------------------------------------------ models

    def _shares(self, current_share: float) -> tuple[float, ...]:
        return self.config.cpu_levels or (current_share,)

    def options(self, m: OperatorModel) -> list[tuple[int, float]]:
        """Every (replicas, CPU share) the controller may choose for the operator."""
        return [(n, s) for n in range(1, m.max_parallelism + 1) for s in self._shares(m.current[1])]

    def response_s(self, m: OperatorModel, rate: float, n: int, share: float, ca2: float, r: float) -> float:
        """Kingman response time R = r W + T/s of the operator with n replicas at share s."""
        t = m.demand_s / share
        rho = rate * t / n
        return r * kingman_wait(rho, ca2, self.config.service_scv, t / n) + t

    def stage_costs(self, m: OperatorModel, ca2: float, r: float) -> np.ndarray:
        """L_i(o) without the switching term: QoS cost + resource cost, per step i and option o."""
        cfg = self.config
        opts = self.options(m)
        n = np.array([o[0] for o in opts], dtype=float)
        s = np.array([o[1] for o in opts], dtype=float)
        t = m.demand_s / s
        out = np.empty((len(m.rates), len(opts)))
        for i, lam in enumerate(m.rates):
            rho = lam * t / n
            if cfg.objective == "throughput":
                q = cfg.qos_weight * np.maximum(1.0, rho)
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    w = np.where(
                        rho < 1.0,
                        r * rho / (1.0 - rho) * (ca2 + cfg.service_scv) / 2.0 * t / n,
                        np.inf,
                    )
                expo = np.where(rho < 1.0, np.minimum((w + t) / m.delta_s, EXP_CAP), EXP_CAP + np.log1p(rho))
                q = cfg.qos_weight * np.exp(expo)
            out[i] = q + cfg.beta * n * s
        return out

    def switch_costs(self, m: OperatorModel) -> tuple[np.ndarray, np.ndarray]:
        """gamma ||du||^2 between options, and from the configuration in force (u = (n, level index))."""
        opts = self.options(m)
        shares = self._shares(m.current[1])
        n = np.array([o[0] for o in opts], dtype=float)
        lvl = np.array([shares.index(o[1]) for o in opts], dtype=float)
        cur_lvl = float(np.argmin([abs(m.current[1] - x) for x in shares]))
        g = self.config.gamma
        switch = g * ((n[:, None] - n[None, :]) ** 2 + (lvl[:, None] - lvl[None, :]) ** 2)
        start = g * ((n - m.current[0]) ** 2 + (lvl - cur_lvl) ** 2)
        return switch, start

    @property
    def steps_in_force(self) -> int:
        """k: control steps a newly applied configuration stays in force (the loop's cool-down)."""
        ctx = self.context
        if ctx.period_s <= 0:
            return 1
        return max(1, math.ceil(ctx.cooldown_s / ctx.period_s - 1e-9))

    @property
    def planning_steps(self) -> int:
        """H = max(h, k): the horizon covers at least the time a decision is committed for."""
        return max(self.config.horizon, self.steps_in_force)

    def search(self, m: OperatorModel, ca2: float, r: float) -> SearchResult:
        stage = self.stage_costs(m, ca2, r)
        switch, start = self.switch_costs(m)
        opts = self.options(m)
        current = opts.index(m.current) if m.current in opts else None
        hold = self.steps_in_force - 1
        if self.config.search == "exhaustive":
            return exhaustive(stage, switch, start, hold=hold, current=current)
        return branch_and_bound(
            stage, switch, start, lookahead=self.config.bound == "lookahead", hold=hold, current=current
        )

    # ------------------------------------------------------------ monitoring

    def _rate_shares(self, snapshot: MetricsSnapshot) -> dict[str, float]:
        """Each operator's arrival rate as a fraction of the job's input rate."""
        topo, ops = snapshot.topology, snapshot.operators
        sources = [s.name for s in topo.sources]
        consumed = {s: ops[s].records_in_per_s or ops[s].records_out_per_s for s in sources}
        total = sum(consumed.values())
        shares: dict[str, float] = {}
        known_inputs = {s: float(r) for s in sources if (r := ops[s].input_rate) is not None}
        for spec in topo.operators:
            name = spec.name
            if spec.is_source:
                if known_inputs and snapshot.input_rate > 0 and name in known_inputs:
                    shares[name] = known_inputs[name] / snapshot.input_rate
                elif total > 0:
                    shares[name] = consumed[name] / total
                else:
                    shares[name] = 1.0 / len(sources)
            elif total > 0 and ops[name].records_in_per_s > 0:
                shares[name] = ops[name].records_in_per_s / total
            else:  # nothing measured: propagate the topology's selectivities
                shares[name] = sum(shares[u] * topo.op(u).selectivity for u in spec.upstream)
        return shares

    def _demand_s(self, snapshot: MetricsSnapshot, name: str) -> float:
        m = snapshot.operators[name]
        per_sub = (m.records_in_per_s or m.records_out_per_s) / max(1, m.parallelism)
        if m.busy_fraction >= self.config.min_busy_fraction and per_sub > 0:
            self._demand[name] = m.busy_fraction * m.cpu_share / per_sub
        return self._demand.get(name, 1.0 / snapshot.topology.op(name).capacity)

    def _arrival_scv(self, snapshot: MetricsSnapshot) -> float:
        if self.config.arrival_scv is not None:
            return self.config.arrival_scv
        ia = snapshot.interarrival_s
        if ia is not None and len(ia) >= 10 and float(np.mean(ia)) > 0:
            return float(np.var(ia) / np.mean(ia) ** 2)
        return 1.0

    def forecast(self, snapshot: MetricsSnapshot, history: History) -> np.ndarray:
        series = np.array([s.input_rate for s in history.snapshots] + [snapshot.input_rate], dtype=float)
        series = series[np.isfinite(series)]  # a snapshot without a measured rate is a missing sample
        reuse = self._smoothing if self._since_refit < self.config.refit_every else None
        steps = self.planning_steps
        fc, used = holt_winters_forecast(series, steps, self.config, reuse)
        if used is not None and reuse is None:
            self._since_refit = 0
        self._smoothing = used
        self._since_refit += 1
        if self.config.backlog == "horizon" and snapshot.kafka_lag > 0 and self.context.period_s > 0:
            fc = fc + snapshot.kafka_lag / (steps * self.context.period_s)  # drain within the horizon
        return fc

    def models(self, snapshot: MetricsSnapshot, history: History) -> tuple[list[OperatorModel], np.ndarray]:
        topo = snapshot.topology
        fc = self.forecast(snapshot, history)
        shares = self._rate_shares(snapshot)
        longest = max(len(p) for p in topo.paths())
        out = []
        for spec in topo.operators:
            m = snapshot.operators[spec.name]
            out.append(
                OperatorModel(
                    name=spec.name,
                    rates=fc * shares[spec.name],
                    demand_s=self._demand_s(snapshot, spec.name),
                    current=(m.parallelism, m.cpu_share),
                    max_parallelism=max(1, min(self.config.max_parallelism, spec.max_parallelism)),
                    delta_s=self.context.slo_latency_s / longest,
                )
            )
        return out, fc

    def correction(self, snapshot: MetricsSnapshot, models: list[OperatorModel], ca2: float) -> float:
        """Expr. 8: measured wait / Kingman's prediction for the step that just ended, clipped."""
        if not self.config.correction:
            return 1.0
        shares = self._rate_shares(snapshot)
        wait: dict[str, float] = {}
        for m in models:
            rate = snapshot.input_rate * shares[m.name]
            n, s = m.current
            t = m.demand_s / s
            wait[m.name] = kingman_wait(rate * t / n, ca2, self.config.service_scv, t / n)
        predicted = max(sum(wait[o] for o in p) for p in snapshot.topology.paths())
        lo, hi = self.config.correction_bounds
        if not math.isfinite(predicted) or predicted <= 0:
            return hi if snapshot.latency_s > 0 else 1.0
        return float(np.clip(snapshot.latency_s / predicted, lo, hi))

    # ------------------------------------------------------------ decide

    def plan(self, snapshot: MetricsSnapshot, history: History) -> Plan:
        models, fc = self.models(snapshot, history)
        ca2 = self._arrival_scv(snapshot)
        r = self.correction(snapshot, models, ca2) if self.config.objective == "latency" else 1.0
        return Plan({m.name: (m, self.search(m, ca2, r)) for m in models}, fc, ca2, r)

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        if snapshot.gaps(self.needs()):
            return None  # the controller optimises every operator jointly: no plan on unmeasured inputs
        plan = self.plan(snapshot, history)
        plans = plan.operators
        parallelism: dict[str, int] = {}
        cpu_share: dict[str, float] = {}
        changed = False
        explored = total = 0
        trajectories = {}
        for name, (m, res) in plans.items():
            opts = self.options(m)
            n, s = opts[res.optimum.options[0]]
            parallelism[name] = n
            if self.config.cpu_levels:
                cpu_share[name] = s
            changed |= n != m.current[0] or abs(s - m.current[1]) > 1e-9
            explored += res.states_explored
            total += res.states_total
            trajectories[name] = [opts[o] for o in res.optimum.options]
        if not changed:
            return None
        details = {
            "objective": self.config.objective,
            "horizon": self.config.horizon,
            "planning_steps": self.planning_steps,
            "steps_in_force": self.steps_in_force,
            "backlog": snapshot.kafka_lag if self.config.backlog == "horizon" else None,
            "latency_threshold_s": self.context.slo_latency_s,
            "forecast": [float(x) for x in plan.forecast],
            "arrival_scv": plan.arrival_scv,
            "correction": plan.correction,
            "trajectories": trajectories,
            "states_explored": explored,
            "states_total": total,
        }
        return ScalingDecision(
            parallelism=parallelism,
            cpu_share=cpu_share,
            reason=f"MPC ({self.config.objective}, h={self.config.horizon}): min cost over the horizon",
            details=details,
        )
