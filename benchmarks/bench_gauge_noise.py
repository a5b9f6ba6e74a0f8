"""How the error of Flink's busy and backpressured readings runs from one meter update to the next.

Each reading of a calibration's plateaus is set against the line its profile fitted for its subtask count (one
subtask, or the operator's scaled-out line), at the truth over the reading's own 60-s window
(`harness.calibration.build`, `harness.gauge_window`), and each subtask's residuals in each deployment are taken
about their own mean (the error a deployment keeps, and what a line misses at one load, are constant there: they
would correlate at every lag). If each reading were the mean of independent per-5-s-interval noise over its window
(what the simulator draws: `NoiseBasis.INTERVAL`), residuals k updates apart would correlate by about
(12 - k) / 12 (less at long lags: a deployment of a few minutes holds few independent windows, and its own mean
takes a share of them), and one reading's error would have the fitted interval sd / sqrt(12). Printed per operator
and gauge: the residuals' sd, their correlation at lags of 1, 2, 3, 6 and 12 updates (pairs in one deployment of
one subtask; their count), the fitted interval sd (its largest, where the line reads nearest a half) and the sd of
one full-window reading it makes:

    .venv/bin/python benchmarks/bench_gauge_noise.py .bench/calibration/s18/full-q0.1-c1/q11 \
        .bench/calibration/s19/full-q0.1-c1/q1 [--quota 0.1]

Residuals include what the line misses between loads (a capacity off, a load step's truth).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from harness.calibrated_profile import HostLoad, NoiseBasis, Provenance
from harness.calibration import truth
from harness.calibration.build import build_profile
from harness.calibration.measure import Measurement
from harness.topology import load_topology

LAGS = (1, 2, 3, 6, 12)
UPDATE_S = 5.0


def traced(directory: Path, quota: float) -> tuple[pd.DataFrame, dict[tuple[str, str], float], np.ndarray]:
    """(the windowed readings with their residuals against the fitted line of their subtask count, each subtask's
    in each deployment about their mean; per (operator, gauge) the largest interval sd or NaN; the restarts)."""
    m = Measurement.load(directory)
    rows: list[pd.DataFrame] = []

    def keep(op: str, gauge: str, subtasks: int, t: np.ndarray, r: np.ndarray, sub: np.ndarray,
             u: np.ndarray) -> None:
        rows.append(pd.DataFrame({"operator": op, "gauge": gauge, "subtasks": subtasks, "t": t, "reading": r,
                                  "subtask": sub, "truth": u}))

    prov = Provenance(date="-", command="-", cpu_model="-", host_cpus=1, flink_version="-", kafka_version="-",
                      taskmanager_cpu_quota=quota, host_load=HostLoad(before_1m=math.nan), duration_s=math.nan)
    prof = build_profile(m, load_topology(m.query), prov, trace=keep)
    sds = {}
    for op, o in prof.operators.items():
        for gauge in ("busy", "backpressured"):
            g = getattr(o.readings, gauge)
            # the largest over the levels (the noise shrinks where a reading nears 0 or 1: `time_share_shape`)
            sds[(op, gauge)] = (max(x[1] for x in g.noise_sd) if g.noise_sd and g.noise_basis == NoiseBasis.INTERVAL
                                else math.nan)
    starts = truth.restarts(m.samples)
    if not rows:
        return pd.DataFrame(), sds, starts
    df = pd.concat(rows).drop_duplicates(["operator", "gauge", "subtask", "t"])
    line = [o.readings.busy_at(int(n)) if gauge == "busy" else o.readings.backpressured
            for o, gauge, n in zip((prof.operators[str(x)] for x in df.operator), df.gauge, df.subtasks, strict=True)]
    df["residual"] = df.reading.to_numpy() - np.array([g.offset + g.gain * u for g, u in zip(line, df.truth,
                                                                                              strict=True)])
    df["deployment"] = np.searchsorted(starts, df.t.to_numpy(), side="right")
    df["residual"] -= df.groupby(["operator", "gauge", "deployment", "subtask"]).residual.transform("mean")
    return df, sds, starts


def lag_correlation(g: pd.DataFrame, starts: np.ndarray, k: int) -> tuple[float, int]:
    """Correlation of residuals k updates apart (one subtask, one deployment), and the pairs."""
    a, b = [], []
    for _, s in g.groupby("subtask"):
        t, res = s.t.to_numpy(), s.residual.to_numpy()
        dep = np.searchsorted(starts, t, side="right")
        for i in range(len(t)):
            j = int(np.argmin(np.abs(t - (t[i] + k * UPDATE_S))))
            if abs(t[j] - t[i] - k * UPDATE_S) <= 1.5 and dep[j] == dep[i]:
                a.append(res[i])
                b.append(res[j])
    if len(a) < 5 or np.std(a) == 0 or np.std(b) == 0:
        return math.nan, len(a)
    return float(np.corrcoef(a, b)[0, 1]), len(a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="recorded calibration samples, one query each")
    ap.add_argument("--quota", type=float, default=0.1)
    args = ap.parse_args()
    if not args.dirs:  # `make bench` runs every script: without samples there is nothing to read
        print("no calibration samples given (a `bench calibrate --state-dir` query directory): nothing measured")
        return
    print(f"{'query':6} {'operator':15} {'gauge':13} {'n':>4} {'resid sd':>8} "
          + " ".join(f"{'lag ' + str(k):>11}" for k in LAGS) + f" {'interval sd':>11} {'-> reading':>10}")
    for d in args.dirs:
        df, sds, starts = traced(d, args.quota)
        if df.empty:
            continue
        q = Measurement.load(d).query
        for (op, gauge), g in df.groupby(["operator", "gauge"]):
            sd = sds[(str(op), str(gauge))]
            g = g.sort_values("t")
            lags = [lag_correlation(g, starts, k) for k in LAGS]
            cells = " ".join(f"{c:>6.2f} ({n:>3})" if math.isfinite(c) else f"{'n/a':>6} ({n:>3})" for c, n in lags)
            print(f"{q:6} {op:15} {gauge:13} {len(g):4d} {g.residual.std():8.3f} {cells} {sd:11.3f} "
                  f"{sd / math.sqrt(12):10.3f}")
    print("if the noise were independent per interval and averaged over 60 s: lag k correlates by (12 - k) / 12 "
          + ", ".join(f"{k}: {(12 - k) / 12:.2f}" for k in LAGS))


if __name__ == "__main__":
    main()
