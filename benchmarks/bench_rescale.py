"""Rescale downtime: in place (adaptive scheduler) vs stop-with-savepoint + resubmit, local or k8s.

For each query the job runs at a constant rate until its state has built up, then the middle
operator is rescaled 1 -> 2 -> 1 in place and 1 -> 2 -> 1 with savepoints, on the same running job
(so both methods meet the same state). Prints one row per action: method, direction, downtime
(request until every subtask runs again) and the checkpointed state size just before.

    .venv/bin/python benchmarks/bench_rescale.py --queries q1,q11 --rate 2000 --warmup 40
    .venv/bin/python benchmarks/bench_rescale.py --backend k8s --queries q1   # on `bench k8s up`'s cluster

A downtime that polling could not see (the outage fell between two polls) is reported as the time
since the request, an upper bound, with a warning from the rescaler.

On k8s the savepoint method replaces the application-mode job manager (`--fromSavepoint`), so its
downtime includes a job-manager JVM start; in place only restarts the job inside the running one.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from harness.backends.local.backend import LocalBackend
from harness.backends.local.config import LocalConfig
from harness.backends.local.stack import LocalStack
from harness.config import Experiment
from harness.topology import load_topology
from workloads.patterns import LoadPattern


def backend_for(kind: str, query: str, rate: float, workdir: str, offset: int) -> tuple[Any, Experiment]:
    raw: dict[str, Any] = {
        "name": f"bench-rescale-{query}", "backend": kind, "query": query,
        "pattern": {"name": "constant", "params": {"rate": rate, "duration_min": 60}},
        "autoscaler": {"name": "ds2"},
    }
    if kind == "k8s":
        from harness.backends.k8s.backend import K8sBackend
        from harness.backends.k8s.testcluster.profile import apply_test_cluster_defaults

        raw["k8s"] = {"namespace": f"bench-rescale-{query}"}
        apply_test_cluster_defaults(raw, say=print)
        return K8sBackend(), Experiment.model_validate(raw)
    raw["local"] = {"workdir": workdir, "port_offset": offset}
    return LocalBackend(), Experiment.model_validate(raw)


def run_query(query: str, rate: float, warmup_s: float, settle_s: float, workdir: str, offset: int,
              kind: str = "local", repeats: int = 1) -> list[dict]:
    topo = load_topology(query)
    middle = topo.operators[len(topo.sources)].name
    pattern = LoadPattern("constant", np.full(3600, float(rate)), 1.0)
    b, exp = backend_for(kind, query, rate, workdir, offset)
    rows = []
    try:
        t0 = time.monotonic()
        b.start(exp, pattern, topo)
        print(f"# {query}: stack + job up in {time.monotonic() - t0:.1f} s; warming up {warmup_s:.0f} s", flush=True)
        b.advance_to(warmup_s)
        base = dict(b.state.parallelism)
        for method in ("in_place", "savepoint"):
            for p in (2, 1) * repeats:
                b.method = method
                try:
                    state_bytes = b.rest.checkpoints(b.state.job_id).latest_state_bytes
                except Exception:  # noqa: BLE001
                    state_bytes = None
                res = b.rescale({**base, middle: p}, None)
                rows.append({"query": query, "method": method, "operator": middle, "to": p, "ok": res.ok,
                             "downtime_s": res.downtime_s, "state_bytes": state_bytes, "error": res.error})
                print(f"{query:4s} {method:9s} {middle}->{p}  downtime {res.downtime_s:6.1f} s  "
                      f"state {state_bytes} B  ok={res.ok} {res.error}", flush=True)
                b.advance_to(b.now() + settle_s)
    finally:
        b.stop()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", default="q1,q11")
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--warmup", type=float, default=40)
    ap.add_argument("--settle", type=float, default=20)
    ap.add_argument("--workdir", default="/tmp/bench-local-it")
    ap.add_argument("--port-offset", type=int, default=2000)
    ap.add_argument("--backend", choices=("local", "k8s"), default="local")
    ap.add_argument("--repeats", type=int, default=1, help="1 -> 2 -> 1 cycles per method")
    ap.add_argument("--keep", action="store_true", help="keep the stack directory (default: removed at the end)")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="# %(levelname)s %(name)s: %(message)s")
    rows = []
    try:
        for q in a.queries.split(","):
            rows += run_query(q, a.rate, a.warmup, a.settle, a.workdir, a.port_offset, a.backend, a.repeats)
    finally:
        if not a.keep and a.backend == "local":  # the benchmark cleans its own stack directory (installs stay cached)
            LocalStack(LocalConfig(workdir=Path(a.workdir), port_offset=a.port_offset)).down(purge=True)
    print("\nquery method     mean downtime (s)  n   up (1->2)        down (2->1)")
    for q in a.queries.split(","):
        for m in ("in_place", "savepoint"):
            d = [r for r in rows if r["query"] == q and r["method"] == m and r["ok"]]
            if d:
                up = [round(r["downtime_s"], 1) for r in d if r["to"] == 2]
                down = [round(r["downtime_s"], 1) for r in d if r["to"] == 1]
                print(f"{q:5s} {m:10s} {np.mean([r['downtime_s'] for r in d]):17.1f}  {len(d):<3d} {up!s:16s} {down}")


if __name__ == "__main__":
    main()
