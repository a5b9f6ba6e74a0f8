"""The CPU readings of the local and the sim runs of one cell side by side, by how loaded a subtask was (pure).

HPA-CPU decides from the CPU reading (CPU time / the task manager's quota) alone, so where the sim's reading of
an operator at a given load parts from the local one, HPA-CPU's cells part too. Per operator, each CPU reading is
set beside the operator's records per subtask over the same span (the time since the run's previous CPU reading:
15 s locally, where the loop reads it, 5 s on the sim), over the sim's calibrated capacity per subtask; the
readings are banded by that load, apart at one subtask and at two or more (a scaled-out task manager carries a
part of the operator). A span with a rate sample missing has no load (unknown, not 0). Readings at a CPU share
other than 1, or within `AFTER_RESTART_S` of a (re)start, are left out, as for the busy readings. Each run's band
mean counts where it has `MIN_SECONDS` of readings, and a side's figure is the mean over its runs' band means (a
repetition that stayed longer in a band does not outweigh the others). It only reports: nothing feeds the model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.fidelity.readings import AFTER_RESTART_S, capacities, in_force, operators, since_restart, span_means
from harness.vocabulary import Metric

BANDS = (0.0, 0.25, 0.5, 0.75, 1.0, math.inf)  # records per subtask / capacity per subtask (1+: a backlog read)
MIN_SECONDS = 45.0  # a run's band mean counts with at least this much reading time in the band


@dataclass(frozen=True)
class BandMeans:
    """One side's figure per band: the mean over its runs' band means (NaN: no run had MIN_SECONDS there)."""

    mean: tuple[float, ...]
    seconds: tuple[float, ...]  # reading time in the band, over all runs
    runs: tuple[int, ...]  # runs whose band mean counts


@dataclass(frozen=True)
class CpuRow:
    cell: str
    operator: str
    scaled_out: bool  # two or more subtasks (False: one)
    local: BandMeans
    sim: BandMeans  # over the sim's repetitions


def band_readings(rec: Any, operator: str, source: bool, capacity: float) -> pd.DataFrame:
    """One run's CPU readings of `operator` (the mean over its task managers) with the band of its load per
    subtask over the reading's span, whether it ran scaled out, and the span. Columns: band, scaled_out, cpu,
    seconds."""
    empty = pd.DataFrame({"band": pd.Series(dtype=int), "scaled_out": pd.Series(dtype=bool),
                          "cpu": pd.Series(dtype=float), "seconds": pd.Series(dtype=float)})
    ts = rec.timeseries
    agg = ts[(ts.subtask == -1) & (ts.operator == operator)]
    rate_metric = str(Metric.RECORDS_OUT if source else Metric.RECORDS_IN)

    def series(metric: str) -> pd.Series:
        s = agg[agg.metric == metric]
        return pd.Series(s.value.to_numpy(dtype=float), index=s.ts.to_numpy(dtype=float)).sort_index()

    cpu, rate, par = series(str(Metric.CPU)), series(rate_metric), series(str(Metric.PARALLELISM))
    share = series(str(Metric.CPU_SHARE))
    if cpu.empty or rate.empty or par.empty or capacity <= 0:
        return empty
    t = cpu.index.to_numpy()
    span = float(np.median(np.diff(t))) if len(t) > 1 else 5.0
    per_sub = span_means(rate, t, span)  # a gap in the span: its load is unknown
    p = in_force(par.dropna(), t, math.nan)
    sh = in_force(share.dropna(), t, 1.0)  # no share recorded: the full quota, as the busy readings take it
    since = since_restart(rec, t)
    load = per_sub / p / capacity
    cv = cpu.to_numpy()
    keep = np.isfinite(load) & np.isfinite(cv) & (sh == 1.0) & (since >= AFTER_RESTART_S)
    band = np.searchsorted(np.asarray(BANDS[1:-1]), load[keep], side="right")
    return pd.DataFrame({"band": band, "scaled_out": p[keep] > 1, "cpu": cv[keep],
                         "seconds": np.full(int(keep.sum()), span)})


def _band_means(runs: Sequence[pd.DataFrame], scaled_out: bool) -> BandMeans:
    means, seconds, counted = [], [], []
    for b in range(len(BANDS) - 1):
        per_run = [r[(r.scaled_out == scaled_out) & (r.band == b)] for r in runs]
        ok = [x.cpu.mean() for x in per_run if x.seconds.sum() >= MIN_SECONDS]
        means.append(float(np.mean(ok)) if ok else math.nan)
        seconds.append(float(sum(x.seconds.sum() for x in per_run)))
        counted.append(len(ok))
    return BandMeans(tuple(means), tuple(seconds), tuple(counted))


def cpu_rows(cells: Mapping[str, tuple[Sequence[Any], Sequence[Any]]]) -> list[CpuRow]:
    """Per cell (its local and sim records), operator and one vs several subtasks: both sides' CPU readings by
    load band. A row with no band that both sides read is left out, and so is an operator whose sim records hold
    no calibrated capacity (records from before it was recorded): there is no load to band by."""
    out: list[CpuRow] = []
    for cell_id, (local, sims) in cells.items():
        if not local or not sims:
            continue
        caps = capacities(sims[0])
        for name, source, _ in operators(sims[0]):
            if name not in caps:
                continue
            loc = [band_readings(r, name, source, caps[name]) for r in local]
            sim = [band_readings(r, name, source, caps[name]) for r in sims]
            for scaled_out in (False, True):
                lm, sm = _band_means(loc, scaled_out), _band_means(sim, scaled_out)
                if all(math.isnan(a) or math.isnan(b) for a, b in zip(lm.mean, sm.mean, strict=True)):
                    continue
                out.append(CpuRow(cell_id, name, scaled_out, lm, sm))
    return out


def _band_label(i: int) -> str:
    lo, hi = BANDS[i], BANDS[i + 1]
    return f"load {lo:.2f}+" if math.isinf(hi) else f"load {lo:.2f}-{hi:.2f}"


def cpu_table(rows: Sequence[CpuRow]) -> tuple[list[str], list[list[str]]]:
    """The report's table: per band 'local (its reading time) / sim (its runs counted)'; n/a where no run had
    enough reading time there, never 0."""
    head = ["cell", "operator", "subtasks", *(_band_label(i) for i in range(len(BANDS) - 1))]

    def side(m: float, detail: str) -> str:
        return "n/a" if math.isnan(m) else f"{m:.2f} ({detail})"

    body = [[r.cell, r.operator, "2+" if r.scaled_out else "1",
             *(f"{side(r.local.mean[i], f'{r.local.seconds[i]:.0f} s')} / {side(r.sim.mean[i], str(r.sim.runs[i]))}"
               for i in range(len(BANDS) - 1))] for r in rows]
    return head, body
