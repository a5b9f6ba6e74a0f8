"""Recovery after injected faults: per fault, how long until the job had caught up again.

For a fault injected at t0 that ends at t1 (t0 + for_s, or the backend's own `recovery` event for
that fault if later), the job has recovered at the first lag sample at or after t1 with the job
processing and the Kafka lag back within a tolerance of its level at t0 (10 % of that level, at
least one loop period of the input rate before t0, at least one record). recovery_s = that time -
t0; a fault the job never recovered from before the run ended has recovery_s NaN and
recovered = False - unknown, not zero. The same definition serves every fault kind and backend,
so autoscalers are compared on how fast they bring the job back, not on how the fault was made.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from harness.analysis.aggregate import ci_half_width
from harness.analysis.events import Events
from harness.analysis.loader import RunRef
from harness.vocabulary import EventKind, Metric

FAULT_COLUMNS = ["run_id", "matrix", "cell_id", "config_hash", "autoscaler", "params", "fault_id", "fault_kind",
                 "at_s", "for_s", "end_s", "recovered", "recovery_s"]
SUMMARY_COLUMNS = ["autoscaler", "fault_kind", "faults", "recovered", "recovery_s", "recovery_s_ci",
                   "recovery_s_max"]


def _data(raw: Any) -> dict[str, Any]:
    try:
        out = json.loads(raw) if isinstance(raw, str) and raw else {}
    except json.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}


def _records(events: Events, kind: str) -> list[dict[str, Any]]:
    """The events of one kind as dicts (a frame's rows or the loader's plain rows)."""
    if events is None or len(events) == 0:
        return []
    rows = events.to_dict("records") if isinstance(events, pd.DataFrame) else events
    return [dict(r) for r in rows if r["kind"] == kind]


def injected_faults(events: Events) -> list[dict[str, Any]]:
    """The injection events (one per scheduled fault that was injected)."""
    out = []
    for r in _records(events, EventKind.FAULT):
        d = _data(r.get("data"))
        if d.get("injected") and "fault_id" in d and str(r.get("reason") or "").startswith("injected fault"):
            out.append({"ts": float(r["ts"]), **d})
    return sorted(out, key=lambda f: f["ts"])


def _backend_recoveries(events: Events) -> dict[int, float]:
    out: dict[int, float] = {}
    for r in _records(events, EventKind.RECOVERY):
        d = _data(r.get("data"))
        if "fault_id" in d:
            out[int(d["fault_id"])] = max(out.get(int(d["fault_id"]), -math.inf), float(r["ts"]))
    return out


def _series(df: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray]:
    sel = df[(df["metric"] == metric) & (df["operator"] == "") & (df["subtask"] == -1)].sort_values("ts")
    return sel["ts"].to_numpy(float), sel["value"].to_numpy(float)


def _before(ts: np.ndarray, values: np.ndarray, t: float) -> float:
    i = np.searchsorted(ts, t, side="right") - 1
    return float(values[i]) if i >= 0 and not math.isnan(values[i]) else math.nan


def recovery_time(df: pd.DataFrame, t0: float, t1: float, period_s: float) -> float:
    """Seconds from t0 until the job processes and its lag is back near its level at t0 (NaN: never)."""
    lag_t, lag_v = _series(df, Metric.LAG)
    if not len(lag_t):
        return math.nan
    proc_t, proc_v = _series(df, Metric.PROCESSING)
    in_t, in_v = _series(df, Metric.INPUT_RATE)
    lag0 = _before(lag_t, lag_v, t0)
    lag0 = 0.0 if math.isnan(lag0) else lag0
    rate0 = _before(in_t, in_v, t0)
    tolerance = max(0.1 * lag0, (0.0 if math.isnan(rate0) else rate0) * period_s, 1.0)
    for t, v in zip(lag_t, lag_v, strict=True):
        if t < t1 or math.isnan(v) or v > lag0 + tolerance:
            continue
        if len(proc_t) and _before(proc_t, proc_v, t) == 0.0:
            continue
        return float(t - t0)
    return math.nan


def fault_rows(refs: Sequence[RunRef]) -> pd.DataFrame:
    """One row per injected fault of every run that had one (interrupted runs left out)."""
    rows: list[dict[str, Any]] = []
    for ref in refs:
        if ref.meta.interrupted:
            continue
        faults = injected_faults(ref.events)
        if not faults:
            continue
        df = (pq.read_table(ref.timeseries_path, columns=["ts", "metric", "operator", "subtask", "value"],
                            filters=[("metric", "in", [Metric.LAG, Metric.PROCESSING, Metric.INPUT_RATE])]).to_pandas()
              if ref.timeseries_path is not None else pd.DataFrame(columns=["ts", "metric", "operator", "subtask",
                                                                            "value"]))
        backend_rec = _backend_recoveries(ref.events)
        m = ref.meta
        for f in faults:
            fid = int(f["fault_id"])
            for_s = f.get("for_s")
            t0 = float(f["ts"])
            t1 = max(t0 + float(for_s or 0.0), backend_rec.get(fid, -math.inf))
            rec = recovery_time(df, t0, t1, m.period_s)
            rows.append({"run_id": m.run_id, "matrix": m.matrix, "cell_id": m.cell_id, "config_hash": m.config_hash,
                         "autoscaler": m.autoscaler, "params": m.params_json, "fault_id": fid,
                         "fault_kind": f.get("fault_kind", ""), "at_s": t0,
                         "for_s": float(for_s) if for_s is not None else math.nan, "end_s": t1,
                         "recovered": not math.isnan(rec), "recovery_s": rec})
    return pd.DataFrame(rows, columns=FAULT_COLUMNS)


def recovery_summary(faults: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per autoscaler and fault kind: faults, how many recovered, mean recovery time (+- CI), max."""
    if faults.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    rows = []
    for (scaler, kind), g in faults.groupby(["autoscaler", "fault_kind"], sort=True):
        rec = g["recovery_s"].dropna()
        sd = float(rec.std(ddof=1)) if len(rec) > 1 else math.nan
        rows.append({"autoscaler": scaler, "fault_kind": kind, "faults": len(g), "recovered": int(g["recovered"].sum()),
                     "recovery_s": float(rec.mean()) if len(rec) else math.nan,
                     "recovery_s_ci": ci_half_width(sd, len(rec), level),
                     "recovery_s_max": float(rec.max()) if len(rec) else math.nan})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
