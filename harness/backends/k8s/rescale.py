"""Execute a scaling decision on the job running in Kubernetes, and measure the downtime.

Methods (experiment.rescale_method; the standalone path unless noted):

- `in_place`: grow the task-manager Deployment to the new total first (one slot per pod, so the new
  subtasks have somewhere to go) and wait until the pods registered with the job manager; then set
  the per-vertex resource requirements through the Flink REST API (`PUT /jobs/:id/resource-requirements`,
  adaptive scheduler, FLIP-291); after a scale-down, mark the idle pods with a low
  `pod-deletion-cost` and shrink the Deployment, so no pod that still runs a subtask is killed;
- `reactive`: open upper bounds (every vertex may take any slot) and change only the replica count
  (HPA style, like the local backend's reactive mode);
- operator path (any method): merge-patch the FlinkDeployment's `pipeline.jobvertex-parallelism-overrides`
  (vertex ids from the REST API); the operator applies it (in place with the adaptive scheduler, or by
  its upgrade mode) and Flink's native resource manager starts/stops the task-manager pods;
- `savepoint` (the thesis' method, ch. 6.4.1): grow the task managers, stop the job with a savepoint
  (REST), then replace the application-mode job manager with one that runs the job at the new
  parallelism `--fromSavepoint` (its Deployment is replaced; the task managers stay and re-register),
  then shrink. The savepoint must outlive the job manager pod: `checkpoint_dir` on shared storage or
  `checkpoint_host_path` on a one-node cluster. Downtime runs from the savepoint trigger;

Vertical scaling resizes the CPU limit of the pods hosting an operator in place (MEAD).
Downtime = from the first poll that sees the job not fully running until every subtask runs again at
the target (resolution POLL_S; the job manager's REST cache is kept below it, see
manifests.REST_REFRESH_S). When polling missed the outage: the job's RESTARTING -> RUNNING timestamps
if they describe it, else the time since the request as an upper bound (same rule as the local backend).

Exercised against fakes (tests/k8s/test_executor.py) and on the real test cluster
(tests/k8s/test_e2e_cluster.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from harness.backends.base import RescaleResult
from harness.backends.flink_rest import Bounds, JobDetails, SavepointStatus, TaskManagerInfo, map_vertices
from harness.backends.k8s import manifests as mf
from harness.backends.k8s.config import K8sConfig
from harness.backends.k8s.executor import K8sExecutor
from harness.backends.wallclock import Timing, wait_until_running
from harness.topology import Topology

log = logging.getLogger(__name__)

POLL_S = 0.5
IDLE_COST = -1000  # deleted first
BUSY_COST = 1000


class JobRest(Protocol):
    """The slice of harness.backends.flink_rest.FlinkRest used here (a fake in unit tests)."""

    def active_job_ids(self) -> list[str]: ...

    def job(self, jid: str) -> JobDetails: ...

    def taskmanagers(self) -> list[TaskManagerInfo]: ...

    def set_resource_requirements(self, jid: str, bounds: dict[str, Bounds]) -> None: ...

    def vertex_taskmanagers(self, jid: str, vertex_id: str) -> list[str]: ...

    def stop_with_savepoint(self, jid: str, target_dir: str | None = None, drain: bool = False) -> str: ...

    def savepoint_status(self, jid: str, trigger_id: str) -> SavepointStatus: ...


@dataclass
class JobState:
    """What the rescaler believes is running (kept in sync with the job manager)."""

    job_id: str
    vertex_ids: dict[str, str]  # operator -> job-vertex id
    parallelism: dict[str, int]
    cpu_share: dict[str, float] = field(default_factory=dict)


class K8sRescaler:
    def __init__(
        self,
        cfg: K8sConfig,
        executor: K8sExecutor,
        rest: JobRest,
        topology: Topology,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        job: mf.JobSpec | None = None,
    ) -> None:
        self.cfg = cfg
        self.job = job  # what the job manager runs (the savepoint method redeploys it)
        self.ex = executor
        self.rest = rest
        self.topology = topology
        self.clock = clock
        self.sleep = sleep
        self.pod_cpu: dict[str, float] = {}  # pod -> CPU limit set by vertical scaling

    @property
    def container(self) -> str:
        return "flink-main-container" if self.cfg.use_operator else "taskmanager"

    # ---- observation --------------------------------------------------------------------------
    def job_id(self) -> str:
        ids = self.rest.active_job_ids()
        if not ids:
            raise RuntimeError("no running Flink job found through the REST API")
        return ids[0]

    def current(self, job_id: str | None = None) -> JobState:
        jid = job_id or self.job_id()
        job = self.rest.job(jid)
        vids = map_vertices(job.vertices, self.topology.names)
        missing = sorted(set(self.topology.names) - set(vids))
        if missing:
            raise RuntimeError(f"job {jid} has no vertex for operators {missing}: {[v.name for v in job.vertices]}")
        return JobState(jid, vids, {op: job.vertex(vid).parallelism for op, vid in vids.items()})

    def wait_running(self, job_id: str | None, target: dict[str, int] | None, since: float,
                     total: int | None = None) -> float:
        """Poll until the job runs every subtask at `target` (or `total` subtasks); returns the downtime."""
        job, timing = wait_until_running(
            lambda: self.rest.job(job_id or self.job_id()), lambda job: self._matches(job, target, total),
            since=since, timeout_s=self.cfg.rescale_timeout_s, clock=self.clock, sleep=self.sleep, poll_s=POLL_S,
            retry_on=(Exception,),  # JM restarting / unreachable: keep polling (the last error ends a timeout)
        )
        return self._downtime(job, timing)

    def _matches(self, job: JobDetails, target: dict[str, int] | None, total: int | None) -> bool:
        vids = map_vertices(job.vertices, self.topology.names)
        if target:
            by_id = {v.id: v.parallelism for v in job.vertices}
            if any(by_id.get(vids.get(op, "")) != p for op, p in target.items()):
                return False
        if total is not None and sum(v.parallelism for v in job.vertices) != total:
            return False
        return True

    @staticmethod
    def _downtime(job: JobDetails, timing: Timing) -> float:
        """The outage polling saw; when it fell between two polls, the job's own RESTARTING -> RUNNING
        timestamps if they describe it, else the whole time since the request: an upper bound, never
        a made-up zero (every parallelism change restarts the job). Same rule as the local backend.

        The adaptive scheduler builds a new execution graph for each rescale, and the REST API shows
        only the current one, so after a rescale the RESTARTING timestamp is usually absent."""
        if timing.down_from is None:
            restarting, running = job.timestamps.get("RESTARTING", 0), job.timestamps.get("RUNNING", 0)
            if restarting and running > restarting:
                return min((running - restarting) / 1000.0, timing.running_at - timing.requested)
            log.warning("the rescale's outage fell between two polls of the job; its downtime %.1f s is the time "
                        "since the request (an upper bound)", timing.downtime_s)
        return timing.downtime_s

    # ---- task managers (standalone) -------------------------------------------------------------
    def registered_taskmanagers(self) -> list[TaskManagerInfo]:
        try:
            return self.rest.taskmanagers()
        except Exception as exc:  # noqa: BLE001 - while pods come and go the REST API may not answer: none seen yet
            log.info("task managers not readable from the job manager yet: %s", exc)
            return []

    def grow(self, total: int) -> None:
        """Scale the TM Deployment up to `total` and wait until that many TMs registered with Flink."""
        if total <= self.ex.taskmanager_replicas():
            return
        self.ex.scale_taskmanagers(total)
        self.ex.wait_until(
            lambda: len(self.registered_taskmanagers()) >= total,
            self.cfg.rescale_timeout_s,
            f"{total} task managers to register with the job manager",
            self.ex.describe_pods,
        )

    def shrink(self, total: int) -> None:
        """Delete idle task managers first: mark them with a low deletion cost, then scale down."""
        if total >= self.ex.taskmanager_replicas():
            return
        pods = set(self.ex.taskmanager_pods())
        costs = {}
        for tm in self.registered_taskmanagers():
            if tm.id in pods:
                costs[tm.id] = IDLE_COST if tm.free_slots >= tm.slots else BUSY_COST
        self.ex.set_deletion_cost(costs)
        self.ex.scale_taskmanagers(total)
        for pod, cost in costs.items():
            if cost == IDLE_COST:  # about to be deleted
                self.pod_cpu.pop(pod, None)

    # ---- vertical -------------------------------------------------------------------------------
    def apply_cpu(self, state: JobState, cpu_share: dict[str, float]) -> dict[str, float]:
        """Resize the CPU limit of every pod hosting an operator to share x taskmanager_cpu_limit."""
        applied: dict[str, float] = {}
        for op, share in cpu_share.items():
            vid = state.vertex_ids.get(op)
            if vid is None:
                continue
            limit = max(0.01, float(share) * self.cfg.taskmanager_cpu_limit)
            for pod in self.rest.vertex_taskmanagers(state.job_id, vid):
                self.ex.resize_pod_cpu(pod, self.container, limit)
                self.pod_cpu[pod] = limit
            applied[op] = float(share)
        state.cpu_share.update(applied)
        return applied

    def tm_quota(self, pods: list[str]) -> dict[str, float]:
        """CPU limit per task-manager pod (Flink resource id = pod name), for CPU utilisation."""
        return {pod: self.pod_cpu.get(pod, self.cfg.taskmanager_cpu_limit) for pod in pods}

    # ---- the methods ----------------------------------------------------------------------------
    def rescale(self, method: str, state: JobState, target: dict[str, int],
                cpu_share: dict[str, float] | None) -> tuple[JobState, RescaleResult]:
        """Apply `target` (and `cpu_share`); never raises (errors go into the result)."""
        label = "k8s:operator" if self.cfg.use_operator else f"k8s:{method}"
        if self.cfg.observe_only:
            return state, RescaleResult(
                dict(state.parallelism), dict(state.cpu_share), method="k8s:observe_only", ok=False,
                error="observe_only: the Flink Kubernetes Operator's autoscaler scales this job; harness only records",
            )
        target = {op: int(target.get(op, state.parallelism.get(op, 1))) for op in self.topology.names}
        try:
            total = sum(target.values())
            if total > self.cfg.max_taskmanagers:
                raise ValueError(f"{total} task managers exceed max_taskmanagers={self.cfg.max_taskmanagers}")
            downtime = 0.0
            new = state
            if target != state.parallelism:
                if self.cfg.use_operator:
                    new, downtime = self._operator(state, target)
                elif method == "in_place":
                    new, downtime = self._in_place(state, target)
                elif method == "reactive":
                    new, downtime = self._reactive(state, target)
                elif method == "savepoint" and self.cfg.durable_state_dir and self.job is not None:
                    new, downtime = self._savepoint(state, target)
                else:
                    raise ValueError(
                        f"rescale_method {method!r} is not available here (in_place, reactive; savepoint needs "
                        "checkpoint_dir or checkpoint_host_path, or use_operator: true with upgrade_mode: savepoint)"
                    )
                # subtasks may have moved: every known share goes to its new hosts
                shares = {**state.cpu_share, **(cpu_share or {})}
            else:
                shares = dict(cpu_share or {})
            if shares:
                self.apply_cpu(new, shares)
            return new, RescaleResult(dict(new.parallelism), dict(new.cpu_share), downtime_s=downtime, method=label)
        except Exception as exc:  # noqa: BLE001 - a failed rescale is an event, not a crash
            try:
                fresh = self.current()
                fresh.cpu_share = dict(state.cpu_share)
                state = fresh
            except Exception as again:  # noqa: BLE001 - the failed rescale is what the result reports
                log.warning("after a failed rescale the job state could not be re-read: %s", again)
            return state, RescaleResult(dict(state.parallelism), dict(state.cpu_share), method=label, ok=False,
                                        error=f"{type(exc).__name__}: {exc}")

    def _in_place(self, state: JobState, target: dict[str, int]) -> tuple[JobState, float]:
        total = sum(target.values())
        self.grow(total)
        t0 = self.clock()
        self.rest.set_resource_requirements(
            state.job_id, {state.vertex_ids[op]: Bounds(1, p) for op, p in target.items()}
        )
        downtime = self.wait_running(state.job_id, target, since=t0)
        self.shrink(total)
        return JobState(state.job_id, dict(state.vertex_ids), dict(target), dict(state.cpu_share)), downtime

    def _savepoint(self, state: JobState, target: dict[str, int]) -> tuple[JobState, float]:
        assert self.job is not None
        total = sum(target.values())
        self.grow(total)  # new pods start while the job still runs: downtime is savepoint + restore
        t0 = self.clock()
        trigger = self.rest.stop_with_savepoint(state.job_id, None, drain=False)
        location = None
        while location is None:
            st = self.rest.savepoint_status(state.job_id, trigger)
            if st.done:
                if st.failure or not st.location:
                    raise RuntimeError(f"stop-with-savepoint failed: {st.failure}")
                location = st.location
            elif self.clock() - t0 > self.cfg.rescale_timeout_s:
                raise TimeoutError(f"savepoint of {state.job_id} not done after {self.cfg.rescale_timeout_s:.0f} s")
            else:
                self.sleep(POLL_S)
        self.job = replace(self.job, parallelism=dict(target))
        self.ex.apply(mf.jobmanager_deployment(self.cfg, self.job, from_savepoint=location))
        self.wait_running(None, target, since=t0)
        downtime = self.clock() - t0  # not processing from the trigger on
        new = self.current()
        new.cpu_share = dict(state.cpu_share)
        self.shrink(total)
        return new, downtime

    def _reactive(self, state: JobState, target: dict[str, int]) -> tuple[JobState, float]:
        total = sum(target.values())
        self.rest.set_resource_requirements(state.job_id, {
            state.vertex_ids[op.name]: Bounds(1, op.max_parallelism)
            for op in self.topology.operators if op.name in state.vertex_ids
        })
        t0 = self.clock()
        if total > self.ex.taskmanager_replicas():
            self.grow(total)
        else:
            self.ex.scale_taskmanagers(total)  # the job holds every slot: Flink shrinks to what is left
        downtime = self.wait_running(state.job_id, None, since=t0, total=total)
        new = self.current(state.job_id)
        new.cpu_share = dict(state.cpu_share)
        return new, downtime

    def _operator(self, state: JobState, target: dict[str, int]) -> tuple[JobState, float]:
        t0 = self.clock()
        self.ex.patch_flink_configuration(
            {"pipeline.jobvertex-parallelism-overrides": mf.jobvertex_overrides(state.vertex_ids, target)}
        )
        # an upgrade (savepoint / last-state) resubmits the job: follow whichever job is active
        downtime = self.wait_running(None, target, since=t0)
        new = self.current()
        new.cpu_share = dict(state.cpu_share)
        return new, downtime
