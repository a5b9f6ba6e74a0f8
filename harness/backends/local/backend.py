"""`LocalBackend`: the Backend protocol on the real local stack (Kafka + Flink + Prometheus).

Wall-clock time: t = 0 once the job runs at its initial parallelism and the generator plays the
pattern. `advance_to` sleeps in short slices and supervises the processes meanwhile: a task
manager or the job manager that died is a `fault` event, the process is restarted (the job
restores from its latest checkpoint: Flink's restart strategy after a task manager loss, a
resubmission from the newest retained checkpoint after a job manager loss) and a `recovery`
event follows with the measured outage. Monitoring goes through `harness.metrics.prometheus`,
joined to operators via the REST API; rescaling through `rescale.Rescaler`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.backends.base import BackendEvent, RescaleResult
from harness.backends.local.flink_rest import FlinkRest, FlinkRestError, map_vertices
from harness.backends.local.rescale import JobState, Rescaler
from harness.backends.local.stack import GENERATOR
from harness.metrics.export import export_queries, fill_gaps
from harness.metrics.prometheus import JobView, PrometheusMonitor
from harness.metrics.snapshot import MetricsSnapshot
from harness.topology import Topology
from harness.vocabulary import EventKind, Metric

if TYPE_CHECKING:
    from harness.backends.local.stack import LocalStack
    from harness.config import Experiment
    from workloads.patterns import LoadPattern

SUPERVISE_EVERY_S = 1.0
INTERARRIVAL_SAMPLE = 5000  # gaps per snapshot at most, as the simulator's default
INTERARRIVAL_WINDOW_S = 60.0  # the sample covers this many recent seconds
REACTIVE_NOTE = (
    "reactive = adaptive scheduler with per-vertex upper bound = max parallelism on the session cluster; "
    "only the number of task managers changes (Flink's scheduler-mode: reactive needs an application cluster)"
)


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


class LocalBackend:
    name = "local"

    def __init__(self, stack: LocalStack | None = None, keep_stack_up: bool = False) -> None:
        """`stack`: run on this stack instead of one of the experiment's config; `keep_stack_up`: `stop()`
        ends the run's job and generator but leaves the stack running for its owner (tests share one)."""
        self._stack = stack
        self._keep_stack_up = keep_stack_up
        self._t0: float | None = None
        self._events: list[BackendEvent] = []
        self._samples: list[dict[str, Any]] = []  # what the backend itself knows (parallelism, TMs, downtime)
        self._vertex_ids_seen: dict[str, set[str]] = {}
        self._job_ids: list[str] = []
        self._rescales: list[dict[str, Any]] = []
        self._raw: pd.DataFrame | None = None
        self._grid: tuple[float, float, float] = (0.0, 0.0, 0.0)  # export range (start, end, step), relative
        self._stopped = False
        self._generator: Any = None
        self._timestamps: Any = None  # interarrivals.TimestampTail over the generator's sampled send times
        self._last_supervise = 0.0
        self._expected_tms: set[str] = set()
        self._recovering: dict[str, Any] | None = None
        self.experiment: Experiment | None = None

    # ---------------------------------------------------------------- lifecycle
    def start(self, experiment: Experiment, pattern: LoadPattern, topology: Topology) -> None:
        from harness.backends.local import jobjar
        from harness.backends.local.stack import LocalStack

        self.experiment = experiment
        self.topology = topology
        self.pattern = pattern
        self.method = experiment.rescale_method
        cfg = experiment.local
        self.stack = self._stack or LocalStack(cfg)
        stack = self.stack
        self.rest = FlinkRest(stack.rest_url)
        parallelism = experiment.initial_parallelism_map()
        total = sum(parallelism.values())

        stack.ensure_installed()
        stack.up(taskmanagers=total)
        for jid in self.rest.active_job_ids():  # a leftover job would hold slots
            self.rest.cancel(jid)
        stack.ensure_topics(list(topology.topics), topology.partitions)
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
        # the sink's max-latency gauge covers one scrape interval: every scrape sees the max since the last
        main, args = self._jobjar.job_command(
            self.topology.query, self.stack.kafka_bootstrap, parallelism, group_id=self._group_id,
            latency_max_window_ms=int(round(self.stack.cfg.scrape_interval_s * 1000)))
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
        try:
            if self._generator is not None:
                self._generator.stop()
        except Exception:  # noqa: BLE001 - teardown goes on
            pass
        try:
            for jid in self.rest.active_job_ids():
                self.rest.cancel(jid)
        except Exception:  # noqa: BLE001
            pass
        if getattr(self, "stack", None) is not None and not self._keep_stack_up:
            self.stack.down()

    # ---------------------------------------------------------------- clock
    def now(self) -> float:
        return 0.0 if self._t0 is None else time.monotonic() - self._t0

    def advance_to(self, t: float) -> None:
        while True:
            left = t - self.now()
            if left <= 0:
                return
            time.sleep(min(left, SUPERVISE_EVERY_S))
            if time.monotonic() - self._last_supervise >= SUPERVISE_EVERY_S:
                self._supervise()

    # ---------------------------------------------------------------- faults
    def _supervise(self) -> None:
        """Detect dead Flink processes, restart them, let the job restore, record both events.

        Non-blocking: replacements are started and a later call notices that the job runs again
        at its parallelism (then the `recovery` event carries the measured outage).
        """
        self._last_supervise = time.monotonic()
        from harness.backends.local.flink import JOBMANAGER

        if not self.stack.sup.alive(JOBMANAGER):
            self._recover_jobmanager()
            return
        alive = set(self.stack.taskmanager_ids())
        dead = sorted(self._expected_tms - alive)
        if dead:
            t_fault = self.now()
            self._events.append(BackendEvent(t_fault, EventKind.FAULT, f"task manager died: {', '.join(dead)}",
                                             {"process": dead, "job_id": self.state.job_id}))
            self._sample(downtime=True)  # the processing series shows the outage until the recovery
            try:
                for tm in dead:
                    self.stack.stop_taskmanager(tm)  # clean pidfile, cgroup and scrape target
                need = sum(self.state.parallelism.values()) - len(self.stack.taskmanager_ids())
                started = [self.stack.start_taskmanager(wait=False) for _ in range(max(0, need))]
                if self._recovering is None:
                    self._recovering = {"t_fault": t_fault, "dead": dead, "started": started}
                else:
                    self._recovering["started"] += started
            except Exception as exc:  # noqa: BLE001 - stays a fault; the run is flagged
                self._events.append(BackendEvent(self.now(), EventKind.FAULT, f"recovery failed: {exc}", {}))
            self._expected_tms = set(self.stack.taskmanager_ids())
        if self._recovering is not None:
            self._check_recovered()

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
                 "replaced": rec["dead"], "started": rec["started"]}))
            self._recovering = None
            self._sample(downtime=False)
        elif self.now() - rec["t_fault"] > self.rescaler.timeout_s:
            self._events.append(BackendEvent(self.now(), EventKind.FAULT, "job did not recover in time",
                                             {"after_s": self.now() - rec["t_fault"]}))
            self._recovering = None

    def _recover_jobmanager(self) -> None:
        t_fault = self.now()
        previous = self.state.job_id
        self._events.append(BackendEvent(t_fault, EventKind.FAULT, "job manager died", {"job_id": previous}))
        self._sample(downtime=True)
        try:
            ckpt = latest_checkpoint(self.stack.flink.dir / "checkpoints", self._job_ids)
            registered_s = self.stack.restart_jobmanager(taskmanagers=sum(self.state.parallelism.values()))
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
                {"outage_s": self.now() - t_fault, "checkpoint": str(ckpt) if ckpt else None, "job_id": job_id,
                 "previous_job_id": previous, "restored_checkpoint": restored,
                 "taskmanagers_registered_s": registered_s}))
            self._sample(downtime=False)
        except Exception as exc:  # noqa: BLE001
            self._events.append(BackendEvent(self.now(), EventKind.FAULT, f"job manager recovery failed: {exc}", {}))
        self._expected_tms = set(self.stack.taskmanager_ids())

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
        snap = self.monitor.snapshot(view, t, window_s, self._interarrivals())
        self._sample(downtime=False, snap=snap)
        return snap

    # ---------------------------------------------------------------- execute
    def rescale(self, parallelism: dict[str, int], cpu_share: dict[str, float] | None) -> RescaleResult:
        t = self.now()
        self._sample(downtime=True)
        before = dict(self.state.parallelism)
        self.state, result = self.rescaler.rescale(self.method, self.state, parallelism, cpu_share)
        self._remember_vertices()
        self._expected_tms = set(self.stack.taskmanager_ids())
        self._rescales.append({"t": t, "before": before, "after": result.parallelism, "method": result.method,
                               "downtime_s": result.downtime_s, "ok": result.ok, "error": result.error})
        self._sample(downtime=False)
        return result

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
