"""Time `bench up` to ready once installed (issue 3 target: at most 90 s).

Ready = Kafka answers metadata, the job manager's REST API answers, every task manager registered,
Prometheus ready; with --query also the query job submitted and every subtask RUNNING. Installation
is done (and timed) first so the figure is the warm start-up a researcher waits for on every run.
Prints per-service times, the total, and how long `down` took. Uses its own work directory and port
offset, so it can run beside other stacks.

    .venv/bin/python benchmarks/bench_up.py [--taskmanagers 3] [--query q1] [--repeat 1] [--port-offset 3200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from harness.backends.local.config import LocalConfig
from harness.backends.local.stack import LocalStack


def wait_job_running(stack: LocalStack, jid: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stack.rest.job(jid).running:
            return
        time.sleep(0.25)
    raise RuntimeError(f"job {jid} not running after {timeout:.0f} s")


def one(stack: LocalStack, taskmanagers: int, query: str | None) -> dict[str, float]:
    marks: dict[str, float] = {}
    t0 = time.perf_counter()

    def progress(msg: str) -> None:
        if " healthy after " in msg:
            marks[msg.split(" healthy after ")[0]] = time.perf_counter() - t0

    try:
        stack.up(taskmanagers, progress=progress, keep_boost=bool(query))
        marks["up (all healthy)"] = time.perf_counter() - t0
        if query:
            marks.update(submit(stack, query, t0))
    except BaseException:
        stack.down()
        raise
    t1 = time.perf_counter()
    stack.down()
    marks["down"] = time.perf_counter() - t1
    return marks


def submit(stack: LocalStack, query: str, t0: float) -> dict[str, float]:
    from harness.backends.local import jobjar
    from harness.topology import load_topology

    topo = load_topology(query)
    stack.ensure_topics(list(topo.topics), topo.partitions)
    main, args = jobjar.job_command(query, stack.kafka_bootstrap, {op: 1 for op in topo.names})
    jid = stack.submit_job(jobjar.ensure_jar(), main, args)
    wait_job_running(stack, jid)
    stack.end_startup_boost()
    return {f"up + {query} running": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taskmanagers", type=int, default=3)
    ap.add_argument("--query", default=None, help="also submit this query (needs the job jar)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--port-offset", type=int, default=3200)
    ap.add_argument("--workdir", type=Path, default=None, help="default: a fresh temporary directory")
    a = ap.parse_args()
    if a.workdir is None:
        with tempfile.TemporaryDirectory(prefix="bench-up-") as tmp:
            run(a, Path(tmp))
    else:
        run(a, a.workdir)


def run(a: argparse.Namespace, workdir: Path) -> None:
    stack = LocalStack(LocalConfig(workdir=workdir, port_offset=a.port_offset, startup_timeout_s=300))
    t = time.perf_counter()
    stack.ensure_installed(progress=lambda m: print(f"  install: {m}"))
    print(f"install check: {time.perf_counter() - t:.1f} s  versions: {stack.versions()}")
    if a.query:
        from harness.backends.local import jobjar

        t = time.perf_counter()
        jobjar.ensure_jar()
        print(f"job jar ready: {time.perf_counter() - t:.1f} s")
    runs = []
    for i in range(a.repeat):
        marks = one(stack, a.taskmanagers, a.query)
        runs.append(marks)
        print(f"run {i + 1}: " + "  ".join(f"{k} {v:.1f} s" for k, v in marks.items()))
    key = f"up + {a.query} running" if a.query else "up (all healthy)"
    vals = [r[key] for r in runs]
    load = os.getloadavg()[0]
    print(f"bench up to ready ({a.taskmanagers} TMs{', ' + a.query if a.query else ''}): "
          f"median {statistics.median(vals):.1f} s, min {min(vals):.1f} s, max {max(vals):.1f} s "
          f"over {len(vals)} run(s); target <= 90 s; host load average {load:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
