"""What one extra scraper of a task manager's metrics, once a second, costs the records it processes: the A/B
behind the calibration's probe reporter (`local.probe_reporter`, session 26).

Runs q1 on the local stack in a fixed layout (3 source subtasks, 1 map, 1 sink: the calibration's bottleneck phase
for the map, which is then the only bottleneck), 100k records/s offered to 0.1-CPU task managers, for 300 s,
and scrapes the map's task manager once a second in two windows (60-120 s and 180-240 s) from its full Prometheus
reporter or from its probe reporter. Prints the map's records/s per window and each scraped window against the
quiet windows either side of it, interpolated in time (the map keeps speeding up for minutes, so a plain mean
of the quiet windows would flatter the scraped ones). Prometheus scrapes every task manager every 5 s
throughout, as in any run. Session 26, two runs each (the first two driven by hand the same way): full -6.7 % /
-8.4 % and +3.0 % / -2.7 %, probe +3.0 % / -5.1 % and -4.6 % / -4.8 %: a window's noise (sd 1-4k of ~46k per 5-s
point, the two runs' quiet windows apart by up to 7 %) is as large as the effect, so this does not resolve it.

    flock /tmp/bench-realstack.lock .venv/bin/python benchmarks/bench_scrape_cost.py --reporter full
    flock /tmp/bench-realstack.lock .venv/bin/python benchmarks/bench_scrape_cost.py --reporter probe
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import requests
import yaml

from harness.backends.local.config import LocalConfig
from harness.backends.local.stack import LocalStack
from harness.calibration.recorder import parse_reporter

SCRAPED = ((60.0, 120.0), (180.0, 240.0))  # seconds after the job runs
QUIET = ((20.0, 60.0), (120.0, 180.0), (240.0, 300.0))
OPERATOR = "map"


def experiment(quota: float, probe: bool, duration_s: int) -> dict[str, Any]:
    return {
        "name": f"scrape-cost-{'probe' if probe else 'full'}", "backend": "local", "query": "q1",
        "pattern": {"name": "constant", "scale": 1.0, "time_scale": 1,
                    "params": {"rate": 100_000, "duration_min": duration_s / 60}},
        "autoscaler": "static", "initial_parallelism": {"bids_source": 3, OPERATOR: 1, "sink": 1},
        "duration_s": duration_s, "seed": 1,
        "loop": {"period_s": 15, "metrics_window_s": 15, "cooldown_s": 60},
        "scale_manager": {"max_taskmanagers": 8},
        "local": {"taskmanager_cpu_quota": quota, "probe_reporter": probe},
    }


def wait_running(stack: LocalStack, stop: threading.Event) -> float | None:
    """Wall time at which the job manager first lists a running job (None when stopped first)."""
    while not stop.is_set():
        if any(j.get("state") == "RUNNING" for j in stack.rest.jobs()):
            return time.time()
        stop.wait(0.5)
    return None


def operator_port(stack: LocalStack, operator: str, probe: bool) -> int | None:
    """The reporter port of the task manager running `operator` (its full reporter names its task); with `probe`,
    its probe reporter's as the stack started it (None: it has none)."""
    for tm in stack.taskmanager_ids():
        port = stack.flink.reporter_port_of(tm)
        if port is None:
            continue
        try:
            text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        except requests.RequestException:
            continue
        if parse_reporter(text, None).get("operator") == operator:  # the recorder's reading of its task label
            return stack.flink.probe_port_of(tm) if probe else port
    return None


def scrape(stack: LocalStack, probe: bool, stop: threading.Event, log: list[tuple[float, float, int]]) -> None:
    """Once a second inside the scraped windows: GET the map's reporter (seconds after the job ran, wall
    seconds the scrape took, bytes)."""
    began = wait_running(stack, stop)
    if began is None:
        return
    port = None
    while not stop.is_set() and time.time() - began < SCRAPED[-1][1]:
        t = time.time() - began
        if any(a <= t < b for a, b in SCRAPED):
            port = port or operator_port(stack, OPERATOR, probe)
            if port is not None:
                t0 = time.time()
                try:
                    size = len(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).content)
                    log.append((t, time.time() - t0, size))
                except requests.RequestException:
                    pass
        stop.wait(max(0.0, 1.0 - (time.time() - began) % 1.0))


def window_rates(run_dir: Path) -> pd.DataFrame:
    """The map's records/s per 5-s point of the run, labelled by window."""
    d = pd.read_parquet(run_dir / "timeseries.parquet")
    x = d[(d.operator == OPERATOR) & (d.metric == "records_in") & (d.subtask == -1)][["ts", "value"]]
    x = x.rename(columns={"value": "rate"})

    def label(ts: float) -> str | None:
        for kind, windows in (("scraped", SCRAPED), ("quiet", QUIET)):
            for a, b in windows:
                if a < ts <= b:
                    return f"{kind} {a:.0f}-{b:.0f} s"
        return None

    x["window"] = x.ts.map(label)
    return x.dropna(subset=["window"])


def print_windows(run_dir: Path) -> None:
    """The map's records/s per window; a scraped window against the quiet ones interpolated to its middle."""
    x = window_rates(run_dir)
    per = x.groupby("window", sort=False).rate.agg(["mean", "std", "count"])
    mid = {w: float(np.mean(x[x.window == w].ts)) for w in per.index}
    quiet = sorted((mid[w], per.loc[w, "mean"]) for w in per.index if str(w).startswith("quiet"))
    print(f"{'window':<20} {'map records/s':>14} {'sd':>8} {'n':>3} {'vs quiet':>9}")
    for w, row in per.iterrows():
        vs = ""
        if str(w).startswith("scraped") and len(quiet) >= 2:
            expected = float(np.interp(mid[w], [q[0] for q in quiet], [q[1] for q in quiet]))
            vs = f"{row['mean'] / expected - 1:+.1%}"
        print(f"{w:<20} {row['mean']:>14,.0f} {row['std']:>8,.0f} {int(row['count']):>3} {vs:>9}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reporter", choices=("full", "probe"), required=True, help="which reporter to scrape")
    ap.add_argument("--quota", type=float, default=0.1, help="task-manager CPU quota (cores)")
    ap.add_argument("--results", type=Path, default=None, help="where the run record goes (default: a temp dir)")
    args = ap.parse_args()
    probe = args.reporter == "probe"
    duration = int(QUIET[-1][1])
    results = args.results or Path(tempfile.mkdtemp(prefix="scrape-cost-"))
    results.mkdir(parents=True, exist_ok=True)
    exp_file = results / "experiment.yaml"
    exp_file.write_text(yaml.safe_dump(experiment(args.quota, probe, duration), sort_keys=False))
    stack = LocalStack(LocalConfig())  # the default stack `bench run` brings up: its ports and process files
    stop = threading.Event()
    log: list[tuple[float, float, int]] = []
    th = threading.Thread(target=scrape, args=(stack, probe, stop, log), daemon=True)
    th.start()
    bench = Path(sys.executable).parent / "bench"
    try:
        rc = subprocess.run([str(bench), "run", str(exp_file), "--results", str(results)],
                            stdout=subprocess.DEVNULL).returncode
    finally:
        stop.set()
        th.join(timeout=10)
    runs = sorted(results.glob("**/timeseries.parquet"))
    if rc != 0 or not runs:
        print(f"the run failed (exit {rc}); its record, if any, is under {results}", file=sys.stderr)
        return 1
    empty = [f"{a:.0f}-{b:.0f} s" for a, b in SCRAPED if not any(a <= t < b for t, _, _ in log)]
    if empty:
        print(f"no scrape of the {args.reporter} reporter landed in {', '.join(empty)} (no such reporter on the "
              f"map's task manager?): no A/B to report; the record is under {results}", file=sys.stderr)
        return 1
    print(f"{args.reporter} reporter scraped once a second: {len(log)} scrapes, "
          f"{np.mean([s for _, s, _ in log]) if log else float('nan'):.3f} s and "
          f"{np.mean([b for _, _, b in log]) if log else float('nan'):,.0f} bytes each")
    print_windows(runs[-1].parent)
    print(f"record: {runs[-1].parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
