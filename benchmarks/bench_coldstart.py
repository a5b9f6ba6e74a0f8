"""Fresh task managers, local against sim: the job's throughput in time bins from the start of each run.

Reads a `bench fidelity` results folder (`<dir>/local/<cell>-r0`, `<dir>/sim/<cell>-rN`), typically of
`experiments/fidelity-coldstart.yaml` (static parallelism, load above the warm capacity, so throughput
is the job's speed). Per cell it prints the local run's throughput per bin, the sim runs' mean (the
calibrated warm-up curve), and a sim run of the same experiment with `sim.taskmanager_warmup: false`
(every task manager warm from its first second), so the model's share of the difference shows.

    .venv/bin/python benchmarks/bench_coldstart.py results/s6/fidelity-coldstart [--bin-s 30]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from harness.config import Experiment
from harness.record import read_run_record
from harness.runner import run_experiment
from harness.vocabulary import Metric


def throughput(run_dir: Path) -> pd.Series:
    """The job's throughput (records/s the sources took) against seconds since the run started."""
    return read_run_record(run_dir).series(Metric.THROUGHPUT.value)


def binned(series: pd.Series, bin_s: float, end_s: float) -> np.ndarray:
    edges = np.arange(0.0, end_s + 1e-9, bin_s)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        part = series[(series.index >= lo) & (series.index < hi)]
        out.append(float(part.mean()) if len(part) else float("nan"))
    return np.asarray(out)


def warm_sim(local_run: Path, work: Path) -> pd.Series:
    """The local run's experiment on the sim with every task manager warm from the start."""
    cfg = dict(read_run_record(local_run).meta["config"])
    cfg["backend"] = "sim"
    cfg.setdefault("sim", {})["taskmanager_warmup"] = False
    exp = Experiment.model_validate(cfg)
    out = run_experiment(exp, work / f"{local_run.name}-warm")
    return throughput(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="a `bench fidelity` results folder (with local/ and sim/)")
    ap.add_argument("--bin-s", type=float, default=30.0)
    args = ap.parse_args()
    local_runs = sorted((args.results / "local").glob("*-r0"))
    if not local_runs:
        raise SystemExit(f"{args.results}/local: no local runs")
    with tempfile.TemporaryDirectory() as tmp:
        for run in local_runs:
            cell = run.name.removesuffix("-r0")
            end = float(read_run_record(run).meta["duration_s"])
            local = binned(throughput(run), args.bin_s, end)
            sims = [binned(throughput(r), args.bin_s, end) for r in sorted((args.results / "sim").glob(f"{cell}-r*"))]
            sim = np.nanmean(sims, axis=0) if sims else np.full(len(local), np.nan)
            warm = binned(warm_sim(run, Path(tmp)), args.bin_s, end)
            print(f"\n{cell}: throughput, records/s (mean per {args.bin_s:g}-s bin; sim: {len(sims)} runs)")
            print(f"{'bin (s)':>10} {'local':>9} {'sim':>9} {'sim/local':>9} {'sim warm':>9} {'warm/local':>10}")
            for k, (a, b, c) in enumerate(zip(local, sim, warm, strict=True)):
                lo = k * args.bin_s
                print(f"{lo:>4.0f}-{lo + args.bin_s:<5.0f} {a:>9,.0f} {b:>9,.0f} {b / a:>9.2f} "
                      f"{c:>9,.0f} {c / a:>10.2f}")
            n = len(local)
            tot = (np.nansum(local), np.nansum(sim), np.nansum(warm))
            print(f"{'whole run':>10} {tot[0] / n:>9,.0f} {tot[1] / n:>9,.0f} {tot[1] / tot[0]:>9.2f} "
                  f"{tot[2] / n:>9,.0f} {tot[2] / tot[0]:>10.2f}")


if __name__ == "__main__":
    main()
