"""MEAD: model-based vertical autoscaling under bursty input (Russo Russo et al. 2021).

Every `period_s` (60 s, sec. VII "T_A") MEAD
1. takes the monitoring buffer of recent inter-arrival times (the last
   `buffer_events`, sec. IV-C; `MetricsSnapshot.interarrival_s` of the
   current snapshot, optionally of earlier ones too) and fits MAPs on several windows -
   the whole buffer and its most recent halves (`window_fractions`) - keeping
   the `fits_per_window` best fits of each (sec. IV-C: "best n MAPs");
2. models the job as an open network of single-server queues, one per
   operator subtask (sec. V-A): MAP arrivals, phase-type service whose mean is
   the measured per-record service demand divided by the CPU share;
3. runs the greedy of Fig. 5: every operator starts at the cheapest CPU
   level; for each source-to-sink path, while the path's response time (mean
   or p95, the worst over all fitted MAPs) exceeds the target and an operator
   of the path can still be raised, raise the operator with the highest
   response time by one level; if that leaves the target violated and gained
   less than `delta * target`, undo it and move to the next path;
4. returns the CPU share per operator (parallelism untouched).

Choices, and why (the paper's tools are MATLAB KPC-Toolbox and LINE):
- MAP fitting (`autoscalers/maps.py`; why not KPC-Toolbox / `line-solver` is
  in that module's docstring: 65 s per fit against our 5 s budget, and a
  heavy dependency tree). A bursty sample (SCV > 1, positive autocorrelation)
  gets MMPP(2)s fitted in real time to mean, SCV, lag-1 autocorrelation and
  its decay; a queue with another rate (an operator's subtask) gets the same
  modulation with its arrival rates scaled, so a 10 s burst stays 10 s long.
  This matters: the inter-arrival sample is thinned at high rates, and a
  model rescaled in time by the thinning factor shrinks bursts to
  milliseconds (3 orders of magnitude less queueing in our check). Other
  samples get closed-form MAP(2) shapes (correlated H2, hypo-exponential or
  Poisson) matching mean, SCV and lag-1 autocorrelation, rescaled in time to
  each queue's rate.
- Queues: our own matrix-geometric MAP/PH/1 solver with the exact FCFS
  sojourn-time distribution (`autoscalers/mapph1.py`), validated against a
  Lindley-recursion simulation in the tests. `line-solver`'s `qsys_mapph1`
  gives the same means but took 60-140 ms per call without percentiles.
- Network: decomposition. Each queue sees the input model carried to its own
  rate (records-in of the operator, scaled up by input rate / source
  consumption when the sources fall behind, divided evenly over its
  subtasks). A queue's output is smoother than its input, so propagating the
  input's burstiness downstream errs on the safe side, as MEAD's worst-case
  choice does. A path's response time is the sum of independent sojourn
  times: its mean is exact under decomposition, its p95 comes from the
  convolution of the sojourn-time distributions.
- Service demand: MEAD reads it from a knowledge base filled offline; we
  estimate it online as busy time / records per subtask times the current CPU
  share (CPU-bound work takes 1/share longer under a quota), falling back to
  the last good estimate and then to the topology's capacity profile. Service
  variability is Erlang-2 (SCV 0.5) as in the paper's sec. II.
- delta (Fig. 5, no value given): 0.01. The paper's option of never
  scaling down by more than one level at a time is `max_scale_down_levels`
  (off by default, as in the paper's evaluation).
- With no inter-arrival times in the snapshot the input is taken as Poisson
  (the M/PH/1 baseline of the paper) and the decision says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from autoscalers.base import Autoscaler, AutoscalerConfig, History, ScalingDecision
from autoscalers.mapph1 import ME, PH, QueueSolution, convolve, ph_from_scv, solve_map_ph_1
from autoscalers.maps import MAP, fit_map2, fit_mmpp2, mmpp_at_rate, poisson, trace_stats
from harness.metrics.snapshot import MetricsSnapshot, Needs, needs
from harness.vocabulary import Metric

Target = Literal["mean", "p95"]


class MEADConfig(AutoscalerConfig):
    """Russo Russo et al. 2021, sec. VII: 5 CPU levels 40..100 %, T_A = 60 s, N_E = 50,000, best 5 fits."""

    period_s: float = Field(60.0, ge=0.0, description="act at most this often (T_A); 0 = every call")
    levels: tuple[float, ...] = Field((0.4, 0.55, 0.7, 0.85, 1.0), description="CPU shares, cheapest first")
    target: Target = Field("mean", description="response-time requirement on the mean or the 95th percentile")
    max_response_s: float = Field(1.0, gt=0.0, description="R_max per source-to-sink path (s)")
    buffer_events: int = Field(50_000, ge=10, description="monitoring buffer capacity N_E")
    buffer_snapshots: int = Field(
        1, ge=1, description="snapshots whose inter-arrival samples form the buffer (1: theirs may overlap)"
    )
    window_fractions: tuple[float, ...] = Field((1.0, 0.5), description="fitting windows as buffer fractions")
    fits_per_window: int = Field(5, ge=1, description="best-n MAPs kept per window")
    service_scv: float = Field(0.5, gt=0.0, description="SCV of the per-record service time (0.5 = Erlang-2)")
    delta: float = Field(0.01, ge=0.0, description="Fig. 5: undo a raise that gains less than delta * R_max")
    max_scale_down_levels: int | None = Field(None, ge=1, description="planning: limit scale-down per decision")
    min_busy_fraction: float = Field(0.01, ge=0.0, lt=1.0, description="below this, busy time gives no demand")
    poisson_without_arrivals: bool = Field(
        False, description="plan with Poisson arrivals when no inter-arrival times are measured (the paper fits "
                           "MAPs to measured arrivals, so by default MEAD does not decide without them)")

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not v or any(not 0.0 < x <= 1.0 for x in v) or list(v) != sorted(set(v)):
            raise ValueError("levels must be strictly increasing CPU shares in (0, 1]")
        return v


@dataclass(frozen=True)
class Workload:
    """A fitted arrival model and how it is carried to a queue with another rate.

    modulated: an MMPP fitted in real time; at another rate its bursts keep
    their duration (splitting over subtasks or filtering scales the rates,
    not the modulation's clock). Otherwise a shape with mean 1 that is
    rescaled in time.
    """

    map: MAP
    modulated: bool

    def at_rate(self, rate: float) -> MAP:
        return mmpp_at_rate(self.map, rate) if self.modulated else self.map.scale_to_rate(rate)


@dataclass(frozen=True)
class OperatorLoad:
    """What the queueing model needs about one operator."""

    rate_per_subtask: float  # records/s
    demand_s: float  # seconds of CPU per record at CPU share 1.0


@dataclass(frozen=True)
class Plan:
    """The greedy's result: a level index per operator and the predicted response per path."""

    levels: dict[str, int]
    response_s: dict[tuple[str, ...], float]
    violated: tuple[tuple[str, ...], ...]


class Model:
    """The queueing network for one decision: cached per (operator, level, MAP)."""

    def __init__(self, maps: list[Workload], loads: dict[str, OperatorLoad], cfg: MEADConfig) -> None:
        self.maps = maps
        self.loads = loads
        self.cfg = cfg
        self._cache: dict[tuple[str, int, int], QueueSolution | ME] = {}

    def queue(self, op: str, level: int, k: int) -> QueueSolution | ME:
        key = (op, level, k)
        if key not in self._cache:
            load = self.loads[op]
            service = ph_from_scv(load.demand_s / self.cfg.levels[level], self.cfg.service_scv)
            if load.rate_per_subtask <= 0:
                self._cache[key] = _ph_as_me(service)
            else:
                self._cache[key] = solve_map_ph_1(self.maps[k].at_rate(load.rate_per_subtask), service)
        return self._cache[key]

    def op_response(self, op: str, level: int, k: int) -> float:
        q = self.queue(op, level, k)
        if isinstance(q, ME):
            return q.mean
        return q.mean_response

    def path_response(self, path: tuple[str, ...], x: dict[str, int]) -> tuple[float, int]:
        """Worst case over the fitted MAPs: (response time, index of the MAP that gave it)."""
        worst, worst_k = -1.0, 0
        for k in range(len(self.maps)):
            r = self._path_response_one(path, x, k)
            if r > worst:
                worst, worst_k = r, k
            if math.isinf(worst):
                break
        return worst, worst_k

    def _path_response_one(self, path: tuple[str, ...], x: dict[str, int], k: int) -> float:
        parts: list[ME] = []
        for op in path:
            q = self.queue(op, x[op], k)
            if isinstance(q, QueueSolution):
                if q.sojourn is None:
                    return math.inf
                q = q.sojourn
            parts.append(q)
        if self.cfg.target == "mean":
            return float(sum(p.mean for p in parts))
        return convolve(parts).quantile(0.95)


def greedy(model: Model, paths: list[tuple[str, ...]], operators: tuple[str, ...], cfg: MEADConfig) -> Plan:
    """Fig. 5 of the paper: cheapest first, raise the slowest operator of each violating path."""
    top = len(cfg.levels) - 1
    x = {op: 0 for op in operators}
    r_max = cfg.max_response_s
    for path in paths:
        r, k = model.path_response(path, x)
        while r > r_max and any(x[i] < top for i in path):
            raisable = [i for i in path if x[i] < top]
            i = max(raisable, key=lambda o: model.op_response(o, x[o], k))
            x[i] += 1
            r_new, k_new = model.path_response(path, x)
            if r_new > r_max and r - r_new < cfg.delta * r_max:
                x[i] -= 1
                break
            r, k = r_new, k_new
    response = {p: model.path_response(p, x)[0] for p in paths}
    return Plan(levels=x, response_s=response, violated=tuple(p for p, r in response.items() if r > r_max))


class MEAD(Autoscaler):
    name = "mead"
    Config = MEADConfig
    config: MEADConfig
    def needs(self) -> Needs:
        arrivals = () if self.config.poisson_without_arrivals else (Metric.INTERARRIVAL,)
        return needs(job=(*arrivals, Metric.INPUT_RATE), operators=(Metric.BUSY, Metric.RECORDS_IN),
                     sources=(Metric.RECORDS_OUT,))

    def __init__(self, config: MEADConfig | None = None) -> None:
        super().__init__(config)
        self._last_t: float | None = None
        self._demand: dict[str, float] = {}

    # ------------------------------------------------------------ analysis

    def interarrival_buffer(self, snapshot: MetricsSnapshot, history: History) -> np.ndarray:
        """The most recent `buffer_events` inter-arrival times from the last `buffer_snapshots` snapshots."""
        chunks: list[np.ndarray] = []
        n = 0
        for snap in [snapshot, *reversed(history.snapshots)][: self.config.buffer_snapshots]:
            ia = snap.interarrival_s
            if ia is None or len(ia) == 0:
                if snap is snapshot:
                    continue
                break  # a gap in monitoring: do not splice across it
            chunks.append(np.asarray(ia, dtype=float))
            n += len(ia)
            if n >= self.config.buffer_events:
                break
        if not chunks:
            return np.zeros(0)
        return np.concatenate(chunks[::-1])[-self.config.buffer_events :]

    def fit_maps(self, buffer: np.ndarray) -> list[Workload]:
        """Best-n arrival models for every window (sec. IV-C); Poisson when nothing fits."""
        out: list[Workload] = []
        seen: set[tuple[float, ...]] = set()
        for frac in self.config.window_fractions:
            window = buffer[-max(1, int(len(buffer) * frac)) :]
            try:
                fitted = [Workload(m, True) for m, _ in fit_mmpp2(window, self.config.fits_per_window)]
                if not fitted:
                    fitted = [Workload(m, False) for m in fit_map2(window, self.config.fits_per_window)]
            except ValueError:
                continue
            for w in fitted:
                key = (w.modulated, *np.round(np.concatenate([w.map.D0.ravel(), w.map.D1.ravel()]), 9))
                if key not in seen:
                    seen.add(key)
                    out.append(w)
        return out or [Workload(poisson(1.0), False)]

    def loads(self, snapshot: MetricsSnapshot) -> dict[str, OperatorLoad]:
        topo = snapshot.topology
        sources = [s.name for s in topo.sources]
        ops = snapshot.operators
        consumed = sum(ops[s].records_in_per_s or ops[s].records_out_per_s for s in sources)
        scale = max(1.0, snapshot.input_rate / consumed) if consumed > 0 and snapshot.input_rate > 0 else 1.0
        out: dict[str, OperatorLoad] = {}
        for spec in topo.operators:
            m = snapshot.operators[spec.name]
            rin = m.records_in_per_s or (m.records_out_per_s if spec.is_source else 0.0)
            rate = m.input_rate if (spec.is_source and m.input_rate is not None) else rin * scale
            n = max(1, m.parallelism)
            per_sub = rin / n
            busy = m.busy_fraction
            if busy >= self.config.min_busy_fraction and per_sub > 0:
                self._demand[spec.name] = busy * m.cpu_share / per_sub
            demand = self._demand.get(spec.name, 1.0 / spec.capacity)
            out[spec.name] = OperatorLoad(rate_per_subtask=rate / n, demand_s=demand)
        return out

    # ------------------------------------------------------------ plan

    def plan(self, snapshot: MetricsSnapshot, history: History) -> tuple[Plan, list[Workload], np.ndarray]:
        buffer = self.interarrival_buffer(snapshot, history)
        maps = self.fit_maps(buffer) if len(buffer) >= 3 else [Workload(poisson(1.0), False)]
        model = Model(maps, self.loads(snapshot), self.config)
        return greedy(model, snapshot.topology.paths(), snapshot.topology.names, self.config), maps, buffer

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        cfg = self.config
        if self._last_t is not None and snapshot.t - self._last_t < cfg.period_s - 1e-9:
            return None
        if snapshot.gaps(self.needs()):
            return None  # the queueing network spans every operator: no plan on unmeasured inputs
        self._last_t = snapshot.t
        plan, maps, buffer = self.plan(snapshot, history)
        shares: dict[str, float] = {}
        for op, lvl in plan.levels.items():
            if cfg.max_scale_down_levels is not None:
                cur = _level_of(snapshot.operators[op].cpu_share, cfg.levels)
                lvl = max(lvl, cur - cfg.max_scale_down_levels)
            shares[op] = cfg.levels[lvl]
        if all(abs(shares[op] - snapshot.operators[op].cpu_share) < 1e-9 for op in shares):
            return None
        stats = trace_stats(buffer) if len(buffer) >= 3 else None
        details = {
            "target": cfg.target,
            "max_response_s": cfg.max_response_s,
            "predicted_response_s": {"->".join(p): r for p, r in plan.response_s.items()},
            "violated_paths": ["->".join(p) for p in plan.violated],
            "maps": len(maps),
            "modulated": any(w.modulated for w in maps),
            "interarrivals": int(len(buffer)),
            "scv": stats.scv if stats else None,
            "rho1": stats.rho1 if stats else None,
        }
        reason = f"MEAD greedy: {cfg.target} response <= {cfg.max_response_s} s on every path"
        if stats is None:
            reason += " (no inter-arrival times: Poisson input assumed)"
        return ScalingDecision(cpu_share=shares, reason=reason, details=details)


def _level_of(share: float, levels: tuple[float, ...]) -> int:
    """Index of the closest level (a job started at share 1.0 is at the top level)."""
    return int(np.argmin([abs(share - lv) for lv in levels]))


def _ph_as_me(service: PH) -> ME:
    """A queue with no arrivals: the response time is the service time."""
    return ME(service.beta.copy(), service.S.copy(), service.exit)
