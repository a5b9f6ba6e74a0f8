"""q1 end to end on the local stack with 4 task managers: the highest sustained input rate.

The generator plays a staircase of rates (each held `--step` seconds); for every step the last
`--window` seconds are judged from Prometheus: sustained when the job's throughput is at least 95%
of the produced rate and the event-time lag (latency) stays under `--max-latency` seconds.
4 task managers = bids_source 2, map 1, sink 1, each bounded by `--cpu-quota` CPUs.

    .venv/bin/python benchmarks/bench_q1_throughput.py --rates 5000,10000,15000,20000 --step 60
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from harness.backends.local.backend import LocalBackend
from harness.backends.local.stack import LocalStack
from harness.config import Experiment
from harness.topology import load_topology
from workloads.patterns import LoadPattern


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="5000,10000,15000,20000")
    ap.add_argument("--step", type=float, default=60)
    ap.add_argument("--window", type=float, default=30)
    ap.add_argument("--max-latency", type=float, default=5.0)
    ap.add_argument("--cpu-quota", type=float, default=0.5)
    ap.add_argument("--parallelism", default="bids_source=2,map=1,sink=1")
    ap.add_argument("--workdir", default="/tmp/bench-local-it")
    ap.add_argument("--port-offset", type=int, default=2000)
    ap.add_argument("--keep", action="store_true", help="keep the stack directory (default: removed at the end)")
    a = ap.parse_args()
    rates = [float(r) for r in a.rates.split(",")]
    par = {k: int(v) for k, v in (kv.split("=") for kv in a.parallelism.split(","))}
    exp = Experiment.model_validate({
        "name": "bench-q1-throughput", "backend": "local", "query": "q1",
        "pattern": {"name": "constant", "params": {"rate": rates[0], "duration_min": 60}},
        "autoscaler": {"name": "ds2"}, "initial_parallelism": par,
        "local": {"workdir": a.workdir, "port_offset": a.port_offset, "taskmanager_cpu_quota": a.cpu_quota},
    })
    pattern = LoadPattern("staircase", np.repeat(np.array(rates), int(a.step)), 1.0)
    b = LocalBackend()
    best = 0.0
    try:
        t0 = time.monotonic()
        b.start(exp, pattern, load_topology("q1"))
        print(f"# up in {time.monotonic() - t0:.1f} s; {sum(par.values())} task managers x {a.cpu_quota} CPU")
        print("target/s  produced/s  throughput/s  ratio  latency_s  lag  lag_rate/s  sustained")
        for i, rate in enumerate(rates):
            b.advance_to((i + 1) * a.step)
            s = b.snapshot(a.window)
            ratio = s.throughput / s.input_rate if s.input_rate else 0.0
            ok = ratio >= 0.95 and s.latency_s <= a.max_latency
            if ok:
                best = max(best, s.throughput)
            print(f"{rate:8.0f}  {s.input_rate:10.0f}  {s.throughput:12.0f}  {ratio:5.2f}  {s.latency_s:9.2f}  "
                  f"{s.kafka_lag:5.0f}  {s.kafka_lag_rate:10.0f}  {'yes' if ok else 'no'}"
                  f"{'  missing=' + ','.join(s.missing) if s.missing else ''}", flush=True)
    finally:
        b.stop()
        if not a.keep:  # the benchmark cleans its own stack directory (installs stay in the shared cache)
            LocalStack(exp.local).down(purge=True)
    print(f"\nhighest sustained q1 throughput: {best:.0f} records/s (target >= 10,000)")


if __name__ == "__main__":
    main()
