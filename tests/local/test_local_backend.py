"""The local backend end to end on real Kafka + Flink + Prometheus (q1 at a small rate).

Slow (minutes on a loaded 2-core host): brings the stack up once for the module, then checks the
snapshot, an in-place rescale seen in Flink's REST API, a task manager crash being detected and
recovered, and the exported series and artifacts. Port offset 2000; the work directory (installs
are cached there) is `$BENCH_IT_WORKDIR` or /tmp/bench-local-it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config import Experiment
from harness.topology import load_topology
from harness.vocabulary import Metric
from tests.stacks import purged_after_module
from workloads.patterns import build_pattern

pytestmark = pytest.mark.integration

WORKDIR = Path(os.environ.get("BENCH_IT_WORKDIR", "/tmp/bench-local-it"))
_purge_stack_dir = purged_after_module(WORKDIR, 2000)  # the test cleans its own stack directory


@pytest.fixture(scope="module")
def backend() -> Iterator:
    from harness.backends.local.backend import LocalBackend

    exp = Experiment.model_validate({
        "name": "it-local", "backend": "local", "query": "q1",
        "pattern": {"name": "constant", "params": {"rate": 1000, "duration_min": 20}},
        "autoscaler": {"name": "ds2"},
        "local": {"workdir": str(WORKDIR), "port_offset": 2000},
    })
    b = LocalBackend()
    try:
        b.start(exp, build_pattern(exp.pattern, exp.seed, "q1"), load_topology("q1"))
        yield b
    finally:
        b.stop()


def test_snapshot_has_every_operator_with_plausible_values(backend) -> None:
    backend.advance_to(backend.now() + 25)
    snap = backend.snapshot(15)
    assert set(snap.operators) == {"bids_source", "map", "sink"}
    assert snap.parallelism == {"bids_source": 1, "map": 1, "sink": 1}
    assert snap.taskmanagers == 3
    assert snap.input_rate > 100  # the generator produces ~1000/s
    assert snap.throughput > 0
    assert 0 <= snap.op("map").busy_ms_per_s <= 1000
    assert snap.op("map").records_in_per_s > 0
    assert snap.op("bids_source").lag is not None
    assert 0 <= snap.cpu_load <= 1


def test_in_place_rescale_shows_in_flink(backend) -> None:
    result = backend.rescale({"bids_source": 1, "map": 2, "sink": 1}, None)
    assert result.ok, result.error
    assert result.method == "in_place"
    assert result.parallelism["map"] == 2
    job = backend.rest.job(backend.state.job_id)
    assert {v.name: v.parallelism for v in job.vertices}["map"] == 2
    assert len(backend.stack.taskmanager_ids()) == 4
    backend.advance_to(backend.now() + 20)
    snap = backend.snapshot(15)
    assert snap.op("map").parallelism == 2 and len(snap.op("map").subtasks) == 2


def test_taskmanager_crash_is_detected_and_recovered(backend) -> None:
    tm = backend.stack.taskmanager_ids()[-1]
    os.kill(backend.stack.taskmanager_pid(tm), signal.SIGKILL)
    events = []
    start = backend.now()
    while backend.now() - start < 300 and not any(e.kind == "recovery" for e in events):
        backend.advance_to(backend.now() + 5)
        events += backend.drain_events()
    faults = [e for e in events if e.kind == "fault"]
    assert faults and tm in faults[0].reason
    assert any(e.kind == "recovery" for e in events), events
    assert tm not in backend.stack.taskmanager_ids()
    assert len(backend.stack.taskmanager_ids()) == 4


def test_series_and_artifacts(backend, tmp_path: Path) -> None:
    ts = backend.timeseries()
    metrics = set(ts.metric)
    assert {Metric.LATENCY_KAFKA, Metric.TASKMANAGERS, Metric.PARALLELISM, Metric.THROUGHPUT} <= metrics
    par = ts[(ts.metric == Metric.PARALLELISM) & (ts.operator == "map")]
    assert set(par.value) == {1.0, 2.0}
    facts = backend.save_artifacts(tmp_path)
    assert (tmp_path / "prometheus-series.parquet").exists()
    assert (tmp_path / "prometheus-snapshot").is_dir() and any((tmp_path / "prometheus-snapshot").iterdir())
    assert facts["prometheus_series"]["rows"] > 0
    assert backend.facts()["rescale_method"] == "in_place"
