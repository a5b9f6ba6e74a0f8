"""A Flink standalone session cluster: one job manager process and one process per task manager.

The distribution comes from the pyflink wheels (FLINK_HOME). Each process is started the way the
distribution's `jobmanager.sh` / `taskmanager.sh start-foreground` would start it, but as a direct java
command (see `resource_params`), so the pid we hold is the JVM's. One generated conf dir serves all;
what differs per task manager (resource id, reporter port, log file) is passed as dynamic properties.

Config choices and why:
- one slot per task manager: with one slot-sharing group per operator, every task manager runs one
  subtask, so "number of task managers" is the resource the autoscalers trade (thesis ch. 5);
- adaptive scheduler with short cooldown/stabilisation: `PUT /jobs/:id/resource-requirements`
  rescales in place within seconds instead of the ~18 s seen with the defaults;
- checkpoints and savepoints on local disk, hashmap (or RocksDB) state backend: stop-with-savepoint
  and restore work without any external storage;
- every task manager gets an explicit Prometheus reporter port, so the file_sd target list names it;
  with `probe_reporter` (`bench calibrate`) a second, filtered one beside it (`PROBE_METRICS`);
- every process gets its own scratch directory, `tmp/<name>` (`io.tmp.dirs`, `java.io.tmpdir`: its
  working directory, blob cache, spill files, the extracted RPC jar), removed when the process stops,
  so a stack does not keep one directory per task manager ever started (22 of them, up to 71 MB each).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from harness.backends.local.cds import CdsPlan, ClassDataSharing
from harness.backends.local.config import LocalConfig, TaskManagerJit
from harness.backends.local.errors import StackError
from harness.backends.local.install import Installation
from harness.backends.local.supervisor import Supervisor, port_in_use

JOBMANAGER = "jobmanager"
TM_PREFIX = "tm-"
PROMETHEUS_REPORTER = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
# The probe reporter's filter (`metrics.reporter.<name>.filter.includes`, "<scope>:<names>"): only what the
# calibration's recorder reads (`harness.calibration.recorder`): 11-16 series of a task manager's ~110, 5-8 kB a
# scrape against 49 kB. What a scrape each second costs a 0.1-CPU task manager's records is within the A/B's noise
# either way (full: -8.4 % to +3.0 %, probe: -5.1 % to +3.0 %, two runs each: benchmarks/bench_scrape_cost.py,
# session 26), but the probe keeps the calibration's extra reading to a tenth of the bytes: a run's task managers
# are read once per Prometheus interval, and a calibration's are that and this.
PROBE_METRICS = (
    "*:busyTimeMsPerSecond,idleTimeMsPerSecond,backPressuredTimeMsPerSecond,isBackPressured,numRecordsIn,"
    "numRecordsOut,pendingRecords,recordLag,inPoolUsage",
    "*.Status.JVM.CPU:Load,Time",
)


def _seconds(s: float) -> str:
    return f"{int(round(s * 1000))}ms"


class FlinkCluster:
    """Generates the config and starts/stops the job manager and task managers."""

    def __init__(self, cfg: LocalConfig, sup: Supervisor) -> None:
        self.cfg = cfg
        self.sup = sup
        self.dir = cfg.root / "flink"
        self.cds = ClassDataSharing(cfg.cds_root, enabled=cfg.class_data_sharing)
        self.conf_dir = self.dir / "conf"
        self.ports = cfg.ports()

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.flink_rest}"

    # ---- configuration ------------------------------------------------------------------------
    def settings(self, inst: Installation | None = None) -> dict[str, Any]:
        """The generated config.yaml as flat keys (recorded in the run record)."""
        c, p = self.cfg, self.ports
        s: dict[str, Any] = {
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.rpc.port": p.flink_rpc,
            "jobmanager.bind-host": "127.0.0.1",
            "jobmanager.memory.process.size": c.jobmanager_memory,
            "jobmanager.execution.failover-strategy": "region",
            "taskmanager.host": "127.0.0.1",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.numberOfTaskSlots": 1,
            "taskmanager.memory.process.size": c.taskmanager_memory,
            # shrink the fixed JVM parts so a 768m task manager still has ~160m task heap
            "taskmanager.memory.jvm-metaspace.size": "160m",
            "taskmanager.memory.jvm-overhead.min": "128m",
            "taskmanager.memory.framework.off-heap.size": "64m",
            "taskmanager.memory.managed.size": "32m" if c.state_backend == "hashmap" else "128m",
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": p.flink_rest,
            "parallelism.default": 1,
            "jobmanager.scheduler": "adaptive",
            "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": _seconds(c.adaptive_cooldown_s),
            "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout":
                _seconds(c.adaptive_stabilization_s),
            "jobmanager.adaptive-scheduler.rescale-trigger.max-delay": _seconds(c.adaptive_max_delay_s),
            "jobmanager.adaptive-scheduler.submission.resource-stabilization-timeout":
                _seconds(c.adaptive_submission_stabilization_s),
            "jobmanager.adaptive-scheduler.submission.resource-wait-timeout":
                _seconds(c.adaptive_submission_wait_s),
            "metrics.reporter.prom.factory.class": PROMETHEUS_REPORTER,
            "metrics.reporter.prom.port": p.reporter_range,
            "state.backend.type": c.state_backend,
            "execution.checkpointing.interval": _seconds(c.checkpoint_interval_s),
            "execution.checkpointing.dir": (self.dir / "checkpoints").as_uri(),
            "execution.checkpointing.savepoint-dir": (self.dir / "savepoints").as_uri(),
            "execution.checkpointing.num-retained": 2,
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": c.restart_attempts,
            "restart-strategy.fixed-delay.delay": _seconds(c.restart_delay_s),
            # notice a dead task manager in seconds, not the default 50 s
            "heartbeat.interval": 2000,
            "heartbeat.timeout": int(c.heartbeat_timeout_s * 1000),
            # GET /jobs/:id is served from a cache kept this long (default 3 s): the rescaler polls every
            # 0.25 s to measure downtime, and a shorter outage would fall between two cached snapshots
            "web.refresh-interval": "100ms",
            "io.tmp.dirs": str(self.dir / "tmp"),
            "web.upload.dir": str(self.dir / "uploads"),
            "web.submit.enable": True,
            "web.cancel.enable": True,
        }
        if c.probe_reporter:  # each process gets its own port below; the range keeps one without it off 9249
            s["metrics.reporter.probe.factory.class"] = PROMETHEUS_REPORTER
            s["metrics.reporter.probe.port"] = p.probe_range
            s["metrics.reporter.probe.filter.includes"] = list(PROBE_METRICS)
        java_opts = self._distribution_java_opts(inst) if inst else ""
        if java_opts:
            s["env.java.opts.all"] = java_opts
        return s

    @staticmethod
    def _distribution_java_opts(inst: Installation) -> str:
        """Keep the distribution's --add-opens list (Flink needs it on Java 17)."""
        try:
            dist = yaml.safe_load((inst.flink_home / "conf" / "config.yaml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            return ""
        opts = dist.get("env", {}).get("java", {}).get("opts", {}).get("all", "")
        return str(opts or dist.get("env.java.opts.all", ""))

    def write_config(self, inst: Installation) -> None:
        src = inst.flink_home / "conf"
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            if f.is_file() and f.name != "config.yaml":
                shutil.copy(f, self.conf_dir / f.name)
        (self.conf_dir / "config.yaml").write_text(
            "# generated by harness.backends.local.flink\n" + yaml.safe_dump(self.settings(inst), sort_keys=True)
        )
        for d in ("checkpoints", "savepoints", "tmp", "uploads"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)

    # ---- processes ----------------------------------------------------------------------------
    # The distribution's scripts run BashJavaUtils twice per process start (two extra JVMs, seconds
    # of CPU each on a busy 2-core host). We run it once per config for each role, cache the JVM
    # memory flags and dynamic properties it derives, and start java directly with them: same
    # command line as `*.sh start-foreground`, a fraction of the start-up cost, and the pid is the JVM.
    ROLES = {
        "jobmanager": ("GET_JM_RESOURCE_PARAMS",
                       "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"),
        "taskmanager": ("GET_TM_RESOURCE_PARAMS", "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"),
    }

    def resource_params(self, inst: Installation) -> dict[str, tuple[list[str], list[str]]]:
        """role -> (JVM memory flags, dynamic -D properties), computed by Flink's BashJavaUtils and
        cached under flink/run keyed by the config's hash."""
        text = (self.conf_dir / "config.yaml").read_text()
        key = hashlib.sha256(text.encode()).hexdigest()[:16]
        cache = self.dir / "run" / f"resource-params-{key}.json"
        if cache.exists():
            data = json.loads(cache.read_text())
            return {r: (v[0], v[1]) for r, v in data.items()}
        cp = f"{inst.flink_home / 'bin' / 'bash-java-utils.jar'}:{self._dist_jar(inst)}"
        procs = {
            role: subprocess.Popen(
                [str(inst.java), "-classpath", cp, "org.apache.flink.runtime.util.bash.BashJavaUtils", cmd,
                 "--configDir", str(self.conf_dir)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for role, (cmd, _) in self.ROLES.items()
        }
        out: dict[str, tuple[list[str], list[str]]] = {}
        for role, proc in procs.items():
            text_out, _ = proc.communicate(timeout=300)
            lines = [ln.removeprefix("BASH_JAVA_UTILS_EXEC_RESULT:") for ln in text_out.splitlines()
                     if ln.startswith("BASH_JAVA_UTILS_EXEC_RESULT:")]
            if proc.returncode != 0 or len(lines) != 2:
                tail = "\n".join(text_out.strip().splitlines()[-10:])
                raise StackError("flink", f"cannot derive {role} memory settings (check the memory "
                                          f"options in LocalConfig):\n{tail}")
            out[role] = (lines[0].split(), lines[1].split())
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(out))
        return out

    @staticmethod
    def _dist_jar(inst: Installation) -> Path:
        jars = sorted((inst.flink_home / "lib").glob("flink-dist*.jar"))
        if len(jars) != 1:
            raise StackError("flink", f"expected one flink-dist jar in {inst.flink_home / 'lib'}, found {len(jars)}")
        return jars[0]

    def classpath(self, inst: Installation) -> str:
        """lib/*.jar sorted, flink-dist last (as the distribution's config.sh builds it)."""
        dist = self._dist_jar(inst)
        jars = sorted(p for p in (inst.flink_home / "lib").glob("*.jar") if p != dist)
        return ":".join(str(p) for p in [*jars, dist])

    def scratch_dir(self, name: str) -> Path:
        """The process' own scratch directory (removed when it stops)."""
        return self.dir / "tmp" / name

    def remove_scratch(self, name: str) -> None:
        shutil.rmtree(self.scratch_dir(name), ignore_errors=True)

    def _jit_flags(self) -> list[str]:
        return ["-XX:TieredStopAtLevel=1"] if self.cfg.taskmanager_jit is TaskManagerJit.C1 else []

    def java_command(
        self, inst: Installation, role: str, log_file: Path, dynamic: list[str], scratch: Path | None = None,
    ) -> tuple[list[str], CdsPlan]:
        """The JVM command of one process and its class-data-sharing plan (see cds.py)."""
        jvm, props = self.resource_params(inst)[role]
        main = self.ROLES[role][1]
        opts = self._distribution_java_opts(inst).split()
        tm_flags = ["-XX:+UseG1GC", *self._jit_flags()] if role == "taskmanager" else []
        log = self.conf_dir / "log4j-console.properties"
        cp = self.classpath(inst)
        plan = self.cds.plan(inst.java, f"flink-{role}", cp, [*tm_flags, *jvm, *opts])
        tmp: list[str] = []
        if scratch is not None:
            scratch.mkdir(parents=True, exist_ok=True)
            tmp = [f"-Djava.io.tmpdir={scratch}"]
            dynamic = [*dynamic, "-D", f"io.tmp.dirs={scratch}"]
        return [
            str(inst.java), *plan.flags, *tm_flags, *jvm, *opts, *tmp,
            "-Dconsole.log.level=OFF",  # stdout goes to a file already; keep one copy of the log
            f"-Dlog.file={log_file}",
            f"-Dlog4j.configuration=file:{log}", f"-Dlog4j.configurationFile=file:{log}",
            f"-Dlogback.configurationFile=file:{self.conf_dir / 'logback-console.xml'}",
            "-classpath", cp, main,
            "--configDir", str(self.conf_dir), *props, *dynamic,
        ], plan

    def _env(self, inst: Installation, log_dir: Path) -> dict[str, str]:
        return {
            "JAVA_HOME": str(inst.java_home),
            "FLINK_HOME": str(inst.flink_home),
            "FLINK_CONF_DIR": str(self.conf_dir),
            "FLINK_LIB_DIR": str(inst.flink_home / "lib"),
            "FLINK_PLUGINS_DIR": str(inst.flink_home / "plugins"),
            "FLINK_BIN_DIR": str(inst.flink_home / "bin"),
            "FLINK_OPT_DIR": str(inst.flink_home / "opt"),
            "FLINK_LOG_DIR": str(log_dir),
        }

    def reporter_port(self, index: int) -> int:
        """Job manager: first port of the range; task manager k: first + k (free ones only, and with the probe
        reporter, its port beside it free too)."""
        first, last = self.ports.reporter_first, self.ports.reporter_last
        taken = self.reporter_ports_in_use()
        for port in range(first + index, last + 1):
            if port not in taken and not port_in_use(port) and not (
                    self.cfg.probe_reporter and port_in_use(self.ports.probe_port(port))):
                return port
        raise StackError(f"ports {self.ports.reporter_range}", "no free Flink metrics reporter port left")

    def _reporter_properties(self, port: int) -> list[str]:
        """The dynamic properties that put a process' reporters on their ports (the job manager's probe is
        never read: it is there because the config names the probe for every process)."""
        props = ["-D", f"metrics.reporter.prom.port={port}"]
        if self.cfg.probe_reporter:
            props += ["-D", f"metrics.reporter.probe.port={self.ports.probe_port(port)}"]
        return props

    def reporter_ports_in_use(self) -> set[int]:
        ports = set()
        for name in self.sup.names():
            f = self.dir / "run" / f"{name}.reporter"
            if f.exists() and self.sup.alive(name):
                ports.add(int(f.read_text()))
        return ports

    def reporter_port_of(self, name: str) -> int | None:
        f = self.dir / "run" / f"{name}.reporter"
        return int(f.read_text()) if f.exists() else None

    def probe_port_of(self, name: str) -> int | None:
        """The probe reporter's port of a process, as it was started (None: started without one, or no such
        process): a stack already running when `probe_reporter` was set has none."""
        f = self.dir / "run" / f"{name}.probe"
        return int(f.read_text()) if f.exists() else None

    def _remember_reporter(self, name: str, port: int) -> None:
        f = self.dir / "run" / f"{name}.reporter"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(str(port))
        probe = self.dir / "run" / f"{name}.probe"
        if self.cfg.probe_reporter and self._config_has_probe():
            probe.write_text(str(self.ports.probe_port(port)))
        else:
            probe.unlink(missing_ok=True)

    def _config_has_probe(self) -> bool:
        """Whether the config the processes read names the probe reporter (a job manager left running from before
        the setting keeps the config it was started with, and a task manager reads the same file)."""
        conf = self.conf_dir / "config.yaml"
        try:
            return "metrics.reporter.probe.factory.class" in (yaml.safe_load(conf.read_text()) or {})
        except (OSError, yaml.YAMLError):
            return False

    def start_jobmanager(self, inst: Installation) -> None:
        if self.sup.alive(JOBMANAGER):
            return
        self.write_config(inst)
        port = self.reporter_port(0)
        self._remember_reporter(JOBMANAGER, port)
        log_dir = self.dir / "log" / JOBMANAGER
        self.remove_scratch(JOBMANAGER)  # a job manager that died left its scratch behind
        cmd, plan = self.java_command(inst, "jobmanager", log_dir / "jobmanager.log",
                                      self._reporter_properties(port), self.scratch_dir(JOBMANAGER))
        info = self.sup.start(JOBMANAGER, cmd, log_dir / "stdout.log", env=self._env(inst, log_dir))
        self.cds.attach(plan, info.pid)

    def next_taskmanager_id(self) -> str:
        """Monotonic ids (tm-1, tm-2, ...): a restarted stack never reuses a live or recent id."""
        counter = self.dir / "run" / "tm-counter"
        counter.parent.mkdir(parents=True, exist_ok=True)
        n = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(n))
        return f"{TM_PREFIX}{n}"

    def start_taskmanager(self, inst: Installation, tm_id: str, cgroup_procs: Path | None) -> None:
        index = int(tm_id.removeprefix(TM_PREFIX))
        port = self.reporter_port(1 + (index - 1) % (self.ports.reporter_last - self.ports.reporter_first))
        self._remember_reporter(tm_id, port)
        log_dir = self.dir / "log" / tm_id
        cmd, plan = self.java_command(inst, "taskmanager", log_dir / "taskmanager.log",
                                      ["-D", f"taskmanager.resource-id={tm_id}", *self._reporter_properties(port)],
                                      self.scratch_dir(tm_id))
        info = self.sup.start(tm_id, cmd, log_dir / "stdout.log", env=self._env(inst, log_dir),
                              cgroup_procs=cgroup_procs)
        self.cds.attach(plan, info.pid)

    def stop_taskmanager(self, tm_id: str) -> None:
        self.sup.stop(tm_id)
        self._forget_reporter(tm_id)
        self.remove_scratch(tm_id)

    def stop_jobmanager(self) -> None:
        self.sup.stop(JOBMANAGER)
        self._forget_reporter(JOBMANAGER)
        self.remove_scratch(JOBMANAGER)

    def prune(self, keep_logs: int) -> None:
        """With no Flink process left: remove every scratch directory, the checkpoints and savepoints
        of the jobs (a session cluster without HA never restores them after a restart), and the log
        directories of all but the newest `keep_logs` task managers."""
        for sub in ("tmp", "checkpoints", "savepoints"):
            d = self.dir / sub
            if d.exists():
                for child in d.iterdir():
                    if child.is_dir():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
        self.prune_logs(keep_logs)

    def prune_logs(self, keep: int) -> None:
        """Keep the log directories of the `keep` newest task managers that are not running."""
        log_root = self.dir / "log"
        if not log_root.exists():
            return
        live = set(self.taskmanager_ids())
        old = sorted((d for d in log_root.glob(f"{TM_PREFIX}*") if d.is_dir() and d.name not in live
                      and d.name.removeprefix(TM_PREFIX).isdigit()),
                     key=lambda d: int(d.name.removeprefix(TM_PREFIX)))
        for d in old[:max(0, len(old) - keep)]:
            shutil.rmtree(d, ignore_errors=True)

    def _forget_reporter(self, name: str) -> None:
        """A stopped process' reporter ports (the full one's and the probe's) are free again."""
        for suffix in ("reporter", "probe"):
            (self.dir / "run" / f"{name}.{suffix}").unlink(missing_ok=True)

    def forget_reporters(self) -> None:
        for f in [*(self.dir / "run").glob("*.reporter"), *(self.dir / "run").glob("*.probe")]:
            f.unlink(missing_ok=True)

    def taskmanager_ids(self) -> list[str]:
        """Live task managers by id, in start order."""
        ids = [n for n in self.sup.names(TM_PREFIX) if self.sup.alive(n)]
        return sorted(ids, key=lambda n: int(n.removeprefix(TM_PREFIX)))
