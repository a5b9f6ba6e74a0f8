"""`K8sBackend`: the Backend protocol on a Kubernetes cluster (Kafka + Flink + Prometheus in one namespace).

Lifecycle of `start` (fails fast, before creating anything, when no cluster is reachable):
connect (kubeconfig/context or in-cluster) -> namespace, RBAC, Kafka, Prometheus, topic Job and Flink
(standalone Deployments or a FlinkDeployment) applied together, so the JVMs start in parallel -> Kafka,
Prometheus, topics ready -> wait until the job runs at its initial parallelism
(Flink REST through `K8sConfig.rest_url`, e.g. a `kubectl port-forward`, or the service DNS in-cluster)
-> generator Job; its start is t = 0. Wall-clock time from then on.

Monitoring reuses `harness.metrics.prometheus` (same MetricsSnapshot as local and sim) pointed at
`K8sConfig.prometheus_url`; the task-manager CPU quota it divides by is each pod's CPU limit.
With `observe_only` (operator path) the operator's autoscaler rescales: `rescale` refuses and the
parallelism changes the harness observes are recorded as `action` events.

Exercised on fakes (tests/k8s/test_backend.py) and end to end on the project's own one-node cluster
(tests/k8s/test_e2e_cluster.py, docs/k8s.md).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import requests
import yaml

from harness.backends.base import BackendEvent
from harness.backends.k8s import manifests as mf
from harness.backends.k8s import series
from harness.backends.k8s.config import K8sConfig
from harness.backends.k8s.executor import K8sError, K8sExecutor, KubeApis, connect
from harness.backends.k8s.portforward import PortForward, port_forward_command
from harness.backends.k8s.rescale import JobRest, JobState, K8sRescaler
from harness.backends.wallclock import WallClockBackend
from harness.metrics.prometheus import JobView, PrometheusMonitor
from harness.metrics.snapshot import MetricsSnapshot
from harness.topology import Topology
from harness.vocabulary import EventKind

if TYPE_CHECKING:
    from harness.config import Experiment
    from workloads.patterns import LoadPattern

SUPERVISE_EVERY_S = 5.0


def _default_rest(url: str) -> JobRest:
    from harness.backends.flink_rest import FlinkRest

    return FlinkRest(url)


class K8sBackend(WallClockBackend):
    name = "k8s"
    supervise_every_s = SUPERVISE_EVERY_S

    def __init__(
        self,
        connector: Callable[[K8sConfig], KubeApis] = connect,
        rest_factory: Callable[[str], JobRest] = _default_rest,
        monitor_factory: Callable[[str, float], Any] = lambda url, step: PrometheusMonitor(url, step_s=step),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        forward_factory: Callable[[list[str]], PortForward] = PortForward,
    ) -> None:
        super().__init__()
        self._connector = connector
        self._forward_factory = forward_factory
        self.forwards: list[PortForward] = []
        self._rest_factory = rest_factory
        self._monitor_factory = monitor_factory
        self.clock = clock
        self.sleep = sleep
        self.cfg = K8sConfig.model_validate({})
        self.ex: K8sExecutor | None = None
        self._wall0 = 0.0
        self._events: list[BackendEvent] = []
        self._samples: list[series.Sample] = []
        self._vertex_ids_seen: dict[str, set[str]] = {}
        self._job_ids: list[str] = []
        self._manifests: list[dict[str, Any]] = []
        self._exported: list[dict[str, Any]] | None = None
        self._down_since: float | None = None
        self._stopped = False
        self.startup_s: float | None = None
        self.server_version = ""

    # ---------------------------------------------------------------- lifecycle
    def start(self, experiment: Experiment, pattern: LoadPattern, topology: Topology) -> None:
        cfg = self.cfg = experiment.k8s
        self.topology = topology
        self.method = experiment.rescale_method
        parallelism = experiment.initial_parallelism_map()
        job = mf.JobSpec(topology.query, parallelism, list(topology.topics), seed=experiment.seed)
        if job.taskmanagers > cfg.max_taskmanagers:
            raise ValueError(f"initial parallelism needs {job.taskmanagers} task managers > "
                             f"k8s.max_taskmanagers={cfg.max_taskmanagers}")
        if self.method == "savepoint" and not cfg.use_operator and not cfg.durable_state_dir:
            raise ValueError("rescale_method savepoint on k8s needs savepoints that outlive the job manager pod: "
                             "k8s.checkpoint_dir (shared storage) or k8s.checkpoint_host_path (one node), "
                             "or k8s.use_operator: true")
        apis = self._connector(cfg)  # K8sUnavailable names the kubeconfig/context it tried
        self.server_version = getattr(apis, "server_version", "")
        ex = self.ex = K8sExecutor(cfg, apis, self.clock, self.sleep)
        t_start = self.clock()

        infra = mf.infrastructure(cfg, job)
        ex.apply_all(infra)
        flink = mf.flink(cfg, job)
        # Flink's JVMs start while Kafka comes up (a job that finds no topic yet restarts until it does)
        ex.apply_all(flink)
        ex.wait_ready("StatefulSet", mf.KAFKA)
        ex.wait_ready("Deployment", mf.PROMETHEUS)
        ex.wait_ready("Job", mf.TOPICS_JOB)
        if cfg.use_operator:
            ex.wait_until(ex.flinkdeployment_ready, cfg.ready_timeout_s,
                          f"FlinkDeployment {cfg.namespace}/{cfg.flink_name} to run its job", ex.describe_pods)
        else:
            ex.wait_ready("Deployment", mf.JOBMANAGER)
            ex.wait_ready("Deployment", mf.TASKMANAGER)

        self.rest_url = cfg.resolved_rest_url(mf.in_cluster_rest_url(cfg))
        self.prometheus_url = cfg.resolved_prometheus_url(mf.in_cluster_prometheus_url(cfg))
        if cfg.cluster_ip:  # on a node: kube-proxy routes the node's own traffic to Service ClusterIPs
            self.rest_url = cfg.rest_url or f"http://{ex.cluster_ip(mf.rest_service_name(cfg))}:{mf.REST_PORT}"
            self.prometheus_url = cfg.prometheus_url or f"http://{ex.cluster_ip(mf.PROMETHEUS)}:{mf.PROMETHEUS_PORT}"
        if cfg.port_forward:  # the services exist only now
            for svc, local, remote in ((mf.rest_service_name(cfg), cfg.rest_local_port, mf.REST_PORT),
                                       (mf.PROMETHEUS, cfg.prometheus_local_port, mf.PROMETHEUS_PORT)):
                fwd = self._forward_factory(port_forward_command(cfg, svc, local, remote, cfg.kubectl))
                fwd.start()
                self.forwards.append(fwd)
        self.rest = self._rest_factory(self.rest_url)
        self.rescaler = K8sRescaler(cfg, ex, self.rest, topology, self.clock, self.sleep, job=job)
        self.rescaler.wait_running(None, parallelism, since=self.clock())
        state = self.rescaler.current()
        state.cpu_share = {op: 1.0 for op in topology.names}
        self.state = state
        self._remember(state)
        self.monitor = self._monitor_factory(self.prometheus_url, cfg.scrape_interval_s)

        load = mf.load(cfg, job, [float(r) for r in pattern.per_second()])
        ex.apply_all(load)
        ex.wait_until(lambda: ex.running(mf.GENERATOR), cfg.ready_timeout_s, "the generator pod to run",
                      ex.describe_pods)
        self._manifests = [*infra, *flink, *load]
        self.startup_s = self.clock() - t_start
        self._t0 = self.clock()
        self._wall0 = time.time()
        self._sample(processing=True)
        if cfg.observe_only and experiment.autoscaler.name != "static":
            self._events.append(BackendEvent(0.0, EventKind.WARNING, (
                f"observe_only: the operator's autoscaler scales this job; the harness autoscaler "
                f"{experiment.autoscaler.name!r} still runs but its decisions are refused (use autoscaler: static)"
            ), {}))

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for fwd in self.forwards:
            fwd.stop()
        if self.ex is not None and self.cfg.teardown:
            try:
                self.ex.teardown(wait_s=self.cfg.teardown_wait_s)
            except K8sError as exc:
                self._events.append(BackendEvent(self.now(), EventKind.WARNING, f"teardown failed: {exc}", {}))

    # ---------------------------------------------------------------- faults and observed actions
    def _supervise(self) -> None:
        """Record the job going down/up (Kubernetes and Flink restart it) and rescales we did not make."""
        self._last_supervise = self.clock()
        for fwd in self.forwards:
            if fwd.ensure():
                self._events.append(BackendEvent(self.now(), EventKind.WARNING,
                                                 f"port-forward restarted: {fwd.cmd[-2:]}", {}))
        try:
            fresh = self.rescaler.current()
        except Exception as exc:  # noqa: BLE001 - the job manager may be restarting
            if self._down_since is None:
                self._down_since = self.now()
                self._events.append(BackendEvent(self.now(), EventKind.FAULT, f"job not reachable/running: {exc}", {}))
            return
        job = self.rest.job(fresh.job_id)
        if not job.running:
            if self._down_since is None:
                self._down_since = self.now()
                self._events.append(BackendEvent(self.now(), EventKind.FAULT,
                                                 f"job {job.state}, not all subtasks running",
                                                 {"job_id": fresh.job_id}))
            return
        if self._down_since is not None:
            self._events.append(BackendEvent(self.now(), EventKind.RECOVERY, "job running again",
                                             {"outage_s": self.now() - self._down_since, "job_id": fresh.job_id}))
            self._down_since = None
        self._observe(fresh)

    def _observe(self, fresh: JobState) -> None:
        """Parallelism changed without us: with observe_only that is the operator's autoscaler acting (an
        `action` event, counted like ours); otherwise a warning (e.g. Flink ran with fewer slots)."""
        if fresh.parallelism == self.state.parallelism and fresh.job_id == self.state.job_id:
            return
        if fresh.parallelism != self.state.parallelism:
            data = {"before": dict(self.state.parallelism), "after": dict(fresh.parallelism)}
            if self.cfg.observe_only:
                self._events.append(BackendEvent(self.now(), EventKind.ACTION,
                                                 "rescaled by the Flink operator autoscaler",
                                                 {**data, "method": "k8s:operator-autoscaler"}))
            else:
                self._events.append(BackendEvent(self.now(), EventKind.WARNING,
                                                 "parallelism changed outside the harness",
                                                 data))
        fresh.cpu_share = dict(self.state.cpu_share)
        self.state = fresh
        self._remember(fresh)
        self._sample(processing=True)

    def drain_events(self) -> list[BackendEvent]:
        out, self._events = self._events, []
        return out

    def _remember(self, state: JobState) -> None:
        if state.job_id not in self._job_ids:
            self._job_ids.append(state.job_id)
        for op, vid in state.vertex_ids.items():
            self._vertex_ids_seen.setdefault(op, set()).add(vid)

    # ---------------------------------------------------------------- monitor
    def job_view(self) -> JobView:
        fresh = self.rescaler.current()
        if self.cfg.observe_only:
            self._observe(fresh)
        pods = self.ex.taskmanager_pods() if self.ex else []
        try:
            tms = len(self.rest.taskmanagers())
        except Exception:  # noqa: BLE001 - REST not answering: the pods are the count
            tms = len(pods)
        return JobView(
            job_id=fresh.job_id, topology=self.topology, vertex_ids=fresh.vertex_ids,
            parallelism=fresh.parallelism, taskmanagers=tms, tm_quota=self.rescaler.tm_quota(pods),
            cpu_share=dict(self.state.cpu_share), host_cpus=1,
        )

    def snapshot(self, window_s: float) -> MetricsSnapshot:
        t = self.now()
        try:
            view = self.job_view()
        except Exception as exc:  # noqa: BLE001 - job manager unreachable: a warning event, the snapshot says why
            reason = f"job manager unreachable: {exc}"
            self._events.append(BackendEvent(t, EventKind.WARNING, reason, {}))
            return MetricsSnapshot.unmeasured(t, window_s, self.topology, self.state.parallelism,
                                              self.state.cpu_share, reason)
        snap = self.monitor.snapshot(view, t, window_s)
        self._sample(processing=True, snap=snap, taskmanagers=view.taskmanagers)
        return snap

    # ---------------------------------------------------------------- execute (rescale: WallClockBackend)
    def _mark_downtime(self, down: bool) -> None:
        self._sample(processing=not down)

    def _after_rescale(self) -> None:
        self._remember(self.state)

    def _sample(self, processing: bool, snap: MetricsSnapshot | None = None, taskmanagers: int | None = None) -> None:
        state = getattr(self, "state", None)
        if state is None:
            return
        self._samples.append(series.Sample(
            t=self.now(), processing=processing, parallelism=dict(state.parallelism),
            cpu_share=dict(state.cpu_share),
            taskmanagers=taskmanagers if taskmanagers is not None else sum(state.parallelism.values()),
            cpu={op: m.cpu_load for op, m in snap.operators.items()} if snap else {},
            cpu_job=snap.cpu_load if snap else None,
            cpu_jvm={op: m.cpu_jvm_load for op, m in snap.operators.items()} if snap else {},
            cpu_jvm_job=snap.cpu_jvm_load if snap else None,
        ))

    # ---------------------------------------------------------------- results
    def _export(self) -> list[dict[str, Any]]:
        if self._exported is not None:
            return self._exported
        rows: list[dict[str, Any]] = []
        if self._t0 is not None:
            step = self.cfg.scrape_interval_s
            start, end = self._wall0, self._wall0 + self.now()
            for (metric, op), promql in series.export_queries(self.topology, self._vertex_ids_seen, step).items():
                try:
                    result = self.monitor.query_range(promql, start, end, step)
                except Exception as exc:  # noqa: BLE001 - a missing series is reported, not fatal
                    self._events.append(BackendEvent(self.now(), EventKind.WARNING,
                                                     f"export of {metric} failed: {exc}", {}))
                    continue
                rows.extend(series.range_rows(metric, op, result, self._wall0))
        self._exported = rows
        return rows

    def timeseries(self) -> pd.DataFrame:
        return series.timeseries(self._samples, self._export())

    def save_artifacts(self, run_dir: Path) -> dict[str, Any]:
        """The manifests applied, the exported series, and a TSDB snapshot inside the Prometheus pod.

        The snapshot stays on the pod's emptyDir (copy it with `kubectl cp` before teardown, i.e. run
        with `k8s.teardown: false`); its path is recorded.
        """
        run_dir = Path(run_dir)
        out: dict[str, Any] = {}
        (run_dir / "k8s-manifests.yaml").write_text(yaml.safe_dump_all(self._manifests, sort_keys=False))
        out["manifests"] = {"file": "k8s-manifests.yaml", "count": len(self._manifests)}
        exported = pd.DataFrame(self._export(), columns=series.COLUMNS)
        exported.to_parquet(run_dir / "prometheus-series.parquet", index=False)
        out["prometheus_series"] = {"file": "prometheus-series.parquet", "rows": len(exported)}
        if self._t0 is not None:
            try:
                r = requests.post(f"{self.prometheus_url}/api/v1/admin/tsdb/snapshot", timeout=60)
                r.raise_for_status()
                name = r.json()["data"]["name"]
                copied = self._copy_snapshot(name, run_dir / "prometheus-snapshot")
                if copied is not None:
                    out["prometheus_snapshot"] = {"dir": "prometheus-snapshot", "source": copied}
                    return out
                pod = f"{self.cfg.namespace}/deploy/{mf.PROMETHEUS}"
                out["prometheus_snapshot"] = {
                    "in_pod": f"/prometheus/snapshots/{name}",
                    "copy_with": f"kubectl -n {self.cfg.namespace} cp "
                                 f"$(kubectl -n {self.cfg.namespace} get pod -l component=prometheus -o name | "
                                 f"cut -d/ -f2):/prometheus/snapshots/{name} ./prometheus-snapshot",
                    "pod": pod,
                    "kept": not self.cfg.teardown,
                }
            except Exception as exc:  # noqa: BLE001 - artifacts are a bonus
                out["prometheus_snapshot"] = {"error": f"{type(exc).__name__}: {exc}"}
        return out

    def _copy_snapshot(self, name: str, dest: Path) -> str | None:
        """Copy the TSDB snapshot out of the Prometheus pod's emptyDir when the harness runs on its node
        (`kubelet_root_dir`), so the record holds it like a local run's; None when that is not possible."""
        root = self.cfg.kubelet_root_dir
        if not root or self.ex is None:
            return None
        for pod in self.ex.pods(f"app=bench,component={mf.PROMETHEUS}"):
            uid = pod.get("metadata", {}).get("uid")
            src = Path(root) / "pods" / str(uid) / "volumes" / "kubernetes.io~empty-dir" / "data" / "snapshots" / name
            if src.is_dir():
                shutil.copytree(src, dest)
                return str(src)
        return None

    def facts(self) -> dict[str, Any]:
        cfg = self.cfg
        return {
            "backend": self.name,
            "rescale_method": getattr(self, "method", None),
            "k8s": cfg.model_dump(mode="json"),
            "server_version": self.server_version,
            "flink_path": "operator" if cfg.use_operator else "standalone",
            "observe_only": cfg.observe_only,
            "flink_config": mf.flink_settings(cfg, standalone=not cfg.use_operator),
            "rest_url": getattr(self, "rest_url", None),
            "prometheus_url": getattr(self, "prometheus_url", None),
            "job_ids": list(self._job_ids),
            "rescales": list(self._rescales),
            "startup_s": self.startup_s,
            "applied": [f"{k}/{n}" for k, n in (self.ex.applied if self.ex else [])],
        }
