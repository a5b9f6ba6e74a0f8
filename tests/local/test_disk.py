"""Runs leave no trace on disk (issue 13): short local runs back to back on one stack directory.

Before this, the integration tests' stack directory held 2.1 GB after one session: Kafka data of every
run, one Flink scratch directory per task manager ever started, a copy of the job jar per submission.
Stated bound: after every run (each ends with the stack's `down`) the stack directory holds at most
BOUND_MB, and three runs grow it by at most GROWTH_MB (Prometheus' samples and the kept logs); no
benchmark topic, scratch directory, checkpoint or second jar copy is left.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.backends.local.stack import directory_bytes
from harness.config import Experiment
from harness.record import read_run_record
from harness.runner import run_experiment
from harness.topology import load_topology
from tests.stacks import purged_after_module
from workloads.patterns import build_pattern

pytestmark = pytest.mark.integration

WORKDIR = Path(os.environ.get("BENCH_DISK_WORKDIR", "/tmp/bench-disk-it"))
PORT_OFFSET = 5400
BOUND_MB = 60  # configs, one job jar (~24 MB), Prometheus' data, Kafka's metadata, logs (measured: ~25 MB)
GROWTH_MB = 5  # measured: 0.5 MB a run
_purge_stack_dir = purged_after_module(WORKDIR, PORT_OFFSET)
MB = 1 << 20


def experiment(name: str, parallelism: int | dict[str, int], duration_s: float) -> Experiment:
    return Experiment.model_validate({
        "name": name, "backend": "local", "query": "q1",
        "pattern": {"name": "constant", "params": {"rate": 2000, "duration_min": 10}},
        "autoscaler": {"name": "static"},
        "initial_parallelism": parallelism,
        "duration_s": duration_s,
        "loop": {"period_s": 10, "metrics_window_s": 10, "cooldown_s": 0},
        "local": {"workdir": str(WORKDIR), "port_offset": PORT_OFFSET, "checkpoint_interval_s": 5},
    })


def leftovers(root: Path) -> dict[str, list[str]]:
    """What a stopped stack must not keep."""
    flink, kafka = root / "flink", root / "kafka" / "data"
    return {
        "scratch": sorted(p.name for p in (flink / "tmp").glob("*")),
        "checkpoints": sorted(p.name for p in (flink / "checkpoints").glob("*")),
        "savepoints": sorted(p.name for p in (flink / "savepoints").glob("*")),
        "topic data": sorted(p.name for p in kafka.glob("*") if p.is_dir() and not p.name.startswith("__")),
    }


def jar_copies(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "flink" / "uploads").rglob("*.jar"))


def test_back_to_back_runs_stay_within_a_bound(tmp_path: Path) -> None:
    from harness.backends.local.backend import LocalBackend

    sizes: list[int] = []

    # run 1: a whole run through the runner (it ends with the stack's down)
    run = run_experiment(experiment("it-disk-1", 1, 25), tmp_path / "r1")
    assert read_run_record(run).completed
    sizes.append(directory_bytes(WORKDIR))

    # run 2: the backend by hand, to see a task manager's scratch go when it stops mid-run
    exp = experiment("it-disk-2", {"bids_source": 1, "map": 2, "sink": 1}, 60)
    backend = LocalBackend()
    try:
        backend.start(exp, build_pattern(exp.pattern, exp.seed, "q1"), load_topology("q1"))
        backend.advance_to(15)
        live = backend.stack.taskmanager_ids()
        assert len(live) == 4
        scratch = {tm: backend.stack.flink.scratch_dir(tm) for tm in live}
        assert all(d.is_dir() for d in scratch.values()), scratch  # each task manager has its own
        res = backend.rescale({"bids_source": 1, "map": 1, "sink": 1}, None)
        assert res.ok, res.error
        stopped = set(live) - set(backend.stack.taskmanager_ids())
        assert len(stopped) == 1
        assert not any(scratch[tm].exists() for tm in stopped), "a stopped task manager's scratch is left"
        assert all(scratch[tm].is_dir() for tm in backend.stack.taskmanager_ids())
        assert len(jar_copies(WORKDIR)) == 1
    finally:
        backend.stop()  # ends with the stack's down
    sizes.append(directory_bytes(WORKDIR))

    # run 3: the runner again, on the same directory
    run = run_experiment(experiment("it-disk-3", 1, 25), tmp_path / "r3")
    assert read_run_record(run).completed
    sizes.append(directory_bytes(WORKDIR))

    report = ", ".join(f"after run {i + 1}: {s / MB:.1f} MB" for i, s in enumerate(sizes))
    print(f"stack directory {WORKDIR}: {report}")
    assert max(sizes) <= BOUND_MB * MB, report
    assert sizes[-1] - sizes[0] <= GROWTH_MB * MB, report
    assert leftovers(WORKDIR) == {"scratch": [], "checkpoints": [], "savepoints": [], "topic data": []}
    assert len(jar_copies(WORKDIR)) == 1, jar_copies(WORKDIR)  # three runs, five submissions, one upload
