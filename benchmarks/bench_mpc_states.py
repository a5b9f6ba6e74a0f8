"""MPC search effort (states explored vs. total, h = 1, 2, 3) and MPC / MEAD decision times.

De Matteis & Mencagli report in Tab. 5 how many states of the evolution tree
their branch & bound explores against an exhaustive search; this prints the
same table for our MPC on realistic q1/q3/q11 snapshots (see
`bench_decisions.py`), for the paper's pruning rule and for the look-ahead
bound, summed over the operators' controllers, plus a check that B&B and
the exhaustive search agree. Then decision times: MPC per horizon and
objective (target: <= 1 s at h = 3) and MEAD per response-time target, with
Poisson and bursty (MMPP) inter-arrival times (target: <= 5 s, fitting
included; MEAD is forced to decide on every call).

    .venv/bin/python benchmarks/bench_mpc_states.py            # 40 decisions per case
    .venv/bin/python benchmarks/bench_mpc_states.py -n 10 --queries q1
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections import deque

import numpy as np
from bench_decisions import realistic_snapshots  # same directory (run as a script)

from autoscalers.base import History
from autoscalers.config import RunContext
from autoscalers.mead import MEAD, MEADConfig, maps
from autoscalers.mpc import MPC, MPCConfig
from autoscalers.mpc.search import exhaustive
from harness.metrics.snapshot import MetricsSnapshot

BURSTY = maps.mmpp2(0.3, 3.0, 0.05, 0.2)  # SCV ~ 3.1, lag-1 autocorrelation ~ 0.27


# The paper's setting (Tab. 5): MPC may reconfigure at every step, so no cool-down hold in the tree.
PAPER = RunContext(cooldown_s=0.0)

def _run(scaler, snaps: list[MetricsSnapshot], per_call=None) -> list[float]:
    history: deque[MetricsSnapshot] = deque(maxlen=512)
    times = []
    for snap in snaps:
        h = History(snapshots=tuple(history))
        started = time.perf_counter()
        out = per_call(snap, h) if per_call else scaler.decide(snap, h)
        times.append((time.perf_counter() - started) * 1000.0)
        history.append(snap)
        del out
    return times


def states_table(snaps: dict[str, list[MetricsSnapshot]]) -> None:
    print("\nMPC states of the evolution tree per decision (sum over the operators' controllers, medians over")
    print(f"all decisions of {', '.join(snaps)}; 32 replica options per operator; cf. Tab. 5 of the paper)")
    print(f"{'objective':<11}{'h':>2}{'bound':>11}{'explored':>12}{'total':>12}{'% (median)':>12}{'same opt.':>11}")
    for objective in ("throughput", "latency"):
        for h in (1, 2, 3):
            for bound in ("paper", "lookahead"):
                cfg = MPCConfig(objective=objective, horizon=h, bound=bound)
                scaler = MPC(cfg, PAPER)
                explored, totals, same = [], [], True
                for q, ss in snaps.items():
                    history: deque[MetricsSnapshot] = deque(maxlen=512)
                    for k, snap in enumerate(ss):
                        plan = scaler.plan(snap, History(snapshots=tuple(history)))
                        history.append(snap)
                        explored.append(sum(r.states_explored for _, r in plan.operators.values()))
                        totals.append(sum(r.states_total for _, r in plan.operators.values()))
                        if k % 10 == 0:  # spot-check the optimum against the exhaustive search
                            for m, r in plan.operators.values():
                                stage = scaler.stage_costs(m, plan.arrival_scv, plan.correction)
                                switch, start = scaler.switch_costs(m)
                                full = exhaustive(stage, switch, start)
                                same &= abs(full.optimum.cost - r.optimum.cost) <= 1e-9 * max(1.0, full.optimum.cost)
                    del q
                pct = statistics.median(100.0 * e / t for e, t in zip(explored, totals, strict=True))
                print(
                    f"{objective:<11}{h:>2}{bound:>11}{statistics.median(explored):>12,.0f}"
                    f"{statistics.median(totals):>12,.0f}{pct:>12.2f}{'yes' if same else 'NO':>11}"
                )


def _with_interarrivals(snaps: list[MetricsSnapshot], bursty: bool, seed: int = 3) -> list[MetricsSnapshot]:
    rng = np.random.default_rng(seed)
    out = []
    for s in snaps:
        rate = max(s.input_rate, 1.0)
        if bursty:
            ia = maps.sample(BURSTY.scale_to_rate(rate), 5000, rng)
        else:
            ia = rng.exponential(1.0 / rate, size=5000)
        out.append(dataclasses.replace(s, interarrival_s=ia))
    return out


def _row(label: str, times: list[float]) -> None:
    p95 = float(np.percentile(times, 95))
    print(f"{label:<40}{statistics.median(times):>10.1f}{p95:>10.1f}{max(times):>10.1f}")


def decision_times(snaps: dict[str, list[MetricsSnapshot]]) -> None:
    print("\ndecision time (ms; after one warm-up call)")
    print(f"{'case':<40}{'median':>10}{'p95':>10}{'max':>10}")
    first = next(iter(snaps.values()))
    for objective in ("throughput", "latency"):
        for h in (1, 2, 3):
            cfg = MPCConfig(objective=objective, horizon=h)
            MPC(cfg, PAPER).decide(first[0], History())
            times = [t for ss in snaps.values() for t in _run(MPC(cfg, PAPER), ss)]
            _row(f"mpc {objective} h={h}", times)
    for bursty in (False, True):
        for target in ("mean", "p95"):
            cfg, slo = MEADConfig(period_s=0.0, target=target), RunContext(slo_latency_s=0.05)
            times = []
            for ss in snaps.values():
                ss = _with_interarrivals(ss, bursty)
                MEAD(cfg, slo).decide(ss[0], History())
                times += _run(MEAD(cfg, slo), ss)
            _row(f"mead {target} {'bursty' if bursty else 'poisson'} (2 windows x best 5)", times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=40, help="decisions per query and case")
    ap.add_argument("--queries", default="q1,q3,q11")
    ap.add_argument("--skip-times", action="store_true")
    args = ap.parse_args()
    snaps = {q: realistic_snapshots(q, args.n) for q in args.queries.split(",")}
    states_table(snaps)
    if not args.skip_times:
        decision_times(snaps)


if __name__ == "__main__":
    main()
