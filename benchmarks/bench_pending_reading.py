"""How far the sources' `pendingRecords` reading is from the true backlog on a fresh job.

The true backlog is what Kafka acknowledged from the load generator less what the sources took. Both are
recorded by `bench calibrate` (the generator's acknowledged count since session 9; older measurements have no
such count and are reported as unknown). The reading is the sum of the source subtasks' `pendingRecords`.
Printed for the `coldstart` phase (fresh task managers, overloaded) of each calibrated query, at seconds
after the phase began:

    .venv/bin/python benchmarks/bench_pending_reading.py .bench/calibration/s9/full-q0.1-c1/q1 \
        .bench/calibration/s9/full-q0.1-c1/q11 [--at 10 15 20 30 45 60 80]

`--run DIR` does the same for a local run record: the lag series against the generator's acknowledged count less
the sources' records taken (their rate integrated over the record's samples: an estimate to a few per cent),
every 10 s of the run.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from harness.calibration.measure import Measurement


def ratios(m: Measurement, at: list[float], phase: str = "coldstart") -> list[tuple[float, float, float, float]]:
    """(seconds, true backlog, reading, reading / true) at each of `at`; NaN where it is not known."""
    ph = next((p for p in m.phases if p.name == phase), None)
    if ph is None or "produced" not in m.host:
        return [(t, math.nan, math.nan, math.nan) for t in at]
    host = m.host[m.host.phase == phase].dropna(subset=["produced"]).sort_values("t")
    srcs = m.samples[(m.samples.phase == phase) & m.samples.operator.astype(str).str.endswith("_source")]
    out = []
    for t in at:
        tt = ph.t0 + t
        if host.empty or tt > host.t.max():
            out.append((t, math.nan, math.nan, math.nan))
            continue
        produced = float(np.interp(tt, host.t, host.produced))
        took = reading = 0.0
        for _, g in srcs.sort_values("t").groupby(["operator", "subtask"]):
            took += float(np.interp(tt, g.t, g.rec_out.astype(float)))
            reading += float(np.interp(tt, g.t, g.pending.astype(float).fillna(0.0)))
        true = produced - took
        out.append((t, true, reading, reading / true if true > 0 else math.nan))
    return out


def run_ratios(run_dir: Path, every_s: float = 10.0) -> pd.DataFrame:
    """A local run's lag reading against the true backlog, in `every_s` bins (see the module docstring)."""
    from harness.record import read_run_record
    from harness.vocabulary import Metric

    ts = read_run_record(run_dir).timeseries
    p = ts.pivot_table(index="ts", columns=["metric", "operator"], values="value", aggfunc="sum")
    produced = p[(Metric.PRODUCED_TOTAL.value, "")]
    lag = p[(Metric.LAG.value, "")]
    src = [c for c in p.columns if c[0] == Metric.RECORDS_IN.value and str(c[1]).endswith("_source")]
    rate = p[src].sum(axis=1, min_count=1).fillna(0.0)
    dt = pd.Series(p.index, index=p.index).diff().fillna(0.0)
    true = produced - (rate * dt).cumsum()
    df = pd.DataFrame({"lag reading": lag, "true backlog": true}).dropna()
    df = df[df["true backlog"] > 0]
    df["reading / true"] = df["lag reading"] / df["true backlog"]
    return df.groupby((df.index // every_s) * every_s).mean()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="*", type=Path, help="recorded calibration queries (<state>/<full-q...>/<query>)")
    ap.add_argument("--at", nargs="+", type=float, default=[10, 15, 20, 30, 45, 60, 80])
    ap.add_argument("--run", type=Path, help="a local run record instead")
    args = ap.parse_args()
    if args.run is not None:
        print(run_ratios(args.run).round(2).to_string())
        return
    rows = []
    for d in args.dirs:
        m = Measurement.load(d)
        for t, true, reading, ratio in ratios(m, args.at):
            rows.append({"query": m.query, "s": t, "true backlog": true, "pendingRecords": reading,
                         "reading / true": ratio})
    df = pd.DataFrame(rows)
    print(df.pivot(index="query", columns="s", values="reading / true").round(2).to_string())
    print()
    print(df.round(0).to_string(index=False))


if __name__ == "__main__":
    main()
