"""Issue 11's end-to-end runs: `bench run --backend k8s` on the real test cluster.

Kafka, Flink (standalone application mode, one slot per task-manager pod, a CPU limit per pod like
the local quota), Prometheus (pod discovery) and the generator come up as pods; an autoscaler
rescales the job through the backend's real path; the run record has the local backend's form
(timeseries, events with downtime, Prometheus snapshot); nothing is left in the cluster afterwards.

- DS2 on q1 with the cosine pattern, in place (TM Deployment replicas + REST resource requirements);
- HPA-CPU with reactive (whole-cluster) scaling: only the TM Deployment's replicas change;
- a two-cell matrix with `--parallel 2`: two stacks in two namespaces at once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from typer.testing import CliRunner

from harness.backends.k8s.testcluster import addons
from harness.backends.k8s.testcluster.cluster import TestCluster
from harness.cli import app
from harness.record import read_run_record
from harness.vocabulary import Metric

pytestmark = [pytest.mark.integration, pytest.mark.k8s_cluster, pytest.mark.k8s_e2e]

COMMON = ["--set", "loop.period_s=15", "--set", "loop.metrics_window_s=15", "--set", "loop.cooldown_s=45",
          "--set", "loop.warmup_s=30", "--scale", "0.0025"]


def bench_namespaces(cluster: TestCluster) -> list[str]:
    core: Any = client.CoreV1Api(addons.admin_client(cluster.layout.kubeconfig))
    return sorted(n.metadata.name for n in core.list_namespace().items
                  if n.metadata.name.startswith("bench") and n.metadata.name != addons.HARNESS_NAMESPACE)


def run(tmp_path: Path, *args: str) -> Path:
    res = CliRunner().invoke(app, ["run", "--backend", "k8s", "--query", "q1", "--pattern", "cosine",
                                   "--results", str(tmp_path), *COMMON, *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    runs = [p.parent for p in tmp_path.rglob("run.yaml")]
    assert len(runs) == 1, runs
    return runs[0]


def check_record(run_dir: Path) -> Any:
    rec = read_run_record(run_dir)
    assert rec.completed, rec.status
    for metric in (Metric.LATENCY_KAFKA, Metric.TASKMANAGERS, Metric.THROUGHPUT):
        assert len(rec.series(metric)) >= 10, f"{metric} series is too short"
    assert rec.series(Metric.THROUGHPUT).max() > 200
    operators = set(rec.timeseries.loc[rec.timeseries.metric == Metric.PARALLELISM, "operator"])
    assert operators >= {"bids_source", "map", "sink"}
    assert (run_dir / "prometheus-snapshot").is_dir() and any((run_dir / "prometheus-snapshot").iterdir())
    assert (run_dir / "prometheus-series.parquet").exists() and (run_dir / "k8s-manifests.yaml").exists()
    backend = rec.meta["backend"]
    assert backend["backend"] == "k8s" and backend["server_version"].startswith("v1.34")
    return rec


def test_ds2_rescales_q1_in_place_on_the_cluster(k8s_cluster: TestCluster, tmp_path: Path) -> None:
    t0 = time.monotonic()
    run_dir = run(tmp_path, "--scaler", "ds2", "--duration", "200")
    wall = time.monotonic() - t0
    rec = check_record(run_dir)
    actions = rec.events_of("action")
    assert rec.events_of("decision") and actions, "DS2 never rescaled"
    first = actions[0]
    assert first["method"] == "k8s:in_place" and first["after"] != first["before"]
    assert first["downtime_s"] >= 0
    backend = rec.meta["backend"]
    assert backend["rescales"] and backend["rescales"][0]["ok"], backend["rescales"]
    assert rec.series(Metric.TASKMANAGERS).max() > 3
    assert bench_namespaces(k8s_cluster) == [], "the run left its namespace behind"
    print(f"ds2 run: startup {backend['startup_s']:.0f} s, wall {wall:.0f} s, "
          f"downtimes {[round(a['downtime_s'], 1) for a in actions]}")
    assert backend["startup_s"] < 180, f"stack took {backend['startup_s']:.0f} s to run the job (target 3 min)"


def test_hpa_cpu_scales_the_whole_cluster_reactively(k8s_cluster: TestCluster, tmp_path: Path) -> None:
    run_dir = run(tmp_path, "--scaler", "hpa-cpu", "--duration", "150", "--set", "rescale_method=reactive")
    rec = check_record(run_dir)
    for action in rec.events_of("action"):
        assert action["method"] == "k8s:reactive"
    assert rec.meta["backend"]["rescale_method"] == "reactive"
    assert bench_namespaces(k8s_cluster) == []


def test_matrix_runs_two_cells_at_once_in_two_namespaces(k8s_cluster: TestCluster, tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(yaml.safe_dump({
        "name": "k8s-par", "base": {"backend": "k8s", "query": "q1", "autoscaler": {"name": "static"},
                                    "pattern": {"name": "constant", "scale": 1.0,
                                                "params": {"rate": 500, "duration_min": 2}},
                                    "duration_s": 60},
        "repetitions": 2,
    }))
    res = CliRunner().invoke(app, ["matrix", str(matrix), "--parallel", "2", "--results", str(tmp_path / "r")],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    runs = [read_run_record(p.parent) for p in (tmp_path / "r").rglob("run.yaml")]
    assert len(runs) == 2 and all(r.completed for r in runs)
    namespaces = {r.meta["backend"]["k8s"]["namespace"] for r in runs}
    assert len(namespaces) == 2, namespaces
    started = sorted((r.meta["started_at"], r.meta["finished_at"]) for r in runs)
    assert started[1][0] < started[0][1], f"the cells did not overlap: {started}"
    assert bench_namespaces(k8s_cluster) == []
