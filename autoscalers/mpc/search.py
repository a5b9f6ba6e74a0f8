"""The MPC optimiser: search the evolution tree of configurations over the horizon.

De Matteis & Mencagli, sec. 3.3: the cost of a trajectory u(tau..tau+h-1) is
J = sum_i L_i(u_i) + Sw(u_i - u_(i-1)), a sum of positive step costs, so the
partial cost of a node of the evolution tree (height h, arity Omega = number
of configurations) never decreases on the way to a leaf. Branch & bound
(sec. 3.3.2): explore the subtree of a node only if its partial cost C_i is
below C_opt, the best complete trajectory so far; reaching a leaf sets C_opt.
The result is the exhaustive search's optimum (Tab. 5 of the paper counts the
states explored both ways).

Inputs are pre-computed tables, which keeps the search independent of the
queueing models: `stage[i, o]` = QoS + resource cost of configuration o at
step i, `switch[o, o2]` = switching cost from o to o2, `start[o]` = switching
cost from the configuration in force now. A *state* is a node of the tree
whose partial cost was computed; an exhaustive search computes all
Omega + Omega^2 + ... + Omega^h of them. Children are expanded cheapest
first (a heuristic that changes the order, never the result), so the first
leaf is already a good bound; at h = 1 every child of the root must still be
evaluated, so there B&B and exhaustive search explore the same states.

Cool-down (`hold`): the paper reconfigures at any control step; our MAPE loop asks for no
decision for the cool-down after it applied one, so a configuration that changes at step i
stays in force for the next `hold` steps too. The evolution tree then has a single child
below such a node for `hold` levels (the same configuration, no switching cost); with
`hold = 0` it is the paper's tree. `current` is the index of the configuration in force now
(None when it is not one of the options): choosing anything else at step 0 is a change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


@dataclass(frozen=True)
class Trajectory:
    """Configuration index per step of the horizon and the total cost J."""

    options: tuple[int, ...]
    cost: float


class SearchResult(NamedTuple):
    optimum: Trajectory
    states_explored: int
    states_total: int


def tree_size(omega: int, horizon: int, hold: int = 0, current: int | None = None) -> int:
    """Nodes of the evolution tree below the root: Omega + Omega^2 + ... + Omega^h without a hold."""
    if hold == 0:
        return sum(omega**k for k in range(1, horizon + 1))

    def below(depth: int, frozen: int, free_same: bool) -> int:
        # nodes below a node at `depth`; frozen = forced steps left; free_same = its own option is one
        if depth == horizon:
            return 0
        if frozen > 0:
            return 1 + below(depth + 1, frozen - 1, True)
        same = 1 + below(depth + 1, 0, True) if free_same else 0
        changes = omega - 1 if free_same else omega
        return same + changes * (1 + below(depth + 1, hold, True))

    return below(0, 0, current is not None)


def _check(stage: np.ndarray, switch: np.ndarray, start: np.ndarray) -> tuple[int, int]:
    h, omega = stage.shape
    if switch.shape != (omega, omega) or start.shape != (omega,):
        raise ValueError(f"shapes: stage {stage.shape}, switch {switch.shape}, start {start.shape}")
    if h < 1 or omega < 1:
        raise ValueError("need at least one step and one configuration")
    return h, omega


def branch_and_bound(
    stage: np.ndarray,
    switch: np.ndarray,
    start: np.ndarray,
    lookahead: bool = False,
    hold: int = 0,
    current: int | None = None,
) -> SearchResult:
    """Depth-first B&B over the evolution tree (prune when partial cost >= best complete cost).

    `lookahead` adds to the partial cost a lower bound of the steps still to
    come (the cheapest stage cost of each, switching costs being >= 0), which
    prunes more and is still exact; False is the paper's rule.
    """
    h, omega = _check(stage, switch, start)
    mins = stage.min(axis=1)
    rest = np.concatenate([np.cumsum(mins[::-1])[::-1][1:], [0.0]]) if lookahead else np.zeros(h)
    best_cost = np.inf
    best: tuple[int, ...] = ()
    explored = 0
    path: list[int] = []

    def expand(depth: int, cost: float, prev: int | None, frozen: int) -> None:
        nonlocal best_cost, best, explored
        if frozen > 0:  # the cool-down keeps the configuration: one child, no switching cost
            assert prev is not None
            explored += 1
            c = cost + float(stage[depth, prev])
            if depth == h - 1:
                if c < best_cost:
                    best_cost, best = c, (*path, prev)
            elif c + rest[depth] < best_cost:
                path.append(prev)
                expand(depth + 1, c, prev, frozen - 1)
                path.pop()
            return
        trans = start if prev is None else switch[prev]
        children = cost + trans + stage[depth]
        explored += omega
        same = current if prev is None else prev
        if depth == h - 1:
            o = int(np.argmin(children))
            if children[o] < best_cost:
                best_cost, best = float(children[o]), (*path, o)
            return
        for o in np.argsort(children, kind="stable"):
            c = float(children[o])
            if c + rest[depth] >= best_cost:
                break  # sorted: every later child costs at least as much
            path.append(int(o))
            expand(depth + 1, c, int(o), 0 if int(o) == same else hold)
            path.pop()

    expand(0, 0.0, None, 0)
    return SearchResult(Trajectory(best, best_cost), explored, tree_size(omega, h, hold, current))


def exhaustive(
    stage: np.ndarray, switch: np.ndarray, start: np.ndarray, hold: int = 0, current: int | None = None
) -> SearchResult:
    """Every trajectory's cost (vectorised without a hold); the reference B&B must match."""
    h, omega = _check(stage, switch, start)
    if hold > 0:
        return _exhaustive_held(stage, switch, start, hold, current)
    total = start + stage[0]
    for i in range(1, h):
        total = total[..., None] + switch.reshape((1,) * (i - 1) + (omega, omega)) + stage[i]
    flat = int(np.argmin(total))
    options = tuple(int(x) for x in np.unravel_index(flat, total.shape))
    return SearchResult(Trajectory(options, float(total.ravel()[flat])), tree_size(omega, h), tree_size(omega, h))


def _exhaustive_held(
    stage: np.ndarray, switch: np.ndarray, start: np.ndarray, hold: int, current: int | None
) -> SearchResult:
    """Every admissible trajectory under a cool-down hold, enumerated without pruning."""
    h, omega = stage.shape
    best: tuple[float, tuple[int, ...]] = (np.inf, ())
    states = 0

    def walk(depth: int, cost: float, prev: int | None, frozen: int, path: tuple[int, ...]) -> None:
        nonlocal best, states
        if depth == h:
            if cost < best[0]:
                best = (cost, path)
            return
        if frozen > 0:
            assert prev is not None
            states += 1
            walk(depth + 1, cost + float(stage[depth, prev]), prev, frozen - 1, (*path, prev))
            return
        same = current if prev is None else prev
        trans = start if prev is None else switch[prev]
        for o in range(omega):
            states += 1
            walk(depth + 1, cost + float(trans[o] + stage[depth, o]), o, 0 if o == same else hold, (*path, o))

    walk(0, 0.0, None, 0, ())
    return SearchResult(Trajectory(best[1], float(best[0])), states, states)
