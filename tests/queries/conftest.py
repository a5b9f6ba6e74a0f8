"""Fixtures shared by the integration tests of the queries: a real Kafka broker (the local stack's Kafka
service in its own work directory, ports offset by 1100) and the job jar."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PORT_OFFSET = 1100
WORKDIR = Path(tempfile.gettempdir()) / "bench-tests-queries-kafka"
PARTITIONS = 4


@pytest.fixture(scope="session")
def kafka() -> Iterator[str]:
    from harness.backends.local.config import LocalConfig
    from harness.backends.local.errors import StackError
    from harness.backends.local.stack import LocalStack
    from harness.backends.local.supervisor import port_open

    stack = LocalStack(LocalConfig.model_validate({"workdir": WORKDIR, "port_offset": PORT_OFFSET}))
    if not stack.sup.alive("kafka") and port_open(stack.ports.kafka):
        pytest.skip(f"port {stack.ports.kafka} is taken by another process")
    try:
        inst = stack.ensure_installed()
    except StackError as exc:
        pytest.skip(f"local stack cannot install Kafka here: {exc}")
    stack.kafka.start(inst)
    try:
        deadline = time.monotonic() + 180
        while not stack.kafka.healthy():
            if time.monotonic() > deadline:
                pytest.fail(f"Kafka not healthy after 180 s; see {stack.kafka.log_file()}")
            time.sleep(0.5)
        stack.ensure_topics(["bids", "persons", "auctions"], PARTITIONS)
        for topic in ("bids", "persons", "auctions"):
            wait_for_leaders(stack.kafka_bootstrap, topic)
        yield stack.kafka_bootstrap
    finally:
        stack.down(purge=True)  # the broker, its topics and its directory: the tests leave no trace


@pytest.fixture(scope="session")
def jar() -> Path:
    from harness.backends.local.jobjar import ensure_jar

    return ensure_jar()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tests-offsets", "enable.auto.commit": False})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    finally:
        c.close()


def wait_for_leaders(bootstrap: str, topic: str, timeout_s: float = 90.0) -> None:
    """New topics answer offset queries only once every partition has a leader."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            end_offsets(bootstrap, topic)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def consume(bootstrap: str, topic: str, start: dict[int, int]) -> list[tuple[int, str]]:
    """(Kafka timestamp ms, value) of every record after `start`, up to the current end offsets."""
    from confluent_kafka import Consumer, TopicPartition

    end = end_offsets(bootstrap, topic)
    want = sum(end[p] - start.get(p, 0) for p in end)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tests-read", "enable.auto.commit": False})
    out: list[tuple[int, str]] = []
    try:
        c.assign([TopicPartition(topic, p, start.get(p, 0)) for p in end])
        deadline = time.monotonic() + 60
        while len(out) < want and time.monotonic() < deadline:
            for m in c.consume(num_messages=10_000, timeout=1.0):
                value = m.value()
                if m.error() is None and value is not None:
                    out.append((m.timestamp()[1], value.decode()))
    finally:
        c.close()
    return out


