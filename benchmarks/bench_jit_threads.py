"""Where a q1 source task manager's CPU goes, thread by thread, at a fraction of a CPU.

Why: the DS2 +-1 real-stack test needs a capacity that settles within its windows. At 0.1 CPU per
task manager, HotSpot's C2 compiler threads took a third to a half of a source task manager's quota
for minutes after a start or a rescale; with `local.taskmanager_jit: c1` they take a few per cent.
The job runs q1 at a constant rate; the source's CPU share is lowered, then its parallelism raised;
each phase prints the source task managers' CPU per thread name (/proc/<pid>/task/*/stat) over a window.

    .venv/bin/python benchmarks/bench_jit_threads.py --jit tiered
    .venv/bin/python benchmarks/bench_jit_threads.py --jit c1
"""

from __future__ import annotations

import argparse
import collections
import os
import time
from pathlib import Path

from harness.backends.local.backend import LocalBackend
from harness.backends.local.stack import LocalStack
from harness.config import Experiment
from harness.topology import load_topology
from workloads.patterns import build_pattern

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu_s(stack: LocalStack, tm: str) -> dict[tuple[str, str], float]:
    """CPU seconds used so far by each thread (id, name) of one task manager's processes."""
    out: dict[tuple[str, str], float] = {}
    for pid in stack.cgroups.group(tm).pids():
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                name = (task / "comm").read_text().strip()
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # the thread ended meanwhile
            out[(task.name, name)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def per_name(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float],
             took: float) -> dict[str, float]:
    """CPU per thread name over the window. The JVM starts and stops compiler threads on demand: a thread
    that ended inside the window is left out (its last part is unknown), one that started counts from 0."""
    rate: collections.Counter[str] = collections.Counter()
    for (tid, name), cpu in after.items():
        rate[name] += (cpu - before.get((tid, name), 0.0)) / took
    return dict(rate)


def phase(b: LocalBackend, stack: LocalStack, label: str, window_s: float, top: int) -> None:
    source = b.topology.sources[0].name
    tms = b.rescaler.busy_taskmanagers(b.state).get(source, [])
    before = {tm: thread_cpu_s(stack, tm) for tm in tms}
    t0 = time.monotonic()
    b.advance_to(b.now() + window_s)
    took = time.monotonic() - t0
    s = b.snapshot(window_s)
    print(f"{label}: input {s.input_rate:.0f}/s, throughput {s.throughput:.0f}/s, "
          f"source busy {s.operators[source].busy_ms_per_s:.0f} ms/s", flush=True)
    for tm in tms:
        rate = per_name(before[tm], thread_cpu_s(stack, tm), took)
        compiler = sum(v for k, v in rate.items() if "Compiler" in k)
        busiest = sorted(rate.items(), key=lambda kv: -kv[1])[:top]
        print(f"  {tm}: {sum(rate.values()):.3f} CPU, compiler threads {compiler:.3f} "
              f"({compiler / max(sum(rate.values()), 1e-9):.0%}); " + ", ".join(f"{k}={v:.3f}" for k, v in busiest),
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jit", choices=["tiered", "c1"], default="tiered")
    ap.add_argument("--rate", type=float, default=12_000)
    ap.add_argument("--share", type=float, default=0.4, help="the source's CPU share of the task manager quota")
    ap.add_argument("--parallelism", type=int, default=3, help="the source's parallelism in the last phases")
    ap.add_argument("--window", type=float, default=20)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--workdir", default="/tmp/bench-jit")
    ap.add_argument("--port-offset", type=int, default=6700)
    a = ap.parse_args()
    exp = Experiment.model_validate({
        "name": "bench-jit-threads", "backend": "local", "query": "q1",
        "pattern": {"name": "constant", "params": {"rate": a.rate, "duration_min": 30}},
        "autoscaler": {"name": "ds2"}, "duration_s": 1800,
        "local": {"workdir": a.workdir, "port_offset": a.port_offset, "taskmanager_jit": a.jit},
    })
    stack = LocalStack(exp.local)
    b = LocalBackend(stack, keep_stack_up=True)
    try:
        b.start(exp, build_pattern(exp.pattern, exp.seed, "q1"), load_topology("q1"))
        source = b.topology.sources[0].name
        quota = exp.local.taskmanager_cpu_quota
        print(f"# q1 at {a.rate:.0f}/s, jit {a.jit}, task manager quota {quota} CPU")
        b.advance_to(60)
        phase(b, stack, "full quota, source 1, t=60 s", a.window, a.top)
        assert b.rescale({}, {source: a.share}).ok
        b.advance_to(b.now() + 20)
        phase(b, stack, f"share {a.share} ({a.share * quota:.3f} CPU), source 1", a.window, a.top)
        assert b.rescale({**b.state.parallelism, source: a.parallelism}, None).ok
        b.advance_to(b.now() + 30)
        phase(b, stack, f"share {a.share}, source {a.parallelism}, 30 s after the rescale", a.window, a.top)
        phase(b, stack, f"share {a.share}, source {a.parallelism}, 50 s after the rescale", a.window, a.top)
    finally:
        b.stop()
        stack.down(purge=True)  # the benchmark cleans its own stack directory (installs stay cached)


if __name__ == "__main__":
    main()
