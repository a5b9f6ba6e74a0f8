"""How the local runs' busy readings scatter around the reading model the sim draws from (pure).

DS2 takes a subtask's true rate as its records / its busy time, so the busy reading's error decides its
targets. The sim draws a reading as offset + gain x true utilisation (the line at one subtask, or the
operator's scaled-out line at two or more where calibrated; a subtask that takes all it can: the
calibrated backlogged level, where measured), the utilisation averaged over the gauge's window (Flink's
TimerGauge: the last 60 s, or since the task started), plus its noise (per 5-s interval, averaged over the
same window), plus an error each subtask holds for a whole deployment (harness.calibrated_profile.GaugeModel,
recorded in every sim run's costs). This checks that model against the local runs of the same cells: per cell and
operator, the local readings' mean residual against the model and the spread of their per-deployment means
(each restart of the job begins a deployment; the samples' own noise taken out as if each were independent:
successive readings share most of their window's noise, so this leaves some of it in the spread), beside what the
profile's held error alone makes of such a mean (the local series is the mean over the operator's p subtasks:
held / sqrt(p)). It only reports: nothing here feeds the model (model, don't tune).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from harness import gauge_window
from harness.calibrated_profile import HELD_BACK
from harness.fidelity.machines import sim_costs
from harness.vocabulary import Metric

AFTER_RESTART_S = 30.0  # readings this soon after a rescale are left out: the sim's warm-up model covers them
MIN_SAMPLES = 2  # a deployment with fewer readings left has no mean to compare


@dataclass(frozen=True)
class ReadingsRow:
    cell: str
    operator: str
    samples: int  # busy readings compared (5-s series points of the local run)
    deployments: int  # runs of the job between restarts with at least MIN_SAMPLES of them
    mean_residual: float  # reading - model, over all compared readings (fraction of a second)
    between_sd: float  # sd of the deployments' mean residuals beyond their samples' noise; NaN: under two
    held_sd: float | None  # the profile's held error of one subtask; None: not calibrated
    expected_sd: float | None  # what that makes of a deployment's mean over its subtasks (held / sqrt(p))


def _busy_models(sim: Any) -> dict[str, dict[str, Any]]:
    return sim_costs(sim).get("busy_reading") or {}


def capacities(sim: Any) -> dict[str, float]:
    """A sim record's calibrated capacity per subtask, by operator (absent in records from before it was kept)."""
    return {k: float(v) for k, v in (sim_costs(sim).get("capacity_per_subtask") or {}).items()}


def operators(sim: Any) -> list[tuple[str, bool, list[str]]]:
    """A sim record's operators in topology order: (name, is a source, upstream names); a source has no
    upstream (harness.topology)."""
    specs = (sim.meta.get("topology") or {}).get("operators", [])
    return [(str(sp["name"]), not sp.get("upstream"), [str(u) for u in sp.get("upstream") or ()]) for sp in specs]


def restarts(rec: Any) -> np.ndarray:
    """When the job (re)started, in a local or a sim run: the run's start and every change of any operator's
    parallelism (a rescale restarts the whole job, whichever operator it was for)."""
    ts = rec.timeseries
    par = ts[(ts.metric == str(Metric.PARALLELISM)) & (ts.subtask == -1)]
    times = [0.0]
    for _, g in par.groupby("operator"):
        g = g.sort_values("ts")
        changed = g.value.diff().fillna(0) != 0
        times += g.ts[changed].astype(float).tolist()
    return np.unique(np.asarray(times, dtype=float))


def since_restart(rec: Any, t: np.ndarray) -> np.ndarray:
    """Seconds from the latest (re)start of the job (`restarts`) to each time in `t`."""
    starts = restarts(rec)
    return t - starts[np.clip(np.searchsorted(starts, t, side="right") - 1, 0, None)]


def in_force(s: pd.Series, t: np.ndarray, default: float) -> np.ndarray:
    """The state a series of changes had in force at each time in `t` (before any change: `default`)."""
    s = s[~s.index.duplicated(keep="last")]
    return s.reindex(s.index.union(t)).ffill().reindex(t).fillna(default).to_numpy()


def span_means(s: pd.Series, t: np.ndarray, span: float) -> np.ndarray:
    """The mean of a sampled series over (ti - span, ti] for each ti in `t`; NaN where a sample in it is missing
    or none falls in it (unknown, not 0)."""
    st, sv = s.index.to_numpy(), s.to_numpy(dtype=float)
    out = np.full(len(t), np.nan)
    for i, ti in enumerate(t):
        inside = sv[(st > ti - span) & (st <= ti)]
        if len(inside) and np.isfinite(inside).all():
            out[i] = inside.mean()
    return out


SOURCE_FULL = 0.95  # a source taking this share of its calibrated capacity reads a backlog (rates are noisy)


def modelled_window(sim: Any) -> float:
    """The span a busy reading averages over, as the sim record modelled it (`sim.meter_window_s`; 0 in records
    from before it was modelled: the reading's own update)."""
    value = ((sim.meta.get("config") or {}).get("sim") or {}).get("meter_window_s")
    return float(value) if isinstance(value, int | float) else 0.0


def residuals(local: Any, operator: str, source: bool, capacity: float, offset: float, gain: float,
              starts: np.ndarray, backlogged: float | None = None, upstream: Sequence[str] = (),
              scaled_out: tuple[float, float] | None = None, window_s: float = 0.0) -> pd.DataFrame:
    """The local run's busy readings of `operator` (the mean over its subtasks) against offset + gain x
    utilisation (at two or more subtasks the `scaled_out` (offset, gain) where calibrated), or the `backlogged`
    level (where calibrated) where records waited at its input, told as the
    calibration tells it: a source taking SOURCE_FULL of `capacity` per subtask or more; any other operator
    not itself held back (backpressured under HELD_BACK) with an `upstream` one held back by it. Columns ts,
    residual, deployment (index into `starts`), parallelism. Utilisation is its records per subtask /
    `capacity`, averaged as the gauge averages it (over `window_s` since the latest restart, as the sim does: the
    window's queued share at the backlogged level, the rest on the line); readings at a CPU share other than 1,
    or within AFTER_RESTART_S of a (re)start, are left out."""
    ts = local.timeseries
    agg = ts[ts.subtask == -1]
    wide = agg[agg.operator == operator].pivot_table(index="ts", columns="metric", values="value",
                                                     aggfunc="mean").sort_index()
    rate_col = str(Metric.RECORDS_OUT if source else Metric.RECORDS_IN)
    empty = pd.DataFrame(columns=["ts", "residual", "deployment", "parallelism"])
    if any(c not in wide for c in (str(Metric.BUSY), rate_col, str(Metric.PARALLELISM))) or capacity <= 0:
        return empty
    par = wide[str(Metric.PARALLELISM)].ffill()
    share = wide[str(Metric.CPU_SHARE)].ffill() if str(Metric.CPU_SHARE) in wide else pd.Series(1.0, wide.index)
    t = np.asarray(wide.index, dtype=float)
    deployment = np.searchsorted(starts, t, side="right") - 1  # the latest (re)start at or before each reading
    since = t - starts[np.clip(deployment, 0, None)]
    took = (wide[rate_col] / par / capacity).clip(0.0, 1.0)
    queued = pd.Series(0.0, wide.index)  # 1 queued, 0 not, NaN unknown (a reading missing): never taken for 0
    if backlogged is not None:
        bp = str(Metric.BACKPRESSURED)
        if source:
            queued = (took >= SOURCE_FULL).astype(float).where(took.notna())
        else:
            held = agg[(agg.metric == bp) & agg.operator.isin(list(upstream))].groupby("ts").value.max() / 1000.0
            held = held.reindex(wide.index)
            own = wide[bp] / 1000.0 if bp in wide else pd.Series(np.nan, wide.index)
            queued = ((held >= HELD_BACK) & (own < HELD_BACK)).astype(float).where(held.notna() & own.notna())
    # as the gauge averages (harness.gauge_window, the window the sim modelled): the share of the window with
    # records queued at its input reads the backlogged level, the rest the line at its own utilisation
    q_w = gauge_window.window_means(t, queued.to_numpy(dtype=float), starts, t, window_s)
    free = gauge_window.window_means(t, took.where(queued == 0.0).to_numpy(dtype=float), starts, t, window_s)

    def line(off: float, g: float) -> np.ndarray:
        return np.clip(off + g * free, 0.0, 1.0)

    part = line(offset, gain)
    if scaled_out is not None:
        part = np.where((par > 1).fillna(False).to_numpy(dtype=bool), line(*scaled_out), part)
    model = np.where(q_w >= 1.0, backlogged if backlogged is not None else np.nan,
                     (1.0 - q_w) * part + q_w * (backlogged if backlogged is not None else 0.0))
    resid = wide[str(Metric.BUSY)] / 1000.0 - model
    keep = (resid.notna() & par.notna() & (share.fillna(1.0) == 1.0)).to_numpy() & (since >= AFTER_RESTART_S)
    return pd.DataFrame({"ts": t[keep], "residual": resid.to_numpy()[keep], "deployment": deployment[keep],
                         "parallelism": par.to_numpy()[keep]})


def _spread(per: pd.DataFrame) -> float:
    """sd of the deployments' mean residuals less the part their own samples' noise explains, taken as independent
    (successive readings share their window's noise: what is left of it in a mean is more than var / size)."""
    if len(per) < 2:
        return math.nan
    within = float(np.mean(per["var"].fillna(0.0) / per["size"]))
    return math.sqrt(max(0.0, statistics.variance(per["mean"]) - within))


def readings_rows(cells: Mapping[str, tuple[Sequence[Any], Sequence[Any]]]) -> list[ReadingsRow]:
    """Per cell (its local and sim records) and operator: the local busy readings against the sim's model."""
    out: list[ReadingsRow] = []
    for cell_id, (local, sims) in cells.items():
        if not local or not sims:
            continue
        models, caps = _busy_models(sims[0]), capacities(sims[0])
        if not models:  # exact readings, or a record from before the model was recorded
            continue
        starts = [restarts(rec) for rec in local]
        window_s = modelled_window(sims[0])
        for name, source, ups in operators(sims[0]):
            g = models.get(name)
            if g is None or name not in caps:
                continue
            queued = g.get("backlogged_mean")
            queued_f = float(queued) if isinstance(queued, int | float) and math.isfinite(queued) else None
            wide = g.get("scaled_out")  # absent in records from before it was modelled: the one line throughout
            wide_line = (float(wide["offset"]), float(wide["gain"])) if isinstance(wide, dict) else None
            parts = [residuals(rec, name, source, caps[name], float(g["offset"]), float(g["gain"]), st, queued_f, ups,
                               wide_line, window_s)
                     for rec, st in zip(local, starts, strict=True)]
            # deployments are numbered per run: tell the runs' apart
            frames = [p.assign(deployment=p.deployment.astype(str) + f"/{i}") for i, p in enumerate(parts) if len(p)]
            if not frames:
                continue
            res = pd.concat(frames)
            per = res.groupby("deployment").agg(mean=("residual", "mean"), var=("residual", "var"),
                                                size=("residual", "size"), parallelism=("parallelism", "last"))
            per = per[per["size"] >= MIN_SAMPLES]
            held = g.get("held_sd")
            held_f = float(held) if isinstance(held, int | float) and math.isfinite(held) else None
            expected = held_f * math.sqrt(float(np.mean(1.0 / per["parallelism"]))) \
                if held_f is not None and len(per) else None
            out.append(ReadingsRow(
                cell=cell_id, operator=name, samples=len(res), deployments=len(per),
                mean_residual=float(res.residual.mean()), between_sd=_spread(per), held_sd=held_f,
                expected_sd=expected,
            ))
    return out


def readings_table(rows: Sequence[ReadingsRow]) -> tuple[list[str], list[list[str]]]:
    """The report's table: header and rows (NaN and not calibrated named, never shown as 0)."""
    head = ["cell", "operator", "readings (deployments)", "local mean residual", "local sd between deployments",
            "sim: held sd per subtask", "held alone over p subtasks"]

    def f(v: float | None, sign: bool = False) -> str:
        if v is None:
            return "not calibrated"
        return "n/a" if not math.isfinite(v) else (f"{v:+.3f}" if sign else f"{v:.3f}")

    body = [[r.cell, r.operator, f"{r.samples} ({r.deployments})", f(r.mean_residual, sign=True), f(r.between_sd),
             f(r.held_sd), f(r.expected_sd)] for r in rows]
    return head, body
