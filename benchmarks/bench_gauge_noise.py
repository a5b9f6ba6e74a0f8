"""How the error of Flink's busy and backpressured readings runs from one meter update to the next.

Each reading of a calibration's plateaus is set against the line its profile fitted for its subtask count (one
subtask, or the operator's scaled-out line), at the truth over the reading's own 60-s window
(`harness.calibration.build`, `harness.gauge_window`). Each subtask's residuals in each plateau are taken about
their own mean: the error a deployment keeps and what the line misses at the plateau's load are constant there.
Residuals k updates apart are then correlated over all plateaus (a ratio of sums), beside what the simulator's model
makes of the same updates: each reading the mean of independent per-5-s-interval noise over its window
(`NoiseBasis.INTERVAL`, `gauge_window.noise_overlap`), taken about the same means. Independent noise per update
would give about -1 / (n - 1) for n updates: with the two or three updates a plateau's known windows hold, the two
cannot be told apart (both near -0.5 to -1), so this shows how far the data go, not which model holds; the window
model rests on how Flink computes the reading (a 60-s mean shares its intervals' noise with the next). Printed per
operator and gauge: the residuals' sd, the observed and the model's correlation at lags of 1, 2 and 3 updates with
the pairs counted, the fitted interval sd (its largest over the levels) and the sd of one full-window reading it
makes:

    .venv/bin/python benchmarks/bench_gauge_noise.py .bench/calibration/s18/full-q0.1-c1/q11 \\
        .bench/calibration/s19/full-q0.1-c1/q1 [--quota 0.1]
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
from harness.gauge_window import noise_overlap
from harness.topology import load_topology

LAGS = (1, 2, 3)
UPDATE_S = 5.0


def traced(directory: Path, quota: float) -> tuple[pd.DataFrame, dict[tuple[str, str], float], np.ndarray]:
    """(the windowed readings with their residuals against the fitted line of their subtask count; per (operator,
    gauge) the largest interval sd or NaN; the restarts)."""
    m = Measurement.load(directory)
    rows: list[pd.DataFrame] = []

    def keep(op: str, gauge: str, phase: str, subtasks: int, t: np.ndarray, r: np.ndarray, sub: np.ndarray,
             u: np.ndarray) -> None:
        rows.append(pd.DataFrame({"operator": op, "gauge": gauge, "phase": phase, "subtasks": subtasks, "t": t,
                                  "reading": r, "subtask": sub, "truth": u}))

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
    return df, sds, starts


def lag_correlations(g: pd.DataFrame, starts: np.ndarray) -> list[tuple[float, float, int]]:
    """Per lag: (observed correlation, the model's, pairs) of residuals k updates apart within one plateau and
    subtask, each about its own mean, pooled as ratios of sums."""
    sums = {k: np.zeros(6) for k in LAGS}  # observed e_i e_j, e_i^2, e_j^2; model the same
    pairs = dict.fromkeys(LAGS, 0)
    for _, s in g.groupby(["phase", "subtask"]):
        s = s.sort_values("t")
        t, e = s.t.to_numpy(), s.residual.to_numpy()
        if len(t) < 2:
            continue
        e = e - e.mean()
        centre = np.eye(len(t)) - 1.0 / len(t)
        cov = centre @ noise_overlap(t, starts) @ centre  # the model's, about the same mean
        for k in LAGS:
            for i in range(len(t)):
                j = int(np.argmin(np.abs(t - (t[i] + k * UPDATE_S))))
                if abs(t[j] - t[i] - k * UPDATE_S) <= 1.5:
                    sums[k] += [e[i] * e[j], e[i] ** 2, e[j] ** 2, cov[i, j], cov[i, i], cov[j, j]]
                    pairs[k] += 1

    def corr(a: float, b: float, c: float) -> float:
        return a / math.sqrt(b * c) if b > 0 and c > 0 else math.nan

    return [(corr(*sums[k][:3]), corr(*sums[k][3:]), pairs[k]) for k in LAGS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="recorded calibration samples, one query each")
    ap.add_argument("--quota", type=float, default=0.1)
    args = ap.parse_args()
    if not args.dirs:  # `make bench` runs every script: without samples there is nothing to read
        print("no calibration samples given (a `bench calibrate --state-dir` query directory): nothing measured")
        return
    head = " ".join(f"{'lag ' + str(k) + ' seen/model':>18}" for k in LAGS)
    print(f"{'query':6} {'operator':15} {'gauge':13} {'n':>4} {'resid sd':>8} {head} {'interval sd':>11} "
          f"{'-> reading':>10}")
    for d in args.dirs:
        df, sds, starts = traced(d, args.quota)
        if df.empty:
            continue
        q = Measurement.load(d).query
        for (op, gauge), g in df.groupby(["operator", "gauge"]):
            sd = sds[(str(op), str(gauge))]
            lags = lag_correlations(g, starts)
            cells = " ".join(f"{c:>6.2f}/{mdl:>5.2f} ({n:>3})" if math.isfinite(c) else f"{'n/a':>12} ({n:>3})"
                             for c, mdl, n in lags)
            print(f"{q:6} {op:15} {gauge:13} {len(g):4d} {g.residual.std():8.3f} {cells} {sd:11.3f} "
                  f"{sd / math.sqrt(12):10.3f}")


if __name__ == "__main__":
    main()
