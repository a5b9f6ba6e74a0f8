"""`LocalBackend`: the Backend protocol on the real local stack (Kafka + Flink + Prometheus).

Wall-clock time: t = 0 once the job runs at its initial parallelism and the generator plays the
pattern. `advance_to` sleeps in short slices and supervises the processes meanwhile: a task
manager or the job manager that died is a `fault` event, the process is restarted (the job
restores from its latest checkpoint: Flink's restart strategy after a task manager loss, a
resubmission from the newest retained checkpoint after a job manager loss) and a `recovery`
event follows with the measured outage. Monitoring goes through `harness.metrics.prometheus`,
joined to operators via the REST API; rescaling through `rescale.Rescaler`.

Injected faults (`harness.faults`, `inject_fault`/`end_fault`) act on the real processes: a task
manager hosting a subtask or the job manager is SIGKILLed (the supervision above then recovers
it, its events marked `injected`), the broker is stopped and started again, Prometheus is stopped
for a while (snapshots then report the missing metrics; the exported series have a gap), the
generator is paused with SIGSTOP (its schedule skips what it could not send: load shortfall).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.backends.base import BackendEvent
from harness.backends.flink_rest import FlinkRest, FlinkRestError, map_vertices
from harness.backends.local.kafka import TopicRetention
from harness.backends.local.rescale import JobState, Rescaler
from harness.backends.local.stack import GENERATOR
from harness.backends.wallclock import WallClockBackend
from harness.kafka_settings import KafkaSettings
from harness.metrics.export import export_queries, fill_gaps
from harness.metrics.prometheus import JobView, PrometheusMonitor
from harness.metrics.snapshot import MetricsSnapshot
from harness.topology import Topology
from harness.vocabulary import EventKind, Metric

if TYPE_CHECKING:
    from harness.backends.local.config import LocalConfig
    from harness.backends.local.stack import LocalStack
    from harness.config import Experiment
    from workloads.patterns import LoadPattern

log = logging.getLogger(__name__)

SUPERVISE_EVERY_S = 1.0
# A job manager restart that fails (e.g. the new JVM dies binding a port the killed one still held) is
# retried at the next supervision tick, as a process supervisor would, within one recovery.
JM_RESTART_ATTEMPTS = 5
INTERARRIVAL_SAMPLE = 5000  # gaps per snapshot at most, as the simulator's default
INTERARRIVAL_WINDOW_S = 60.0  # the sample covers this many recent seconds
REACTIVE_NOTE = (
    "reactive = adaptive scheduler with per-vertex upper bound = max parallelism on the session cluster; "
    "only the number of task managers changes (Flink's scheduler-mode: reactive needs an application cluster)"
)


def topic_configs(kafka: KafkaSettings, disk: TopicRetention) -> dict[str, str]:
    """Kafka topic configs: the disk budget (`TopicRetention`) plus the experiment's retention time
    (thesis ch. 6.3.1: 5 min, checked every 5 s).

    The broker's check interval is a broker setting (`log.retention.check.interval.ms`, set to the
    same 5 s in the generated server.properties); segments roll every `segment_s` so whole closed
    segments can be deleted close to the retention time. The byte budget stays as a disk bound: it
    must hold `retention_s` of input (`local.kafka_retention_mb`), else records expire earlier than
    the experiment says (and earlier than the simulator models)."""
    out = disk.configs()
    if kafka.retention_s is not None:
        out["retention.ms"] = str(int(kafka.retention_s * 1000))
        out["segment.ms"] = str(int(kafka.segment_s * 1000))
    return out


def latest_checkpoint(checkpoint_root: Path, job_ids: list[str] | None = None) -> Path | None:
    """Newest complete checkpoint (`chk-N/_metadata`) under `<root>/<job id>/`, of `job_ids` if given
    (a run must never restore another run's state from a shared work directory), else of any job."""
    best: tuple[float, Path] | None = None
    if not checkpoint_root.exists():
        return None
    for meta in checkpoint_root.glob("*/chk-*/_metadata"):
        if job_ids is not None and meta.parent.parent.name not in job_ids:
            continue
        m = meta.stat().st_mtime
        if best is None or m > best[0]:
            best = (m, meta.parent)
    return best[1] if best else None


class LocalBackend(WallClockBackend):
    name = "local"
    supervise_every_s = SUPERVISE_EVERY_S

    def __init__(self, stack: LocalStack | None = None, keep_stack_up: bool = False) -> None:
        """`stack`: run on this stack instead of one of the experiment's config; `keep_stack_up`: `stop()`
        ends the run's job and generator but leaves the stack running for its owner (tests share one)."""
        super().__init__()
        self._stack = stack
        self._keep_stack_up = keep_stack_up
        self._events: list[BackendEvent] = []
        self._samples: list[dict[str, Any]] = []  # what the backend itself knows (parallelism, TMs, downtime)
        self._vertex_ids_seen: dict[str, set[str]] = {}
        self._job_ids: list[str] = []
        self._raw: pd.DataFrame | None = None
        self._grid: tuple[float, float, float] = (0.0, 0.0, 0.0)  # export range (start, end, step), relative
        self._stopped = False
        self._generator: Any = None
        self._timestamps: Any = None  # interarrivals.TimestampTail over the generator's sampled send times
        self._expected_tms: set[str] = set()
        self._recovering: dict[str, Any] | None = None
        self._injected_tms: set[str] = set()  # task managers killed on purpose (their death is no crash)
        self._injected_jm = False
        self._jm_recovery: dict[str, Any] | None = None  # a job manager loss being recovered (attempts so far)
        self._prometheus_stopped = False
        self._awaiting: list[dict[str, Any]] = []  # injected outages waiting for the job to run again
        self.experiment: Experiment | None = None

    # ---------------------------------------------------------------- lifecycle
    def start(self, experiment: Experiment, pattern: LoadPattern, topology: Topology) -> None:
        from harness.backends.local import jobjar
        from harness.backends.local.stack import LocalStack

        self.experiment = experiment
        self.topology = topology
        self.pattern = pattern
        self.method = experiment.rescale_method
        cfg: LocalConfig = experiment.local
        self.stack = self._stack or LocalStack(cfg)
        stack = self.stack
        self.rest = FlinkRest(stack.rest_url)
        parallelism = experiment.initial_parallelism_map()
        total = sum(parallelism.values())

        stack.ensure_installed()
        stack.up(taskmanagers=total)
        for jid in self.rest.active_job_ids():  # a leftover job would hold slots
            self.rest.cancel(jid)
        # fresh topics: the run's own partitions (thesis ch. 6.3.1) and retention, nothing left from a past run
        disk = TopicRetention.for_run(cfg, experiment.partitions, pattern.duration_s)
        stack.recreate_topics(list(topology.topics), experiment.partitions, topic_configs(experiment.kafka, disk))
        self.jar = jobjar.ensure_jar()
        # a fresh consumer group per run: the job starts at the topics' end, not at a past run's offsets
        self._group_id = f"bench-{topology.query}-{int(time.time())}"
        self._jobjar = jobjar

        self.rescaler = Rescaler(
            self.rest, stack, topology, self._submit,
            savepoint_dir=stack.savepoint_dir.as_uri(),
            default_cpus=cfg.taskmanager_cpu_quota,
        )
        # match the task managers to the initial total (a reused stack may have more)
        self.rescaler._shrink(total, busy=set())
        self.rescaler._grow(total)
        t_submit = time.monotonic()
        job_id = self._submit(parallelism, None)
        state = self.rescaler.current(job_id)
        self.rescaler.wait_running(job_id, parallelism, state.vertex_ids, since=t_submit)
        self.state = JobState(job_id, state.vertex_ids, dict(parallelism),
                              {op: 1.0 for op in topology.names})  # shares of the TM quota
        self._remember_vertices()
        self.startup_s = time.monotonic() - t_submit
        self.monitor = PrometheusMonitor(stack.prometheus_url, step_s=cfg.scrape_interval_s)
        self._generator = self._start_generator(pattern, experiment.seed)
        self._t0 = time.monotonic()
        self._wall0 = time.time()
        self._expected_tms = set(stack.taskmanager_ids())
        self._sample(downtime=False)

    def _submit(self, parallelism: dict[str, int], savepoint: str | None) -> str:
        # the topics are fresh, so "earliest" starts where the run starts; and once retention deleted
        # records a lagging source resumes at the oldest kept one (not at the end: only expired is lost).
        # The sink's max-latency gauge covers one scrape interval: every scrape sees the max since the last
        main, args = self._jobjar.job_command(
            self.topology.query, self.stack.kafka_bootstrap, parallelism, group_id=self._group_id,
            from_earliest=True, latency_max_window_ms=int(round(self.stack.cfg.scrape_interval_s * 1000)))
        job_id = self.stack.submit_job(self.jar, main, list(args), savepoint=savepoint)
        self._job_ids.append(job_id)
        return job_id

    def _start_generator(self, pattern: LoadPattern, seed: int) -> Any:
        from harness.backends.local.interarrivals import TimestampTail, timestamps_every
        from workloads.generator import Generator

        per_second = pattern.per_second()
        mean_rate = float(per_second.mean()) if len(per_second) else 0.0
        gen = Generator(
            jar=self.jar, bootstrap=self.stack.kafka_bootstrap, topics=list(self.topology.topics),
            workdir=self.stack.root / "generator", metrics_port=self.stack.generator_metrics_port, seed=seed,
            java=str(Path(self.stack.java_home) / "bin" / "java"),
            timestamps_every=timestamps_every(mean_rate, INTERARRIVAL_WINDOW_S, INTERARRIVAL_SAMPLE),
        )
        gen.start(pattern=pattern, arrivals=self.experiment.pattern.arrivals if self.experiment else None)
        self._timestamps = TimestampTail(gen.timestamps_path, self.topology.topics, INTERARRIVAL_WINDOW_S,
                                         INTERARRIVAL_SAMPLE, seed)
        # a pidfile like every service's: `bench down` stops the generator even if this harness died
        # (while it starts, before this line, its command line names the work directory: down's sweep)
        if gen.pid is not None:
            self.stack.sup.adopt(GENERATOR, gen.pid, gen.log_path)
        return gen

    def _interarrivals(self) -> np.ndarray | None:
        """Thinned recent inter-arrival gaps from the generator's timestamps (None when unavailable)."""
        if self._timestamps is None:
            return None
        try:
            return self._timestamps.sample()
        except Exception as exc:  # noqa: BLE001 - MEAD then keeps its buffer; never break the loop
            self._events.append(BackendEvent(self.now(), EventKind.WARNING, f"inter-arrival sample failed: {exc}", {}))
            return None

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        # the run record is written by now: what goes wrong here is logged, and teardown goes on
        try:
            if self._generator is not None:
                if self._generator.pid is not None:  # a paused generator (injected fault) must hear SIGTERM
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(self._generator.pid, signal.SIGCONT)
                self._generator.stop()
        except Exception as exc:  # noqa: BLE001
            log.warning("stopping the load generator failed: %s: %s (bench down stops it)", type(exc).__name__, exc)
        rest: FlinkRest | None = getattr(self, "rest", None)  # None: start failed before it reached Flink
        if rest is not None:
            try:
                for jid in rest.active_job_ids():
                    rest.cancel(jid)
            except FlinkRestError as exc:
                log.warning("cancelling the job failed: %s (stopping the stack ends it)", exc)
        if getattr(self, "stack", None) is not None and not self._keep_stack_up:
            self.stack.down()

    # ---------------------------------------------------------------- faults
    def _supervise(self) -> None:
        """Detect dead Flink processes, restart them, let the job restore, record both events.

        Non-blocking: replacements are started and a later call notices that the job runs again
        at its parallelism (then the `recovery` event carries the measured outage).
        """
        self._last_supervise = time.monotonic()
        from harness.backends.local.flink import JOBMANAGER

        if self._jm_recovery is not None or not self.stack.sup.alive(JOBMANAGER):
            self._recover_jobmanager()
            return
        alive = set(self.stack.taskmanager_ids())
        dead = sorted(self._expected_tms - alive)
        if dead:
            t_fault = self.now()
            injected = bool(set(dead) & self._injected_tms)
            self._events.append(BackendEvent(t_fault, EventKind.FAULT, f"task manager died: {', '.join(dead)}",
                                             {"process": dead, "job_id": self.state.job_id,
                                              **({"injected": True} if injected else {})}))
            self._sample(downtime=True)  # the processing series shows the outage until the recovery
            try:
                for tm in dead:
                    self.stack.stop_taskmanager(tm)  # clean pidfile, cgroup and scrape target
                need = sum(self.state.parallelism.values()) - len(self.stack.taskmanager_ids())
                started = [self.stack.start_taskmanager(wait=False) for _ in range(max(0, need))]
                if self._recovering is None:
                    self._recovering = {"t_fault": t_fault, "dead": dead, "started": started, "injected": injected}
                else:
                    self._recovering["started"] += started
            except Exception as exc:  # noqa: BLE001 - stays a fault; the run is flagged
                self._events.append(BackendEvent(self.now(), EventKind.FAULT, f"recovery failed: {exc}", {}))
            self._expected_tms = set(self.stack.taskmanager_ids())
        if self._recovering is not None:
            self._check_recovered()
        if self._awaiting:
            self._check_job_back()

    def _check_recovered(self) -> None:
        rec = self._recovering
        assert rec is not None
        try:
            job = self.rest.job(self.state.job_id)
            by_id = {v.id: v.parallelism for v in job.vertices}
            ok = job.running and all(by_id.get(vid) == self.state.parallelism.get(op)
                                     for op, vid in self.state.vertex_ids.items())
            if ok:  # until Flink notices the loss (heartbeat timeout) it still shows the old placement
                registered = set(self.rest.taskmanager_ids())
                hosts = {tm for tms in self.rescaler.busy_taskmanagers(self.state).values() for tm in tms}
                ok = not (set(rec["dead"]) & (registered | hosts))
        except FlinkRestError:
            ok = False
        if ok:
            try:
                self.rescaler.apply_cpu(self.state, self.state.cpu_share)  # also ends the start-up boost
            except Exception as exc:  # noqa: BLE001
                self._events.append(BackendEvent(self.now(), EventKind.WARNING, f"CPU quota not re-applied: {exc}", {}))
            try:
                restored = self.rest.checkpoints(self.state.job_id).latest_restored_id
            except FlinkRestError:
                restored = None
            self._events.append(BackendEvent(
                self.now(), EventKind.RECOVERY, "task manager replaced; job restored from its checkpoint",
                {"outage_s": self.now() - rec["t_fault"], "restored_checkpoint": restored,
                 "replaced": rec["dead"], "started": rec["started"],
                 **({"fault_kind": "kill-taskmanager"} if rec.get("injected") else {})}))
            self._recovering = None
            self._sample(downtime=False)
        elif self.now() - rec["t_fault"] > self.rescaler.timeout_s:
            self._events.append(BackendEvent(self.now(), EventKind.FAULT, "job did not recover in time",
                                             {"after_s": self.now() - rec["t_fault"]}))
            self._recovering = None

    def _recover_jobmanager(self) -> None:
        """Restart the job manager and resubmit the job from its newest checkpoint.

        One loss is one recovery: an attempt that fails is a warning and is retried at the next
        supervision tick (up to JM_RESTART_ATTEMPTS), and the `recovery` event, when it comes, carries
        the outage from the loss and whether the loss was injected."""
        rec = self._jm_recovery
        if rec is None:
            injected, self._injected_jm = self._injected_jm, False
            rec = self._jm_recovery = {"t_fault": self.now(), "previous": self.state.job_id,
                                       "injected": injected, "attempts": 0}
            self._events.append(BackendEvent(rec["t_fault"], EventKind.FAULT, "job manager died",
                                             {"job_id": rec["previous"], **({"injected": True} if injected else {})}))
            self._sample(downtime=True)
        rec["attempts"] += 1
        try:
            ckpt = latest_checkpoint(self.stack.flink.dir / "checkpoints", self._job_ids)
            registered_s = self.stack.restart_jobmanager(taskmanagers=sum(self.state.parallelism.values()))
            for jid in self.rest.active_job_ids():  # a job a failed attempt submitted would hold slots
                self.rest.cancel(jid)
            job_id = self._submit(self.state.parallelism, ckpt.as_uri() if ckpt else None)
            fresh = self.rescaler.current(job_id)
            self.rescaler.wait_running(job_id, self.state.parallelism, fresh.vertex_ids, since=time.monotonic())
            self.state = JobState(job_id, fresh.vertex_ids, dict(self.state.parallelism), dict(self.state.cpu_share))
            self._remember_vertices()
            self.rescaler.apply_cpu(self.state, self.state.cpu_share)
            try:
                restored = self.rest.checkpoints(job_id).latest_restored_id
            except FlinkRestError:
                restored = None
            self._events.append(BackendEvent(
                self.now(), EventKind.RECOVERY, "job manager restarted; job resubmitted from its latest checkpoint",
                {"outage_s": self.now() - rec["t_fault"], "checkpoint": str(ckpt) if ckpt else None,
                 "job_id": job_id, "previous_job_id": rec["previous"], "restored_checkpoint": restored,
                 "taskmanagers_registered_s": registered_s, "attempts": rec["attempts"],
                 **({"fault_kind": "kill-jobmanager"} if rec["injected"] else {})}))
            self._jm_recovery = None
            self._sample(downtime=False)
        except Exception as exc:  # noqa: BLE001 - recorded; retried or, at the last attempt, a fault
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            log.warning("job manager restart attempt %d failed: %s", rec["attempts"], exc)
            if rec["attempts"] < JM_RESTART_ATTEMPTS:
                self._events.append(BackendEvent(
                    self.now(), EventKind.WARNING,
                    f"job manager restart attempt {rec['attempts']} failed, retrying: {first_line}",
                    {"attempt": rec["attempts"]}))
            else:
                self._events.append(BackendEvent(
                    self.now(), EventKind.FAULT,
                    f"job manager recovery failed after {rec['attempts']} attempts: {first_line}", {}))
                self._jm_recovery = None
        self._expected_tms = set(self.stack.taskmanager_ids())

    # ---------------------------------------------------------------- fault injection
    def inject_fault(self, fault: Any) -> dict[str, Any]:
        """Break something on purpose now (a `harness.faults.FaultSpec`); returns facts for the event."""
        from harness.backends.local.flink import JOBMANAGER
        from harness.faults import FaultKind

        kind = fault.kind
        if kind == FaultKind.KILL_TASKMANAGER:
            hosts = sorted({tm for tms in self.rescaler.busy_taskmanagers(self.state).values() for tm in tms})
            candidates = [tm for tm in hosts if tm in self.stack.taskmanager_ids()] or self.stack.taskmanager_ids()
            if not candidates:
                raise RuntimeError("no task manager is running")
            tm = candidates[-1]
            self._injected_tms.add(tm)
            return {"process": tm, "pid": self.stack.kill(tm)}
        if kind == FaultKind.KILL_JOBMANAGER:
            self._injected_jm = True
            return {"process": JOBMANAGER, "pid": self.stack.kill(JOBMANAGER)}
        if kind == FaultKind.RESTART_KAFKA:
            self._sample(downtime=True)
            self.stack.stop_kafka()
            if fault.for_s is None:  # a restart at once
                return {"restart_s": self._kafka_back(fault)}
            return {}
        if kind == FaultKind.STOP_PROMETHEUS:
            self.stack.stop_prometheus()
            self._prometheus_down_at = self.now()
            self._prometheus_stopped = True
            return {}
        if kind == FaultKind.PAUSE_GENERATOR:
            pid = self._generator_pid()
            os.killpg(pid, signal.SIGSTOP)
            return {"pid": pid}
        raise ValueError(f"unknown fault kind {kind}")

    def end_fault(self, fault: Any) -> dict[str, Any]:
        """End an outage that lasts `for_s` (restart-kafka, stop-prometheus, pause-generator)."""
        from harness.faults import FaultKind

        kind = fault.kind
        if kind == FaultKind.RESTART_KAFKA:
            return {"restart_s": self._kafka_back(fault)}
        if kind == FaultKind.STOP_PROMETHEUS:
            took = self.stack.start_prometheus()
            self._prometheus_stopped = False
            t_down = getattr(self, "_prometheus_down_at", self.now())
            self._events.append(BackendEvent(self.now(), EventKind.RECOVERY, "prometheus restarted; monitoring again",
                                             {"fault_kind": kind.value, "outage_s": self.now() - t_down,
                                              "restart_s": took}))
            return {"restart_s": took}
        if kind == FaultKind.PAUSE_GENERATOR:
            pid = self._generator_pid()
            os.killpg(pid, signal.SIGCONT)
            return {"pid": pid}
        return {}

    def _generator_pid(self) -> int:
        pid = self._generator.pid if self._generator is not None else None
        if pid is None:
            raise RuntimeError("the load generator is not running")
        return int(pid)

    def _kafka_back(self, fault: Any) -> float:
        """Start the broker again; the recovery event follows once the job runs at its parallelism."""
        t0 = self.now()
        took = self.stack.start_kafka()
        self._awaiting.append({"t_fault": t0 - (fault.for_s or 0.0), "fault_kind": fault.kind.value,
                               "kafka_restart_s": took})
        return took

    def _check_job_back(self) -> None:
        """After a broker restart: recovered when the job runs at its parallelism again."""
        try:
            job = self.rest.job(self.state.job_id)
            ok = job.running
        except FlinkRestError:
            ok = False
        if not ok:
            return
        for item in self._awaiting:
            self._events.append(BackendEvent(self.now(), EventKind.RECOVERY, f"{item['fault_kind']}: job running again",
                                             {**item, "outage_s": self.now() - item["t_fault"]}))
        self._awaiting = []
        self._sample(downtime=False)

    def drain_events(self) -> list[BackendEvent]:
        if self._t0 is not None and not self._stopped:
            self._supervise()
        out, self._events = self._events, []
        return out

    # ---------------------------------------------------------------- monitor
    def _remember_vertices(self) -> None:
        for op, vid in self.state.vertex_ids.items():
            self._vertex_ids_seen.setdefault(op, set()).add(vid)

    def job_view(self) -> JobView:
        job = self.rest.job(self.state.job_id)
        vids = map_vertices(job.vertices, self.topology.names)
        parallelism = {op: job.vertex(vid).parallelism for op, vid in vids.items()}
        quotas = {tm: q for tm in self.stack.taskmanager_ids()
                  if (q := self.stack.taskmanager_cpu(tm)) is not None}
        try:
            tms = len(self.rest.taskmanagers())
        except FlinkRestError:
            tms = len(quotas)
        return JobView(
            job_id=self.state.job_id, topology=self.topology, vertex_ids=vids, parallelism=parallelism,
            taskmanagers=tms, tm_quota=quotas, cpu_share=dict(self.state.cpu_share), host_cpus=os.cpu_count() or 1,
        )

    def snapshot(self, window_s: float) -> MetricsSnapshot:
        t = self.now()
        try:
            view = self.job_view()
        except FlinkRestError as exc:  # job manager unreachable: nothing is measured, and the snapshot says why
            reason = f"job manager unreachable: {exc}"
            self._events.append(BackendEvent(t, EventKind.WARNING, reason, {}))
            return MetricsSnapshot.unmeasured(t, window_s, self.topology, self.state.parallelism,
                                              self.state.cpu_share, reason)
        if not self.stack.prometheus.healthy():  # one quick probe instead of every query timing out
            reason = "prometheus not answering" + (" (injected fault stop-prometheus)" if self._prometheus_stopped
                                                   else "")
            self._events.append(BackendEvent(t, EventKind.WARNING, reason, {}))
            return MetricsSnapshot.unmeasured(t, window_s, self.topology, self.state.parallelism,
                                              self.state.cpu_share, reason)
        snap = self.monitor.snapshot(view, t, window_s, self._interarrivals())
        self._sample(downtime=False, snap=snap)
        return snap

    # ---------------------------------------------------------------- execute (rescale: WallClockBackend)
    def _mark_downtime(self, down: bool) -> None:
        self._sample(downtime=down)

    def _after_rescale(self) -> None:
        self._remember_vertices()
        self._expected_tms = set(self.stack.taskmanager_ids())

    def _sample(self, downtime: bool, snap: MetricsSnapshot | None = None) -> None:
        t = self.now()
        down = downtime or self._recovering is not None  # a fault counts as downtime until the recovery
        row: dict[str, Any] = {"t": t, "processing": 0.0 if down else 1.0,
                               "parallelism": dict(self.state.parallelism), "cpu_share": dict(self.state.cpu_share),
                               "taskmanagers": len(self.stack.taskmanager_ids())}
        if snap is not None:
            row["cpu"] = {op: m.cpu_load for op, m in snap.operators.items()}
            row["cpu_job"] = snap.cpu_load
            row["cpu_jvm"] = {op: m.cpu_jvm_load for op, m in snap.operators.items()}
            row["cpu_jvm_job"] = snap.cpu_jvm_load
        self._samples.append(row)

    # ---------------------------------------------------------------- results
    def _export_queries(self, step_s: float) -> dict[tuple[str, str], str]:
        """(record metric, operator or '') -> PromQL over the whole run (shared with k8s)."""
        return export_queries(self.topology, self._vertex_ids_seen, step_s)

    def _export_raw(self) -> pd.DataFrame:
        """Every export query as a range query over the run: raw rows (ts, metric, operator, value, labels)."""
        if self._raw is not None:
            return self._raw
        rows: list[dict[str, Any]] = []
        if self._t0 is not None:
            step = float(self.experiment.local.scrape_interval_s) if self.experiment else 5.0
            start, end = self._wall0, self._wall0 + self.now()
            self._grid = (0.0, end - start, step)  # the range queries' evaluation times, relative
            for (metric, op), promql in self._export_queries(step).items():
                try:
                    result = self.monitor.query_range(promql, start, end, step)
                except Exception as exc:  # noqa: BLE001 - a missing series is reported, not fatal
                    self._events.append(BackendEvent(self.now(), EventKind.WARNING,
                                                     f"export of {metric} failed: {exc}", {}))
                    continue
                for series in result:
                    labels = json.dumps(series.get("metric", {}), sort_keys=True)
                    for ts, v in series.get("values", []):
                        rows.append({"ts": float(ts) - self._wall0, "metric": metric, "operator": op,
                                     "value": float(v), "labels": labels, "promql": promql})
        self._raw = pd.DataFrame(rows, columns=["ts", "metric", "operator", "value", "labels", "promql"])
        return self._raw

    def timeseries(self) -> pd.DataFrame:
        """The run's series; NaN rows mark gaps (a step without a Prometheus point, an unmeasured snapshot)."""
        raw = self._export_raw()
        parts = [fill_gaps(raw[["ts", "metric", "operator", "value"]], *self._grid).assign(subtask=-1)] \
            if len(raw) else []
        rows: list[dict[str, Any]] = []
        for s in self._samples:
            rows.append({"ts": s["t"], "metric": Metric.PROCESSING, "operator": "", "value": s["processing"]})
            for op, p in s["parallelism"].items():
                rows.append({"ts": s["t"], "metric": Metric.PARALLELISM, "operator": op, "value": float(p)})
            for op, c in s["cpu_share"].items():
                rows.append({"ts": s["t"], "metric": Metric.CPU_SHARE, "operator": op, "value": float(c)})
            for op, c in s.get("cpu", {}).items():
                rows.append({"ts": s["t"], "metric": Metric.CPU, "operator": op, "value": float(c)})
            for op, c in s.get("cpu_jvm", {}).items():
                rows.append({"ts": s["t"], "metric": Metric.CPU_JVM, "operator": op, "value": float(c)})
            if "cpu_job" in s:
                rows.append({"ts": s["t"], "metric": Metric.CPU, "operator": "", "value": float(s["cpu_job"])})
                rows.append({"ts": s["t"], "metric": Metric.CPU_JVM, "operator": "", "value": float(s["cpu_jvm_job"])})
            if not len(raw):
                rows.append({"ts": s["t"], "metric": Metric.TASKMANAGERS, "operator": "",
                             "value": float(s["taskmanagers"])})
        if rows:
            parts.append(pd.DataFrame(rows).assign(subtask=-1))
        if not parts:
            return pd.DataFrame(columns=["ts", "metric", "operator", "subtask", "value"])
        df = pd.concat(parts, ignore_index=True)
        df = df[~np.isinf(df["value"].astype(float))]
        return df[["ts", "metric", "operator", "subtask", "value"]]

    def save_artifacts(self, run_dir: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        raw = self._export_raw()
        raw.to_parquet(Path(run_dir) / "prometheus-series.parquet", index=False)
        out["prometheus_series"] = {"file": "prometheus-series.parquet", "rows": len(raw)}
        snap = self.stack.tsdb_snapshot()
        dest = Path(run_dir) / "prometheus-snapshot"
        try:
            shutil.copytree(snap, dest, copy_function=os.link)  # same file system: hard links, no copy
        except OSError:
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(snap, dest)
        shutil.rmtree(snap, ignore_errors=True)
        out["prometheus_snapshot"] = {"dir": "prometheus-snapshot", "source": str(snap)}
        return out

    def facts(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": "local", "rescale_method": getattr(self, "method", None)}
        if getattr(self, "stack", None) is None:
            return out
        try:
            out.update(self.stack.facts())
        except Exception as exc:  # noqa: BLE001
            out["stack_facts_error"] = str(exc)
        flink = out.get("flink_config", {})
        out["adaptive_scheduler"] = {k: v for k, v in flink.items() if "adaptive-scheduler" in k or k.endswith(
            "scheduler")}
        if getattr(self, "method", None) == "reactive":
            out["reactive"] = REACTIVE_NOTE
        out["job_ids"] = list(self._job_ids)
        out["rescales"] = list(self._rescales)
        out["startup_s"] = getattr(self, "startup_s", None)
        return out
