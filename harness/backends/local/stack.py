"""`LocalStack`: the one facade the CLI, the runner and the executors use for the local stack.

It holds no state of its own beyond the work directory: pidfiles, generated configs and the task
manager counter live there, so `bench up`, `bench status` and `bench down` can run as separate
processes (and a crashed harness can still clean up).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backends.flink_rest import FlinkRest, JobSubmitError
from harness.backends.local import kafka as kafka_mod
from harness.backends.local import prometheus as prom_mod
from harness.backends.local.cgroups import CpuCgroups
from harness.backends.local.config import LocalConfig
from harness.backends.local.errors import StackError
from harness.backends.local.flink import JOBMANAGER, FlinkCluster
from harness.backends.local.install import Installation, Installer
from harness.backends.local.kafka import KafkaService, TopicRetention
from harness.backends.local.prometheus import FlinkTarget, PrometheusService
from harness.backends.local.supervisor import Supervisor, check_ports_free, wait_ports_free

log = logging.getLogger(__name__)

GENERATOR = "generator"  # pidfile name of the load generator a run adopts: `bench down` stops it too

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: bool
    pid: int | None
    port: int | None
    healthy: bool
    detail: str = ""


@dataclass(frozen=True)
class StackStatus:
    services: list[ServiceStatus] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return bool(self.services) and all(s.healthy for s in self.services)

    @property
    def running(self) -> list[ServiceStatus]:
        return [s for s in self.services if s.running]

    def get(self, name: str) -> ServiceStatus | None:
        return next((s for s in self.services if s.name == name), None)


def directory_bytes(root: Path) -> int:
    """Disk use of a tree (allocated blocks, like `du`; each hard-linked file counted once)."""
    total, seen = 0, set()
    stack = [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:  # vanished or unreadable: nothing to count there
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
            if e.is_dir(follow_symlinks=False):
                stack.append(Path(e.path))
    return total


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class LocalStack:
    def __init__(self, cfg: LocalConfig) -> None:
        self.cfg = cfg
        self.root = cfg.root
        self.ports = cfg.ports()
        self.sup = Supervisor(self.root)
        self.kafka = KafkaService(cfg, self.sup)
        self.flink = FlinkCluster(cfg, self.sup)
        self.prometheus = PrometheusService(cfg, self.sup)
        self.cgroups = CpuCgroups(self.root)
        self.rest = FlinkRest(self.flink.rest_url)
        self._inst: Installation | None = None

    # ---- install ------------------------------------------------------------------------------
    def ensure_installed(self, progress: Progress | None = None) -> Installation:
        """Install every missing piece (idempotent; seconds when all is there)."""
        if self._inst is None:
            self._inst = Installer(self.cfg, progress).ensure()
        return self._inst

    # ---- properties ---------------------------------------------------------------------------
    @property
    def rest_url(self) -> str:
        return self.flink.rest_url

    @property
    def prometheus_url(self) -> str:
        return self.prometheus.url

    @property
    def kafka_bootstrap(self) -> str:
        return self.kafka.bootstrap

    @property
    def generator_metrics_port(self) -> int:
        return self.ports.generator_metrics

    @property
    def flink_home(self) -> Path:
        return self.ensure_installed().flink_home

    @property
    def java_home(self) -> Path:
        return self.ensure_installed().java_home

    @property
    def savepoint_dir(self) -> Path:
        return self.flink.dir / "savepoints"

    def versions(self) -> dict[str, str]:
        return dict(self.ensure_installed().versions)

    def facts(self) -> dict[str, Any]:
        """What to record in run.yaml: versions, ports, CPU bounds and the generated Flink config."""
        return {
            "versions": self.versions(),
            "workdir": str(self.root),
            "ports": dict(self.ports.__dict__),
            "taskmanager_cpu_quota": self.cfg.taskmanager_cpu_quota,
            "cpu_cgroup_version": self.cgroups.version if self._cgroups_on() else None,
            "taskmanager_cpus": {tm: self.taskmanager_cpu(tm) for tm in self.taskmanager_ids()},
            "flink_config": self.flink.settings(),
        }

    # ---- lifecycle ----------------------------------------------------------------------------
    def up(self, taskmanagers: int = 1, progress: Progress | None = None, keep_boost: bool = False) -> None:
        """Start Kafka, the job manager, `taskmanagers` task managers and Prometheus; wait until all are
        healthy. Services already running are kept (so `up` is idempotent). On failure everything is
        stopped again and a StackError names the service and shows its log tail.

        keep_boost: leave new task managers at the start-up CPU quota, so a job submitted next deploys
        fast; the caller must then call `end_startup_boost()` once the job runs (before measuring)."""
        say = progress or (lambda _: None)
        inst = self.ensure_installed(progress)
        self._check_cgroups()
        needed: dict[str, int] = {}
        if not self.sup.alive(kafka_mod.NAME):
            needed.update({"kafka": self.ports.kafka, "kafka controller": self.ports.kafka_controller,
                           "kafka jmx exporter": self.ports.kafka_jmx})
        if not self.sup.alive(JOBMANAGER):
            needed.update({"flink rest": self.ports.flink_rest, "flink rpc": self.ports.flink_rpc})
        if not self.sup.alive(prom_mod.NAME):
            needed["prometheus"] = self.ports.prometheus
        check_ports_free(needed)
        try:
            say("starting kafka, jobmanager, prometheus")
            self.kafka.start(inst)
            self.flink.start_jobmanager(inst)
            self.prometheus.start(inst)
            missing = max(0, taskmanagers - len(self.taskmanager_ids()))
            for _ in range(missing):
                self._spawn_taskmanager(inst)
            self._write_targets()
            say(f"waiting for {taskmanagers} task manager(s) and all services to be healthy")
            self._wait_healthy(taskmanagers, say)
            if not keep_boost:
                self._end_startup_boost()
        except BaseException:
            self.down()
            raise

    def restart_jobmanager(self, taskmanagers: int) -> float:
        """Start the job manager again after it died; the task managers that still run re-register with it.

        Unlike `up`, a failure does not tear the stack down (the caller records it as a fault and the run
        goes on, flagged). Missing task managers are started; returns the seconds until all registered.
        """
        t0 = time.monotonic()
        inst = self.ensure_installed()
        if not self.sup.alive(JOBMANAGER):
            # a killed JVM is gone from the process table before the kernel has closed its sockets
            wait_ports_free({"flink rest": self.ports.flink_rest, "flink rpc": self.ports.flink_rpc})
            self.flink.start_jobmanager(inst)
        for _ in range(max(0, taskmanagers - len(self.taskmanager_ids()))):
            self._spawn_taskmanager(inst)
        self._write_targets()
        deadline = t0 + self.cfg.startup_timeout_s
        log = self.flink.dir / "log" / JOBMANAGER
        while len(set(self.rest.taskmanager_ids()) & set(self.taskmanager_ids())) < taskmanagers:
            self._fail_if_dead(JOBMANAGER, log)
            if time.monotonic() > deadline:
                raise StackError(JOBMANAGER, f"task managers did not re-register in {self.cfg.startup_timeout_s:.0f} s;"
                                             f" log tail of {log}:\n{_tail(self._log_file(log))}")
            time.sleep(0.25)
        self._end_startup_boost()
        return time.monotonic() - t0

    def _wait_healthy(self, taskmanagers: int, say: Progress) -> None:
        """Poll every service's health check in its own thread (a slow probe of one service must not
        delay noticing the others); fail fast when a process dies, or at the start-up timeout."""
        quick = FlinkRest(self.flink.rest_url, timeout=2.0)
        checks: list[tuple[str, Callable[[], bool], Path]] = [
            (kafka_mod.NAME, self.kafka.healthy, self.kafka.dir / "logs"),
            (JOBMANAGER, lambda: quick.overview() is not None, self.flink.dir / "log" / JOBMANAGER),
            (prom_mod.NAME, self.prometheus.healthy, self.prometheus.dir / "prometheus.log"),
            ("taskmanagers", lambda: len(set(quick.taskmanager_ids()) & set(self.taskmanager_ids()))
             >= taskmanagers, self.flink.dir / "log"),
        ]
        t0 = time.monotonic()
        deadline = t0 + self.cfg.startup_timeout_s
        failed = threading.Event()

        def wait_one(name: str, check: Callable[[], bool], log: Path) -> None:
            while not failed.is_set():
                self._fail_if_dead(name, log)
                if check():
                    say(f"{name} healthy after {time.monotonic() - t0:.1f} s")
                    return
                if time.monotonic() > deadline:
                    raise StackError(name, f"not healthy after {self.cfg.startup_timeout_s:.0f} s; "
                                           f"log tail of {log}:\n{_tail(self._log_file(log))}")
                time.sleep(0.25)

        with ThreadPoolExecutor(max_workers=len(checks)) as pool:
            futures = [pool.submit(wait_one, *c) for c in checks]
            try:
                for fut in as_completed(futures):
                    fut.result()
            finally:
                failed.set()  # stop the other pollers when one failed

    def _log_file(self, log: Path) -> Path:
        if log.is_file():
            return log
        files = sorted(log.rglob("*.log"), key=lambda p: p.stat().st_mtime) if log.exists() else []
        return files[-1] if files else log

    def _fail_if_dead(self, name: str, log: Path) -> None:
        names = self.sup.names("tm-") if name == "taskmanagers" else [name]
        for n in names:
            if self.sup.get(n) is None:
                raise StackError(n, f"process exited during start-up; log tail of {log}:\n"
                                    f"{_tail(self._log_file(log))}")

    def down(self, purge: bool = False) -> None:
        """Stop every process of this stack (pidfiles, process groups, then a sweep) and remove cgroups.

        What a stopped stack never reads again goes too: the benchmark topics (each run reads from a fresh
        consumer group at the topics' end), Flink's scratch directories, checkpoints and savepoints (no HA:
        a restarted session cluster restores nothing), and the logs of all but the newest `keep_logs` task
        managers. The work directory is left at its configured size: configs, the uploaded job jar (one per
        build), Prometheus' data (bounded by `prometheus_retention_mb`), Kafka's metadata and the kept logs.
        `purge` removes the whole work directory (the installs and class-data archives, in the shared
        cache, stay)."""
        # task managers and the load generator first (the job fails over nowhere, nothing reads or writes
        # the topics any more), then the topics go, then the rest together
        self._stop_gently([*self.sup.names("tm-"), *self.sup.names(GENERATOR)], 15.0)
        deleted = self.kafka.delete_topics() if self.sup.alive(kafka_mod.NAME) else []
        self._stop_gently(self.sup.names(), 20.0)
        self.flink.forget_reporters()
        self.sup.sweep()
        self.cgroups.cleanup()
        self._promote_archives()
        for marker in self.sup.run_dir.glob("*.boost"):
            marker.unlink(missing_ok=True)
        if self.prometheus.targets_file.parent.exists():
            self.prometheus.set_flink_targets([])
        if self.sup.names():  # something would not stop: leave its files alone
            log.warning("not pruning %s: still running: %s", self.root, ", ".join(self.sup.names()))
            return
        self.kafka.remove_deleted_logs(deleted)
        self.flink.prune(self.cfg.keep_logs)
        if purge:
            self._purge()

    def _purge(self) -> None:
        """Remove the work directory, but not the installs if they were configured to live inside it."""
        keep = self.cfg.install_root
        if not self.root.exists():
            return
        if keep == self.root or self.root in keep.parents:
            for child in self.root.iterdir():
                if child == keep or child in keep.parents:
                    continue
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    def disk_usage(self) -> dict[str, int]:
        """Bytes under the work directory and under the shared install cache (what `bench status` shows)."""
        return {"stack": directory_bytes(self.root), "cache": directory_bytes(self.cfg.install_root)}

    def _stop_gently(self, names: list[str], timeout: float) -> None:
        """Stop `names`; a JVM that writes a class-data archive at exit gets a CPU and time to write it."""
        dumpers = self.flink.cds.dumping_pids()
        slow = False
        for name in names:
            info = self.sup.get(name)
            if info is None or info.pid not in dumpers:
                continue
            slow = True
            if name.startswith("tm-") and self._cgroups_on() and self.cgroups.group(name).exists():
                with contextlib.suppress(StackError):
                    self.cgroups.group(name).set_cpus(max(1.0, self.cfg.taskmanager_startup_cpu))
        self.sup.stop_many(names, timeout=max(timeout, 90.0) if slow else timeout)

    def _promote_archives(self) -> None:
        """Move class-data-sharing archives written by stopped JVMs into place (never fails `down`)."""
        try:
            self.flink.cds.promote()
        except Exception as exc:  # noqa: BLE001 - an archive is an optimisation; say why it was not kept
            log.warning("class-data-sharing archives not promoted: %s: %s", type(exc).__name__, exc)

    def status(self) -> StackStatus:
        """Every service of this work directory; the generator too while a run drives load."""
        out: list[ServiceStatus] = []
        registered_early = set(self.rest.taskmanager_ids()) if self.sup.alive(JOBMANAGER) else set()
        for tm in registered_early & set(self.taskmanager_ids()):
            self._end_startup_boost(tm)  # in case the process that started it exited before it registered
        k = self.sup.get(kafka_mod.NAME)
        out.append(ServiceStatus(kafka_mod.NAME, k is not None, k.pid if k else None, self.ports.kafka,
                                 k is not None and self.kafka.healthy()))
        jm = self.sup.get(JOBMANAGER)
        overview = self.rest.overview() if jm else None
        detail = ""
        if overview:
            detail = f"{overview.get('taskmanagers', 0)} TMs, {overview.get('jobs-running', 0)} jobs running"
        out.append(ServiceStatus(JOBMANAGER, jm is not None, jm.pid if jm else None, self.ports.flink_rest,
                                 overview is not None, detail))
        registered = registered_early
        for tm in self.sup.names("tm-"):
            p = self.sup.get(tm)
            cpus = self.taskmanager_cpu(tm)
            out.append(ServiceStatus(tm, p is not None, p.pid if p else None, self.flink.reporter_port_of(tm),
                                     p is not None and tm in registered,
                                     f"cpu quota {cpus:g}" if cpus is not None else "cpu unbounded"))
        p = self.sup.get(prom_mod.NAME)
        out.append(ServiceStatus(prom_mod.NAME, p is not None, p.pid if p else None, self.ports.prometheus,
                                 p is not None and self.prometheus.healthy()))
        g = self.sup.get(GENERATOR)  # only while a run drives load (the backend adopts it)
        if g is not None:
            out.append(ServiceStatus(GENERATOR, True, g.pid, self.ports.generator_metrics, True, "load generator"))
        return StackStatus(out)

    # ---- services on demand (fault injection, tests) -------------------------------------------
    def stop_prometheus(self) -> None:
        """Stop Prometheus (its data stays): monitoring goes blind, the job runs on."""
        self.prometheus.stop()

    def start_prometheus(self, timeout_s: float | None = None) -> float:
        """Start Prometheus again on its data directory and wait until it is ready; returns the seconds taken."""
        return self._start_service(prom_mod.NAME, self.prometheus.start, self.prometheus.healthy,
                                   {"prometheus": self.ports.prometheus}, self.prometheus.dir / "prometheus.log",
                                   timeout_s)

    def stop_kafka(self) -> None:
        """Stop the broker (its logs stay): producers and the job's sources wait for it."""
        self.kafka.stop()

    def start_kafka(self, timeout_s: float | None = None) -> float:
        """Start the broker again on its log directory and wait until it answers; returns the seconds taken."""
        return self._start_service(kafka_mod.NAME, self.kafka.start, self.kafka.healthy,
                                   {"kafka": self.ports.kafka, "kafka controller": self.ports.kafka_controller,
                                    "kafka jmx exporter": self.ports.kafka_jmx}, self.kafka.dir / "logs", timeout_s)

    def kill(self, name: str) -> int:
        """SIGKILL one service of this stack (`jobmanager`, `tm-3`, ...): a crash, for fault injection."""
        import os
        import signal

        info = self.sup.get(name)
        if info is None:
            raise StackError(name, "is not running")
        os.kill(info.pid, signal.SIGKILL)
        return info.pid

    def _start_service(self, name: str, start: Callable[[Installation], None], healthy: Callable[[], bool],
                       ports: dict[str, int], log: Path, timeout_s: float | None) -> float:
        t0 = time.monotonic()
        if not self.sup.alive(name):
            wait_ports_free(ports)
            start(self.ensure_installed())
        limit = t0 + (timeout_s or self.cfg.startup_timeout_s)
        while not healthy():
            self._fail_if_dead(name, log)
            if time.monotonic() > limit:
                raise StackError(name, f"not healthy {limit - t0:.0f} s after a restart; log tail of {log}:\n"
                                       f"{_tail(self._log_file(log))}")
            time.sleep(0.25)
        return time.monotonic() - t0

    # ---- task managers ------------------------------------------------------------------------
    def _cgroups_on(self) -> bool:
        return self.cfg.cpu_cgroups != "off" and self.cgroups.available

    def _check_cgroups(self) -> None:
        if self.cfg.cpu_cgroups == "required" and not self.cgroups.available:
            raise StackError("cgroup", self.cgroups.why_unavailable())

    def _spawn_taskmanager(self, inst: Installation) -> str:
        tm_id = self.flink.next_taskmanager_id()
        self.flink.prune_logs(self.cfg.keep_logs)  # a long run replaces many task managers
        procs = None
        if self._cgroups_on():
            # a JVM starting under a 0.25-CPU quota takes many seconds; start with a boost and
            # drop to the configured quota once it registered (no job runs on it before that)
            cpus = max(self.cfg.taskmanager_cpu_quota, self.cfg.taskmanager_startup_cpu)
            procs = self.cgroups.create(tm_id, cpus).procs
            if cpus > self.cfg.taskmanager_cpu_quota:
                self.sup.run_dir.mkdir(parents=True, exist_ok=True)
                self._boost_marker(tm_id).write_text(str(cpus))
        self.flink.start_taskmanager(inst, tm_id, procs)
        return tm_id

    def start_taskmanager(self, wait: bool = True) -> str:
        """Start one more task manager (in its own CPU cgroup); by default wait until it registered."""
        inst = self.ensure_installed()
        self._check_cgroups()
        tm_id = self._spawn_taskmanager(inst)
        self._write_targets()
        if wait:
            deadline = time.monotonic() + self.cfg.startup_timeout_s
            while tm_id not in self.rest.taskmanager_ids():
                self._fail_if_dead(tm_id, self.flink.dir / "log" / tm_id)
                if time.monotonic() > deadline:
                    raise StackError(tm_id, "did not register with the job manager in time")
                time.sleep(0.25)
            self._end_startup_boost(tm_id)
        else:
            threading.Thread(target=self._end_boost_when_registered, args=(tm_id,), daemon=True).start()
        return tm_id

    def _end_boost_when_registered(self, tm_id: str) -> None:
        """Background: drop the start-up boost as soon as `tm_id` registered (or gave up/died)."""
        deadline = time.monotonic() + self.cfg.startup_timeout_s
        while time.monotonic() < deadline and self.sup.alive(tm_id):
            if tm_id in self.rest.taskmanager_ids():
                break
            time.sleep(0.25)
        with contextlib.suppress(StackError):
            self._end_startup_boost(tm_id)

    def _boost_marker(self, tm_id: str) -> Path:
        return self.sup.run_dir / f"{tm_id}.boost"

    def end_startup_boost(self) -> None:
        """Put every task manager still at its start-up quota on the configured quota."""
        self._end_startup_boost()

    def _end_startup_boost(self, tm_id: str | None = None) -> None:
        """Set the configured quota on `tm_id` (or every task manager) if it still runs boosted.

        Only a boosted group is touched: a quota set on purpose (set_taskmanager_cpu) stays."""
        if not self._cgroups_on():
            return
        for tm in [tm_id] if tm_id else self.taskmanager_ids():
            marker = self._boost_marker(tm)
            if not marker.exists():
                continue
            g = self.cgroups.group(tm)
            if g.exists():
                g.set_cpus(self.cfg.taskmanager_cpu_quota)
            marker.unlink(missing_ok=True)

    def stop_taskmanager(self, tm_id: str) -> None:
        self._stop_gently([tm_id], 15.0)
        self.flink.stop_taskmanager(tm_id)
        self._boost_marker(tm_id).unlink(missing_ok=True)
        self._promote_archives()
        self.cgroups.remove(tm_id)
        self._write_targets()

    def taskmanager_ids(self) -> list[str]:
        return self.flink.taskmanager_ids()

    def set_taskmanager_cpu(self, tm_id: str, cpus: float) -> None:
        """Change a task manager's CPU quota at run time (vertical scaling)."""
        if not self._cgroups_on():
            raise StackError("cgroup", f"cannot bound {tm_id}: {self.cgroups.why_unavailable()}")
        g = self.cgroups.group(tm_id)
        if not g.exists():
            raise StackError(tm_id, "has no CPU cgroup (not running?)")
        self._boost_marker(tm_id).unlink(missing_ok=True)  # an explicit quota ends the start-up boost
        g.set_cpus(cpus)

    def taskmanager_cpu(self, tm_id: str) -> float | None:
        """The CPU quota of a task manager (None = unbounded)."""
        if self.cgroups.base is None:
            return None
        g = self.cgroups.group(tm_id)
        return g.cpus() if g.exists() else None

    def taskmanager_pid(self, tm_id: str) -> int | None:
        p = self.sup.get(tm_id)
        return p.pid if p else None

    def _write_targets(self) -> None:
        targets = []
        for name in [JOBMANAGER, *self.taskmanager_ids()]:
            port = self.flink.reporter_port_of(name)
            if port is not None and self.sup.alive(name):
                targets.append(FlinkTarget(name, port))
        self.prometheus.set_flink_targets(targets)

    # ---- Kafka and jobs -----------------------------------------------------------------------
    def ensure_topics(self, topics: list[str], partitions: int, run_s: float | None = None) -> None:
        """Create or grow the topics, with retention for a run of `run_s` seconds (see TopicRetention)."""
        retention = TopicRetention.for_run(self.cfg, partitions, run_s) if run_s is not None else None
        self.kafka.ensure_topics(topics, partitions, retention)

    def recreate_topics(self, topics: list[str], partitions: int, configs: dict[str, str] | None = None) -> None:
        self.kafka.recreate_topics(topics, partitions, configs)

    def submit_job(self, jar: Path, main_class: str, args: list[str], savepoint: str | None = None) -> str:
        """Upload `jar` (once per content) and run it (optionally from a savepoint); returns the Flink job id."""
        try:
            jar_id = self.uploaded_jar(jar)
            return self.rest.run_jar(jar_id, main_class, args, savepoint=savepoint)
        except JobSubmitError as exc:
            raise StackError(exc.piece, exc.message) from exc

    def uploaded_jar(self, jar: Path) -> str:
        """The upload id of `jar`'s content, uploading it only if the job manager does not hold it yet.

        The upload is named `<stem>-<sha256 prefix>.jar`: a job started again (a rescale by savepoint, a
        job manager restart, the next run) reuses it, and uploads of other builds of the same jar are
        deleted, so the upload directory holds one copy per jar (it held one per submission: 7 copies,
        164 MB, after one test session)."""
        if not jar.exists():
            raise JobSubmitError("job jar", f"{jar} does not exist")
        name = f"{jar.stem}-{_sha256(jar)[:16]}.jar"
        keep: str | None = None
        for uploaded in self.rest.jars():  # newest first
            if uploaded.name == name and keep is None:
                keep = uploaded.id
            elif uploaded.name == name or uploaded.name.startswith(f"{jar.stem}-") or uploaded.name == jar.name:
                self.rest.delete_jar(uploaded.id)  # an older build, a duplicate, or an unnamed upload
        return keep if keep is not None else self.rest.upload_jar(jar, name)

    def tsdb_snapshot(self) -> Path:
        return self.prometheus.tsdb_snapshot()
