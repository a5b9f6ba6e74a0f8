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


class UpOnNow(AlwaysUp):
    """AlwaysUp, declaring that it decides on the current snapshot only."""

    READS_PAST_SNAPSHOTS = False


class ReadsHistoryAnyway(UpOnNow):
    def decide(self, snapshot, history):
        return super().decide(snapshot, history) if len(history.snapshots) >= 0 else None


def _loop(scaler, backend, events, **kw):
    AlwaysUp.calls = []
    from harness.topology import load_topology

    backend.start(experiment(), None, load_topology("q1"))
    return MapeLoop(backend, scaler, ScaleManager(ScaleManagerConfig()), LoopConfig(period_s=15, cooldown_s=60),
                    events, **kw)


class PureFakeBackend(FakeBackend):
    """A backend whose snapshots only read, as the sim's (`PureSnapshots`)."""

    pure = True

    def snapshot_is_pure(self) -> bool:
        return self.pure


def test_no_monitor_step_in_a_cool_down_when_no_one_reads_it():
    backend, events = PureFakeBackend(downtime_s=0), EventLog()
    result = _loop(UpOnNow(), backend, events).run(300)
    # the same decisions as an autoscaler that reads its history (the test above) ...
    assert AlwaysUp.calls == [15, 75, 135, 195, 255] and result.actions == 5 and result.iterations == 20
    # ... but the 15 ticks inside a cool-down took no snapshot
    assert backend.snapshots_taken == 5
    # a live view reads every tick's snapshot: then every tick takes one
    seen = []
    watched = PureFakeBackend(downtime_s=0)
    _loop(UpOnNow(), watched, EventLog(), on_snapshot=lambda s: seen.append(s.t)).run(300)
    assert watched.snapshots_taken == 20 and seen == [15.0 * i for i in range(1, 21)]
    assert AlwaysUp.calls == [15, 75, 135, 195, 255]


@pytest.mark.parametrize("backend", [FakeBackend(downtime_s=0), PureFakeBackend(downtime_s=0)])
def test_a_backend_whose_snapshots_record_samples_or_draw_takes_every_ticks(backend):
    """The local and k8s backends sample the job into the run's time series at each snapshot; the sim draws
    its inter-arrival sample when an autoscaler reads it."""
    backend.pure = False
    _loop(UpOnNow(), backend, EventLog()).run(300)
    assert backend.snapshots_taken == 20 and AlwaysUp.calls == [15, 75, 135, 195, 255]


@pytest.mark.parametrize("backend", [FakeBackend(downtime_s=0), PureFakeBackend(downtime_s=0)])
def test_an_autoscaler_reading_the_past_snapshots_it_declared_it_does_not_read_fails_loudly(backend):
    with pytest.raises(RuntimeError, match="READS_PAST_SNAPSHOTS"):
        _loop(ReadsHistoryAnyway(), backend, EventLog()).run(60)


@pytest.mark.parametrize("name", ["ds2", "dhalion", "hpa-cpu", "hpa-varga", "static", "flink-er", "spl-strategy"])
def test_autoscalers_that_skip_cool_down_snapshots_never_read_past_ones(tmp_path, name):
    """End to end on the sim: a declaration that is wrong turns the run into a failed one (the guard above)."""
    import autoscalers

    assert not autoscalers.autoscaler_class(name).READS_PAST_SNAPSHOTS
    exp = experiment(autoscaler={"name": name}, pattern={"name": "cosine"}, duration_s=1800.0,
                     loop={"cooldown_s": 120.0})
    rec = read_run_record(run_experiment(exp, tmp_path))
    assert rec.completed, rec.status
    actions = int((rec.events_table.column("kind").to_pandas() == "action").sum())
    assert actions >= 1 or name == "static"  # and decided again after a cool-down
