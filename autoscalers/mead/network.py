"""MEAD's queueing network and its greedy planner (Russo Russo et al. 2021, sec. V-A and Fig. 5).

Every operator subtask is a MAP/PH/1 queue (`mapph1`) fed by the fitted arrival model
(`maps`) carried to its own rate; a source-to-sink path's response time is the sum of its
queues' sojourn times (mean exact under decomposition, p95 from their convolution).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscalers.mead.config import MEADConfig
from autoscalers.mead.mapph1 import ME, PH, QueueSolution, convolve, ph_from_scv, solve_map_ph_1
from autoscalers.mead.maps import MAP, mmpp_at_rate


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


def greedy(
    model: Model, paths: list[tuple[str, ...]], operators: tuple[str, ...], cfg: MEADConfig, r_max: float
) -> Plan:
    """Fig. 5 of the paper: cheapest first, raise the slowest operator of each violating path to meet r_max."""
    top = len(cfg.levels) - 1
    x = {op: 0 for op in operators}
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


def _ph_as_me(service: PH) -> ME:
    """A queue with no arrivals: the response time is the service time."""
    return ME(service.beta.copy(), service.S.copy(), service.exit)
