"""How fast operators ran: what one took per subtask when its CPU was the limit, in a fidelity report's local
runs and in a calibration's plateaus, beside the calibrated capacity the simulator uses; and how fast each run's
sources got going after the start, local against sim.

The simulator gives every subtask the profile's capacity at share 1.0. Whether the runs saw that speed is a
question of the runs' own numbers: in each 5-s step in which the operator's task managers ran at
`--cpu-bound` of their quota or more (the `cpu` signal: CPU time over the quota), its records per second per
subtask, grouped by its parallelism and its upstream's. `plateaus` lists a calibration's plateaus at share 1.0 in
which the operator's task manager was throttled (CPU-bound), with its CPU per record and the job's checkpointed
state: the spread of its saturations there, and how the cost moves with the state. `start` prints the sources'
records/s in 5-s bins over each cell's first minute, the local run above its sim runs: fresh task managers
warming up (the simulator gives a run one of the calibrated cold starts' curves).

    .venv/bin/python benchmarks/bench_speeds.py runs results/<dir>/fidelity-q1-q11 --query q11 \\
        --operator session_window --upstream bids_source
    .venv/bin/python benchmarks/bench_speeds.py start results/<dir>/fidelity-q1-q11 --query q1
    .venv/bin/python benchmarks/bench_speeds.py plateaus .bench/calibration/<s>/full-q0.1-c1/q11 \\
        --operator session_window
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from harness.calibrated_profile import load_profile
from harness.calibration import build
from harness.calibration.measure import Measurement


def runs(cells: Path, query: str, operator: str, upstream: str, cpu_bound: float, quota: float) -> None:
    frames = []
    for run in sorted((cells / "local").glob(f"{query}_*-r*")):
        ts = pd.read_parquet(run / "timeseries.parquet")
        mine = ts[ts.operator == operator].pivot_table(index="ts", columns="metric", values="value")
        up = ts[(ts.operator == upstream) & (ts.metric == "parallelism")].set_index("ts").value.rename("up_p")
        df = mine.join(up, how="outer").sort_index()
        for col in ("parallelism", "cpu", "up_p"):  # gauges sampled at their own instants: the last value holds
            df[col] = df[col].ffill()
        df = df[df.records_in.notna() & (df.cpu >= cpu_bound)]
        df = df.assign(per_subtask=df.records_in / df.parallelism, cell=run.name)
        frames.append(df[df.per_subtask > 0][["cell", "parallelism", "up_p", "per_subtask", "busy_ms"]])
    if not frames:
        raise SystemExit(f"no local runs of {query} under {cells / 'local'}")
    d = pd.concat(frames)
    table = d.groupby(["parallelism", "up_p"]).per_subtask.describe(percentiles=[0.25, 0.5, 0.75])
    print(f"{query} {operator}: records/s per subtask in 5-s steps at cpu >= {cpu_bound} "
          f"(local runs under {cells}), by its parallelism and {upstream}'s")
    print(table[["count", "25%", "50%", "75%"]].round(0).to_string())
    prof = load_profile(query, cores=quota)
    if prof is not None and operator in prof.operators:
        print(f"all: median {d.per_subtask.median():,.0f} (n = {len(d)}); the profile's capacity at share 1.0: "
              f"{prof.operators[operator].capacity:,.0f} ({prof.provenance.date})")


def plateaus(state: Path, operator: str) -> None:
    m = build.normalised(Measurement.load(state))
    print(f"{m.query} {operator}: plateaus at share 1.0 with its task manager throttled in >= half the CFS periods")
    print(f"{'phase':30s} {'subtasks':>8s} {'records/s':>10s} {'CPU-us/rec':>10s} {'state MB/subtask':>16s} busy")
    for pl in build.plateaus(m):
        p = pl.p
        if pl.operator != operator or p.share != 1.0 or not p.throttled >= 0.5 or not p.rate_in > 0:
            continue
        par = pl.phase.parallelism.get(operator, 1)
        state = pl.phase.state_bytes / par / 1e6 if math.isfinite(pl.phase.state_bytes) else math.nan
        print(f"{pl.phase.name:30s} {par:8d} {p.rate_in:10,.0f} {1e6 * p.cores / p.rate_in:10.2f} {state:16.2f} "
              f"{np.mean(p.busy) if len(p.busy) else math.nan:.2f}")


def start(cells: Path, query: str, seconds: float) -> None:
    rows = {}
    for side in ("local", "sim"):
        for run in sorted((cells / side).glob(f"{query}_*-r*")):
            ts = pd.read_parquet(run / "timeseries.parquet")
            src = ts[ts.operator.str.endswith("_source") & (ts.metric == "records_out") & (ts.ts <= seconds)]
            # a bin may hold two samples of a source or none: the mean per source, then the sources' sum
            per_source = src.groupby([(src.ts // 5 * 5).astype(int), "operator"]).value.mean()
            by_bin = per_source.groupby(level=0).sum() / 1000.0
            rows[(run.name.rsplit("-r", 1)[0], side, run.name.rsplit("-r", 1)[1])] = by_bin
    if not rows:
        raise SystemExit(f"no runs of {query} under {cells}")
    table = pd.DataFrame(rows).T
    table.index.names = ["cell", "side", "rep"]
    print(f"{query}: the sources' records/s (thousands) in 5-s bins from the start (bin = its first second); "
          f"NaN: no scrape in the bin (a restart)")
    print(table.round(1).to_string())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("runs", help="a fidelity report's local runs")
    r.add_argument("cells", type=Path, help="the report's results directory (with local/ in it)")
    r.add_argument("--query", required=True)
    r.add_argument("--operator", required=True)
    r.add_argument("--upstream", required=True, help="the operator feeding it (its parallelism is shown)")
    r.add_argument("--cpu-bound", type=float, default=0.95)
    r.add_argument("--quota", type=float, default=0.1, help="the runs' task-manager CPU quota (the profile's)")
    st = sub.add_parser("start", help="each run's first minute: its sources' rate, local and sim")
    st.add_argument("cells", type=Path, help="the report's results directory (with local/ and sim/ in it)")
    st.add_argument("--query", required=True)
    st.add_argument("--seconds", type=float, default=60.0)
    p = sub.add_parser("plateaus", help="a calibration's recorded samples")
    p.add_argument("state", type=Path, help="one query's state directory (with measurement.json)")
    p.add_argument("--operator", required=True)
    a = ap.parse_args()
    if a.what == "runs":
        runs(a.cells, a.query, a.operator, a.upstream, a.cpu_bound, a.quota)
    elif a.what == "start":
        start(a.cells, a.query, a.seconds)
    else:
        plateaus(a.state, a.operator)


if __name__ == "__main__":
    main()
