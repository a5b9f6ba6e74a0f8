"""Pure parts of the local backend: checkpoint lookup for job-manager recovery, export queries."""

from __future__ import annotations

import os
from pathlib import Path

from harness.backends.local.backend import LocalBackend, latest_checkpoint
from harness.topology import load_topology
from harness.vocabulary import Metric


def test_latest_complete_checkpoint_across_jobs(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path / "none") is None
    for i, (job, chk, complete) in enumerate([("a", 3, True), ("b", 7, True), ("b", 8, False)]):
        d = tmp_path / job / f"chk-{chk}"
        d.mkdir(parents=True)
        if complete:
            (d / "_metadata").write_text("x")
            os.utime(d / "_metadata", (1000 + i, 1000 + i))
    assert latest_checkpoint(tmp_path) == tmp_path / "b" / "chk-7"  # chk-8 has no _metadata yet
    # only this run's jobs: a newer checkpoint of another run in the same work directory is ignored
    assert latest_checkpoint(tmp_path, ["a"]) == tmp_path / "a" / "chk-3"
    assert latest_checkpoint(tmp_path, ["c"]) is None


def test_export_queries_cover_the_record_metrics_and_all_vertex_ids() -> None:
    b = LocalBackend()
    b.topology = load_topology("q11")
    b._vertex_ids_seen = {"bids_source": {"s1"}, "session_window": {"w1", "w2"}, "sink": {"k1"}}
    q = b._export_queries(5.0)
    assert {m for m, op in q if op == ""} >= {Metric.INPUT_RATE, Metric.THROUGHPUT, Metric.LAG, Metric.LATENCY_KAFKA,
                                              Metric.TASKMANAGERS}
    for op in ("bids_source", "session_window", "sink"):
        assert {(m, op) for m in (Metric.RECORDS_IN, Metric.RECORDS_OUT, Metric.BUSY, Metric.BACKPRESSURED)} <= set(q)
    assert 'task_id=~"w1|w2"' in q[(Metric.BUSY, "session_window")]
    assert 'task_id=~"s1"' in q[(Metric.THROUGHPUT, "")]


def test_fault_injection_wiring_on_fakes(tmp_path: Path) -> None:
    """inject_fault/end_fault call the stack's public API; the generator is really paused and resumed."""
    import signal
    import subprocess
    import time
    from types import SimpleNamespace

    from harness.backends.local.rescale import JobState
    from harness.faults import FaultSpec
    from harness.vocabulary import EventKind

    calls: list[str] = []
    stack = SimpleNamespace(
        taskmanager_ids=lambda: ["tm-1", "tm-2"], kill=lambda name: calls.append(f"kill {name}") or 4242,
        stop_kafka=lambda: calls.append("stop kafka"), start_kafka=lambda: calls.append("start kafka") or 1.5,
        stop_prometheus=lambda: calls.append("stop prometheus"),
        start_prometheus=lambda: calls.append("start prometheus") or 2.0)
    b = LocalBackend()
    b.stack = stack  # type: ignore[assignment]
    b.rescaler = SimpleNamespace(busy_taskmanagers=lambda state: {"map": ["tm-1"], "sink": ["tm-2"]})  # type: ignore[assignment]
    b.rest = SimpleNamespace(job=lambda jid: SimpleNamespace(running=True))  # type: ignore[assignment]
    b.state = JobState("j1", {"map": "v1"}, {"map": 2}, {"map": 1.0})
    b._t0 = time.monotonic()
    gen = subprocess.Popen(["sleep", "30"], start_new_session=True)
    b._generator = SimpleNamespace(pid=gen.pid)
    try:
        assert b.inject_fault(FaultSpec(kind="kill-taskmanager", at_s=1))["process"] == "tm-2"
        assert b._injected_tms == {"tm-2"}
        assert b.inject_fault(FaultSpec(kind="kill-jobmanager", at_s=1))["pid"] == 4242 and b._injected_jm
        b.inject_fault(FaultSpec(kind="stop-prometheus", at_s=1, for_s=5))
        assert b.end_fault(FaultSpec(kind="stop-prometheus", at_s=1, for_s=5)) == {"restart_s": 2.0}
        b.inject_fault(FaultSpec(kind="restart-kafka", at_s=1, for_s=5))
        b.end_fault(FaultSpec(kind="restart-kafka", at_s=1, for_s=5))
        b._check_job_back()
        assert calls == ["kill tm-2", "kill jobmanager", "stop prometheus", "start prometheus", "stop kafka",
                         "start kafka"]
        recs = [e for e in b._events if e.kind == EventKind.RECOVERY]
        assert [e.data["fault_kind"] for e in recs] == ["stop-prometheus", "restart-kafka"]
        b.inject_fault(FaultSpec(kind="pause-generator", at_s=1, for_s=5))
        time.sleep(0.2)
        assert Path(f"/proc/{gen.pid}/stat").read_text().split(") ")[1][0] == "T"  # stopped
        b.end_fault(FaultSpec(kind="pause-generator", at_s=1, for_s=5))
        time.sleep(0.2)
        assert Path(f"/proc/{gen.pid}/stat").read_text().split(") ")[1][0] in "SR"  # running again
    finally:
        os.killpg(gen.pid, signal.SIGKILL)
        gen.wait(5)


def test_a_failed_job_manager_restart_is_retried_within_one_recovery(tmp_path: Path) -> None:
    """An injected job-manager kill whose first restart dies (as a JVM that cannot bind its port does) is
    one loss and one recovery: a warning for the failed attempt, then a `recovery` event that still names
    the injected fault and measures the outage from the loss. After the last attempt it is a fault."""
    from types import SimpleNamespace

    from harness.backends.local import backend as backend_mod
    from harness.backends.local.errors import StackError
    from harness.backends.local.rescale import JobState
    from harness.vocabulary import EventKind

    def make(fail_first: int) -> tuple[LocalBackend, dict[str, float], list[str]]:
        clock = {"t": 100.0}
        attempts: list[str] = []
        alive = {"jm": True}

        def restart_jobmanager(taskmanagers: int) -> float:
            attempts.append("restart")
            clock["t"] += 3.0
            if len(attempts) <= fail_first:
                raise StackError("jobmanager", "exited at start-up\nAddress already in use")
            alive["jm"] = True
            return 3.0

        stack = SimpleNamespace(
            sup=SimpleNamespace(alive=lambda name: alive["jm"]), flink=SimpleNamespace(dir=tmp_path),
            restart_jobmanager=restart_jobmanager, taskmanager_ids=lambda: ["tm-1"],
            kill=lambda name: alive.update(jm=False) or 4242)
        b = LocalBackend()
        b.stack = stack  # type: ignore[assignment]
        b.now = lambda: clock["t"]  # type: ignore[method-assign]
        b._sample = lambda downtime: None  # type: ignore[method-assign]
        b._submit = lambda parallelism, savepoint: "job-2"  # type: ignore[method-assign]
        b.state = JobState("job-1", {"map": "v1"}, {"map": 1}, {"map": 1.0})
        b.rest = SimpleNamespace(active_job_ids=lambda: [], cancel=lambda jid: None,  # type: ignore[assignment]
                                 checkpoints=lambda jid: SimpleNamespace(latest_restored_id=7))
        b.rescaler = SimpleNamespace(  # type: ignore[assignment]
            current=lambda jid: JobState(jid, {"map": "v2"}, {"map": 1}),
            wait_running=lambda *a, **k: None, apply_cpu=lambda state, shares: None)
        return b, clock, attempts

    from harness.faults import FaultKind, FaultSpec

    b, clock, attempts = make(fail_first=1)
    b.inject_fault(FaultSpec(kind=FaultKind.KILL_JOBMANAGER, at_s=100))
    b._recover_jobmanager()  # the first restart dies
    assert b._jm_recovery is not None and b.state.job_id == "job-1"
    b._recover_jobmanager()  # the next supervision tick retries
    kinds = [(e.kind, e.reason.split(":")[0]) for e in b._events]
    assert kinds == [(EventKind.FAULT, "job manager died"),
                     (EventKind.WARNING, "job manager restart attempt 1 failed, retrying"),
                     (EventKind.RECOVERY, "job manager restarted; job resubmitted from its latest checkpoint")]
    rec = b._events[-1].data
    assert rec["fault_kind"] == "kill-jobmanager" and rec["attempts"] == 2 and rec["outage_s"] == 6.0
    assert rec["previous_job_id"] == "job-1" and rec["job_id"] == "job-2" and b._jm_recovery is None
    assert b._events[0].data["injected"] is True

    b, clock, attempts = make(fail_first=backend_mod.JM_RESTART_ATTEMPTS)
    b.stack.kill("jobmanager")  # a loss nobody injected
    for _ in range(backend_mod.JM_RESTART_ATTEMPTS):
        b._recover_jobmanager()
    assert len(attempts) == backend_mod.JM_RESTART_ATTEMPTS and b._jm_recovery is None
    assert b._events[-1].kind == EventKind.FAULT
    assert b._events[-1].reason.startswith(f"job manager recovery failed after {backend_mod.JM_RESTART_ATTEMPTS}")
    assert "injected" not in b._events[0].data
    assert not [e for e in b._events if e.kind == EventKind.RECOVERY]
