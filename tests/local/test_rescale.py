"""The rescale executor against a fake job manager and fake task managers (no services)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from harness.backends.flink_rest import Bounds, JobDetails, SavepointStatus, Vertex
from harness.backends.local.rescale import JobState, Rescaler, Timing, idle_taskmanagers, tm_delta
from harness.topology import load_topology

OPS = ("bids_source", "map", "sink")
VIDS = {"bids_source": "v0", "map": "v1", "sink": "v2"}


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


@dataclass
class FakeTMs:
    ids: list[str] = field(default_factory=lambda: ["tm-1", "tm-2", "tm-3"])
    n: int = 3
    cpus: dict[str, float] = field(default_factory=dict)

    def start_taskmanager(self, wait: bool = True) -> str:
        self.n += 1
        self.ids.append(f"tm-{self.n}")
        return self.ids[-1]

    def stop_taskmanager(self, tm_id: str) -> None:
        self.ids.remove(tm_id)

    def taskmanager_ids(self) -> list[str]:
        return list(self.ids)

    def set_taskmanager_cpu(self, tm_id: str, cpus: float) -> None:
        self.cpus[tm_id] = cpus


class FakeRest:
    """A job whose parallelism follows the requested bounds after `delay_polls` polls of downtime."""

    def __init__(self, tms: FakeTMs, clock: Clock, deploy_s: float = 2.0) -> None:
        self.tms = tms
        self.clock = clock
        self.deploy_s = deploy_s
        self.par = {"v0": 1, "v1": 1, "v2": 1}
        self.job_id = "J1"
        self.restart_until: float | None = None
        self.requests: list[dict[str, Bounds]] = []
        self.submitted: list[tuple[dict[str, int], str | None]] = []
        self.savepoint_polls = 0

    def job(self, jid: str) -> JobDetails:
        if self.requests and all(b.upper >= 128 for b in self.requests[-1].values()):
            self._fill_slots()  # open bounds: follow the task managers like the adaptive scheduler
        deploying = self.restart_until is not None and self.clock() < self.restart_until
        vs = tuple(
            Vertex(vid, name, p, "DEPLOYING" if deploying else "RUNNING",
                   {"DEPLOYING" if deploying else "RUNNING": p})
            for vid, name, p in [("v0", "Source: bids_source", self.par["v0"]), ("v1", "map", self.par["v1"]),
                                 ("v2", "sink: Writer", self.par["v2"])]
        )
        return JobDetails(jid, "q1", "RUNNING", vs)

    def set_resource_requirements(self, jid: str, bounds: dict[str, Bounds]) -> None:
        self.requests.append(bounds)
        slots = len(self.tms.ids)
        for vid, b in bounds.items():
            self.par[vid] = b.upper
        if sum(self.par.values()) > slots:
            self._fill_slots()
        self.restart_until = self.clock() + self.deploy_s

    def _fill_slots(self) -> None:
        """Spread the slots over the three slot-sharing groups round-robin."""
        par = {"v0": 0, "v1": 0, "v2": 0}
        for i in range(len(self.tms.ids)):
            par[f"v{i % 3}"] += 1
        if par != self.par:
            self.par = par
            self.restart_until = self.clock() + self.deploy_s

    def vertex_taskmanagers(self, jid: str, vid: str) -> list[str]:
        start = sum(self.par[f"v{i}"] for i in range(int(vid[1])))
        return self.tms.ids[start:start + self.par[vid]]

    def stop_with_savepoint(self, jid: str, target: str | None, drain: bool = False) -> str:
        return "T"

    def savepoint_status(self, jid: str, trigger: str) -> SavepointStatus:
        self.savepoint_polls += 1
        return SavepointStatus(done=self.savepoint_polls >= 4, location="file:/sp/1")

    def taskmanager_ids(self) -> list[str]:
        return list(self.tms.ids)

    def active_job_ids(self) -> list[str]:
        return [self.job_id]


def make(deploy_s: float = 2.0) -> tuple[Rescaler, FakeRest, FakeTMs, Clock]:
    clock, tms = Clock(), FakeTMs()
    rest = FakeRest(tms, clock, deploy_s)

    def submit(par: dict[str, int], savepoint: str | None) -> str:
        rest.submitted.append((par, savepoint))
        rest.par = {VIDS[op]: p for op, p in par.items()}
        rest.job_id = f"J{len(rest.submitted) + 1}"
        rest.restart_until = clock() + deploy_s
        return rest.job_id

    r = Rescaler(rest, tms, load_topology("q1"), submit, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    return r, rest, tms, clock


def state() -> JobState:
    return JobState("J1", dict(VIDS), {op: 1 for op in OPS}, {op: 0.25 for op in OPS})


def test_pure_helpers() -> None:
    assert tm_delta(3, 5) == 2 and tm_delta(4, 3) == -1
    assert idle_taskmanagers(["tm-1", "tm-2", "tm-3", "tm-4"], {"tm-1", "tm-3"}, 1) == ["tm-4"]
    assert Timing(10.0, None, 12.0).downtime_s == 2.0  # outage not seen by polling: upper bound
    assert Timing(10.0, 10.5, 12.0).downtime_s == 1.5


def test_in_place_scale_up_starts_tms_first_and_measures_downtime() -> None:
    r, rest, tms, _ = make(deploy_s=2.0)
    new, res = r.rescale("in_place", state(), {"bids_source": 1, "map": 2, "sink": 1}, None)
    assert res.ok, res.error
    assert res.parallelism == {"bids_source": 1, "map": 2, "sink": 1}
    assert len(tms.ids) == 4
    assert rest.requests[-1]["v1"] == Bounds(1, 2)
    assert 1.5 <= res.downtime_s <= 2.5
    assert res.method == "in_place" and new.job_id == "J1"
    # the known CPU shares are re-applied to the (possibly moved) subtasks' task managers
    assert set(tms.cpus) == set(tms.ids) and set(tms.cpus.values()) == {0.25}


def test_in_place_scale_down_stops_idle_tms_after() -> None:
    r, rest, tms, _ = make()
    s = state()
    s, _ = r.rescale("in_place", s, {"bids_source": 1, "map": 3, "sink": 1}, None)
    assert len(tms.ids) == 5
    s, res = r.rescale("in_place", s, {"bids_source": 1, "map": 1, "sink": 1}, None)
    assert res.ok and res.parallelism["map"] == 1
    assert len(tms.ids) == 3


def test_savepoint_resubmits_with_new_parallelism() -> None:
    r, rest, tms, _ = make(deploy_s=3.0)
    new, res = r.rescale("savepoint", state(), {"bids_source": 2, "map": 1, "sink": 1}, None)
    assert res.ok, res.error
    assert rest.submitted == [({"bids_source": 2, "map": 1, "sink": 1}, "file:/sp/1")]
    assert new.job_id == "J2" and len(tms.ids) == 4
    # savepoint polling (3 x 0.25 s) + redeploy (3 s) counts as downtime
    assert res.downtime_s >= 3.5


def test_reactive_changes_only_the_number_of_tms() -> None:
    r, rest, tms, _ = make()
    new, res = r.rescale("reactive", state(), {"bids_source": 2, "map": 2, "sink": 2}, None)
    assert res.ok, res.error
    assert len(tms.ids) == 6
    assert all(b.upper == 128 for b in rest.requests[-1].values())
    assert sum(res.parallelism.values()) == 6


def test_vertical_only_sets_quota_without_downtime() -> None:
    r, rest, tms, _ = make()
    _, res = r.rescale("in_place", state(), {op: 1 for op in OPS}, {"map": 0.6})
    assert res.ok and res.downtime_s == 0.0 and not rest.requests
    assert tms.cpus == {"tm-2": 0.6}
    assert res.cpu_share["map"] == 0.6


def test_failure_is_reported_not_raised() -> None:
    r, rest, tms, clock = make(deploy_s=10_000.0)
    r.timeout_s = 5.0
    _, res = r.rescale("in_place", state(), {"bids_source": 1, "map": 2, "sink": 1}, None)
    assert not res.ok and "TimeoutError" in res.error


def test_a_failed_resync_after_a_failed_rescale_is_in_the_error() -> None:
    from harness.backends.flink_rest import FlinkRestError

    r, rest, tms, clock = make(deploy_s=10_000.0)
    r.timeout_s = 5.0

    def unreachable() -> list[str]:
        raise FlinkRestError("GET /jobs/overview: connection refused")

    rest.active_job_ids = unreachable  # type: ignore[method-assign]
    before = state()
    after, res = r.rescale("in_place", before, {"bids_source": 1, "map": 2, "sink": 1}, None)
    assert not res.ok and "TimeoutError" in res.error
    assert "re-reading the job's state failed too (FlinkRestError: GET /jobs/overview" in res.error
    assert after.parallelism == before.parallelism


def test_cpu_share_is_a_fraction_of_the_stack_quota() -> None:
    r, rest, tms, _ = make()
    r.default_cpus = 0.25  # the stack's task-manager quota
    _, res = r.rescale("in_place", state(), {op: 1 for op in OPS}, {"map": 0.4})
    assert res.ok and tms.cpus["tm-2"] == pytest.approx(0.1)
    assert res.cpu_share["map"] == 0.4
