"""`rescale_method: reactive` on the real local stack: whole-cluster scaling by task managers only.

Pins the emulation documented in `harness/backends/local/rescale.py` (README, "Rescale methods"):
on the session cluster every vertex's upper bound is opened to its max parallelism once, then only
task managers are started or stopped and Flink's adaptive scheduler spreads the slots over the
slot-sharing groups by itself, as `scheduler-mode: reactive` does in an application cluster.
Port offset 5200; work directory `$BENCH_REACTIVE_WORKDIR` or /tmp/bench-reactive-it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config import Experiment
from harness.topology import load_topology
from tests.stacks import purged_after_module
from workloads.patterns import build_pattern

pytestmark = pytest.mark.integration

WORKDIR = Path(os.environ.get("BENCH_REACTIVE_WORKDIR", "/tmp/bench-reactive-it"))
_purge_stack_dir = purged_after_module(WORKDIR, 5200)  # the test cleans its own stack directory


@pytest.fixture(scope="module")
def backend() -> Iterator:
    from harness.backends.local.backend import LocalBackend

    exp = Experiment.model_validate({
        "name": "it-reactive", "backend": "local", "query": "q1", "rescale_method": "reactive",
        "pattern": {"name": "constant", "params": {"rate": 500, "duration_min": 20}},
        "autoscaler": {"name": "hpa-cpu"},
        "local": {"workdir": str(WORKDIR), "port_offset": 5200},
    })
    b = LocalBackend()
    try:
        b.start(exp, build_pattern(exp.pattern, exp.seed, "q1"), load_topology("q1"))
        yield b
    finally:
        b.stop()


def flink_parallelism(backend) -> dict[str, int]:
    job = backend.rest.job(backend.state.job_id)
    assert job.running
    return {v.id: v.parallelism for v in job.vertices}


def test_adding_a_taskmanager_grows_the_job_by_flinks_own_choice(backend) -> None:
    assert sum(flink_parallelism(backend).values()) == 3
    job_id = backend.state.job_id
    # the request names a total; which vertex gets the new slot is the scheduler's choice
    result = backend.rescale({"bids_source": 1, "map": 2, "sink": 1}, None)
    assert result.ok, result.error
    assert result.method == "reactive"
    assert len(backend.stack.taskmanager_ids()) == 4
    par = flink_parallelism(backend)
    assert sum(par.values()) == 4 and min(par.values()) >= 1
    assert backend.state.job_id == job_id  # the same job, rescaled in place (no resubmission)
    assert sum(result.parallelism.values()) == 4 and result.downtime_s > 0
    # every vertex may use any slot: upper bound = max parallelism, lower bound 1
    bounds = backend.rest.resource_requirements(job_id)
    maxp = {backend.state.vertex_ids[o.name]: o.max_parallelism for o in backend.topology.operators}
    assert {vid: (b.lower, b.upper) for vid, b in bounds.items()} == {vid: (1, m) for vid, m in maxp.items()}


def test_stopping_a_taskmanager_shrinks_the_job(backend) -> None:
    result = backend.rescale({"bids_source": 1, "map": 1, "sink": 1}, None)
    assert result.ok, result.error
    assert len(backend.stack.taskmanager_ids()) == 3
    assert sum(flink_parallelism(backend).values()) == 3
    assert backend.facts()["reactive"].startswith("reactive = adaptive scheduler")
