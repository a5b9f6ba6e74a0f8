"""The CPU readings of the local and the sim runs of one cell side by side, by how loaded a subtask was (pure).

HPA-CPU decides from the CPU reading (CPU time / the task manager's quota) alone, so where the sim's reading of
an operator at a given load parts from the local one, HPA-CPU's cells part too (q11's source at 0.1 CPU: 0.71-0.76
on the sim at 5-8k records/s per subtask, 0.60-0.66 locally at 3-11k). Both sides are read the same way: per
operator, its records per subtask over the sim's calibrated capacity per subtask, banded, and the mean reading in
each band, split at one subtask and two or more (a scaled-out task manager carries a part of the operator).
Readings at a CPU share other than 1, or within `AFTER_RESTART_S` of a (re)start, are left out, as for the busy
readings. It only reports: nothing here feeds the model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness.fidelity.machines import sim_costs
from harness.fidelity.readings import AFTER_RESTART_S, restarts
from harness.vocabulary import Metric

BANDS = (0.0, 0.25, 0.5, 0.75, math.inf)  # records per subtask / capacity per subtask
MIN_READINGS = 3  # fewer readings in a band on either side: no mean shown


@dataclass(frozen=True)
class CpuRow:
    cell: str
    operator: str
    scaled_out: bool  # two or more subtasks (False: one)
    local: tuple[float, ...]  # mean CPU reading per band; NaN: fewer than MIN_READINGS there
    sim: tuple[float, ...]  # the same over the sim's repetitions pooled


def band_readings(rec: Any, operator: str, source: bool, capacity: float) -> pd.DataFrame:
    """One run's CPU readings of `operator` (the mean over its task managers) with the band of its load per
    subtask and whether it ran scaled out. Columns: band (index into BANDS), scaled_out, cpu."""
    ts = rec.timeseries
    agg = ts[(ts.subtask == -1) & (ts.operator == operator)]
    wide = agg.pivot_table(index="ts", columns="metric", values="value", aggfunc="mean").sort_index()
    rate_col = str(Metric.RECORDS_OUT if source else Metric.RECORDS_IN)
    empty = pd.DataFrame({"band": pd.Series(dtype=int), "scaled_out": pd.Series(dtype=bool),
                          "cpu": pd.Series(dtype=float)})
    if any(c not in wide for c in (str(Metric.CPU), rate_col, str(Metric.PARALLELISM))) or capacity <= 0:
        return empty
    par = wide[str(Metric.PARALLELISM)].ffill()
    share = wide[str(Metric.CPU_SHARE)].ffill() if str(Metric.CPU_SHARE) in wide else pd.Series(1.0, wide.index)
    t = np.asarray(wide.index, dtype=float)
    starts = restarts(rec)
    since = t - starts[np.clip(np.searchsorted(starts, t, side="right") - 1, 0, None)]
    # locally the CPU is read at each loop (every 15 s), the rates every scrape: the latest rate at a CPU reading
    load = (wide[rate_col].ffill() / par / capacity).to_numpy(dtype=float)
    cpu = wide[str(Metric.CPU)].to_numpy(dtype=float)
    keep = (np.isfinite(load) & np.isfinite(cpu) & par.notna().to_numpy() & (share.fillna(1.0) == 1.0).to_numpy()
            & (since >= AFTER_RESTART_S))
    band = np.searchsorted(np.asarray(BANDS[1:-1]), load[keep], side="right")
    return pd.DataFrame({"band": band, "scaled_out": (par.to_numpy()[keep] > 1), "cpu": cpu[keep]})


def _means(frames: Sequence[pd.DataFrame], scaled_out: bool) -> tuple[float, ...]:
    """Mean reading per band over the runs' readings pooled."""
    both = pd.concat(frames)
    mine = both[both.scaled_out == scaled_out]
    xs = [mine.cpu[mine.band == b] for b in range(len(BANDS) - 1)]
    return tuple(float(x.mean()) if len(x) >= MIN_READINGS else math.nan for x in xs)


def cpu_rows(cells: Mapping[str, tuple[Sequence[Any], Sequence[Any]]]) -> list[CpuRow]:
    """Per cell (its local and sim records), operator and one vs several subtasks: both sides' CPU readings by
    load band. Rows where neither side has a band with enough readings are left out."""
    out: list[CpuRow] = []
    for cell_id, (local, sims) in cells.items():
        if not local or not sims:
            continue
        caps = {k: float(v) for k, v in (sim_costs(sims[0]).get("capacity_per_subtask") or {}).items()}
        for spec in (sims[0].meta.get("topology") or {}).get("operators", []):
            name, source = str(spec["name"]), not spec.get("upstream")  # a source has no upstream
            if name not in caps:
                continue
            loc = [band_readings(r, name, source, caps[name]) for r in local]
            sim = [band_readings(r, name, source, caps[name]) for r in sims]
            for scaled_out in (False, True):
                lm, sm = _means(loc, scaled_out), _means(sim, scaled_out)
                if all(math.isnan(a) or math.isnan(b) for a, b in zip(lm, sm, strict=True)):
                    continue
                out.append(CpuRow(cell_id, name, scaled_out, lm, sm))
    return out


def cpu_table(rows: Sequence[CpuRow]) -> tuple[list[str], list[list[str]]]:
    """The report's table: per band 'local / sim' (n/a: too few readings on that side, never 0)."""
    def band(i: int) -> str:
        lo, hi = BANDS[i], BANDS[i + 1]
        return f"load {lo:.2f}+" if math.isinf(hi) else f"load {lo:.2f}-{hi:.2f}"

    head = ["cell", "operator", "subtasks", *(band(i) + " local / sim" for i in range(len(BANDS) - 1))]

    def f(v: float) -> str:
        return "n/a" if math.isnan(v) else f"{v:.2f}"

    body = [[r.cell, r.operator, "2+" if r.scaled_out else "1",
             *(f"{f(a)} / {f(b)}" for a, b in zip(r.local, r.sim, strict=True))] for r in rows]
    return head, body
