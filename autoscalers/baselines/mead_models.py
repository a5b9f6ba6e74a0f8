"""MEAD's model baselines: the same planner on simpler queueing models (Russo Russo et al. 2021).

The paper's evaluation (sec. VII) keeps MEAD's greedy (Fig. 5), its CPU-share levels and its
activation period, and swaps the performance model the greedy asks:

- M/G/1 (sec. II and VII, "(i) each operator is modeled as a M/G/1 queue"): arrivals are
  Poisson at the measured rate, service is the same phase-type (Erlang-2) distribution MEAD
  uses. Our MAP/PH/1 solver with a one-state MAP is exactly M/PH/1, so mean and p95 (the
  sojourn-time distribution, sec. VII-B) come from the same code as MEAD's; only the arrival
  model differs. It needs no inter-arrival times: a rate is all it assumes to know.
- GI/G/1 with Kingman's approximation (sec. II and VII, "(ii) Kingman's formula for GI/G/1
  queues", ref. [8]): W = rho / (1 - rho) (ca^2 + cs^2) / 2 S and R = W + S per queue, ca^2
  the squared coefficient of variation of the measured inter-arrival times, cs^2 MEAD's
  service SCV. A path's response time is the sum over its queues. Kingman gives no
  distribution, so a p95 target is refused (sec. VII-B: "Kingman's formula cannot be used to
  obtain information about the response time distribution of GI/G/1 queues").

Both use MEAD's decomposition (one queue per operator subtask at the operator's measured
load, `MEAD.loads`) and its single-model "worst case" trivially (one model each). Every queue
sees the job's measured ca^2: MEAD itself carries the input's burstiness to every subtask, so
the two models get the same information about the input except its correlation, which is
exactly the difference the paper studies. The threshold-based vertical policy of sec. VII is
`autoscalers.baselines.thresholds.MEADThreshold`.
"""

from __future__ import annotations

import math

import numpy as np

from autoscalers.base import History
from autoscalers.baselines.config import KingmanConfig, MG1Config
from autoscalers.mead.config import MEADConfig
from autoscalers.mead.maps import poisson, trace_stats
from autoscalers.mead.network import OperatorLoad, Plan, Workload, greedy
from autoscalers.mead.scaler import MEAD
from harness.metrics.snapshot import MetricsSnapshot, Needs, needs
from harness.vocabulary import Metric


class MEADMG1(MEAD):
    """MEAD's greedy on M/PH/1 queues (Poisson arrivals at the measured rate)."""

    name = "mead-mg1"
    Config = MG1Config
    config: MG1Config

    def needs(self) -> Needs:
        return needs(job=(Metric.INPUT_RATE,), operators=(Metric.BUSY, Metric.RECORDS_IN),
                     sources=(Metric.RECORDS_OUT,))

    def reads(self) -> frozenset[Metric]:
        return self.needs().all()  # no inter-arrival sample: `interarrival_buffer` is empty

    def fit_maps(self, buffer: np.ndarray) -> list[Workload]:
        return [Workload(poisson(1.0), False)]

    def interarrival_buffer(self, snapshot: MetricsSnapshot, history: History) -> np.ndarray:
        return np.zeros(0)  # the M/G/1 model uses the rate only; the reason says Poisson is assumed


class KingmanModel:
    """Kingman's GI/G/1 approximation per queue, with the interface MEAD's greedy asks of a model."""

    def __init__(self, ca2: float, loads: dict[str, OperatorLoad], cfg: MEADConfig) -> None:
        self.ca2 = ca2
        self.loads = loads
        self.cfg = cfg

    def op_response(self, op: str, level: int, k: int = 0) -> float:
        """Mean response time of one subtask of `op` at CPU level `level` (infinite when saturated)."""
        load = self.loads[op]
        service = load.demand_s / self.cfg.levels[level]
        rho = load.rate_per_subtask * service
        if rho >= 1.0:
            return math.inf
        wait = rho / (1.0 - rho) * (self.ca2 + self.cfg.service_scv) / 2.0 * service
        return wait + service

    def path_response(self, path: tuple[str, ...], x: dict[str, int]) -> tuple[float, int]:
        return float(sum(self.op_response(op, x[op]) for op in path)), 0


class MEADKingman(MEAD):
    """MEAD's greedy on GI/G/1 queues solved with Kingman's formula."""

    name = "mead-gig1"
    Config = KingmanConfig
    config: KingmanConfig

    def arrival_scv(self, buffer: np.ndarray) -> float:
        """ca^2 of the measured inter-arrival times (1, Poisson's, when too few were measured)."""
        if len(buffer) < 3:
            return 1.0
        try:
            return trace_stats(buffer).scv
        except ValueError:
            return 1.0

    def plan(self, snapshot: MetricsSnapshot, history: History) -> tuple[Plan, list[Workload], np.ndarray]:
        buffer = self.interarrival_buffer(snapshot, history)
        model = KingmanModel(self.arrival_scv(buffer), self.loads(snapshot), self.config)
        plan = greedy(model, snapshot.topology.paths(), snapshot.topology.names, self.config,  # type: ignore[arg-type]
                      self.context.slo_latency_s)
        return plan, [], buffer
