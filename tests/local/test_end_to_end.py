"""Issue 3's CI integration test: a real autoscaler rescales a real q1 job, end to end.

Brings the whole local stack up (Kafka, Flink, Prometheus, the generator), runs a q1
experiment of at least 3 minutes in which DS2 (a real autoscaler, through the same MAPE
loop and scale manager as every run) performs at least one real in-place rescale, then
checks the run record: latency and task-manager series, parallelism changed in Flink's
REST API, decision/action events, the Prometheus TSDB snapshot; and that nothing is
left running afterwards. Port offset 6000; work directory $BENCH_E2E_WORKDIR or
/tmp/bench-e2e-it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness.config import Experiment
from harness.record import read_run_record
from harness.runner import run_experiment
from harness.vocabulary import Metric
from tests.stacks import purged_after_module

pytestmark = pytest.mark.integration

WORKDIR = Path(os.environ.get("BENCH_E2E_WORKDIR", "/tmp/bench-e2e-it"))
_purge_stack_dir = purged_after_module(WORKDIR, 6000)  # the test cleans its own stack directory


def _backend_class() -> Any:
    from harness.backends.local.backend import LocalBackend

    class ObservedLocalBackend(LocalBackend):
        """Reads the job's parallelism from Flink's REST API just before teardown."""

        rest_parallelism: dict[str, int] = {}

        def stop(self) -> None:
            try:
                job = self.rest.job(self.state.job_id)
                names = {vid: op for op, vid in self.state.vertex_ids.items()}
                type(self).rest_parallelism = {names[v.id]: v.parallelism for v in job.vertices if v.id in names}
            finally:
                super().stop()

    return ObservedLocalBackend


def test_ds2_rescales_a_real_q1_job(tmp_path: Path) -> None:
    exp = Experiment.model_validate({
        "name": "it-e2e-ds2-q1",
        "backend": "local",
        "query": "q1",
        # 3,000 records/s: more than one 0.25-CPU source subtask takes, so DS2 must scale out
        "pattern": {"name": "constant", "params": {"rate": 3000, "duration_min": 4}},
        "autoscaler": {"name": "ds2"},
        "loop": {"period_s": 15, "metrics_window_s": 15, "cooldown_s": 60, "warmup_s": 30},
        "scale_manager": {"max_taskmanagers": 6},
        "initial_parallelism": 1,
        "duration_s": 150,  # the first decision comes at 45-75 s (warm-up, then the first windows DS2 can read)
        "local": {"workdir": str(WORKDIR), "port_offset": 6000},
    })
    backend_cls = _backend_class()
    run_dir = run_experiment(exp, tmp_path / "run", backend=backend_cls())
    rec = read_run_record(run_dir)

    assert rec.completed, rec.status
    # series present
    for metric in (Metric.LATENCY_KAFKA, Metric.TASKMANAGERS, Metric.THROUGHPUT):
        assert len(rec.series(metric)) >= 10, f"{metric} series is too short"
    assert rec.series(Metric.THROUGHPUT).max() > 500
    assert rec.series(Metric.LATENCY_KAFKA).dropna().ge(0).all()
    operators = set(rec.timeseries.loc[rec.timeseries.metric == Metric.PARALLELISM, "operator"])
    assert operators >= {"bids_source", "map", "sink"}
    # a real autoscaler decided and the scale manager applied it on the real job
    actions = rec.events_of("action")
    assert rec.events_of("decision") and actions
    first = actions[0]
    assert first["method"] == "in_place" and first["after"] != first["before"]
    assert first["downtime_s"] >= 0
    # Flink's REST API agrees with the last applied action
    assert backend_cls.rest_parallelism == actions[-1]["after"]
    assert backend_cls.rest_parallelism != {"bids_source": 1, "map": 1, "sink": 1}
    assert rec.series(Metric.TASKMANAGERS).max() > 3
    # Prometheus snapshot and the raw series came along
    assert (run_dir / "prometheus-snapshot").is_dir() and any((run_dir / "prometheus-snapshot").iterdir())
    assert (run_dir / "prometheus-series.parquet").exists()
    assert rec.meta["backend"]["versions"]["flink"] == "2.2.1"
    # nothing of this stack is left running
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if str(WORKDIR) in " ".join(p.info["cmdline"] or [])]
    assert not leftovers, [p.info["cmdline"][:3] for p in leftovers]
