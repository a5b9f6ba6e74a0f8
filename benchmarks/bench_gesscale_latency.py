"""Why latency awareness saves nothing in the Gesscale reproduction: what the scalers saw and learnt.

Reads the run records of `bench reproduce gesscale` (no new runs) and prints, per run:

- the ND_max the scaler saw (`network_delay_max_ms`, the sim's fog-node model) over the run,
  and per parallelism: does node choice change ND_max (nearest-first vs random)?
- the time-weighted parallelism and the number of rescales;
- for Gesscale and MDL-NLUnaware, every calibration sample (sec. IV-C1: the throughput at the
  moment the operator was found overloaded, taken as MST(n)), with the operator's busy fraction
  then and the capacity the simulator really had at that n and ND_max (records per busy second
  at full load, `capacity_per_subtask x (n - loss x ND_max)`), and the model each scaler ended with.

    .venv/bin/python benchmarks/bench_gesscale_latency.py [--results results/reproduce-sim/gesscale-fog]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

SAMPLE = re.compile(r"overloaded \(MST\((\d+)\) = ([\d,]+) rec/s\)")


def job_series(ts: pd.DataFrame, metric: str) -> pd.Series:
    rows = ts[(ts.metric == metric) & (ts.subtask == -1)]
    return rows.groupby("ts").value.mean()


def capacity_per_subtask(ts: pd.DataFrame, loss_per_ms: float) -> float:
    """Records/s one subtask serves when fully busy, from steps at busy 1000 ms/s (after the network loss)."""
    busy = job_series(ts, "busy_ms")
    rin = job_series(ts, "records_in")
    par = job_series(ts, "parallelism")
    nd = job_series(ts, "network_delay_max_ms").reindex(busy.index).fillna(0.0)
    full = busy.index[busy >= 999.0]
    per = rin[full] / (par[full] - loss_per_ms * nd[full])
    return float(per.median()) if len(per) else float("nan")


def report(run: Path, loss_per_ms: float) -> None:
    ts = pd.read_parquet(run / "timeseries.parquet")
    ev = pd.read_parquet(run / "events.parquet")
    nd = job_series(ts, "network_delay_max_ms")
    par = job_series(ts, "parallelism")
    busy = job_series(ts, "busy_ms")
    by_n = pd.DataFrame({"n": par, "nd": nd}).dropna().groupby("n").nd.agg(["mean", "min", "max"]).round(0)
    print(f"== {run.name}: parallelism mean {par.mean():.2f}, rescales {int((ev.kind == 'action').sum())}, "
          f"ND_max seen mean {nd.mean():.0f} ms")
    print("   ND_max by parallelism (ms): " + "; ".join(
        f"n={int(n)}: {r['mean']:.0f} [{r['min']:.0f}, {r['max']:.0f}]" for n, r in by_n.iterrows()))
    if not run.name.startswith(("gesscale", "mdl")):
        return
    cap = capacity_per_subtask(ts, loss_per_ms)
    model = None
    for _, e in ev[ev.kind == "decision"].iterrows():
        m = SAMPLE.search(e.reason or "")
        data = json.loads(e.data) if isinstance(e.data, str) else (e.data or {})
        for info in data.get("details", {}).get("operators", {}).values():
            model = info.get("model", model)
        if not m:
            continue
        n, ct = int(m.group(1)), float(m.group(2).replace(",", ""))
        t = float(e.ts)
        window = busy[(busy.index > t - 60) & (busy.index <= t)]
        nd_t = float(nd[nd.index <= t].iloc[-1]) if (nd.index <= t).any() else float("nan")
        true = cap * (n - loss_per_ms * nd_t)
        print(f"   t={t:>6.0f} sample MST({n}) = {ct:>9,.0f} rec/s at ND_max {nd_t:>3.0f} ms, "
              f"busy {window.mean() / 1000:.2f} -> the sim's capacity then {true:>9,.0f} ({ct / true - 1:+.0%})")
    if model:
        print(f"   final model: alpha {model['alpha']:,.0f}, beta {model['beta']:.3f}, gamma {model['gamma']:,.1f} "
              f"per ms ({model['samples']} samples); the sim's: alpha {cap:,.0f}, beta 1, gamma "
              f"{cap * loss_per_ms:,.1f} per ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, default=Path("results/reproduce-sim/gesscale-fog"))
    ap.add_argument("--loss-per-ms", type=float, default=1 / 300, help="the experiment's sim.network.mst_loss_per_ms")
    args = ap.parse_args()
    for run in sorted(p for p in args.results.iterdir() if (p / "timeseries.parquet").exists()):
        report(run, args.loss_per_ms)


if __name__ == "__main__":
    main()
