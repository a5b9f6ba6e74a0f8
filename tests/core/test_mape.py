from typing import ClassVar

import pytest

from autoscalers.base import Autoscaler, AutoscalerConfig, ScalingDecision
from harness.config import Experiment, LoopConfig, ScaleManagerConfig
from harness.mape import MapeLoop
from harness.record import EventLog, read_run_record
from harness.runner import run_experiment
from harness.scaling import ScaleManager
from tests.core.fakes import FakeBackend


class AlwaysUp(Autoscaler):
    """Asks for +1 on the first operator at every decision."""

    name = "always-up"
    Config = AutoscalerConfig
    calls: ClassVar[list[float]] = []

    def decide(self, snapshot, history):
        AlwaysUp.calls.append(snapshot.t)
        first = snapshot.topology.names[0]
        return ScalingDecision(parallelism={first: snapshot.parallelism[first] + 1}, reason="more")


def experiment(**kw):
    base = dict(name="t", backend="sim", query="q1", pattern={"name": "constant"}, autoscaler={"name": "static"})
    return Experiment.model_validate({**base, **kw})


def make_loop(backend, loop_cfg, events):
    AlwaysUp.calls = []
    exp = experiment()
    from harness.topology import load_topology

    backend.start(exp, None, load_topology("q1"))
    return MapeLoop(backend, AlwaysUp(), ScaleManager(ScaleManagerConfig()), loop_cfg, events)


def test_period_and_cooldown_govern_decisions():
    backend, events = FakeBackend(downtime_s=0), EventLog()
    loop = make_loop(backend, LoopConfig(period_s=15, cooldown_s=60), events)
    result = loop.run(300)
    assert result.iterations == 20  # t = 15, 30, ..., 300
    # decisions at 15, then after each action the next allowed is >= 60 s later: 15, 75, 135, 195, 255
    assert AlwaysUp.calls == [15, 75, 135, 195, 255]
    assert result.actions == 5 and len(events.of_kind("action")) == 5
    assert backend.parallelism["bids_source"] == 6
    assert backend.snapshots_taken == 20  # snapshots are taken during the cool-down too


def test_warmup_delays_first_decision():
    backend, events = FakeBackend(downtime_s=0), EventLog()
    loop = make_loop(backend, LoopConfig(period_s=10, cooldown_s=0, warmup_s=35), events)
    loop.run(60)
    assert AlwaysUp.calls[0] == 35


def test_action_event_carries_reason_downtime_and_limits():
    backend, events = FakeBackend(downtime_s=3), EventLog()
    loop = make_loop(backend, LoopConfig(period_s=15, cooldown_s=1000), events)
    loop.run(20)
    (action,) = events.of_kind("action")
    assert action["reason"] == "more"
    assert action["data"]["downtime_s"] == 3 and action["data"]["method"] == "fake"
    assert action["data"]["before"]["bids_source"] == 1 and action["data"]["after"]["bids_source"] == 2
    (decision,) = events.of_kind("decision")
    assert decision["data"]["decide_ms"] >= 0


def test_failed_rescale_is_a_fault_not_an_action():
    backend, events = FakeBackend(fail_rescale=True), EventLog()
    loop = make_loop(backend, LoopConfig(period_s=15, cooldown_s=0), events)
    loop.run(30)
    assert not events.of_kind("action") and len(events.of_kind("fault")) == 2


def test_backend_events_are_recorded():
    backend, events = FakeBackend(crash_at=40), EventLog()
    loop = make_loop(backend, LoopConfig(period_s=15, cooldown_s=0), events)
    loop.run(60)
    assert [e["kind"] for e in events.rows if e["kind"] in ("fault", "recovery")] == ["fault", "recovery"]


def test_runner_writes_a_complete_record(tmp_path):
    backend = FakeBackend(crash_at=40)
    exp = experiment(duration_s=120, loop={"period_s": 15, "cooldown_s": 0})
    run_dir = run_experiment(exp, tmp_path / "run1", backend=backend)
    rec = read_run_record(run_dir)
    assert rec.completed and backend.stopped
    assert rec.meta["flagged"] is True and rec.meta["faults"] == 1
    assert rec.meta["config"]["query"] == "q1" and rec.meta["artifacts"] == {"fake": True}
    assert (run_dir / "fake-artifact.txt").exists()
    assert not list(tmp_path.glob(".*tmp*"))


def test_runner_records_a_crash_as_failed(tmp_path):
    class Exploding(FakeBackend):
        def snapshot(self, window_s):
            raise RuntimeError("prometheus exploded")

    backend = Exploding()
    run_dir = run_experiment(experiment(duration_s=60), tmp_path / "run2", backend=backend)
    rec = read_run_record(run_dir)
    assert not rec.completed and "prometheus exploded" in rec.status
    assert backend.stopped


def test_interrupted_run_leaves_no_complete_record(tmp_path):
    class Interrupted(FakeBackend):
        def advance_to(self, t):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_experiment(experiment(duration_s=60), tmp_path / "run3", backend=Interrupted())
    assert (tmp_path / "run3" / "status").read_text().startswith("interrupted: KeyboardInterrupt")


def test_missed_ticks_after_a_long_step_are_skipped():
    class SlowRescale(FakeBackend):
        pass

    backend, events = SlowRescale(downtime_s=50), EventLog()
    loop = make_loop(backend, LoopConfig(period_s=15, cooldown_s=0), events)
    result = loop.run(120)
    # t=15 decides and rescales for 50 s (now 65): the ticks at 30, 45, 60 are not fired at t=65
    times = [s.t for s in loop.snapshots]
    assert times[:2] == [15, 65]
    assert all(b - a >= 15 for a, b in zip(times, times[1:], strict=False))
    assert result.iterations == len(times)
