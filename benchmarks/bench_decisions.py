"""Decision time per loop iteration, for every autoscaler in `autoscalers.available()`.

Feeds each autoscaler a stream of realistic snapshots of q1, q3 and q11 (a 15 s loop, a
cosine input rate, parallelism drifting as if earlier decisions were applied, busy time
and lag from the topology's cost profile, skewed subtasks) with the loop's history, and
times `decide` alone (after a short warm-up). Prints median, p95 and max per autoscaler
and query; on a shared machine the max includes scheduler noise, compare it with p95.

Targets (issue 5): <= 100 ms per decision, except MEAD's fitting (<= 5 s) and MPC with
h = 3 (<= 1 s).

    .venv/bin/python benchmarks/bench_decisions.py                # all, 200 decisions per query
    .venv/bin/python benchmarks/bench_decisions.py -n 50 --only gesscale,flink-er

Each autoscaler has a `case_<name>` function giving the parameters it is benchmarked
with (forcing a full evaluation on every call where the autoscaler would otherwise skip
calls). MPC's and MEAD's state-space sizes are `bench_mpc_states.py`'s table.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import autoscalers
from autoscalers.base import History
from harness.metrics.snapshot import MetricsSnapshot, OperatorMetrics, SubtaskMetrics
from harness.topology import Topology, load_topology

QUERIES = ("q1", "q3", "q11")
PERIOD_S = 15.0
HISTORY_LENGTH = 512  # as the MAPE loop keeps


@dataclass(frozen=True)
class Case:
    """How one autoscaler is benchmarked."""

    params: dict[str, Any] = field(default_factory=dict)
    note: str = ""


# ---------------------------------------------------------------- one function per autoscaler


def case_flink_operator() -> Case:
    # Decide from the first window on; the 15-min window (60 snapshots) is evaluated every call.
    return Case({"stabilization.interval": 0, "metrics.window": "15 min", "scale-down.interval": 0},
                "15-min window of 60 snapshots")  # fmt: skip


def case_gesscale() -> Case:
    return Case({"period_s": 0}, "model fit + analysis every call (paper: every 60 s)")


def case_flink_er() -> Case:
    return Case({"period_s": 0}, "flow network + max-flow every call (paper: every 60 s)")


def case_mpc() -> Case:
    return Case({"horizon": 3}, "h = 3 (<= 1 s); h = 1, 2 and states: bench_mpc_states.py")


def case_mead() -> Case:
    return Case({"period_s": 0}, "MAP fit + greedy every call (paper: every 60 s)")


def case_default() -> Case:
    return Case()


CASES: dict[str, Callable[[], Case]] = {
    "flink-operator": case_flink_operator,
    "gesscale": case_gesscale,
    "flink-er": case_flink_er,
    "mpc": case_mpc,
    "mead": case_mead,
}

# ---------------------------------------------------------------- realistic snapshots


def _subtasks(
    rng: np.random.Generator, p: int, rin: float, rout: float, busy: float, bp: float, lag: float | None
) -> tuple[SubtaskMetrics, ...]:
    w = rng.dirichlet(np.full(p, 20.0))  # mild key skew
    return tuple(
        SubtaskMetrics(
            records_in_per_s=rin * wi,
            records_out_per_s=rout * wi,
            busy_ms_per_s=min(1000.0, busy * wi * p),
            idle_ms_per_s=max(0.0, 1000.0 - min(1000.0, busy * wi * p) - bp),
            backpressured_ms_per_s=bp,
            input_buffer_usage=min(1.0, busy / 1000.0),
            cpu_load=min(0.9, busy / 1000.0),
            lag=None if lag is None else lag * wi,
        )
        for wi in w
    )


def realistic_snapshots(query: str, n: int, seed: int = 1) -> list[MetricsSnapshot]:
    """`n` snapshots 15 s apart of `query` at 1/100 of the thesis' scale."""
    topo: Topology = load_topology(query)
    rng = np.random.default_rng(seed)
    par = {o.name: int(rng.integers(1, 8)) for o in topo.operators}
    lag = {o.name: 0.0 for o in topo.sources}
    out: list[MetricsSnapshot] = []
    for i in range(n):
        t = (i + 1) * PERIOD_S
        if i % 20 == 19:  # as if an autoscaler rescaled now and then
            name = topo.operators[int(rng.integers(len(topo.operators)))].name
            par[name] = max(1, min(24, par[name] + int(rng.choice([-2, -1, 1, 2, 3]))))
        base = 0.01 * (250_000 + 975_000 * (1 + math.cos(2 * math.pi * t / 3600)))
        ops: dict[str, OperatorMetrics] = {}
        produced = 0.0
        processed = 0.0
        for o in topo.operators:
            p = par[o.name]
            cap = 0.01 * o.capacity * p
            if o.is_source:
                offered = base * (1 + 0.05 * rng.standard_normal())
                if query == "q3":
                    offered *= 0.015 / 0.01 * (0.2 if o.name == "person_source" else 0.8)
                produced += offered
                rin = min(offered + lag[o.name] / PERIOD_S, cap)
                lag_rate = offered - rin
                lag[o.name] = max(0.0, lag[o.name] + lag_rate * PERIOD_S)
                processed += rin
            else:
                rin = min(sum(ops[u].records_out_per_s for u in o.upstream), cap)
                lag_rate = None
            busy = min(1000.0, 1000.0 * rin / max(cap, 1e-9))
            bp = 300.0 if busy >= 999 else 0.0
            rout = rin * o.selectivity
            src_lag = lag.get(o.name)
            ops[o.name] = OperatorMetrics(
                parallelism=p,
                records_in_per_s=rin,
                records_out_per_s=rout,
                busy_ms_per_s=busy,
                idle_ms_per_s=1000.0 - busy,
                backpressured_ms_per_s=bp,
                is_backpressured=bp > 100,
                input_buffer_usage=busy / 1000.0,
                cpu_load=min(0.9, busy / 1000.0),
                subtasks=_subtasks(rng, p, rin, rout, busy, bp, src_lag),
                lag=src_lag,
                lag_rate=lag_rate,
                input_rate=offered if o.is_source else None,
            )
        total_lag = sum(lag.values())
        out.append(
            MetricsSnapshot(
                t=t,
                window_s=PERIOD_S,
                topology=topo,
                operators=ops,
                kafka_lag=total_lag,
                kafka_lag_rate=produced - processed,
                input_rate=produced,
                throughput=processed,
                latency_s=total_lag / max(processed, 1.0),
                taskmanagers=sum(par.values()),
                cpu_load=0.5,
                interarrival_s=rng.exponential(1.0 / max(produced, 1.0), size=2000),
            )
        )
    return out


# ---------------------------------------------------------------- timing


def time_decisions(name: str, snapshots: list[MetricsSnapshot]) -> list[float]:
    """Milliseconds per `decide` call, with the loop's history (decisions are not applied)."""
    case = CASES.get(name, case_default)()
    warm = autoscalers.create(name, case.params)  # warm-up: imports, caches, first-call costs
    for snap in snapshots[:5]:
        warm.decide(snap, History())
    scaler = autoscalers.create(name, case.params)
    history: deque[MetricsSnapshot] = deque(maxlen=HISTORY_LENGTH)
    times: list[float] = []
    for snap in snapshots:
        h = History(snapshots=tuple(history))
        started = time.perf_counter()
        scaler.decide(snap, h)
        times.append((time.perf_counter() - started) * 1000.0)
        history.append(snap)
    return times


def _row(times: list[float]) -> str:
    p95 = float(np.percentile(times, 95))
    return f"{statistics.median(times):>9.3f}{p95:>9.3f}{max(times):>9.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200, help="decisions per query")
    ap.add_argument("--only", default="", help="comma-separated autoscaler names")
    ap.add_argument("--queries", default=",".join(QUERIES))
    args = ap.parse_args()
    names = [n for n in autoscalers.available() if not args.only or n in args.only.split(",")]
    queries = args.queries.split(",")
    snaps = {q: realistic_snapshots(q, args.n) for q in queries}
    print(f"decision time per loop iteration ({args.n} decisions per query, ms)")
    print(f"{'autoscaler':<16}{'query':<7}{'median':>9}{'p95':>9}{'max':>9}  note")
    for name in names:
        note = CASES.get(name, case_default)().note
        all_times: list[float] = []
        for q in queries:
            times = time_decisions(name, snaps[q])
            all_times += times
            print(f"{name:<16}{q:<7}{_row(times)}  {note}")
        print(f"{name:<16}{'all':<7}{_row(all_times)}")
    print("(MPC's and MEAD's state-space sizes: benchmarks/bench_mpc_states.py)")


if __name__ == "__main__":
    main()
