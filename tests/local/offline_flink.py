"""A FlinkCluster whose JVM command can be built without an installation (unit tests of the command line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.backends.local.config import LocalConfig
from harness.backends.local.flink import FlinkCluster
from harness.backends.local.install import Installation
from harness.backends.local.supervisor import Supervisor


def offline_flink(cfg: LocalConfig, tmp: Path, monkeypatch: pytest.MonkeyPatch,
                  role: str = "taskmanager") -> tuple[FlinkCluster, Installation]:
    """The cluster with Flink's own resource computation and class path replaced by fixed values."""
    flink = FlinkCluster(cfg, Supervisor(tmp))
    monkeypatch.setattr(flink, "resource_params", lambda inst: {role: (["-Xmx1m"], ["-D", "x=1"])})
    monkeypatch.setattr(flink, "classpath", lambda inst: "cp")
    monkeypatch.setattr(flink, "_distribution_java_opts", lambda inst: "")
    return flink, Installation(java_home=tmp / "jdk", flink_home=tmp / "flink", kafka_libs=tmp / "kafka",
                               jmx_agent=tmp / "jmx.jar", prometheus_bin=tmp / "prometheus", versions={})
