"""Fast checks of the local stack's parts that need no running service."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.backends.local.cgroups import CpuCgroups, quota_us
from harness.backends.local.config import LocalConfig
from harness.backends.local.errors import StackError
from harness.backends.local.flink import FlinkCluster
from harness.backends.local.install import find_java
from harness.backends.local.kafka import KafkaService
from harness.backends.local.prometheus import FlinkTarget, PrometheusService, file_sd
from harness.backends.local.supervisor import Supervisor, check_ports_free, port_in_use


def test_ports_are_defaults_plus_offset() -> None:
    p = LocalConfig(port_offset=3000).ports()
    assert (p.kafka, p.kafka_controller, p.flink_rest, p.flink_rpc, p.prometheus) == (
        12092, 12093, 11081, 9123, 12090)
    assert p.reporter_range == "12250-12299" and (p.kafka_jmx, p.generator_metrics) == (12404, 12405)


def test_a_port_in_use_is_named_in_the_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert port_in_use(port)
        with pytest.raises(StackError) as exc:
            check_ports_free({"flink rest": port})
    assert exc.value.piece == f"port {port}" and "flink rest" in exc.value.message
    assert not port_in_use(port)
    check_ports_free({"flink rest": port})


def test_missing_java_is_named(tmp_path: Path) -> None:
    with pytest.raises(StackError) as exc:
        find_java(tmp_path / "no-jdk")
    assert exc.value.piece == "java"


def test_quota_is_cpus_times_period_with_kernel_minimum() -> None:
    assert quota_us(0.25) == 25_000
    assert quota_us(1.5) == 150_000
    assert quota_us(0.001) == 1000
    with pytest.raises(ValueError):
        quota_us(0)


def _fake_v1(root: Path) -> Path:
    cpu = root / "cpu"
    cpu.mkdir(parents=True)
    (cpu / "cpu.cfs_quota_us").write_text("-1")
    return cpu


def test_cgroup_v1_groups_are_created_bounded_changed_and_removed(tmp_path: Path) -> None:
    cpu = _fake_v1(tmp_path)
    groups = CpuCgroups(Path("/work/a"), root=tmp_path)
    assert groups.version == 1 and groups.available
    g = groups.create("tm-1", 0.25)
    assert g.path.parent == cpu
    assert (g.path / "cpu.cfs_quota_us").read_text() == "25000"
    assert (g.path / "cpu.cfs_period_us").read_text() == "100000"
    g.set_cpus(0.5)
    assert g.cpus() == 0.5
    assert groups.names() == ["tm-1"]
    assert CpuCgroups(Path("/work/b"), root=tmp_path).names() == []  # another stack's groups differ
    for f in g.path.iterdir():  # a real cgroup dir empties itself; the fake one must be emptied
        f.unlink()
    groups.cleanup()
    assert not g.path.exists()


def test_cgroup_v2_uses_cpu_max(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids")
    (tmp_path / "cgroup.subtree_control").write_text("")
    groups = CpuCgroups(Path("/work/a"), root=tmp_path)
    assert groups.version == 2
    g = groups.create("tm-2", 0.3)
    assert (g.path / "cpu.max").read_text() == "30000 100000"
    assert g.cpus() == pytest.approx(0.3)


def test_no_cpu_controller_is_reported(tmp_path: Path) -> None:
    groups = CpuCgroups(Path("/work/a"), root=tmp_path)
    assert not groups.available
    with pytest.raises(StackError) as exc:
        groups.create("tm-1", 0.5)
    assert exc.value.piece == "cgroup"


def test_supervisor_starts_detached_and_stops_the_whole_group(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    # a parent that spawns a child in the same group: stopping must take both
    script = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
    info = sup.start("svc", [sys.executable, "-c", script], tmp_path / "svc.log")
    assert sup.alive("svc") and os.getpgid(info.pid) == info.pid
    assert sup.names() == ["svc"]
    with pytest.raises(StackError):
        sup.start("svc", ["sleep", "1"], tmp_path / "svc.log")
    sup.stop("svc", timeout=5)
    assert not sup.alive("svc") and sup.names() == []
    out = subprocess.run(["pgrep", "-g", str(info.pid)], capture_output=True, text=True)
    assert out.stdout.strip() == ""


def test_an_adopted_process_is_stopped_like_our_own(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)  # started by someone else
    try:
        info = sup.adopt("generator", proc.pid, tmp_path / "gen.log")
        assert sup.get("generator") == info and "generator" in sup.names()
        sup.stop_many(sup.names(), timeout=5)
        assert proc.wait(5) is not None and sup.names() == []
    finally:
        proc.kill()
    with pytest.raises(StackError):
        sup.adopt("gone", proc.pid, tmp_path / "gen.log")


def test_a_stale_pidfile_is_not_mistaken_for_a_live_process(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    (tmp_path / "run").mkdir()
    # our own pid, but a start time that is not ours: a recycled pid
    (tmp_path / "run" / "ghost.pid").write_text(
        json.dumps({"name": "ghost", "pid": os.getpid(), "start_ticks": 1, "log": ""}))
    assert sup.get("ghost") is None
    assert sup.names() == []


def test_kafka_config_is_kraft_on_loopback_with_offset_ports(tmp_path: Path) -> None:
    cfg = LocalConfig(workdir=tmp_path, port_offset=100)
    props = dict(
        line.split("=", 1) for line in KafkaService(cfg, Supervisor(tmp_path)).server_properties().splitlines()
        if "=" in line and not line.startswith("#"))
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9192,CONTROLLER://127.0.0.1:9193"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9193"
    assert props["log.dirs"].startswith(str(tmp_path))


def test_flink_config_has_one_slot_adaptive_scheduler_reporter_and_local_state(tmp_path: Path) -> None:
    cfg = LocalConfig(workdir=tmp_path, port_offset=7, adaptive_cooldown_s=2.5)
    s = FlinkCluster(cfg, Supervisor(tmp_path)).settings()
    assert s["taskmanager.numberOfTaskSlots"] == 1
    assert s["jobmanager.scheduler"] == "adaptive"
    assert s["jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling"] == "2500ms"
    assert s["metrics.reporter.prom.factory.class"].endswith("PrometheusReporterFactory")
    assert s["metrics.reporter.prom.port"] == "9257-9306"
    assert s["rest.port"] == 8088 and s["rest.bind-address"] == "127.0.0.1"
    assert s["execution.checkpointing.dir"] == (tmp_path / "flink" / "checkpoints").as_uri()
    assert s["execution.checkpointing.savepoint-dir"].startswith("file:")
    # every downtime poll sees the job as it is, not a cached job graph (Flink's default cache: 3 s)
    from harness.backends.local.rescale import POLL_S

    assert s["web.refresh-interval"].endswith("ms") and int(s["web.refresh-interval"][:-2]) < POLL_S * 1000


def test_the_probe_reporter_is_a_filtered_second_reporter_beside_each_full_one(tmp_path: Path) -> None:
    from harness.backends.local.flink import PROBE_METRICS

    plain = FlinkCluster(LocalConfig(workdir=tmp_path / "a", port_offset=7), Supervisor(tmp_path / "a"))
    assert not any(k.startswith("metrics.reporter.probe") for k in plain.settings())
    assert plain._reporter_properties(9257) == ["-D", "metrics.reporter.prom.port=9257"]
    flink = FlinkCluster(LocalConfig(workdir=tmp_path / "b", port_offset=7, probe_reporter=True),
                         Supervisor(tmp_path / "b"))
    s = flink.settings()
    assert s["metrics.reporter.probe.factory.class"] == s["metrics.reporter.prom.factory.class"]
    assert s["metrics.reporter.probe.filter.includes"] == list(PROBE_METRICS)
    assert s["metrics.reporter.probe.port"] == "9707-9756"  # a process without its own port stays in the range
    # the full reporter keeps every metric: Prometheus scrapes it as in any run
    assert "metrics.reporter.prom.filter.includes" not in s
    assert flink._reporter_properties(9258) == ["-D", "metrics.reporter.prom.port=9258",
                                                "-D", "metrics.reporter.probe.port=9708"]
    # a process started from a config that names the probe has one; from an older config (a job manager left
    # running from before the setting), none, and the recorder reads its full reporter
    flink.conf_dir.mkdir(parents=True)
    (flink.conf_dir / "config.yaml").write_text(yaml.safe_dump(plain.settings()))
    flink._remember_reporter("tm-3", 9260)
    assert flink.probe_port_of("tm-3") is None
    (flink.conf_dir / "config.yaml").write_text(yaml.safe_dump(s))
    flink._remember_reporter("tm-3", 9260)
    assert flink.probe_port_of("tm-3") == 9710 and flink.probe_port_of("tm-4") is None
    flink.stop_taskmanager("tm-3")
    assert flink.probe_port_of("tm-3") is None


def test_a_reporter_port_whose_probe_port_is_taken_is_skipped(tmp_path: Path) -> None:
    flink = FlinkCluster(LocalConfig(workdir=tmp_path, port_offset=12345, probe_reporter=True), Supervisor(tmp_path))
    first = flink.ports.reporter_first
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", flink.ports.probe_port(first + 1)))
        busy.listen()
        assert flink.reporter_port(1) == first + 2
    assert flink.reporter_port(1) == first + 1


def test_the_probe_range_is_clear_of_every_port_of_the_stacks_beside_it() -> None:
    """The calibration's stack (7000), its test's (7100) and the default one (0) run side by side."""
    def taken(o: int) -> set[int]:
        p = LocalConfig(port_offset=o).ports()
        return set(p.fixed().values()) | set(range(p.reporter_first, p.reporter_last + 1))

    for a in (0, 7000, 7100):
        probe = LocalConfig(port_offset=a).ports()
        probes = set(range(probe.probe_first, probe.probe_last + 1))
        assert len(probes) == probe.reporter_last - probe.reporter_first + 1
        for b in (0, 7000, 7100):
            assert not probes & taken(b), (a, b)
            other = LocalConfig(port_offset=b).ports()
            assert a == b or not probes & set(range(other.probe_first, other.probe_last + 1))


def test_prometheus_config_scrapes_every_5s_and_targets_follow_task_managers(tmp_path: Path) -> None:
    cfg = LocalConfig(workdir=tmp_path)
    p = PrometheusService(cfg, Supervisor(tmp_path))
    p.write_config()
    conf = yaml.safe_load((tmp_path / "prometheus" / "prometheus.yml").read_text())
    assert conf["global"]["scrape_interval"] == "5000ms"
    assert {c["job_name"] for c in conf["scrape_configs"]} == {"flink", "kafka", "generator"}
    assert json.loads(p.targets_file.read_text()) == []
    p.set_flink_targets([FlinkTarget("tm-2", 9252), FlinkTarget("jobmanager", 9250)])
    doc = json.loads(p.targets_file.read_text())
    assert doc == file_sd([FlinkTarget("jobmanager", 9250), FlinkTarget("tm-2", 9252)])
    assert doc[1] == {"targets": ["127.0.0.1:9252"], "labels": {"role": "taskmanager", "process": "tm-2"}}


def test_kafka_cluster_ids_never_look_like_options() -> None:
    from harness.backends.local.kafka import new_cluster_id

    ids = {new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
