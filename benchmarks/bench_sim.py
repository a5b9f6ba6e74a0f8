"""Wall time of the `sim` backend: one 140-minute cosine run of q11 at full thesis scale.

Target (issue 2): at most 0.5 s on one core with a 15 s loop period. The loop
here is a trivial utilisation policy (not an autoscaler) so the figure covers
stepping, snapshots (with the inter-arrival sample), rescales and the final
timeseries export - what a real run pays besides the autoscaler itself.

    .venv/bin/python benchmarks/bench_sim.py [--repeat 5] [--query q11] [--arrivals poisson|map]

`--scaler NAME` drives the run with that autoscaler through the harness' own MAPE loop (its loop
timings, scale manager and the backend's `measure_only` of what the autoscaler reads, as `bench run`
does) instead of the trivial policy; no run record is written, so the figure is the simulation plus
the decisions. `--baseline DIR` also times DIR's code (e.g. a clone of main) the same way in
alternating child processes (`PYTHONPATH=DIR`), and prints each side's min / median CPU and the
ratio of the medians, with the host's load average: compare ratios within one run on a shared host.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

from harness.backends.sim.backend import SimBackend
from harness.backends.sim.config import SimConfig
from harness.topology import load_topology
from workloads.arrivals import ArrivalConfig
from workloads.patterns import PatternConfig, build_pattern


def one_run(query: str, arrivals: str, period_s: float = 15.0, cooldown_s: float = 300.0) -> dict[str, float]:
    topo = load_topology(query)
    pattern = build_pattern(PatternConfig(name="cosine"), seed=1, query=query)
    backend = SimBackend()
    t0 = time.perf_counter()
    c0 = time.process_time()
    backend.start_with(topo, pattern, SimConfig(), 1, seed=1, arrivals=ArrivalConfig(kind=arrivals))
    t_snap = t_step = 0.0
    last_action = -math.inf
    actions = 0
    t = 0.0
    while t < pattern.duration_s:
        t = min(pattern.duration_s, t + period_s)
        a = time.process_time()
        backend.advance_to(t)
        b = time.process_time()
        snap = backend.snapshot(period_s)
        t_step += b - a
        t_snap += time.process_time() - b
        if t - last_action < cooldown_s:
            continue
        # Trivial policy: size each operator for its input at 70% busy.
        target = {}
        for name, m in snap.operators.items():
            busy = max(m.busy_fraction, 1e-3)
            want = m.parallelism * busy / 0.7
            if m.is_backpressured or (m.lag_rate or 0) > 1000:
                want = max(want, m.parallelism + 1)
            target[name] = max(1, min(80, math.ceil(want)))
        if target != snap.parallelism:
            backend.rescale(target, None)
            last_action = t
            actions += 1
    a = time.process_time()
    frame = backend.timeseries()
    t_ts = time.process_time() - a
    return {
        "total_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - c0,
        "step_s": t_step,
        "snapshot_s": t_snap,
        "timeseries_s": t_ts,
        "steps": backend.model.k if backend.model else 0,
        "actions": actions,
        "rows": len(frame),
    }


def scaler_run(query: str, arrivals: str, scaler_name: str) -> dict[str, float]:
    """The run as `bench run --backend sim --scaler NAME` drives it, minus writing the record."""
    import autoscalers
    from harness.config import Experiment
    from harness.mape import MapeLoop
    from harness.record import EventLog
    from harness.scaling import ScaleManager

    exp = Experiment.model_validate({"name": "bench-sim", "query": query, "backend": "sim",
                                     "autoscaler": {"name": scaler_name},
                                     "pattern": {"name": "cosine", "arrivals": {"kind": arrivals}}, "seed": 1})
    topo = load_topology(query)
    pattern = build_pattern(exp.pattern, exp.seed, query)
    context = autoscalers.RunContext(slo_latency_s=exp.slo.latency_s, slo_throughput_ratio=exp.slo.throughput_ratio,
                                     period_s=exp.loop.period_s, cooldown_s=exp.loop.cooldown_s)
    scaler = autoscalers.create(scaler_name, exp.autoscaler.params, context)
    backend = SimBackend()
    timed = {"step_s": 0.0, "snapshot_s": 0.0}

    def timing(name: str, fn):  # type: ignore[no-untyped-def]
        def wrapped(*args):  # type: ignore[no-untyped-def]
            a = time.process_time()
            try:
                return fn(*args)
            finally:
                timed[name] += time.process_time() - a
        return wrapped

    t0 = time.perf_counter()
    c0 = time.process_time()
    backend.start(exp, pattern, topo)
    measure_only = getattr(backend, "measure_only", None)  # absent in code older than it
    if measure_only is not None:
        measure_only(scaler.reads())
    backend.advance_to = timing("step_s", backend.advance_to)  # type: ignore[method-assign]
    backend.snapshot = timing("snapshot_s", backend.snapshot)  # type: ignore[method-assign]
    loop = MapeLoop(backend, scaler, ScaleManager(exp.scale_manager), exp.loop, EventLog())
    result = loop.run(pattern.duration_s)
    a = time.process_time()
    frame = backend.timeseries()
    t_ts = time.process_time() - a
    return {"total_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, **timed, "timeseries_s": t_ts,
            "steps": backend.model.k if backend.model else 0, "actions": result.actions, "rows": len(frame)}


def measure(args: argparse.Namespace) -> list[dict[str, float]]:
    def once() -> dict[str, float]:
        if args.scaler:
            return scaler_run(args.query, args.arrivals, args.scaler)
        return one_run(args.query, args.arrivals)

    once()  # warm-up (imports, caches)
    return [once() for _ in range(args.repeat)]


def alternate(args: argparse.Namespace) -> None:
    """This code and the baseline's in alternating child processes; CPU per run, min / median, ratio."""
    import json
    import os
    import subprocess
    import sys

    child = [sys.executable, __file__, "--repeat", "1", "--query", args.query, "--arrivals", args.arrivals, "--json"]
    if args.scaler:
        child += ["--scaler", args.scaler]
    sides = {"this": os.environ.get("PYTHONPATH", ""), "baseline": str(args.baseline.resolve())}
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    print(f"host load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for _ in range(args.repeat):
        for side, path in sides.items():
            env = {**os.environ, "PYTHONPATH": path} if path else {k: v for k, v in os.environ.items()
                                                                 if k != "PYTHONPATH"}
            out = subprocess.run(child, env=env, check=True, capture_output=True, text=True).stdout
            cpu[side].append(json.loads(out.strip().splitlines()[-1])["cpu_s"])
    print(f"host load average at end:   {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    what = f"--scaler {args.scaler}" if args.scaler else "trivial policy"
    print(f"sim {args.query} cosine 140 min ({what}), CPU s per run (process time), "
          f"{args.repeat} alternating runs each:")
    for side, vals in cpu.items():
        print(f"  {side:8s} min {min(vals):.3f}  median {statistics.median(vals):.3f}  max {max(vals):.3f}")
    print(f"  ratio this / baseline: median {statistics.median(cpu['this']) / statistics.median(cpu['baseline']):.2f}"
          f"  min {min(cpu['this']) / min(cpu['baseline']):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--query", default="q11")
    ap.add_argument("--arrivals", default="poisson", choices=["poisson", "map", "deterministic"])
    ap.add_argument("--scaler", help="drive the run with this autoscaler through the MAPE loop (e.g. ds2)")
    ap.add_argument("--baseline", type=Path, help="also time this checkout's code, alternating (e.g. a clone of main)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one run's figures, for --baseline
    args = ap.parse_args()
    if args.baseline:
        alternate(args)
        return
    runs = measure(args)
    if args.json:
        import json

        print(json.dumps(runs[-1]))
        return
    tot = [r["total_s"] for r in runs]
    r0 = runs[0]
    policy = f"autoscaler {args.scaler} (MAPE loop)" if args.scaler else "trivial policy, loop 15 s"
    print(f"sim {args.query} cosine 140 min, {int(r0['steps'])} steps, {policy}, arrivals={args.arrivals}, "
          f"{int(r0['actions'])} rescales, {int(r0['rows'])} timeseries rows")
    print(f"wall time per run: median {statistics.median(tot):.3f} s  min {min(tot):.3f} s  "
          f"max {max(tot):.3f} s  (n={len(tot)}, target <= 0.5 s)")
    cpu = [r["cpu_s"] for r in runs]
    print(f"cpu time per run:  median {statistics.median(cpu):.3f} s  min {min(cpu):.3f} s (the machine may be shared)")
    for key in ("step_s", "snapshot_s", "timeseries_s"):
        print(f"  {key:13s} cpu median {statistics.median(r[key] for r in runs):.3f} s")


if __name__ == "__main__":
    main()
