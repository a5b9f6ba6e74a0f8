"""Synthetic run records for tests, notebooks and the analysis benchmark.

A cheap, vectorised stand-in for a run: a cosine (or convergence) input rate,
a reactive scaler that re-targets the ideal parallelism every `cooldown_s`,
Kafka lag and latency from the capacity shortfall, end-to-end latency a
little above it, load the generator skipped while far behind, and a gap
(NaN samples) in latencies and CPU at each rescale. Not a simulator - just
realistic-looking long-format data written with `harness.record`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.analysis.profile import OperatorProfile, demand_coefficients
from harness.identity import config_hash
from harness.record import STATUS_COMPLETED, EventLog, write_run_record
from harness.topology import load_topology
from harness.vocabulary import EventKind, Metric


def _rates(pattern: str, n: int, step_s: float, rng: np.random.Generator, peak: float) -> tuple[np.ndarray, list]:
    t = np.arange(n) * step_s
    minute = (t // 60).astype(int)
    stages: list[dict[str, Any]] = []
    if pattern == "convergence":
        total = n * step_s
        a, b = total * 10 / 90, total * 50 / 90
        rates = np.where(t < a, 0.0, np.where(t < b, peak, peak / 2))
        stages = [{"name": "stage0", "start_s": 0.0, "end_s": a}, {"name": "stage1", "start_s": a, "end_s": b},
                  {"name": "stage2", "start_s": b, "end_s": total}]
    else:
        noise = rng.uniform(0, 0.05 * peak, size=minute.max() + 1)[minute]
        rates = 0.1 * peak + 0.9 * peak * (1 + np.cos(2 * np.pi * minute / 60)) / 2 + noise
    return rates, stages


def synthetic_run(
    run_dir: Path,
    *,
    autoscaler: str = "ds2",
    params: dict[str, Any] | None = None,
    query: str = "q1",
    pattern: str = "cosine",
    seed: int = 1,
    repetition: int = 0,
    duration_s: float = 8400.0,
    step_s: float = 5.0,
    cooldown_s: float = 300.0,
    lag_factor: float = 1.0,
    faults: int = 0,
    peak: float = 200_000.0,
    matrix: str | None = None,
) -> Path:
    """Write one synthetic run record; `lag_factor` < 1 makes the scaler under-provision."""
    rng = np.random.default_rng(seed)
    topo = load_topology(query)
    ops = [OperatorProfile(o.name, o.upstream, o.topic, o.capacity * peak / 2.2e6, o.selectivity)
           for o in topo.operators]
    coefs = demand_coefficients(ops)
    n = int(round(duration_s / step_s))
    t = np.arange(n) * step_s
    rate, stages = _rates(pattern, n, step_s, rng, peak)
    events = EventLog()
    events.add(0.0, EventKind.PHASE, "start", duration_s=duration_s)
    for s in stages:
        events.add(s["start_s"], EventKind.PHASE, f"{s['name']} start", stage=s["name"],
                   start=s["start_s"], end=s["end_s"])
    par = {o.name: np.ones(n) for o in ops}
    rescaled = np.zeros(n, dtype=bool)  # steps of a rescale's downtime: nothing measured there
    current = {o.name: 1 for o in ops}
    next_ok = 0.0
    period = 15.0
    for i in range(0, n, int(period // step_s)):
        if t[i] < next_ok:
            continue
        want = {op: max(1, math.ceil(rate[i] * c * lag_factor)) for op, c in coefs.items()}
        if want != current:
            events.add(t[i], EventKind.ACTION, "synthetic", autoscaler=autoscaler,
                       before=dict(current), after=dict(want))
            current = want
            next_ok = t[i] + cooldown_s
            rescaled[i] = True
        for op in par:
            par[op][i:] = current[op]
    for k in range(faults):
        events.add(float(t[n // 2 + k]), EventKind.FAULT, "crash during rescale", crash=True)
    events.add(float(t[n // 3]), EventKind.DECISION_SKIPPED, "no decision: job metrics not measured: input_rate")
    events.add(float(t[-1]), EventKind.PHASE, "end")
    capacity = np.min(np.stack([par[o.name] / coefs[o.name] for o in ops if coefs[o.name] > 0]), axis=0)
    throughput = np.empty(n)
    lag = np.empty(n)
    backlog = 0.0
    for i in range(n):
        avail = backlog + rate[i] * step_s
        done = min(avail, capacity[i] * step_s)
        backlog = avail - done
        throughput[i] = done / step_s
        lag[i] = backlog
    latency = np.where(rescaled, np.nan, 0.05 + lag / np.maximum(throughput, 1.0))
    e2e = latency + 0.02
    skipped = np.cumsum(np.maximum(0.0, lag - rate * 10.0) * 0.001)  # the generator gives up far behind
    tm = sum(par.values())
    cpu = np.where(rescaled, np.nan, np.clip(rate / np.maximum(capacity, 1.0), 0, 1) * 0.9)
    frames = [
        pd.DataFrame({"ts": t, "metric": m, "value": v})
        for m, v in ((Metric.INPUT_RATE, rate), (Metric.THROUGHPUT, throughput), (Metric.LAG, lag),
                     (Metric.LATENCY_KAFKA, latency), (Metric.LATENCY_E2E_MEAN, e2e),
                     (Metric.LATENCY_E2E_P50, e2e * 0.9), (Metric.LATENCY_E2E_P95, e2e * 1.5),
                     (Metric.LATENCY_E2E_MAX, e2e * 2.0), (Metric.SKIPPED_TOTAL, skipped),
                     (Metric.EXPIRED_TOTAL, np.zeros(n)), (Metric.TASKMANAGERS, tm), (Metric.CPU, cpu))
    ]
    demand = {o.name: c * o.capacity for o, c in zip(ops, coefs.values(), strict=True)}
    for o in ops:
        frames.append(pd.DataFrame({"ts": t, "metric": Metric.PARALLELISM, "operator": o.name, "value": par[o.name]}))
        rin = throughput * demand[o.name]
        frames.append(pd.DataFrame({"ts": t, "metric": Metric.RECORDS_IN, "operator": o.name, "value": rin}))
        busy = np.clip(1000 * rin / (par[o.name] * o.capacity), 0, 1000)
        frames.append(pd.DataFrame({"ts": t, "metric": Metric.BUSY, "operator": o.name, "value": busy}))
    ts_df = pd.concat(frames, ignore_index=True)
    config = {
        # the cell's name (no repetition suffix): repetitions of a cell share its config identity
        "name": f"{matrix or 'synthetic'}_{run_dir.name.rsplit('-r', 1)[0]}", "backend": "sim", "query": query,
        "pattern": {"name": pattern, "params": {}, "scale": 1.0, "time_scale": 1.0},
        "autoscaler": {"name": autoscaler, "params": params or {}},
        "loop": {"period_s": period, "metrics_window_s": 15.0, "cooldown_s": cooldown_s, "warmup_s": 0.0},
        "scale_manager": {"min_parallelism": 1, "max_taskmanagers": 80},
        "slo": {"latency_s": 5.0, "throughput_ratio": 0.95}, "seed": seed,
    }
    run_yaml = {
        "run_id": run_dir.name, "experiment": config["name"], "status": "completed", "duration_s": duration_s,
        "seed": seed, "repetition": repetition, "config": config,
        "identity": {"config_hash": config_hash(config)},
        "topology": {"query": query, "operators": [
            {"name": o.name, "upstream": list(o.upstream), "topic": o.topic, "capacity": o.capacity,
             "selectivity": o.selectivity} for o in ops]},
        "pattern": {"stages": stages, "max_rate": float(rate.max()), "records": float(rate.sum() * step_s)},
        "backend": {"synthetic": True},
    }
    return write_run_record(run_dir, run_yaml, ts_df, events, STATUS_COMPLETED)


def synthetic_matrix(results_dir: Path, *, autoscalers: dict[str, float] | None = None,
                     queries: tuple[str, ...] = ("q1",), patterns: tuple[str, ...] = ("cosine",),
                     repetitions: int = 3, duration_s: float = 8400.0, step_s: float = 5.0,
                     matrix: str = "synthetic") -> list[Path]:
    """A small matrix: autoscaler (name -> lag_factor) x query x pattern x repetitions."""
    autoscalers = autoscalers or {"ds2": 1.0, "dhalion": 0.8, "hpa-cpu": 1.3}
    out = []
    seed = 1
    for query in queries:
        for pattern in patterns:
            for name, factor in autoscalers.items():
                for rep in range(repetitions):
                    cell = f"{query}_{pattern}_{name}"
                    out.append(synthetic_run(
                        Path(results_dir) / matrix / f"{cell}-r{rep}", autoscaler=name, query=query,
                        pattern=pattern, seed=seed, repetition=rep, duration_s=duration_s, step_s=step_s,
                        lag_factor=factor * (1 + 0.05 * rep), faults=int(name == "dhalion" and rep == 0),
                        matrix=matrix))
                    seed += 1
    return out
