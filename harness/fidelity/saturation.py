"""What an operator took per subtask where it was at its limit, in the local and the sim runs, against the
calibrated capacity the sim runs with (pure).

How fast a backlog drains, and so the latencies, follows from what the bottleneck takes at its limit. Where the
local runs' operators take less there than the profile says, the sim drains sooner than the real stack and its
latencies come out lower, whatever the autoscaler did. An operator is at its limit over a CPU reading's span
(the time since the run's previous CPU reading: 15 s locally, 5 s on the sim) when all of these hold:
- its CPU reading is at least `SATURATED_CPU` of the quota (the CPU controller held it to its quota);
- it was not itself held back: backpressured under `HELD_BACK` of the span;
- records waited at its input: an upstream operator was backpressured `HELD_BACK` or more of the span, or,
  for a source, records waited in Kafka `WAITED_S` or more (the job's Kafka latency; with two sources that
  is the job's, not the one source's).
Its rate is the mean of its records (a source's sent, any other's received) per subtask over the span; a span
with a sample missing is unknown and left out, not 0. Spans within `AFTER_RESTART_S` of a (re)start, or at a
CPU share other than 1, are left out, as for the busy and CPU readings. Both sides are pooled per query and
operator over all the cells' runs (the profile is the query's): the figure is the median over the spans, with
the quartiles. Beside the capacity stands the one the sim runs the operator at where an operator feeding it runs
scaled out (`calibrated_profile.FedScaledOut`), where calibrated. It only reports: nothing here feeds the model
(model, don't tune).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.calibrated_profile import HELD_BACK
from harness.fidelity.machines import sim_costs
from harness.fidelity.readings import AFTER_RESTART_S, capacities, in_force, operators, since_restart, span_means
from harness.vocabulary import Metric

SATURATED_CPU = 0.95  # a CPU reading this close to the quota: the controller held the operator to it
WAITED_S = 5.0  # records that waited this long in Kafka: a backlog at the sources' input


@dataclass(frozen=True)
class Spread:
    """Records per subtask over the spans at the limit: median and quartiles (NaN: no span)."""

    median: float
    q25: float
    q75: float
    seconds: float  # the spans' time at the limit, over all runs
    runs: int  # runs with at least one span there


@dataclass(frozen=True)
class SaturationRow:
    query: str
    operator: str
    capacity: float  # the calibrated capacity per subtask at CPU share 1 the sim ran with
    fed_capacity: float | None  # the same where a feeding operator runs scaled out (None: not calibrated apart)
    local: Spread
    sim: Spread


def at_limit(rec: Any, operator: str, source: bool, upstream: Sequence[str]) -> pd.DataFrame:
    """One run's spans where `operator` was at its limit: columns rate (records per subtask, the span's mean)
    and seconds (the span)."""
    empty = pd.DataFrame({"rate": pd.Series(dtype=float), "seconds": pd.Series(dtype=float)})
    ts = rec.timeseries
    agg = ts[ts.subtask == -1]

    def series(metric: Metric, op: str) -> pd.Series:
        s = agg[(agg.metric == str(metric)) & (agg.operator == op)]
        out = pd.Series(s.value.to_numpy(dtype=float), index=s.ts.to_numpy(dtype=float)).sort_index()
        return out[~out.index.duplicated(keep="last")]

    cpu = series(Metric.CPU, operator)
    rate = series(Metric.RECORDS_OUT if source else Metric.RECORDS_IN, operator)
    par, share = series(Metric.PARALLELISM, operator), series(Metric.CPU_SHARE, operator)
    own_bp = series(Metric.BACKPRESSURED, operator)
    waiting = series(Metric.LATENCY_KAFKA, "") if source else None
    held = [series(Metric.BACKPRESSURED, up) for up in upstream]
    if cpu.empty or rate.empty or par.empty or (not source and not held):
        return empty
    t = cpu.index.to_numpy()
    span = float(np.median(np.diff(t))) if len(t) > 1 else 5.0
    p = in_force(par.dropna(), t, math.nan)
    sh = in_force(share.dropna(), t, 1.0)  # no share recorded: the full quota
    since = since_restart(rec, t)
    own = span_means(own_bp, t, span) / 1000.0
    took = span_means(rate, t, span)
    if waiting is not None:
        queued = span_means(waiting, t, span) >= WAITED_S
    else:  # any upstream held back (a join has two): one with a reading missing hides no other
        ups = np.array([span_means(h, t, span) for h in held]) / 1000.0
        queued = np.asarray((np.nan_to_num(ups, nan=0.0) >= HELD_BACK).any(axis=0), dtype=bool)
    keep = ((cpu.to_numpy() >= SATURATED_CPU) & (sh == 1.0) & (since >= AFTER_RESTART_S) & (p >= 1)
            & (own < HELD_BACK) & queued & np.isfinite(took))  # own NaN: unknown, left out
    rows = [(took[i] / p[i], span) for i in np.flatnonzero(keep)]
    return pd.DataFrame(rows, columns=["rate", "seconds"]) if rows else empty


def _spread(runs: Sequence[pd.DataFrame]) -> Spread:
    spans = pd.concat([r for r in runs if len(r)]) if any(len(r) for r in runs) else None
    if spans is None:
        return Spread(math.nan, math.nan, math.nan, 0.0, 0)
    q25, med, q75 = np.percentile(spans.rate.to_numpy(), [25, 50, 75])
    return Spread(float(med), float(q25), float(q75), float(spans.seconds.sum()), sum(1 for r in runs if len(r)))


def saturation_rows(cells: Mapping[str, tuple[Sequence[Any], Sequence[Any]]]) -> list[SaturationRow]:
    """Per query and operator (pooled over its cells' local and sim records): both sides' records per subtask
    at the limit against the calibrated capacity. An operator neither side was seen at its limit has no row, nor
    one whose sim records hold no calibrated capacity."""
    pooled: dict[tuple[str, str], tuple[float, float | None, list[pd.DataFrame], list[pd.DataFrame]]] = {}
    for local, sims in cells.values():
        if not local or not sims:
            continue
        query = str((sims[0].meta.get("topology") or {}).get("query", "?"))
        caps = capacities(sims[0])
        fed = sim_costs(sims[0]).get("fed_scaled_out") or {}  # absent in records from before it was modelled
        for name, source, ups in operators(sims[0]):
            if name not in caps:
                continue
            fed_cap = caps[name] * float(fed[name]) if name in fed else None
            _, _, loc, sim = pooled.setdefault((query, name), (caps[name], fed_cap, [], []))
            loc += [at_limit(r, name, source, ups) for r in local]
            sim += [at_limit(r, name, source, ups) for r in sims]
    out = []
    for (query, name), (cap, fed_cap, loc, sim) in pooled.items():
        lo, si = _spread(loc), _spread(sim)
        if lo.runs or si.runs:
            out.append(SaturationRow(query, name, cap, fed_cap, lo, si))
    return out


def saturation_table(rows: Sequence[SaturationRow]) -> tuple[list[str], list[list[str]]]:
    """The report's table: n/a where a side was never seen at the limit, never 0."""
    head = ["query", "operator", "calibrated capacity per subtask", "fed by a scaled-out operator",
            "local at its limit: median (quartiles)", "local time at the limit (runs)", "local / calibrated",
            "sim at its limit: median (time)"]

    def rate(s: Spread) -> str:
        return "n/a" if math.isnan(s.median) else f"{s.median:,.0f} ({s.q25:,.0f}-{s.q75:,.0f})"

    body = [[r.query, r.operator, f"{r.capacity:,.0f}",
             "not calibrated apart" if r.fed_capacity is None else f"{r.fed_capacity:,.0f}", rate(r.local),
             f"{r.local.seconds:.0f} s ({r.local.runs})",
             "n/a" if math.isnan(r.local.median) else f"{r.local.median / r.capacity:.2f}",
             "n/a" if math.isnan(r.sim.median) else f"{r.sim.median:,.0f} ({r.sim.seconds:.0f} s)"]
            for r in rows]
    return head, body
