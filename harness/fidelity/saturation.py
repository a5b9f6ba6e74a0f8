"""What an operator took per subtask where it was at its limit, in the local and the sim runs, against the
calibrated capacity the sim runs with (pure).

How fast a backlog drains, and so the latencies, follows from what the bottleneck takes at its limit. Where the
local runs' operators take less there than the profile says, the sim drains sooner than the real stack and its
latencies come out lower, whatever the autoscaler did. An operator is at its limit over a CPU reading's span
(the time since the run's previous CPU reading: 15 s locally, 5 s on the sim) when all of these hold:
- its CPU reading is at least `SATURATED_CPU` of what it read saturated in its calibration (the profile's
  saturated fraction of the quota, which the sim's CPU tops out at: the CPU controller held it to its quota);
- it was not itself held back: backpressured under `HELD_BACK` of the span;
- records waited at its input: an upstream operator was backpressured `HELD_BACK` or more of the span, or,
  for a source, records waited in Kafka `WAITED_S` or more (the job's Kafka latency; with two sources that
  is the job's, not the one source's).
Its rate is the mean of its records (a source's sent, any other's received) per subtask over the span; a span
with a sample missing is unknown and left out, not 0. Spans within `AFTER_RESTART_S` of a (re)start, or at a
CPU share other than 1, are left out, as for the busy and CPU readings. Both sides are pooled per query and
operator over all the cells' runs (the profile is the query's): the figure is the median over the spans, with
the quartiles. Spans are kept apart by how the operator took its input then (`InputLayout`): a subtask fed over
several channels (by key or round-robin from 2+ upstream subtasks) runs at the fraction the calibration measured
there (`calibrated_profile.FedScaledOut`), so each layout is set against the capacity the sim runs it at in that
layout. The same spans, as a share of that capacity, are also set out by the time since the job's latest
(re)start (`age_rows`): a task manager that keeps running may speed up for minutes past the warm-up the profile
measured (q1's map, session 26: 44-48k records/s 20-60 s in, 51-52k 240-300 s in) or slow down under a long
overload (q11's window, session 27), and the sim's task managers follow only the measured warm-up; the time since
the (re)start is the youngest task manager's age at most (a rescale keeps the running ones). It only reports:
nothing here feeds the model (model, don't tune).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from harness.calibrated_profile import HELD_BACK
from harness.fidelity.machines import sim_costs
from harness.fidelity.readings import AFTER_RESTART_S, capacities, in_force, operators, since_restart, span_means
from harness.topology import fed_by_several_channels
from harness.vocabulary import Metric

SATURATED_CPU = 0.95  # a CPU reading this close to the saturated one: the controller held the operator to it
WAITED_S = 5.0  # records that waited this long in Kafka: a backlog at the sources' input


class InputLayout(StrEnum):
    """How an operator's subtasks took their input over a span."""

    SOURCE = "a source's partitions"
    ONE_CHANNEL = "one channel per subtask"  # one upstream subtask, or forward pairs
    SEVERAL_CHANNELS = "several channels per subtask"  # by key or round-robin from 2+ upstream subtasks
    UNKNOWN = "unknown"  # an upstream's parallelism unread, or a record from before the keyed flag was kept


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
    layout: InputLayout
    capacity: float  # the calibrated capacity per subtask at CPU share 1
    sim_capacity: float  # the one the sim runs the operator at in this layout (the fed fraction applied)
    local: Spread
    sim: Spread


def at_limit(rec: Any, operator: str, source: bool, upstream: Sequence[str],
             keyed: bool | None = False, cpu_saturated: float = 1.0) -> pd.DataFrame:
    """One run's spans where `operator` was at its limit: columns rate (records per subtask, the span's mean),
    seconds (the span), layout (its `InputLayout` then; `keyed` None: not recorded) and since (seconds from the
    job's latest (re)start to the span's end). `cpu_saturated`: the share of its quota its CPU reached saturated
    in the calibration."""
    empty = pd.DataFrame({"rate": pd.Series(dtype=float), "seconds": pd.Series(dtype=float),
                          "layout": pd.Series(dtype=str), "since": pd.Series(dtype=float)})
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
    keep = ((cpu.to_numpy() >= SATURATED_CPU * cpu_saturated) & (sh == 1.0) & (since >= AFTER_RESTART_S) & (p >= 1)
            & (own < HELD_BACK) & queued & np.isfinite(took))  # own NaN: unknown, left out
    up_par = [in_force(series(Metric.PARALLELISM, up).dropna(), t, math.nan) for up in upstream]
    rows = [(took[i] / p[i], span, str(_layout(source, keyed, int(p[i]), [u[i] for u in up_par])), float(since[i]))
            for i in np.flatnonzero(keep)]
    return pd.DataFrame(rows, columns=["rate", "seconds", "layout", "since"]) if rows else empty


def _layout(source: bool, keyed: bool | None, parallelism: int, upstream: Sequence[float]) -> InputLayout:
    if source:
        return InputLayout.SOURCE
    if not upstream or any(not math.isfinite(u) for u in upstream):
        return InputLayout.UNKNOWN
    ups = [int(u) for u in upstream]
    answers = {fed_by_several_channels(k, parallelism, ups) for k in ((True, False) if keyed is None else (keyed,))}
    if len(answers) > 1:  # keyed or forward decides it, and the record does not say which
        return InputLayout.UNKNOWN
    return InputLayout.SEVERAL_CHANNELS if answers.pop() else InputLayout.ONE_CHANNEL


def _spread(runs: Sequence[pd.DataFrame], column: str = "rate") -> Spread:
    spans = pd.concat([r for r in runs if len(r)]) if any(len(r) for r in runs) else None
    if spans is None:
        return Spread(math.nan, math.nan, math.nan, 0.0, 0)
    q25, med, q75 = np.percentile(spans[column].to_numpy(), [25, 50, 75])
    return Spread(float(med), float(q25), float(q75), float(spans.seconds.sum()), sum(1 for r in runs if len(r)))


def _keyed(sim: Any) -> dict[str, bool | None]:
    """Each operator's keyed flag as the record keeps it (None: a record from before it was kept)."""
    specs = (sim.meta.get("topology") or {}).get("operators", [])
    return {str(sp["name"]): (bool(sp["keyed"]) if "keyed" in sp else None) for sp in specs}


@dataclass
class Pooled:
    """One query's operator over all its cells: the calibrated capacity, the fed fraction, both sides' spans at
    the limit (`at_limit`, one frame per run)."""

    capacity: float
    fed_fraction: float
    local: list[pd.DataFrame]
    sim: list[pd.DataFrame]

    def capacity_in(self, layout: InputLayout) -> float:
        """The capacity the sim runs the operator at in `layout`."""
        return self.capacity * self.fed_fraction if layout is InputLayout.SEVERAL_CHANNELS else self.capacity


def pool(cells: Mapping[str, tuple[Sequence[Any], Sequence[Any]]]) -> dict[tuple[str, str], Pooled]:
    """Per query and operator (pooled over its cells' local and sim records): each run's spans at the limit, read
    once for both tables (`saturation_rows`, `age_rows`). An operator whose sim records hold no calibrated capacity
    is left out."""
    pooled: dict[tuple[str, str], Pooled] = {}
    for local, sims in cells.values():
        if not local or not sims:
            continue
        query = str((sims[0].meta.get("topology") or {}).get("query", "?"))
        caps = capacities(sims[0])
        fed = sim_costs(sims[0]).get("fed_scaled_out") or {}  # absent in records from before it was modelled
        keyed = _keyed(sims[0])
        saturated = sim_costs(sims[0]).get("cpu_saturated") or {}  # absent in older records: the whole quota
        for name, source, ups in operators(sims[0]):
            if name not in caps:
                continue
            one = pooled.setdefault((query, name), Pooled(caps[name], float(fed.get(name, 1.0)), [], []))
            args = (name, source, ups, keyed.get(name), float(saturated.get(name, 1.0)))
            one.local += [at_limit(r, *args) for r in local]
            one.sim += [at_limit(r, *args) for r in sims]
    return pooled


def saturation_rows(pooled: Mapping[tuple[str, str], Pooled]) -> list[SaturationRow]:
    """Per query, operator and input layout (`pool`): both sides' records per subtask at the limit against the
    capacity the sim runs the operator at in that layout. A layout neither side was seen at its limit in has no
    row."""
    out = []
    for (query, name), one in pooled.items():
        for layout in InputLayout:
            lo = _spread([r[r.layout == str(layout)] for r in one.local])
            si = _spread([r[r.layout == str(layout)] for r in one.sim])
            if lo.runs or si.runs:
                out.append(SaturationRow(query, name, layout, one.capacity, one.capacity_in(layout), lo, si))
    return out


AGE_BANDS = (AFTER_RESTART_S, 60.0, 120.0, 240.0, math.inf)  # seconds since the job's latest (re)start
_BANDS = tuple(zip(AGE_BANDS[:-1], AGE_BANDS[1:], strict=True))  # each band's [from, to)


@dataclass(frozen=True)
class AgeRow:
    """One operator's rate at its limit as a share of the sim's capacity in its input layout, per `AGE_BANDS`
    band of the time since the job's latest (re)start (spans of an unknown layout left out)."""

    query: str
    operator: str
    local: tuple[Spread, ...]
    sim: tuple[Spread, ...]


def age_rows(pooled: Mapping[tuple[str, str], Pooled]) -> list[AgeRow]:
    """Per query and operator (`pool`) seen at its limit on either side: both sides' shares of the sim's capacity
    by the time since the (re)start, so a speed-up with the task managers' age shows as a rising local row."""

    def shares(runs: Sequence[pd.DataFrame], capacity_in: Callable[[InputLayout], float], lo: float,
               hi: float) -> list[pd.DataFrame]:
        out = []
        for r in runs:
            r = r[(r.since >= lo) & (r.since < hi) & (r.layout != str(InputLayout.UNKNOWN))]
            out.append(r.assign(share=r.rate / [capacity_in(InputLayout(x)) for x in r.layout]))
        return out

    out = []
    for (query, name), one in pooled.items():
        lo = tuple(_spread(shares(one.local, one.capacity_in, a, b), "share") for a, b in _BANDS)
        si = tuple(_spread(shares(one.sim, one.capacity_in, a, b), "share") for a, b in _BANDS)
        if any(s.runs for s in lo + si):
            out.append(AgeRow(query, name, lo, si))
    return out


def age_table(rows: Sequence[AgeRow]) -> tuple[list[str], list[list[str]]]:
    """The report's table: per band, local / sim median share of the sim's capacity (their time at the limit);
    n/a where a side was never at its limit in the band, never 0."""
    def band(a: float, b: float) -> str:
        return f"{a:.0f} s and later" if math.isinf(b) else f"{a:.0f}-{b:.0f} s"

    def share(s: Spread) -> str:
        return "n/a" if math.isnan(s.median) else f"{s.median:.2f}"

    head = ["query", "operator"] + [band(a, b) for a, b in _BANDS]
    body = [[r.query, r.operator] + [f"{share(lo)} / {share(si)} ({lo.seconds:.0f} s / {si.seconds:.0f} s)"
                                     for lo, si in zip(r.local, r.sim, strict=True)] for r in rows]
    return head, body


def saturation_table(rows: Sequence[SaturationRow]) -> tuple[list[str], list[list[str]]]:
    """The report's table: n/a where a side was never seen at the limit, never 0."""
    head = ["query", "operator", "input", "calibrated capacity per subtask", "the sim's capacity in this layout",
            "local at its limit: median (quartiles)", "local time at the limit (runs)", "local / the sim's",
            "sim at its limit: median (time)"]

    def rate(s: Spread) -> str:
        return "n/a" if math.isnan(s.median) else f"{s.median:,.0f} ({s.q25:,.0f}-{s.q75:,.0f})"

    body = [[r.query, r.operator, str(r.layout), f"{r.capacity:,.0f}", f"{r.sim_capacity:,.0f}", rate(r.local),
             f"{r.local.seconds:.0f} s ({r.local.runs})",
             "n/a" if math.isnan(r.local.median) else f"{r.local.median / r.sim_capacity:.2f}",
             "n/a" if math.isnan(r.sim.median) else f"{r.sim.median:,.0f} ({r.sim.seconds:.0f} s)"]
            for r in rows]
    return head, body
