"""Execute a scaling decision on the live local job, three ways, and measure the downtime.

- `in_place`: the adaptive scheduler's per-vertex resource requirements
  (`PUT /jobs/:id/resource-requirements`, FLIP-291). Task managers are added before a scale-up
  (one slot each, so the new subtasks have somewhere to go) and removed after a scale-down,
  once their slot is free. Flink restarts the job from its state in the same cluster.
- `savepoint`: the thesis' method (ch. 6.4.1): stop-with-savepoint, match the task managers to
  the new total, resubmit the job with the new per-operator parallelism from the savepoint.
- `reactive`: whole-cluster scaling (HPA style): every vertex may use any slot (upper bound =
  its max parallelism) and only the number of task managers changes; Flink spreads the slots
  over the slot-sharing groups. This EMULATES Flink's `scheduler-mode: reactive` on the session
  cluster. Reactive mode is the adaptive scheduler with every vertex's parallelism overridden
  to its max parallelism (so the resource requirement is [1, max]) and an unbounded wait for
  resources; a change in task managers makes the scheduler recompute the parallelism from the
  free slots (its slot-sharing slot allocator) and restart the job from its latest checkpoint.
  Opening the bounds through `PUT /jobs/:id/resource-requirements` and then only starting or
  stopping task managers drives exactly that code path, so for whole-cluster scaling the
  resulting parallelism and downtime are the same. What differs: the job is submitted through
  REST instead of being run by an application-mode job manager, and until the first reactive
  action it runs at the experiment's initial parallelism (the stack starts exactly that many
  task managers, so reactive mode would pick the same). Real reactive mode was not adopted
  because it needs an application cluster per job (the job jar on the class path of the job
  manager and of every task manager, a job manager started per run with the query's arguments,
  a separate recovery path re-running the job's main from a checkpoint) while gaining nothing
  the measurements can see. Pinned by tests/local/test_reactive.py.

Vertical scaling sets the cgroup CPU quota of the task managers running an operator (MEAD).
Downtime = time from the request until every subtask of the job runs again, measured by
polling the job manager (and the job's own state timestamps when they are sharper).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from harness.backends.base import RescaleResult
from harness.backends.flink_rest import Bounds, FlinkRest, FlinkRestError, JobDetails, map_vertices
from harness.backends.wallclock import Timing, wait_until_running
from harness.topology import Topology

POLL_S = 0.25


class TaskManagers(Protocol):
    """The slice of LocalStack the executor needs (a fake in unit tests)."""

    def start_taskmanager(self, wait: bool = True) -> str: ...

    def stop_taskmanager(self, tm_id: str) -> None: ...

    def taskmanager_ids(self) -> list[str]: ...

    def set_taskmanager_cpu(self, tm_id: str, cpus: float) -> None: ...


# submit(parallelism, savepoint or None) -> new job id
Submit = Callable[[dict[str, int], "str | None"], str]


@dataclass
class JobState:
    """What the executor believes is running (kept in sync with the job manager)."""

    job_id: str
    vertex_ids: dict[str, str]  # operator -> job-vertex id
    parallelism: dict[str, int]
    cpu_share: dict[str, float] = field(default_factory=dict)


def tm_delta(current: int, target_total: int) -> int:
    """Task managers to start (>0) or stop (<0): one slot each, so one per subtask."""
    return target_total - current


def idle_taskmanagers(all_tms: list[str], busy: set[str], n: int) -> list[str]:
    """Pick `n` task managers to stop: those without a subtask first, newest first."""
    idle = [tm for tm in reversed(all_tms) if tm not in busy]
    return idle[:n]


class Rescaler:
    """Runs one of the three methods against a LocalStack and the Flink REST API."""

    def __init__(
        self,
        rest: FlinkRest,
        tms: TaskManagers,
        topology: Topology,
        submit: Submit,
        savepoint_dir: str | None = None,
        timeout_s: float = 300.0,
        default_cpus: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rest = rest
        self.tms = tms
        self.topology = topology
        self.submit = submit
        self.savepoint_dir = savepoint_dir
        self.timeout_s = timeout_s
        self.default_cpus = default_cpus
        self.clock = clock
        self.sleep = sleep

    # ---- observation --------------------------------------------------------------------------
    def wait_running(self, job_id: str, parallelism: dict[str, int] | None, vertex_ids: dict[str, str] | None,
                     since: float, total: int | None = None) -> Timing:
        """Poll until the job runs every subtask (at `parallelism` if given, or `total` subtasks)."""
        _, timing = wait_until_running(
            lambda: self.rest.job(job_id), lambda job: self._matches(job, parallelism, vertex_ids, total),
            since=since, timeout_s=self.timeout_s, clock=self.clock, sleep=self.sleep, poll_s=POLL_S,
            retry_on=(FlinkRestError,), what=f"job {job_id}")
        return timing

    @staticmethod
    def _matches(job: JobDetails, parallelism: dict[str, int] | None, vertex_ids: dict[str, str] | None,
                 total: int | None) -> bool:
        if not job.running:
            return False
        if parallelism and vertex_ids:
            by_id = {v.id: v.parallelism for v in job.vertices}
            if any(by_id.get(vertex_ids[op]) != p for op, p in parallelism.items() if op in vertex_ids):
                return False
        if total is not None and sum(v.parallelism for v in job.vertices) != total:
            return False
        return True

    def current(self, job_id: str) -> JobState:
        job = self.rest.job(job_id)
        vids = map_vertices(job.vertices, self.topology.names)
        par = {op: job.vertex(vid).parallelism for op, vid in vids.items()}
        return JobState(job_id, vids, par)

    def busy_taskmanagers(self, state: JobState) -> dict[str, list[str]]:
        """operator -> task managers running its subtasks."""
        out: dict[str, list[str]] = {}
        for op, vid in state.vertex_ids.items():
            try:
                out[op] = self.rest.vertex_taskmanagers(state.job_id, vid)
            except FlinkRestError:
                out[op] = []
        return out

    # ---- task managers ------------------------------------------------------------------------
    def _grow(self, total: int) -> list[str]:
        """Start the missing task managers in parallel and wait until they registered.

        JVM start-up is the slow part on a loaded host, so all start at once; each then drops from
        the stack's start-up CPU boost to the configured quota.
        """
        n = tm_delta(len(self.tms.taskmanager_ids()), total)
        started = [self.tms.start_taskmanager(wait=False) for _ in range(max(0, n))]
        if started:
            self.wait_registered(started)
        return started

    def wait_registered(self, tm_ids: list[str]) -> None:
        deadline = self.clock() + self.timeout_s
        while True:
            missing = set(tm_ids) - set(self.rest.taskmanager_ids())
            if not missing:
                break
            if self.clock() > deadline:
                raise TimeoutError(f"task managers {sorted(missing)} did not register in {self.timeout_s:.0f} s")
            self.sleep(POLL_S)
        if self.default_cpus is not None:
            for tm in tm_ids:
                try:
                    self.tms.set_taskmanager_cpu(tm, self.default_cpus)
                except Exception:  # noqa: BLE001 - no cgroups on this host: nothing to drop
                    break

    def _shrink(self, total: int, busy: set[str]) -> None:
        current = self.tms.taskmanager_ids()
        n = -tm_delta(len(current), total)
        if n > 0:
            for tm in idle_taskmanagers(current, busy, n):
                self.tms.stop_taskmanager(tm)

    def apply_cpu(self, state: JobState, cpu_share: dict[str, float]) -> dict[str, float]:
        """Set each operator's task managers to its CPU share; returns what was applied.

        A share is a fraction of the stack's task-manager quota (`default_cpus`), as in `sim`
        where it is a fraction of a subtask's full capacity: share 1.0 = the configured quota,
        so MEAD's levels 0.4..1.0 mean the same on both backends.
        """
        applied: dict[str, float] = {}
        hosts = self.busy_taskmanagers(state)
        alive = set(self.tms.taskmanager_ids())
        base = self.default_cpus if self.default_cpus is not None else 1.0
        for op, share in cpu_share.items():
            for tm in hosts.get(op, []):
                if tm in alive:  # the job manager may still list a task manager that just died
                    self.tms.set_taskmanager_cpu(tm, share * base)
            applied[op] = share
        state.cpu_share.update(applied)
        return applied

    # ---- the three methods ----------------------------------------------------------------------
    def rescale(self, method: str, state: JobState, target: dict[str, int],
                cpu_share: dict[str, float] | None) -> tuple[JobState, RescaleResult]:
        """Apply `target` (and `cpu_share`) with `method`; never raises (errors go into the result)."""
        target = {op: int(target.get(op, state.parallelism.get(op, 1))) for op in self.topology.names}
        try:
            if target == state.parallelism:
                timing = None
                new_state = state
            elif method == "in_place":
                new_state, timing = self._in_place(state, target)
            elif method == "savepoint":
                new_state, timing = self._savepoint(state, target)
            elif method == "reactive":
                new_state, timing = self._reactive(state, target)
            else:
                raise ValueError(f"unknown rescale method {method!r} (in_place, savepoint, reactive)")
            if timing is not None:  # subtasks may have moved: every known share goes to its new hosts
                self.apply_cpu(new_state, {**state.cpu_share, **(cpu_share or {})})
            elif cpu_share:
                self.apply_cpu(new_state, cpu_share)
            return new_state, RescaleResult(
                parallelism=dict(new_state.parallelism),
                cpu_share=dict(new_state.cpu_share),
                downtime_s=timing.downtime_s if timing else 0.0,
                method=method,
            )
        except Exception as exc:  # noqa: BLE001 - a failed rescale is an event, not a crash
            error = f"{type(exc).__name__}: {exc}"
            try:
                state = self._resync(state)
            except Exception as again:  # noqa: BLE001 - recorded with the rescale's own error
                error += f"; re-reading the job's state failed too ({type(again).__name__}: {again}), " \
                         "so the parallelism recorded is the one asked before"
            return state, RescaleResult(
                parallelism=dict(state.parallelism), cpu_share=dict(state.cpu_share), method=method, ok=False,
                error=error,
            )

    def _resync(self, state: JobState) -> JobState:
        ids = self.rest.active_job_ids()
        job_id = ids[0] if ids else state.job_id
        fresh = self.current(job_id)
        fresh.cpu_share = dict(state.cpu_share)
        return fresh

    def _in_place(self, state: JobState, target: dict[str, int]) -> tuple[JobState, Timing]:
        total = sum(target.values())
        self._grow(total)
        t0 = self.clock()
        self.rest.set_resource_requirements(
            state.job_id, {state.vertex_ids[op]: Bounds(1, p) for op, p in target.items()}
        )
        timing = self.wait_running(state.job_id, target, state.vertex_ids, since=t0)
        new = JobState(state.job_id, dict(state.vertex_ids), dict(target), dict(state.cpu_share))
        busy = {tm for tms in self.busy_taskmanagers(new).values() for tm in tms}
        self._shrink(total, busy)
        return new, self._sharpen(timing, state.job_id)

    def _savepoint(self, state: JobState, target: dict[str, int]) -> tuple[JobState, Timing]:
        total = sum(target.values())
        # new task managers start while the job still runs (as for in_place), so the measured
        # downtime is the savepoint + resubmission, not JVM start-up
        self._grow(total)
        t0 = self.clock()
        trigger = self.rest.stop_with_savepoint(state.job_id, self.savepoint_dir, drain=False)
        location = None
        while location is None:
            st = self.rest.savepoint_status(state.job_id, trigger)
            if st.done:
                if st.failure or not st.location:
                    raise RuntimeError(f"stop-with-savepoint failed: {st.failure}")
                location = st.location
            elif self.clock() - t0 > self.timeout_s:
                raise TimeoutError(f"savepoint of {state.job_id} not done after {self.timeout_s:.0f} s")
            else:
                self.sleep(POLL_S)
        self._shrink(total, busy=set())
        job_id = self.submit(target, location)
        new = self.current(job_id)
        timing = self.wait_running(job_id, target, new.vertex_ids, since=t0)
        # the job was not processing from the trigger on
        timing = Timing(t0, t0, timing.running_at)
        return JobState(job_id, new.vertex_ids, dict(target), dict(state.cpu_share)), timing

    def _reactive(self, state: JobState, target: dict[str, int]) -> tuple[JobState, Timing]:
        total = sum(target.values())
        before = sum(state.parallelism.values())
        open_bounds = {
            state.vertex_ids[op.name]: Bounds(1, op.max_parallelism)
            for op in self.topology.operators if op.name in state.vertex_ids
        }
        self.rest.set_resource_requirements(state.job_id, open_bounds)
        t0 = self.clock()
        if total > before:
            self._grow(total)
        else:
            # the job holds every slot: stop task managers and let Flink shrink to what is left
            for tm in idle_taskmanagers(self.tms.taskmanager_ids(), set(), before - total):
                self.tms.stop_taskmanager(tm)
        timing = self.wait_running(state.job_id, None, None, since=t0, total=total)
        new = self.current(state.job_id)
        new.cpu_share = dict(state.cpu_share)
        return new, self._sharpen(timing, state.job_id)

    def _sharpen(self, timing: Timing, job_id: str) -> Timing:
        """Use the job's own RESTARTING -> RUNNING timestamps when polling missed the outage."""
        if timing.down_from is not None:
            return timing
        try:
            ts = self.rest.job(job_id).timestamps
        except FlinkRestError:
            return timing
        restarting, running = ts.get("RESTARTING", 0), ts.get("RUNNING", 0)
        if restarting and running and running > restarting:
            gap = (running - restarting) / 1000.0
            return Timing(timing.requested, timing.running_at - gap, timing.running_at)
        return timing
