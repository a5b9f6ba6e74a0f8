"""Faults on the real local stack, through the runner: a job manager or a task manager is SIGKILLed mid-run.

Each test runs q1 with the `static` autoscaler through `harness.runner.run_experiment`, kills the
process from the progress callback (the loop's tick, so no thread and no sleep decides the timing)
and checks that the run is completed but flagged, with a `fault` and a `recovery` event, and that the
job processes again afterwards from where it stood (consumer offsets continue). Port offset 5000; the
work directory is `$BENCH_FAULTS_WORKDIR` or /tmp/bench-faults-it (installs are shared and cached).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.backends.local.backend import LocalBackend
from harness.backends.local.flink import JOBMANAGER
from harness.config import Experiment
from harness.record import read_run_record
from harness.runner import run_experiment
from harness.vocabulary import Metric

pytestmark = pytest.mark.integration

WORKDIR = Path(os.environ.get("BENCH_FAULTS_WORKDIR", "/tmp/bench-faults-it"))
KILL_AT_S = 40.0


def experiment(name: str, duration_s: float) -> Experiment:
    return Experiment.model_validate({
        "name": name, "backend": "local", "query": "q1",
        "pattern": {"name": "constant", "params": {"rate": 1000, "duration_min": 20}},
        "autoscaler": {"name": "static"},
        "duration_s": duration_s,
        "loop": {"period_s": 10, "metrics_window_s": 10, "cooldown_s": 0},
        "local": {"workdir": str(WORKDIR), "port_offset": 5000, "checkpoint_interval_s": 5},
    })


def committed_offsets(backend: LocalBackend) -> dict[int, int]:
    """The job's consumer group offsets on `bids` (committed by the Kafka source on each checkpoint)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": backend.stack.kafka_bootstrap, "group.id": backend._group_id,
                  "enable.auto.commit": False})
    try:
        parts = c.list_topics("bids", timeout=10).topics["bids"].partitions
        got = c.committed([TopicPartition("bids", p) for p in parts], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def run_with_kill(tmp_path: Path, name: str, duration_s: float,
                  kill: Callable[[LocalBackend], str]) -> tuple[Path, dict]:
    """Run q1, call `kill` at the first tick after KILL_AT_S; offsets are read then and at later ticks."""
    backend = LocalBackend()
    seen: dict = {"killed": None, "before": None, "after": None}

    def on_progress(t: float, _total: float) -> None:
        if seen["killed"] is None and t >= KILL_AT_S:
            seen["before"] = committed_offsets(backend)
            seen["job_before"] = backend.state.job_id
            seen["killed"] = kill(backend)
        elif seen["killed"] is not None:
            seen["after"] = committed_offsets(backend)
            seen["job_after"] = backend.state.job_id

    run_dir = run_experiment(experiment(name, duration_s), tmp_path / name, on_progress=on_progress,
                             backend=backend)
    return run_dir, seen


def assert_flagged_but_completed_with_recovery(run_dir: Path, fault_word: str) -> tuple[dict, dict]:
    rec = read_run_record(run_dir)
    assert rec.completed, rec.status
    assert rec.meta["flagged"] is True and rec.meta["faults"] >= 1
    faults, recoveries = rec.events_of("fault"), rec.events_of("recovery")
    assert any(fault_word in f["reason"] for f in faults), faults
    assert recoveries, faults
    assert not any("failed" in f["reason"] or "did not recover" in f["reason"] for f in faults), faults
    fault, recovery = faults[0], recoveries[0]
    assert fault["ts"] >= KILL_AT_S and recovery["ts"] > fault["ts"] and recovery["outage_s"] > 0
    # processing again after the recovery (exported from Prometheus: rate of the source's output)
    processing = rec.series(Metric.PROCESSING)  # the outage is downtime in the record, not silently kept clean
    assert (processing[(processing.index >= fault["ts"]) & (processing.index < recovery["ts"])] == 0).all()
    assert processing[processing.index >= recovery["ts"]].iloc[0] == 1
    assert processing[processing.index >= fault["ts"]].iloc[0] == 0
    thr = rec.series(Metric.THROUGHPUT)
    after = thr[thr.index > recovery["ts"] + 5]
    assert len(after) and after.max() > 0, thr
    return fault, recovery


def assert_offsets_continue(seen: dict) -> None:
    # partitions the generator left empty have no committed offset (negative: OFFSET_INVALID)
    before = {p: o for p, o in seen["before"].items() if o >= 0}
    after = seen["after"]
    assert before, seen  # checkpoints committed offsets before the kill
    assert all(after[p] >= before[p] for p in before), seen  # never rewound to an earlier position
    assert sum(after[p] for p in before) > sum(before.values()), seen  # and moved on


def test_jobmanager_crash_restarts_it_and_resubmits_from_the_latest_checkpoint(tmp_path: Path) -> None:
    def kill_jobmanager(backend: LocalBackend) -> str:
        info = backend.stack.sup.get(JOBMANAGER)
        assert info is not None
        os.kill(info.pid, signal.SIGKILL)
        return JOBMANAGER

    run_dir, seen = run_with_kill(tmp_path, "jm-crash", 150, kill_jobmanager)
    fault, recovery = assert_flagged_but_completed_with_recovery(run_dir, "job manager")
    # resubmitted as a new job from a checkpoint of the crashed one, and Flink restored it
    assert seen["job_after"] != seen["job_before"]
    assert recovery["job_id"] == seen["job_after"]
    assert f"/{seen['job_before']}/chk-" in recovery["checkpoint"], recovery
    assert recovery["restored_checkpoint"] is not None, recovery
    assert_offsets_continue(seen)


def test_taskmanager_crash_through_the_runner(tmp_path: Path) -> None:
    def kill_taskmanager(backend: LocalBackend) -> str:
        tm = backend.stack.taskmanager_ids()[-1]
        pid = backend.stack.taskmanager_pid(tm)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        return tm

    run_dir, seen = run_with_kill(tmp_path, "tm-crash", 120, kill_taskmanager)
    fault, recovery = assert_flagged_but_completed_with_recovery(run_dir, seen["killed"])
    assert seen["killed"] in recovery["replaced"]
    assert seen["job_after"] == seen["job_before"]  # Flink restarted the same job from its checkpoint
    assert_offsets_continue(seen)


HARNESS_THAT_DIES = r"""
import sys, time
from pathlib import Path
from harness.backends.local import jobjar
from harness.backends.local.backend import LocalBackend
from harness.backends.local.config import LocalConfig
from harness.backends.local.stack import LocalStack
from harness.topology import load_topology
from workloads.patterns import PatternConfig, build_pattern

stack = LocalStack(LocalConfig(workdir=Path(sys.argv[1]), port_offset=int(sys.argv[2])))
stack.kafka.start(stack.ensure_installed())
deadline = time.monotonic() + 120
while not stack.kafka.healthy():
    assert time.monotonic() < deadline, "kafka not healthy"
    time.sleep(0.5)
stack.ensure_topics(["bids"], 2)
backend = LocalBackend(stack)  # the generator is started exactly as a run starts it
backend.stack, backend.topology, backend.jar = stack, load_topology("q1"), jobjar.ensure_jar()
pattern = build_pattern(PatternConfig(name="constant", params={"rate": 500, "duration_min": 30}), 1, "q1")
gen = backend._start_generator(pattern, 1)
print(gen.pid, flush=True)
time.sleep(3600)
"""


def processes_naming(workdir: Path) -> list[int]:
    """Pids whose command line mentions `workdir` (what `bench down` must leave none of)."""
    marker = (str(workdir) + "/").encode()
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "cmdline").read_bytes():
                    out.append(int(entry.name))
            except OSError:
                pass
    return out


def test_down_stops_the_generator_of_a_harness_that_died(tmp_path: Path) -> None:
    import subprocess
    import sys

    from harness.backends.local.backend import GENERATOR
    from harness.backends.local.supervisor import Supervisor

    workdir, offset = tmp_path / "stack", 5100
    harness = subprocess.Popen([sys.executable, "-c", HARNESS_THAT_DIES, str(workdir), str(offset)],
                               stdout=subprocess.PIPE, text=True)
    try:
        line = harness.stdout.readline() if harness.stdout else ""
        assert line.strip().isdigit(), f"the harness did not start a generator (exit {harness.poll()})"
        gen_pid = int(line)
        info = Supervisor(workdir).get(GENERATOR)
        assert info is not None and info.pid == gen_pid  # known to the stack, not only to its starter
        harness.kill()  # the harness dies without stopping anything
        harness.wait(10)
        assert Path(f"/proc/{gen_pid}").exists() and gen_pid in processes_naming(workdir)
        down = subprocess.run([str(Path(sys.executable).parent / "bench"), "down", "--workdir", str(workdir),
                               "--port-offset", str(offset)], capture_output=True, text=True, timeout=180)
        assert down.returncode == 0, down.stdout + down.stderr
        assert not Path(f"/proc/{gen_pid}").exists() or _zombie(gen_pid)
        assert processes_naming(workdir) == []
    finally:
        if harness.poll() is None:
            harness.kill()
        stack_down(workdir, offset)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def stack_down(workdir: Path, offset: int) -> None:  # whatever the test left behind
    from harness.backends.local.config import LocalConfig
    from harness.backends.local.stack import LocalStack

    LocalStack(LocalConfig(workdir=workdir, port_offset=offset)).down()
