"""The real local stack: Kafka, Flink (job manager + task managers in CPU cgroups) and Prometheus.

Brings one stack up on port offset 3000 in a temporary work directory, checks each service does its
job, adds and removes a task manager, and finally checks that `down` leaves no process behind.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from harness.backends.local.config import LocalConfig
from harness.backends.local.stack import LocalStack
from harness.backends.local.supervisor import port_in_use

pytestmark = pytest.mark.integration

OFFSET = int(os.environ.get("BENCH_TEST_PORT_OFFSET", "3000"))


def eventually(check: Callable[[], bool], timeout: float = 60.0) -> bool:
    """Poll a condition (services converge asynchronously); True as soon as it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return check()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    workdir = tmp_path_factory.mktemp("stack")
    s = LocalStack(LocalConfig(workdir=workdir, port_offset=OFFSET, taskmanager_cpu_quota=0.3, startup_timeout_s=300))
    s.up(taskmanagers=2)
    try:
        yield s
    finally:
        s.down(purge=True)


def prom(stack: LocalStack, query: str) -> list[dict]:
    r = requests.get(stack.prometheus_url + "/api/v1/query", params={"query": query}, timeout=5)
    r.raise_for_status()
    return r.json()["data"]["result"]


def test_status_reports_every_service_healthy(stack: LocalStack) -> None:
    st = stack.status()
    names = [s.name for s in st.services]
    assert names[:2] == ["kafka", "jobmanager"] and names[-1] == "prometheus"
    assert len([n for n in names if n.startswith("tm-")]) == 2
    assert st.healthy, st
    assert all(s.pid and Path(f"/proc/{s.pid}").exists() for s in st.services)


def test_kafka_accepts_a_produced_record(stack: LocalStack) -> None:
    from confluent_kafka import Consumer, Producer

    topic = "probe-" + uuid.uuid4().hex[:6]
    stack.ensure_topics([topic], partitions=2)
    stack.ensure_topics([topic], partitions=3)  # grows, idempotent
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    producer.produce(topic, b"hello", key=b"k")
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": "probe"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        assert len(meta.partitions) == 3
        ends = [consumer.get_watermark_offsets(_tp(topic, p), timeout=10)[1] for p in meta.partitions]
        assert sum(ends) == 1
    finally:
        consumer.close()


def _tp(topic: str, partition: int):  # noqa: ANN202 - confluent_kafka type
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition)


def test_flink_lists_the_task_managers(stack: LocalStack) -> None:
    assert sorted(stack.rest.taskmanager_ids()) == sorted(stack.taskmanager_ids())
    overview = stack.rest.overview()
    assert overview is not None and overview["slots-total"] == 2


def test_prometheus_scrapes_flink_kafka_and_task_managers(stack: LocalStack) -> None:
    tms = set(stack.taskmanager_ids())

    def scraped() -> bool:
        up = {r["metric"].get("process") for r in prom(stack, 'up{job="flink"} == 1')}
        series = {r["metric"].get("process") for r in prom(stack, "flink_taskmanager_Status_JVM_CPU_Load")}
        kafka = prom(stack, 'up{job="kafka"} == 1')
        # the probe topic of the Kafka test: its messages-in counter is the produced input rate
        probe = [r for r in prom(stack, "kafka_topic_messages_in_total > 0")
                 if r["metric"].get("topic", "").startswith("probe-")]
        return tms <= up and tms <= series and "jobmanager" in up and bool(kafka) and bool(probe)

    assert eventually(scraped, 45), prom(stack, "up")


def test_each_task_manager_runs_in_its_own_cpu_cgroup(stack: LocalStack) -> None:
    if not stack.cgroups.available:
        pytest.skip(stack.cgroups.why_unavailable())
    groups = set()
    for tm in stack.taskmanager_ids():
        g = stack.cgroups.group(tm)
        assert stack.taskmanager_pid(tm) in g.pids()
        assert stack.taskmanager_cpu(tm) == pytest.approx(0.3)
        groups.add(g.path)
    assert len(groups) == 2
    tm = stack.taskmanager_ids()[0]
    stack.set_taskmanager_cpu(tm, 0.5)
    assert stack.taskmanager_cpu(tm) == pytest.approx(0.5)
    if stack.cgroups.version == 1:
        assert (stack.cgroups.group(tm).path / "cpu.cfs_quota_us").read_text().strip() == "50000"
    stack.set_taskmanager_cpu(tm, 0.3)


def test_adding_and_removing_a_task_manager(stack: LocalStack) -> None:
    before = stack.taskmanager_ids()
    tm = stack.start_taskmanager()
    assert tm not in before
    assert tm in stack.rest.taskmanager_ids()
    assert f'"{tm}"' in stack.prometheus.targets_file.read_text()
    if stack.cgroups.available:
        assert stack.taskmanager_cpu(tm) == pytest.approx(0.3)  # start-up boost dropped
    pid = stack.taskmanager_pid(tm)
    stack.stop_taskmanager(tm)
    assert stack.taskmanager_ids() == before
    assert pid is not None and not Path(f"/proc/{pid}").exists()
    assert eventually(lambda: tm not in stack.rest.taskmanager_ids(), 30)
    assert f'"{tm}"' not in stack.prometheus.targets_file.read_text()
    assert not stack.cgroups.group(tm).exists()


def test_up_again_keeps_the_running_processes(stack: LocalStack) -> None:
    before = {s.name: s.pid for s in stack.status().services}
    stack.up(taskmanagers=2)
    assert {s.name: s.pid for s in stack.status().services} == before


def test_tsdb_snapshot_lands_under_the_data_dir(stack: LocalStack) -> None:
    snap = stack.tsdb_snapshot()
    assert snap.is_dir() and snap.is_relative_to(stack.root)


def test_down_leaves_no_process_behind(stack: LocalStack) -> None:
    pids = [s.pid for s in stack.status().services if s.pid]
    assert len(pids) == 5
    stack.down()
    assert all(not Path(f"/proc/{p}").exists() for p in pids)
    marker = (str(stack.root) + "/").encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                assert marker not in (entry / "cmdline").read_bytes(), entry.name
            except OSError:
                continue
    assert stack.cgroups.names() == []
    ports = stack.ports
    for port in (ports.kafka, ports.flink_rest, ports.flink_rpc, ports.prometheus, ports.kafka_jmx):
        assert not port_in_use(port), port
    assert stack.status().running == []
