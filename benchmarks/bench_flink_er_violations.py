"""Where Flink-ER's latency-constraint violations fall in the Flink-ER reproduction (issue 14, item 5).

Reads run records (no new runs) and prints, per run, the control steps (the loop period) whose
mean per-record end-to-end latency exceeds lc (the run's `slo.latency_s`), split by phase:

- before: up to Flink-ER's first rescale. Alg. 2 acts only when the largest source lag reaches
  phi (`phi_s` seconds of input, our assumption: the paper gives no value), so the latency is
  already above lc for as long as the backlog takes to grow from lc's worth to phi's worth;
- between: from the first rescale to the first decision the scale manager could not apply
  (the pool of task managers exhausted: "no change after the scale manager's limits");
- exhausted: from then to the end (the load has outgrown the pool).

For static runs every step is "before". It also prints when the latency first exceeded lc,
the input rate then, and the input rate when the pool ran out.

    .venv/bin/python benchmarks/bench_flink_er_violations.py [--results results/reproduce-sim/flink-er-static]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml


def job_series(ts: pd.DataFrame, metric: str) -> pd.Series:
    rows = ts[(ts.metric == metric) & (ts.operator == "")]
    return rows.groupby("ts").value.mean().sort_index()


def phase_violations(run_dir: Path) -> dict[str, object]:
    with (run_dir / "run.yaml").open() as fh:
        config = (yaml.safe_load(fh) or {}).get("config") or {}
    lc = float((config.get("slo") or {}).get("latency_s", 5.0))
    step = float((config.get("loop") or {}).get("period_s", 15.0))
    ts = pd.read_parquet(run_dir / "timeseries.parquet")
    events = pd.read_parquet(run_dir / "events.parquet")
    latency = job_series(ts, "latency_e2e_mean")
    inp = job_series(ts, "input_rate")
    start = float(min(latency.index.min(), inp.index.min()))
    actions = events[events.kind == "action"].ts.to_numpy(float)
    refused = events[events.kind == "not_applied"].ts.to_numpy(float)
    first_action = float(actions.min()) if len(actions) else math.inf
    exhausted = float(refused.min()) if len(refused) else math.inf
    by_step = latency.groupby(np.floor((latency.index.to_numpy(float) - start) / step)).mean()
    step_start = start + by_step.index.to_numpy(float) * step
    bad = by_step.to_numpy(float) > lc
    phase = np.where(step_start < first_action, "before", np.where(step_start < exhausted, "between", "exhausted"))
    over = latency.index[latency.to_numpy(float) > lc]
    first_over = float(over[0]) if len(over) else math.nan

    def rate_at(t: float) -> float:
        return float(inp.asof(t)) if math.isfinite(t) else math.nan

    out: dict[str, object] = {"run": run_dir.parent.name + "/" + run_dir.name, "steps": len(bad),
                              "violations": int(bad.sum()), "lc_s": lc, "first_over_lc_s": first_over,
                              "input_then": rate_at(first_over), "first_rescale_s": first_action,
                              "pool_exhausted_s": exhausted, "input_at_exhaustion": rate_at(exhausted)}
    for name in ("before", "between", "exhausted"):
        out[f"viol_{name}"] = int(bad[phase == name].sum())
        out[f"steps_{name}"] = int((phase == name).sum())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/reproduce-sim/flink-er-static"))
    args = parser.parse_args()
    runs = sorted(p.parent for p in args.results.rglob("run.yaml") if (p.parent / "timeseries.parquet").exists())
    if not runs:
        raise SystemExit(f"no run records under {args.results}")
    table = pd.DataFrame([phase_violations(r) for r in runs])
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table.to_string(index=False, float_format=lambda v: f"{v:,.0f}"))


if __name__ == "__main__":
    main()
