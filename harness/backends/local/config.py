"""Typed knobs of the local stack (recorded in run.yaml).

Every version is pinned here so a run record names exactly what ran; every port is a
default plus `port_offset`, so several stacks (tests, engineers, CI) can share one host.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.vocabulary import TaskManagerJit


@dataclass(frozen=True)
class Ports:
    """The concrete ports of one stack (defaults + offset), all on 127.0.0.1."""

    kafka: int
    kafka_controller: int
    flink_rest: int
    flink_rpc: int
    prometheus: int
    reporter_first: int
    reporter_last: int
    probe_first: int  # the probe reporters' range (`LocalConfig.probe_reporter`), one port per process as above
    probe_last: int
    kafka_jmx: int
    generator_metrics: int

    @property
    def reporter_range(self) -> str:
        return f"{self.reporter_first}-{self.reporter_last}"

    @property
    def probe_range(self) -> str:
        return f"{self.probe_first}-{self.probe_last}"

    def probe_port(self, reporter_port: int) -> int:
        """The probe reporter's port beside a process' main reporter port: the same place in the probe range."""
        return self.probe_first + reporter_port - self.reporter_first

    def fixed(self) -> dict[str, int]:
        """The ports a service binds exactly (the reporter range is probed, not bound up front)."""
        return {
            "kafka": self.kafka,
            "kafka controller": self.kafka_controller,
            "flink rest": self.flink_rest,
            "flink rpc": self.flink_rpc,
            "prometheus": self.prometheus,
            "kafka jmx exporter": self.kafka_jmx,
        }


class LocalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workdir: Path = Field(Path(".bench"), description="where installs, data and logs live")
    install_dir: Path | None = Field(
        None, description="where downloaded jars go; default ~/.cache/autoscaler-bench (shared by all stacks)"
    )
    port_offset: int = Field(0, ge=0, le=20000, description="added to every default port")
    taskmanager_cpu_quota: float = Field(
        0.25, gt=0, le=64, description="CPUs each task manager may use (cgroup quota); capacity grows with TMs"
    )
    taskmanager_startup_cpu: float = Field(
        1.0, gt=0, le=64, description="CPU quota while a task manager JVM starts (dropped once registered)"
    )
    cpu_cgroups: Literal["auto", "required", "off"] = Field(
        "auto", description="bound each task manager with a CPU cgroup: auto = when the host allows it"
    )

    # pinned versions (Maven Central coordinates; Flink must match the pip-installed distribution)
    flink_version: str = Field("2.2.1", description="apache-flink + apache-flink-libraries (PyPI)")
    kafka_version: str = Field("4.1.1", description="org.apache.kafka:kafka_2.13")
    flink_kafka_connector_version: str = Field("5.0.0-2.2", description="org.apache.flink:flink-connector-kafka")
    jmx_exporter_version: str = Field("1.0.1", description="io.prometheus.jmx:jmx_prometheus_javaagent")

    # memory (a dozen task managers must fit on a laptop)
    jobmanager_memory: str = Field("1024m", description="jobmanager.memory.process.size")
    taskmanager_memory: str = Field("768m", description="taskmanager.memory.process.size")
    kafka_heap: str = Field("512m", description="Kafka broker -Xmx")

    # Flink behaviour
    checkpoint_interval_s: float = Field(10.0, gt=0, description="execution.checkpointing.interval")
    state_backend: str = Field("hashmap", pattern="^(hashmap|rocksdb)$")
    restart_attempts: int = Field(1000, ge=0, description="fixed-delay restart strategy attempts")
    restart_delay_s: float = Field(2.0, ge=0, description="fixed-delay restart strategy delay")
    heartbeat_timeout_s: float = Field(
        20.0, ge=5, description="heartbeat.timeout: how soon Flink declares a silent task manager lost (50 s)"
    )
    adaptive_cooldown_s: float = Field(
        1.0, ge=0, description="jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling (default 30 s)"
    )
    adaptive_stabilization_s: float = Field(
        1.0, ge=0, description="jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout (60 s)"
    )
    adaptive_max_delay_s: float = Field(
        1.0, ge=0, description="jobmanager.adaptive-scheduler.rescale-trigger.max-delay (default: checkpoints)"
    )
    adaptive_submission_stabilization_s: float = Field(
        2.0, ge=0, description="jobmanager.adaptive-scheduler.submission.resource-stabilization-timeout"
    )
    adaptive_submission_wait_s: float = Field(
        120.0, gt=0, description="jobmanager.adaptive-scheduler.submission.resource-wait-timeout"
    )

    taskmanager_jit: TaskManagerJit = Field(
        TaskManagerJit.C1,
        description="the task managers' JIT: c1 = C1 only, which reaches its steady state in seconds at a fraction "
                    "of a CPU, where C2 compiles for minutes on the quota; tiered = the JVM's default (C1 then C2)",
    )

    class_data_sharing: bool = Field(
        True, description="AppCDS archives for the JVMs: about half the start-up CPU (see cds.py)"
    )

    # disk: what a stack keeps (a long matrix must not fill the disk; `bench status` shows the sizes)
    kafka_retention_mb: int = Field(
        1024, ge=16, description="most a benchmark topic keeps during a run, MB over all its partitions (unread "
                                 "records beyond it are deleted); a run's topics are deleted when it ends"
    )
    kafka_segment_mb: int = Field(16, ge=1, description="Kafka log segment size, MB (retention deletes whole segments)")
    prometheus_retention_mb: int = Field(
        256, ge=16, description="Prometheus TSDB size bound, MB (each run's samples are also in its record)"
    )
    keep_logs: int = Field(16, ge=0, description="log directories of stopped task managers kept (the newest)")

    # supervision
    scrape_interval_s: float = Field(5.0, gt=0, description="Prometheus scrape interval")
    probe_reporter: bool = Field(
        False, description="a second Prometheus reporter on every Flink process, filtered to the few metrics "
                           "`bench calibrate` reads each second (`harness.backends.local.flink.PROBE_METRICS`): "
                           "a tenth of the full reporter's bytes, so the calibration's task managers bear little "
                           "more reading than Prometheus' own scrapes in any run")
    startup_timeout_s: float = Field(120.0, gt=0, description="how long `up` waits for a service to be healthy")

    def ports(self) -> Ports:
        o = self.port_offset
        return Ports(
            kafka=9092 + o,
            kafka_controller=9093 + o,
            flink_rest=8081 + o,
            flink_rpc=6123 + o,
            prometheus=9090 + o,
            reporter_first=9250 + o,
            reporter_last=9299 + o,
            # clear of every port of a stack 100 apart (the calibration's 7000 and its test's 7100)
            probe_first=9700 + o,
            probe_last=9749 + o,
            kafka_jmx=9404 + o,
            generator_metrics=9405 + o,
        )

    @property
    def install_root(self) -> Path:
        if self.install_dir is not None:
            return self.install_dir.expanduser().resolve()
        return Path("~/.cache/autoscaler-bench/install").expanduser()

    @property
    def cds_root(self) -> Path:
        """Class-data-sharing archives (per JDK, role and class path; shared like the installs)."""
        return self.install_root / "cds"

    @property
    def root(self) -> Path:
        """The work directory as an absolute path (processes outlive the caller's cwd)."""
        return self.workdir.expanduser().resolve()
